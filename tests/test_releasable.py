"""A default fit with too few rows to release anything reliable is refused before any
release (dpopt.pipeline.releasable): a regressor whose target's range the whole budget could
not locate on the default grid, a classifier whose labels no budget could name."""

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_diabetes
from tests._cli import run

import dpopt
from dpopt.pipeline.releasable import check_releasable, label_threshold, target_range_locatable
from dpopt.preprocessing._bounds import DEFAULT_BIN_CONFIDENCE
from dpopt.privacy import gdp_mu


def _diabetes(n, seed=0):
    X, y = load_diabetes(return_X_y=True)
    rows = np.random.default_rng(seed).choice(len(y), n, replace=False)
    return X[rows], y[rows]


def test_the_rule_is_the_histograms_resolution_at_the_whole_budget():
    need = 4 * DEFAULT_BIN_CONFIDENCE * math.sqrt(2.0)  # a decade's 4 bins, 4.5 sigma each
    for n in (20, 60, 225, 331, 1000):
        for eps in (0.25, 0.5, 1.0, 4.0):
            mu = gdp_mu(eps, 1.0 / n ** 2)
            assert target_range_locatable(n, eps, 1.0 / n ** 2) == (n * mu >= need)
    assert not target_range_locatable(225, 0.25, 1 / 225 ** 2)
    assert target_range_locatable(225, 0.5, 1 / 225 ** 2)


def test_a_regressor_no_budget_can_locate_is_refused_and_spends_nothing():
    X, y = _diabetes(30)
    with dpopt.BudgetAccountant(epsilon=5.0, delta=1e-3) as acc:
        est = dpopt.DPLinearRegression(epsilon=0.5, random_state=0)
        with pytest.raises(dpopt.NotReleasableError, match=r"n_samples=30 is too few.*"
                           r"epsilon=0\.5.*nothing was spent.*target_bounds"):
            est.fit(X, y)
        assert acc.spent() == 0.0 and len(acc.ledger) == 0
    assert not hasattr(est, "coef_")
    # what it released before: the constant 0 (no bin of y cleared its noise), R^2 about -4
    fitted = dpopt.DPLinearRegression(epsilon=0.5, target_bounds=(25.0, 346.0),
                                      random_state=0).fit(X, y)
    assert fitted.predict(X[:1])[0] == pytest.approx(fitted.intercept_)  # the constant
    assert 25.0 <= fitted.intercept_ <= 346.0  # a public range: the mean is released
    for est in (dpopt.DPLasso(epsilon=0.5), dpopt.DPHuberRegressor(epsilon=0.5)):
        with pytest.raises(dpopt.NotReleasableError, match="too few for a private fit"):
            est.fit(X, y)


def test_where_a_budget_can_locate_the_target_the_fit_runs():
    X, y = _diabetes(90)
    assert target_range_locatable(90, 1.0, 1 / 90 ** 2) and not target_range_locatable(90, 0.5, 1 / 90 ** 2)
    est = dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(X, y)
    assert est.epsilon_spent_ <= 1.0 and np.isfinite(est.intercept_)
    with pytest.raises(dpopt.NotReleasableError, match="too few"):
        dpopt.DPLinearRegression(epsilon=0.5, random_state=0).fit(X, y)
    # without an intercept the constant is 0 and nothing needs locating
    dpopt.DPLinearRegression(epsilon=0.5, fit_intercept=False, random_state=0).fit(X, y)


def test_a_classifier_whose_labels_no_budget_can_name_is_refused():
    rng = np.random.default_rng(0)
    n = 50
    X = rng.normal(size=(n, 2))
    y = np.where(X[:, 0] > 0, "yes", "no")
    assert n < label_threshold(0.5, 1 / n ** 2) and n > label_threshold(1.0, 1 / n ** 2)
    with dpopt.BudgetAccountant(epsilon=5.0, delta=1e-3) as acc:
        with pytest.raises(dpopt.NotReleasableError, match=r"too few to release a label.*nothing was "
                                             r"spent.*classes="):
            dpopt.DPLogisticRegression(epsilon=0.5, random_state=0).fit(X, y)
        assert acc.spent() == 0.0
    # declared labels (classes=, a bool y) need no selection: the fit runs
    clf = dpopt.DPLogisticRegression(epsilon=0.5, classes=["no", "yes"], random_state=0)
    assert list(clf.fit(X, y).classes_) == ["no", "yes"]
    dpopt.DPLogisticRegression(epsilon=0.5, random_state=0).fit(X, y == "yes")
    # a table alike; at epsilon = 1 the selection can name a label held by most rows
    frame = pd.DataFrame({"a": X[:, 0], "b": np.where(X[:, 1] > 0, "u", "v")})
    with pytest.raises(dpopt.NotReleasableError, match="too few to release a label"):
        dpopt.DPLogisticRegression(epsilon=0.5).fit(frame, y)


def test_chunked_data_is_refused_alike():
    da = pytest.importorskip("dask.array")
    dd = pytest.importorskip("dask.dataframe")
    X, y = _diabetes(40)
    with pytest.raises(dpopt.NotReleasableError, match="n_samples=40 is too few"):
        dpopt.DPLinearRegression(epsilon=1.0).fit(da.from_array(X, chunks=20),
                                                   da.from_array(y, chunks=20))
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])]).assign(t=y)
    with pytest.raises(dpopt.NotReleasableError, match="n_samples=40 is too few"):
        dpopt.DPLinearRegression(epsilon=1.0).fit(dd.from_pandas(frame, npartitions=2), "t")
    X, y = _diabetes(90)  # the Dask DataFrame's n is its rows': 90 are enough at epsilon = 1
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])]).assign(t=y)
    dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(
        dd.from_pandas(frame, npartitions=2), "t")
    # True/False labels given as a list are declared on chunked X too (no selection)
    clf = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0)
    clf.fit(da.from_array(X[:20], chunks=10), list(X[:20, 0] > 0))
    assert list(clf.classes_) == [False, True]


def test_the_label_rule_is_a_label_of_every_row_at_the_threshold():
    tau = label_threshold(0.5, 1e-4)
    check_releasable(int(np.ceil(tau)), np.zeros(3), 0.5, 1e-4, classifier=True)
    with pytest.raises(dpopt.NotReleasableError, match=f"about {int(np.ceil(tau))} records"):
        check_releasable(int(np.ceil(tau)) - 1, np.zeros(3), 0.5, 1e-4, classifier=True)


def test_a_constant_in_a_public_range_is_not_warned_of_as_a_private_narrow_band(recwarn):
    from dpopt.pipeline.scaling import ColumnWarning

    X, _ = _diabetes(30)
    y = 2005.0 + np.random.default_rng(0).normal(0.0, 3.0, 30)
    model = dpopt.DPLinearRegression(epsilon=0.5, target_bounds=(1990.0, 2020.0),
                                     random_state=0).fit(X, y)
    assert model.auto_.plan["solver"] == "none"  # the constant-only fit (no model)
    assert model.auto_.plan["public_target"] == [1990.0, 2020.0]
    assert not [w for w in recwarn if issubclass(w.category, ColumnWarning)]


def test_the_cli_refuses_before_writing(tmp_path, capsys):
    X, y = _diabetes(30)
    path = tmp_path / "d.csv"
    pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])]).assign(t=y).to_csv(path,
                                                                                     index=False)
    out = tmp_path / "m.json"
    code, _, err = run(["fit", path, "--target", "t", "--loss", "squared", "--epsilon", "0.5",
                        "--out", out], capsys)
    assert code == 2 and "too few for a private fit" in err and not out.exists()
    assert "--target-bounds LO:HI" in err and "target_bounds=" not in err  # the flag's name
    code, _, err = run(["fit", path, "--target", "t", "--loss", "squared", "--epsilon", "0.5",
                        "--target-bounds", "25:346", "--out", out], capsys)
    assert code == 0 and out.exists()
    X90, y90 = _diabetes(90)  # fitted: the constant-only fit's warning names the flag too
    path90 = tmp_path / "d90.csv"
    pd.DataFrame(X90[:, :2], columns=["a", "b"]).assign(t=y90).to_csv(path90, index=False)
    code, printed, err = run(["fit", path90, "--target", "t", "--loss", "squared",
                              "--epsilon", "1", "--out", out], capsys)
    assert code == 0 and "--target-bounds LO:HI" in printed + err
    assert "target_bounds=" not in printed + err
    # a loss without an estimator (Huber with an L1 penalty) takes the default path alike
    code, _, err = run(["fit", path, "--target", "t", "--loss", "huber", "--penalty", "l1",
                        "--epsilon", "0.5", "--out", tmp_path / "h.json"], capsys)
    assert code == 2 and "too few for a private fit" in err and not (tmp_path / "h.json").exists()
    labels = tmp_path / "c.csv"
    pd.DataFrame({"a": X[:, 0], "y": np.where(y > 140, "hi", "lo")}).to_csv(labels, index=False)
    code, _, err = run(["fit", labels, "--target", "y", "--loss", "logistic", "--epsilon", "0.5",
                        "--out", out], capsys)
    assert code == 2 and "--classes A,B,..." in err and "classes=[" not in err


def test_the_tiny_tables_benchmark_counts_refusals_apart(capsys):
    from tests._benchmarks import load_benchmark

    bench = load_benchmark("tiny_tables")
    bench.main(["--n", "30", "--epsilons", "0.5,100", "--draws", "2",
                "--tables", "diabetes,breast_cancer"])
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]]
    cells = {(r[0].strip("| "), r[2]): r for r in rows}
    assert cells[("diabetes", "0.5")][3] == "nan" and cells[("diabetes", "0.5")][6] == "100% |"
    assert cells[("diabetes", "100")][6] == "0% |" and float(cells[("diabetes", "100")][3]) > 0
    assert cells[("breast_cancer", "0.5")][6] == "0% |"  # declared labels: not refused
    bench.main(["--n", "30", "--epsilons", "0.5", "--draws", "2", "--tables", "breast_cancer",
                "--undeclared"])
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()[2:]]
    assert rows[0][6] == "100% |"  # labels selected on 30 rows at 0.5: refused (56 needed)


def test_a_search_names_the_refused_candidate_and_spends_nothing():
    X, y = _diabetes(90)  # 72 training rows: below the rule at epsilon = 1
    search = dpopt.PrivateHyperparameterSearch(dpopt.DPLinearRegression(epsilon=1.0),
                                               {"alpha": [0.0, 0.1]}, score_clip=100.0,
                                               random_state=0)
    with dpopt.BudgetAccountant(epsilon=50.0, delta=1e-2) as acc:
        with pytest.raises(dpopt.NotReleasableError, match=r"candidate \{'alpha': 0.0\}, fitted on the 72 "
                                             r"training rows.*too few for a private fit"):
            search.fit(X, y)
        assert acc.spent() == 0.0
    assert not hasattr(search, "best_estimator_")
