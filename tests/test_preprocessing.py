"""dpopt.preprocessing: private bounds and scalers.

Statistical checks use the helpers of test_mechanisms (KS + second-moment z-test at level
1e-3, fixed seeds)."""

import math
import os
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dpopt
from _broken_variants import ScaledNoiseGenerator
from _independent_accounting import gaussian_composition_epsilon, histogram_release_epsilon
from dpopt import BudgetAccountant, BudgetExceededError, PrivacyLeakWarning
from dpopt.preprocessing import (
    DEFAULT_GRID,
    PrivateClipper,
    PrivateMinMaxScaler,
    PrivateRobustScaler,
    PrivateStandardScaler,
    SignedLogGrid,
    private_feature_bounds,
    private_target_bounds,
    public_one_hot_encoder,
    release_clipped_moments,
    release_histograms,
)
from dpopt.preprocessing._bounds import feature_histograms
from dpopt.privacy import Gaussian, gdp_epsilon, gdp_mu
from test_mechanisms import NORMAL, assert_distribution

TRANSFORMERS = [PrivateClipper, PrivateMinMaxScaler, PrivateStandardScaler, PrivateRobustScaler]


def grid_edges():
    lo, hi = DEFAULT_GRID.bin_ends()
    return set(lo) | set(hi)


def reference_bin(v, edges):
    """Bin of one value by explicit comparisons (independent of SignedLogGrid.bin_index):
    zero bin in the middle, (e_{k-1}, e_k] on the right, mirrored on the left."""
    zero = len(edges) + 1
    if v == 0:
        return zero
    k = sum(1 for e in edges if e < abs(v))
    return zero + 1 + k if v > 0 else zero - 1 - k


def reference_counts(X, edges):
    n_bins = 2 * (len(edges) + 1) + 1
    counts = np.zeros((X.shape[1], n_bins))
    for j in range(X.shape[1]):
        for v in X[:, j]:
            counts[j, reference_bin(v, edges)] += 1
    return counts


# ---------------------------------------------------------------------------
# the grid


def test_grid_is_public_and_exact_at_zero_one_and_powers_of_ten():
    g = SignedLogGrid()
    e = g.edges
    assert e[0] == pytest.approx(1e-4) and e[-1] == 1e9 and e.size == 13 * 4 + 1
    assert {1.0, 10.0, 100.0, 1e3, 1e6} <= set(e)
    assert g.n_bins == 109
    idx = g.bin_index(np.array([0.0, 1.0, -1.0, 1.0 + 1e-12, 2e9, -2e9]))
    lo, hi = g.bin_ends()
    assert lo[idx[0]] == hi[idx[0]] == 0.0  # the exact zero bin
    assert hi[idx[1]] == 1.0 and lo[idx[1]] < 1.0  # (e, 1]: 1 is its upper end
    assert lo[idx[2]] == -1.0  # [-1, -e): -1 is its lower end
    assert lo[idx[3]] == 1.0
    assert hi[idx[4]] == 1e9 and lo[idx[5]] == -1e9  # overflow ends clamped
    assert np.all(np.diff(lo) >= 0) and np.all(np.diff(hi) >= 0) and np.all(lo <= hi)
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.standard_normal(300) * 10.0 ** rng.uniform(-6, 11, 300), e, -e])
    np.testing.assert_array_equal(g.bin_index(v), [reference_bin(x, list(e)) for x in v])


# ---------------------------------------------------------------------------
# the scan (dpopt.privacy.mechanisms.noisy_scan, shared with private_quantile)


def test_scan_rules_by_hand():
    from dpopt.privacy.mechanisms import noisy_scan

    counts = np.array([1000.0] + [0.0] * 30 + [50.0])  # increasing values; top bin holds 50
    # margin rule only: 50 <= 20 + 4 * 10 * sqrt(j), so the scan goes on to the big bin
    assert noisy_scan(counts, 20, 10.0, 4.0, from_top=True)[0] == 0
    # per-bin rule: 50 > 4.5 * 10 is real mass and exceeds the tail of 20: stop at once
    assert noisy_scan(counts, 20, 10.0, 4.0, from_top=True, bin_confidence=4.5)[0] == 31
    # from the bottom the comparison is >=: a cumulative count equal to the target stops
    assert noisy_scan(np.array([0.0, 3.0, 5.0]), 3.0, 0.0, 0.0, from_top=False)[0] == 1
    # from the top it is >: a tail equal to the target does not stop (at most 5 above)
    assert noisy_scan(np.array([0.0, 3.0, 5.0]), 5.0, 0.0, 0.0, from_top=True)[0] == 1
    assert noisy_scan(np.array([0.0, 3.0, 5.0]), 4.0, 0.0, 0.0, from_top=True)[0] == 2
    assert noisy_scan(np.zeros(4), 1.0, 1.0, 4.0, from_top=True)[0] == -1  # never stops


def test_scan_false_stops_in_an_empty_range_are_rare():
    """108 empty bins of pure noise, then the data: a stop before the data is a false
    stop; the docstring bounds its probability by about 6e-4 + 3.7e-4 per scan."""
    from dpopt.privacy.mechanisms import noisy_scan

    rng = np.random.default_rng(22)
    k, sigma = 20000, 50.0
    noisy = rng.standard_normal((k, 109)) * sigma
    noisy[:, 0] += 10000.0  # the data sit in the lowest bin; the scan comes from the top
    stops = noisy_scan(noisy, 100.0, sigma, 4.0, from_top=True, bin_confidence=4.5)
    assert np.mean(stops != 0) < 2.5e-3  # expected <= 1e-3; 50 false stops would be 5 sd


def test_spread_data_with_tiny_budget_is_unresolved_not_wrong():
    """Uniform data spread over many bins, each below the per-bin threshold, and a margin
    larger than n: the scans may stop on the first populated bin of the far side; the
    bounds then hold less than half of the data and the feature is dropped."""
    X = np.random.default_rng(23).uniform(-5, 5, (2000, 1))
    for seed in range(30):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fb = private_feature_bounds(X, 0.02, np.random.default_rng(seed))
        inside = np.mean((X >= fb.lower) & (X <= fb.upper))
        assert fb.unresolved[0] or inside >= 0.4, (fb.lower, fb.upper)


def test_coarsened_counts_are_the_coarse_grids_histograms():
    """Summing the default grid's counts into a coarser grid gives that grid's own
    histogram (every edge of the coarser grid is an edge of the default one), overflow,
    zero and the smallest bins included; the noise bound grows as sqrt(bins merged)."""
    from dpopt.preprocessing._bounds import DEFAULT_GRID, coarsened, coarser_grids, feature_histograms

    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-400, 400, 500), [0.0, 5e9, -5e9, 1e-5, -1e-5, 1e-4,
                                                      -1e-4, 10 ** 0.25, 10 ** 0.5]])
    fine = feature_histograms(x[:, None], [0], DEFAULT_GRID)
    grids = coarser_grids(DEFAULT_GRID)
    assert [g.bins_per_decade for g in grids] == [2, 1]
    for g in grids:
        summed, sigma = coarsened(fine, 3.0, DEFAULT_GRID, g)
        np.testing.assert_array_equal(summed, feature_histograms(x[:, None], [0], g))
        assert sigma == pytest.approx(3.0 * math.sqrt(4 / g.bins_per_decade))


def test_data_spread_over_decades_are_read_again_on_a_coarser_grid():
    """A column spread evenly over three decades puts n/12 records in each default bin and
    n/3 in each bin of the coarsest grid: where the noise hides the former, the same released
    counts summed into coarser bins locate it (one record, the same sigma: free)."""
    from dpopt.preprocessing._bounds import DEFAULT_GRID, _scan_bounds

    X = 10 ** np.random.default_rng(5).uniform(0, 3, (640, 1))
    found, fine_only = 0, 0
    for seed in range(20):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fb = private_feature_bounds(X, 0.08, np.random.default_rng(seed))
        assert len(fb.mechanisms) == 1
        fine_only += not _scan_bounds(fb.noisy_counts, fb.sigma, 640, (0.01, 0.99), 4.0,
                                      DEFAULT_GRID.bin_ends(), 4.5)[2][0]
        if not fb.unresolved[0]:
            found += 1
            assert 1.0 <= fb.lower[0] < fb.upper[0] <= 1000.0  # edges around the data
            assert np.mean((X >= fb.lower) & (X <= fb.upper)) >= 0.5
    assert found >= 15 and fine_only <= 10


# ---------------------------------------------------------------------------
# accuracy of the bounds


def known_columns(n, rng):
    return np.column_stack([
        rng.standard_normal(n) * 3 + 10,           # normal
        rng.lognormal(4, 1.5, n),                  # heavy right tail
        rng.binomial(1, 0.3, n),                   # one-hot like
        rng.integers(1, 8, n),                     # integer 1..7
        -rng.exponential(2.0, n),                  # negative
        rng.uniform(-5, 5, n),                     # signed
    ]).astype(float)


def test_exact_bounds_are_the_grid_bins_of_the_true_quantiles():
    rng = np.random.default_rng(1)
    X = known_columns(20000, rng)
    fb = private_feature_bounds(X, math.inf, rng, confidence=0.0)
    assert fb.mechanisms == [Gaussian(0.0, 1)] and fb.sigma == 0.0
    lo_end, hi_end = DEFAULT_GRID.bin_ends()
    for j in range(X.shape[1]):
        # the q-quantile in the sense of the scan: smallest value with >= q n at or below
        q_lo = np.sort(X[:, j])[math.ceil(0.01 * 20000) - 1]
        q_hi = np.sort(X[:, j])[20000 - math.floor(0.01 * 20000) - 1]
        assert fb.lower[j] == lo_end[DEFAULT_GRID.bin_index(q_lo)]
        assert fb.upper[j] == hi_end[DEFAULT_GRID.bin_index(q_hi)]
    np.testing.assert_array_equal([fb.lower[2], fb.upper[2]], [0.0, 1.0])  # 0/1 exactly


def test_private_bounds_with_a_big_budget_are_close_and_on_the_grid():
    rng = np.random.default_rng(2)
    X = known_columns(20000, rng)
    exact = private_feature_bounds(X, math.inf, rng)
    edges = grid_edges()
    for seed in range(5):
        fb = private_feature_bounds(X, 20.0, np.random.default_rng(seed))
        assert fb.mechanisms == [Gaussian(1 / 20.0, 1)]
        assert set(fb.lower) | set(fb.upper) <= edges  # data-independent grid edges
        # within one bin of the noiseless scan (same margin, sigma = sqrt(12) / 20)
        for est, ex in ((fb.lower, exact.lower), (fb.upper, exact.upper)):
            gap = np.abs(DEFAULT_GRID.bin_index(est) - DEFAULT_GRID.bin_index(ex))
            assert np.all(gap <= 1), (est, ex)
        q = np.quantile(X, [0.01, 0.99], axis=0)
        assert np.all(fb.lower <= q[1]) and np.all(fb.upper >= q[0])
        np.testing.assert_array_equal([fb.lower[2], fb.upper[2]], [0.0, 1.0])


@pytest.mark.parametrize("mu", [0.2, 0.05])
def test_small_budget_stays_in_the_data_or_drops_the_feature(mu):
    """The margin keeps the scans out of the empty range. With sigma = 17 (mu = 0.2) every
    feature is located; with sigma = 69 counts on n = 2000 (mu = 0.05) the margin over the
    grid exceeds n, a scan can run through the data, and such features are dropped."""
    rng = np.random.default_rng(3)
    X = known_columns(2000, rng)
    lo, hi = X.min(0), X.max(0)
    dropped = 0
    for seed in range(20):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fb = private_feature_bounds(X, mu, np.random.default_rng(seed))
        assert np.all(fb.lower <= fb.upper)
        ok = ~fb.unresolved
        assert np.all(fb.lower[ok] >= np.minimum(lo, 0)[ok] * 1.8 - 1e-9)
        assert np.all(fb.upper[ok] <= np.maximum(hi, 0)[ok] * 1.8 + 1e-9)
        # the margin (at most 4 sigma sqrt(109) counts, 35% of n at mu = 0.2) moves the
        # bounds inwards, not past the quartiles
        q25, q75 = np.quantile(X, [0.25, 0.75], axis=0)
        assert np.all(fb.lower[ok] <= q75[ok]) and np.all(fb.upper[ok] >= q25[ok])
        assert np.all(fb.lower[~ok] == 0) and np.all(fb.upper[~ok] == 0)
        assert (len(caught) > 0) == bool(fb.unresolved.any())
        dropped += fb.unresolved.sum()
    assert dropped == 0 if mu == 0.2 else dropped > 0


def test_target_bounds_one_histogram():
    rng = np.random.default_rng(4)
    y = rng.standard_normal(5000) + 2
    tb = private_target_bounds(y, 5.0, rng)
    assert tb.sigma == pytest.approx(math.sqrt(2) / 5.0)
    assert tb.lower.shape == (1,) and tb.lower[0] <= np.quantile(y, 0.02)
    assert tb.upper[0] >= np.quantile(y, 0.98)
    assert private_target_bounds(y, 1.0, rng, bounds=(0.0, 3.0)).mechanisms == []
    with pytest.raises(ValueError, match="y"):
        private_target_bounds(np.ones((3, 2)), 1.0, rng)


# ---------------------------------------------------------------------------
# noise and sensitivity


def test_histogram_noise_has_std_sqrt_2p_over_mu():
    rng = np.random.default_rng(5)
    X = known_columns(300, rng)[:, :4]
    exact = reference_counts(X, list(DEFAULT_GRID.edges))
    mu, p = 0.7, X.shape[1]
    draws = []
    for seed in range(40):
        noisy, sigma, rec = release_histograms(X, np.arange(p), mu, np.random.default_rng(seed))
        assert sigma == pytest.approx(math.sqrt(2 * p) / mu) and rec == Gaussian(1 / mu, 1)
        draws.append((noisy - exact) / (math.sqrt(2 * p) / mu))
    assert_distribution(np.array(draws), NORMAL, "histogram release")


def test_histogram_noise_test_has_power():
    rng = np.random.default_rng(5)
    X = known_columns(300, rng)[:, :4]
    exact = reference_counts(X, list(DEFAULT_GRID.edges))
    draws = [(release_histograms(X, np.arange(4), 0.7, ScaledNoiseGenerator(s, 0.8))[0] - exact)
             / (math.sqrt(8) / 0.7) for s in range(40)]
    with pytest.raises(AssertionError, match="KS|second moment"):
        assert_distribution(np.array(draws), NORMAL, "80% noise")


finite = st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(1, 8), p=st.integers(1, 4), sparse=st.booleans())
def test_histograms_have_sensitivity_sqrt_2p(data, n, p, sparse):
    X = data.draw(hnp.arrays(np.float64, (n, p), elements=finite | st.sampled_from([0.0, 1.0])))
    i = data.draw(st.integers(0, n - 1))
    row = data.draw(hnp.arrays(np.float64, (p,), elements=finite))
    X2 = X.copy()
    X2[i] = row
    make = sp.csc_matrix if sparse else np.asarray
    a, b = (feature_histograms(make(A), np.arange(p)) for A in (X, X2))
    assert np.linalg.norm(a - b) <= math.sqrt(2 * p) * (1 + 1e-12)
    assert np.all(np.abs(a - b).sum(axis=1) <= 2)  # one unit out, one unit in, per feature
    np.testing.assert_array_equal(a, reference_counts(X, list(DEFAULT_GRID.edges)))


def test_moment_release_noise_and_sensitivity():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((200, 3)) * 4
    lower, upper = np.array([-3.0, -1.0, 0.0]), np.array([3.0, 5.0, 2.0])
    t1, t2, _ = release_clipped_moments(X, lower, upper, math.inf, rng)
    c, w = (lower + upper) / 2, upper - lower
    xc = np.clip(X, lower, upper)
    np.testing.assert_allclose(t1, ((xc - c) / w).sum(0), rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(t2, (((xc - c) / w) ** 2).sum(0), rtol=1e-10, atol=1e-9)
    mu = 0.5
    draws = np.array([release_clipped_moments(X, lower, upper, mu, np.random.default_rng(s))[:2]
                      for s in range(300)])
    assert_distribution((draws[:, 0] - t1) / (math.sqrt(3) / mu), NORMAL, "T1 noise")
    assert_distribution((draws[:, 1] - t2) / (math.sqrt(3) / 4 / mu), NORMAL, "T2 noise")
    # sensitivity: an extreme replacement moves T1 by <= 1 and T2 by <= 1/4 per column
    X2 = X.copy()
    X2[0] = [1e9, -1e9, 7.0]
    u1, u2, _ = release_clipped_moments(X2, lower, upper, math.inf, rng)
    assert np.all(np.abs(u1 - t1) <= 1 + 1e-9) and np.all(np.abs(u2 - t2) <= 0.25 + 1e-9)


# ---------------------------------------------------------------------------
# accounting (independent computations never call dpopt.privacy)


@pytest.mark.parametrize("eps, delta", [(0.5, 1e-5), (2.0, 1e-6)])
def test_histogram_release_epsilon_matches_an_independent_computation(eps, delta):
    X = known_columns(500, np.random.default_rng(7))
    t = PrivateMinMaxScaler(epsilon=eps, delta=delta, random_state=0).fit(X)
    indep = histogram_release_epsilon(t.bounds_.sigma, X.shape[1], delta)
    assert t.epsilon_spent_ == pytest.approx(indep, rel=1e-6) and t.epsilon_spent_ <= eps
    assert indep == pytest.approx(eps, rel=1e-4)  # the calibration uses the whole target


def test_standard_scaler_composition_matches_an_independent_computation():
    X = known_columns(4000, np.random.default_rng(8))
    eps, delta = 1.0, 1e-5
    t = PrivateStandardScaler(epsilon=eps, delta=delta, bounds_share=0.3, random_state=0).fit(X)
    p = X.shape[1]
    live = int(np.sum(t.upper_ > t.lower_))
    mu_k = 1.0 / t.mechanisms_[1].noise_multiplier
    pairs = [(t.bounds_.sigma, math.sqrt(2 * p)), (math.sqrt(live) / mu_k, math.sqrt(live)),
             (math.sqrt(live) / 4 / mu_k, math.sqrt(live) / 4)]
    indep = gaussian_composition_epsilon(pairs, delta)
    assert t.epsilon_spent_ <= eps and t.epsilon_spent_ == pytest.approx(indep, rel=2e-3)
    mu = gdp_mu(eps, delta)
    assert 1 / t.mechanisms_[0].noise_multiplier == pytest.approx(mu * math.sqrt(0.3))


# ---------------------------------------------------------------------------
# transformers: budget, public bounds, reproducibility


@pytest.mark.parametrize("cls", [PrivateClipper, PrivateMinMaxScaler])
def test_public_bounds_spend_nothing(cls):
    X = known_columns(300, np.random.default_rng(9))
    lo, hi = np.full(6, -1.0), np.full(6, 2.0)
    acc = BudgetAccountant(0.01, 1e-9)
    a = cls(bounds=(lo, hi), random_state=0, accountant=acc).fit(X)
    b = cls(bounds=(lo, hi), random_state=1).fit(X)
    assert a.epsilon_spent_ == 0.0 and a.mechanisms_ == [] and acc.ledger == []
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    np.testing.assert_array_equal(a.lower_, lo)
    assert "nothing released" in a.privacy_report()


def test_partly_public_bounds_release_only_the_rest():
    X = known_columns(3000, np.random.default_rng(10))
    lo = np.array([np.nan, np.nan, 0.0, 1.0, np.nan, np.nan])
    hi = np.array([np.nan, np.nan, 1.0, 7.0, 0.0, np.nan])
    fb = private_feature_bounds(X, 1.0, np.random.default_rng(0), bounds=(lo, hi))
    assert fb.sigma == pytest.approx(math.sqrt(2 * 4))  # features 0, 1, 4, 5
    np.testing.assert_array_equal(fb.private_index, [0, 1, 4, 5])
    assert fb.upper[4] == 0.0 and fb.lower[3] == 1.0 and fb.upper[3] == 7.0


@pytest.mark.parametrize("cls", TRANSFORMERS)
def test_budget_charged_then_refused_without_change(cls):
    X = known_columns(500, np.random.default_rng(11))
    acc = BudgetAccountant(1.0, 1e-5)
    t = cls(epsilon=0.7, delta=1e-6, random_state=0, accountant=acc).fit(X)
    assert len(acc.ledger) == 1 and acc.ledger[0].mechanisms == tuple(t.mechanisms_)
    assert acc.ledger[0].epsilon == pytest.approx(t.epsilon_spent_)
    before = {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in vars(t).items()}
    with pytest.raises(BudgetExceededError):
        t.fit(X * 2)
    assert len(acc.ledger) == 1
    for k, v in before.items():
        np.testing.assert_array_equal(getattr(t, k), v) if isinstance(v, np.ndarray) else None
    with acc, pytest.raises(BudgetExceededError):  # the default accountant of `with`
        cls(epsilon=0.7, delta=1e-6).fit(X)
    fresh = cls(epsilon=0.7, delta=1e-6, accountant=acc)
    with pytest.raises(BudgetExceededError):
        fresh.fit(X)
    assert not hasattr(fresh, "lower_")


def test_failed_fit_spends_nothing():
    acc = BudgetAccountant(1.0, 1e-5)
    t = PrivateStandardScaler(epsilon=0.5, delta=1e-6, accountant=acc)
    with pytest.raises(ValueError, match="with_mean"):
        t.fit(sp.csr_matrix(np.eye(5)))
    assert acc.ledger == [] and not hasattr(t, "lower_")


@pytest.mark.parametrize("cls", TRANSFORMERS)
def test_same_seed_same_result_and_inf_epsilon_warns(cls):
    X = known_columns(400, np.random.default_rng(12))
    a, b = (cls(epsilon=1.0, random_state=3).fit_transform(X) for _ in range(2))
    np.testing.assert_array_equal(a, b)
    with pytest.warns(PrivacyLeakWarning, match="not differentially private"):
        t = cls(epsilon=math.inf).fit(X)
    assert math.isinf(t.epsilon_spent_) and "not private" in t.privacy_report()
    with pytest.raises(BudgetExceededError):
        cls(epsilon=math.inf, accountant=BudgetAccountant(1.0, 1e-5)).fit(X)


@pytest.mark.parametrize("cls", TRANSFORMERS)
def test_clone_and_pickle(cls):
    import pickle

    from sklearn.base import clone

    X = known_columns(3000, np.random.default_rng(24))
    t = cls(epsilon=1.0, random_state=5).fit(X)
    np.testing.assert_array_equal(clone(t).fit(X).transform(X), t.transform(X))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(t)).transform(X), t.transform(X))


def test_default_delta_is_one_over_n_squared():
    X = known_columns(250, np.random.default_rng(13))
    t = PrivateClipper(epsilon=1.0, random_state=0).fit(X)
    assert t.delta_spent_ == 1 / 250 ** 2
    assert t.epsilon_spent_ == pytest.approx(gdp_epsilon(gdp_mu(1.0, 1 / 250 ** 2), 1 / 250 ** 2))


# ---------------------------------------------------------------------------
# transforms


def test_clipper_and_minmax_transform():
    X = known_columns(5000, np.random.default_rng(14))
    c = PrivateClipper(epsilon=50.0, random_state=0).fit(X)
    Xc = c.transform(X)
    assert np.all(Xc >= c.lower_) and np.all(Xc <= c.upper_)
    m = PrivateMinMaxScaler(epsilon=50.0, random_state=0).fit(X)
    Z = m.transform(X)
    np.testing.assert_array_equal(m.lower_, c.lower_)  # same seed, same release
    np.testing.assert_allclose(Z, (Xc - c.lower_) / (c.upper_ - c.lower_), rtol=1e-12)
    assert Z.min() >= 0 and Z.max() <= 1
    np.testing.assert_array_equal(Z[:, 2], X[:, 2])  # the 0/1 column is unchanged


def test_standard_and_robust_scalers_with_a_big_budget():
    rng = np.random.default_rng(15)
    X = rng.standard_normal((20000, 3)) * [1.0, 50.0, 0.01] + [5.0, -100.0, 0.0]
    s = PrivateStandardScaler(epsilon=50.0, random_state=0).fit(X)
    Xc = np.clip(X, s.lower_, s.upper_)
    assert np.all(np.abs(s.mean_ - Xc.mean(0)) <= 0.01 * Xc.std(0))
    np.testing.assert_allclose(s.scale_, Xc.std(0), rtol=0.02)
    r = PrivateRobustScaler(epsilon=50.0, random_state=0).fit(X)
    # resolution: the grid bin of the true value (interpolated inside the bin)
    lo_end, hi_end = DEFAULT_GRID.bin_ends()
    b = DEFAULT_GRID.bin_index(np.median(X, 0))
    assert np.all((lo_end[b] <= r.center_) & (r.center_ <= hi_end[b]))
    iqr = np.subtract(*np.quantile(X, [0.75, 0.25], axis=0))
    ratio = 10 ** 0.25
    assert np.all((iqr / ratio <= r.scale_) & (r.scale_ <= iqr * ratio))
    Z = r.transform(X)
    np.testing.assert_allclose(Z, (np.clip(X, r.lower_, r.upper_) - r.center_) / r.scale_)


def test_constant_all_zero_and_rare_binary_columns():
    rng = np.random.default_rng(16)
    n = 5000
    rare = (rng.random(n) < 0.002).astype(float)  # ten ones: below the 1% level
    X = np.column_stack([np.zeros(n), np.full(n, 5.0), rare, rng.standard_normal(n)])
    m = PrivateMinMaxScaler(epsilon=20.0, random_state=0).fit(X)
    assert m.lower_[0] == m.upper_[0] == 0.0 and m.scale_[0] == 0.0
    lo_end, hi_end = DEFAULT_GRID.bin_ends()
    b = DEFAULT_GRID.bin_index(5.0)
    assert (m.lower_[1], m.upper_[1]) == (lo_end[b], hi_end[b])  # the bin of 5
    assert m.lower_[2] == m.upper_[2] == 0.0  # collapsed: the column becomes constant
    Z = m.transform(X)
    assert np.all(Z[:, 0] == 0) and np.all(Z[:, 2] == 0) and np.ptp(Z[:, 1]) == 0
    s = PrivateStandardScaler(epsilon=20.0, random_state=0).fit(X)
    assert s.scale_[0] == 1.0 and s.mean_[0] == 0.0
    Zs = s.transform(X)
    assert np.all(Zs[:, 0] == 0) and np.all(np.isfinite(Zs))


def test_sparse_input():
    rng = np.random.default_rng(17)
    dense = sp.random(3000, 5, density=0.1, random_state=1, data_rvs=lambda k: rng.lognormal(
        0, 1, k)).toarray()
    dense[:, 4] = (dense[:, 4] > 0).astype(float)
    for fmt in (sp.csr_matrix, sp.csc_matrix):
        a = private_feature_bounds(fmt(dense), 2.0, np.random.default_rng(0))
        b = private_feature_bounds(dense, 2.0, np.random.default_rng(0))
        np.testing.assert_array_equal(a.lower, b.lower)
        np.testing.assert_array_equal(a.upper, b.upper)
    explicit = sp.csc_matrix(dense)
    explicit.data[::3] = 0.0  # stored zeros count in the zero bin like implicit ones
    dense_explicit = explicit.toarray()
    np.testing.assert_array_equal(feature_histograms(explicit, np.arange(5)),
                                  reference_counts(dense_explicit, list(DEFAULT_GRID.edges)))
    m = PrivateMinMaxScaler(epsilon=5.0, random_state=0).fit(sp.csr_matrix(dense))
    Z = m.transform(sp.csr_matrix(dense))
    assert sp.issparse(Z) and np.all(m.lower_ == 0)
    np.testing.assert_allclose(Z.toarray(), PrivateMinMaxScaler(
        epsilon=5.0, random_state=0).fit(dense).transform(dense), rtol=1e-12)
    s = PrivateStandardScaler(epsilon=5.0, with_mean=False, random_state=0).fit(sp.csc_matrix(dense))
    assert sp.issparse(s.transform(sp.csc_matrix(dense)))
    # an interval without 0 cannot keep the zeros: densified
    c = PrivateClipper(bounds=(1.0, 2.0)).fit(sp.csr_matrix(dense))
    assert not sp.issparse(c.transform(sp.csr_matrix(dense)))


def test_dataframe_input_and_set_output():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(18)
    df = pd.DataFrame({"age": rng.integers(17, 90, 1000).astype(float),
                       "income": rng.lognormal(10, 1, 1000)})
    t = PrivateMinMaxScaler(epsilon=2.0, random_state=0).set_output(transform="pandas")
    out = t.fit_transform(df)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == ["age", "income"]
    assert list(t.feature_names_in_) == ["age", "income"]
    with pytest.raises(ValueError):
        t.transform(df[["income", "age"]])


def test_pipeline_with_a_dpopt_estimator():
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline

    rng = np.random.default_rng(19)
    n = 5000
    num = rng.standard_normal((n, 2)) * [10, 1000] + [40, 5000]
    cat = rng.choice(["a", "b", "c"], n)
    y = np.where(num[:, 0] + 0.01 * num[:, 1] + (cat == "a") * 10 > 90, 1, 0)
    X = np.empty((n, 3), dtype=object)
    X[:, :2], X[:, 2] = num, cat
    pre = ColumnTransformer([
        ("num", PrivateMinMaxScaler(epsilon=0.5, random_state=0), [0, 1]),
        ("cat", public_one_hot_encoder([["a", "b", "c"]], sparse_output=False), [2])])
    p = 2 + 3  # after scaling every feature lies in [0, 1]: public smoothness 1/4
    model = dpopt.DPLogisticRegression(solver="dp-cd", classes=[0, 1],
        epsilon=1.0, random_state=0,
        solver_options={"smoothness": np.full(p + 1, 0.25), "clip": 1.0, "passes": 5})
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        pipe = make_pipeline(pre, model).fit(X, y)
    assert pipe[-1].privacy_leaks_ == []
    from sklearn.metrics import roc_auc_score

    assert roc_auc_score(y, pipe.decision_function(X)) > 0.7  # a constant model gives 0.5
    assert pipe[0].named_transformers_["num"].epsilon_spent_ <= 0.5


@pytest.mark.parametrize("cls", TRANSFORMERS)
def test_output_bounds_hold(cls):
    X = known_columns(3000, np.random.default_rng(21))
    t = cls(epsilon=2.0, random_state=0).fit(X)
    lo, hi = t.output_bounds()
    Z = t.transform(X * 3 - 1)  # also outside the fitted range: clipped first
    assert np.all(Z >= lo - 1e-12) and np.all(Z <= hi + 1e-12)
    assert np.all(np.linalg.norm(Z, axis=1) <= t.row_bound() * (1 + 1e-12))


@pytest.mark.parametrize("cls", TRANSFORMERS)
def test_bad_input_names_the_argument(cls):
    X = known_columns(50, np.random.default_rng(20))
    bad = X.copy()
    bad[3, 1] = np.nan
    for arr in (bad, np.where(np.isnan(bad), np.inf, bad)):
        with pytest.raises(ValueError, match="X"):
            cls().fit(arr)
    with pytest.raises(ValueError, match="2D"):
        cls().fit(X[:, 0])
    for kwargs, name in [({"epsilon": 0.0}, "epsilon"), ({"epsilon": -1.0}, "epsilon"),
                         ({"delta": 0.0}, "delta"), ({"delta": 1.0}, "delta"),
                         ({"bounds": (2.0, 1.0)}, "bounds"),
                         ({"bounds": (np.zeros(3), np.ones(3))}, "bounds"),
                         ({"bounds": (0.0, np.inf)}, "bounds"),
                         ({"quantiles": (0.9, 0.1)}, "quantiles"), ({"quantiles": 0.5}, "quantiles"),
                         ({"confidence": -1.0}, "confidence")]:
        with pytest.raises(ValueError, match=name):
            cls(**kwargs).fit(X)
    t = cls(random_state=0).fit(X)
    with pytest.raises(ValueError):
        t.transform(X[:, :3])


def test_function_bad_input():
    rng = np.random.default_rng(0)
    X = np.ones((4, 2))
    for kwargs, name in [({"mu": 0.0}, "mu"), ({"mu": -1.0}, "mu"),
                         ({"quantiles": (0.0, 0.9)}, "quantiles"),
                         ({"bounds": ([0, 0], [1])}, "bounds"), ({"confidence": -1}, "confidence")]:
        args = {"mu": 1.0, **kwargs}
        with pytest.raises(ValueError, match=name):
            private_feature_bounds(X, args.pop("mu"), rng, **args)
    for arr in (np.zeros((0, 2)), np.zeros(3), np.array([[np.nan, 1.0]])):
        with pytest.raises(ValueError, match="X"):
            private_feature_bounds(arr, 1.0, rng)
    with pytest.raises(ValueError, match="categories"):
        public_one_hot_encoder("auto")


def test_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    for cls in TRANSFORMERS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            failed = [r for r in check_estimator(cls(), on_fail=None) if r["status"] == "failed"]
        assert not failed, [(r["check_name"], str(r["exception"])[:200]) for r in failed]


# ---------------------------------------------------------------------------
# real data


@pytest.mark.skipif(not os.path.exists(os.path.join(os.environ.get("DPOPT_DATA", ""),
                                                    "california.npz")),
                    reason="$DPOPT_DATA/california.npz is not available")
def test_california_bounds_cover_the_bulk():
    X = np.load(os.path.join(os.environ["DPOPT_DATA"], "california.npz"))["X"]
    fb = private_feature_bounds(X, 0.2, np.random.default_rng(0))
    q = np.quantile(X, [0.05, 0.5, 0.95], axis=0)
    assert np.all(fb.lower <= q[1]) and np.all(fb.upper >= q[1])
    assert np.all(fb.upper <= 10 * np.abs(q[2]) + 1) and np.all(fb.lower >= -10 * np.abs(q[0]) - 1)
