"""``dpopt predict`` and the model file as untrusted input: outputs never overwrite an input
nor stay half-written, every field prediction reads is checked, and a table that drifted
from training is said so (an independent fuzz of the command, session 40)."""

import json
import math
import os
import stat
import threading
import warnings

import numpy as np
import pandas as pd
import pytest

import dpopt
from _cli import run
from dpopt.api import modelio


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A table (a number, a text column of two levels, a 0/1 label) and its model file."""
    folder = tmp_path_factory.mktemp("predict")
    rng = np.random.default_rng(0)
    n = 1500
    age = rng.integers(18, 80, n)
    sex = rng.choice(["Male", "Female"], n)
    label = ((age > 45) ^ (sex == "Male")).astype(int)
    data = folder / "train.csv"
    pd.DataFrame({"age": age, "sex": sex, "y": label}).to_csv(data, index=False)
    model = folder / "model.json"
    assert dpopt.cli.main(["fit", str(data), "--loss", "logistic", "--epsilon", "4", "--seed",
                           "0", "--out", str(model)]) == 0
    return data, model


def _predict(capsys, *argv):
    return run(["predict", *argv], capsys)


def test_out_is_never_an_input(fitted, tmp_path, capsys):
    """--out named the data or the model: the command wrote over what it read."""
    data, model = fitted
    copy_data, copy_model = tmp_path / "d.csv", tmp_path / "m.json"
    copy_data.write_bytes(data.read_bytes())
    copy_model.write_bytes(model.read_bytes())
    for out, what in ((copy_data, "DATA"), (copy_model, "MODEL")):
        code, _, err = _predict(capsys, copy_model, copy_data, "--out", out)
        assert code == 2 and f"is the {what} this command reads" in err
    code, _, err = run(["fit", copy_data, "--loss", "logistic", "--epsilon", "1", "--out",
                        copy_data], capsys)
    assert code == 2 and "is the DATA this command reads" in err
    assert copy_data.read_bytes() == data.read_bytes()
    assert copy_model.read_bytes() == model.read_bytes()


def test_a_directory_of_parquet_files_is_one_table(fitted, tmp_path, capsys):
    """The estimators read a directory of Parquet files as one table; the CLI refused it as
    "not a readable compressed file". It now fits and predicts the same as on the one file
    that holds the same rows, and refuses an --out inside that directory (a later read would
    take the output for data)."""
    pytest.importorskip("pyarrow")
    data, _ = fitted
    frame = pd.read_csv(data)
    folder = tmp_path / "parts.parquet"
    folder.mkdir()
    for k, part in enumerate((frame.iloc[:700], frame.iloc[700:])):
        part.to_parquet(folder / f"part{k}.parquet")
    frame.to_parquet(tmp_path / "whole.parquet")
    models = []
    for source in (folder, tmp_path / "whole.parquet"):
        models.append(tmp_path / f"{source.stem}.json")
        code, _, err = run(["fit", source, "--loss", "logistic", "--epsilon", "4", "--seed", "0",
                            "--out", models[-1]], capsys)
        assert code == 0, err
    np.testing.assert_array_equal(*(modelio.load_model(m)["coef"] for m in models))
    code, out, err = _predict(capsys, models[0], folder, "--out", tmp_path / "p.csv")
    assert code == 0 and "n=1500" in out, err
    (folder / "sub").mkdir()
    for out in (folder / "p.csv", folder / "sub" / "p.csv"):  # pyarrow reads subfolders too
        code, _, err = _predict(capsys, models[0], folder, "--out", out)
        assert code == 2 and "in the directory of Parquet files" in err
    assert sorted(p.name for p in folder.iterdir()) == ["part0.parquet", "part1.parquet", "sub"]


def test_a_failed_write_leaves_no_file_and_names_out(fitted, tmp_path, capsys, monkeypatch):
    data, model = fitted
    code, _, err = _predict(capsys, model, data, "--out", f"{tmp_path}/nodir/")
    assert code == 2 and "is a directory" in err

    def full(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(modelio, "write_atomic", full)
    out = tmp_path / "p.csv"
    code, stdout, err = _predict(capsys, model, data, "--out", out)
    assert code == 2 and "--out: writing the predictions" in err and "Traceback" not in err
    assert not out.exists() and stdout == "" and os.listdir(tmp_path) == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes (POSIX)")
def test_a_pipe_is_written_in_place_not_replaced(fitted, tmp_path, capsys):
    """A rename over a pipe or a device (--out /dev/stdout) replaces it by a regular file."""
    data, model = fitted
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    got = []
    reader = threading.Thread(target=lambda: got.append(pipe.read_bytes()))
    reader.start()
    code, _, err = _predict(capsys, model, data, "--out", pipe)
    reader.join(timeout=60)
    assert code == 0, err
    assert stat.S_ISFIFO(os.stat(pipe).st_mode) and got[0].startswith(b"prediction,")
    assert b"dpopt predict" not in got[0] and "accuracy on the" in err  # the report: stderr


def test_out_follows_a_link_and_its_suffix(fitted, tmp_path, capsys):
    data, model = fitted
    target, link = tmp_path / "real.csv", tmp_path / "link.csv"
    target.write_text("old\n")
    link.symlink_to(target)
    assert _predict(capsys, model, data, "--out", link)[0] == 0
    assert link.is_symlink() and target.read_text().startswith("prediction,probability_0")
    expected = pd.read_csv(target)
    for name, read in (("p.parquet", pd.read_parquet), ("p.csv.gz", pd.read_csv),
                       ("p.tsv", lambda p: pd.read_csv(p, sep="\t"))):
        assert _predict(capsys, model, data, "--out", tmp_path / name)[0] == 0
        pd.testing.assert_frame_equal(read(tmp_path / name), expected)


EDITS = [  # (change to the model file, words of the error)
    ({"data": [1, 2]}, "data must be an object"),
    ({"loss": ["squared"]}, "is not one of"),
    ({"params": "x"}, "params must be an object"),
    ({"target_range": [1, 2, 3]}, "target_range must be two finite numbers"),
    ({"target_range": [2.0, 1.0]}, "target_range must be two finite numbers"),
    ({"coef": [True, True, True]}, "coef and intercept must be numbers"),
    ({"classes": [1, 1]}, "classes must be distinct labels"),
    ({"classes": [[0], [1]]}, "classes must be distinct labels"),
    (lambda m: {"feature_map": {**m["feature_map"], "lower": [math.nan] + m["feature_map"][
        "lower"][1:]}}, "finite bounds"),
    (lambda m: {"feature_map": {**m["feature_map"], "lower": m["feature_map"]["upper"],
                                "upper": m["feature_map"]["lower"]}},
     "lower bound above its upper bound"),
    ({"feature_map": {"type": "row-normalize", "columns": [99]}}, "distinct feature indices"),
]


@pytest.mark.parametrize("change, words", EDITS)
def test_an_edited_model_file_is_refused_naming_the_field(fitted, tmp_path, capsys, change, words):
    data, model = fitted
    written = json.loads(model.read_text())
    edited = {**written, **(change(written) if callable(change) else change)}
    path, out = tmp_path / "edited.json", tmp_path / "p.csv"
    path.write_text(json.dumps(edited))
    code, _, err = _predict(capsys, path, data, "--out", out)
    assert code == 2 and words in err and "Traceback" not in err, err
    assert not out.exists()


@pytest.mark.parametrize("where, value, words", [
    ("kinds", ["age"], "data.kinds must map"),
    ("target", ["y"], "data.target must be a column name"),
    ("levels", ["Male", "Male"], "data.table is not a table schema"),
    ("kind", "weird", "data.table is not a table schema"),
    ("buckets", None, "data.table encodes"),
])
def test_an_edited_data_field_is_refused(fitted, tmp_path, capsys, where, value, words):
    data, model = fitted
    edited = json.loads(model.read_text())
    columns = edited["data"]["table"]["columns"]
    sex = next(c for c in columns if c["name"] == "sex")
    if where in ("kinds", "target"):
        edited["data"][where] = value
    elif where == "buckets":  # one column fewer than the coefficients
        edited["data"]["table"]["columns"] = [c for c in columns if c["name"] != "age"]
    else:
        sex[where] = value
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(edited))
    code, _, err = _predict(capsys, path, data, "--out", tmp_path / "p.csv")
    assert code == 2 and words in err and "Traceback" not in err, err


def test_unreadable_model_files_are_named(fitted, tmp_path, capsys):
    data, _ = fitted
    for name, content in (("binary.json", b"\xff\xfe{}"), ("deep.json", b"[" * 100_000),
                          ("digits.json", b"[" + b"9" * 5000 + b"]")):
        (tmp_path / name).write_bytes(content)
        code, _, err = _predict(capsys, tmp_path / name, data, "--out", tmp_path / "p.csv")
        assert code == 2 and f"model '{tmp_path / name}': cannot read" in err, err


def test_a_column_written_otherwise_than_in_training_is_noted(fitted, tmp_path, capsys):
    """Lower-case levels or labels counted every row outside the levels, silently."""
    data, model = fitted
    df = pd.read_csv(data)
    lower = tmp_path / "lower.csv"
    df.assign(sex=df["sex"].str.lower()).to_csv(lower, index=False)
    code, _, err = _predict(capsys, model, lower, "--out", tmp_path / "p.csv")
    assert code == 0 and "column(s) ['sex'] hold none of the model's levels" in err
    words = tmp_path / "words.csv"
    df.assign(y=np.where(df["y"] == 1, "yes", "no")).to_csv(words, index=False)
    code, out, _ = _predict(capsys, model, words, "--out", tmp_path / "p.csv")
    assert code == 0 and "no row's target is one of the model's labels ['0', '1']" in out
    code, _, err = _predict(capsys, model, data, "--out", tmp_path / "p.csv")
    assert code == 0 and "hold none" not in err


def test_the_api_warns_of_a_categorical_column_holding_no_level():
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"c": rng.choice(["a", "b"], 2000), "x": rng.normal(size=2000)})
    y = np.where(X["c"] == "a", 1.0, 0.0) + X["x"]
    est = dpopt.DPLinearRegression(epsilon=4.0, random_state=0).fit(X, y)
    with pytest.warns(dpopt.ImputedValueWarning, match=r"\['c'\] hold none of the model's"):
        est.predict(X.assign(c=X["c"].str.upper()))


def test_predictions_by_blocks_of_rows_equal_the_whole_and_warn_once(fitted, tmp_path,
                                                                    monkeypatch):
    """Prediction encodes a table a block of rows at a time (the dense design of a large
    table, and its copies, held memory in proportion to n): the same predictions, from the
    estimator and the model file, and each warning once for the whole table; a column that
    matches no level in some blocks but does in another is not warned about."""
    from dpopt.preprocessing import table_encoder

    data, model = fitted
    df = pd.read_csv(data)
    est = dpopt.DPLogisticRegression(epsilon=4.0, random_state=0).fit(df.drop(columns="y"),
                                                                      df["y"])
    loaded = modelio.load_model(model)
    whole = est.predict_proba(df), modelio.margins(loaded, df)
    test = df.assign(age=df["age"].astype(float), sex=df["sex"].str.lower())
    test.loc[1400:, "sex"] = df["sex"]  # the last block's values are levels
    test.loc[:10, "age"] = np.nan  # no indicator for age's missing cells
    monkeypatch.setattr(table_encoder, "PREDICTION_BLOCK_BYTES", 8 * 3 * 100)  # 100 rows
    np.testing.assert_allclose(est.predict_proba(df), whole[0], rtol=1e-12)
    np.testing.assert_allclose(modelio.margins(loaded, df), whole[1], rtol=1e-12)
    for predict in (est.predict, lambda X: modelio.predict(loaded, X)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            predict(test)
        said = [str(w.message) for w in caught if w.category is dpopt.ImputedValueWarning]
        assert len(said) == 1 and "['age'] hold missing values" in said[0], said
        with pytest.warns(dpopt.ImputedValueWarning, match=r"\['sex'\] hold none") as caught:
            predict(test.head(1400))
        assert sum("hold none" in str(w.message) for w in caught) == 1


def test_scores_need_rows_with_a_target(fitted, tmp_path, capsys):
    data, model = fitted
    df = pd.read_csv(data)
    one, empty = tmp_path / "one.csv", tmp_path / "empty.csv"
    df.head(1).to_csv(one, index=False)
    df.assign(y="").to_csv(empty, index=False)
    code, out, err = _predict(capsys, model, one, "--out", tmp_path / "p.csv")
    assert code == 0 and "accuracy on the 1 rows" in out and "Warning" not in err
    code, out, err = _predict(capsys, model, empty, "--out", tmp_path / "p.csv")
    assert code == 0 and "accuracy: no row has a target" in out and "Warning" not in err


def test_a_regression_score_needs_two_rows(tmp_path, capsys):
    rng = np.random.default_rng(2)
    data = tmp_path / "r.csv"
    x = rng.normal(size=1500)
    pd.DataFrame({"x": x, "y": 2 * x + rng.normal(size=1500)}).to_csv(data, index=False)
    model = tmp_path / "r.json"
    assert run(["fit", data, "--loss", "squared", "--epsilon", "4", "--out", model],
               capsys)[0] == 0
    pd.read_csv(data).head(1).to_csv(tmp_path / "one.csv", index=False)
    code, out, err = _predict(capsys, model, tmp_path / "one.csv", "--out", tmp_path / "p.csv")
    assert code == 0 and "R^2: needs two rows with a target, the file has 1" in out
    assert "UndefinedMetricWarning" not in err


def test_the_file_must_match_the_models_kind_of_data(fitted, tmp_path, capsys):
    """A table model applied to a numeric file skipped its schema; a numeric model on a CSV
    with an empty cell predicted nothing for that row."""
    data, model = fitted
    np.savez(tmp_path / "x.npz", X=np.zeros((3, 3)), y=np.zeros(3))
    code, _, err = _predict(capsys, model, tmp_path / "x.npz", "--out", tmp_path / "p.csv")
    assert code == 2 and "the model was fitted on a table" in err
    rng = np.random.default_rng(3)
    np.savez(tmp_path / "n.npz", X=rng.normal(size=(1000, 2)), y=rng.integers(0, 2, 1000))
    numeric = tmp_path / "n.json"
    assert run(["fit", tmp_path / "n.npz", "--loss", "logistic", "--epsilon", "2", "--out",
                numeric], capsys)[0] == 0
    (tmp_path / "gap.csv").write_text("x0,x1\n1.0,\n0.5,0.5\n")
    code, _, err = _predict(capsys, numeric, tmp_path / "gap.csv", "--out", tmp_path / "p.csv")
    assert code == 2 and "NaN" in err and not (tmp_path / "p.csv").exists()


def test_arguments_that_name_the_wrong_thing(fitted, tmp_path, capsys):
    data, model = fitted
    code, _, err = _predict(capsys, model, data, "--target", "age", "--out", tmp_path / "p.csv")
    assert code == 2 and "--target 'age' is one of the model's features" in err
    (tmp_path / "d.xlsx").write_text("x")
    code, _, err = _predict(capsys, model, tmp_path / "d.xlsx", "--out", tmp_path / "p.csv")
    assert code == 2 and ".parquet" in err and ".npz" in err
    semi = tmp_path / "semi.csv"
    pd.read_csv(data).head(20).to_csv(semi, sep=";", index=False)
    code, _, err = _predict(capsys, model, semi, "--out", tmp_path / "p.csv")
    assert code == 2 and "holding ';'" in err
    code, _, err = run(["fit", data, "--loss", "logistic", "--solver", "dp-gd", "--epsilon", "1"],
                       capsys)
    assert code == 2 and "--solver: column(s) ['sex'] hold text" in err
    assert "categories=" not in err


def test_an_explicit_solvers_leaks_are_in_the_model_file(fitted, tmp_path, capsys):
    """The report said NOT end-to-end private (classes_ read from y), the file said nothing."""
    data, _ = fitted
    df = pd.read_csv(data).drop(columns=["sex"])
    df.to_csv(tmp_path / "n.csv", index=False)
    out = tmp_path / "m.json"
    code, _, err = run(["fit", tmp_path / "n.csv", "--loss", "logistic", "--solver", "dp-gd",
                        "--option", "smoothness=0.25", "--epsilon", "1", "--out", out], capsys)
    assert code == 0, err
    leaks = json.loads(out.read_text())["privacy"]["leaks"]
    assert any("classes_ = np.unique(y)" in leak for leak in leaks)


def test_a_declared_text_column_reads_alike_from_csv_and_parquet(tmp_path, capsys):
    """An integer code column with a missing cell is float in Parquet: "10.0" matched no
    level "10" of a CSV fit, and a quarter of the predictions changed."""
    rng = np.random.default_rng(4)
    code = rng.choice([10, 20, 30], 2000).astype(float)
    code[:5] = np.nan
    y = (code == 20).astype(int)
    frame = pd.DataFrame({"code": code, "y": y})
    frame.to_csv(tmp_path / "t.csv", index=False, float_format="%.0f")
    frame.to_parquet(tmp_path / "t.parquet")
    model = tmp_path / "m.json"
    assert run(["fit", tmp_path / "t.csv", "--loss", "logistic", "--text", "code", "--epsilon",
                "4", "--seed", "0", "--out", model], capsys)[0] == 0
    predictions = []
    for name in ("t.csv", "t.parquet"):
        code_, _, err = _predict(capsys, model, tmp_path / name, "--out", tmp_path / "p.csv")
        assert code_ == 0 and "hold none" not in err, err
        predictions.append(pd.read_csv(tmp_path / "p.csv"))
    pd.testing.assert_frame_equal(*predictions)
