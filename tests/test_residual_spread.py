"""Huber's threshold read again half-way through DP-GD on the default path: the residuals'
spread released at the first half's last iterate (dpopt.pipeline.curvature)."""

import math
import warnings

import numpy as np
import pytest

import dpopt
from dpopt.api.release_audits import audit_residual_spread
from dpopt.data import Problem
from dpopt.pipeline import curvature
from dpopt.pipeline.curvature import (
    HUBER_K,
    SPREAD_THRESHOLD,
    expected_spread_statistic,
    noisy_spread_mean,
    normal_spread,
    rescaled_huber_fit,
    residual_spread,
    spread_noise,
    spread_statistic,
)
from dpopt.privacy import Gaussian
from dpopt.solvers.dp_gd import default_settings
from test_curvature import PUBLIC, factors, rows


def test_spread_statistic_is_two_huber_means_bounded_and_monotone():
    X, y = rows(300, 3, seed=1)
    problem = Problem(X, 3.0 * y, loss="squared", fit_intercept=True)
    w = np.array([0.4, -0.3, 0.2, 0.1])
    residuals = X @ w[:3] + w[3] - 3.0 * y
    z = X @ w[:3] + w[3]
    for t in (0.3, 2.0):
        # per record, the difference of two Huber losses (the module docstring's q)
        hubers = (dpopt.data.losses.huber(t / 2).value(z, 3.0 * y) / (t / 2)
                  - dpopt.data.losses.huber(t).value(z, 3.0 * y) / t)
        np.testing.assert_allclose(spread_statistic(residuals, t), hubers, atol=1e-12)
        exact = spread_statistic(residuals, t).mean()
        noisy = noisy_spread_mean(problem, w, 1e12, np.random.default_rng(0), t=t)[0]
        assert noisy == pytest.approx(exact, abs=1e-12)
    r = np.linspace(-5, 5, 2001)
    q = spread_statistic(r, 2.0)
    assert q.min() == 0.0 and q.max() == pytest.approx(0.5)
    assert np.all(np.diff(q[r >= 0]) >= 0) and np.allclose(q, q[::-1])
    inner = np.abs(r) <= 1.0  # the second moment up to |r| = 1 (threshold 2)
    np.testing.assert_allclose(q[inner], r[inner] ** 2 / 4)


def test_expected_statistic_and_its_inverse_read_the_standard_deviation():
    rng = np.random.default_rng(0)
    for t in (0.4, SPREAD_THRESHOLD):
        for sigma in (0.01, 0.1, 0.3, 1.0, 3.0):
            z = sigma * rng.standard_normal(400_000)
            mc = spread_statistic(z, t).mean()
            assert expected_spread_statistic(sigma, t) == pytest.approx(mc, rel=0.01)
            assert normal_spread(expected_spread_statistic(sigma, t), t) == pytest.approx(
                sigma, rel=1e-8)
        assert normal_spread(t / 4, t) == math.inf and normal_spread(-1.0, t) == t * 1e-6
    # a skewed residual keeps its standard deviation (the second moment), not its bulk's
    e = rng.exponential(0.15, 200_000)
    e -= e.mean()
    got = normal_spread(spread_statistic(e, SPREAD_THRESHOLD).mean(), SPREAD_THRESHOLD)
    assert got == pytest.approx(e.std(), rel=0.02)


def test_noisy_spread_mean_noise_sensitivity_and_record():
    X, y = rows(400, 3, seed=4)
    problem = Problem(X, y + np.where(np.arange(400) < 20, 3.0, 0.0), loss="huber",
                      fit_intercept=True)
    w = np.array([0.3, -0.2, 0.1, 0.05])
    exact = noisy_spread_mean(problem, w, 1e12, np.random.default_rng(0))[0]
    draws = np.array([noisy_spread_mean(problem, w, 0.5, np.random.default_rng(s))[0]
                      for s in range(2000)])
    sigma = SPREAD_THRESHOLD / (4 * 400 * 0.5)
    assert abs(draws.mean() - exact) < 4 * sigma / math.sqrt(2000)
    assert draws.std() == pytest.approx(sigma, rel=0.06)
    assert noisy_spread_mean(problem, w, 0.5, np.random.default_rng(0))[1] == Gaussian(2.0)
    with pytest.raises(ValueError, match="mu"):
        noisy_spread_mean(problem, w, math.inf, np.random.default_rng(0))
    # replace-one: a record with a small residual replaced by any value moves the mean by at
    # most t / (4 n), in floating point too (summed record by record)
    row = 100
    assert abs(problem.y[row] - X[row] @ w[:3] - w[3]) < 0.5
    moves = []
    for value in (-50.0, 3.0, 1e9, 1e16):
        other = problem.y.copy()
        other[row] = value
        moved = [noisy_spread_mean(Problem(X, t, loss="huber", fit_intercept=True), w, 1e12,
                                   np.random.default_rng(1))[0] for t in (problem.y, other)]
        moves.append(abs(moved[1] - moved[0]))
    assert max(moves) <= SPREAD_THRESHOLD / (4 * 400) * (1 + 1e-9)
    assert min(moves) > 0.9 * SPREAD_THRESHOLD / (4 * 400)  # the bound is reached
    # the spread is read at the release's upper 3-sigma limit: an overestimate
    spread, record = residual_spread(problem, w, 0.5, np.random.default_rng(3))
    released = noisy_spread_mean(problem, w, 0.5, np.random.default_rng(3))[0]
    assert spread == pytest.approx(normal_spread(released + 3 * sigma, SPREAD_THRESHOLD))
    assert record == Gaussian(2.0)


def test_residual_spread_audit(monkeypatch):
    ok = audit_residual_spread(n_runs=1000)
    assert ok.epsilon_lb <= ok.epsilon
    broken = audit_residual_spread(n_runs=1000, noise_scale=0.25)
    assert broken.epsilon_lb > broken.epsilon
    # the canary (50) lies beyond the threshold: a second moment without the cap (noise
    # still calibrated to it) moves by 625 / n and is caught
    from dpopt.api import release_audits

    def uncapped(problem, w, mu, rng):
        residuals = problem.y - problem.X @ w
        noise = rng.normal() * spread_noise(problem.n_samples, mu)
        return float(np.mean(residuals ** 2 / 4)) + noise, Gaussian(1.0 / mu)

    monkeypatch.setattr(release_audits, "noisy_spread_mean", uncapped)
    caught = audit_residual_spread(n_runs=1000)
    assert caught.epsilon_lb > caught.epsilon


def huber_problem(t):
    X, y = factors(n=3000, p=20, seed=3)
    X = np.clip(X / 6.0, -1.0, 1.0)
    y = np.clip(y / 6.0, -1.0, 1.0)
    return Problem(X, y, loss=dpopt.data.losses.huber(t), fit_intercept=True)


def test_rescaled_fit_composes_the_single_runs_steps_and_one_release(monkeypatch):
    t, mu, spread_mu = 0.6, 0.4, 0.05
    problem = huber_problem(t)
    r = problem.max_row_norm()
    options = default_settings(loss="huber", n=problem.n_samples, dim=problem.dim, mu=mu,
                               row_bound=r, huber_threshold=t, curvature=1.5)
    T = options["passes"]
    fit = rescaled_huber_fit(problem, options, mu, spread_mu, 1e-6, np.random.default_rng(0))
    head, release, tail = fit.mechanisms
    t2 = fit.params["tail_huber_threshold"]
    assert 0 < t2 <= t and fit.params["huber_threshold"] == t
    assert head.count == T // 2 and release == Gaussian(1 / spread_mu)
    assert tail.count == min(200, round((T - T // 2) * t / t2))
    # the steps' mu^2 is the single run's, split by the halves' shares of T
    assert head.count / head.noise_multiplier ** 2 == pytest.approx(mu ** 2 * (T // 2) / T,
                                                                    rel=1e-6)
    assert (head.count / head.noise_multiplier ** 2 + tail.count / tail.noise_multiplier ** 2
            == pytest.approx(mu ** 2, rel=1e-6))
    assert fit.params["clip"] == pytest.approx(options["clip"] * t2 / t)
    assert fit.passes == head.count + 1 + tail.count
    assert len(fit.checkpoints) == len(fit.checkpoint_passes) == len(fit.checkpoint_times)
    assert np.all(np.diff(fit.checkpoint_passes) > 0)
    # where the spread does not lower the threshold, the second half is the single run's
    monkeypatch.setattr(curvature, "residual_spread", lambda *a: (math.inf, Gaussian(20.0)))
    same = rescaled_huber_fit(problem, options, mu, spread_mu, 1e-6, np.random.default_rng(0))
    assert same.params["tail_huber_threshold"] == t and same.mechanisms[2].count == T - T // 2
    assert same.params["clip"] == options["clip"]


def test_default_fit_reads_the_threshold_again():
    """A target the features explain well (R^2 0.89): the residuals' spread is well below the
    target's, so the second half runs at a lower threshold; the release is one step's mu and
    the fit's composition adds up to its budget."""
    X, y = factors()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = dpopt.DPLinearRegression(epsilon=1.0, random_state=0,
                                       feature_bounds=PUBLIC).fit(X, y)
    assert not any(issubclass(w.category, dpopt.PrivacyLeakWarning) for w in caught)
    plan, mus = est.auto_.plan, est.auto_.plan["mu_shares"]
    assert plan["solver"] == "dp-gd"
    t, t2 = plan["huber_threshold"], plan["tail_huber_threshold"]
    assert t2 < 0.8 * t  # measured 0.37 against 0.58
    assert t2 >= HUBER_K * 0.33 * min(1.0, plan["target_scale"])  # never below k sigma_r
    T = plan["model_options"]["passes"]
    assert mus["spread"] == pytest.approx(mus["intercept"], rel=1e-9)
    assert mus["spread"] ** 2 * T == pytest.approx(mus["model"] ** 2, rel=1e-9)
    assert Gaussian(1 / mus["spread"]) in est.fit_result_.mechanisms
    assert math.sqrt(sum(m ** 2 for m in mus.values())) == pytest.approx(plan["mu"], rel=1e-9)
    assert est.epsilon_spent_ == pytest.approx(1.0, rel=1e-6)


def test_the_threshold_is_read_again_only_on_the_suffix_averaged_run():
    """Not with L1 or elastic net (their last iterate keeps exact zeros: on chunked data the
    default path runs DP-GD for them), not without an intercept, not with inference."""
    X, y = factors(n=3000, p=60)
    bounds = {j: (-6.0, 6.0) for j in range(60)}
    for kwargs, solver in (({"fit_intercept": False}, "dp-gd"), ({"inference": True}, "adassp")):
        est = dpopt.DPLinearRegression(epsilon=1.0, random_state=0, feature_bounds=bounds,
                                       **kwargs).fit(X, y)
        assert est.auto_.plan["solver"] == solver  # (inference keeps AdaSSP's releases)
        assert "spread" not in est.auto_.plan["mu_shares"]
    da = pytest.importorskip("dask.array")  # the dask extra: installed by .ci/run
    Xd, yd = da.from_array(X, chunks=(700, 60)), da.from_array(y, chunks=700)
    for cls in (dpopt.DPLasso, dpopt.DPElasticNet):
        est = cls(epsilon=1.0, alpha=1.0, random_state=0, feature_bounds=bounds).fit(Xd, yd)
        plan = est.auto_.plan
        assert plan["solver"] == "dp-gd" and "spread" not in plan["mu_shares"]
        assert plan["model_options"].get("output", "last") == "last"
        assert np.sum(est.coef_ == 0) > 0  # the prox's exact zeros survive
    est = dpopt.DPLinearRegression(epsilon=1.0, random_state=0, feature_bounds=bounds).fit(Xd, yd)
    assert "spread" in est.auto_.plan["mu_shares"]  # the chunked least squares reads it


def test_the_statistic_is_the_same_mean_in_memory_and_chunked():
    da = pytest.importorskip("dask.array")  # the dask extra: installed by .ci/run
    from dpopt.data.chunked import ChunkedProblem

    X, y = rows(1000, 5, seed=7)
    w = np.random.default_rng(7).standard_normal(6)
    memory = noisy_spread_mean(Problem(X, y, loss="squared", fit_intercept=True), w, 1e12,
                               np.random.default_rng(0))[0]
    chunked = noisy_spread_mean(ChunkedProblem(da.from_array(X, chunks=(300, 5)),
                                               da.from_array(y, chunks=300), "squared",
                                               fit_intercept=True), w, 1e12,
                                np.random.default_rng(0))[0]
    assert chunked == pytest.approx(memory, rel=1e-12) and memory > 0
