"""`dpopt fit` on real tables (strings, categories, missing values), the output path checked
before the fit, the help of every option, and the CLI start without heavy imports."""

import argparse
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

import dpopt
from _cli import run
from dpopt.api import modelio
from dpopt.cli.commands import build_parser, solver_catalog
from dpopt.cli.tables import read_table


def _write(path, header, rows):
    path.write_text("\n".join([header, *[",".join(map(str, r)) for r in rows]]) + "\n")
    return path


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """2000 rows: age (numeric), color (3 strings), income (numeric), an id (unique string
    per row), bought (yes / no)."""
    rng = np.random.default_rng(1)
    rows = []
    for i in range(2000):
        age, color = int(rng.integers(18, 80)), str(rng.choice(["red", "green", "blue"]))
        bought = "yes" if (age > 45) != (color == "red") else "no"
        rows.append([age, color, round(float(rng.normal(50, 10)), 2), f"id{i:05d}", bought])
    return _write(tmp_path_factory.mktemp("t") / "shop.csv", "age,color,income,client,bought",
                  rows), rows


def test_fit_chooses_categories_and_labels_privately_and_never_releases_ids(table, tmp_path,
                                                                            capsys):
    path, _ = table
    out = tmp_path / "model.json"
    code, stdout, err = run(["fit", path, "--loss", "logistic", "--positive-label", "yes",
                             "--epsilon", "1", "--seed", "3", "--out", out], capsys)
    assert code == 0, err
    assert "chosen privately" in stdout and "color: chosen privately: blue, green, red" in stdout
    assert "client: chosen privately: no level kept" in stdout
    assert "'no' -> -1, 'yes' -> +1" in stdout
    text = out.read_text()
    assert "id0" not in text  # no id is released, not even one
    model = modelio.load_model(out)
    assert model["classes"] == ["no", "yes"]
    levels = {c["name"]: c["levels"] for c in model["data"]["table"]["columns"]}
    assert levels["color"] == ["blue", "green", "red"] and levels["client"] == []
    assert "color_blue" in model["data"]["feature_names"]
    # the fit is the estimator's default path on the DataFrame with the same seed
    from dpopt.api.estimators import DPLogisticRegression
    from dpopt.cli.tables import read_table

    X, y, _, _ = read_table(path, target="bought")  # the CLI's reader (integer features as float)
    assert X["age"].dtype == np.float64 and list(X.columns) == ["age", "color", "income",
                                                                "client"]
    est = DPLogisticRegression(epsilon=1.0, random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)  # the default path leaks nothing
        est.fit(X, y)
    np.testing.assert_array_equal(model["coef"], est.coef_.ravel())
    assert model["privacy"]["epsilon"] <= 1.0
    # the other label as positive flips the classes and the margin
    code, stdout, _ = run(["fit", path, "--loss", "logistic", "--positive-label", "no",
                           "--epsilon", "1", "--seed", "3"], capsys)
    assert code == 0 and "'yes' -> -1, 'no' -> +1" in stdout


def test_predict_aligns_categories_and_scores(table, tmp_path, capsys):
    path, rows = table
    model = tmp_path / "m.json"
    code, _, err = run(["fit", path, "--loss", "logistic", "--epsilon", "2", "--seed", "0",
                        "--out", model], capsys)
    assert code == 0, err
    # a test file with its columns in another order and an unseen color
    test = [[r[3], r[2], "purple" if i % 10 == 0 else r[1], r[0], r[4]]
            for i, r in enumerate(rows[:300])]
    tpath = _write(tmp_path / "test.csv", "client,income,color,age,bought", test)
    pred = tmp_path / "pred.csv"
    code, out, err = run(["predict", model, tpath, "--out", pred], capsys)
    assert code == 0, err
    acc = float(out.split("accuracy on the 300 rows with a target: ")[1].split()[0])
    import pandas as pd

    p = pd.read_csv(pred)
    assert len(p) == 300 and set(p["prediction"]) <= {"no", "yes"}
    assert acc == pytest.approx(np.mean(p["prediction"].to_numpy() ==
                                        np.array([r[4] for r in test])), abs=1e-4)
    assert acc > 0.6
    # Parquet reads the same way
    df = pd.read_csv(tpath)
    df.to_parquet(tmp_path / "test.parquet")
    code, out2, err = run(["predict", model, tmp_path / "test.parquet", "--out", pred], capsys)
    assert code == 0, err and out2.split("accuracy")[1] == out.split("accuracy")[1]
    # a file lacking a training column is refused, naming it
    code, _, err = run(["predict", model, _write(tmp_path / "bad.csv", "age,bought",
                                                 [[30, "no"]]), "--out", pred], capsys)
    assert code == 2 and "color" in err
    # --out and --target are checked before anything is written
    for out_path, needle in ((tmp_path / "nodir" / "p.csv", "does not exist"),
                             (tmp_path, "is a directory")):
        code, _, err = run(["predict", model, tpath, "--out", out_path], capsys)
        assert code == 2 and "--out" in err and needle in err
    code, _, err = run(["predict", model, tpath, "--target", "zzz", "--out", pred], capsys)
    assert code == 2 and "--target 'zzz' is not a column" in err


def test_predict_checks_a_regression_target_before_writing(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = [[round(float(a), 3), round(float(2 * a + rng.normal()), 3)]
            for a in rng.standard_normal(1500)]
    path = _write(tmp_path / "r.csv", "a,t", rows)
    model, pred = tmp_path / "m.json", tmp_path / "p.csv"
    code, _, err = run(["fit", path, "--loss", "squared", "--epsilon", "1", "--seed", "0",
                        "--out", model], capsys)
    assert code == 0, err
    bad = _write(tmp_path / "bad.csv", "a,t", [[r[0], "abc"] for r in rows[:20]])
    code, _, err = run(["predict", model, bad, "--out", pred], capsys)
    assert code == 2 and "target 't': a regression model is scored on numbers" in err
    assert "abc" not in err  # where, not the records' values
    assert not pred.exists()  # nothing written half-way
    code, out, err = run(["predict", model, path, "--out", pred], capsys)
    assert code == 0 and "R^2 on the 1500 rows" in out and pred.exists()


def test_unreadable_table_error_names_the_path_not_the_bytes(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_bytes(b"a,b\n1,2\n\xffSECRET123,3\n")
    with pytest.raises(ValueError, match="bad.csv': not UTF-8 text") as info:
        read_table(path)
    assert "SECRET123" not in str(info.value) and info.value.__cause__ is None
    assert info.value.__context__ is None


def test_one_kept_label_fits_predicts_and_saves_that_label(tmp_path, capsys):
    """300 rows, a 20% label, epsilon = 0.25: the selection keeps one label; `dpopt fit`
    says so and writes the model of that label, and `dpopt predict` predicts it."""
    rng = np.random.default_rng(0)
    rows = [[round(float(rng.normal()), 3), "yes" if rng.random() < 0.2 else "no"]
            for _ in range(300)]
    path = _write(tmp_path / "few.csv", "x,bought", rows)
    model = tmp_path / "m.json"
    code, out, err = run(["fit", path, "--loss", "logistic", "--epsilon", "0.25", "--seed", "0",
                          "--out", model], capsys)
    assert code == 0, err
    assert "only 'no' was kept" in out and "no model" in out
    saved = json.loads(model.read_text())
    assert saved["classes"] == ["no"]
    for positive in ("no", "yes"):  # one kept label: nothing to flip (it was an IndexError)
        code, out, err = run(["fit", path, "--loss", "logistic", "--epsilon", "0.25", "--seed",
                              "0", "--positive-label", positive], capsys)
        assert code == 0, err
        assert ("not one of the labels" in out) == (positive == "yes")
    code, out, err = run(["predict", model, path, "--out", tmp_path / "p.csv"], capsys)
    assert code == 0, err
    rate = np.mean([r[1] == "no" for r in rows])
    assert f"accuracy on the 300 rows with a target: {rate:.4f}" in out
    import pandas as pd

    written = pd.read_csv(tmp_path / "p.csv")
    assert list(written.columns) == ["prediction", "probability_no"]
    assert (written["probability_no"] == 1.0).all()  # as predict_proba: a column of 1
    loaded = modelio.load_model(model)
    assert set(modelio.predict(loaded, np.array([[0.0], [5.0]]))) == {"no"}


def test_fit_numeric_positive_label_and_bad_label(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1000, 2))
    rows = [[f"{a:.3f}", f"{b:.3f}", 7 if a > 0 else 3] for a, b in X]
    path = _write(tmp_path / "n.csv", "a,b,label", rows)
    code, stdout, err = run(["fit", path, "--loss", "logistic", "--positive-label", "3",
                             "--epsilon", "1", "--seed", "0"], capsys)
    assert code == 0, err
    assert "7 -> -1, 3 -> +1" in stdout
    # the labels are chosen privately: a positive label the fit did not release is known
    # only after the budget is spent, so the model and its report are still written
    model = tmp_path / "m.json"
    code, stdout, err = run(["fit", path, "--loss", "logistic", "--positive-label", "5",
                             "--epsilon", "1", "--seed", "0", "--out", model], capsys)
    assert code == 0, err
    assert "warning: --positive-label 5 is not one of the labels the fit released" in stdout
    assert "privacy:" in stdout and json.loads(model.read_text())["classes"] == [3, 7]
    code, _, err = run(["fit", _write(tmp_path / "s.csv", "a,label", [[1, "x"], [2, "y"]]),
                        "--loss", "squared", "--epsilon", "1"], capsys)
    assert code == 2 and "needs a numeric target" in err


@pytest.mark.parametrize("empty_row", [None, 3, 1400])  # none, in the sniffed head, after it
def test_a_true_false_column_keeps_its_kind_whatever_one_cell_holds(tmp_path, capsys, empty_row):
    """pandas reads True/False cells as bool only when none is empty (else object, which
    the table layer would take as text): the model must not tell whether one record has an
    empty cell there, so the CLI reads such a column as nullable boolean either way."""
    rng = np.random.default_rng(0)
    rows = [[round(float(rng.normal()), 3), bool(rng.random() < 0.5)] for _ in range(1500)]
    rows = [[x, b, "yes" if x + b + rng.normal() > 0.5 else "no"] for x, b in rows]
    if empty_row is not None:
        rows[empty_row][1] = ""
    path = _write(tmp_path / "b.csv", "x,b,y", rows)
    X, _, _, _ = read_table(path, target="y")
    assert str(X["b"].dtype) == "boolean"
    model = tmp_path / "m.json"
    code, out, err = run(["fit", path, "--loss", "logistic", "--epsilon", "1", "--seed", "0",
                          "--out", model], capsys)
    assert code == 0, err
    assert "b: bool, 0/1" in out and "model: 2/2" in out


def _with_missing(tmp_path, table):
    _, rows = table
    rows = [list(r) for r in rows]
    rows[2][1] = ""      # row 3, column 2 (color)
    rows[6][0] = "NA"    # row 7, column 1 (age)
    return _write(tmp_path / "missing.csv", "age,color,income,client,bought", rows)


def test_missing_values_private_rule_error_and_drop(table, tmp_path, capsys):
    path = _with_missing(tmp_path, table)
    # auto (default): every row kept, the missing cells encoded by the private rule
    code, out, err = run(["fit", path, "--loss", "logistic", "--epsilon", "1", "--seed", "0"],
                         capsys)
    assert code == 0, err
    assert "n=2000" in out and "PrivacyLeakWarning" not in out
    code, out, err = run(["fit", path, "--loss", "logistic", "--epsilon", "1", "--missing",
                          "error"], capsys)
    assert code == 2 and out == ""
    assert "2 row(s) have missing values" in err and "['age', 'color']" in err
    # drop: rows 3 and 7 dropped, counted (which rows have a missing cell is private: not
    # named), and a PrivacyLeakWarning (n depends on the data), in the model file too
    model = tmp_path / "drop.json"
    code, out, err = run(["fit", path, "--loss", "logistic", "--epsilon", "1", "--missing", "drop",
                          "--seed", "0", "--out", str(model)], capsys)
    assert code == 0, err
    assert "n=1998" in out and "dropped 2 row(s) (--missing drop)\n" in out
    assert ": 3, 7" not in out
    assert "PrivacyLeakWarning: --missing drop" in out
    leaks = json.loads(model.read_text())["privacy"]["leaks"]
    assert any(leak.startswith("--missing drop removed 2 row(s)") for leak in leaks)


def test_output_path_is_checked_before_the_fit(table, tmp_path, capsys, monkeypatch):
    import dpopt.cli.fit as cli

    def no_fit(*args, **kwargs):
        raise AssertionError("the fit ran before the output path was checked")

    monkeypatch.setattr(cli, "_fit", no_fit)
    path, _ = table
    for out, needle in [(tmp_path / "nodir" / "m.json", "does not exist"),
                        (tmp_path, "is a directory")]:
        code, stdout, err = run(["fit", path, "--loss", "logistic", "--epsilon", "1", "--out",
                                 out], capsys)
        assert code == 2 and "--out" in err and needle in err and stdout == ""


def test_delta_warning_names_one_over_n(table, capsys):
    path, _ = table
    code, out, err = run(["fit", path, "--loss", "logistic", "--epsilon", "1", "--delta", "0.01",
                          "--seed", "0"], capsys)
    assert code == 0, err
    # (the Gaussian mechanisms get 0.9 delta: the labels' selection threshold takes the rest)
    assert "is larger than 1/n = 0.0005 (n=2000)" in out


@pytest.mark.parametrize("argv, needle", [
    (["--epsilon", "1e-9"], "epsilon=1e-09 is below 1e-06"),
    (["--epsilon", "1e300"], "above 100"),
    (["--epsilon", "1", "--delta", "1e-300"], "delta=1e-300 is below 1e-30"),
    (["--epsilon", "1", "--delta", "1"], "delta must be < 1"),
])
def test_fit_privacy_parameters_out_of_range(table, capsys, argv, needle):
    code, _, err = run(["fit", table[0], "--loss", "logistic", *argv], capsys)
    assert code == 2 and needle in err


def test_every_option_has_help_and_shows_its_default():
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        text = sub.format_help()
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            where = f"dpopt {name} {action.option_strings or action.dest}"
            assert action.help, f"{where}: no help text"
            if action.default not in (None, False) and not action.required:
                assert f"(default: {action.default})" in " ".join(text.split()), where
            elif action.option_strings and not action.required and action.default is None:
                # either a default or "give this or --other" (one of two is required)
                assert "default" in action.help or "give this or" in action.help, \
                    f"{where}: says nothing about its default"


def test_reproduce_list_and_audit_errors(capsys):
    code, out, _ = run(["reproduce", "--list"], capsys)
    assert code == 0 and "dp-cd" in out
    assert "--list" in run(["reproduce", "--help"], capsys)[1]
    code, out, err = run(["audit", "nosuch"], capsys)
    assert code == 2 and out == "" and "nosuch" in err
    assert "'reference'" not in err and "'dp-cd'" in err
    code, out, err = run(["reproduce"], capsys)
    assert code == 2 and "--list" in err


def test_solver_catalog_matches_the_registry():
    import dpopt

    assert solver_catalog() == [(n, dpopt.get_solver(n).description, dpopt.get_solver(n).private)
                                for n in dpopt.available_solvers()]


HEAVY = ("numba", "dp_accounting", "sklearn", "matplotlib", "scipy", "pandas", "dask")


@pytest.mark.parametrize("argv", [["--help"], ["solvers"], ["datasets"], ["fit", "--help"]])
def test_light_commands_import_no_heavy_module(argv):
    code = (f"import sys\nfrom dpopt.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} "
            f"or m in {HEAVY!r}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1].replace("'", '"')) == []
    if argv != ["datasets"]:  # listing datasets reads numpy's npz headers; the rest not even numpy
        assert "'numpy'" not in subprocess.run(
            [sys.executable, "-c", code.replace(repr(HEAVY), repr(("numpy",)))],
            capture_output=True, text=True, timeout=120).stdout


def test_absolute_loss_takes_the_default_path_and_train_metrics_use_the_released_model(
        tmp_path, capsys):
    """A loss without an estimator gets the same private default path (it used to run dp-cd
    on the raw columns, whose iterates overflowed); --train-metrics evaluates the released
    model (raw units, features through its feature map), not the solver's scaled vector."""
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 100, size=(3000, 2))
    y = 0.5 * X[:, 0] - 0.2 * X[:, 1] + 10 + rng.laplace(size=3000)
    path = _write(tmp_path / "lad.csv", "a,b,y", np.column_stack([X, y]).round(4).tolist())
    code, out, err = run(["fit", path, "--loss", "absolute", "--epsilon", "1", "--seed", "0",
                          "--train-metrics", "--out", tmp_path / "m.json"], capsys)
    assert code == 0, err
    assert "default path (solver='auto' -> dp-cd)" in out and "end to end" in out
    assert "PrivacyLeakWarning" not in out + err  # the default path reads nothing unpaid
    model = json.loads((tmp_path / "m.json").read_text())
    assert model["feature_map"] is not None
    objective = float(out.split("training objective F(w) = ")[1].split()[0])
    baseline = np.mean(np.abs(y - np.median(y)))
    assert objective < 0.5 * baseline
    code, out, err = run(["fit", path, "--loss", "absolute", "--epsilon", "inf"], capsys)
    assert code == 2 and "--epsilon inf" in err


def test_feature_bounds_option_is_passed_to_the_estimator(table, tmp_path, capsys):
    path, _ = table
    out = tmp_path / "fb.json"
    code, stdout, err = run(["fit", path, "--loss", "logistic", "--epsilon", "1", "--seed", "2",
                             "--feature-bounds", "age=17:90", "--feature-bounds", "income=0:100",
                             "--out", out], capsys)
    assert code == 0, err
    model = modelio.load_model(out)
    names = model["data"]["feature_names"]
    lower, upper = model["feature_map"]["lower"], model["feature_map"]["upper"]
    assert (lower[names.index("age")], upper[names.index("age")]) == (17.0, 90.0)
    assert (lower[names.index("income")], upper[names.index("income")]) == (0.0, 100.0)
    from dpopt.api.estimators import DPLogisticRegression
    from dpopt.cli.tables import read_table

    X, y, _, _ = read_table(path, target="bought")
    est = DPLogisticRegression(epsilon=1.0, random_state=2,
                               feature_bounds={"age": (17, 90), "income": (0, 100)}).fit(X, y)
    np.testing.assert_array_equal(model["coef"], est.coef_.ravel())


@pytest.mark.parametrize("given, needle", [
    (["--feature-bounds", "age=17"], "NAME=LO:HI"),
    (["--feature-bounds", "age=a:9"], "'age'"),
    (["--feature-bounds", "age=90:17"], "LO <= HI"),
    (["--feature-bounds", "agee=1:2"], "agee"),
    (["--feature-bounds", "color=0:1"], "color"),
    (["--feature-bounds", "age=1:2", "--feature-bounds", "age=3:4"], "twice"),
    (["--feature-bounds", "age=1:2", "--solver", "dp-cd"], "--solver"),
])
def test_feature_bounds_option_errors_name_the_column(table, capsys, given, needle):
    path, _ = table
    code, _, err = run(["fit", path, "--loss", "logistic", "--epsilon", "1", *given], capsys)
    assert code == 2 and needle in err, err
    assert "charged" not in err  # refused before any release (an unknown column was charged)


def test_target_bounds_option_is_passed_to_the_estimator(table, tmp_path, capsys):
    """--target-bounds LO:HI is the regressor's target_bounds=: the same model as the
    estimator's at the same seed, and no budget on the target's range."""
    path, _ = table
    out = tmp_path / "tb.json"
    code, stdout, err = run(["fit", path, "--target", "income", "--loss", "squared",
                             "--epsilon", "1", "--seed", "3", "--target-bounds", "0:100",
                             "--out", out], capsys)
    assert code == 0, err
    model = modelio.load_model(out)
    from dpopt.api.estimators import DPLinearRegression
    from dpopt.cli.tables import read_table

    X, y, _, _ = read_table(path, target="income")
    est = DPLinearRegression(epsilon=1.0, random_state=3, target_bounds=(0, 100)).fit(X, y)
    assert "target_bounds" not in est.auto_.plan["mu_shares"]
    np.testing.assert_array_equal(model["coef"], np.ravel(est.coef_))


@pytest.mark.parametrize("given, needle", [
    (["--target-bounds", "5"], "LO:HI"),
    (["--target-bounds", "9:1"], "LO < HI"),
    (["--target-bounds", "0:100", "--solver", "dp-cd"], "--solver"),
    (["--target-bounds", "0:1", "--loss", "logistic", "--target", "bought"], "regression"),
])
def test_target_bounds_option_errors(table, capsys, given, needle):
    path, _ = table
    base = ["fit", path, "--epsilon", "1"]
    if "--loss" not in given:
        base += ["--target", "income", "--loss", "squared"]
    code, _, err = run([*base, *given], capsys)
    assert code == 2 and needle in err, err


def test_fit_and_predict_three_classes(tmp_path, capsys):
    rng = np.random.default_rng(4)
    rows = []
    for _ in range(1500):
        k = int(rng.integers(3))
        rows.append([round(float(rng.normal((-2, 0, 2)[k])), 3),
                     round(float(rng.normal((0, 2, 0)[k])), 3), str(rng.choice(["a", "b"])),
                     ("cat", "dog", "eel")[k]])
    path = _write(tmp_path / "three.csv", "x1,x2,shade,kind", rows)
    out, pred = tmp_path / "m3.json", tmp_path / "p3.csv"
    code, stdout, err = run(["fit", path, "--loss", "logistic", "--epsilon", "2", "--seed", "1",
                             "--out", out], capsys)
    assert code == 0, err
    assert "'cat', 'dog', 'eel' (3 classes, one multinomial model)" in stdout
    model = modelio.load_model(out)
    assert model["classes"] == ["cat", "dog", "eel"] and model["coef"].shape == (3, 5)
    from dpopt.api.estimators import DPLogisticRegression
    from dpopt.cli.tables import read_table

    X, y, _, _ = read_table(path, target="kind")
    est = DPLogisticRegression(epsilon=2.0, random_state=1).fit(X, y)
    np.testing.assert_array_equal(model["coef"], est.coef_)
    code, stdout, err = run(["predict", out, path, "--out", pred], capsys)
    assert code == 0, err
    import pandas as pd

    p = pd.read_csv(pred)
    truth = np.array([r[3] for r in rows])
    acc = float(stdout.split("accuracy on the 1500 rows with a target: ")[1].split()[0])
    assert acc == pytest.approx(np.mean(p["prediction"].to_numpy() == truth), abs=1e-4)
    assert acc == pytest.approx(est.score(X, y), abs=1e-4) and acc > 0.6
    probs = p[["probability_cat", "probability_dog", "probability_eel"]].to_numpy()
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    np.testing.assert_allclose(probs, est.predict_proba(X), atol=1e-12)


def test_fit_inference_prints_and_saves_intervals_of_the_released_orientation(tmp_path, capsys):
    """--inference: the coefficient table is printed after the privacy report and written to
    the model file; a string column is coded against its reference level; with
    --positive-label naming the other class, the model and its intervals change sign together."""
    rng = np.random.default_rng(0)
    n = 6000
    city = rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2])
    age = rng.uniform(20, 60, n)
    score = 0.8 * (city == "b") - 0.5 * (city == "c") + 0.05 * (age - 40)
    bought = np.where(score + rng.logistic(size=n) > 0, "yes", "no")
    path = _write(tmp_path / "shop.csv", "city,age,bought", zip(city, age.round(2), bought))
    models = {}
    for label in ("yes", "no"):
        out = tmp_path / f"{label}.json"
        code, stdout, err = run(["fit", path, "--loss", "logistic", "--epsilon", "4",
                                 "--classes", "no,yes", "--positive-label", label,
                                 "--inference", "--seed", "0", "--out", out], capsys)
        assert code == 0, err
        assert "reference level 'a'" in stdout and "P>|z|" in stdout
        assert stdout.index("privacy:") < stdout.index("P>|z|")
        models[label] = modelio.load_model(out)
    yes, no = models["yes"]["inference"], models["no"]["inference"]
    assert yes["names"] == ["city_b", "city_c", "age", "intercept"]
    np.testing.assert_allclose(no["coef"], -np.array(yes["coef"]))
    np.testing.assert_allclose(no["lower"], -np.array(yes["upper"]))
    np.testing.assert_allclose(no["std_err"], yes["std_err"])
    truth = [0.8, -0.5, 0.05]  # contrasts with 'a', slope: within the 95% intervals' reach
    assert all(lo - 0.1 < t < hi + 0.1 for lo, hi, t in zip(yes["lower"], yes["upper"], truth))


@pytest.mark.parametrize("extra,needle", [
    (["--solver", "dp-gd"], "needs the default path"), (["--loss", "huber"], "default path"),
    (["--penalty", "l1", "--alpha", "0.1"], "default path"),
    (["--loss", "logistic", "--classes", "p,q,r"], "two classes")])
def test_fit_inference_refused_before_the_data_are_read(tmp_path, capsys, extra, needle):
    argv = ["fit", tmp_path / "absent.csv", "--loss", "squared", "--epsilon", "1",
            "--inference", *extra]
    code, _, err = run(argv, capsys)
    assert code == 2 and "--inference" in err and needle in err


def test_fit_inference_without_intervals_still_reports_and_saves_the_paid_model(tmp_path,
                                                                               capsys):
    """200 rows at epsilon 1: the default path releases the private mean of y, there are no
    intervals; the fit is paid for, so the report, a warning line and the model file are
    still given (the command stopped with an error and lost them)."""
    rng = np.random.default_rng(0)
    path = _write(tmp_path / "small.csv", "x,y", zip(rng.normal(size=200), rng.normal(size=200)))
    out = tmp_path / "m.json"
    code, stdout, err = run(["fit", path, "--target", "y", "--loss", "squared", "--epsilon", "1",
                             "--inference", "--out", out], capsys)
    assert code == 0, err
    assert "privacy:" in stdout and "warning: --inference: " in stdout and "no intervals" in stdout
    assert "inference" not in modelio.load_model(out)


def test_predict_writes_a_probability_column_named_by_each_of_two_classes(tmp_path, capsys):
    """Two classes: `probability_<class>` for each, in the order of `classes`, equal to the
    estimator's predict_proba (it was one column, "probability", of classes[1])."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((1500, 2))
    rows = [[f"{a:.3f}", f"{b:.3f}", "yes" if a + 0.5 * b + rng.logistic() > 0 else "no"]
            for a, b in X]
    path = _write(tmp_path / "two.csv", "a,b,bought", rows)
    out, pred = tmp_path / "m.json", tmp_path / "p.csv"
    code, _, err = run(["fit", path, "--loss", "logistic", "--epsilon", "2", "--seed", "1",
                        "--out", out], capsys)
    assert code == 0, err
    code, _, err = run(["predict", out, path, "--out", pred], capsys)
    assert code == 0, err
    import pandas as pd

    from dpopt.api.estimators import DPLogisticRegression
    from dpopt.cli.tables import read_table

    Xt, y, _, _ = read_table(path, target="bought")
    est = DPLogisticRegression(epsilon=2.0, random_state=1).fit(Xt, y)
    written = pd.read_csv(pred)
    assert list(written.columns) == ["prediction", "probability_no", "probability_yes"]
    np.testing.assert_allclose(written[["probability_no", "probability_yes"]].to_numpy(),
                               est.predict_proba(Xt), atol=1e-12)


def test_predict_takes_a_target_number_and_a_semicolon_file_gets_a_hint(table, tmp_path, capsys):
    """predict's --target took names only (dpopt fit takes numbers too); a file written with
    semicolons read as one column and the target error did not say why (session 36's fuzz)."""
    path, rows = table
    model, pred = tmp_path / "m.json", tmp_path / "pred.csv"
    code, _, err = run(["fit", path, "--loss", "logistic", "--epsilon", "2", "--seed", "0",
                        "--out", model], capsys)
    assert code == 0, err
    scores = []
    for target in ("bought", "5", "-1"):
        code, out, err = run(["predict", model, path, "--target", target, "--out", pred], capsys)
        assert code == 0, err
        scores.append(out.split("accuracy on the 2000 rows with a target: ")[1].split()[0])
    assert len(set(scores)) == 1
    code, _, err = run(["predict", model, path, "--target", "9", "--out", pred], capsys)
    assert code == 2 and "--target column number 9 is out of range" in err
    semi = tmp_path / "semi.csv"
    semi.write_text("age;color;bought\n" + "\n".join(f"{r[0]};{r[1]};{r[4]}" for r in rows[:50]))
    code, _, err = run(["fit", semi, "--loss", "logistic", "--epsilon", "1", "--target",
                        "bought"], capsys)
    assert code == 2 and "holding ';'" in err


def test_predict_says_an_imputed_column_once(table, tmp_path, capsys):
    """The margins and the predictions each encoded the file, so the ImputedValueWarning
    was printed twice, as a Python warning with its source path."""
    path, rows = table
    model = tmp_path / "m.json"
    code, _, err = run(["fit", path, "--loss", "logistic", "--epsilon", "2", "--seed", "0",
                        "--out", model], capsys)
    assert code == 0, err
    test = _write(tmp_path / "gaps.csv", "age,color,income,client,bought",
                  [[r[0], r[1], "" if i % 5 == 0 else r[2], r[3], r[4]]
                   for i, r in enumerate(rows[:100])])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing reaches Python's warning machinery
        code, _, err = run(["predict", model, test, "--out", tmp_path / "p.csv"], capsys)
    assert code == 0 and err.count("note (ImputedValueWarning)") == 1, err


def test_categories_declare_a_columns_public_levels(tmp_path, capsys):
    """The command line had no way to declare public levels: every text column's were
    selected privately (a rare level lost, a share of the budget paid). ``--categories
    NAME=A,B,...`` is ``categories=``: each level gets a column whatever its count, numbers
    for a column of numbers; refused before anything is spent when malformed."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    n = 2000
    size = rng.choice(["S", "M", "L"], n, p=[0.5, 0.495, 0.005])  # L: about 10 records
    grade = rng.choice([1, 2, 3], n)
    y = (size == "S") + 0.5 * grade + rng.standard_normal(n)
    data = tmp_path / "t.csv"
    pd.DataFrame({"size": size, "grade": grade, "y": y}).to_csv(data, index=False)
    model = tmp_path / "m.json"
    base = ["fit", data, "--loss", "squared", "--target", "y", "--epsilon", "1", "--seed", "0"]
    code, _, err = run([*base, "--categories", "size=S,M,L,XL", "--categories",
                        "grade=1,2,3", "--out", model], capsys)
    assert code == 0, err
    columns = {c["name"]: c for c in modelio.load_model(model)["data"]["table"]["columns"]}
    assert columns["size"]["kind"] == "declared"
    assert columns["size"]["levels"] == ["S", "M", "L", "XL"]
    assert columns["grade"]["kind"] == "declared" and len(columns["grade"]["levels"]) == 3
    code, out, err = run(["predict", model, data, "--out", tmp_path / "p.csv"], capsys)
    assert code == 0 and "hold none" not in err, err
    # with an explicit solver, declared text is the public schema it needs
    code, _, err = run([*base, "--solver", "dp-gd", "--categories", "size=S,M,L"], capsys)
    assert code == 0, err
    code, _, err = run([*base, "--solver", "dp-gd"], capsys)
    assert code == 2 and "--categories size=A,B" in err
    for bad, words in ((["--categories", "size"], "expected NAME=LEVEL"),
                       (["--categories", "size=S,,M"], "expected NAME=LEVEL"),
                       (["--categories", "colour=red"], "not feature columns"),
                       (["--categories", "grade=one,two"], "must be numbers"),
                       (["--categories", "size=S", "--categories", "size=M"], "given twice")):
        code, _, err = run([*base, *bad, "--out", tmp_path / "bad.json"], capsys)
        assert code == 2 and words in err, (bad, err)
        assert not (tmp_path / "bad.json").exists()
