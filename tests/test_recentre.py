"""The re-centring step of the default path (dpopt.pipeline.scaling.recentre): a feature whose
first bounds are one bin of the log grid and whose centred bounds are one-sided within the
noisy mean's reach is narrowed about its own centre, then centred again by a second, small
location release."""

import math
import warnings

import numpy as np
import pytest

import dpopt
import dpopt.pipeline.scaling as scaling_module
from dpopt.api.release_audits import audit_recentre
from dpopt.pipeline.scaling import (
    RECENTRE_SD,
    InMemoryData,
    recentre,
    recentre_mu,
)
from dpopt.preprocessing import DEFAULT_GRID
from dpopt.preprocessing._norms import mean_noise
from dpopt.preprocessing._refine import within_bins
from dpopt.preprocessing.feature_maps import Scaling
from dpopt.privacy import Gaussian, epsilon_of


def centred_map():
    s = Scaling.from_bounds([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], shift=True, sparse=False)
    return s.centered(np.array([0.5, 0.5, 0.5]))


def test_a_one_sided_range_within_reach_is_narrowed_about_its_own_middle():
    s = centred_map()
    lower, upper = [-0.0562, 0.02, -0.1], [-0.0316, 0.04, 0.05]
    out = s.narrowed([0, 1, 2], lower, upper, reach=0.1)
    # features 0 and 1 (one-sided, far end within 0.1): middle and half-width
    np.testing.assert_allclose(out.offset[:2], [0.5 - 0.0439, 0.53])
    np.testing.assert_allclose(out.scale[:2], [0.0123, 0.01])
    np.testing.assert_allclose([out.lower[0], out.upper[0]], [0.5 - 0.0562, 0.5 - 0.0316])
    # feature 2 surrounds its mean: narrowed as before (divided by its larger end)
    assert out.offset[2] == 0.5 and out.scale[2] == pytest.approx(0.1)
    z = out.transform(np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.45, 0.53, 0.5]]))
    np.testing.assert_allclose(z[:2, :2], [[-1.0, -1.0], [1.0, 1.0]])
    assert np.all(np.abs(z) <= 1.0 + 1e-12)


@pytest.mark.parametrize("lower, upper", [(0.1, 2.37), (-3.16, -0.2), (0.02, 1.9)])
def test_a_one_sided_range_wider_than_the_box_still_maps_into_it(lower, upper):
    """An independent audit (session 28): a one-sided centred range within reach whose
    half-width exceeds 1 (its far end read beyond the values on noise) was divided by at
    most 1, which let values reach -1.135, outside the [-1, 1] that the gap bound of the
    held-out choice and the re-centring's sensitivity assume. Its half-width divides it now."""
    s = Scaling.from_bounds([0.0], [10.0], shift=True, sparse=False).centered(np.array([0.2]))
    out = s.narrowed([0], [lower], [upper], reach=4.0)
    z = out.transform(np.linspace(-5.0, 15.0, 401)[:, None])
    assert np.all(np.abs(z) <= 1.0 + 1e-12)
    assert out.scale[0] == pytest.approx(10.0 * 0.5 * (upper - lower))


def test_a_one_sided_range_beyond_reach_or_touching_zero_keeps_its_map():
    s = centred_map()
    lower, upper = [-0.3, -0.0001, 0.05], [-0.05, 0.0, 0.2]
    out = s.narrowed([0, 1, 2], lower, upper, reach=0.1)  # far ends 0.3, 0, 0.2
    np.testing.assert_array_equal(out.offset, s.offset)
    np.testing.assert_array_equal(out.scale, s.scale)
    # reach per feature: only the feature given a reach moves
    out = s.narrowed([0, 1], [-0.06, -0.06], [-0.03, -0.03], reach=np.array([0.1, 0.0]))
    assert out.offset[0] != s.offset[0] and out.offset[1] == s.offset[1]


def test_recentred_shifts_and_keeps_values_in_the_unit_box():
    s = Scaling(-np.ones(2), np.ones(2), np.zeros(2), np.ones(2))
    out = s.recentred([1], [0.5])
    z = out.transform(np.array([[-1.0, -1.0], [1.0, 1.0], [0.5, 0.5]]))
    np.testing.assert_allclose(z[:, 0], [-1.0, 1.0, 0.5])
    np.testing.assert_allclose(z[:, 1], [-1.0, 1 / 3, 0.0])


def test_one_bin_is_one_factor_of_the_grid_away_from_zero():
    f = 10 ** (1 / DEFAULT_GRID.bins_per_decade)
    lower = np.array([1778.28, 1778.28, 0.0, -3162.28, -3162.28, 5.6])
    upper = np.array([1778.28 * f, 3162.28 * f, 1.0, -3162.28 / f, -1.0, 5.6 * f * 1.01])
    assert within_bins(lower, upper, 1, DEFAULT_GRID).tolist() == [True, False, False, True,
                                                                   False, False]


def test_recentre_mu_follows_its_noise_target():
    mus = {"feature_means": 0.05, "model": 0.5}
    assert recentre_mu(4000, 0, mus) is None
    mu = recentre_mu(4000, 2, mus)
    assert 2 * math.sqrt(2) / (4000 * mu) == pytest.approx(RECENTRE_SD)
    # never more than the first location step, and never half the model's mu^2
    assert recentre_mu(100, 2, mus) == 0.05
    assert recentre_mu(100, 2, {"feature_means": 0.05, "model": 0.06}) is None


def test_recentre_noise_and_sensitivity():
    """Its means are noisy_means of (z + 1) / 2 in [0, 1]: N(0, k / mu^2) on the sums, whose
    L2 sensitivity under replace-one is sqrt(k); rebuilt from the same draws."""
    rng = np.random.default_rng(0)
    n, k, mu = 200, 3, 0.7
    X = rng.uniform(-1.5, 1.5, (n, k))
    s = Scaling(-np.ones(k), np.ones(k), np.zeros(k), np.ones(k))
    out, records = recentre(InMemoryData(X, None), s, np.arange(k), mu, np.random.default_rng(5))
    assert records == [Gaussian(1 / mu, 1)]
    half = np.clip((np.clip(X, -1, 1).sum(0) + n) / 2
                   + np.random.default_rng(5).standard_normal(k) * math.sqrt(k) / mu, 0, n) / n
    np.testing.assert_allclose(out.offset, 2 * half - 1)
    assert mean_noise(n, k, mu) == pytest.approx(math.sqrt(k) / (n * mu))
    for _ in range(200):  # replacing one row moves the [0, 1] sums by at most sqrt(k)
        Y = X.copy()
        Y[rng.integers(n)] = rng.uniform(-3, 3, k)
        moved = (np.clip(Y, -1, 1).sum(0) - np.clip(X, -1, 1).sum(0)) / 2
        assert np.linalg.norm(moved) <= math.sqrt(k) + 1e-12


def year_table(n=4000, p=30, seed=0):
    """A year in [2000, 2015] among p noise columns: with p + 1 columns the noisy mean of the
    [0, 1]-scaled year (first bounds [1778, 3162]) misses its 1%-wide bulk."""
    rng = np.random.default_rng(seed)
    year = rng.integers(2000, 2016, n).astype(float)
    Z = rng.standard_normal((n, p))
    return np.column_stack([year, Z]), (year - 2008) + Z[:, 0] + rng.standard_normal(n)


def fits(X, y, seeds=6, epsilon=2.0):
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)
        warnings.simplefilter("ignore", scaling_module.ColumnWarning)
        return [dpopt.DPLinearRegression(epsilon=epsilon, random_state=s).fit(X, y)
                for s in range(seeds)]


def test_a_year_whose_mean_missed_is_recentred_and_learned(monkeypatch):
    X, y = year_table()
    models = fits(X, y)
    for m in models:
        plan = m.auto_.plan
        assert plan["recentred_features"] == [0]
        z = m.auto_.scaling.transform(X)[:, 0]
        assert z.std() > 0.1 and abs(z.mean()) < 0.3 and np.all(np.abs(z) <= 1 + 1e-12)
        # the step's mu is out of the model's: the squares still sum to the target's mu^2
        shares = plan["mu_shares"]
        assert sum(v ** 2 for v in shares.values()) == pytest.approx(plan["mu"] ** 2, rel=1e-9)
        assert Gaussian(1 / shares["recentre"], 1) in m.fit_result_.mechanisms
        assert epsilon_of(m.fit_result_.mechanisms, m.fit_result_.delta) <= 2.0 * (1 + 1e-9)
        assert "re-centred by a second noisy mean" in m.auto_.report("DPLinearRegression")
    new = np.mean([m.score(X, y) for m in models])
    # without the rule (reach 0) the year stays a sliver of [-1, 1] and nothing is learned
    monkeypatch.setattr(scaling_module, "DEFAULT_CONFIDENCE", 0.0)
    old = fits(X, y)
    assert all("recentre" not in m.auto_.plan["mu_shares"] for m in old)
    assert np.mean([m.score(X, y) for m in old]) < 0.05 < 0.4 < new


def test_chunked_fit_recentres_the_same_way():
    da = pytest.importorskip("dask.array")  # the dask extra: installed by .ci/run
    X, y = year_table(n=3000, p=20)
    ref = dpopt.DPLinearRegression(epsilon=2.0, random_state=1).fit(X, y)
    got = dpopt.DPLinearRegression(epsilon=2.0, random_state=1).fit(
        da.from_array(X, chunks=(700, 21)), da.from_array(y, chunks=700))
    assert ref.auto_.plan["recentred_features"] == got.auto_.plan["recentred_features"] == [0]
    np.testing.assert_allclose(got.auto_.scaling.offset, ref.auto_.scaling.offset, rtol=1e-9)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-7, atol=1e-9)


def test_audit_recentre_catches_too_little_noise():
    ok = audit_recentre(n_runs=1000)
    assert ok.epsilon_lb <= ok.epsilon
    broken = audit_recentre(n_runs=1000, noise_scale=0.25)
    assert broken.epsilon_lb > broken.epsilon


def test_objective_perturbation_is_not_preceded_by_a_recentring():
    """Objective perturbation is calibrated against the scaling's mu, which must not depend
    on the data (a search's probe accounts it in advance): no re-centring release ahead of
    it; the free narrowing about the middle of the centred range still runs, and the year is
    learned (accuracy 0.56 -> 0.66 at epsilon = 1 on such a table, docs/default_path.md)."""
    X, y = year_table(n=3000, p=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = dpopt.DPLogisticRegression(epsilon=2.0, random_state=0, classes=[0, 1]).fit(
            X, (y > np.median(y)).astype(int))
        reg = dpopt.DPLinearRegression(epsilon=2.0, random_state=0).fit(X, y)
    assert clf.auto_.plan["solver"] == "objective-perturbation"
    assert "recentre" not in clf.auto_.plan["mu_shares"]
    assert clf.auto_.plan["recentred_features"] == [0]  # narrowed about the middle, free
    assert "not centred again" in clf.auto_.report("DPLogisticRegression")
    z = clf.auto_.scaling.transform(X)[:, 0]
    assert z.std() > 0.1 and np.all(np.abs(z) <= 1 + 1e-12)
    assert reg.auto_.plan["recentred_features"] == [0]  # the same data, a Gaussian model
