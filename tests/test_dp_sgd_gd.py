"""DP-SGD and DP-GD baselines: sampler, noise scale, clipping, exactness, inputs.

Statistical tests use fixed seeds and state their false-alarm rates.
"""

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import dpopt
from _broken_variants import unclipping
from _declarations import clip_off, crosscheck, noise_spec, one_step
from _independent_accounting import (
    dpa_pld_poisson_epsilon,
    dpa_rdp_poisson_epsilon,
    gaussian_epsilon,
    hand_pld_epsilon_bracket,
)
from _noise_checks import M_PUBLIC, NORMAL, eso_noise
from dpopt.privacy import Gaussian, SubsampledGaussian, calibrate, epsilon_of
from dpopt.solvers._common import poisson_batches


def _problem(n=60, p=4, loss="squared", penalty="l1", alpha=0.05, seed=0, sparse=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * rng.uniform(0.3, 3.0, size=p)
    y = rng.standard_normal(n)
    if loss == "logistic":
        y = np.where(y > 0, 1.0, -1.0)
    if sparse:
        X[rng.random((n, p)) < 0.4] = 0
        X = sp.csc_matrix(X)
    return dpopt.Problem(X, y, loss=loss, penalty=penalty, alpha=alpha)


def _quiet(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
        return dpopt.solve(*args, **kw)


# ---------------------------------------------------------------------------
# DP-SGD sampler


def test_poisson_sampler_inclusion_rate_and_independence():
    """Every (record, step) slot is included with probability q, independently.

    200 x 3000 slots: the overall rate is within 5 standard errors of q (false alarm
    6e-7); per-record rates are within 6 binomial standard errors (false alarm
    < 2e-7 over the 200 records); batch sizes have the binomial mean and variance; the
    inclusions in consecutive steps are uncorrelated (|corr| < 6 / sqrt(slots)).
    """
    rng = np.random.default_rng(0)
    n, steps, q = 200, 3000, 0.07
    rows, bounds = poisson_batches(rng, n, q, steps)
    assert bounds[0] == 0 and bounds[-1] == len(rows) and np.all(np.diff(bounds) >= 0)
    incl = np.zeros((steps, n), dtype=bool)
    for s in range(steps):
        batch = rows[bounds[s]:bounds[s + 1]]
        assert np.all(np.diff(batch) > 0) and batch.min(initial=0) >= 0 and batch.max(
            initial=0) < n
        incl[s, batch] = True
    total = n * steps
    assert abs(incl.mean() - q) < 5 * math.sqrt(q * (1 - q) / total)
    per_record = incl.mean(axis=0)
    assert np.all(np.abs(per_record - q) < 6 * math.sqrt(q * (1 - q) / steps))
    sizes = incl.sum(axis=1)
    assert abs(sizes.mean() - n * q) < 6 * math.sqrt(n * q * (1 - q) / steps)
    assert sizes.var() == pytest.approx(n * q * (1 - q), rel=0.15)  # rel. s.e. ~2.6%
    a, b = incl[:-1].ravel().astype(float), incl[1:].ravel().astype(float)
    assert abs(np.corrcoef(a, b)[0, 1]) < 6 / math.sqrt(total)


def test_poisson_sampler_edge_rates():
    rng = np.random.default_rng(1)
    rows, bounds = poisson_batches(rng, 5, 1.0, 3)
    np.testing.assert_array_equal(rows, np.tile(np.arange(5), 3))
    rows, bounds = poisson_batches(rng, 1000, 1e-6, 4)
    assert len(bounds) == 5 and len(rows) == bounds[-1]


# ---------------------------------------------------------------------------
# DP-SGD noise scale and clipping


@pytest.mark.parametrize("adjacency,factor", [("replace-one", 2.0), ("add-remove", 1.0)])
def test_sgd_noise_scale_on_zero_gradient_problem(adjacency, factor):
    """X = 0: every per-sample gradient is 0, so each step moves w by -gamma sigma xi / b
    with sigma = z * (2C replace-one, C add-remove). Per pass (S steps) the increment
    variance is S (gamma sigma / b)^2. 1500 passes x 3 coordinates: pooled variance within
    8% (relative s.e. sqrt(2 / 4500) = 2.1%, 3.8 sigma; false alarm 1.5e-4); z is checked
    against an independent PLD calibration (never below it)."""
    n, p, passes, C, gamma, b = 100, 3, 1500, 2.0, 0.3, 10
    problem = dpopt.Problem(np.zeros((n, p)), np.zeros(n))
    res = dpopt.solve(problem, "dp-sgd", epsilon=1.0, delta=1e-5, random_state=3, passes=passes,
                      step=gamma, clip=C, batch_size=b, smoothness=1.0, adjacency=adjacency)
    S = n // b
    z = res.noise_multiplier
    ref = calibrate(lambda m: [SubsampledGaussian(m, b / n, passes * S)], 1.0, 1e-5,
                    adjacency=adjacency, accountant="pld")
    assert z >= ref.noise_multiplier * (1 - 2e-3)
    assert res.epsilon <= 1.0 and res.adjacency == adjacency
    assert epsilon_of(res.mechanisms, 1e-5, adjacency=adjacency, accountant="pld") <= 1.0 + 1e-6
    sd = math.sqrt(S) * gamma * z * factor * C / b
    inc = np.diff(res.checkpoints, axis=0)
    assert inc.var(axis=0).mean() / sd ** 2 == pytest.approx(1.0, abs=0.08)


def test_sgd_clipping_on_huge_gradient_problem():
    """Rows equal to a unit vector u and labels 1e9: each sampled gradient (u.w - 1e9) u is
    clipped to -C u, so without noise a step adds gamma C |B| u / b. Over a pass the
    expected move is gamma C S u (E|B| = b); checked exactly against the batch sizes of the
    documented random stream."""
    n, p, C, gamma, b = 50, 3, 1.5, 0.2, 5
    u = np.array([0.6, 0.0, 0.8])
    problem = dpopt.Problem(np.tile(u, (n, 1)), np.full(n, 1e9))
    res = dpopt.solve(problem, "dp-sgd", epsilon=math.inf, random_state=4, passes=2, step=gamma,
                      clip=C, batch_size=b, smoothness=1.0)
    rng = np.random.default_rng(4)
    total = 0
    for _ in range(2):
        rows, bounds = poisson_batches(rng, n, b / n, n // b)
        rng.standard_normal((n // b, p))
        total += len(rows)
    np.testing.assert_allclose(res.w, gamma * C * total / b * u, rtol=1e-12)


def test_sgd_no_privacy_matches_numpy_implementation():
    problem = _problem(loss="logistic", penalty="l1", seed=5)
    n, p, b, passes = problem.n_samples, problem.dim, 6, 2
    beta = problem.global_smoothness()
    res = dpopt.solve(problem, "dp-sgd", epsilon=math.inf, random_state=6, passes=passes,
                      step=0.5, clip=0.7, batch_size=b, smoothness=beta)
    rng = np.random.default_rng(6)
    X, y, w = np.asarray(problem.X), problem.y, problem.zeros()
    gamma = 0.5 / beta
    for _ in range(passes):
        rows, bounds = poisson_batches(rng, n, b / n, n // b)
        rng.standard_normal((n // b, p))
        for s in range(n // b):
            idx = rows[bounds[s]:bounds[s + 1]]
            per = problem.loss.deriv(X[idx] @ w, y[idx])[:, None] * X[idx]
            norms = np.linalg.norm(per, axis=1)
            per *= np.minimum(1.0, 0.7 / np.maximum(norms, 1e-300))[:, None]
            w = problem.penalty.prox(w - gamma * per.sum(axis=0) / b, gamma)
    np.testing.assert_allclose(res.w, w, rtol=1e-10, atol=1e-14)


def test_sgd_reproducible_dense_equals_sparse():
    dense = _problem(seed=7, sparse=True)
    sparse_prob = dense
    dense = dpopt.Problem(dense.X.toarray(), dense.y, penalty="l1", alpha=0.05)
    kw = dict(epsilon=1.0, passes=3, step=0.5, clip=1.0, batch_size=8, smoothness=2.0)
    a = dpopt.solve(dense, "dp-sgd", random_state=9, **kw)
    b = dpopt.solve(dense, "dp-sgd", random_state=9, **kw)
    c = dpopt.solve(sparse_prob, "dp-sgd", random_state=9, **kw)
    d = dpopt.solve(dense, "dp-sgd", random_state=10, **kw)
    assert np.array_equal(a.w, b.w)
    np.testing.assert_allclose(a.w, c.w, rtol=1e-12, atol=1e-14)
    assert not np.array_equal(a.w, d.w)
    assert list(a.checkpoint_passes) == [0, 1, 2, 3]


@pytest.mark.parametrize("opts,name", [
    (dict(batch_size=0), "batch_size"), (dict(batch_size=1000), "batch_size"),
    (dict(step=0.0), "step"), (dict(clip=-1.0), "clip"), (dict(clip=math.inf), "clip"),
    (dict(passes=0), "passes"), (dict(adjacency="swap"), "adjacency"),
    (dict(accountant="exact"), "accountant"), (dict(accountant="rdp"), "add-remove"),
    (dict(smoothness=-1.0), "smoothness"), (dict(smoothness="private"), "smoothness"),
    (dict(checkpoint_every=0), "checkpoint_every"),
])
def test_sgd_bad_input(opts, name):
    with pytest.raises(ValueError, match=name):
        _quiet(_problem(seed=11), "dp-sgd", epsilon=1.0, random_state=0, **opts)


# ---------------------------------------------------------------------------
# DP-GD


@pytest.mark.parametrize("clipping", ["l2", "coordinate"])
def test_gd_noise_scale_on_zero_gradient_problem(clipping):
    """X = 0: each step moves w by -Gamma sigma xi with sigma = z 2C / n (both clippings
    have L2 sensitivity 2C / n). 4000 steps x 3 coordinates: pooled variance within 7%
    (relative s.e. sqrt(2 / 12000) = 1.3%, 5.4 sigma; false alarm 7e-8); z is the
    Gaussian-DP calibration for `passes` compositions."""
    n, p, passes, C, gamma, beta = 40, 3, 4000, 1.0, 0.5, 2.0
    problem = dpopt.Problem(np.zeros((n, p)), np.zeros(n))
    smooth = beta if clipping == "l2" else np.ones(p)
    res = dpopt.solve(problem, "dp-gd", epsilon=1.0, delta=1e-5, random_state=2, passes=passes,
                      step=gamma, clip=C, smoothness=smooth, clipping=clipping,
                      step_rule="global" if clipping == "l2" else "eso")
    ref = dpopt.privacy.calibrate_gaussian(1.0, 1e-5, passes)
    assert res.noise_multiplier == pytest.approx(ref.noise_multiplier, rel=1e-12)
    assert res.mechanisms == [Gaussian(res.noise_multiplier, passes)]
    step = gamma / beta if clipping == "l2" else gamma / p  # eso: gamma / (min(p, omega) M_j)
    sd = step * res.noise_multiplier * 2 * C / n
    inc = np.diff(res.checkpoints, axis=0)
    assert inc.var(axis=0).mean() / sd ** 2 == pytest.approx(1.0, abs=0.07)


def test_gd_clipping_on_huge_gradient_problem():
    """Labels 1e9: the per-sample gradients are (x_i.w - 1e9) x_i, clipped to -C x_i/||x_i||
    (L2) or to -C_j sign(x_ij) (coordinate-wise); one noiseless step moves w by
    -Gamma g exactly."""
    rng = np.random.default_rng(3)
    n, p = 30, 3
    X = rng.standard_normal((n, p))
    problem = dpopt.Problem(X, np.full(n, 1e9))
    res = dpopt.solve(problem, "dp-gd", epsilon=math.inf, random_state=0, passes=1, step=0.5,
                      clip=2.0, smoothness=4.0)
    g = -(2.0 * X / np.linalg.norm(X, axis=1)[:, None]).mean(axis=0)
    np.testing.assert_allclose(res.w, -0.5 / 4.0 * g, rtol=1e-12)
    M = np.array([1.0, 2.0, 3.0])
    res = dpopt.solve(problem, "dp-gd", epsilon=math.inf, random_state=0, passes=1, step=0.5,
                      clip=2.0, smoothness=M, clipping="coordinate", step_rule="eso")
    Cj = 2.0 * np.sqrt(M / M.sum())
    g = -(Cj * np.sign(X)).mean(axis=0)
    np.testing.assert_allclose(res.w, -0.5 / (p * M) * g, rtol=1e-12, atol=1e-15)


def test_gd_no_privacy_matches_proximal_gradient_and_output_random():
    problem = _problem(loss="logistic", penalty="l2", seed=12)
    beta = problem.global_smoothness()
    res = dpopt.solve(problem, "dp-gd", epsilon=math.inf, random_state=0, passes=5, step=1.0,
                      clip=math.inf, smoothness=beta)
    w = problem.zeros()
    for _ in range(5):
        w = problem.penalty.prox(w - problem.gradient(w) / beta, 1.0 / beta)
    np.testing.assert_allclose(res.w, w, rtol=1e-12, atol=1e-15)
    r = dpopt.solve(problem, "dp-gd", epsilon=1.0, random_state=5, passes=6, clip=1.0,
                    smoothness=beta, output="random")
    assert any(np.array_equal(r.w, c) for c in r.checkpoints[:-1])  # tau in {0..T-1}
    again = dpopt.solve(problem, "dp-gd", epsilon=1.0, random_state=5, passes=6, clip=1.0,
                        smoothness=beta, output="random")
    assert np.array_equal(r.w, again.w)


def test_gd_sparse_equals_dense():
    sparse_prob = _problem(seed=13, sparse=True)
    dense = dpopt.Problem(sparse_prob.X.toarray(), sparse_prob.y, penalty="l1", alpha=0.05)
    kw = dict(epsilon=1.0, passes=4, step=0.5, clip=1.0, smoothness=3.0, random_state=1)
    np.testing.assert_allclose(dpopt.solve(dense, "dp-gd", **kw).w,
                               dpopt.solve(sparse_prob, "dp-gd", **kw).w, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("opts,name", [
    (dict(clipping="huber"), "clipping"), (dict(step_rule="fast"), "step_rule"),
    (dict(output="best"), "output"), (dict(step=-1.0), "step"), (dict(clip=0.0), "clip"),
    (dict(smoothness=0.0), "smoothness"), (dict(clipping="coordinate", smoothness=2.0),
                                           "smoothness"),
])
def test_gd_bad_input(opts, name):
    with pytest.raises(ValueError, match=name):
        _quiet(_problem(seed=14), "dp-gd", epsilon=1.0, random_state=0, **opts)


# ---------------------------------------------------------------------------
# declarations for the registry-wide contract tests (tests/_declarations.py)


@crosscheck("dp-gd", [
    (0.3, 1e-8, {"passes": 1}),
    (1.0, 1e-5, {"passes": 25}),
    (8.0, 1e-3, {"passes": 3, "clipping": "coordinate"}),
], smoothness=lambda pb: 1.0)
def expected_dp_gd_epsilon(problem, o, res, eps_target):
    """One Gaussian mechanism per pass: exact GDP."""
    v = gaussian_epsilon(res.noise_multiplier, o["passes"], res.delta)
    return v - 1e-8 * max(1, v), v + 1e-8 * max(1, v)


@crosscheck("dp-sgd", [
    (1.0, 1e-5, {"passes": 2, "batch_size": 4}),             # q = 0.1, T = 20
    pytest.param(1.5, 1e-3, {"passes": 1, "batch_size": 12},   # q = 0.3, T = 3
                 marks=pytest.mark.slow),
    (0.5, 1e-7, {"passes": 1, "batch_size": 40}),            # q = 1,   T = 1
    (2.0, 1e-6, {"passes": 3, "batch_size": 8, "adjacency": "add-remove"}),
    pytest.param(2.0, 1e-5, {"passes": 2, "batch_size": 8, "adjacency": "add-remove",
                             "accountant": "rdp"}, marks=pytest.mark.slow),
], smoothness=lambda pb: 1.0)
def expected_dp_sgd_epsilon(problem, o, res, eps_target):
    """T = passes * n / b Poisson-subsampled Gaussians at rate q = b / n: a bracket of the
    PLD computed from scratch (and dp-accounting's PLD under add-remove)."""
    n, b = problem.n_samples, o["batch_size"]
    q, steps = b / n, o["passes"] * max(1, round(n / b))
    z, d, adj = res.noise_multiplier, res.delta, o.get("adjacency", "replace-one")
    if o.get("accountant", "pld") == "rdp":
        # dpopt uses its own (denser) order grid: it may only be tighter than the default one,
        # and never below the tight PLD value
        lo = hand_pld_epsilon_bracket(z, q, steps, d, adj)[0]
        return lo - 1e-6, dpa_rdp_poisson_epsilon(z, q, steps, d) + 1e-9
    lo, hi = hand_pld_epsilon_bracket(z, q, steps, d, adj)
    if adj == "add-remove":  # dp-accounting's PLDAccountant on events: a second path
        hi = max(hi, dpa_pld_poisson_epsilon(z, q, steps, d, adj))
    return lo - 1e-6, hi + 1e-3


@noise_spec("dp-gd", {"passes": 1, "step": 0.5, "clip": 3.0, "smoothness": 2.0})
def dp_gd_noise(problem, o, res):
    """w = -(step / beta) sum_t sigma xi_t, sigma = z 2C / n (both clipping rules)."""
    scale = o["step"] / o["smoothness"] * res.noise_multiplier * 2 * o["clip"] / problem.n_samples
    return [(res.w / (scale * math.sqrt(o["passes"])), NORMAL)]


@noise_spec("dp-gd", {"passes": 5, "step": 1.0, "clip": 2.0, "smoothness": 4.0,
                      "output": "suffix"})
def dp_gd_suffix_noise(problem, o, res):
    """x_t = -(step / beta) sigma (xi_1 + ... + xi_t); the suffix mean over t = 3..5 weighs
    xi_s by c_s = #{t >= max(s, 3)} / 3, so its sd is (step / beta) sigma sqrt(sum c_s^2)."""
    T = o["passes"]
    start = T // 2 + 1
    c = np.array([(T - max(s, start) + 1) / (T - start + 1) for s in range(1, T + 1)])
    scale = o["step"] / o["smoothness"] * res.noise_multiplier * 2 * o["clip"] / problem.n_samples
    return [(res.w / (scale * math.sqrt(float(np.sum(c ** 2)))), NORMAL)]


noise_spec("dp-gd", {"passes": 4, "step": 1.0, "clip": 1.0, "smoothness": M_PUBLIC,
                     "clipping": "coordinate", "step_rule": "eso"})(eso_noise)


@noise_spec("dp-sgd", {"passes": 1, "step": 1.0, "clip": 1.5, "smoothness": 1.0,
                       "batch_size": 20})  # q = 1: a single step
def dp_sgd_noise(problem, o, res):
    """w = -(step / beta) / b sum_t sigma xi_t, sigma = z 2C (replace-one) or z C."""
    n, b = problem.n_samples, o["batch_size"]
    steps = o["passes"] * max(1, round(n / b))
    sens = 2 * o["clip"] if o.get("adjacency", "replace-one") == "replace-one" else o["clip"]
    scale = o["step"] / o["smoothness"] / b * res.noise_multiplier * sens
    return [(res.w / (scale * math.sqrt(steps)), NORMAL)]


noise_spec("dp-sgd", {"passes": 2, "step": 0.3, "clip": 1.0, "smoothness": 2.0, "batch_size": 5,
                      "adjacency": "add-remove"})(dp_sgd_noise)
clip_off("dp-gd")(unclipping(dpopt.data.problem, full_gradient=("clip", "clips")))  # as Problem calls it
# sgd_steps(X_rows, y, row_norms, loss_code, loss_param, prox, w, rows, bounds, noise, gamma,
#           clip, sigma, batch_size)
clip_off("dp-sgd")(unclipping(dpopt.data.problem, sgd_steps=(11,)))  # as Problem calls it
one_step("dp-gd", passes=1, smoothness=1.0)
one_step("dp-sgd", passes=1, smoothness=1.0, batch_size=30)  # q = 1
