"""Non-private reference optimum w*, F* (for relative errors and tests).

Two stages: L-BFGS-B on a smooth reformulation in coordinates rescaled by
sqrt(M_j) (the L1 part split as w = a - b with a, b >= 0, box constraints as
bounds), then cyclic proximal coordinate descent with steps 1/M_j (the
kernel of :mod:`dpopt.kernels.cd` without noise or clipping) until the
proximal-gradient residual ||w - prox_{M^-1 psi}(w - M^-1 grad f(w))||_M is at
most ``tol * sqrt(max(1, |F|))`` (the residual scales like sqrt(F), so
the test is invariant to rescaling y; with ``tol * |F|`` a large-valued y
stopped at w = 0). The absolute loss, which is not smooth, is solved
exactly as a linear program (HiGHS).

Everything here reads the private data without privacy: use it for
evaluation, never for a released model.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.sparse as sp
from scipy import optimize

from dpopt._core.validation import check_scalar
from dpopt.data import Problem
from dpopt.kernels.cd import cd_steps_once
from dpopt.solvers._base import Checkpoints, Option, make_result, register_solver


def reference_optimum(problem: Problem, *, tol=1e-10, max_epochs=100_000, return_info=False):
    """Return ``(w_star, F_star)`` of ``problem`` to high precision.

    Parameters
    ----------
    problem : Problem
    tol : float
        Target for the scaled proximal-gradient residual relative to max(1, |F*|).
    max_epochs : int
        Cap on coordinate-descent epochs after L-BFGS-B.
    return_info : bool
        Also return a dict with ``residual``, ``epochs`` and ``converged``.
    """
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be a dpopt.Problem, got {type(problem).__name__}")
    tol = check_scalar(tol, "tol", low=0.0, low_open=True)
    if problem.loss.name == "absolute":
        w = _absolute_lp(problem)
        info = {"residual": 0.0, "epochs": 0, "converged": True, "method": "linprog"}
    else:
        w = _lbfgs(problem)
        w, info = _polish(problem, w, tol, max_epochs)
    f = problem.objective(w)
    return (w, f, info) if return_info else (w, f)


def prox_grad_residual(problem: Problem, w, M=None) -> float:
    """||w - prox_{M^-1 psi}(w - M^-1 grad f(w))||_M: zero exactly at a minimizer."""
    M = _safe_smoothness(problem) if M is None else M
    step = 1.0 / M
    r = w - problem.penalty.prox(w - step * problem.gradient(w), step)
    return float(np.sqrt(np.sum(M * r * r)))


def _safe_smoothness(problem):
    M = problem.coordinate_smoothness() + problem.penalty.l2
    floor = 1e-12 * max(float(M.max()), 1e-300)
    return np.maximum(M, max(floor, 1e-300))


def _lbfgs(problem: Problem):
    pen = problem.penalty
    scale = np.sqrt(_safe_smoothness(problem))  # w = v / scale
    split = bool(np.any(pen.l1 > 0))
    p = problem.dim
    lo, up = pen.lo * scale, pen.up * scale
    n = problem.n_samples

    def smooth_and_grad(v):
        w = v / scale
        z = problem.margins(w)
        f = problem.smooth_objective(w, z) + 0.5 * np.dot(pen.l2, w * w)
        g = (np.asarray(problem.X.T @ problem.loss.deriv(z, problem.y)).ravel() / n
             + pen.l2 * w) / scale
        return f, g

    if split:
        l1s = pen.l1 / scale

        def fun(ab):
            f, g = smooth_and_grad(ab[:p] - ab[p:])
            return f + np.dot(l1s, ab[:p] + ab[p:]), np.concatenate([g + l1s, -g + l1s])

        bounds = [(0.0, max(u, 0.0)) for u in up] + [(0.0, max(-lo_, 0.0)) for lo_ in lo]
        x0 = np.zeros(2 * p)
    else:
        fun = smooth_and_grad
        bounds = list(zip(lo, up))
        x0 = np.zeros(p)
    bounds = [(None if math.isinf(a) else a, None if math.isinf(b) else b) for a, b in bounds]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                                options={"maxiter": 20000, "maxcor": 30, "ftol": 1e-15,
                                         "gtol": 1e-12})
    v = res.x[:p] - res.x[p:] if split else res.x
    return np.clip(v / scale, pen.lo, pen.up)


def _polish(problem: Problem, w, tol, max_epochs):
    M = _safe_smoothness(problem) - problem.penalty.l2  # the prox handles the L2 part
    M = np.maximum(M, 1e-300)
    step = 1.0 / M
    clip = np.full(problem.dim, np.inf)
    sigma = np.zeros(problem.dim)
    coords = np.arange(problem.dim, dtype=np.int64)
    noise = np.zeros(problem.dim)
    w = np.array(w, dtype=np.float64)
    z = problem.margins(w)
    Mfull = M + problem.penalty.l2
    epochs, res = 0, prox_grad_residual(problem, w, Mfull)
    check_every = 1
    while epochs < max_epochs:
        target = tol * math.sqrt(max(1.0, abs(problem.objective(w, z))))
        if res <= target:
            break
        for _ in range(check_every):
            cd_steps_once(problem.X, problem.y, problem.loss.code, problem.loss.param,
                          problem.penalty.arrays, z, w, coords, noise, step, clip, sigma)
        epochs += check_every
        z = problem.margins(w)  # refresh margins against round-off drift
        res = prox_grad_residual(problem, w, Mfull)
        check_every = min(2 * check_every, 64)
    converged = res <= tol * math.sqrt(max(1.0, abs(problem.objective(w))))
    return w, {"residual": res, "epochs": epochs, "converged": bool(converged), "method": "cd"}


def _absolute_lp(problem: Problem):
    pen = problem.penalty
    if np.any(pen.l2 > 0):
        raise ValueError("reference_optimum does not support the absolute loss with an L2 penalty")
    n, p = problem.n_samples, problem.dim
    X = sp.csr_matrix(problem.X)
    # Scale to O(1) entries (HiGHS rejects |values| >~ 1e15 and drops ones below 1e-9, which
    # returned w = 0 for X ~ 1e-100): w_j = v_j sy / sx_j, t = sy t'.
    sx = np.asarray(abs(X).max(axis=0).todense()).ravel()
    sx[sx == 0] = 1.0
    sy = float(np.max(np.abs(problem.y), initial=0.0)) or 1.0
    Xs = X @ sp.diags(1.0 / sx)
    # a cost above the largest possible slope of the data term keeps v_j = 0 optimal: cap it
    # there (x2) so that tiny columns do not put huge numbers in the LP
    slope = np.asarray(abs(Xs).sum(axis=0)).ravel() / n
    cost = np.minimum(pen.l1 / sx, 2.0 * slope + 1e-300)
    eye = sp.identity(n, format="csr")
    # variables: a (p), b (p) with v = a - b, t' (n);  |X' v - y / sy| <= t'
    A = sp.vstack([sp.hstack([Xs, -Xs, -eye]), sp.hstack([-Xs, Xs, -eye])], format="csr")
    b_ub = np.concatenate([problem.y, -problem.y]) / sy
    c = np.concatenate([cost, cost, np.full(n, 1.0 / n)])
    up, lo = pen.up * sx / sy, pen.lo * sx / sy
    bounds = ([(0, None if math.isinf(u) else max(u, 0.0)) for u in up]
              + [(0, None if math.isinf(v) else max(-v, 0.0)) for v in lo]
              + [(0, None)] * n)
    res = optimize.linprog(c, A_ub=A, b_ub=b_ub, bounds=bounds, method="highs")
    if not res.success:
        raise ValueError(f"the linear program of the absolute-loss reference failed "
                         f"({res.message}); rescale the data")
    return (res.x[:p] - res.x[p:2 * p]) * sy / sx


@register_solver("reference", description="non-private high-precision optimum (not private)",
                 private=False, family="reference",
                 options=(Option("tol", 1e-10, None, "stopping tolerance of the solver"),))
def fit_reference(problem, *, epsilon, delta, rng, tol=1e-10):
    """Non-private solver returning :func:`reference_optimum` (epsilon = inf)."""
    ck = Checkpoints()
    w, _ = reference_optimum(problem, tol=tol)
    ck.record(w, 0)
    return make_result(problem, w, solver="reference",
                       calibration_or_spent=(math.inf, delta, "none", 0.0), mechanisms=[],
                       n_iter=0, passes=0, checkpoints=ck, params={"tol": tol})
