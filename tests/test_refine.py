"""The second look at a concentrated range (:mod:`dpopt.preprocessing._refine`): when it is
taken, its noise, its sensitivity, and what it reads."""

import math

import numpy as np
import pytest

from dpopt.preprocessing import _bounds, _refine


def test_the_second_look_is_only_taken_where_it_can_narrow():
    from dpopt.pipeline.target_looks import refine_resolvable

    assert _refine.concentrated(31.6, 56.2) and _refine.concentrated(-178.0, -100.0)
    assert _refine.concentrated(100.0, 316.3) is False  # three bins: already read at the grid's step
    assert not _refine.concentrated(-1.0, 1.0) and not _refine.concentrated(0.0, 1.0)
    assert not _refine.concentrated(100.0, 100.0) and not _refine.concentrated(0.0, 0.0)  # nothing to read
    # public: a bulk on 8 of 16 bins (n/8 records each) must clear 4.5 sigma, sigma = sqrt(2)/mu
    assert refine_resolvable(225, 0.32) and not refine_resolvable(225, 0.099)


def test_the_second_look_adds_the_stated_noise(monkeypatch):
    """Too little noise is the worst bug: the equal-bin histogram is released with sigma =
    sqrt(2) / mu per count (replace-one: one record leaves a bin and enters another)."""
    drawn = []
    original = _bounds.gaussian_noise
    monkeypatch.setattr(_bounds, "gaussian_noise",
                        lambda rng, sigma, size: drawn.append((sigma, size)) or
                        original(rng, sigma, size))
    counts = _refine.linear_counts(np.r_[np.full(300, 2.0), np.full(700, 3.0)], 1.0, 5.0)
    assert counts.sum() == 1000 and counts.size == _refine.REFINE_BINS
    lo, hi, record, spread, scale, *_ = _refine.refined_bounds(counts, 1000, 1.0, 5.0, 0.4,
                                                           np.random.default_rng(0))
    assert 0.0 < scale <= spread
    assert drawn == [(math.sqrt(2) / 0.4, (1, 16))] and record.noise_multiplier == 2.5
    assert 1.0 <= lo <= 2.0 and 3.0 <= hi <= 5.0
    # no resolution at a tiny budget: the range is kept (the record is still spent)
    assert _refine.refined_bounds(counts, 1000, 1.0, 5.0, 1e-4,
                                  np.random.default_rng(0))[:2] == (1.0, 5.0)
    assert 0.0 < spread <= 1.0
    with pytest.raises(ValueError, match="n"):
        _refine.refined_bounds(counts, 0, 1.0, 5.0, 0.4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="lower < upper"):
        _refine.refined_bounds(counts, 1000, 5.0, 1.0, 0.4, np.random.default_rng(0))


def test_replacing_one_record_moves_the_counts_by_at_most_sqrt2():
    """The sensitivity the noise is calibrated to: one record leaves one bin and enters
    another (values beyond the range are clipped into the end bins)."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        y = rng.normal(40, 5, 50)
        z = y.copy()
        z[rng.integers(50)] = rng.choice([rng.normal(40, 5), -1e6, 1e6, 40.0])
        moved = _refine.linear_counts(y, 31.6, 56.2) - _refine.linear_counts(z, 31.6, 56.2)
        assert np.linalg.norm(moved) <= math.sqrt(2) + 1e-12
        assert _refine.linear_counts(z, 31.6, 56.2).sum() == 50


def test_the_fences_follow_the_skew():
    """Tukey's 1.5 IQR when the quartiles are symmetric; a longer upper fence for a right
    skew (and the mirror for a left one)."""
    assert _refine.skew_adjusted_fences(-1.0, 0.0, 1.0) == (-4.0, 4.0)
    lo, hi = _refine.skew_adjusted_fences(0.0, 0.3, 1.0)  # b = 0.4
    assert hi - 1.0 > 1.5 and 0.0 - lo < 1.5
    lo2, hi2 = _refine.skew_adjusted_fences(-1.0, -0.3, 0.0)  # the mirror
    assert (lo2, hi2) == pytest.approx((-hi, -lo))
    assert _refine.skew_adjusted_fences(2.0, 2.0, 2.0) == (2.0, 2.0)  # no spread: no fence


def test_the_model_path_pays_the_second_look_only_while_the_model_keeps_half():
    """refine_mu: the larger of 5% of the whole mu^2 and the least mu that 16 bins need
    (n/8 records per bin above 4.5 sigma, sigma = sqrt(2)/mu), or None when that would
    take more than half of the model's mu^2; all from public n and the plan's split."""
    from dpopt.pipeline.target_looks import refine_mu

    least = lambda n: 8 * 4.5 * math.sqrt(2.0) / n  # noqa: E731
    mus = {"target_bounds": 0.2, "model": 0.9}  # whole mu^2 = 0.85
    assert refine_mu(100_000, mus) == pytest.approx(math.sqrt(0.05 * 0.85))
    assert refine_mu(150, mus) == pytest.approx(least(150))  # 0.34: larger than 5%
    assert refine_mu(60, mus) is None  # least(60) = 0.85 > 0.9 / sqrt(2)
    assert mus == {"target_bounds": 0.2, "model": 0.9}  # a pure function of the plan


@pytest.mark.parametrize("sd", [1.0, 3.0, 10.0, 30.0])
def test_the_spread_bound_is_above_the_clipped_values_standard_deviation(sd):
    """spread_bound bounds the standard deviation of the values clipped to the refined range
    (in its half-width's units) with high probability over the noise, and is not vacuous
    where the values fill the range: post-processing of the refine's release."""
    rng = np.random.default_rng(int(sd))
    misses, spreads, truths = 0, [], []
    for seed in range(200):
        y = rng.normal(100.0, sd, 3000)
        r = _refine.refined_bounds(_refine.linear_counts(y, 0.0, 200.0), 3000, 0.0, 200.0, 0.5,
                                   np.random.default_rng(seed))
        truth = np.std(np.clip(y, r.lower, r.upper)) / (0.5 * (r.upper - r.lower))
        misses += r.spread < truth
        spreads.append(r.spread)
        truths.append(truth)
    assert misses == 0
    if sd >= 10.0:  # the values span several of the 16 bins: within a bin's width of it
        assert np.mean(spreads) < np.mean(truths) + 0.25


@pytest.mark.parametrize("sd", [5.0, 15.0, 30.0])
def test_the_spread_estimate_is_close_to_the_spread_and_below_the_bound(sd):
    """The Huber threshold's scale (curvature.huber_in_place_of_squares): an estimate of the
    clipped values' standard deviation from the same release, within a quarter of a bin of
    it on average and never above the upper bound (which sits half a bin and more above
    it)."""
    rng = np.random.default_rng(int(sd))
    errors, gaps = [], []
    for seed in range(100):
        y = rng.normal(100.0, sd, 3000)
        r = _refine.refined_bounds(_refine.linear_counts(y, 0.0, 200.0), 3000, 0.0, 200.0, 0.5,
                                   np.random.default_rng(seed))
        truth = np.std(np.clip(y, r.lower, r.upper)) / (0.5 * (r.upper - r.lower))
        bins = 2.0 * 200.0 / _refine.REFINE_BINS / (r.upper - r.lower)  # a bin, half-widths
        assert r.scale <= r.spread
        errors.append((r.scale - truth) / bins)
        gaps.append((r.spread - truth) / bins)
    assert abs(np.mean(errors)) < 0.25 and np.mean(gaps) > np.mean(errors) + 0.2


def test_the_spread_estimate_by_hand():
    """Exact counts: half the values in each end bin of [-1, 1] (bins of width 1/2): their
    middles +-0.75 and the bins' own spread 1/48; all of them in one bin is its floor."""
    edges = np.linspace(-1.0, 1.0, 5)
    assert _refine.spread_estimate(np.array([50.0, 0, 0, 50.0]), edges, -1.0, 1.0) == \
        pytest.approx(math.sqrt(0.75 ** 2 + 0.25 / 12.0))
    assert _refine.spread_estimate(np.array([0.0, 100.0, 0, 0]), edges, -1.0, 1.0) == \
        pytest.approx(0.25)
    assert _refine.spread_estimate(np.array([-5.0, 0.0, 0, 0]), edges, -1.0, 1.0) == 1.0


def test_the_spread_bound_by_hand():
    """Exact counts (sigma 0): half the values at each end of [-1, 1] have standard deviation
    1 about their mean 0; all of them in the middle bin is at most that bin's half-width."""
    edges = np.linspace(-1.0, 1.0, 5)
    assert _refine.spread_bound(np.array([50.0, 0, 0, 50.0]), 0.0, 100, edges, -1.0, 1.0) == \
        pytest.approx(1.0)
    assert _refine.spread_bound(np.array([0.0, 100.0, 0, 0]), 0.0, 100, edges, -1.0, 1.0) == \
        pytest.approx(0.25)
    # noise adds confidence * sigma * ||g|| / n before the root; a range of one point is 1
    noisy = _refine.spread_bound(np.array([0.0, 100.0, 0, 0]), 2.0, 100, edges, -1.0, 1.0)
    g = np.array([0.75, 0.25, 0.75, 1.25]) ** 2  # farther ends' squares about c = -0.25
    assert noisy == pytest.approx(math.sqrt((100 * g[1] + 4.0 * 2.0 * np.linalg.norm(g)) / 100))
    assert _refine.spread_bound(np.ones(4), 1.0, 4, edges, 0.5, 0.5) == 1.0


def test_the_looks_take_as_many_bins_as_their_budget_resolves_and_go_on_while_they_narrow():
    from dpopt.pipeline.target_looks import (
        MIN_REFINE_BINS,
        NARROWING,
        least_refine_mu,
        narrowed,
        refine_bins,
    )

    for n in (150, 375, 5000):
        assert refine_bins(n, least_refine_mu(n)) == _refine.REFINE_BINS
        assert refine_bins(n, 10.0 * least_refine_mu(n)) == _refine.REFINE_BINS  # at most 16
        assert refine_bins(n, least_refine_mu(n, MIN_REFINE_BINS)) == MIN_REFINE_BINS
        assert refine_bins(n, 0.99 * least_refine_mu(n, MIN_REFINE_BINS)) == 0
        assert refine_bins(n, least_refine_mu(n, 8)) == 8
    assert narrowed(0.0, 1.0, NARROWING) and not narrowed(0.0, 1.0, 2.0)
    assert not narrowed(1.0, 1.0, 100.0)  # collapsed: nothing left to read


def _year_like(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, 2005.0 + 8.0 * (X @ rng.normal(size=4) / 2.0 + rng.normal(size=n)) / math.sqrt(2)


def test_a_narrow_band_far_from_zero_is_read_again_until_the_looks_stop_narrowing():
    """An independent fuzz (session 28): a year near 2005 with a spread of 8 was left in the
    log grid's [1778, 3162] (170 of its standard deviations) or one look's 16th of it, and
    the released constant's noise grew with that width (R^2 down to -100). The looks now go
    on while they narrow the range by 2 sqrt(2) or more, each a Gaussian record of the
    composition, in the constant's path and a Gaussian model's."""
    import dpopt
    from dpopt.privacy import Gaussian

    X, y = _year_like(400)
    constant = dpopt.DPLinearRegression(epsilon=0.5, random_state=0).fit(X, y)
    plan = constant.auto_.plan
    assert plan["solver"] == "none" and "read again on equal bins" in plan["constant"]
    lo, hi = constant.target_range_
    assert hi - lo < (3162.3 - 1778.3) / 4 and lo < y.mean() < hi
    assert constant.epsilon_spent_ <= 0.5
    model = dpopt.DPLinearRegression(epsilon=2.0, random_state=0).fit(X, y)
    plan = model.auto_.plan
    assert plan["target_looks"] >= 2
    lo, hi = model.target_range_
    assert hi - lo < 20 * y.std() and lo < y.mean() < hi
    mus = plan["mu_shares"]
    assert math.sqrt(sum(m ** 2 for m in mus.values())) == pytest.approx(plan["mu"], rel=1e-9)
    assert model.epsilon_spent_ <= 2.0 and model.epsilon_spent_ == pytest.approx(2.0, rel=1e-6)
    looks = [m for m in model.fit_result_.mechanisms if isinstance(m, Gaussian)]
    assert len(looks) >= plan["target_looks"]
    # objective perturbation's calibration is fixed before the data: one look at most
    huber = dpopt.DPHuberRegressor(epsilon=2.0, random_state=0).fit(X, y)
    assert "target_looks" not in huber.auto_.plan and huber.epsilon_spent_ <= 2.0


def test_a_constant_target_stops_the_looks_before_floating_point_does():
    """An independent audit (session 28): a constant target passes every look's narrowing
    test (each look narrows it by 16) until its equal bins fell below the spacing of
    floating-point numbers, and np.histogram raised after some 17 releases. The looks stop
    at a range narrower than RESOLUTION of its magnitude."""
    import dpopt
    from dpopt.pipeline.mean_of_y import private_mean_of_y
    from dpopt.pipeline.scaling import InMemoryData
    from dpopt.pipeline.target_looks import RESOLUTION, narrowed

    assert not narrowed(2005.0, 2005.0 + 1e-7, 1.0) and narrowed(2005.0, 2005.1, 1.0)
    assert RESOLUTION * 2005.0 > 1e3 * np.spacing(2005.0)  # 16 bins stay representable
    for seed in range(10):
        target, mean, records, what, spent = private_mean_of_y(
            InMemoryData(np.zeros((5000, 1)), np.full(5000, 2005.0)), 3.0,
            np.random.default_rng(seed))
        assert target.lower <= 2005.0 <= target.upper and spent == 3.0
        assert abs(target.center + target.half_width * mean - 2005.0) < 1e-3
    rng = np.random.default_rng(1)
    X, y = rng.standard_normal((20000, 3)), np.full(20000, 2005.0)
    model = dpopt.DPLinearRegression(epsilon=8.0, random_state=2).fit(X, y)
    assert abs(model.intercept_ - 2005.0) < 1e-3 and model.epsilon_spent_ <= 8.0


def test_a_looks_own_mean_is_the_binned_mean_with_its_stated_noise():
    """look_mean: c + sum_k n~_k (m_k - c) / n, whose expectation is the mean of the values
    rounded to their bins' middles (every value is counted once), and whose noise has the
    public sd sigma ||m - c|| / n: checked against 4,000 noise draws (a stated sd too small
    would make the pooling trust the look too much)."""
    rng = np.random.default_rng(3)
    y = -500.0 + 100.0 * rng.standard_normal(331)
    lower, upper, bins, sigma = -1000.0, -316.0, 6, 25.0
    counts = _refine.linear_counts(y, lower, upper, bins)
    edges = np.linspace(lower, upper, bins + 1)
    middle = 0.5 * (edges[1:] + edges[:-1])
    binned = float(counts @ middle) / y.size
    exact, sd, rounding = _refine.look_mean(counts, sigma, y.size, edges)
    assert exact == pytest.approx(binned)  # no noise: the binned mean
    assert sd == pytest.approx(sigma * np.linalg.norm(middle - 0.5 * (lower + upper)) / y.size)
    assert rounding == pytest.approx(0.5 * (edges[1] - edges[0]))  # half a bin
    draws = np.array([_refine.look_mean(counts + sigma * rng.standard_normal(bins), sigma,
                                        y.size, edges)[0] for _ in range(4000)])
    assert draws.mean() == pytest.approx(binned, abs=4 * sd / math.sqrt(4000))
    assert draws.std() == pytest.approx(sd, rel=0.05)
    # the bins' rounding: within half a bin of the clipped values' mean, and here far less
    assert abs(binned - np.clip(y, lower, upper).mean()) < 0.1 * (edges[1] - edges[0])


def test_every_look_reports_its_own_mean():
    """refined_bounds carries the look's mean and sd (look_mean of its noisy counts) for the
    pooling downstream; the sd follows from public n, mu and the range alone."""
    y = np.r_[np.full(300, 2.0), np.full(700, 3.0)]
    look = _refine.refined_bounds(_refine.linear_counts(y, 1.0, 5.0, 8), 1000, 1.0, 5.0, 2.0,
                                  np.random.default_rng(0))
    edges = np.linspace(1.0, 5.0, 9)
    middle = 0.5 * (edges[1:] + edges[:-1])
    assert look.mean_sd == pytest.approx(math.sqrt(2.0) / 2.0 * np.linalg.norm(middle - 3.0)
                                         / 1000)
    assert look.mean_rounding == pytest.approx(0.25)
    assert abs(look.mean - 2.7) < 5 * look.mean_sd + 0.25  # binned: 2.75 (middles 2.25, 2.75...)


def test_a_look_far_out_on_the_float_range_reads_a_finite_mean():
    """look_mean works relative to the range's half-width: a public range near 1e-170 or
    1e300 gives a finite estimate and a positive sd (an independent audit, session 29: the
    absolute offsets' norm underflowed to 0, or their products overflowed)."""
    for lower, upper in ((1e-170, 3e-170), (1e155, 3e155), (1e300, 3e300)):
        edges = np.linspace(lower, upper, 5)
        mean, sd, rounding = _refine.look_mean(np.array([10.0, 40.0, 40.0, 10.0]), 2.0, 100,
                                               edges)
        assert mean == pytest.approx(0.5 * (lower + upper), rel=1e-12)
        assert 0 < sd < upper - lower and rounding == pytest.approx((upper - lower) / 8)


def test_pooling_weights_by_the_least_error_and_drops_what_has_none():
    """target_looks.pooled: inverse-variance weights computed relative to the smallest
    error (errors of 1e-160 or 1e160 neither overflow nor underflow), estimates without a
    finite positive error dropped, None when none is left."""
    from dpopt.pipeline.target_looks import pooled

    mean, error = pooled([(1.0, 1.0), (3.0, 1.0)])
    assert (mean, error) == (pytest.approx(2.0), pytest.approx(1 / math.sqrt(2)))
    for scale in (1e-160, 1e-170, 1e160):
        mean, error = pooled([(1.0, scale), (4.0, 2 * scale)])
        assert mean == pytest.approx((1.0 + 4.0 / 4) / 1.25) and error == pytest.approx(
            scale / math.sqrt(1.25))
    assert pooled([(1.0, 0.0), (2.0, None), (float("nan"), 1.0), (3.0, math.inf)]) is None
    assert pooled([(5.0, 0.0), (2.0, 3.0)]) == (2.0, 3.0)
    assert pooled([(1e308, 1e300), (1.5e308, 1e300)]) is None  # the sum overflows


def test_an_estimate_of_the_mean_takes_the_target_scale_unclipped():
    """TargetScaling.scaled_estimate maps an estimate in y's units like transform, without
    its clip (a noisy mean may fall outside the range), and its error by the half-width."""
    from dpopt.preprocessing.feature_maps import TargetScaling

    target = TargetScaling.from_bounds(10.0, 30.0, shift=True)
    value, error = target.scaled_estimate(25.0, 4.0)
    assert value == pytest.approx(float(target.transform(np.array([25.0]))[0]))
    assert (value, error) == pytest.approx((0.5, 0.4))
    assert target.scaled_estimate(40.0, 1.0)[0] == pytest.approx(2.0)  # outside: not clipped
