"""The command line: fit round trip, plot, reproduce options, bad arguments."""

import json

import numpy as np
import pytest

from _cli import run
from dpopt.api import modelio
from dpopt.api.estimators import DPLogisticRegression


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3))
    y = (X[:, 0] - X[:, 2] + 0.3 * rng.standard_normal(300) > 0).astype(int)
    np.savetxt(d / "clf.csv", np.column_stack([y, X]), delimiter=",",
               header="label,a,b,c", comments="")
    np.savez(d / "reg.npz", X=X, y=X @ np.array([1.0, 0.0, -1.0]))
    from sklearn.datasets import dump_svmlight_file

    dump_svmlight_file(X, 2 * y - 1, str(d / "clf.svm"))
    import pandas as pd

    table = pd.DataFrame(X, columns=["a", "b", "c"]).assign(label=y)  # an integer target
    table[:200].to_csv(d / "int_labels.csv", index=False)
    table[200:].to_csv(d / "int_labels_test.csv", index=False)
    table[:200].assign(label=table.label[:200] + 0.0).to_csv(d / "float_labels.csv", index=False)
    table.assign(label=table.label == 1).to_csv(d / "bool_labels.csv", index=False)
    return d


def test_fit_round_trip(data_dir, tmp_path, capsys):
    out = tmp_path / "model.json"
    code, stdout, _ = run(["fit", str(data_dir / "clf.csv"), "--loss", "logistic", "--penalty",
                           "l2", "--alpha", "0.01", "--epsilon", "1", "--target", "label",
                           "--seed", "4", "--solver", "dp-cd", "--option", "passes=5", "--out",
                           str(out)], capsys)
    assert code == 0
    assert "replace-one" in stdout and "PrivacyLeakWarning" in stdout and str(out) in stdout
    model = modelio.load_model(out)
    assert model["privacy"]["epsilon"] <= 1.0 and model["privacy"]["accountant"] == "exact"
    assert model["privacy"]["mechanisms"][0]["type"] == "Gaussian"
    assert model["data"]["feature_names"] == ["a", "b", "c"] and model["classes"] == [0.0, 1.0]
    # the same fit through the estimator API gives the same model
    table = np.loadtxt(data_dir / "clf.csv", delimiter=",", skiprows=1)
    X, y = table[:, 1:], table[:, 0]
    est = DPLogisticRegression(solver="dp-cd", alpha=0.01, random_state=4, solver_options={"passes": 5})
    with pytest.warns(Warning):
        est.fit(X, y)
    np.testing.assert_array_equal(model["coef"], est.coef_.ravel())
    np.testing.assert_array_equal(modelio.predict(model, X), est.predict(X))


@pytest.mark.parametrize("name, extra", [
    ("reg.npz", ["--loss", "squared", "--penalty", "l1", "--alpha", "0.01", "--solver", "dp-cd",
                 "--option", "smoothness=[1, 1, 1, 1]"]),
    ("clf.svm", ["--loss", "logistic", "--solver", "dp-gd", "--option", "smoothness=1.0",
                 "--classes=-1,1"]),
])
def test_fit_reads_npz_and_libsvm(data_dir, tmp_path, capsys, name, extra):
    out = tmp_path / "m.json"
    code, stdout, err = run(["fit", str(data_dir / name), "--epsilon", "2", "--delta", "1e-6",
                             "--seed", "0", "--out", str(out), *extra], capsys)
    assert code == 0, err
    assert "PrivacyLeakWarning" not in stdout  # public smoothness given
    assert json.loads(out.read_text())["data"]["n_samples"] == 300


@pytest.mark.parametrize("argv, needle", [
    (["fit", "{d}/reg.npz", "--loss", "squared", "--epsilon", "-1"], "--epsilon"),
    (["fit", "{d}/reg.npz", "--loss", "squared", "--epsilon", "1", "--delta", "2"], "--delta"),
    (["fit", "{d}/reg.npz", "--loss", "squared", "--epsilon", "1", "--solver", "x"], "--solver"),
    (["fit", "{d}/reg.npz", "--loss", "cubic", "--epsilon", "1"], "--loss"),
    (["fit", "{d}/reg.npz", "--loss", "squared"], "--epsilon"),
    (["fit", "{d}/reg.npz", "--loss", "squared", "--epsilon", "1", "--option", "x"], "--option"),
    (["fit", "{d}/reg.npz", "--loss", "squared", "--epsilon", "1", "--option", "bogus=1"],
     "--option"),
    (["fit", "{d}/reg.npz", "--loss", "squared", "--epsilon", "1", "--solver", "dp-cd",
      "--option", "passes=0"], "--option passes"),
    (["fit", "{d}/reg.npz", "--loss", "squared", "--epsilon", "1", "--option", "passes=2"],
     "--option needs --solver"),
    (["fit", "{d}/reg.npz", "--loss", "squared", "--epsilon", "1", "--target", "a"],
     "--target"),
    (["fit", "{d}/missing.csv", "--loss", "squared", "--epsilon", "1"], "DATA"),
    (["fit", "{d}/reg.npz", "--loss", "logistic", "--epsilon", "1"], "DATA"),
    (["fit", "{d}/clf.csv", "--loss", "logistic", "--epsilon", "1", "--target", "label",
      "--classes", "0,1", "--positive-label", "7"], "--positive-label 7 is not one of the "
     "labels --classes declares, ['0', '1']"),  # as typed, not as the float column reads
    (["fit", "{d}/int_labels.csv", "--loss", "logistic", "--epsilon", "1", "--target",
      "label", "--classes", "0,0.5"], "--classes: the target column holds integers"),
    (["fit", "{d}/int_labels.csv", "--loss", "logistic", "--epsilon", "1", "--target",
      "label", "--classes", "1,1.0"], "--classes '1,1.0' gives a label twice"),
    (["fit", "{d}/bool_labels.csv", "--loss", "logistic", "--epsilon", "1", "--target",
      "label", "--classes", "yes,no"], "--classes: the target column holds True/False"),
    (["fit", "{d}/bool_labels.csv", "--loss", "logistic", "--epsilon", "1", "--target",
      "label", "--classes", "true,1"], "--classes 'true,1' gives a label twice"),
    (["fit", "{d}/int_labels.csv", "--loss", "squared", "--epsilon", "1", "--target",
      "label", "--classes", "0,1"], "--classes applies to --loss logistic"),
    (["fit", "{d}/int_labels.csv", "--loss", "huber", "--epsilon", "1", "--target",
      "label", "--positive-label", "1"], "--positive-label applies to --loss logistic"),
    (["plot", "{d}/missing.jsonl"], "RESULTS"),
    (["plot", "{d}/clf.csv", "--kind", "bogus"], "--kind"),
    (["reproduce", "anything", "--scheduler", "tcp://127.0.0.1:1"], "--scheduler"),
])
def test_bad_arguments_exit_2_naming_the_argument(data_dir, capsys, argv, needle):
    code, _, err = run([a.format(d=data_dir) for a in argv], capsys)
    assert code == 2
    assert needle in err


@pytest.mark.parametrize("given", ["False,True", "true,false", "0,1"])
def test_classes_of_a_true_false_target_are_read_as_bools(data_dir, tmp_path, capsys, given):
    """--classes on a True/False column was refused as text for a column of numbers; its
    labels are now read as bools (true/false or 1/0, in any case)."""
    out = tmp_path / "m.json"
    code, _, err = run(["fit", str(data_dir / "bool_labels.csv"), "--loss", "logistic",
                        "--target", "label", "--epsilon", "2", "--seed", "0", "--classes", given,
                        "--out", str(out)], capsys)
    assert code == 0, err
    first = given.split(",")[0].lower() in ("true", "1")
    assert json.loads(out.read_text())["classes"] == ([True, False] if first else [False, True])


@pytest.mark.parametrize("command", ["fit", "plot", "reproduce", "demo", "account"])
def test_help(capsys, command):
    code, out, _ = run([command, "--help"], capsys)
    assert code == 0 and "usage: dpopt " + command in out


def test_plot_renders_png_and_svg(tmp_path, capsys):
    from _runner_helpers import dpcd_run
    from dpopt.experiments.runner import ResultStore, run_grid

    configs = [{"solver": s, "epsilon": e, "seed": r, "dataset": "toy"}
               for s in ("dp-cd", "dp-gd") for e in (0.5, 5.0) for r in range(2)]
    store = ResultStore(tmp_path / "runs.jsonl")
    run_grid(configs, dpcd_run, store=store, backend="sequential", progress=False)
    code, out, err = run(["plot", str(store.path), "--out", str(tmp_path / "fig")], capsys)
    assert code == 0, err
    paths = sorted(p.name for p in (tmp_path / "fig").iterdir())
    assert paths == sorted(f"runs_{k}.{f}" for k in ("error_vs_passes", "error_vs_time",
                                                       "privacy_utility") for f in ("png", "svg"))
    assert (tmp_path / "fig" / "runs_error_vs_passes.png").read_bytes()[:4] == b"\x89PNG"
    assert "<svg" in (tmp_path / "fig" / "runs_privacy_utility.svg").read_text()
    # records without trajectories: the trajectory figures are skipped with a message
    flat = tmp_path / "flat.jsonl"
    flat.write_text("".join(json.dumps({"config": {"solver": "s", "epsilon": e},
                                        "rel_error": 1.0 / e}) + "\n" for e in (0.5, 1, 2)))
    code, out, err = run(["plot", str(flat), "--format", "png"], capsys)
    assert code == 0 and "skipped figure passes" in err
    assert out.strip().endswith("flat_privacy_utility.png")


def test_reproduce_on_a_dask_scheduler_then_plot(tmp_path, capsys, monkeypatch):
    distributed = pytest.importorskip("distributed")
    import dpopt.experiments as experiments
    from _runner_helpers import toy_experiment

    experiments.available_experiments()  # discover the registered ones first
    monkeypatch.setitem(experiments._EXPERIMENTS, "toy",
                        experiments.Experiment("toy", toy_experiment, "test experiment"))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        code, out, err = run(["reproduce", "toy", "--out", str(tmp_path), "--backend", "dask",
                              "--scheduler", cluster.scheduler_address, "--no-progress"], capsys)
    assert code == 0, err
    assert "runs: 4" in out
    code, out, err = run(["plot", str(tmp_path / "runs.jsonl"), "--kind", "epsilon"], capsys)
    assert code == 0 and (tmp_path / "runs_privacy_utility.svg").exists()


def test_fit_default_path_model_file_predicts_like_the_estimator(data_dir, tmp_path, capsys):
    """No --solver: the estimators' default path (private scaling included); the model file
    carries the feature map its coefficients need, so predictions match the estimator's."""
    out = tmp_path / "auto.json"
    code, stdout, err = run(["fit", str(data_dir / "clf.csv"), "--loss", "logistic",
                             "--epsilon", "1", "--target", "label", "--seed", "3", "--out",
                             str(out)], capsys)
    assert code == 0, err
    assert "end to end" in stdout and "PrivacyLeakWarning" not in stdout
    model = modelio.load_model(out)
    assert model["feature_map"] is not None
    import pandas as pd

    table = pd.read_csv(data_dir / "clf.csv")  # a table: the estimator's DataFrame path
    X, y = table.drop(columns=["label"]), table["label"]
    est = DPLogisticRegression(random_state=3).fit(X, y)
    np.testing.assert_allclose(model["coef"], est.coef_.ravel())
    np.testing.assert_array_equal(modelio.predict(model, X), est.predict(X))


def test_a_regression_model_file_clips_predictions_like_the_estimator(tmp_path, capsys):
    """The default path's regressor clips its predictions to target_range_; the model file
    carries that range, so `dpopt predict` (modelio.predict) gives the same numbers."""
    import pandas as pd

    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 3))
    y = 50 + 10 * (X @ np.array([1.0, -1.0, 0.5])) + 5 * rng.standard_normal(2000)
    table = pd.DataFrame(X, columns=["a", "b", "c"]).assign(y=y)
    path = tmp_path / "reg.csv"
    table.to_csv(path, index=False)
    out = tmp_path / "reg.json"
    code, _, err = run(["fit", str(path), "--loss", "squared", "--epsilon", "2", "--target",
                        "y", "--seed", "1", "--out", str(out)], capsys)
    assert code == 0, err
    model = modelio.load_model(out)
    from dpopt import DPLinearRegression

    est = DPLinearRegression(epsilon=2.0, random_state=1).fit(table[["a", "b", "c"]], y)
    assert model["target_range"] == list(est.target_range_)
    wide = table[["a", "b", "c"]] * 4  # predictions beyond the range
    pred, (lo, hi) = modelio.predict(model, wide), est.target_range_
    assert lo <= pred.min() and pred.max() <= hi and np.any((pred == lo) | (pred == hi))
    np.testing.assert_allclose(pred, est.predict(wide), rtol=1e-12)


def test_float_labels_score_an_integer_test_file(data_dir, tmp_path, capsys):
    """A model whose labels are 0.0 / 1.0 (a float training column) scored on a file whose
    column holds 0 / 1: predict compared the labels as text and printed accuracy 0."""
    ints, *_ = _fit_and_score(data_dir, tmp_path, capsys, [])
    floats, computed, classes, *_ = _fit_and_score(data_dir, tmp_path, capsys, [],
                                                   train="float_labels.csv")
    assert classes == [0.0, 1.0] and floats == pytest.approx(ints, abs=0.1) and floats > 0.7


def _fit_and_score(data_dir, tmp_path, capsys, declared, train="int_labels.csv"):
    """(accuracy predict prints, accuracy of the written predictions, model classes, fit's
    stdout, the prediction file's columns) of a logistic fit on int_labels.csv scored on
    int_labels_test.csv."""
    import pandas as pd

    model, pred = tmp_path / "m.json", tmp_path / "pred.csv"
    code, fit_out, err = run(["fit", str(data_dir / train), "--loss", "logistic",
                              "--epsilon", "4", "--target", "label", "--seed", "0", "--out",
                              str(model), *declared], capsys)
    assert code == 0, err
    test = data_dir / "int_labels_test.csv"
    code, out, err = run(["predict", str(model), str(test), "--out", str(pred)], capsys)
    assert code == 0, err
    printed = float(out.split("accuracy on the 100 rows with a target: ")[1].split()[0])
    written = pd.read_csv(pred)
    truth = pd.read_csv(test)["label"].to_numpy()
    return (printed, float(np.mean(written["prediction"].to_numpy() == truth)),
            modelio.load_model(model)["classes"], fit_out, list(written.columns))


def test_declared_integer_labels_score_like_the_column(data_dir, tmp_path, capsys):
    """--classes on an integer 0/1 target: the labels are the column's integers (not 0.0 /
    1.0), so the model file, the written predictions and predict's accuracy agree with the
    data, as without --classes (the labels chosen privately)."""
    chosen, *_ = _fit_and_score(data_dir, tmp_path, capsys, [])
    for typed in ("0,1", "0, 1.0"):
        printed, computed, classes, out, columns = _fit_and_score(data_dir, tmp_path, capsys,
                                                                  ["--classes", typed])
        assert printed == pytest.approx(computed, abs=1e-4)
        assert printed > 0.7 and abs(printed - chosen) < 0.1, (printed, chosen)  # was 0.0000
        assert classes == [0, 1] and all(type(c) is int for c in classes)
        assert columns == ["prediction", "probability_0", "probability_1"]
        assert "labels (declared (public)): 0 -> -1, 1 -> +1" in out
