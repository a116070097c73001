"""Minimising objective perturbation's F_b to a gradient tolerance, with an outcome that does
not depend on the data (the solver of :mod:`dpopt.solvers.objective_perturbation`).

What privacy needs. Approximate minima perturbation (Iyengar, Near, Song, Thakkar, Thakurta,
Wang, IEEE S&P 2019, Thm. 1; Redberg, Koskela, Wang, NeurIPS 2023) releases a point w_hat
with ||grad F_b(w_hat)|| <= tau, then adds Gaussian noise: F_b is s-strongly convex, so
||w_hat - w*|| <= tau / s for EVERY dataset, and that is all the argument uses. The path that
found w_hat (algorithm, number of steps, machine) is never released and may depend on the
data. What must not depend on the data is whether a release happens: a solver that gives up
(raises) on some datasets and not on their neighbours releases that event unaccounted.

Two stages. (1) Damped Newton (fast, quadratic locally), stopped at ``target``. (2) Only if
stage 1 did not certify the target: Nesterov's accelerated gradient method for strongly
convex functions with the constant momentum (sqrt(kappa) - 1) / (sqrt(kappa) + 1) and step
1 / beta_F, for a number of steps fixed by public constants only, after which the target
holds in exact arithmetic on every dataset of the domain. The release is stage 1's point
when its gradient is certified, else the first stage-2 point whose gradient is certified,
else stage 2's last point y_T. Nothing raises here; the solver refuses a last point whose
computed gradient is still above the target, which float64's rounding can cause on an
ill-conditioned problem (:func:`dpopt.solvers.objective_perturbation.raise_uncertified`).

The iteration bound (every dataset whose rows satisfy ||x_i|| <= B_aug and labels give
|l'| <= L, 0 <= l'' <= beta: the clipped design of the solver):

* F_b is s-strongly convex (s = min_j reg_j > 0) and beta_F-smooth with the public
  beta_F = beta B_aug^2 + max_j reg_j (the data Hessian (1/n) sum_i l''_i x_i x_i^T has norm
  <= beta max_i ||x_i||^2); kappa = beta_F / s.
* At the start x_1: ||x_1 - x*|| <= ||grad F_b(x_1)|| / s <= G0 / s, where
  G0 = L B_aug + ||lin|| bounds ||grad F_b(0)|| = ||(1/n) sum_i l'(0; y_i) x_i + lin||
  (stage 2 starts at stage 1's point only when its gradient norm is at most G0 / 2, else
  at 0).
* Nesterov's method gives F_b(y_t) - F_b* <= (s + beta_F)/2 ||x_1 - x*||^2 exp(-(t-1)/sqrt(kappa))
  (Nesterov, Introductory Lectures on Convex Optimization, 2004, Thm. 2.2.3; in this form
  Bubeck, Convex Optimization: Algorithms and Complexity, 2015, Thm. 3.18), and every
  beta_F-smooth convex function has ||grad F(y)||^2 <= 2 beta_F (F(y) - F*) (Nesterov 2004,
  Thm. 2.1.5). Hence ||grad F_b(y_t)|| <= G0 sqrt(kappa (kappa + 1)) exp(-(t-1) / (2 sqrt(kappa))),
  which is <= target once t - 1 >= 2 sqrt(kappa) log(G0 sqrt(kappa (kappa + 1)) / target)
  (:func:`accelerated_steps`): a count of public quantities. The Huber loss is not twice
  differentiable, but both cited results need only convexity and a beta_F-Lipschitz gradient.

Floating point: the checks use the computed gradient against ``target``, which the solver sets
to half the tolerance tau (room for round-off in the gradient, as before); the guarantee of
stage 2's last point is the exact-arithmetic theorem above.

Stage 1 on large dense data uses a sub-sampled Hessian (Byrd, Chin, Neveitt, Nocedal, SIAM J.
Optim. 2011; Roosta-Khorasani, Mahoney, Math. Program. 2019): the Hessian of a fixed, evenly
spaced subset of the rows (public positions), refined (twice the rows) whenever a full
Newton step contracts the gradient by less than a factor 4, and kept for the next step
(not recomputed) when it contracted by more (a chord step). Its cost is m d^2 instead of
n d^2 per step; like every stage-1 choice it only changes the path, never the release rule.
"""

from __future__ import annotations

import math

import numpy as np

MAX_NEWTON = 200
LINE_SEARCH_HALVINGS = 60


def newton(objective, w0, target, max_iter=None):
    """Damped Newton until ||grad|| <= ``target``; returns (w, gradient norm, iterations).

    ``objective.evaluate(w)`` is computed once per point tried and passed to ``value``,
    ``gradient`` and ``newton_direction`` (the margins in memory; on chunked data the
    reduced loss, gradient and Hessian: one reduction per point, so one per Newton step
    when the full step is accepted), at most ``max_iter`` (default ``MAX_NEWTON``) steps.
    A trial point is accepted when its gradient norm halves (then F's values are not
    needed) or on Armijo's condition. After each full step, ``objective.contraction(ratio)``
    (when it has one) learns how much the gradient norm contracted, so that an approximate
    Hessian can be refined or kept."""
    max_iter = MAX_NEWTON if max_iter is None else max_iter
    w = w0.copy()
    z = objective.evaluate(w)
    g = objective.gradient(w, z)
    gnorm = float(np.linalg.norm(g))
    for it in range(1, max_iter + 1):
        if gnorm <= target or not np.isfinite(gnorm):
            return w, gnorm, it - 1
        step = objective.newton_direction(w, g, z)
        f0, slope, t = None, float(np.dot(g, step)), 1.0
        for _ in range(LINE_SEARCH_HALVINGS):  # a smaller gradient (where F is flat), or Armijo
            w_new = w - t * step
            z_new = objective.evaluate(w_new)
            g_new = objective.gradient(w_new, z_new)
            if np.linalg.norm(g_new) < 0.5 * gnorm:
                break
            f0 = objective.value(w, z) if f0 is None else f0
            if objective.value(w_new, z_new) <= f0 - 1e-4 * t * slope:
                break
            t *= 0.5
        w, z, g = w_new, z_new, g_new
        gnorm_new = float(np.linalg.norm(g))
        if t == 1.0 and hasattr(objective, "contraction"):
            objective.contraction(gnorm_new / gnorm)
        gnorm = gnorm_new
    return w, gnorm, max_iter


def accelerated_steps(convexity, smoothness, g0_bound, target) -> int:
    """The number of steps after which :func:`accelerated_gradient` reaches
    ||grad|| <= ``target`` from any start with ||grad|| <= ``g0_bound`` (module docstring):
    ceil(2 sqrt(kappa) log(G0 sqrt(kappa (kappa + 1)) / target)), kappa = smoothness / convexity."""
    if not (convexity > 0 and smoothness >= convexity and target > 0):
        raise ValueError(f"the bound needs 0 < convexity <= smoothness and target > 0, got "
                         f"{convexity!r}, {smoothness!r}, {target!r}")
    kappa = smoothness / convexity
    ratio = g0_bound * math.sqrt(kappa * (kappa + 1.0)) / target
    if ratio <= 1.0:
        return 0
    return math.ceil(2.0 * math.sqrt(kappa) * math.log(ratio))


def accelerated_gradient(objective, w0, target, *, convexity, smoothness, steps):
    """Nesterov's accelerated gradient method for a ``convexity``-strongly convex,
    ``smoothness``-smooth objective (Bubeck 2015, Sec. 3.7.1): x_1 = y_1 = w0,
    y_{k+1} = x_k - grad(x_k) / smoothness, x_{k+1} = y_{k+1} + m (y_{k+1} - y_k),
    m = (sqrt(kappa) - 1) / (sqrt(kappa) + 1). Returns the first x_k whose gradient norm is
    <= ``target``, else y_{steps + 1}; with (w, gradient norm, gradient evaluations)."""
    first_order = getattr(objective, "evaluate_first_order", objective.evaluate)
    root = math.sqrt(smoothness / convexity)
    momentum = (root - 1.0) / (root + 1.0)
    x, y_prev = w0.copy(), w0.copy()
    for k in range(steps):
        g = objective.gradient(x, first_order(x))
        gnorm = float(np.linalg.norm(g))
        if gnorm <= target:
            return x, gnorm, k + 1
        y = x - g / smoothness
        x = y + momentum * (y - y_prev)
        y_prev = y
    g = objective.gradient(y_prev, first_order(y_prev))
    return y_prev, float(np.linalg.norm(g)), steps + 1


def minimize_to_tolerance(objective, w0, target, *, convexity, smoothness, g0_bound,
                          first_stage=None):
    """A point w with ||grad F(w)|| <= ``target`` (certified by the computed gradient, or by
    :func:`accelerated_steps` in exact arithmetic), never an exception (module docstring).

    ``convexity`` s > 0, ``smoothness`` beta_F and ``g0_bound`` >= ||grad F(w0)|| must be
    public bounds valid for every dataset of the domain. ``first_stage(objective, w0,
    target)`` (default :func:`newton`) returns (w, gradient norm, iterations). Returns
    (w, gradient norm, iterations, stage), ``stage`` 1 or 2 (which stage produced w: a
    diagnostic for tests, never to be released since it depends on the data)."""
    w, gnorm, iters = (first_stage or newton)(objective, w0, target)
    if gnorm <= target:
        return w, gnorm, iters, 1
    start = w if gnorm <= 0.5 * g0_bound else w0  # a NaN gnorm restarts from w0
    steps = accelerated_steps(convexity, smoothness, g0_bound, target)
    w, gnorm, more = accelerated_gradient(objective, start, target, convexity=convexity,
                                          smoothness=smoothness, steps=steps)
    return w, gnorm, iters + more, 2
