"""Below the held-out choice's size (n < 100) the default model is checked on the rows it
was trained on, with a share of the budget kept for the check (dpopt.pipeline.in_sample)."""

import math
import warnings

import numpy as np
import pytest

import dpopt
from dpopt.pipeline.default_path import model_possible
from dpopt.pipeline.in_sample import in_sample_mu
from dpopt.pipeline.selection import (
    VALIDATION_FRACTION,
    choice_runs,
    in_sample_runs,
    planned_mu,
    selection_runs,
)
from dpopt.privacy import Gaussian, epsilon_of, gdp_mu


def _noise_regression(n, p=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, p)), 50.0 + 10.0 * rng.normal(size=n)


def _signal_regression(n, p=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    return X, 50.0 + 10.0 * X @ np.linspace(1.0, 0.2, p) + rng.normal(size=n)


def test_the_check_runs_exactly_where_no_rows_can_be_held_out():
    assert in_sample_runs(99) and not selection_runs(99)
    assert not in_sample_runs(100) and selection_runs(100)
    assert not in_sample_runs(60, inference=True) and not in_sample_runs(60, fit_intercept=False)
    assert choice_runs(60) and choice_runs(5000) and not choice_runs(60, inference=True)


def test_a_model_of_noise_is_checked_and_the_constant_released():
    released = []
    for seed in range(6):
        X, y = _noise_regression(80, seed=seed)
        reg = dpopt.DPLinearRegression(epsilon=4.0, random_state=seed).fit(X, y)
        sel = reg.auto_.plan["selection"]
        assert sel["in_sample"] and sel["validation_rows"] == 80
        assert sel["reason"].startswith("in-sample check on 80 rows")
        released.append(sel["released"])
        if sel["released"] != "model":
            np.testing.assert_array_equal(reg.coef_, 0.0)
    # before the check, the model was released unchecked in every fit
    assert released.count("model") <= 1


def test_a_model_with_signal_passes_the_check():
    X, y = _signal_regression(80)
    reg = dpopt.DPLinearRegression(epsilon=100.0, random_state=0).fit(X, y)
    assert reg.auto_.plan["selection"]["released"] == "model"
    assert reg.score(X, y) > 0.8


def test_the_check_is_in_the_composition_and_the_budget():
    X, y = _signal_regression(80)
    with dpopt.BudgetAccountant(epsilon=10.0, delta=1.0 / 80 ** 2) as acc:
        reg = dpopt.DPLinearRegression(epsilon=4.0, random_state=1).fit(X, y)
    result, plan = reg.fit_result_, reg.auto_.plan
    mu_s = plan["mu_shares"]["in_sample_check"]
    delta = 1.0 / 80 ** 2
    assert mu_s == pytest.approx(in_sample_mu(planned_mu(4.0, delta, None), VALIDATION_FRACTION))
    assert mu_s == pytest.approx(gdp_mu(4.0, delta) * math.sqrt(VALIDATION_FRACTION))
    last = result.mechanisms[-1]
    assert isinstance(last, Gaussian) and last.noise_multiplier == pytest.approx(1.0 / mu_s)
    assert reg.epsilon_spent_ == pytest.approx(epsilon_of(result.mechanisms, delta))
    assert reg.epsilon_spent_ <= 4.0 + 1e-9 and reg.epsilon_spent_ > 3.99
    # the plan's split adds up to the whole budget (sum of mu^2)
    assert math.fsum(v * v for v in plan["mu_shares"].values()) <= gdp_mu(4.0, delta) ** 2 * (1 + 1e-9)
    assert acc.spent() == pytest.approx(reg.epsilon_spent_)


def test_a_classifier_of_noise_releases_the_majority_named_by_its_counts():
    wrong = 0
    for seed in range(5):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(90, 4))
        y = np.where(rng.random(90) < 0.75, "yes", "no")
        clf = dpopt.DPLogisticRegression(epsilon=1.0, classes=["no", "yes"],
                                         random_state=seed).fit(X, y)
        sel = clf.auto_.plan["selection"]
        assert sel["in_sample"] and sel["majority_from"] is not None
        assert "label_counts" in clf.auto_.plan["table"]  # released on all rows for the check
        wrong += sel["released"] != "constant +1"  # "yes", the majority
    assert wrong <= 1


def test_no_check_with_inference_or_without_intercept():
    X, y = _signal_regression(80)
    reg = dpopt.DPLinearRegression(epsilon=100.0, fit_intercept=False, random_state=0).fit(X, y)
    assert "in_sample" not in reg.auto_.plan.get("selection", {})
    inf = dpopt.DPLinearRegression(epsilon=100.0, inference=True, random_state=0).fit(X, y)
    assert "in_sample" not in inf.auto_.plan["selection"]
    rng = np.random.default_rng(0)
    Xc, yc = rng.normal(size=(90, 3)), rng.integers(0, 2, size=90)
    clf = dpopt.DPLogisticRegression(epsilon=100.0, classes=[0, 1], fit_intercept=False,
                                     random_state=0).fit(Xc, yc)
    assert "label_counts" not in clf.auto_.plan.get("table", {})  # nothing to name

def test_a_regressor_that_cannot_spare_the_check_releases_the_constant():
    eps = 2.0
    found = [n for n in range(60, 100) if model_possible(n, eps, 1.0 / n ** 2)
             and not model_possible(n, eps, 1.0 / n ** 2,
                                    spent_mu=gdp_mu(eps, 1.0 / n ** 2) * math.sqrt(0.2))]
    if not found:
        pytest.skip("no n below 100 where the check's share decides (at epsilon=2)")
    n = found[0]
    X, y = _signal_regression(n)
    reg = dpopt.DPLinearRegression(epsilon=eps, random_state=0).fit(X, y)
    np.testing.assert_array_equal(reg.coef_, 0.0)
    assert "constant" in reg.auto_.plan["selection"]["reason"]


def test_the_screening_route_keeps_the_checks_share_out():
    # p >> n: the classifier screens its features first; the screen, the model and the
    # check split the budget (sum of mu^2 = mu^2) and the fit spends exactly epsilon
    rng = np.random.default_rng(0)
    X = rng.normal(size=(90, 300))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    clf = dpopt.DPLogisticRegression(epsilon=16.0, classes=[0, 1], random_state=0).fit(X, y)
    plan = clf.auto_.plan
    assert "screen" in plan and plan["selection"]["in_sample"]
    shares = plan["mu_shares"]
    assert {"feature_selection", "in_sample_check", "model"} <= set(shares)
    assert math.fsum(v * v for v in shares.values()) == pytest.approx(
        gdp_mu(16.0, 1.0 / 90 ** 2) ** 2, rel=1e-9)
    assert 16.0 - 1e-6 < clf.epsilon_spent_ <= 16.0 * (1 + 1e-9)


def test_a_collapsed_target_pools_a_mean_on_all_rows_instead_of_a_check():
    # the branch's target histogram collapsed: it released the private mean of y, not a
    # model; the check's share buys a second mean on all rows, pooled (nothing compared)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = X[:, 0] * 3 + 3 + rng.normal(size=80)
    reg = dpopt.DPLinearRegression(epsilon=8.0, delta=1e-5, random_state=0).fit(X, y)
    plan, sel = reg.auto_.plan, reg.auto_.plan["selection"]
    assert plan["target_collapsed"] and sel["released"] == "noisy mean of y (pooled)"
    assert "the release on all rows" in sel["noisy_mean_from"]
    mu_s = plan["constant_mu"]
    assert mu_s == pytest.approx(gdp_mu(8.0, 1e-5) * math.sqrt(VALIDATION_FRACTION))
    assert plan["mu_shares"]["constant"] == mu_s  # the report's split names it
    assert reg.fit_result_.mechanisms[-1] == Gaussian(1.0 / mu_s, 1)  # released, once
    assert reg.epsilon_spent_ == pytest.approx(epsilon_of(reg.fit_result_.mechanisms, 1e-5))
    np.testing.assert_array_equal(reg.coef_, 0.0)


def test_no_range_at_all_spends_what_the_branch_left_on_the_mean():
    # a target of zeros and three huge values: no range is located, no model; the mean on
    # all rows takes the check's share and what the branch left, as on the held-out path
    rng = np.random.default_rng(2)
    X = rng.normal(size=(90, 3))
    y = np.r_[np.zeros(87), 1e6 * np.ones(3)]
    reg = dpopt.DPLinearRegression(epsilon=3.0, random_state=2).fit(X, y)
    sel = reg.auto_.plan["selection"]
    assert sel["released"] == "noisy mean of y (all)"
    assert sel["reason"].startswith("all constant on 90 rows")
    assert reg.epsilon_spent_ == pytest.approx(3.0, rel=1e-9)  # all of it, no more


def test_the_plan_says_the_paid_constant_is_from_all_rows():
    found = []
    for seed in range(6):
        X, y = _noise_regression(90, seed=seed)
        sel = dpopt.DPLinearRegression(epsilon=16.0, random_state=seed).fit(X, y).auto_.plan[
            "selection"]
        assert "held-out" not in sel["reason"] and "held-out" not in str(sel["noisy_mean_from"])
        found.append(str(sel["noisy_mean_from"]))
    assert any(s.startswith("all rows (half of mu_v)") for s in found), found


def test_no_checked_fit_raises_a_privacy_leak_warning():
    # every fit below 100 rows on raw data, with only epsilon given: regressors, a binary
    # classifier (labels selected privately) and three classes, dense and sparse
    import scipy.sparse as sp

    rng = np.random.default_rng(5)
    X = rng.normal(size=(90, 4)) * [1.0, 10.0, 100.0, 0.1] + [0.0, 5.0, -40.0, 1.0]
    z = X[:, 0] + X[:, 1] / 10
    fits = [(dpopt.DPLinearRegression(epsilon=8.0), X, 30.0 + 5.0 * z),
            (dpopt.DPHuberRegressor(epsilon=8.0), X, 30.0 + 5.0 * z),
            (dpopt.DPLogisticRegression(epsilon=8.0), X, np.where(z > 0, "yes", "no")),
            (dpopt.DPLogisticRegression(epsilon=8.0), sp.csr_matrix(np.abs(X)),
             np.where(z > 0, "yes", "no")),
            (dpopt.DPLogisticRegression(epsilon=8.0), X, np.digitize(z, [-0.5, 0.5]))]
    for est, A, b in fits:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            warnings.simplefilter("error", dpopt.PrivacyLeakWarning)  # checked first
            est.set_params(random_state=0).fit(A, b)
        assert est.privacy_leaks_ == []
        assert est.auto_.plan["selection"].get("in_sample") or \
            est.auto_.plan["selection"]["reason"].startswith("no selection: nothing")
