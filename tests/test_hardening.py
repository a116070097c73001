"""Fixes of issue 21 (hardening): each test fails without its fix."""

import warnings

import numpy as np
import pandas as pd
import pytest

import dpopt


def _regression(n=300, p=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, p))
    y = np.clip(X @ np.linspace(1, -1, p) + 0.1 * rng.standard_normal(n), -3, 3)
    return X, y


# -- item 2: an explicit fit that read constants from the data says so first ---------------

@pytest.mark.parametrize("solver, public", [
    ("adassp", {"row_bound": 2.0, "target_bound": 3.0}),
    ("dp-frank-wolfe", {"radius": 5.0, "coordinate_bound": 1.0, "target_bound": 3.0,
                        "clip": 1.0}),
])
def test_result_that_read_constants_from_the_data_is_reported_not_private(solver, public):
    X, y = _regression()
    problem = dpopt.Problem(X, y, loss="squared", penalty="none")
    with pytest.warns(dpopt.PrivacyLeakWarning):
        leaky = dpopt.solve(problem, solver, epsilon=1.0, delta=1e-6, random_state=0)
    assert leaky.leaks and not leaky.is_private
    assert leaky.privacy_report().startswith("NOT private")
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)
        clean = dpopt.solve(problem, solver, epsilon=1.0, delta=1e-6, random_state=0, **public)
    assert clean.leaks == () and clean.is_private
    assert clean.privacy_report().startswith(f"{solver}: (")


def test_leak_warning_turned_into_an_error_charges_nothing():
    X, y = _regression()
    problem = dpopt.Problem(X, y, loss="squared", penalty="none")
    acc = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)
        with pytest.raises(dpopt.PrivacyLeakWarning):
            dpopt.solve(problem, "adassp", epsilon=1.0, delta=1e-6, budget=acc)
    assert acc.ledger == []


# -- items 3 and 4: private transformers ---------------------------------------------------

TRANSFORMERS = ["PrivateClipper", "PrivateMinMaxScaler", "PrivateStandardScaler",
                "PrivateRobustScaler"]


def _transformer(name, **kw):
    import dpopt.preprocessing as pre

    return getattr(pre, name)(random_state=0, **kw)


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_transformer_at_tiny_epsilon_succeeds_within_its_target(name):
    X = np.random.default_rng(0).standard_normal((500, 3))
    acc = dpopt.BudgetAccountant(epsilon=1.0, delta=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the bounds cannot be located
        t = _transformer(name, epsilon=1e-6, delta=1e-6, accountant=acc).fit(X)
    assert t.epsilon_spent_ <= 1e-6 and len(acc.ledger) == 1
    assert acc.ledger[0].epsilon <= 1e-6


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_failed_transformer_fit_charges_nothing_and_is_not_an_assert(name, monkeypatch):
    from dpopt.api import transformers as _transformers
    from dpopt.privacy.budget import Spend

    X = np.random.default_rng(0).standard_normal((300, 2))
    acc = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-3)
    over = Spend("x", 0.75, 1e-6, "replace-one", "exact", ())  # more than the target 0.5
    monkeypatch.setattr(_transformers._PrivateTransformer, "_spend",
                        lambda self, mechanisms, delta: over)
    t = _transformer(name, epsilon=0.5, delta=1e-6, accountant=acc)
    with pytest.raises(RuntimeError, match="nothing was released or charged"):
        t.fit(X)
    assert acc.ledger == [] and not hasattr(t, "lower_")


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_transformer_warns_when_delta_exceeds_one_over_n(name):
    X = np.random.default_rng(0).standard_normal((5000, 2))
    with pytest.warns(dpopt.WeakPrivacyWarning, match="1/n"):
        _transformer(name, epsilon=1.0, delta=0.5).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.WeakPrivacyWarning)
        _transformer(name, epsilon=1.0, delta=1e-6).fit(X)


def test_no_runtime_assert_statements_in_the_library():
    import ast
    import pathlib

    root = pathlib.Path(dpopt.__file__).parent
    found = [f"{path.relative_to(root)}:{node.lineno}" for path in root.rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Assert)
             or (isinstance(node, ast.Raise) and node.exc is not None
                 and "AssertionError" in ast.dump(node.exc))]
    assert found == []


# -- item 6: a budget too small for the default path's plan names epsilon and delta ----------

@pytest.mark.parametrize("cls", ["DPLinearRegression", "DPLasso", "DPElasticNet"])
@pytest.mark.parametrize("epsilon, delta", [(0.01, 0.5), (1e-3, 0.1), (1e-6, 0.5)])
def test_default_path_budget_too_small_names_epsilon_and_delta(cls, epsilon, delta):
    X, y = _regression()
    acc = dpopt.BudgetAccountant(epsilon=5.0, delta=0.9)
    est = getattr(dpopt, cls)(epsilon=epsilon, delta=delta, accountant=acc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpopt.WeakPrivacyWarning)
        with pytest.raises(ValueError) as info:
            est.fit(X, y)
    message = str(info.value)
    assert f"epsilon={epsilon:g}" in message and f"delta={delta:g}" in message
    assert "got 0.0" not in message and acc.ledger == [] and not hasattr(est, "coef_")


# -- item 12: the row-normalization fall-back is warned and reported --------------------------

def test_row_normalization_fallback_is_warned_and_reported():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 5)), rng.integers(0, 2, 40)
    with pytest.warns(UserWarning, match="rows are normalized"):
        clf = dpopt.DPLogisticRegression(epsilon=0.5, random_state=0, classes=[0, 1]).fit(X, y)
    assert clf.fit_result_.params["auto"]["scaling"] == "row-normalized"
    assert "rows normalized" in clf.privacy_report()


def test_a_row_too_large_to_square_is_normalized_like_its_direction():
    # its squared norm overflowed and the row became 0 (a helper's finding, session 31)
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 5)), rng.integers(0, 2, 40)
    X[0] = np.abs(X[0]) + 1.0
    big = X.copy()
    big[0] *= 2.0 ** 1000  # about 1e301: exact, the same direction
    fits = []
    for data in (X, big):
        with pytest.warns(UserWarning, match="rows are normalized"):
            fits.append(dpopt.DPLogisticRegression(epsilon=0.5, random_state=0,
                                                   classes=[0, 1]).fit(data, y))
    assert np.array_equal(fits[0].coef_, fits[1].coef_)
    assert fits[0].intercept_ == fits[1].intercept_
    assert np.array_equal(fits[0].decision_function(X), fits[1].decision_function(big))


# -- item 7: modelio.predict on scipy.sparse input with a clip feature map -------------------

def _fit_cli(tmp_path, argv, X=None, y=None):
    from dpopt.cli import main

    if X is None:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((4000, 3))
        X[X < 0.2] = 0.0
        y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(4000)
    data = tmp_path / "d.npz"
    np.savez(data, X=X, y=y)
    return main(["fit", str(data), "--seed", "0", *argv]), X


def test_modelio_predict_takes_sparse_input_with_a_clip_feature_map(tmp_path):
    import scipy.sparse as sparse

    from dpopt.api import modelio

    out = tmp_path / "m.json"
    code, X = _fit_cli(tmp_path, ["--loss", "squared", "--epsilon", "2", "--out", str(out)])
    model = modelio.load_model(out)
    assert code == 0 and model["feature_map"]["type"] == "clip"
    dense = modelio.predict(model, X)
    for fmt in (sparse.csr_matrix, sparse.csc_matrix, sparse.coo_matrix):
        np.testing.assert_allclose(modelio.predict(model, fmt(X)), dense, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="X has shape"):
        modelio.predict(model, X[:, :2])
    with pytest.raises(ValueError, match="X must be numeric"):
        modelio.predict(model, np.array([["a", "b", "c"]]))
    (tmp_path / "bad.json").write_text(f'{{"format": "{modelio.FORMAT}", "loss": "squared"}}')
    with pytest.raises(ValueError, match="missing"):
        modelio.load_model(tmp_path / "bad.json")
    import json

    written = json.loads(out.read_text())
    for field, index in (("coef", 0), ("intercept", None)):  # a changed file: NaN or inf
        for value in (float("nan"), float("inf")):
            changed = dict(written, **{field: value if index is None else
                                       [value] + written[field][1:]})
            (tmp_path / "changed.json").write_text(json.dumps(changed))
            with pytest.raises(ValueError, match="must be finite"):
                modelio.load_model(tmp_path / "changed.json")
    table_model = {"format": modelio.FORMAT, "loss": "logistic", "coef": [1.0, 2.0],
                   "intercept": 0.5, "classes": ["no", "yes"],
                   "feature_map": {"type": "clip", "lower": [0, 0], "upper": [1, 1]}}
    changes = [({"loss": "bogus"}, "loss 'bogus' is not one of"),
               ({"classes": []}, "do not match coef"),
               ({"classes": ["a", "b", "c"]}, "do not match coef"),
               ({"coef": [[1.0, 2.0]]}, "do not match coef"),
               ({"coef": [[1.0, 2.0]] * 3, "classes": None}, "one intercept each"),
               ({"feature_map": {}}, "type None is neither"),
               ({"feature_map": {"type": "clip", "lower": [0], "upper": [1]}}, "2 finite bounds each"),
               ({"data": {"table": {"bogus": 1}}}, "not a table schema")]
    (tmp_path / "whole.json").write_text(json.dumps(table_model))
    assert modelio.load_model(tmp_path / "whole.json")["loss"] == "logistic"
    for change, needle in changes:
        (tmp_path / "changed.json").write_text(json.dumps({**table_model, **change}))
        with pytest.raises(ValueError, match=needle):
            modelio.load_model(tmp_path / "changed.json")


# -- items 9, 10: CLI ---------------------------------------------------------------------------

def test_cli_refuses_duplicate_column_names(tmp_path, capsys):
    from dpopt.cli import main

    path = tmp_path / "dup.csv"
    rows = "\n".join(f"{i % 7},{i % 3},{i % 5},{'<=50K' if i % 2 else '>50K'}" for i in range(50))
    path.write_text("a,b,a,income\n" + rows + "\n")
    assert main(["fit", str(path), "--loss", "logistic", "--epsilon", "1"]) == 2
    err = capsys.readouterr().err
    assert "duplicate column name" in err and "'a'" in err


def test_cli_messages_show_plain_strings_not_numpy_reprs(tmp_path, capsys):
    from dpopt.cli import main

    path = tmp_path / "t.csv"
    path.write_text("a,income\n" + "\n".join(f"{i},{'<=50K' if i % 2 else '>50K'}"
                                             for i in range(20)) + "\n")
    assert main(["fit", str(path), "--loss", "squared", "--epsilon", "1"]) == 2
    err = capsys.readouterr().err
    assert "np.str_" not in err and "not numbers" in err and "--loss logistic" in err
    assert "50K" not in err  # where, not the records' values


def test_cli_solvers_table_is_aligned(capsys):
    from dpopt.cli import main

    assert main(["solvers"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    starts = {len(line) - len(line.split(maxsplit=1)[1]) for line in lines}
    assert len(starts) == 1  # every description starts in the same column


def test_cli_fit_line_shows_l1_ratio_only_for_elastic_net(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 3))
    y = np.where(X[:, 0] + 0.3 * rng.standard_normal(500) > 0, 1.0, 0.0)
    code, _ = _fit_cli(tmp_path, ["--loss", "logistic", "--penalty", "l2", "--alpha", "0.1",
                                  "--epsilon", "1"], X, y)
    fit_line = next(line for line in capsys.readouterr().out.splitlines()
                    if line.startswith("fit:"))
    assert code == 0 and "penalty='l2'" in fit_line and "l1_ratio" not in fit_line


def test_cli_fit_prints_the_report_before_saving_and_says_what_failed(tmp_path, capsys,
                                                                     monkeypatch):
    import shutil

    from dpopt.cli import fit as cli

    folder = tmp_path / "models"
    folder.mkdir()
    fit = cli._fit

    def fit_then_remove_the_folder(*args, **kwargs):
        out = fit(*args, **kwargs)
        shutil.rmtree(folder)
        return out

    monkeypatch.setattr(cli, "_fit", fit_then_remove_the_folder)
    code, _ = _fit_cli(tmp_path, ["--loss", "squared", "--epsilon", "1",
                                  "--out", str(folder / "m.json")])
    captured = capsys.readouterr()
    assert code == 2
    assert "privacy: DPLinearRegression" in captured.out and '"coef"' in captured.out
    assert "--out" in captured.err and "fit succeeded" in captured.err
    assert "Traceback" not in captured.err


def test_save_model_is_atomic_with_unique_temporaries(tmp_path, monkeypatch):
    import os
    import threading

    from dpopt.api import modelio

    out = tmp_path / "m.json"
    models = [{"format": modelio.FORMAT, "who": k, "pad": "x" * 20000, "loss": "squared",
               "coef": [float(k)], "intercept": 0.0} for k in range(8)]
    threads = [threading.Thread(target=modelio.save_model, args=(out, m)) for m in models]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert modelio.load_model(out)["who"] in range(8)  # one whole file, no collision
    assert os.listdir(tmp_path) == ["m.json"]  # no temporary left
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    modelio.save_model(out, models[0])
    assert synced  # flushed to disk before the rename

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        modelio.save_model(out, models[1])
    assert os.listdir(tmp_path) == ["m.json"] and modelio.load_model(out)["who"] == 0


# -- item 8: errors about numeric-array input name X or y, arguments before data --------------

def _frame(**columns):
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(columns)


@pytest.mark.parametrize("make_X, pattern", [
    (lambda X: _frame().reindex(range(len(X))), r"X has 0 feature"),
    (lambda X: np.empty((len(X), 0)), r"X has 0 feature"),
    (lambda X: np.where(X > 0, "x", "1").astype(str), r"X\[\d+, \d+\] \(column \d+\) is not a number"),
    (lambda X: np.array(X, dtype=object).__setitem__((5, 1), "x") or None, None),
    (lambda X: X[:, 0], r"X must be a 2D array"),
    (lambda X: None, r"X is None"),
])
@pytest.mark.parametrize("cls", ["DPLinearRegression", "DPLogisticRegression"])
def test_bad_X_is_named(make_X, pattern, cls):
    X, y = _regression()
    if pattern is None:  # an object array with one string cell
        bad = np.array(X, dtype=object)
        bad[5, 1] = "x"
        pattern, Xbad = r"X\[5, 1\] \(column 1\) is not a number", bad
    else:
        Xbad = make_X(X)
    target = y if cls == "DPLinearRegression" else (y > 0).astype(int)
    acc = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-5)
    with pytest.raises(ValueError, match=pattern):
        getattr(dpopt, cls)(epsilon=1.0, accountant=acc).fit(Xbad, target)
    assert acc.ledger == []


def test_string_target_to_a_regressor_names_y():
    X, _ = _regression()
    labels = np.where(X[:, 0] > 0, "<=50K", ">50K")
    for y in (labels, labels.astype(object)):
        with pytest.raises(ValueError, match=r"y must be numeric.*not a number.*DPLogistic") as e:
            dpopt.DPLinearRegression(epsilon=1.0).fit(X, y)
        assert "50K" not in str(e.value)  # where, not the record's value
    dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(X, X[:, 0].astype(str))  # "0.5"


def test_transformer_string_cells_and_no_columns_are_named():
    from dpopt.preprocessing import PrivateStandardScaler

    with pytest.raises(ValueError, match=r"X\[0, 1\] \(column 1\) is not a number") as info:
        PrivateStandardScaler(epsilon=1.0).fit(np.array([["1", "x"], ["2", "3"]]))
    assert "'x'" not in str(info.value)
    with pytest.raises(ValueError, match="X has 0 feature"):
        PrivateStandardScaler(epsilon=1.0).fit(np.empty((10, 0)))


def test_epsilon_inf_on_the_default_path_is_reported_before_bad_data():
    bad = np.array([["1", "x"]] * 20)
    with pytest.raises(ValueError, match="finite epsilon"):
        dpopt.DPLinearRegression(epsilon=np.inf).fit(bad, np.arange(20.0))


def test_cli_epsilon_inf_on_the_default_path_is_reported_before_bad_data(tmp_path, capsys):
    from dpopt.cli import main

    path = tmp_path / "bad.csv"
    path.write_text("a,b\n1,2\n3\n")  # a ragged row: a data error
    assert main(["fit", str(path), "--loss", "squared", "--epsilon", "inf"]) == 2
    assert "--epsilon inf" in capsys.readouterr().err


def test_y_of_another_length_than_X_names_both():
    with pytest.raises(ValueError, match="X has 1 rows but y has 0 values"):
        dpopt.DPLinearRegression(epsilon=1.0).fit([[0.1]], np.array([]))


def test_cli_model_file_lists_what_an_explicit_fit_read_from_the_data(tmp_path):
    from dpopt.api import modelio

    out = tmp_path / "m.json"
    code, _ = _fit_cli(tmp_path, ["--loss", "squared", "--solver", "adassp", "--epsilon", "1",
                                  "--out", str(out)])
    leaks = modelio.load_model(out)["privacy"]["leaks"]
    assert code == 0 and "row_bound" in " ".join(leaks)
    code, _ = _fit_cli(tmp_path, ["--loss", "squared", "--solver", "adassp", "--epsilon", "1",
                                  "--option", "row_bound=5", "--option", "target_bound=10",
                                  "--out", str(out)])
    assert code == 0 and modelio.load_model(out)["privacy"]["leaks"] == []


def test_save_model_named_temporary_fallback_leaves_nothing_on_failure(tmp_path, monkeypatch):
    import os

    from dpopt.api import modelio

    monkeypatch.setattr(modelio, "_write_anonymous", lambda folder, name, data: None)
    out = tmp_path / "m.json"
    modelio.save_model(out, {"format": modelio.FORMAT, "loss": "squared", "coef": [1.0],
                             "intercept": 0.0})
    assert os.listdir(tmp_path) == ["m.json"]

    def no_space(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", no_space)
    with pytest.raises(OSError):
        modelio.save_model(out, {"format": modelio.FORMAT})
    assert os.listdir(tmp_path) == ["m.json"] and modelio.load_model(out)["coef"][0] == 1.0


def test_no_kept_label_says_how_many_records_a_label_needs():
    """When the private label selection keeps no label, the error gives its threshold (a
    public function of n, epsilon and delta), in memory and on Dask alike."""
    import re

    rng = np.random.default_rng(0)
    y, X = rng.choice(list("abcdefg"), 300), rng.standard_normal((300, 3))
    with pytest.raises(ValueError, match=r"held by enough records \(about \d+\)") as caught:
        dpopt.DPLogisticRegression(epsilon=0.25, random_state=0).fit(X, y)
    need = int(re.search(r"about (\d+)", str(caught.value)).group(1))
    assert max(np.unique(y, return_counts=True)[1]) < need < 300
    da = pytest.importorskip("dask.array")
    with pytest.raises(ValueError, match=rf"\(about {need}\)"):
        dpopt.DPLogisticRegression(epsilon=0.25, random_state=0).fit(
            da.from_array(X, chunks=100), da.from_array(y, chunks=100))


def test_a_failure_decided_by_the_label_selection_is_charged():
    """Whether the label selection keeps a label is the outcome of its noise, so a fit that
    fails on it has released something: each failed fit is charged its releases (the fuzz
    found the failure free, its rate over retries reading the label counts), in memory and
    on Dask; the estimator is left unfitted."""
    rng = np.random.default_rng(1)
    # 60 rows: a label of all of them would clear the threshold (fewer are refused for free,
    # tests/test_releasable.py), each of two labels of 30 most often does not
    X, y = rng.standard_normal((60, 2)), np.r_[np.ones(30, int), np.zeros(30, int)]
    acc = dpopt.BudgetAccountant(epsilon=100.0, delta=0.1)
    failed = 0
    for seed in range(6):
        clf = dpopt.DPLogisticRegression(epsilon=0.5, random_state=seed, accountant=acc)
        try:
            clf.fit(X, y)
        except dpopt.ChargedFitError as err:
            assert "kept 0 classes" in str(err) and "charged" in str(err)
            assert not hasattr(clf, "coef_")
            failed += 1
    assert failed >= 1 and len(acc.ledger) == 6  # every fit is in the ledger, failed or not
    for spend in acc.ledger:
        assert 0.0 < spend.epsilon <= 0.5 * (1 + 1e-9) and spend.delta == 1 / 60 ** 2
    from dpopt.api.charge import failure_spend
    from dpopt.privacy import epsilon_of

    err = dpopt.ChargedFitError("x", [dpopt.privacy.Gaussian(3.0)], 1e-6)
    assert failure_spend(err, 1e-5, "f").epsilon == pytest.approx(
        epsilon_of([dpopt.privacy.Gaussian(3.0)], 9e-6))
    da = pytest.importorskip("dask.array")
    before = len(acc.ledger)
    with pytest.raises(dpopt.ChargedFitError):
        for seed in range(20):
            dpopt.DPLogisticRegression(epsilon=1.0, random_state=seed, accountant=acc).fit(
                da.from_array(X, chunks=20), da.from_array(np.arange(60) % 7, chunks=20))
    assert len(acc.ledger) > before


def test_intervals_refused_after_a_private_label_selection_are_charged():
    """inference=True with one kept label: the refusal follows the selection's outcome, so it
    is charged; with k = 3 declared labels the refusal is public and charges nothing."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 3))
    y = np.r_[np.zeros(395, int), np.ones(5, int)]  # the rare label is not kept
    acc = dpopt.BudgetAccountant(epsilon=10.0, delta=1e-3)
    with pytest.raises(dpopt.ChargedFitError, match="one label"):
        dpopt.DPLogisticRegression(epsilon=1.0, inference=True, random_state=0,
                                   accountant=acc).fit(X, y)
    assert len(acc.ledger) == 1 and acc.ledger[0].epsilon > 0
    with pytest.raises(ValueError, match="k >= 3") as caught:
        dpopt.DPLogisticRegression(epsilon=1.0, inference=True, classes=[0, 1, 2],
                                   accountant=acc).fit(X, np.arange(400) % 3)
    assert not isinstance(caught.value, dpopt.ChargedFitError) and len(acc.ledger) == 1


def test_a_regression_wider_than_any_private_fit_releases_the_constant():
    """p beyond dimension_limit(n, mu) (a classifier's screening threshold) on a regressor,
    which has no screening route: the constant from all rows, without building AdaSSP's
    d x d releases (the fuzz's 200 x 20,000 sparse fit ran out of memory)."""
    import scipy.sparse as sp

    from dpopt.pipeline.default_path import dimension_limit, model_possible

    X = sp.random(200, 2000, density=0.005, format="csr", random_state=0)
    y = np.asarray(X[:, :10].sum(1)).ravel() + 3.0
    with pytest.warns(UserWarning, match="p=2000 features are more than"):
        reg = dpopt.DPLinearRegression(epsilon=100.0, random_state=0).fit(X, y)
    plan = reg.auto_.plan
    assert plan["solver"] == "none" and plan["unlearnable"]
    assert np.all(reg.coef_ == 0) and abs(reg.intercept_ - y.mean()) < 1.0
    assert "constant is released from all rows" in plan["selection"]["reason"]
    assert reg.epsilon_spent_ <= 100.0 * (1 + 1e-9)
    with pytest.warns(UserWarning, match="features are more than"):  # as any constant:
        inf = dpopt.DPLinearRegression(epsilon=100.0, inference=True).fit(X.toarray(), y)
    with pytest.raises(ValueError, match="no model"):  # released, but no intervals
        inf.conf_int()
    assert not model_possible(160, 100.0, 1 / 200 ** 2, p=2000)
    assert model_possible(160, 100.0, 1 / 200 ** 2, p=10)
    assert dimension_limit(200, 30.0) < 200


@pytest.mark.parametrize("classes, y_kind, match", [
    ([0, "1"], int, "one kind"), ([0, np.nan], int, "one kind"), ([None, 1], int, "one kind"),
    ("ab", str, "at least 2 distinct"), (["0", "1"], int, "are text but y holds numbers"),
    ([0, 1], str, "are numbers but y holds text")])
def test_declared_classes_are_not_coerced(classes, y_kind, match):
    """classes= of mixed kinds, with a missing label, given as one string, or of another
    kind than y: a ValueError naming classes (the fuzz found each accepted silently)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3))
    y = (X[:, 0] > 0).astype(int).astype(y_kind)
    clf = dpopt.DPLogisticRegression(epsilon=1.0, classes=classes, random_state=0)
    with pytest.raises(ValueError, match=match):
        clf.fit(X, y)
    assert not hasattr(clf, "coef_")


def test_bounds_given_as_bools_or_strings_are_refused():
    X = np.random.default_rng(0).standard_normal((300, 3))
    for bad in [(True, 2), ("1", 2), (0,), 3.0]:
        with pytest.raises(ValueError, match="target_bounds must be a pair"):
            dpopt.DPLinearRegression(epsilon=1.0, target_bounds=bad).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="key True is a bool"):
        dpopt.DPLinearRegression(epsilon=1.0, feature_bounds={True: (0, 1)}).fit(X, X[:, 0])
    with pytest.raises(ValueError, match=r"feature_bounds\[0\] must be a pair"):
        dpopt.DPLinearRegression(epsilon=1.0, feature_bounds={0: (True, 1)}).fit(X, X[:, 0])


def test_a_target_beyond_the_grid_is_warned_and_reported():
    """A target reaching past +-1e9 is clipped at the grid's end: warned and in the report,
    as a feature would be; not when its range is public (target_bounds=)."""
    from dpopt.pipeline.scaling import TARGET_END, ColumnWarning

    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 3))
    y = (X @ [1.0, 2.0, 3.0] + rng.standard_normal(2000)) * 1e10
    with pytest.warns(ColumnWarning, match="the target's values reach"):
        reg = dpopt.DPLinearRegression(epsilon=10.0, random_state=0).fit(X, y)
    assert reg.auto_.plan["target_grid_end"] and TARGET_END in reg.privacy_report()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ColumnWarning)
        public = dpopt.DPLinearRegression(epsilon=10.0, random_state=0,
                                          target_bounds=(-1e11, 1e11)).fit(X, y)
        dpopt.DPLinearRegression(epsilon=10.0, random_state=0).fit(X, y / 1e10)
    assert "target_grid_end" not in public.auto_.plan


def test_a_missing_label_in_an_array_is_named():
    X = np.random.default_rng(0).standard_normal((300, 3))
    y = np.array(["a", "b"] * 150, dtype=object)
    y[3] = None
    with pytest.raises(ValueError, match="y has missing labels"):
        dpopt.DPLogisticRegression(epsilon=1.0).fit(X, y)


def test_too_few_rows_with_a_public_target_range_does_not_blame_the_range():
    X = np.random.default_rng(0).standard_normal((30, 2))
    with pytest.warns(UserWarning, match="could not resolve one histogram") as caught:
        dpopt.DPLinearRegression(epsilon=0.5, target_bounds=(-3, 3), random_state=0).fit(
            X, X[:, 0])
    assert not any("target_bounds=" in str(w.message) for w in caught)


def test_a_continuous_target_to_a_classifier_is_refused_free_for_tables_as_for_arrays():
    """A DataFrame with a continuous y went through the private label selection (charged,
    'kept 0 classes') where the same array was refused as bad input, free."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 2))
    y = X[:, 0] + rng.standard_normal(500)
    acc = dpopt.BudgetAccountant(epsilon=10.0, delta=1e-3)
    for data in (X, pd.DataFrame(X, columns=["a", "b"])):
        with pytest.raises(ValueError, match="Unknown label type: .*continuous"):
            dpopt.DPLogisticRegression(epsilon=2.0, accountant=acc).fit(data, y)
    assert acc.spent() == 0
    labels = dpopt.DPLogisticRegression(epsilon=2.0, random_state=0).fit(
        pd.DataFrame(X, columns=["a", "b"]), np.where(y > 0, 1.0, 0.0))  # float 0/1: labels
    assert list(labels.classes_) == [0.0, 1.0]


@pytest.mark.parametrize("case", ["text classes, int y", "missing label", "continuous y"])
@pytest.mark.parametrize("where", ["dask array", "dask frame"])
def test_chunked_labels_are_checked_as_in_memory(case, where):
    """The in-memory label checks on chunks, before anything is counted: a fuzz found Dask
    labels of another kind than classes=, a None label and continuous numbers accepted, and
    their fits charged."""
    da = pytest.importorskip("dask.array")
    dd = pytest.importorskip("dask.dataframe")
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 3))
    yb = X[:, 0] + rng.normal(size=3000) > 0
    y, classes, match = {
        "text classes, int y": (yb.astype(int), ["0", "1"], "are text but y holds numbers"),
        "missing label": (np.where(np.arange(3000) == 5, None, np.where(yb, "a", "b")).astype(
            object), ["a", "b"], "missing labels"),
        "continuous y": (X[:, 1].copy(), [0.0, 1.0], "continuous"),
    }[case]
    acc = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-3)
    clf = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0, classes=classes,
                                     accountant=acc)
    with pytest.raises(ValueError, match=match):
        clf.fit(X, y)  # in memory: the reference
    if where == "dask array":
        Xc, yc = da.from_array(X, chunks=(1000, -1)), da.from_array(y, chunks=1000)
    else:
        frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(s=np.where(yb, "u", "v"))
        Xc, yc = dd.from_pandas(frame, npartitions=3), dd.from_pandas(pd.Series(y), npartitions=3)
    with pytest.raises(ValueError, match=match):
        clf.fit(Xc, yc)
    assert acc.ledger == [] and not hasattr(clf, "coef_")


def test_a_chunked_bool_target_is_declared_as_in_memory():
    """A bool y's classes are [False, True], public, on chunks as in memory (the chunked path
    selected them privately): the same counts, the same model."""
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 3))
    y = X[:, 0] + rng.normal(size=3000) > 0
    mem = dpopt.DPLogisticRegression(epsilon=2.0, random_state=1).fit(X, y)
    got = dpopt.DPLogisticRegression(epsilon=2.0, random_state=1).fit(
        da.from_array(X, chunks=(1000, -1)), da.from_array(y, chunks=1000))
    a, b = mem.fit_result_.params["auto"]["table"], got.fit_result_.params["auto"]["table"]
    assert b["labels"] == a["labels"] == "declared; their noisy counts released"
    np.testing.assert_allclose(got.coef_, mem.coef_, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("replacement", ["tiny row", "wide row", "tiny over a wide range"])
def test_one_record_of_tiny_values_cannot_make_the_default_path_fail_after_a_release(
        replacement):
    """An independent audit (session 28): a training record whose features are all 1e-300
    kept its tiny values through the row normalization (its squared norm underflows) and
    the scaled design's check refused them after the target's histogram was released: a
    failure decided by one record. The default path's scaled design now sets such values
    to 0 (a per-record map), so the neighbour fits and spends what the original does."""
    rng = np.random.default_rng(0)
    n = 300
    X = rng.normal(size=(n, 3)) * np.geomspace(0.1, 100, 3) + np.linspace(0, 1000, 3)
    y = X @ (rng.normal(size=3) / np.geomspace(0.1, 100, 3)) + rng.normal(size=n) + 40
    moved = X.copy()
    moved[:, 2] = 0.0 if replacement == "tiny over a wide range" else moved[:, 2]
    if replacement == "tiny row":
        moved[:] = np.where(np.arange(n)[:, None] < 40, 1e-300, moved)  # training rows too
    elif replacement == "wide row":
        moved[:40] = [1.0, 1e-200, 0.5]
    else:
        moved[:40, 2] = 1e-149
        moved[40, 2] = 1e9
    for data in (X, moved):
        for seed in (100, 101):
            acc = dpopt.BudgetAccountant(epsilon=2.0, delta=1e-3)
            model = dpopt.DPLinearRegression(epsilon=1.0, random_state=seed,
                                             accountant=acc).fit(data, y)
            assert np.all(np.isfinite(model.coef_)) and 0.99 < model.epsilon_spent_ <= 1.0


def test_problem_refuses_tiny_user_values_and_zeroes_them_only_when_asked():
    X = np.array([[1.0, 1e-200], [0.5, 2.0], [0.0, 1.0]])
    y = np.array([1.0, 1e-160, -1.0])
    with pytest.raises(ValueError, match="X has non-zero entries below 1e-150") as info:
        dpopt.Problem(X, np.ones(3))
    assert "1e-200" not in str(info.value)  # the limit, not the record's value
    with pytest.raises(ValueError, match="y has non-zero entries below 1e-150") as info:
        dpopt.Problem(np.ones((3, 1)), y)
    assert "1e-160" not in str(info.value)
    with pytest.raises(ValueError, match="X has entries beyond 1e\\+150") as info:
        dpopt.Problem(np.array([[1.0], [-3.7e200]]), np.ones(2))
    assert "3.7" not in str(info.value)
    for layout in (np.ascontiguousarray, np.asfortranarray):
        for fit_intercept in (False, True):
            source = layout(X.copy())
            problem = dpopt.Problem(source, y, zero_tiny=True, fit_intercept=fit_intercept)
            assert problem.X[0, 1] == 0.0 and problem.X[1, 1] == 2.0 and problem.y[1] == 0.0
            assert source[0, 1] == 1e-200  # the caller's array is not written
    import scipy.sparse as sp
    problem = dpopt.Problem(sp.csr_matrix(X), y, zero_tiny=True)
    assert problem.X.nnz == 4 and problem.X[0, 1] == 0.0


def test_values_near_the_largest_float_raise_no_warning_in_memory():
    # scikit-learn's finiteness check sums the data and warned on overflow, a warning
    # decided by the data that the chunked layout does not raise (second audit, session 31)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 3))
    y = X @ np.array([1.0, 2.0, 3.0]) + rng.standard_normal(2000)
    X[:60], X[60:120] = 1.7e308, -1.7e308
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        model = dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(X, y)
    assert np.all(np.isfinite(model.coef_))


def test_a_model_file_prediction_names_no_cell():
    from dpopt.api.modelio import _check_predict_input

    with pytest.raises(ValueError, match="numeric") as info:
        _check_predict_input(np.array([["1.0", "SECRET123"]], dtype=object), 2)
    assert "SECRET123" not in str(info.value)
    assert info.value.__context__ is None and info.value.__cause__ is None
