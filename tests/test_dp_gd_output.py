"""DP-GD's output rules (Wang, Ye, Xu 2017, Section 6): x_T for PL objectives (Theorem 6.2),
x_tau with tau uniform on {0, ..., T-1} for general non-convex ones (Theorem 6.3); the suffix
average for convex ones (Rakhlin, Shamir & Sridharan 2012)."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

import dpopt


def pl_problem():
    """Least squares with a rank-deficient design: PL (F - F* <= ||grad F||^2 / (2 mu) with mu
    the smallest positive eigenvalue of X^T X / n) but not strongly convex."""
    rng = np.random.default_rng(0)
    B = rng.standard_normal((60, 3))
    X = B @ rng.standard_normal((3, 6))  # rank 3 in dimension 6
    X /= np.linalg.norm(X, axis=1).max()
    y = X @ rng.standard_normal(6) + 0.1 * rng.standard_normal(60)
    return dpopt.Problem(X, y, "squared")


def fit(pb, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
        return dpopt.solve(pb, "dp-gd", **kw)


def test_last_iterate_converges_on_a_pl_objective():
    pb = pl_problem()
    eig = np.linalg.eigvalsh(pb.X.T @ pb.X / pb.n_samples)
    assert eig[0] < 1e-12 < eig[3]  # not strongly convex, PL with mu = eig[3]
    _, f_star = dpopt.reference_optimum(pb)
    kappa = eig[-1] / eig[3]
    T = int(40 * kappa) + 10  # eta = 1/L: (1 - mu/L)^T (F(x_0) - F*) < e^-40 (F(x_0) - F*)
    res = fit(pb, epsilon=math.inf, clip=math.inf, passes=T, step=1.0, output="last",
              random_state=0)
    assert res.params["tau"] == T
    np.testing.assert_array_equal(res.w, res.checkpoints[-1])
    assert pb.objective(res.w) - f_star < 1e-12 * max(1.0, f_star)


def test_random_output_is_an_iterate_before_the_last():
    pb = pl_problem()
    T = 6
    for seed in range(10):
        res = fit(pb, epsilon=1.0, delta=1e-5, passes=T, random_state=seed, output="random")
        tau = res.params["tau"]
        assert 0 <= tau <= T - 1
        # checkpoints hold x_0 .. x_T (checkpoint_every=1); the output is x_tau
        np.testing.assert_array_equal(res.w, res.checkpoints[tau])


def test_random_output_index_is_uniform_on_0_to_T_minus_1():
    # 600 draws over T = 5 cells: chi-square with 4 dof, P(chi2 > 20) ~ 5e-4 (fixed seeds)
    pb = pl_problem()
    T = 5
    taus = [fit(pb, epsilon=math.inf, clip=math.inf, passes=T, output="random",
                random_state=s).params["tau"] for s in range(600)]
    counts = np.bincount(taus, minlength=T + 1)
    assert counts[T] == 0  # x_T is never the random output
    assert stats.chisquare(counts[:T]).statistic < 20


def test_random_output_keeps_the_privacy_of_the_run():
    pb = pl_problem()
    a = fit(pb, epsilon=0.5, delta=1e-5, passes=4, output="random", random_state=3)
    b = fit(pb, epsilon=0.5, delta=1e-5, passes=4, output="last", random_state=3)
    assert a.epsilon == b.epsilon <= 0.5 and a.mechanisms == b.mechanisms


def test_gd_output_suffix_averages_the_second_half():
    """output="suffix": the mean of x_t over t = floor(T/2) + 1..T, from the same draws as
    the last iterate (post-processing: the checkpoints coincide)."""
    pb = pl_problem()
    kw = dict(epsilon=1.0, delta=1e-5, clip=1.0, smoothness=pb.global_smoothness(),
              random_state=6)
    for T in (1, 2, 7):
        last = fit(pb, passes=T, **kw)
        suffix = fit(pb, passes=T, output="suffix", **kw)
        np.testing.assert_array_equal(suffix.checkpoints, last.checkpoints)
        np.testing.assert_allclose(suffix.w, last.checkpoints[T // 2 + 1:].mean(axis=0),
                                   rtol=1e-12, atol=1e-15)
        assert suffix.mechanisms == last.mechanisms and suffix.epsilon == last.epsilon
    assert not np.allclose(suffix.w, last.w)


def test_output_option_is_validated():
    with pytest.raises(ValueError, match="output must be one of"):
        fit(pl_problem(), epsilon=1.0, delta=1e-5, output="best")


def test_gd_output_average_and_init_continue_a_run():
    """output="average" is the mean of x_1..x_T; init is x_0. Without noise a run of T steps
    split in two (the second from the first's last iterate) gives the same iterates, so the
    second half's average is the suffix average of the whole; a bad init spends nothing."""
    pb = pl_problem()
    kw = dict(epsilon=math.inf, clip=math.inf, smoothness=pb.global_smoothness())
    whole = fit(pb, passes=8, output="suffix", random_state=0, **kw)
    head = fit(pb, passes=4, random_state=0, **kw)
    tail = fit(pb, passes=4, output="average", init=head.w, random_state=0, **kw)
    np.testing.assert_array_equal(tail.checkpoints[0], head.w)
    np.testing.assert_allclose(tail.checkpoints[1:], whole.checkpoints[5:], rtol=1e-12)
    np.testing.assert_allclose(tail.w, whole.w, rtol=1e-12)
    noisy = fit(pb, epsilon=1.0, delta=1e-5, clip=1.0, passes=3, output="average",
                init=np.ones(6), random_state=1, smoothness=pb.global_smoothness())
    np.testing.assert_array_equal(noisy.checkpoints[0], np.ones(6))
    np.testing.assert_allclose(noisy.w, noisy.checkpoints[1:].mean(axis=0), rtol=1e-12)
    budget = dpopt.BudgetAccountant(2.0, 1e-3)
    for bad in (np.ones(5), np.array([1.0, 2, 3, 4, 5, np.nan])):
        with pytest.raises(ValueError, match="init must be a finite vector of length 6"):
            fit(pb, epsilon=1.0, delta=1e-5, init=bad, budget=budget)
    assert budget.spent() == 0.0 and budget.ledger == []
