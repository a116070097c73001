"""The default path's indicator test (dpopt.preprocessing._indicators): which columns are 0/1,
one Gaussian release of the counts of other values, and what the default path does with it."""

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import dpopt
from dpopt.data.rows import RowSubset
from dpopt.pipeline import default_path
from dpopt.preprocessing._indicators import other_value_counts, private_indicators
from dpopt.privacy import Gaussian, gdp_mu


def mixed(n=4000, seed=0):
    """Two indicators, a count that is mostly 0/1, and two numeric columns."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.random(n) < 0.3, rng.random(n) < 0.02,
                         rng.poisson(0.6, n), rng.standard_normal(n) * 5 + 20,
                         rng.exponential(1000.0, n) * (rng.random(n) < 0.1)]).astype(float)
    return X


def test_other_value_counts_in_every_layout():
    X = mixed()
    exact = np.array([np.sum((X[:, j] != 0) & (X[:, j] != 1)) for j in range(5)], float)
    cols = np.arange(5)
    np.testing.assert_array_equal(other_value_counts(X, cols), exact)
    np.testing.assert_array_equal(other_value_counts(sp.csr_matrix(X), cols), exact)
    rows = np.arange(0, 4000, 3)
    np.testing.assert_array_equal(other_value_counts(RowSubset(X, rows), [1, 3]),
                                  other_value_counts(X[rows], [1, 3]))
    assert exact[0] == exact[1] == 0 and exact[3] == 4000


def test_the_release_has_the_stated_noise_and_decides_at_one_percent():
    """sigma = sqrt(p') / mu (replace-one moves each count by 1), one Gaussian record; a
    column is an indicator when its noisy count is at most 1% of n."""
    counts, cols = np.array([0.0, 10.0, 400.0]), np.array([2, 5, 7])
    rng = np.random.default_rng(1)
    draws = np.array([private_indicators(counts, 4000, 0.5, rng, cols).noisy
                      for _ in range(4000)])
    sigma = math.sqrt(3) / 0.5
    np.testing.assert_allclose(draws.mean(axis=0), counts, atol=4 * sigma / math.sqrt(4000))
    np.testing.assert_allclose(draws.std(axis=0), sigma, rtol=0.05)
    test = private_indicators(counts, 4000, 0.5, rng, cols)
    assert test.sigma == pytest.approx(sigma) and test.threshold == pytest.approx(40.0)
    assert test.mechanisms == [Gaussian(2.0, 1)]
    np.testing.assert_array_equal(test.indicator, test.noisy <= 40.0)
    exact = private_indicators(counts, 4000, math.inf, rng, cols)
    assert exact.indicator.tolist() == [True, True, False] and exact.sigma == 0.0
    with pytest.raises(ValueError, match="one entry per column"):
        private_indicators(counts[:2], 4000, 0.5, rng, cols)


def test_replacing_one_record_moves_the_counts_by_at_most_sqrt_p():
    X = mixed(n=300)
    rng = np.random.default_rng(2)
    base = other_value_counts(X, np.arange(5))
    for _ in range(200):
        X2 = X.copy()
        X2[rng.integers(300)] = rng.choice([0.0, 1.0, 2.5, -7.0], 5)
        moved = other_value_counts(X2, np.arange(5)) - base
        assert np.abs(moved).max() <= 1 and np.linalg.norm(moved) <= math.sqrt(5)


def test_the_indicator_test_passes_the_audit_and_its_broken_variant_is_caught():
    from dpopt.api.release_audits import audit_indicator_counts

    ok = audit_indicator_counts(n_runs=1000)
    assert ok.consistent and ok.epsilon == pytest.approx(2.0, rel=1e-6), ok.summary()
    broken = audit_indicator_counts(n_runs=1000, noise_scale=0.25)
    assert not broken.consistent, broken.summary()


def fit_default(X, y, epsilon, seed=0, **kw):
    n = len(y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return default_path.fit_default(
            X, y, loss="squared", penalty="none", penalty_kwargs={}, fit_intercept=True,
            epsilon=epsilon, delta=1 / n ** 2, rng=np.random.default_rng(seed),
            regression=True, **kw)


def bounds_released(monkeypatch):
    """The public bounds each feature-bound release of the default path is given."""
    released = []
    original = default_path.InMemoryData.feature_bounds

    def spy(self, mu, rng, bounds=None, grid=None):
        released.append(bounds)
        return original(self, mu, rng, bounds=bounds, grid=grid)

    monkeypatch.setattr(default_path.InMemoryData, "feature_bounds", spy)
    return released


def test_the_default_path_gives_indicators_public_bounds_and_histograms_the_rest(monkeypatch):
    """At a large budget the two indicators (and the count that is mostly 0/1: 45% of its
    values are above 1, so not it) are found; the histograms are released for the other
    columns only (sigma sqrt(2 p') / mu_b), and the plan's records and shares include the
    test (sum of mu^2 = mu^2)."""
    X = mixed()
    y = X @ np.array([1.0, 2.0, 0.5, 0.1, 0.001]) + np.random.default_rng(3).standard_normal(4000)
    released = bounds_released(monkeypatch)
    auto = fit_default(X, y, epsilon=50.0)
    plan = auto.plan
    assert plan["indicator_features"] == [0, 1]
    lower, upper = released[0]
    np.testing.assert_array_equal(lower[:2], [0.0, 0.0])
    np.testing.assert_array_equal(upper[:2], [1.0, 1.0])
    assert np.all(np.isnan(lower[2:]))
    mus = plan["mu_shares"]
    assert mus["indicators"] ** 2 == pytest.approx(0.02 * plan["mu"] ** 2)
    assert sum(v ** 2 for v in mus.values()) == pytest.approx(plan["mu"] ** 2)
    assert Gaussian(1 / mus["indicators"], 1) in auto.result.mechanisms
    np.testing.assert_array_equal(auto.scaling.lower[:2], [0.0, 0.0])
    np.testing.assert_array_equal(auto.scaling.upper[:2], [1.0, 1.0])
    assert "features [0, 1] (2): a private count" in auto.report("DPLinearRegression")
    assert "indicators mu=" in auto.report("DPLinearRegression")


def test_sparse_data_and_row_normalization_skip_the_test():
    n, p = 2000, 5
    shares = default_path.plan_budget(n, p, gdp_mu(1.0, 1 / n ** 2), regression=False,
                                      center=False, sparse=True)
    assert "indicators" not in shares
    tiny = default_path.plan_budget(40, 50, gdp_mu(0.5, 1e-4), regression=False, center=True)
    assert "feature_bounds" not in tiny and "indicators" not in tiny


def test_a_money_column_keeps_its_scale_among_many_indicators():
    """The array form of a one-hot table: with 100 indicator columns beside it, a column
    that is 0 in 90% of the rows and in the thousands elsewhere was clipped to [0, 1] (its
    nonzero values invisible in histograms as noisy as 100 columns make them); with the
    indicators out of the release its upper bound is found, in the thousands."""
    rng = np.random.default_rng(4)
    n = 30000
    onehot = np.eye(100)[rng.integers(100, size=n)]
    money = rng.lognormal(8.0, 0.7, n) * (rng.random(n) < 0.1)
    X = np.column_stack([money, onehot])
    y = np.where(money > 3000, 1.0, -1.0) * np.where(rng.random(n) < 0.9, 1, -1)
    clf = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0, classes=[-1.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.fit(X, y)
    plan = clf.auto_.plan
    assert len(plan["indicator_features"]) >= 50  # each found with probability about 0.7 here
    assert 0 not in plan["indicator_features"] and 0 not in plan["fallback_features"]
    assert clf.feature_bounds_[1][0] > 1000  # the upper bound of the money column


def test_the_threaded_count_gives_the_serial_counts():
    """Above PARALLEL_MIN_SIZE values the count runs on Numba's threads, each chunk of rows
    on its own: the same integers as one thread and as NumPy."""
    import numba

    from dpopt.kernels.vecmath import PARALLEL_MIN_SIZE

    rng = np.random.default_rng(5)
    p = 40
    n = PARALLEL_MIN_SIZE // p + 7
    X = rng.choice([0.0, 1.0, 2.0, -0.5], size=(n, p), p=[0.6, 0.3, 0.05, 0.05])
    rows = np.sort(rng.permutation(n)[: n - 3])
    columns = np.arange(0, p, 2)
    ref = np.count_nonzero((X[rows][:, columns] != 0) & (X[rows][:, columns] != 1), axis=0)
    before = numba.get_num_threads()
    try:
        for threads in sorted({1, 2, numba.config.NUMBA_NUM_THREADS}):
            if threads > numba.config.NUMBA_NUM_THREADS:
                continue
            numba.set_num_threads(threads)
            np.testing.assert_array_equal(other_value_counts(RowSubset(X, rows), columns), ref)
    finally:
        numba.set_num_threads(before)


def test_when_every_column_is_an_indicator_the_histograms_budget_goes_to_the_model():
    """No histogram is released when the test makes every bound public: the model gets the
    shares of the feature bounds and the centred bounds, and the fit spends its whole target
    (before, 20% of mu^2 went unspent)."""
    rng = np.random.default_rng(6)
    X = (rng.random((3000, 3)) < 0.4).astype(float)
    y = X @ np.array([1.0, -1.0, 0.5]) + rng.standard_normal(3000)
    auto = fit_default(X, y, epsilon=50.0)
    mus = auto.plan["mu_shares"]
    assert auto.plan["indicator_features"] == [0, 1, 2]
    assert "feature_bounds" not in mus and "centred_bounds" not in mus
    assert sum(v ** 2 for v in mus.values()) == pytest.approx(auto.plan["mu"] ** 2)
    assert mus["model"] ** 2 > 0.8 * auto.plan["mu"] ** 2
    reg = dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(X, y)
    assert reg.epsilon_spent_ == pytest.approx(1.0, rel=1e-9)


def test_a_public_side_is_never_replaced_by_the_test(monkeypatch):
    """A column with one public bound (here its lower side, -5) is not tested: the user's
    side reaches the histograms' release, which estimates the other."""
    X = mixed()
    y = X @ np.array([1.0, 2.0, 0.5, 0.1, 0.001]) + np.random.default_rng(3).standard_normal(4000)
    released = bounds_released(monkeypatch)
    lower = np.array([-5.0, np.nan, np.nan, np.nan, np.nan])
    auto = fit_default(X, y, epsilon=50.0, feature_bounds=(lower, np.full(5, np.nan)))
    assert auto.plan["indicator_features"] == [1]
    assert released[0][0][0] == -5.0 and np.isnan(released[0][1][0])
