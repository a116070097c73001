"""The default path's private choice between its model and the constant (dpopt.pipeline.selection)."""

import dataclasses
import math
import warnings

import numpy as np
import pytest

import dpopt
from dpopt.pipeline.selection import (
    MARGIN,
    SAMPLE_ROWS,
    VALIDATION_FRACTION,
    choose,
    constant_resolved,
    default_alpha,
    noisy_scores,
    validation_mu,
)
from dpopt.privacy import Gaussian, ObjectivePerturbation, epsilon_of, gdp_mu


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
    per[3, 1] = np.nan  # a NaN score is not in [0, 1] either: nothing is released
    with pytest.raises(RuntimeError, match="outside"):
        noisy_scores(per, 0.5, rng)


def test_a_nan_difference_counts_as_beyond_its_bound():
    """The held-out sums refuse a paired difference that is NaN, as one beyond its bound
    (a NaN compares False with anything, so a plain "> bound" test would let it through)."""
    from dpopt.pipeline.held_out import _beyond

    d = np.array([0.1, -0.2, np.nan, 0.5, -np.inf])
    assert _beyond(d, 0.5).tolist() == [False, False, True, False, True]


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
    counts = clf.auto_.plan["table"]["label_counts"]  # the majority: the larger noisy count
    best, use_model = choose(sel["noisy_scores"][0], np.array(sel["noisy_scores"][1:]),
                             sel["sigma"], best=0 if counts[1] >= counts[0] else 1)
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
    assert sel["released"] == "model" and clf.score(X, y) > 0.7
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
    # the score release is dominated by the training branch's records (after the table
    # layer's one record: the declared labels' noisy counts, released on all rows)
    assert clf.auto_.plan["table"]["labels"] == "declared; their noisy counts released"
    assert sel["mu"] == pytest.approx(validation_mu(clf.fit_result_.mechanisms[1:]))
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


def test_the_held_out_rows_shrink_to_what_resolves_the_choice():
    """m = VALIDATION_FRACTION n, or fewer where MARGIN noise standard deviations of the
    compared difference are within TOLERANCE (and SAMPLE_ROWS keep the sample's own noise
    within it): a function of public n and mu that grows like 1/mu."""
    from scipy.optimize import minimize_scalar
    from scipy.stats import norm

    from dpopt.pipeline.selection import ARGMAX_LOSS, TOLERANCE, validation_rows

    worst = -minimize_scalar(lambda t: -t * norm.cdf(-t), bounds=(0, 3), method="bounded").fun
    assert ARGMAX_LOSS == pytest.approx(worst, abs=1e-4)
    assert ARGMAX_LOSS / math.sqrt(SAMPLE_ROWS) <= TOLERANCE
    assert ARGMAX_LOSS / math.sqrt(SAMPLE_ROWS - 1) > TOLERANCE
    assert validation_rows(1000) == validation_rows(1000, None) == 200
    assert validation_rows(1000, 100.0) == 200  # 0.2 n is below SAMPLE_ROWS: kept
    for n, mu, spread in [(50_000, 0.2, 1.0), (50_000, 0.5, 2.0), (200_000, 3.0, 2.3)]:
        m = validation_rows(n, mu, spread)
        assert SAMPLE_ROWS <= m < n // 5
        assert MARGIN * spread / (m * mu) <= TOLERANCE  # the margin is within tolerance
        if m > SAMPLE_ROWS:  # and not one row more than that asks
            assert MARGIN * spread / ((m - 1) * mu) > TOLERANCE
    assert validation_rows(50_000, 0.02, 1.0) == 10_000  # small mu: the whole fraction
    ms = [validation_rows(10**6, mu, 1.0) for mu in (0.05, 0.1, 0.2, 0.3)]
    assert ms == sorted(ms, reverse=True) and ms[0] == pytest.approx(2 * ms[1], abs=1)


def test_a_large_table_trains_on_more_rows_and_still_keeps_the_constant():
    """At a large n mu the model trains on n - m > 0.8 n rows (the plan says m); labels
    independent of the features still get the majority class (do no harm)."""
    X, y = noise_labels(n=20_000, p=5, rate=0.7)
    accs, ms = [], []
    for seed in range(4):
        clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=4.0, random_state=seed,
                                                   classes=["no", "yes"]), X, y)
        sel = clf.auto_.plan["selection"]
        ms.append(sel["validation_rows"])
        accs.append(np.mean(clf.predict(X) == y))
    assert all(SAMPLE_ROWS <= m < 20_000 // 5 for m in ms)
    assert np.mean(accs) >= np.mean(y == "yes") - 0.005
    X, y = signal(n=20_000)
    small = fit_quiet(dpopt.DPLogisticRegression(epsilon=0.05, random_state=0), X, y)
    assert small.auto_.plan["selection"]["validation_rows"] == 4000  # small mu: 0.2 n


def test_tiny_data_checks_the_model_on_its_own_rows_and_says_so():
    X, y = signal(n=60)
    clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=8.0, random_state=0), X, y)
    assert clf.auto_.plan["selection"]["reason"].startswith("in-sample check on 60 rows")
    inf = fit_quiet(dpopt.DPLogisticRegression(epsilon=8.0, random_state=0, inference=True),
                    X, y)
    assert "no selection" in inf.auto_.plan["selection"]["reason"]


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


def test_declared_labels_name_the_majority_from_their_noisy_counts_on_all_rows():
    X, y = noise_labels(n=400, rate=0.7)
    for seed in range(5):
        clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=0.5, random_state=seed,
                                                   classes=["no", "yes"]), X, y)
        plan = clf.auto_.plan
        assert plan["selection"]["majority_from"] == "the labels' noisy counts"
        assert plan["table"]["labels"] == "declared; their noisy counts released"
        assert len(plan["table"]["label_counts"]) == 2
        # the counts are one more Gaussian record of the one composition, within epsilon
        assert clf.epsilon_spent_ == pytest.approx(0.5, rel=1e-6)
        assert plan["selection"]["released"] == "model" or np.all(clf.predict(X) == "yes")


def test_declared_label_counts_have_the_stated_noise():
    """Too little noise is the worst bug: the counts' noise has sd sqrt(2) / mu_y, with
    mu_y the share of mu^2 of :func:`declared_label_share`; nothing else is added."""
    from dpopt.preprocessing.table_encoder import declared_label_share, prepare_default

    y = np.array(["no"] * 280 + ["yes"] * 120)
    X = np.zeros((400, 2))
    eps, delta = 0.5, 1 / 400 ** 2
    mu_y = gdp_mu(eps, delta) * math.sqrt(declared_label_share(400, gdp_mu(eps, delta)))
    draws = []
    for seed in range(3000):
        *_, prior = prepare_default(X, y, epsilon=eps, delta=delta, categories=None,
                                    feature_bounds=None, classes=["no", "yes"],
                                    classifier=True, rng=np.random.default_rng(seed),
                                    count_declared=True)
        draws.append(np.array(prior.info["label_counts"]) - [280, 120])
        assert prior.delta == 0.0 and len(prior.records) == 1
        assert prior.records[0] == Gaussian(1 / mu_y, 1)
    draws = np.array(draws)
    assert np.abs(draws.mean(axis=0)).max() < 4 * math.sqrt(2) / mu_y / math.sqrt(3000)
    np.testing.assert_allclose(draws.std(axis=0), math.sqrt(2) / mu_y, rtol=0.06)


def test_declared_labels_spend_nothing_when_no_selection_uses_their_counts():
    X, y = noise_labels(n=400, rate=0.7)
    clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=1.0, random_state=0, inference=True,
                                               classes=["no", "yes"]), X, y)
    assert "label_counts" not in clf.auto_.plan.get("table", {})
    # without an intercept there is no constant to compare with: no counts either
    plain = fit_quiet(dpopt.DPLogisticRegression(epsilon=4.0, random_state=0, fit_intercept=False,
                                                 classes=["no", "yes"]), X[:60], y[:60])
    assert "label_counts" not in plain.auto_.plan.get("table", {})
    # 60 rows: the model is checked on its own rows, against the majority the counts name
    tiny = fit_quiet(dpopt.DPLogisticRegression(epsilon=4.0, random_state=0,
                                                classes=["no", "yes"]), X[:60], y[:60])
    assert "label_counts" in tiny.auto_.plan["table"]
    assert tiny.auto_.plan["selection"]["majority_from"] is not None


def test_adassps_released_sum_of_y_is_the_free_constant():
    X, y = signal(regression=True)
    # about 0 (near 100 the target's further looks take from the model's budget and the
    # least squares go to DP-GD, which releases no sum of y: session 28)
    y = y - 100.0
    reg = fit_quiet(dpopt.DPLinearRegression(epsilon=1.0, random_state=0), X, y)
    assert reg.auto_.plan["solver"] == "adassp"
    sel = reg.auto_.plan["selection"]
    looked = "target_look_mean" in reg.auto_.plan  # the looks' own estimate, when they ran
    assert sel["noisy_mean_from"] == (
        "the training branch's release and "
        + ("the training branch's looks at y's range and " if looked else "")
        + "the release on all rows (already released: no new spending)")
    # all of mu_v goes to the scores, and nothing more is spent than the target
    assert sel["mu_scores"] == sel["mu"] and sel["sigma_mean"] is None
    assert reg.epsilon_spent_ == pytest.approx(1.0, rel=1e-6)
    # AdaSSP's mean, sum(y_scaled) / n_train up to its noise sigma_3 / n_train, pooled with
    # the one on all rows (noise 2 / (n mu_c)) and the looks' (their sd, in y's units)
    n_train = len(y) - sel["validation_rows"]
    precision = ((n_train / reg.fit_result_.params["sigmas"][2]) ** 2
                 + (len(y) * reg.auto_.plan["constant_mu"] / 2) ** 2)
    if looked:
        precision += (reg.auto_.target.half_width / reg.auto_.plan["target_look_mean"][1]) ** 2
    sd = 1 / math.sqrt(precision)
    exact = np.mean(reg.auto_.target.transform(y))
    assert abs(sel["noisy_mean"] - exact) < 5 * sd + 0.05


def test_a_regressors_constant_is_released_on_all_rows(monkeypatch):
    """The constant's own release: mu_c = constant_mu(n, mu) kept out of the training branch,
    the mean of y on all n rows with N(0, (2 / mu_c)^2) on its sum (captured at the call),
    its record in the composition, the total at most the target."""
    from dpopt.pipeline import scaling
    from dpopt.pipeline.constant import CONSTANT_LOSS, constant_mu

    n, mu = 15000, gdp_mu(1.0, 1e-8)
    assert constant_mu(n, mu) == pytest.approx(8 / (n * math.sqrt(CONSTANT_LOSS)))
    assert (constant_mu(n, mu) / mu) ** 2 < 0.01  # large n: under 1% of mu^2
    assert constant_mu(225, mu) == pytest.approx(mu * math.sqrt(0.1))  # small n: the cap
    calls = []
    original = scaling.noisy_target_mean  # the means of the records' adapters
    monkeypatch.setattr(scaling, "noisy_target_mean", lambda total, m, mu_, rng: calls.append(
        (m, mu_)) or original(total, m, mu_, rng))
    rng = np.random.default_rng(2)
    X = rng.standard_normal((300, 4))
    y = 40 + X @ np.array([0.5, -0.3, 0.2, 0.1]) + 2.0 * rng.standard_normal(300)
    reg = fit_quiet(dpopt.DPLinearRegression(epsilon=4.0, delta=1e-6, random_state=0), X, y)
    mu_c = reg.auto_.plan["constant_mu"]
    assert mu_c == pytest.approx(constant_mu(300, gdp_mu(4.0, 1e-6)))
    assert [c for c in calls if c[0] == 300] == [(300, mu_c)]  # all rows, at mu_c
    assert Gaussian(1 / mu_c, 1) in reg.fit_result_.mechanisms
    # the training branch shared what mu_c left: every record together is the target
    assert epsilon_of(reg.fit_result_.mechanisms, 1e-6) == pytest.approx(reg.epsilon_spent_)
    assert 3.99 < reg.epsilon_spent_ <= 4.0 + 1e-9
    mus = reg.auto_.plan["mu_shares"]
    assert mus["constant"] == mu_c
    assert sum(v ** 2 for v in mus.values()) == pytest.approx(gdp_mu(4.0, 1e-6) ** 2)


def test_a_small_regressions_released_constant_is_near_the_exact_mean():
    """Do no harm on 225 rows: the held-out choice releases the constant, now pooled from
    AdaSSP's and an all-rows release. Over 20 seeds at epsilon 2 its R^2 against the
    exact training mean's is within 0.04 (it was 0.10 without the all-rows release)."""
    rng = np.random.default_rng(1004)
    X = rng.standard_normal((300, 8)) * rng.uniform(1, 100, 8)
    y = ((X / X.std(0)) @ rng.uniform(-1, 1, 8)) + 2.0 * rng.standard_normal(300) + 40
    Xtr, ytr, yte = X[:225], y[:225], y[225:]

    def r2(pred):
        return 1 - np.sum((yte - pred) ** 2) / np.sum((yte - yte.mean()) ** 2)

    scores = []
    for seed in range(20):
        reg = fit_quiet(dpopt.DPLinearRegression(epsilon=2.0, random_state=seed), Xtr, ytr)
        if np.all(reg.coef_ == 0):
            scores.append(r2(np.full(len(yte), reg.intercept_)))
    assert len(scores) >= 15
    assert np.mean(scores) > r2(np.full(len(yte), ytr.mean())) - 0.04


def test_the_paired_difference_and_the_constant_have_the_stated_noise():
    from types import SimpleNamespace

    from dpopt.pipeline.held_out import held_out_totals
    from dpopt.pipeline.scaling import InMemoryData
    from dpopt.pipeline.selection import noisy_difference_total

    identity = SimpleNamespace(transform=lambda v: v)  # the values are the scaled target

    def noisy_mean(values, mu, rng):  # the held-out constant, as _select releases it
        return InMemoryData(np.empty((len(values), 0)), values).target_mean(identity, mu, rng)[0]

    rng = np.random.default_rng(3)
    # the paired differences as _select sums them: a model w x + 0 against the constant 0
    X, y = rng.uniform(-1, 1, (200, 1)), rng.uniform(-0.5, 0.5, 200)
    scaling = SimpleNamespace(transform=lambda v: v)
    cands = [("model", np.array([0.3]), 0.0), ("constant", np.zeros(1), 0.0)]
    data = InMemoryData(X, y)
    total = held_out_totals(data, scaling=scaling, target=identity, cands=cands,
                            regression=True, bound=0.3)[0]
    draws = np.array([noisy_difference_total(total, 200, 0.3, 0.5, rng)[0]
                      for _ in range(4000)])
    assert draws.std() == pytest.approx(2 * 0.3 / (200 * 0.5), rel=0.06)  # 2 H / (m mu)
    assert draws.mean() == pytest.approx(total / 200, abs=0.002)
    with pytest.raises(RuntimeError, match="beyond its bound"):  # gaps up to 0.3 x 1.3 / 4
        held_out_totals(data, scaling=scaling, target=identity, cands=cands, regression=True,
                        bound=0.02)
    values = rng.uniform(-0.2, 0.2, 100)
    means = np.array([noisy_mean(values, 2.0, rng) for _ in range(4000)])
    assert means.std() == pytest.approx(2 / (100 * 2.0), rel=0.06)  # sensitivity 2/m


# ------------------------------------------------------------------ the constant of a small regression


def small_regression(n=330, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)) * 5
    return X, rng.uniform(25, 345, n)


def test_too_few_rows_for_a_model_release_the_mean_of_all_rows():
    """When the training rows could not fit a model (public n, epsilon), the constant is the
    private mean of y computed from all n rows, in one charge, not from the training rows."""
    X, y = small_regression()
    errors = []
    for seed in range(8):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            reg = dpopt.DPLinearRegression(epsilon=0.5, random_state=seed).fit(X, y)
        sel = reg.auto_.plan["selection"]
        assert "released from all rows" in sel["reason"]
        assert sel["released"] == "noisy mean of y" and np.all(reg.coef_ == 0)
        assert reg.epsilon_spent_ <= 0.5 * (1 + 1e-9)
        errors.append(reg.intercept_ - y.mean())
    # the range [25, 345] is about 320 wide: the mean's noise is a few percent of it
    assert np.sqrt(np.mean(np.square(errors))) < 0.15 * 320


def test_the_mean_of_y_spends_on_its_bounds_only_what_they_need():
    """y's histogram is read at cumulative shares LOOKS of mu^2, each look released with
    the increment and pooled with the earlier ones; the looks stop at the share the public
    rule asks (records per bin for a decade spread evenly), or earlier when the range's
    noisy count shows it holds the bulk; the mean gets what is left. Every record is a
    Gaussian, their mu^2 add up to mu^2."""
    from dpopt.pipeline.mean_of_y import LOOKS, private_mean_of_y
    from dpopt.pipeline.scaling import InMemoryData, bounds_resolvable

    rng = np.random.default_rng(0)
    cases = [(20_000, 1.0, rng.uniform(25, 345, 20_000)),  # the first look resolves
             (330, 0.14, rng.uniform(25, 3450, 330)),  # spread over two decades: the rule
             (772, 0.055, 1000 + 42 * rng.standard_normal(772))]  # concentrated: early
    for n, mu, y in cases:
        target, mean, records, what, spent = private_mean_of_y(
            InMemoryData(np.zeros((n, 1)), y), mu, np.random.default_rng(1))
        rule = next((s for s in (0.25, 0.5) if bounds_resolvable(n / 2, 1, mu * math.sqrt(s))),
                    0.75)
        assert sum(1 / r.noise_multiplier ** 2 for r in records) == pytest.approx(mu ** 2)
        assert spent == mu and target is not None and "private mean" in what
        looks = [1 / (r.noise_multiplier * mu) ** 2 for r in records[:-1]]  # shares
        if "read again" in what:
            looks = looks[:-1]  # the equal bins' release
        assert np.cumsum(looks)[-1] == pytest.approx(LOOKS[len(looks) - 1])
        if n == 772:  # the rule asks 3/4; the first look's range holds the bulk
            assert rule == 0.75 and looks == pytest.approx([0.25])
            assert target.lower <= y.min() and y.max() <= target.upper
        elif n == 330:
            assert sum(looks) == pytest.approx(rule)
        else:
            assert looks == pytest.approx([0.25])


@pytest.mark.parametrize("n, rows, gaussian", [(20000, "all", True), (2000, "all", True),
                                               (20000, "held-out", False)])
def test_a_collapsed_training_target_falls_back_to_a_private_mean(monkeypatch, n, rows,
                                                                  gaussian):
    """If the training rows' histogram of y does not resolve, the model's share releases
    the private mean of y on those rows instead (a second histogram at that larger budget);
    if that does not resolve either (forced here), the private mean of y is released by
    all rows with the constant's mu_c and what the training branch left unspent (all of
    its records Gaussian: the budget is then spent exactly), or by the held-out rows with
    mu_v where n mu_c < m mu_v (a branch with a non-Gaussian record keeps mu_c only:
    simulated)."""
    from dpopt.pipeline import scaling, selection
    from dpopt.pipeline.constant import mu_left
    from dpopt.preprocessing._bounds import FeatureBounds

    if not gaussian:
        monkeypatch.setattr(selection, "mu_left", lambda auto, prior, whole, mu_c: mu_c)

    X, y = signal(n=n, regression=True)
    calls = []
    original = scaling.InMemoryData.target_bounds

    def collapse_two(self, mu, rng):
        out = original(self, mu, rng)
        calls.append(self.shape[0])
        if len(calls) <= 2:  # the training branch's two looks: spent, but unresolved
            return FeatureBounds(np.zeros(1), np.zeros(1), out.mechanisms)
        return out

    monkeypatch.setattr(scaling.InMemoryData, "target_bounds", collapse_two)
    reg = fit_quiet(dpopt.DPLinearRegression(epsilon=2.0, random_state=0), X, y)
    sel = reg.auto_.plan["selection"]
    m = n - calls[0]  # held out: n // 5, or fewer at this n mu (validation_rows)
    assert min(SAMPLE_ROWS, n // 5) <= m <= n // 5
    assert calls == [n - m, n - m, m if rows == "held-out" else n]
    assert sel["released"] == f"noisy mean of y ({rows})"
    assert np.all(reg.coef_ == 0) and abs(reg.intercept_ - y.mean()) < 0.1 * np.ptp(y)
    assert reg.epsilon_spent_ <= 2.0 * (1 + 1e-9)
    mechs = reg.fit_result_.mechanisms
    assert reg.epsilon_spent_ == pytest.approx(epsilon_of(mechs, reg.fit_result_.delta))
    if rows == "all":  # mu_c, kept out of the training branch, and what the branch left
        from dpopt.pipeline.constant import constant_mu

        whole = gdp_mu(2.0, 1 / n**2)
        own = sum(r.count / r.noise_multiplier ** 2 for r in mechs[:-1])
        assert sel["mu"] == reg.auto_.plan["constant_mu"] > constant_mu(n, whole)
        assert sel["mu"] ** 2 == pytest.approx(whole ** 2 - own, rel=1e-9)
        assert own + sel["mu"] ** 2 <= whole ** 2  # the whole budget, never more
        assert reg.epsilon_spent_ == pytest.approx(2.0, rel=1e-6)
        assert mu_left(reg.auto_, None, whole, 0.0) < 1e-5 * whole  # nothing is left after it


def test_a_collapsed_training_target_spends_the_model_share_on_its_mean(monkeypatch):
    """The training rows' histogram of y collapses (forced); AdaSSP's releases then give the
    private mean of y on the training rows (its range with AdaSSP's X^T X multiplier, its
    mean with the X^T y one: a subsequence of the planned records), pooled with the
    constant on all rows: no model is fitted on a constant target, and the released
    constant is near the mean of y."""
    from dpopt.pipeline import scaling
    from dpopt.pipeline.constant import constant_mu
    from dpopt.preprocessing._bounds import FeatureBounds
    from dpopt.privacy import gdp_epsilon
    from dpopt.solvers.adassp import SURE_SPLIT as ADASSP_SPLIT
    from dpopt.solvers.adassp import calibrate_adassp, check_budget_split

    n = 2000
    X, y = signal(n=n, regression=True)
    y = y + 40.0
    calls = []
    original = scaling.InMemoryData.target_bounds

    def collapse_first(self, mu, rng):
        out = original(self, mu, rng)
        calls.append((self.shape[0], mu))
        if len(calls) == 1:
            return FeatureBounds(np.zeros(1), np.zeros(1), out.mechanisms)
        return out

    monkeypatch.setattr(scaling.InMemoryData, "target_bounds", collapse_first)
    reg = fit_quiet(dpopt.DPLinearRegression(epsilon=2.0, random_state=0), X, y)
    plan, m = reg.auto_.plan, n // 5
    assert plan["target_collapsed"] and plan["solver"] == "none"
    assert plan["selection"]["released"] == "noisy mean of y (pooled)"
    assert [c[0] for c in calls] == [n - m, n - m]  # the second look on the training rows
    # AdaSSP's calibration at the model's share: its X^T X and X^T y multipliers, in order
    mu = gdp_mu(2.0, 1 / n ** 2)
    eps_model = gdp_epsilon(plan["mu_shares"]["model"], 1 / n ** 2)
    _, zs = calibrate_adassp(eps_model, 1 / n ** 2, check_budget_split(ADASSP_SPLIT))
    mechs = reg.fit_result_.mechanisms
    assert all(isinstance(r, Gaussian) for r in mechs)
    bounds, mean, constant = mechs[-3:]
    assert bounds.noise_multiplier >= zs[1] and mean.noise_multiplier >= zs[2]
    assert bounds.noise_multiplier == pytest.approx(zs[1], rel=1e-12)
    assert mean.noise_multiplier == pytest.approx(zs[2], rel=1e-12)
    assert calls[1][1] == pytest.approx(1 / zs[1], rel=1e-12)
    assert constant == Gaussian(1 / plan["constant_mu"], 1)
    # z_1 (the eigenvalue's share) is not spent, nor the second look's mu (kept from the
    # model by public sizes; a collapsed range cannot be read again): less than mu^2
    total = sum(r.count / r.noise_multiplier ** 2 for r in mechs)
    unread = plan["mu_shares"]["target_refine"] ** 2
    assert total == pytest.approx(mu ** 2 - 1 / zs[0] ** 2 - unread, rel=1e-6)
    assert total < mu ** 2
    assert reg.epsilon_spent_ < 2.0
    assert plan["constant_mu"] == constant_mu(n, mu)
    assert np.all(reg.coef_ == 0) and abs(reg.intercept_ - y.mean()) < 0.05 * np.std(y)


def test_the_high_dimensional_route_names_the_majority_from_its_class_share():
    """p >> n without signal: a released class count names the majority, so the held-out
    release never picks the minority class by its noise (it did on 1 fit of 5 at epsilon =
    0.25 in the practitioner benchmark's sparse-wide table). Declared classes get their
    counts on all rows before the screen since session 25 (the screen's class share counted
    records of neither class as negatives), so those name it here."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    n, p = 600, 20_000
    X = sp.random(n, p, density=0.002, format="csr", random_state=rng)
    y = np.where(rng.random(n) < 0.1, 1.0, -1.0)
    for seed in range(5):
        clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=0.25, random_state=seed,
                                                   classes=[-1.0, 1.0]), X, y)
        sel = clf.auto_.plan["selection"]
        assert "screen" in clf.auto_.plan
        assert sel["majority_from"] == "the labels' noisy counts"
        assert np.mean(clf.predict(X) == -1.0) == 1.0


def test_the_private_mean_of_y_has_the_stated_noise():
    """Too little noise is the worst bug: given the bounds it released, the constant differs
    from the exact mean of y clipped to them and mapped to [-1, 1] by Gaussian noise of sd
    2 / (n mu_m), mu_m = mu sqrt(1 - share) (replace-one sensitivity 2/n); nothing else."""
    from dpopt.pipeline.mean_of_y import private_mean_of_y
    from dpopt.pipeline.scaling import InMemoryData

    n, mu = 20_000, 0.5
    y = np.random.default_rng(0).uniform(25, 345, n)
    data = InMemoryData(np.zeros((n, 1)), y)
    errors = []
    for seed in range(1500):
        target, mean, records, _, _ = private_mean_of_y(data, mu, np.random.default_rng(seed))
        exact = float(np.mean(np.clip(target.transform(y), -1.0, 1.0)))
        errors.append(mean - exact)
        mu_m = 1.0 / records[-1].noise_multiplier
    sd = 2.0 / (n * mu_m)
    assert abs(np.mean(errors)) < 4 * sd / math.sqrt(1500)
    assert np.std(errors) == pytest.approx(sd, rel=0.06)
    assert mu_m == pytest.approx(mu * math.sqrt(0.75))  # bounds took 1/4 of mu^2 at this n


def test_the_paired_difference_is_clipped_at_the_released_gap_bound():
    """H = min(1, |b - c| + ||w||_1) is 1 with many features while a record's score gap
    is far smaller; a quarter of the score release's mu^2 releases the gaps' histogram, its
    upper 1% bound T clips the differences, and the rest releases their mean with noise
    2 T / (m mu_d): mu_q^2 + mu_d^2 = mu_s^2 (the release stays mu_s-GDP). T is an edge of
    the public grid, at most H, and the clipped sum is the sum of the clipped differences."""
    from types import SimpleNamespace

    from dpopt.pipeline.held_out import (
        GAP_EDGES,
        GAP_SHARE,
        clipped_difference_split,
        gap_clip,
        held_out_totals,
        noisy_gap_counts,
        per_record_scores,
    )
    from dpopt.pipeline.scaling import InMemoryData

    rng = np.random.default_rng(0)
    m, p, mu = 2000, 40, 0.8
    X = rng.uniform(-1, 1, (m, p)) * 0.3
    w = rng.normal(0, 0.1, p)  # ||w||_1 about 3: H = 1
    y = np.clip(X @ w + 0.1 * rng.standard_normal(m), -1, 1)
    identity = SimpleNamespace(transform=lambda v: v)
    cands = [("model", w, 0.0), ("constant", np.zeros(p), 0.0)]
    maps = {"scaling": identity, "target": identity, "cands": cands}
    data = InMemoryData(X, y)
    clip, mu_d, sigma_q = clipped_difference_split(data, **maps, bound=1.0, mu=mu,
                                                   rng=np.random.default_rng(1))
    d = np.diff(per_record_scores(identity, identity, cands, X, y, True)[:, ::-1], axis=1)
    gaps = np.abs(d)  # the score gaps, |f - c| |2 y - f - c| / 4: below |f - c|
    assert clip in GAP_EDGES and np.quantile(gaps, 0.99) < clip < 0.5  # H = 1
    assert clip < np.quantile(np.abs(X @ w), 0.9)  # follows the gaps, not their bound
    mu_q = math.sqrt(2) / sigma_q
    assert mu_q ** 2 + mu_d ** 2 == pytest.approx(mu ** 2)
    assert mu_q ** 2 == pytest.approx(GAP_SHARE * mu ** 2)
    total = held_out_totals(data, **maps, regression=True, bound=1.0, clip=clip)[0]
    assert total == pytest.approx(np.clip(d, -clip, clip).sum())
    # the histogram's noise is the stated sqrt(2) / mu_q (too little noise is the worst bug)
    exact = noisy_gap_counts(data, **maps, mu=np.inf, rng=rng)[0]
    draws = np.array([noisy_gap_counts(data, **maps, mu=mu_q, rng=rng)[0] - exact
                      for _ in range(300)])
    assert draws.std() == pytest.approx(math.sqrt(2) / mu_q, rel=0.05)
    assert exact.sum() == m
    # a scan that cannot stop (all the mass hidden by the noise) keeps H
    assert gap_clip(np.zeros(GAP_EDGES.size - 1), 1e6, m, 0.7) == 0.7
    # a model that is the constant has nothing to compare: no histogram, all of mu
    assert clipped_difference_split(data, **maps, bound=0.0, mu=mu, rng=rng) == (0.0, mu, None)


def test_an_unresolved_histogram_of_y_is_released_again_and_pooled(monkeypatch):
    """A target spread over three decades with 220 rows: the looks up to 3/4 of mu often
    cannot locate it, and the constant was then 0 (R^2 about -0.5 here). The rest of mu
    releases the histogram once more; pooled with the looks it is the release at mu, which
    resolves in most of those fits, and the constant is read from it. Either way the
    records are Gaussian histograms whose mu^2 add up to mu^2."""
    from dpopt.pipeline import mean_of_y
    from dpopt.pipeline.mean_of_y import private_mean_of_y
    from dpopt.pipeline.scaling import InMemoryData

    n, mu = 220, 0.28
    y = 10 ** np.random.default_rng(0).uniform(0, 3, n)
    data = InMemoryData(np.zeros((n, 1)), y)

    def fits(seeds=60):
        out = []
        for seed in range(seeds):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                target, mean, records, what, spent = private_mean_of_y(
                    data, mu, np.random.default_rng(seed))
            out.append((target, mean, records, what, spent))
        return out

    again = [f for f in fits() if "histograms" in f[3]]
    rescued = [f for f in again if f[0] is not None]
    assert len(rescued) >= 3 and len(rescued) > len(again) - len(rescued)
    for *_, records, _, spent in again:
        assert spent == mu and len(records) == len(mean_of_y.LOOKS) + 1
        assert sum(1 / r.noise_multiplier ** 2 for r in records) == pytest.approx(mu ** 2)
    errors = [t.center + t.half_width * m - y.mean() for t, m, *_ in rescued]
    assert np.sqrt(np.mean(np.square(errors))) < 0.5 * np.std(y)
    zeros = sum(f[0] is None for f in fits())
    monkeypatch.setattr(mean_of_y, "_released_again", lambda data, releases, mu, rng: (
        None, 0.0, releases[1], "the constant 0", mu * math.sqrt(mean_of_y.LOOKS[-1])))
    assert sum(f[0] is None for f in fits()) >= zeros + 3  # without the second look


def test_a_target_mostly_zero_has_its_nonzero_values_located():
    """85% of the targets are exactly 0 and the rest exponential: the histogram's scans
    stop at the zero bin, and the constant was 0 (R^2 loss (mean / sd)^2 = 0.08 at any
    budget). The same pooled counts without the zero bin locate the nonzero values (free),
    the mean is then taken over [0, their upper bound], and the loss falls; a target that
    is all zeros keeps the constant 0. The records still add up to mu^2."""
    from dpopt.pipeline import mean_of_y
    from dpopt.pipeline.mean_of_y import private_mean_of_y
    from dpopt.pipeline.scaling import InMemoryData

    n, mu = 772, gdp_mu(1.0, 1 / 772 ** 2)

    def losses(seeds=40):
        out = []
        for seed in range(seeds):
            r = np.random.default_rng(seed)
            y = np.where(r.random(n) < 0.85, 0.0, r.exponential(5.0, n))
            target, mean, records, _, spent = private_mean_of_y(
                InMemoryData(np.zeros((n, 1)), y), mu, np.random.default_rng(100 + seed))
            assert sum(1 / m.noise_multiplier ** 2 for m in records) == pytest.approx(
                spent ** 2)
            c = 0.0 if target is None else target.center + target.half_width * mean
            out.append(((c - y.mean()) / y.std()) ** 2)
        return np.mean(out)

    located = losses()
    original = mean_of_y._located

    def zero_kept(noisy, sigma, n, grid, final=False):  # the scans alone, as before
        lo, hi, unresolved = mean_of_y.histogram_bounds(noisy, sigma, n, (0.01, 0.99),
                                                        grid=grid)
        return (None, None) if unresolved[0] else (float(lo[0]), float(hi[0]))

    mean_of_y._located = zero_kept
    try:
        kept = losses()
    finally:
        mean_of_y._located = original
    assert kept > 0.07 and located < 0.5 * kept
    zeros = np.zeros(n)
    target, mean, records, what, _ = private_mean_of_y(InMemoryData(np.zeros((n, 1)), zeros),
                                                       mu, np.random.default_rng(0))
    assert target is None and mean == 0.0 and "constant 0" in what


def test_pooled_histograms_have_the_noise_of_one_release_at_the_whole_mu():
    """Too little noise is the worst bug: two releases at mu_1 and mu_2, pooled, must carry
    the noise of one release at sqrt(mu_1^2 + mu_2^2), no less (measured on 4,000 draws),
    and the histogram's mean reads the mean of the values in its range."""
    from dpopt.preprocessing._bounds import DEFAULT_GRID, private_target_bounds
    from dpopt.preprocessing._refine import histogram_mean, pooled_counts

    y = np.random.default_rng(1).uniform(20, 300, 400)
    exact = np.bincount(DEFAULT_GRID.bin_index(y), minlength=DEFAULT_GRID.n_bins)
    rng = np.random.default_rng(2)
    draws, sigmas = [], set()
    for _ in range(4000 // DEFAULT_GRID.n_bins + 1):
        first = private_target_bounds(y, 0.3, rng)
        second = private_target_bounds(y, 0.4, rng)
        noisy, sigma = pooled_counts(first, second)
        draws.append(noisy[0] - exact)
        sigmas.add(round(sigma, 12))
    assert sigmas == {round(math.sqrt(2) / 0.5, 12)}
    assert np.std(np.concatenate(draws)) == pytest.approx(math.sqrt(2) / 0.5, rel=0.05)
    lo, hi = 17.78279410038923, 316.22776601683796  # the grid's edges around [20, 300]
    assert histogram_mean(exact, lo, hi) == pytest.approx(y.mean(), rel=0.1)


def test_a_concentrated_target_is_read_again_on_equal_bins():
    """A target of 1000 +- 30 falls in one or two bins of the log grid ([562, 1778] is
    about 40 of its standard deviations); a second histogram on 16 equal bins of that
    range narrows it, and the mean, whose noise is proportional to the range's width,
    gets 30 times closer in mean squared error (measured: R² loss 0.0022 -> 0.0001 at
    epsilon = 1, n = 5,000). Both branches spend exactly mu."""
    from dpopt.pipeline import mean_of_y
    from dpopt.pipeline.mean_of_y import private_mean_of_y
    from dpopt.pipeline.scaling import InMemoryData

    n, mu = 5000, 0.5
    y = 1000.0 + 30.0 * np.random.default_rng(0).standard_normal(n)
    data = InMemoryData(np.zeros((n, 1)), y)

    def errors(seeds=40):
        out = []
        for seed in range(seeds):
            target, mean, records, what, spent = private_mean_of_y(
                data, mu, np.random.default_rng(seed))
            assert sum(1 / r.noise_multiplier ** 2 for r in records) == pytest.approx(mu ** 2)
            assert spent == mu
            out.append(target.center + target.half_width * mean - y.mean())
        return np.sqrt(np.mean(np.square(out))), records, what, target

    refined, records, what, target = errors()
    assert len(records) >= 3 and "read again" in what  # a look, or more while they narrow
    assert target.upper - target.lower < 0.25 * (10 ** 3.25 - 10 ** 2.75)  # 1/4 of [562, 1778]
    original = mean_of_y.concentrated
    try:  # the same fits without the second look
        mean_of_y.concentrated = lambda lower, upper: False
        once, records, what, _ = errors()
    finally:
        mean_of_y.concentrated = original
    assert len(records) == 2 and "read again" not in what
    assert refined < 0.5 * once and refined < 0.02 * 30


def test_classifier_with_released_label_counts_releases_the_model_score_alone():
    """The labels' noisy counts (all n rows) give the majority and its rate, so the held-out
    release is the model's accuracy alone: one column, sigma = 1 / (m mu_v) (sensitivity
    1/m: one record's correctness flips once), and the constants' scores are the rate and
    its complement (post-processing, no held-out noise on them)."""
    X, y = signal(n=2000)
    clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=1.0, random_state=0), X, y)
    plan = clf.auto_.plan
    sel, counts = plan["selection"], plan["table"]["label_counts"]
    assert sel["released_columns"] == 1 and sel["majority_from"] == "the labels' noisy counts"
    assert sel["sigma"] == pytest.approx(1.0 / (sel["validation_rows"] * sel["mu"]))
    rate = max(counts) / sum(counts)
    assert sorted(sel["noisy_scores"][1:]) == pytest.approx(sorted([rate, 1.0 - rate]))
    assert sel["released"] == "model" and clf.score(X, y) > 0.7


def test_the_decision_against_a_known_rate():
    """Released when the noisy accuracy beats the rate by MARGIN standard deviations of
    sqrt(sigma^2 + sd(rate)^2); sigma = 1/(m mu); the noise is rebuilt from the draws."""
    from dpopt.pipeline.selection import against_known_rate

    m, mu, rate, rate_sd = 200, 0.5, 0.7, 0.004
    sigma = 1.0 / (m * mu)
    s = math.hypot(sigma, rate_sd)
    z = np.random.default_rng(3).standard_normal(1)[0]
    for gain, expect in ((MARGIN * s + 0.01 - sigma * z, True),
                         (MARGIN * s - 0.01 - sigma * z, False)):
        noisy, sig, use = against_known_rate(m * (rate + gain), m, mu,
                                             np.random.default_rng(3), rate, rate_sd)
        assert sig == pytest.approx(sigma) and use is expect
        assert noisy == pytest.approx(rate + gain + sigma * z)


def test_a_known_rate_margin_counts_the_held_out_sample_at_a_large_budget():
    """With no privacy noise left (mu huge) the margin is the least that keeps the worst-case
    expected loss within TOLERANCE given the held-out accuracy's standard error
    sqrt(a (1 - a) / m): 100 rows, a near 0.62, s = 0.0485, k = tolerance_margin(0.005 / s)."""
    from scipy.stats import norm

    from dpopt.pipeline.selection import TOLERANCE, against_known_rate, tolerance_margin

    m, rate = 100, 0.6
    for gain, expect in ((0.015, False), (0.03, True)):
        a = rate + gain
        s = math.sqrt(a * (1 - a) / m)
        k = tolerance_margin(TOLERANCE / s)
        u = np.linspace(0, 10, 20001)
        assert np.max(u * norm.cdf(-u - k)) * s == pytest.approx(TOLERANCE, rel=1e-3)
        assert (gain > k * s) is expect
        _, _, use = against_known_rate(m * a, m, 1e12, np.random.default_rng(0), rate, 0.0)
        assert use is expect
    assert tolerance_margin(0.2) == 0.0  # max_u u Phi(-u) = 0.17: no margin needed


def test_no_signal_with_released_counts_keeps_the_majority():
    """Labels independent of the features, counts released: the model's held-out accuracy
    alone does not beat the released rate by the margin, so the constant is released."""
    X, y = noise_labels(n=3000, rate=0.7)
    released = []
    for seed in range(4):
        clf = fit_quiet(dpopt.DPLogisticRegression(epsilon=1.0, random_state=seed), X, y)
        assert clf.auto_.plan["selection"]["released_columns"] == 1
        released.append(clf.auto_.plan["selection"]["released"])
    assert released.count("model") <= 1 and np.mean(clf.predict(X) == "yes") > 0.99


def test_records_of_neither_binary_class_are_misses_of_the_model():
    """Two declared classes of three labels: the records of the third are the negative class
    in training and misses in the held-out choice (no released classifier predicts their
    label). Counted as hits of the negative class, they made the model's held-out accuracy
    0.75 here (a constant in disguise) against the declared classes' majority rate of 0.58."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 4))
    y = rng.choice(np.array(["a", "b", "c"]), size=2000, p=[0.35, 0.25, 0.40])
    reg = fit_quiet(dpopt.DPLogisticRegression(epsilon=4.0, random_state=0, classes=["a", "b"]),
                    X, y)
    sel = reg.auto_.plan["selection"]
    assert sel["majority_from"] == "the labels' noisy counts"
    assert sel["noisy_scores"][0] == pytest.approx(np.mean(y == "a"), abs=0.08)
    assert sel["released"] == "constant -1" and set(reg.predict(X)) == {"a"}


def test_binary_constant_probability_is_its_share_of_the_two_labels():
    """Records outside the two declared labels: the released constant's probability is its
    count over the two counts' sum (0.61 here), not over n (which clipped it to 0.5)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 3))
    y = rng.choice(np.array(["other", "c1", "c0"]), size=4000, p=[0.5, 0.3, 0.2])
    clf = dpopt.DPLogisticRegression(epsilon=4.0, random_state=0, classes=["c0", "c1"]).fit(X, y)
    assert clf.fit_result_.params["auto"]["selection"]["released"].startswith("constant")
    share = np.mean(y[y != "other"] == "c1")
    assert clf.predict_proba(X[:1])[0, 1] == pytest.approx(share, abs=0.02)


def test_the_model_paths_looks_join_the_constant():
    """The training branch's looks at y's range report their pooled estimate of the mean
    (plan["target_look_mean"], y's units, sd public); looks_mean gives it in the target
    scale's units, and the held-out choice's constant pools it (post-processing: the
    records and the budget are those of a fit without it)."""
    from dpopt.pipeline.constant import looks_mean, pooled_mean

    X, y = signal(regression=True)
    reg = fit_quiet(dpopt.DPLinearRegression(epsilon=1.0, random_state=0), X, y - 100.0)
    plan, target = reg.auto_.plan, reg.auto_.target
    mean, sd = plan["target_look_mean"]
    assert sd > 0 and abs(mean - np.mean(np.clip(y - 100.0, target.lower, target.upper))) < 5 * sd
    scaled = looks_mean(reg.auto_)
    assert scaled == pytest.approx(((mean - target.center) / target.half_width,
                                    sd / target.half_width))
    # the pool reads it from the plan: with the entry removed it is not among the sources
    n_train = len(y) - plan["selection"]["validation_rows"]
    without = dataclasses.replace(reg.auto_, plan={k: v for k, v in plan.items()
                                                   if k != "target_look_mean"})
    assert pooled_mean(reg.auto_, n_train, None, math.inf) == (
        pytest.approx(np.clip(scaled[0], -1, 1)),
        "the training branch's looks at y's range (already released: no new spending)")
    assert pooled_mean(without, n_train, None, math.inf) == (None, None)
    assert "looks at y's range" in plan["selection"]["noisy_mean_from"]
    assert reg.epsilon_spent_ == pytest.approx(1.0, rel=1e-6)


def test_a_held_out_mean_is_pooled_with_the_free_ones():
    """Where the free means are less precise than the held-out release (which is then made,
    with half of mu_v), that release joins them instead of replacing them: the constant is
    their inverse-variance pool, its source says so, and with nothing free the release alone
    is the constant."""
    from dpopt.pipeline.constant import looks_mean, pooled_mean

    X, y = signal(regression=True)
    reg = fit_quiet(dpopt.DPLinearRegression(epsilon=1.0, random_state=0), X, y - 100.0)
    plan = reg.auto_.plan
    n_train = len(y) - plan["selection"]["validation_rows"]
    free_mean, free_sd = looks_mean(reg.auto_)
    paid = (0.3, free_sd, "the held-out rows (half of mu_v)")
    mean, source = pooled_mean(reg.auto_, n_train, None, math.inf, paid=paid)
    assert mean == pytest.approx(np.clip((0.3 + free_mean) / 2, -1, 1))  # equal weights
    assert source == ("the held-out rows (half of mu_v), pooled with the training branch's "
                      "looks at y's range (already released: no new spending)")
    # a far better release dominates; with nothing free it is the constant unchanged
    assert pooled_mean(reg.auto_, n_train, None, math.inf, paid=(0.3, free_sd / 1e3, "h"))[0] \
        == pytest.approx(0.3, abs=1e-5)
    without = dataclasses.replace(reg.auto_, plan={k: v for k, v in plan.items()
                                                   if k != "target_look_mean"})
    assert pooled_mean(without, n_train, None, math.inf, paid=paid) == (0.3, paid[2])
    # an estimate the pool cannot weigh (no finite error) is not named among its sources
    assert pooled_mean(without, n_train, (0.9, math.inf), math.inf, paid=paid) == (0.3, paid[2])


def test_a_regressor_is_scored_by_the_squared_error_its_r2_measures():
    """On a skewed target the median beats the mean in absolute error and loses in squared
    error: the held-out choice scores the loss R^2 measures, so it prefers the mean
    (session 31: with the absolute error the model near the median was released on
    `diabetes` at epsilon = 1 with R^2 -0.024 against the constant's -0.008)."""
    from types import SimpleNamespace

    from dpopt.pipeline.held_out import per_record_scores

    identity = SimpleNamespace(transform=lambda v: v)
    y = np.random.default_rng(0).lognormal(0.0, 1.0, 5000)
    y = 2 * (y - y.min()) / (y.max() - y.min()) - 1  # the scaled target, in [-1, 1]
    median = ("median", np.zeros(1), float(np.median(y)))
    mean = ("mean", np.zeros(1), float(y.mean()))
    scores = per_record_scores(identity, identity, [median, mean], np.zeros((y.size, 1)), y,
                               True)
    assert np.all((scores >= 0) & (scores <= 1))
    assert scores[:, 0].mean() < scores[:, 1].mean()  # the mean wins
    assert np.mean(np.abs(y - median[2])) < np.mean(np.abs(y - mean[2]))  # it would not
