"""Objective perturbation's minimisation to a gradient tolerance (dpopt.solvers._op_minimize):
the accelerated fallback's public iteration bound, a release that never raises (a hard
instance, a crippled first stage), the sub-sampled Hessian of large problems."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

import dpopt
from dpopt.solvers import _op_minimize as opmin
from dpopt.solvers import _op_objective as opmod  # the perturbed objective and its design
from dpopt.solvers import objective_perturbation as opsolver
from test_objective_perturbation import NAME, logistic_problem, released_gradient


class Quadratic:
    """F(w) = (1/2) w^T diag(eigs) w - c^T w: the worst case of the bound's constants."""

    def __init__(self, eigs, c):
        self.eigs, self.c = eigs, c

    def evaluate(self, w):
        return None

    def gradient(self, w, _):
        return self.eigs * w - self.c


@pytest.mark.parametrize("kappa", [1.0, 10.0, 1e3, 1e5])
def test_accelerated_method_meets_the_bound_from_any_start(kappa):
    """After accelerated_steps(...) steps every start with ||grad|| <= G0 is within the target;
    the quadratics have eigenvalues at both ends of [s, beta_F] (and between)."""
    rng = np.random.default_rng(int(kappa))
    s, dim, target = 0.01, 6, 1e-9
    eigs = s * np.concatenate([[1.0, kappa], np.exp(rng.uniform(0, np.log(kappa), dim - 2))])
    for _ in range(5):
        c = rng.standard_normal(dim)
        g0 = float(np.linalg.norm(c))  # the gradient at the start w0 = 0
        steps = opmin.accelerated_steps(s, s * kappa, g0, target)
        w, gnorm, used = opmin.accelerated_gradient(Quadratic(eigs, c), np.zeros(dim), target,
                                                    convexity=s, smoothness=s * kappa,
                                                    steps=steps)
        assert gnorm <= target and used <= steps + 1
        assert np.linalg.norm(eigs * w - c) == pytest.approx(gnorm, rel=1e-12, abs=1e-18)


def test_accelerated_steps_is_public_and_monotone():
    base = opmin.accelerated_steps(0.1, 1.0, 1.0, 1e-8)
    assert base == math.ceil(2 * math.sqrt(10.0) * math.log(math.sqrt(10 * 11) / 1e-8))
    assert opmin.accelerated_steps(0.1, 1.0, 1.0, 1e-10) > base  # tighter target: more
    assert opmin.accelerated_steps(0.01, 1.0, 1.0, 1e-8) > base  # worse conditioning: more
    assert opmin.accelerated_steps(0.1, 1.0, 1e-12, 1e-8) == 0  # already within the target
    with pytest.raises(ValueError, match="convexity"):
        opmin.accelerated_steps(0.0, 1.0, 1.0, 1e-8)


def hard_huber_problem():
    """Huber regression, 20 rows, 20 columns on scales from 1e-7 to 1e3, a duplicated
    column, labels up to ~10^4 times the threshold, rows clipped to 135: damped Newton
    cycles between the quadratic and linear zones and misses its tolerance in 200 steps
    (before the fallback, a ValueError that depended on the data)."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((20, 20)) * np.logspace(-7.0, 3.0, 20)
    X[:, -1] = X[:, 0] * (1.0 + 1e-9 * rng.standard_normal(20))
    y = X @ rng.standard_normal(20) * 80.0
    return dpopt.Problem(X, y, "huber", fit_intercept=True)


def count_fallbacks(monkeypatch):
    calls = []
    original = opmin.accelerated_gradient

    def spy(*args, **kwargs):
        out = original(*args, **kwargs)
        calls.append(out)
        return out

    monkeypatch.setattr(opmin, "accelerated_gradient", spy)
    return calls


def test_hard_instance_releases_within_the_gradient_bound(monkeypatch):
    pb = hard_huber_problem()
    calls = count_fallbacks(monkeypatch)
    res = dpopt.solve(pb, NAME, epsilon=100.0, delta=1e-6, row_bound=135.0, random_state=2)
    assert len(calls) == 1  # Newton did not certify the target: the fallback did
    gnorm, _ = released_gradient(pb, res, 2)
    assert gnorm <= 2 * res.params["gradient_bound"]  # tau: ||w_hat - w*|| <= tolerance
    assert math.isfinite(res.epsilon) and res.epsilon <= 100.0


def test_near_separable_ill_conditioned_logistic_releases_within_the_bound():
    """Separable labels, column scales from 1e-5 to 1, two columns equal to 1e-6, epsilon =
    100 (lambda ~ 4e-7, so kappa ~ 1e7): a release, its gradient within the bound."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 8)) * np.logspace(-5, 0, 8)
    X[:, 1] = X[:, 0] * (1 + 1e-6 * rng.standard_normal(300))
    y = np.where(X @ np.ones(8) > 0, 1.0, -1.0)
    pb = dpopt.Problem(X, y, "logistic", fit_intercept=True)
    res = dpopt.solve(pb, NAME, epsilon=100.0, delta=1e-6, row_bound=3.0, random_state=0)
    assert res.params["regularization"] < 1e-6
    assert released_gradient(pb, res, 0)[0] <= res.params["gradient_bound"]


@pytest.mark.parametrize("loss", ["logistic", "huber"])
def test_crippled_first_stage_falls_back_to_the_same_release(monkeypatch, loss):
    """MAX_NEWTON = 1: Newton stops far from the target; the fallback reaches it, and the
    release is within 2 x tolerance of the normal one (both w_hat within tolerance of w*,
    the same noise draws)."""
    pb = logistic_problem(n=400, p=5, seed=3, penalty="l2", alpha=0.01, fit_intercept=True)
    if loss == "huber":
        pb = dpopt.Problem(pb.X[:, :-1], 3.0 * pb.y + pb.X[:, 0], "huber", "l2", alpha=0.01,
                           fit_intercept=True)
    opts = dict(epsilon=1.0, delta=1e-6, row_bound=2.0, random_state=5)
    normal = dpopt.solve(pb, NAME, **opts)
    calls = count_fallbacks(monkeypatch)
    monkeypatch.setattr(opmin, "MAX_NEWTON", 1)
    crippled = dpopt.solve(pb, NAME, **opts)
    assert len(calls) == 1 and calls[0][1] <= crippled.params["gradient_bound"]
    assert released_gradient(pb, crippled, 5)[0] <= crippled.params["gradient_bound"]
    np.testing.assert_allclose(crippled.w, normal.w, rtol=0,
                               atol=2 * normal.params["tolerance"])
    assert (crippled.epsilon, crippled.mechanisms) == (normal.epsilon, normal.mechanisms)


def test_fallback_from_a_non_finite_first_stage_restarts_at_zero():
    pb = logistic_problem(n=200, p=3, fit_intercept=True)
    X = opmod.clip_feature_rows(pb, 1.0)
    reg = np.full(pb.dim, 0.05)
    obj = opmod.PerturbedObjective(X, pb.y, pb.loss, reg, np.full(pb.dim, 0.01))
    smooth = opsolver.smoothness_bound(0.25, 2.0, reg)
    g0 = 1.0 * math.sqrt(2.0) + float(np.linalg.norm(obj.lin))
    w, gnorm, _, stage = opmin.minimize_to_tolerance(
        obj, pb.zeros(), 1e-10, convexity=0.05, smoothness=smooth, g0_bound=g0,
        first_stage=lambda o, w0, t: (np.full_like(w0, np.nan), math.nan, 0))
    assert stage == 2 and gnorm <= 1e-10
    assert np.linalg.norm(obj.gradient(w)) <= 1e-10


def test_initial_gradient_bound_holds_at_zero():
    """G0 = L B_aug + ||lin|| bounds ||grad F_b(0)|| (worst case: every row at the bound,
    aligned, with the derivative's sign)."""
    X = np.tile([0.6, 0.8, 1.0], (50, 1))  # feature norm 1 = B, intercept: B_aug = sqrt(2)
    y = np.ones(50)
    for loss, L in [("logistic", 1.0), ("huber", 1.0)]:
        yy = -y if loss == "logistic" else 1e6 * y
        obj = opmod.PerturbedObjective(X, yy, dpopt.Problem(X[:, :2], yy, loss).loss,
                                       np.full(3, 0.1), np.zeros(3))
        g = obj.gradient(np.zeros(3))
        assert np.linalg.norm(g) <= L * math.sqrt(2.0) + 1e-12
        if loss == "huber":  # saturated derivative: the bound is attained
            assert np.linalg.norm(g) == pytest.approx(math.sqrt(2.0), rel=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
def test_sampled_hessian_path_matches_the_exact_one(monkeypatch, sparse):
    """More rows than HESSIAN_ROWS: Newton directions from every stride-th row's Hessian
    (refined on slow contraction) reach the same tolerance; the release is within
    2 x tolerance of the exact-Hessian fit (dense and CSR)."""
    pb = logistic_problem(n=3000, p=6, seed=1, penalty="l2", alpha=1e-3, fit_intercept=True)
    if sparse:
        X = np.asarray(pb.X[:, :-1])
        X[X < 0.3] = 0.0
        pb = dpopt.Problem(sp.csr_matrix(X), pb.y, "logistic", "l2", alpha=1e-3,
                           fit_intercept=True)
    opts = dict(epsilon=2.0, delta=1e-7, row_bound=2.0, random_state=9)
    exact = dpopt.solve(pb, NAME, **opts)
    monkeypatch.setattr(opmod, "HESSIAN_ROWS", 128)
    monkeypatch.setattr(opmod, "hessian_sample_rows", lambda dim: 64)  # stride 46
    strides = []
    refine = opmod.PerturbedObjective.refine_hessian

    def spy(self):
        strides.append(self.stride)
        refine(self)

    monkeypatch.setattr(opmod.PerturbedObjective, "refine_hessian", spy)
    sampled = dpopt.solve(pb, NAME, **opts)
    assert strides and strides[0] == 3000 // 64  # sampled at first, refined on the way
    np.testing.assert_allclose(sampled.w, exact.w, rtol=0, atol=2 * exact.params["tolerance"])
    assert released_gradient(pb, sampled, 9)[0] <= sampled.params["gradient_bound"]


def test_sampled_hessian_is_the_exact_one_at_stride_one():
    pb = logistic_problem(n=500, p=4, seed=2, fit_intercept=True)
    X = opmod.clip_feature_rows(pb, 1.5)
    obj = opmod.PerturbedObjective(X, pb.y, pb.loss, np.full(pb.dim, 0.1), np.zeros(pb.dim))
    z = obj.margins(np.linspace(-1, 1, pb.dim))
    h = opmod.loss_curvature(pb.loss, z, pb.y)
    obj.stride = 1
    np.testing.assert_allclose(obj.sampled_hessian(z), X.T @ (h[:, None] * X) / 500, rtol=1e-12)
    obj.stride = 5  # every fifth row, scaled to the mean
    rows = np.arange(0, 500, 5)
    np.testing.assert_allclose(obj.sampled_hessian(z),
                               X[rows].T @ (h[rows, None] * X[rows]) / 100, rtol=1e-12)


@pytest.mark.parametrize("intercept", [True, False])
def test_clipped_rows_view_equals_the_clipped_copy(monkeypatch, intercept):
    """Above HESSIAN_ROWS the rows are clipped without copying X: products, rows and the
    whole fit agree with the clipped copy of the small-problem path."""
    pb = logistic_problem(n=600, p=4, seed=4, fit_intercept=intercept)
    copy = opmod.clip_feature_rows(pb, 1.2)
    monkeypatch.setattr(opmod, "HESSIAN_ROWS", 100)
    view = opmod.clip_feature_rows(pb, 1.2)
    assert isinstance(view, opmod.ClippedRows)
    w, d = np.linspace(-1, 2, pb.dim), np.linspace(-1, 3, 600)
    np.testing.assert_allclose(view @ w, copy @ w, rtol=1e-13)
    np.testing.assert_allclose(view.T @ d, copy.T @ d, rtol=1e-13)
    np.testing.assert_allclose(view[::7], copy[::7], rtol=1e-15)
    opts = dict(epsilon=1.0, delta=1e-6, row_bound=1.2, random_state=1)
    monkeypatch.setattr(opmod, "HESSIAN_ROWS", 1 << 16)
    small = dpopt.solve(pb, NAME, **opts)
    monkeypatch.setattr(opmod, "HESSIAN_ROWS", 100)
    large = dpopt.solve(pb, NAME, **opts)
    np.testing.assert_allclose(large.w, small.w, rtol=0, atol=2 * small.params["tolerance"])
