"""DP-CD: noise scale, clipping, exactness without privacy, averaging, DP-CD-P, inputs.

Statistical tests use fixed seeds; each states its false-alarm rate (the
probability that a correct implementation fails, for a random seed).
"""

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import dpopt
from _broken_variants import unclipping
from _declarations import clip_off, crosscheck, noise_spec, one_step
from _independent_accounting import eq18_epsilon_numeric, gaussian_epsilon
from _noise_checks import M_PUBLIC, coordinate_noise
from dpopt.privacy import Gaussian, Laplace, epsilon_of, gdp_epsilon
from dpopt.solvers import dp_cd
from dpopt.solvers.dp_cd import (
    clipped_smoothness_means,
    coordinate_clips,
    private_smoothness,
)


def _quiet(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
        return dpopt.solve(**kw)


def _random_problem(n=60, p=5, loss="squared", penalty="l1", alpha=0.05, seed=0, sparse=False,
                    intercept=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * rng.uniform(0.2, 5.0, size=p)
    if sparse:
        X[rng.random((n, p)) < 0.5] = 0.0
        X = sp.csc_matrix(X)
    y = rng.standard_normal(n)
    if loss == "logistic":
        y = np.where(y > 0, 1.0, -1.0)
    return dpopt.Problem(X, y, loss=loss, penalty=penalty, alpha=alpha, fit_intercept=intercept)


def _documented_stream(seed, p, passes, laplace=False):
    """The RNG consumption documented in dp_cd's module docstring."""
    rng = np.random.default_rng(seed)
    lap = rng.laplace(size=p) if laplace else None
    draws = [(rng.integers(0, p, size=p), rng.standard_normal(p)) for _ in range(passes)]
    return lap, draws


def _naive_cd(problem, coords, steps, clips=None, sigma=None, noise=None, w=None):
    """Plain numpy proximal CD (optionally clipped and noised), one coordinate at a time."""
    X = problem.X.toarray() if problem.is_sparse else np.asarray(problem.X)
    n = problem.n_samples
    w = problem.zeros() if w is None else w.copy()
    pen = problem.penalty
    for k, j in enumerate(coords):
        d = problem.loss.deriv(X @ w, problem.y) * X[:, j]
        if clips is not None:
            d = np.clip(d, -clips[j], clips[j])
        g = d.sum() / n + (0.0 if sigma is None else sigma[j] * noise[k])
        w[j] = _prox1(pen, j, w[j] - steps[j] * g, steps[j])
    return w


def _prox1(pen, j, v, t):
    u = np.sign(v) * max(abs(v) - t * pen.l1[j], 0.0) / (1.0 + t * pen.l2[j])
    return min(max(u, pen.lo[j]), pen.up[j])


# ---------------------------------------------------------------------------
# noise scale (the test that fails if too little noise is added)


@pytest.mark.parametrize("accountant", ["exact", "rdp"])
def test_noise_scale_on_zero_gradient_problem(accountant):
    """X = 0 makes every gradient exactly 0, so the iterates are a pure noise walk:
    each time j is drawn, w_j moves by -gamma_j sigma_j xi with
    sigma_j = z 2 C_j / n. Per pass, coordinate j is drawn Binomial(p, 1/p) times, so
    the pass increment has variance (gamma_j sigma_j)^2 exactly.

    We check (a) z against an independent Gaussian-DP computation, and (b) the
    empirical variance of 20000 pass increments per coordinate, within 10% (the
    relative std of the estimate is sqrt((5 - 3/p)/m) = 1.5%: 6.8 sigma, false
    alarm < 1e-10 per coordinate) and the pooled variance within 4% (7 sigma).
    A noise scale 5% too small fails the pooled check.
    """
    n, p, passes = 50, 4, 20000
    problem = dpopt.Problem(np.zeros((n, p)), np.zeros(n), loss="squared")
    M = np.array([1.0, 4.0, 0.25, 9.0])
    eps, delta, gamma, C = 2.0, 1e-5, 0.7, 3.0
    res = dpopt.solve(problem, "dp-cd", epsilon=eps, delta=delta, random_state=1, passes=passes,
                      step=gamma, clip=C, smoothness=M, accountant=accountant)
    z = res.noise_multiplier
    n_steps = passes * p
    if accountant == "exact":
        # independent check: N Gaussian steps with multiplier z are sqrt(N)/z - GDP
        assert gdp_epsilon(math.sqrt(n_steps) / z, delta) == pytest.approx(eps, rel=1e-6)
    assert res.epsilon <= eps
    assert epsilon_of([Gaussian(z, n_steps)], delta, accountant="exact") <= eps * (1 + 1e-9)
    Cj = C * np.sqrt(M / M.sum())
    expected_sd = (gamma / M) * z * 2.0 * Cj / n
    inc = np.diff(res.checkpoints, axis=0)
    ratio = inc.var(axis=0) / expected_sd ** 2
    assert np.all(np.abs(ratio - 1.0) < 0.10), ratio
    assert abs(ratio.mean() - 1.0) < 0.04, ratio.mean()
    assert np.all(np.abs(inc.mean(axis=0)) < 6 * expected_sd / math.sqrt(passes))


def test_noise_scale_private_smoothness_laplace():
    """The Laplace estimate of M_j has scale (p / eps_M) b_j / n: its empirical std over
    4000 draws matches sqrt(2) * scale within 8% (relative std of the estimate
    sqrt(5/4 / 4000) = 1.8%: 4.5 sigma, false alarm ~1e-5 per coordinate)."""
    problem = _random_problem(n=40, p=3, seed=3)
    bounds = problem.loss.curvature * (2 * np.abs(problem.X).max(axis=0)) ** 2 * 10
    eps_m = 0.5
    rng = np.random.default_rng(0)
    mean = clipped_smoothness_means(problem, bounds)
    draws = np.array([private_smoothness(problem, bounds, eps_m, rng)[0] for _ in range(4000)])
    scale = problem.dim / eps_m * bounds / problem.n_samples
    # the floor raises estimates below `scale`; compare on the upper half, which is untouched:
    # for Laplace(mean, s) with mean < s, E[(X - mean)^2 | X > mean] = 2 s^2
    for j in range(problem.dim):
        upper = draws[:, j][draws[:, j] > max(mean[j], scale[j])] - mean[j]
        if mean[j] >= scale[j]:
            assert np.sqrt(np.mean(upper ** 2)) == pytest.approx(math.sqrt(2) * scale[j], rel=0.08)
    assert np.all(draws >= scale - 1e-15)


# ---------------------------------------------------------------------------
# clipping


def test_clipping_on_huge_gradient_problem():
    """Labels of 1e9 make every per-sample partial derivative (z_i - y_i) x_ij enormous, so
    each is clipped to -C_j sign(x_ij) and g_j = -C_j S_j / n with S_j = sum_i sign(x_ij).
    Without noise (epsilon = inf, finite clip) one pass moves w_j by exactly
    count_j gamma_j C_j S_j / n, count_j = times j is drawn (documented RNG stream)."""
    rng = np.random.default_rng(5)
    n, p = 30, 4
    X = rng.standard_normal((n, p)) * np.array([0.1, 1.0, 10.0, 100.0])
    problem = dpopt.Problem(X, np.full(n, 1e9), loss="squared")
    M = problem.coordinate_smoothness()
    gamma, C = 0.5, 2.0
    res = dpopt.solve(problem, "dp-cd", epsilon=math.inf, random_state=11, passes=1, step=gamma,
                      clip=C, smoothness=M)
    _, draws = _documented_stream(11, p, 1)
    counts = np.bincount(draws[0][0], minlength=p)
    Cj = coordinate_clips(M, C)
    assert np.allclose(Cj, C * np.sqrt(M / M.sum()))
    assert np.linalg.norm(Cj) == pytest.approx(C)
    S = np.sign(X).sum(axis=0)
    expected = counts * (gamma / M) * Cj * S / n
    assert np.allclose(res.w, expected, rtol=1e-12, atol=0)


def test_clipping_with_noise_mean_drift():
    """Same saturated problem with epsilon = 1: the mean pass increment is the clipped drift
    gamma_j C_j S_j / n, within 6 standard errors (false alarm ~2e-9 per coordinate)."""
    rng = np.random.default_rng(6)
    n, p, passes = 30, 3, 3000
    X = rng.standard_normal((n, p)) * np.array([0.5, 2.0, 8.0])
    problem = dpopt.Problem(X, np.full(n, 1e12), loss="squared")
    M = problem.coordinate_smoothness()
    res = dpopt.solve(problem, "dp-cd", epsilon=1.0, delta=1e-5, random_state=2, passes=passes,
                      step=0.3, clip=5.0, smoothness=M)
    Cj = coordinate_clips(M, 5.0)
    drift = (0.3 / M) * Cj * np.sign(X).sum(axis=0) / n
    sd = (0.3 / M) * res.noise_multiplier * 2 * Cj / n
    inc = np.diff(res.checkpoints, axis=0)
    # per pass: E = drift (E[count] = 1); Var = sd^2 + drift^2 (1 - 1/p)
    se = np.sqrt((sd ** 2 + drift ** 2) / passes)
    assert np.all(np.abs(inc.mean(axis=0) - drift) < 6 * se)


# ---------------------------------------------------------------------------
# exactness without privacy


@pytest.mark.parametrize("loss,penalty", [("squared", "l1"), ("logistic", "l2"),
                                          ("squared", "elastic_net"), ("logistic", "none")])
@pytest.mark.parametrize("sparse", [False, True])
def test_no_privacy_matches_proximal_cd(loss, penalty, sparse):
    problem = _random_problem(loss=loss, penalty=penalty, sparse=sparse, seed=7)
    passes, p = 4, problem.dim
    M = problem.coordinate_smoothness()
    res = dpopt.solve(problem, "dp-cd", epsilon=math.inf, random_state=3, passes=passes, step=0.9,
                      clip=math.inf, smoothness=M)
    assert res.noise_multiplier == 0 and math.isinf(res.epsilon)
    _, draws = _documented_stream(3, p, passes)
    coords = np.concatenate([c for c, _ in draws])
    w = _naive_cd(problem, coords, 0.9 / M)
    np.testing.assert_allclose(res.w, w, rtol=1e-10, atol=1e-12)
    # and it converges to the optimum when run long enough
    long = dpopt.solve(problem, "dp-cd", epsilon=math.inf, random_state=3, passes=400, step=1.0,
                       clip=math.inf, smoothness=M)
    _, f_star = dpopt.reference_optimum(problem)
    assert problem.objective(long.w) - f_star < 1e-8 * max(1, abs(f_star))


def test_noise_and_clipping_match_reference_implementation():
    """With finite epsilon and clip, the solver equals a numpy implementation fed the
    documented random stream (noise sigma_j = z 2 C_j / n, clipping C_j)."""
    problem = _random_problem(loss="logistic", penalty="l1", alpha=0.01, seed=8)
    p, passes, C = problem.dim, 3, 0.5
    M = problem.coordinate_smoothness()
    res = dpopt.solve(problem, "dp-cd", epsilon=2.0, delta=1e-4, random_state=4, passes=passes,
                      step=0.8, clip=C, smoothness=M)
    _, draws = _documented_stream(4, p, passes)
    coords = np.concatenate([c for c, _ in draws])
    noise = np.concatenate([e for _, e in draws])
    Cj = C * np.sqrt(M / M.sum())
    sigma = res.noise_multiplier * 2 * Cj / problem.n_samples
    w = _naive_cd(problem, coords, 0.8 / M, clips=Cj, sigma=sigma, noise=noise)
    np.testing.assert_allclose(res.w, w, rtol=1e-10, atol=1e-13)


# ---------------------------------------------------------------------------
# averaging (Algorithm 1)


@pytest.mark.parametrize("inner", [None, 3, 7, 13])
def test_epoch_averaging_matches_algorithm_1(inner):
    problem = _random_problem(loss="squared", penalty="l1", seed=9)
    p, passes = problem.dim, 5
    M = problem.coordinate_smoothness()
    res = dpopt.solve(problem, "dp-cd", epsilon=math.inf, random_state=5, passes=passes, step=0.7,
                      clip=math.inf, smoothness=M, averaging="epoch", inner_steps=inner)
    _, draws = _documented_stream(5, p, passes)
    coords = np.concatenate([c for c, _ in draws])
    K = inner or p
    w = problem.zeros()
    for start in range(0, len(coords), K):
        iterates = []
        for j in coords[start:start + K]:
            w = _naive_cd(problem, [j], 0.7 / M, w=w)
            iterates.append(w.copy())
        w = np.mean(iterates, axis=0)  # theta^1..theta^K, theta^0 excluded
    np.testing.assert_allclose(res.w, w, rtol=1e-10, atol=1e-12)
    assert res.params["inner_steps"] == K
    np.testing.assert_allclose(res.checkpoints[-1], res.w)


# ---------------------------------------------------------------------------
# private smoothness (DP-CD-P)


def test_private_smoothness_accounting_and_mechanisms():
    problem = _random_problem(n=200, p=4, seed=10)
    b = np.full(problem.dim, 100.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)  # bounds given: no leak
        res = dpopt.solve(problem, "dp-cd", epsilon=1.0, delta=1e-5, random_state=0, passes=3,
                          smoothness="private", smoothness_bounds=b)
    lap, gauss = res.mechanisms
    assert isinstance(lap, Laplace) and lap.count == problem.dim
    assert lap.noise_multiplier == pytest.approx(problem.dim / 0.1)
    assert isinstance(gauss, Gaussian) and gauss.count == 3 * problem.dim
    assert res.epsilon <= 1.0
    assert epsilon_of(res.mechanisms, 1e-5, accountant="pld") <= 1.0 + 1e-9
    # the PLD composition gives the Gaussian part more than the basic split would
    split = dpopt.solve(problem, "dp-cd", epsilon=1.0, delta=1e-5, random_state=0, passes=3,
                        smoothness="private", smoothness_bounds=b, accountant="rdp")
    assert split.accountant == "rdp+basic" and split.epsilon <= 1.0
    assert res.noise_multiplier < split.noise_multiplier


def test_private_smoothness_default_bounds_warn():
    problem = _random_problem(seed=11)
    with pytest.warns(dpopt.PrivacyLeakWarning, match="smoothness_bounds"):
        dpopt.solve(problem, "dp-cd", epsilon=1.0, random_state=0, passes=1,
                    smoothness="private")


def test_private_smoothness_random_stream_and_no_privacy_limit():
    """epsilon = inf: the estimate is the exact clipped mean (bounds above the data give
    the exact M_j); the Laplace draw still comes first in the stream."""
    problem = _random_problem(seed=12, loss="logistic", penalty="l2")
    b = np.full(problem.dim, 1e6)
    np.testing.assert_allclose(clipped_smoothness_means(problem, b),
                               problem.coordinate_smoothness())
    a = dpopt.solve(problem, "dp-cd", epsilon=math.inf, random_state=3, passes=2, clip=math.inf,
                    smoothness="private", smoothness_bounds=b)
    _, draws = _documented_stream(3, problem.dim, 2, laplace=True)
    coords = np.concatenate([c for c, _ in draws])
    M = problem.coordinate_smoothness()
    np.testing.assert_allclose(a.w, _naive_cd(problem, coords, 1.0 / M), rtol=1e-10, atol=1e-13)


def test_clipped_smoothness_means_sparse_equals_dense():
    dense = _random_problem(seed=13, sparse=False)
    X = sp.csc_matrix(np.asarray(dense.X))
    sparse = dpopt.Problem(X, dense.y, loss="squared")
    b = np.quantile(np.asarray(dense.X) ** 2, 0.8, axis=0)
    np.testing.assert_allclose(clipped_smoothness_means(sparse, b),
                               clipped_smoothness_means(dense, b), rtol=1e-13)


# ---------------------------------------------------------------------------
# reproducibility and results


def test_same_seed_same_result_and_seeds_differ():
    problem = _random_problem(loss="logistic", penalty="l2", seed=14)
    kw = dict(problem=problem, solver="dp-cd", epsilon=1.0, passes=3, smoothness="private",
              smoothness_bounds=np.full(problem.dim, 50.0), averaging="epoch", inner_steps=4)
    a, b = _quiet(random_state=42, **kw), _quiet(random_state=42, **kw)
    c = _quiet(random_state=43, **kw)
    assert np.array_equal(a.w, b.w) and np.array_equal(a.checkpoints, b.checkpoints)
    assert not np.array_equal(a.w, c.w)


def test_checkpoints_and_report():
    problem = _random_problem(seed=15)
    res = _quiet(problem=problem, solver="dp-cd", epsilon=1.0, random_state=0, passes=6,
                 checkpoint_every=2)
    assert list(res.checkpoint_passes) == [0, 2, 4, 6]
    assert res.checkpoints.shape == (4, problem.dim)
    np.testing.assert_array_equal(res.checkpoints[-1], res.w)
    assert res.adjacency == "replace-one" and res.n_iter == 6 * problem.dim
    assert "replace-one" in res.privacy_report()


def test_paper_accountant_is_more_conservative():
    problem = _random_problem(seed=16)
    z = {acc: _quiet(problem=problem, solver="dp-cd", epsilon=1.0, random_state=0, passes=5,
                     accountant=acc).noise_multiplier for acc in ("exact", "rdp", "paper")}
    assert z["exact"] < z["rdp"] < z["paper"]


# ---------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("opts,name", [
    (dict(passes=0), "passes"), (dict(passes=1.5), "passes"), (dict(step=0.0), "step"),
    (dict(step=-1.0), "step"), (dict(clip=0.0), "clip"), (dict(clip=math.inf), "clip"),
    (dict(smoothness="foo"), "smoothness"), (dict(smoothness=[1.0, 2.0]), "smoothness"),
    (dict(smoothness=[1.0, -1.0, 1.0, 1.0, 1.0]), "smoothness"),
    (dict(smoothness=[1.0, np.nan, 1.0, 1.0, 1.0]), "smoothness"),
    (dict(smoothness_bounds=[1.0] * 5), "smoothness_bounds"),
    (dict(smoothness="private", smoothness_bounds=[1.0, 0.0, 1.0, 1.0, 1.0]),
     "smoothness_bounds"),
    (dict(smoothness="private", smoothness_bounds=[1.0] * 3), "smoothness_bounds"),
    (dict(smoothness_share=0.0), "smoothness_share"), (dict(smoothness_share=1.0),
                                                       "smoothness_share"),
    (dict(averaging="mean"), "averaging"), (dict(inner_steps=3), "inner_steps"),
    (dict(averaging="epoch", inner_steps=0), "inner_steps"), (dict(accountant="gdp"),
                                                              "accountant"),
    (dict(checkpoint_every=0), "checkpoint_every"),
    (dict(accountant="paper", smoothness="private", smoothness_bounds=[1.0] * 5), "paper"),
])
def test_bad_options_raise_value_error_naming_argument(opts, name):
    problem = _random_problem(seed=17)
    w_before = problem.zeros()
    eps = 5.0 if name == "paper" else 1.0
    with pytest.raises(ValueError, match=name):
        _quiet(problem=problem, solver="dp-cd", epsilon=eps, random_state=0, **opts)
    np.testing.assert_array_equal(problem.zeros(), w_before)


def test_unknown_option_and_bad_epsilon():
    problem = _random_problem(seed=18)
    with pytest.raises(ValueError, match="batch_size"):
        dpopt.solve(problem, "dp-cd", epsilon=1.0, batch_size=3)
    with pytest.raises(ValueError, match="epsilon"):
        dpopt.solve(problem, "dp-cd", epsilon=-1.0)
    with pytest.raises(ValueError, match="delta"):
        dpopt.solve(problem, "dp-cd", epsilon=1.0, delta=1.5)


# ---------------------------------------------------------------------------
# declarations for the registry-wide contract tests (tests/_declarations.py)


@crosscheck("dp-cd", [
    (0.3, 1e-8, {"passes": 1}),
    (1.0, 1e-5, {"passes": 7}),
    (8.0, 1e-3, {"passes": 3}),
    (1.0, 1e-6, {"passes": 5, "accountant": "rdp"}),
    (5.0, 1e-3, {"passes": 2, "accountant": "rdp"}),
    (0.5, 1e-5, {"passes": 4, "accountant": "paper"}),
], smoothness=lambda pb: np.ones(pb.dim))
def expected_epsilon(problem, o, res, eps_target):
    """N = passes * p Gaussian coordinate steps: exact GDP, or eq. (18) at z ("rdp" and
    "paper", whose z is the paper's closed form)."""
    steps = o["passes"] * problem.dim
    z, d = res.noise_multiplier, res.delta
    acc = o.get("accountant", "exact")
    if acc == "exact":
        v = gaussian_epsilon(z, steps, d)
        return v - 1e-8 * max(1, v), v + 1e-8 * max(1, v)
    if acc == "paper":
        assert z == pytest.approx(math.sqrt(3 * steps * math.log(1 / d)) / eps_target, rel=1e-12)
    v = eq18_epsilon_numeric(z, steps, d)
    return v * (1 - 1e-7), v * (1 + 1e-7)


noise_spec("dp-cd", {"passes": 10, "step": 0.7, "clip": 2.0, "smoothness": M_PUBLIC})(
    coordinate_noise)
noise_spec("dp-cd", {"passes": 1, "step": 1.0, "clip": 1.0, "smoothness": M_PUBLIC[:1]})(
    coordinate_noise)  # p = 1: a single noise draw
# cd_steps(work, w, coords, noise, step, clip, sigma[, acc, weights])
clip_off("dp-cd")(unclipping(dp_cd, cd_steps=(5,), cd_steps_accumulate=(5,)))
one_step("dp-cd", passes=1, smoothness=np.ones(1))  # p = 1: one coordinate step
