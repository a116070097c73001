"""A regression target's public range (``target_bounds=``): no histogram of y is released,
its share goes to the model, y is clipped to the range, and bad values are refused before
the data is read."""

import warnings

import numpy as np
import pytest

import dpopt
from dpopt.privacy import Gaussian, epsilon_of


def table(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)) * [1, 10, 100, 0.1]
    y = X @ [1.0, 0.1, 0.01, 10.0] + 50 + rng.standard_normal(n)
    return X, y


def fit(X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)
        return dpopt.DPLinearRegression(**kw).fit(X, y)


def test_a_public_range_releases_no_histogram_of_y_and_gives_its_share_to_the_model():
    X, y = table()
    private = fit(X, y, epsilon=1.0, random_state=0)
    public = fit(X, y, epsilon=1.0, random_state=0, target_bounds=(40, 60))
    shares = public.auto_.plan["mu_shares"]
    assert "target_bounds" in private.auto_.plan["mu_shares"] and "target_bounds" not in shares
    assert shares["model"] > private.auto_.plan["mu_shares"]["model"]
    lo, hi = public.target_range_  # within the public range (the second look may narrow it)
    assert 40.0 <= lo < hi <= 60.0
    # one Gaussian record fewer: the target's histogram
    assert len(public.fit_result_.mechanisms) == len(private.fit_result_.mechanisms) - 1
    assert public.epsilon_spent_ == pytest.approx(
        epsilon_of(public.fit_result_.mechanisms, public.delta_spent_), rel=1e-9)
    assert public.epsilon_spent_ <= 1.0 * (1 + 1e-9)
    assert public.score(X, y) > 0.7
    assert "the target's range [40, 60] is public" in public.privacy_report()
    assert "the target's range" not in private.privacy_report()


def test_targets_beyond_the_range_are_clipped_and_predictions_stay_within_it():
    X, y = table()
    m = fit(X, y, epsilon=4.0, random_state=1, target_bounds=(49, 51))
    pred = m.predict(X)
    assert pred.min() >= 49 - 1e-9 and pred.max() <= 51 + 1e-9


def test_the_mean_only_path_spends_the_whole_budget_on_the_mean():
    """Too few rows for a model: with a public range the private mean needs no histogram,
    so its one Gaussian release gets all of mu (the range's share is not spent)."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((60, 3))
    y = 70 + 2 * rng.standard_normal(60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = dpopt.DPLinearRegression(epsilon=0.25, random_state=0,
                                     target_bounds=(60, 80)).fit(X, y)
    records = m.fit_result_.mechanisms
    assert len(records) == 1 and isinstance(records[0], Gaussian)
    assert m.epsilon_spent_ == pytest.approx(0.25, rel=1e-6)
    assert 60 <= m.intercept_ <= 80 and np.all(m.coef_ == 0)
    assert "its public range" in m.auto_.plan["reason"]


def test_chunked_data_takes_the_public_range_without_a_pass_over_y():
    da = pytest.importorskip("dask.array")
    X, y = table(2000)
    m = dpopt.DPLinearRegression(epsilon=1.0, random_state=0, target_bounds=(40, 60))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.fit(da.from_array(X, chunks=(500, 4)), da.from_array(y, chunks=500))
    assert "target_bounds" not in m.auto_.plan["mu_shares"]
    lo, hi = m.target_range_
    assert 40.0 <= lo < hi <= 60.0 and m.epsilon_spent_ <= 1.0 * (1 + 1e-9)


@pytest.mark.parametrize("given, needle", [
    ((5, 1), "need finite lower < upper"),
    ((0, np.inf), "need finite lower < upper"),
    (("a", 1), "pair \\(lower, upper\\) of numbers"),
    (3.0, "pair \\(lower, upper\\) of numbers"),
])
def test_bad_ranges_are_refused_before_anything_is_spent(given, needle):
    X, y = table(500)
    acc = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-3)
    est = dpopt.DPLinearRegression(epsilon=1.0, target_bounds=given, accountant=acc)
    with pytest.raises(ValueError, match=needle):
        est.fit(X, y)
    assert acc.ledger == [] and not hasattr(est, "coef_")


def test_an_explicit_solver_refuses_the_range():
    X, y = table(500)
    with pytest.raises(ValueError, match="target_bounds= applies to solver='auto'"):
        dpopt.DPLinearRegression(solver="dp-gd", target_bounds=(0, 100)).fit(X, y)


def test_every_regressor_takes_the_range():
    X, y = table(2000)
    for est in (dpopt.DPLasso(alpha=0.01), dpopt.DPElasticNet(alpha=0.01),
                dpopt.DPHuberRegressor(threshold=5.0)):
        est.set_params(epsilon=2.0, random_state=0, target_bounds=(40, 60))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        assert "target_bounds" not in est.auto_.plan.get("mu_shares", {})
        lo, hi = est.target_range_
        assert 40.0 <= lo < hi <= 60.0


def test_an_unresolved_target_is_warned_about_as_the_target():
    """The public function names the target, not "features [0]"; the default path is quiet
    about it (its own warning and report say what it released instead)."""
    from dpopt.preprocessing import private_target_bounds

    y = 60000 + 3000 * np.random.default_rng(0).standard_normal(16)
    with pytest.warns(UserWarning, match="range of the target y") as caught:
        private_target_bounds(y, 0.1, np.random.default_rng(0))
    assert not any("features [0]" in str(w.message) for w in caught)
    private_target_bounds(y, 0.1, np.random.default_rng(0), quiet=True)  # no warning (filter)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(np.ones((16, 2)), y)
    messages = [str(w.message) for w in caught]
    assert not any("features [0]" in m or "target y;" in m for m in messages)
    assert any("target_bounds=(lower, upper)" in m for m in messages)


def test_the_target_guard_replaces_a_false_stop_and_keeps_real_tails():
    """guarded_target_bounds (post-processing): the same counts read again at the target's
    confidences (5.5, 6), about 2000 times fewer false stops than the features' (4, 4.5); an
    end more than TARGET_JUMP of that reading's widths beyond its centre is the noise's.
    A noise bin planted seven decades below the data moves the default reading's lower end
    there and the guard takes it back; a real heavy tail (lognormal, 1% level) is kept."""
    from dpopt.preprocessing._bounds import (
        DEFAULT_GRID,
        TARGET_BIN_CONFIDENCE,
        TARGET_CONFIDENCE,
        guarded_target_bounds,
        histogram_bounds,
    )
    from dpopt.privacy.mechanisms import noisy_scan

    grid, sigma, q = DEFAULT_GRID, 10.0, (0.01, 0.99)
    y = np.random.default_rng(4).normal(0.0, 2.0, 1200)
    counts = np.bincount(grid.bin_index(y), minlength=grid.n_bins).astype(float)
    noisy = counts + np.random.default_rng(5).standard_normal(grid.n_bins) * sigma
    noisy[grid.bin_index(-3e7)] = 50.0  # 5 sigma of noise in one far bin
    lo, hi, _ = histogram_bounds(noisy, sigma, 1200, q, grid=grid)
    assert lo[0] < -1e7  # the default reading stops on it
    g_lo, g_hi, un = guarded_target_bounds(noisy, sigma, 1200, q, grid=grid)
    assert not un[0] and -10.0 < g_lo[0] < -2.0 and g_hi[0] == hi[0]
    # a lognormal target's long upper tail: both readings agree within the jump, kept
    z = np.random.default_rng(6).lognormal(0.0, 2.0, 5000)
    counts = np.bincount(grid.bin_index(z), minlength=grid.n_bins).astype(float)
    for seed in range(20):
        noisy = counts + np.random.default_rng(seed).standard_normal(grid.n_bins) * sigma
        plain = histogram_bounds(noisy, sigma, 5000, q, grid=grid)
        guarded = guarded_target_bounds(noisy, sigma, 5000, q, grid=grid)
        np.testing.assert_array_equal(plain[0], guarded[0])
        np.testing.assert_array_equal(plain[1], guarded[1])
    # the guard's reading: empty bins below the data, scanned from the bottom, stop early
    # in about 1e-3 of the scans at (4, 4.5) and in about 1e-6 at (5.5, 6)
    rng = np.random.default_rng(26)
    early = {"features": 0, "target": 0}
    for _ in range(4):
        noisy = rng.standard_normal((50_000, 109))
        noisy[:, -1] += 1e6  # the data in the top bin
        early["features"] += int(np.sum(noisy_scan(noisy, 0.0, 1.0, 4.0, from_top=False,
                                                   bin_confidence=4.5) < 108))
        early["target"] += int(np.sum(noisy_scan(noisy, 0.0, 1.0, TARGET_CONFIDENCE,
                                                 from_top=False,
                                                 bin_confidence=TARGET_BIN_CONFIDENCE) < 108))
    assert early["features"] > 100 and early["target"] <= 3  # expected about 230 and 0.2-1


def test_the_audits_false_stop_seed_releases_a_range_around_the_data():
    """The independent audit's repro (session 26): at this seed a lower scan stopped seven
    decades below a target in [-5.2, 4.6], and the fit scored R^2 -1.8e8 on fresh data."""
    rng = np.random.default_rng(1)
    Z = rng.standard_normal((1500, 3))
    X = Z @ np.random.default_rng(99).standard_normal((3, 40)) + rng.standard_normal((1500, 40))
    y = Z @ [1.0, -1.0, 0.5] + 0.5 * rng.standard_normal(1500)
    est = dpopt.DPLinearRegression(epsilon=2.0, random_state=10018,
                                   feature_bounds={j: (-6.0, 6.0) for j in range(40)}).fit(X, y)
    lo, hi = est.target_range_
    assert -10.0 < lo < np.quantile(y, 0.05) and np.quantile(y, 0.95) < hi < 10.0
