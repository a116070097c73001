"""Do no harm for k >= 3 classes (dpopt.pipeline.multiclass_selection): the one-vs-rest
default fit or the majority class, chosen on held-out rows."""

import math
import warnings

import numpy as np
import pytest

import dpopt
from dpopt.pipeline import majority, multiclass_selection
from dpopt.pipeline.selection import validation_mu
from dpopt.privacy import Gaussian, epsilon_of, gdp_mu


def fit(X, y, **kw):
    """A default fit; a PrivacyLeakWarning fails the test (nothing read for free)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)
        f = dpopt.DPLogisticRegression(**kw).fit(X, y)
    assert f.privacy_leaks_ == []
    return f


def no_signal(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)) * [1, 10, 100, 0.1]
    y = rng.choice(3, size=n, p=[0.6, 0.25, 0.15])
    return X, y


def test_without_signal_the_majority_class_is_released():
    X, y = no_signal()
    Xt, yt = no_signal(n=4000, seed=1)
    fits = [fit(X, y, epsilon=1.0, random_state=s, classes=[0, 1, 2]) for s in range(5)]
    released = [f.auto_.plan["selection"]["released"] for f in fits]
    for f, what in zip(fits, released):
        assert f.auto_.plan["selection"]["majority_from"] == "the labels' noisy counts"
        # the majority: the constant, or (any seed: since the multinomial run's suffix
        # average the no-signal model is that flat, class 0 on 3998 of 4000 test rows in
        # seed 1) a model no better than it, which the noisy held-out scores may release
        assert what in ("constant class 0", "model")
        assert np.mean(f.predict(Xt) == 0) >= 0.99
        assert f.score(Xt, yt) >= np.mean(yt == 0) - 0.005
        if what != "model":
            assert np.all(f.coef_ == 0) and np.all(f.predict(Xt) == 0)
        np.testing.assert_allclose(f.predict_proba(Xt).sum(axis=1), 1.0)
    assert released.count("constant class 0") > len(fits) / 2
    assert np.mean([f.score(Xt, yt) for f in fits]) >= np.mean(yt == 0) - 0.005


def test_with_signal_at_a_large_budget_the_model_is_released():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((3000, 4))
    y = np.argmax(X[:, :3] * 2 + rng.standard_normal((3000, 3)), axis=1)
    f = fit(X, y, epsilon=8.0, random_state=0, classes=[0, 1, 2])
    assert f.auto_.plan["selection"]["released"] == "model"
    assert f.score(X, y) > 0.7


def spy_on(monkeypatch, module, name):
    """Record ((m, number of released means), mu, sigma) of each call of the score release
    ``module.name`` (totals, m, mu, rng) -> (noisy, sigma)."""
    calls, original = [], getattr(module, name)

    def spy(totals, m, mu, rng):
        out = original(totals, m, mu, rng)
        calls.append(((m, len(totals)), mu, out[1]))
        return out

    monkeypatch.setattr(module, name, spy)
    return calls


def test_the_score_release_adds_the_stated_noise_and_the_fit_spends_its_target(monkeypatch):
    """With the labels' noisy counts released on all rows (declared classes), the held-out
    rows release the model's accuracy alone: sigma = 1 / (m mu_v), mu_v the GDP parameter
    the training branch's own records dominate (captured at the call), and the constants'
    scores are the counts' rates; the total is the training branch's, at most the target."""
    calls = spy_on(monkeypatch, majority, "noisy_score_totals")
    X, y = no_signal()
    f = fit(X, y, epsilon=2.0, delta=1e-6, random_state=0, classes=[0, 1, 2])
    sel = f.auto_.plan["selection"]
    (shape, mu, sigma), = calls
    m = sel["validation_rows"]
    assert shape == (m, 1) and m == 120 and sel["released_columns"] == 1
    assert sigma == pytest.approx(1.0 / (m * mu), rel=1e-12)
    assert sel["sensitivity"] == pytest.approx(1.0 / m)
    counts = np.asarray(f.auto_.plan["table"]["label_counts"])
    assert sel["noisy_scores"][1:] == pytest.approx(list(counts / counts.sum()))
    own = f.fit_result_.mechanisms[1:]  # after the declared labels' counts (one record)
    assert mu == pytest.approx(validation_mu(own), rel=1e-12) and mu > 0
    assert f.fit_result_.mechanisms[0] == Gaussian(f.fit_result_.mechanisms[0].noise_multiplier)
    assert f.epsilon_spent_ <= 2.0 * (1 + 1e-9)
    assert f.epsilon_spent_ == pytest.approx(
        epsilon_of(f.fit_result_.mechanisms, 1e-6 - f.auto_.plan["selection_delta"],
                   accountant=f.fit_result_.accountant), rel=1e-9)


def test_without_released_counts_the_k_plus_one_means_are_released(monkeypatch):
    """No counts on all rows (the pipeline called without the table layer's prior): the
    held-out rows release the model's and every class's accuracy, sigma = sqrt(3) / (m mu_v)."""
    calls = spy_on(monkeypatch, multiclass_selection, "noisy_class_totals")
    X, y = no_signal()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto = multiclass_selection.fit_selected_one_vs_rest(
            X, y, 3, penalty="l2", penalty_kwargs={"alpha": "auto"}, fit_intercept=True,
            epsilon=2.0, delta=1e-6, rng=np.random.default_rng(0))
    sel = auto.plan["selection"]
    (shape, mu, sigma), = calls
    m = sel["validation_rows"]
    assert shape == (m, 4) and sel["released_columns"] == 4 and sel["majority_from"] is None
    assert sigma == pytest.approx(math.sqrt(3) / (m * mu), rel=1e-12)
    assert sel["sensitivity"] == pytest.approx(math.sqrt(3) / m)
    assert mu == pytest.approx(validation_mu(auto.result.mechanisms), rel=1e-12)


def scores(fit, X, y, k):
    r = fit.auto_.result
    return multiclass_selection.class_scores(fit.auto_.scaling, r.coef, r.intercept, X, y, k)


def test_replacing_one_record_moves_the_scores_by_at_most_the_stated_sensitivity():
    """At most three of the k + 1 means move, by at most 1/m each (the model's and two
    classes'): the release's sqrt(3) / m. Scores of any other shape are refused."""
    X, y = no_signal()
    f = fit(X, y, epsilon=8.0, random_state=0, classes=[0, 1, 2])
    rng = np.random.default_rng(5)
    Xv, yv = X[:50], y[:50].copy()
    base = scores(f, Xv, yv, 3).mean(axis=0)
    for _ in range(100):
        X2, y2 = Xv.copy(), yv.copy()
        i = rng.integers(50)
        X2[i] = rng.standard_normal(4) * [1, 10, 100, 0.1] * rng.uniform(0, 50)
        y2[i] = rng.integers(3)
        moved = scores(f, X2, y2, 3).mean(axis=0) - base
        assert np.abs(moved).max() <= 1 / 50 + 1e-12
        assert np.linalg.norm(moved) <= math.sqrt(3) / 50 + 1e-12
    bad = scores(f, Xv, yv, 3)
    bad[0, 1:] = 1.0  # two labels on one record: the bound would not hold
    with pytest.raises(RuntimeError, match="nothing is released"):
        multiclass_selection.noisy_class_scores(bad, 1.0, rng)


def test_a_tiny_multiclass_fit_is_checked_on_its_own_rows():
    # 90 rows: too few to hold out; the choice runs on all rows with a share of its own
    # (dpopt.pipeline.in_sample) against the majority the declared labels' counts name
    X, y = no_signal(n=90)
    f = fit(X, y, epsilon=4.0, random_state=0, classes=[0, 1, 2])
    sel, plan = f.auto_.plan["selection"], f.auto_.plan
    assert sel["reason"].startswith("in-sample check on 90 rows") and sel["in_sample"]
    assert sel["released"].startswith("constant class")  # no signal
    assert sel["majority_from"] == "the labels' noisy counts" and sel["released_columns"] == 1
    mu_s = plan["mu_shares"]["in_sample_check"]
    assert f.fit_result_.mechanisms[-1] == Gaussian(1.0 / mu_s, 1)
    assert sel["sigma"] == pytest.approx(1.0 / (90 * mu_s))  # one mean, sensitivity 1/n
    assert math.fsum(v * v for v in plan["mu_shares"].values()) <= \
        gdp_mu(4.0, 1 / 90 ** 2) ** 2 * (1 + 1e-9)
    # objective perturbation's classes are calibrated, with the check counted, to about 1%
    assert 3.9 < f.epsilon_spent_ <= 4.0 * (1 + 1e-9)
    plain = fit(X, y, epsilon=4.0, random_state=0, classes=[0, 1, 2], fit_intercept=False)
    assert plain.auto_.plan["selection"]["reason"].startswith("no selection")


def test_the_held_out_release_is_dominated_by_the_training_branch_independently():
    """Independent check (tests/_independent_accounting.py): with an L1 penalty every record
    is Gaussian (dp-cd), and the score release's delta(epsilon) (sensitivity 1/m with the
    declared labels' counts released, its sigma from the plan) is at most the training
    branch's on a grid of epsilon."""
    from _independent_accounting import hockey_stick_gaussian

    X, y = no_signal()
    f = fit(X, y, epsilon=1.0, delta=1e-6, random_state=0, classes=[0, 1, 2], penalty="l1")
    sel = f.auto_.plan["selection"]
    mechs = f.fit_result_.mechanisms[1:]  # the training branch's own (after the counts)
    assert all(isinstance(m, Gaussian) for m in mechs)
    nu = math.sqrt(sum(m.count / m.noise_multiplier ** 2 for m in mechs))
    ratio = sel["sensitivity"] / sel["sigma"]  # 1/m: the model's accuracy alone
    assert ratio == pytest.approx(sel["mu"], rel=1e-9) and ratio <= nu * (1 + 1e-12)
    for e in np.linspace(0.0, 3.0, 13):
        assert hockey_stick_gaussian(ratio, 1.0, e) <= hockey_stick_gaussian(1.0, 1.0 / nu, e) \
            * (1 + 1e-6) + 1e-13


def test_a_label_outside_the_classes_is_wrong_for_every_candidate():
    """A record whose label was not kept (or not declared) is index -1: a negative of every
    one-vs-rest model, a zero row of the held-out scores (wrong for the model and for every
    constant), and in no class count; the constant's rate is its count over all n rows. Read
    over the kept labels' total instead, the rates overstated every constant while the
    model's accuracy counted those records as hits of class 0 (statsmodels' anes96 at
    epsilon = 0.5: a held-out accuracy of 0.58 released a model that scored 0.195 against
    the majority's 0.216)."""
    from dpopt.pipeline.multiclass_selection import _not_a_class_row, class_scores
    from dpopt.preprocessing.labels import OTHER_LABEL, encode_labels

    assert encode_labels(np.array(["a", "z", "b"]), ["a", "b"]).tolist() == [0, OTHER_LABEL, 1]
    assert encode_labels(np.array([3.0, 1.0, 7.0]), [1, 3]).tolist() == [1, 0, OTHER_LABEL]
    identity = type("Identity", (), {"transform": staticmethod(lambda v: v)})()
    scores = class_scores(identity, np.eye(3), np.zeros(3), np.eye(3), np.array([0, -1, 2]), 3)
    assert scores.tolist() == [[1, 1, 0, 0], [0, 0, 0, 0], [1, 0, 0, 1]]
    assert not _not_a_class_row(scores).any()
    X, y = no_signal(n=1000)
    y = np.where(np.random.default_rng(5).random(y.size) < 0.4, 3, y)  # 40% undeclared
    f = fit(X, y, epsilon=4.0, random_state=0, classes=[0, 1, 2])
    sel = f.auto_.plan["selection"]
    # no signal: the model predicts class 0, right on 0.6 x 0.6 of the rows (class 0 was
    # 0.76 with the undeclared label counted as it, and the model was released); the
    # constant's rate is over all rows too (kept_rate), so the two tie and either release
    # is the constant's accuracy
    assert sel["noisy_scores"][0] == pytest.approx(np.mean(y == 0), abs=0.1)
    assert np.mean(f.predict(X) == y) >= np.mean(y == 0) - 0.005
    assert set(np.unique(f.predict(X))) <= {0, 1, 2}


def test_the_rate_is_over_all_rows_when_records_outside_the_labels_are_resolved():
    """Most records outside the declared classes: the constant's rate is its count over n
    (the held-out accuracy counts those records wrong for every candidate); over the
    declared counts' sum it was overstated n / N times and kept the constant class 0
    (0.34) against a model of 0.85 at epsilon = 100."""
    from dpopt.pipeline.majority import kept_rate

    assert kept_rate([300.0, 200.0], 5.0, n=1000) == (0.3, 0.005)  # 500 outside: resolved
    rate, sd = kept_rate([600.0, 396.0], 5.0, n=1000)  # 4 outside: within the noise
    assert rate == pytest.approx(600 / 996) and sd < 5.0 / 996
    rng = np.random.default_rng(0)
    centres = 3 * rng.standard_normal((8, 3))
    y = rng.integers(8, size=5000)
    X = centres[y] + rng.standard_normal((5000, 3))
    f = fit(X, y, epsilon=100.0, random_state=0, classes=[0, 1, 2])
    assert f.auto_.plan["selection"]["released"] == "model"
    kept = np.isin(y, [0, 1, 2])
    assert f.score(X[kept], y[kept]) > 0.8


@pytest.mark.parametrize("n, delta, reason", [(1000, 0.01, "held-out"), (80, 0.05, "in-sample")])
def test_delta_above_one_over_n_warns_once_about_all_rows(n, delta, reason):
    """The training branch's delta warning is judged on its n - m rows and suppressed, so the
    held-out choice warns about all n (as the binary one does: an independent audit found the
    multiclass path silent); the in-sample check's fit (n < 100) is on all rows, and the
    estimator raises the warning once."""
    X, y = no_signal(n)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = dpopt.DPLogisticRegression(epsilon=1, delta=delta, classes=[0, 1, 2],
                                       random_state=0).fit(X, y)
    weak = [w for w in caught if issubclass(w.category, dpopt.WeakPrivacyWarning)]
    assert len(weak) == 1 and f"{delta:g}" in str(weak[0].message), [str(w.message) for w in weak]
    assert reason in f.auto_.plan["selection"]["reason"]
