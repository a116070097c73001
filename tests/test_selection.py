"""The default path's private choice between its model and the constant (dpopt.pipeline.selection)."""

import math
import warnings

import numpy as np
import pytest

import dpopt
from dpopt.pipeline.selection import (
    MARGIN,
    VALIDATION_FRACTION,
    choose,
    constant_resolved,
    default_alpha,
    noisy_scores,
    validation_mu,
)
from dpopt.privacy import Gaussian, ObjectivePerturbation, gdp_mu


def noise_labels(n=1500, p=5, rate=0.8, seed=0):
    """Labels independent of the features: no model beats the majority class."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * 10 + 3
    return X, np.where(rng.random(n) < rate, "yes", "no")


def signal(n=3000, p=5, seed=0, regression=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * 4 - 2
    z = X @ np.linspace(1, -1, p)
    if regression:
        return X, z + 0.5 * rng.standard_normal(n) + 100
    return X, (z > 0).astype(int)


def fit_quiet(est, X, y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, y)
    assert not [w for w in caught if issubclass(w.category, dpopt.PrivacyLeakWarning)]
    return est


# ------------------------------------------------------------------ the mechanism


def test_validation_mu_composes_gaussian_and_objective_perturbation_records():
    recs = [Gaussian(2.0, 4), ObjectivePerturbation(0.5, shift=0.1, dof=2), Gaussian(10.0)]
    assert validation_mu(recs) == pytest.approx(math.sqrt(4 / 4 + 4 + 0.01))
    # a record it cannot compare (here pure DP) is left out: the bound only gets smaller
    assert validation_mu([dpopt.privacy.PureDP(1.0)]) == 0.0


def test_noisy_scores_have_the_stated_noise_and_refuse_scores_outside_0_1():
    rng = np.random.default_rng(0)
    per = rng.random((400, 2))
    draws = np.array([noisy_scores(per, 0.5, rng)[0] for _ in range(4000)])
    sigma = math.sqrt(2) / (400 * 0.5)
    assert draws.mean(0) == pytest.approx(per.mean(0), abs=4 * sigma / math.sqrt(4000) * 3)
    assert draws.std(0) == pytest.approx([sigma, sigma], rel=0.06)
    with pytest.raises(RuntimeError, match="outside"):
        noisy_scores(per + 1.0, 0.5, rng)


def test_replacing_one_validation_record_moves_every_mean_by_at_most_1_over_m():
    rng = np.random.default_rng(1)
    per = rng.random((50, 3))
    other = per.copy()
    other[7] = [1.0, 0.0, 1.0]
    assert np.max(np.abs(per.mean(0) - other.mean(0))) <= 1 / 50 + 1e-15


def test_choose_keeps_the_constant_unless_the_model_is_clearly_better():
    sigma = 0.01
    edge = MARGIN * sigma * math.sqrt(2)
    assert choose(0.80, np.array([0.79, 0.21]), sigma) == (0, False)
    assert choose(0.79 + edge * 1.01, np.array([0.79, 0.21]), sigma) == (0, True)
    assert choose(0.5, np.array([0.3, 0.7]), sigma) == (1, False)


def test_a_classifiers_constant_is_released_only_when_the_majority_is_resolved():
    sigma = 0.05
    edge = MARGIN * 2 * sigma  # the noise of 2 s - 1 is twice that of s
    assert constant_resolved(np.array([0.5 + edge / 2 * 1.01, 0.5 - edge / 2 * 1.01]), sigma)
    assert not constant_resolved(np.array([0.5 + edge / 2 * 0.99, 0.5 - edge / 2 * 0.99]),
                                 sigma)
    assert constant_resolved(np.array([-3.0]), sigma)  # one constant: its score measures it


def test_an_unresolved_majority_is_reported_and_the_rule_still_applies():
    X, y = noise_labels(n=400, rate=0.55)
    clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=0.3, random_state=0,
                                               classes=["no", "yes"]), X, y)
    sel = clf.auto_.plan["selection"]
    assert not sel["constant_resolved"] and "not resolved" in sel["reason"]
    best, use_model = choose(sel["noisy_scores"][0], np.array(sel["noisy_scores"][1:]),
                             sel["sigma"])
    assert sel["released"] == ("model" if use_model else sel["candidates"][1 + best])


def test_default_alpha_is_scikit_learns_default_model():
    assert default_alpha("logistic", 200) == 1 / 200  # LogisticRegression(C=1)
    assert default_alpha("squared", 200) == 0.0       # LinearRegression


# ------------------------------------------------------------------ the estimators


@pytest.mark.parametrize("eps", [0.5, 4.0])
def test_labels_without_signal_get_the_majority_class(eps):
    X, y = noise_labels()
    clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=eps, random_state=0), X, y)
    sel = clf.auto_.plan["selection"]
    assert sel["released"] == "constant +1" and sel["validation_rows"] == 300
    Xt, yt = noise_labels(seed=5)
    assert np.all(clf.predict(Xt) == "yes")
    assert clf.epsilon_spent_ <= eps * (1 + 1e-9)
    assert clf.predict_proba(Xt)[0, 1] > 0.5  # the constant's probability is its noisy rate


def test_a_clear_signal_releases_the_model_and_reports_the_selection():
    X, y = signal()
    clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=2.0, random_state=0), X, y)
    sel = clf.auto_.plan["selection"]
    assert sel["released"] == "model" and clf.score(X, y) > 0.9
    assert "held-out selection" in clf.privacy_report()
    assert clf.fit_result_.params["auto"]["selection"] is sel


def test_regression_without_signal_is_no_worse_than_the_mean():
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((5000, 4)) * 5, rng.standard_normal(5000) * 3 + 50
    scores = []
    for seed in range(3):
        reg = fit_quiet(dpopt.DPLinearRegression(epsilon=1.0, random_state=seed), X, y)
        Xt, yt = rng.standard_normal((2000, 4)) * 5, rng.standard_normal(2000) * 3 + 50
        scores.append(reg.score(Xt, yt))
    assert np.mean(scores) > -0.01


def test_regression_with_signal_releases_the_model():
    X, y = signal(regression=True)
    reg = fit_quiet(dpopt.DPLinearRegression(epsilon=2.0, random_state=0), X, y)
    assert reg.auto_.plan["selection"]["released"] == "model" and reg.score(X, y) > 0.5


def test_whole_pipeline_is_one_charge_of_the_training_branch():
    X, y = signal(n=1000)
    acc = dpopt.BudgetAccountant(epsilon=1.0, delta=1e-5)
    clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=0.6, delta=1e-6, random_state=0,
                                               accountant=acc, classes=[0, 1]), X, y)
    assert len(acc.ledger) == 1 and acc.ledger[0].epsilon == clf.epsilon_spent_
    assert clf.epsilon_spent_ == pytest.approx(0.6, rel=1e-6)
    sel = clf.auto_.plan["selection"]
    # the score release is dominated by the training branch's records
    assert sel["mu"] == pytest.approx(validation_mu(clf.fit_result_.mechanisms))
    assert sel["mu"] <= gdp_mu(0.6, 1e-6) * (1 + 1e-9)
    assert sel["sigma"] == pytest.approx(math.sqrt(sel["released_columns"])
                                         / (sel["validation_rows"] * sel["mu"]))


def test_a_failed_fit_charges_nothing_and_keeps_the_estimator():
    X, y = signal(n=500)
    acc = dpopt.BudgetAccountant(epsilon=0.5, delta=1e-5)
    clf = dpopt.DPLogisticRegression(epsilon=1.0, accountant=acc)
    with pytest.raises(dpopt.BudgetExceededError):
        clf.fit(X, y)
    assert acc.ledger == [] and not hasattr(clf, "coef_")


def test_the_model_is_trained_on_the_other_rows():
    X, y = signal(n=1000)
    clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=1.0, random_state=0), X, y)
    assert clf.auto_.plan["selection"]["validation_rows"] == int(VALIDATION_FRACTION * 1000)


def test_tiny_data_skips_the_selection_and_says_why():
    X, y = signal(n=60)
    clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=8.0, random_state=0), X, y)
    assert "no selection" in clf.auto_.plan["selection"]["reason"]


@pytest.mark.parametrize("alpha", ["big", -1.0, float("nan"), True])
def test_alpha_must_be_auto_or_a_non_negative_number(alpha):
    X, y = signal(n=100)
    with pytest.raises(ValueError, match="alpha"):
        dpopt.DPLogisticRegression(alpha=alpha).fit(X, y)


def test_alpha_auto_is_one_over_n_for_an_explicit_solver_too():
    X, y = signal(n=300)
    clf = dpopt.DPLogisticRegression(epsilon=1.0, solver="objective-perturbation",
                                     solver_options={"row_bound": 1.0}, random_state=0,
                                     classes=[0, 1])
    fit_quiet(clf, X / 20, y)
    assert clf.fit_result_.params.get("alpha", 1 / 300) == pytest.approx(1 / 300)


def test_no_default_fit_raises_a_privacy_leak_warning():
    """A plain fit of every estimator on raw data, dense and sparse, raises none."""
    import scipy.sparse as sp

    X, y = signal(n=800)
    Xr, yr = signal(n=800, regression=True)
    for est, (A, b) in [(dpopt.DPLogisticRegression(epsilon=1.0), (X, y)),
                        (dpopt.DPLogisticRegression(epsilon=1.0), (sp.csr_matrix(np.abs(X)), y)),
                        (dpopt.DPLinearRegression(epsilon=1.0), (Xr, yr)),
                        (dpopt.DPLasso(epsilon=1.0, alpha=0.01), (Xr, yr)),
                        (dpopt.DPHuberRegressor(epsilon=1.0), (Xr, yr))]:
        fit_quiet(est.set_params(random_state=0), A, b)
        assert est.privacy_leaks_ == []


# ------------------------------------------------------------------ constants from earlier releases


def test_undeclared_labels_name_the_majority_from_their_released_counts():
    X, y = noise_labels(n=400, rate=0.7)
    hits = 0
    for seed in range(5):
        clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=0.5, random_state=seed), X, y)
        sel = clf.auto_.plan["selection"]
        assert sel["majority_from"] == "the labels' noisy counts"
        counts = clf.auto_.plan["table"]["label_counts"]
        assert len(counts) == 2  # released with the labels: 'no', 'yes' in np.unique order
        hits += sel["released"] == "model" or np.all(clf.predict(X) == "yes")
    assert hits == 5


def test_declared_labels_leave_the_majority_to_the_held_out_rows():
    X, y = noise_labels(n=400, rate=0.7)
    clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=0.5, random_state=0,
                                               classes=["no", "yes"]), X, y)
    assert clf.auto_.plan["selection"]["majority_from"] is None


def test_adassps_released_sum_of_y_is_the_free_constant():
    X, y = signal(regression=True)
    reg = fit_quiet(dpopt.DPLinearRegression(epsilon=1.0, random_state=0), X, y)
    sel = reg.auto_.plan["selection"]
    assert sel["noisy_mean_from"].startswith("the training branch")
    # all of mu_v goes to the scores, and nothing more is spent than the target
    assert sel["mu_scores"] == sel["mu"] and sel["sigma_mean"] is None
    assert reg.epsilon_spent_ == pytest.approx(1.0, rel=1e-6)
    # the free mean is sum(y_scaled) / n_train up to AdaSSP's noise sigma_3 / n_train
    n_train = len(y) - sel["validation_rows"]
    sigma_3 = reg.fit_result_.params["sigmas"][2]
    exact = np.mean(reg.auto_.target.transform(y))
    assert abs(sel["noisy_mean"] - exact) < 5 * sigma_3 / n_train + 0.05


def test_the_paired_difference_and_the_constant_have_the_stated_noise():
    from dpopt.pipeline.selection import noisy_difference, noisy_mean

    rng = np.random.default_rng(3)
    diffs = rng.uniform(-0.3, 0.3, 200)
    draws = np.array([noisy_difference(diffs, 0.3, 0.5, rng)[0] for _ in range(4000)])
    assert draws.std() == pytest.approx(2 * 0.3 / (200 * 0.5), rel=0.06)  # 2 H / (m mu)
    assert draws.mean() == pytest.approx(diffs.mean(), abs=0.002)
    with pytest.raises(RuntimeError, match="beyond its bound"):
        noisy_difference(diffs, 0.1, 0.5, rng)
    values = rng.uniform(-0.2, 0.2, 100)
    means = np.array([noisy_mean(values, 2.0, rng) for _ in range(4000)])
    assert means.std() == pytest.approx(2 / (100 * 2.0), rel=0.06)  # sensitivity 2/m
