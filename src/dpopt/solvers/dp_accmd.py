"""DP-AccMD: differentially private accelerated mirror descent over a norm ball.

Wang, Ye, Xu, "Differentially Private Empirical Risk Minimization Revisited",
NIPS 2017 (arXiv:1802.05251), Algorithm 3 (linear coupling of Allen-Zhu &
Orecchia); notes in ``shared/papers/001_dp_erm_revisited.md`` (2.3 and 6.9).
For the high-dimensional case p >> n: min_{w in C} f(w) with C the L1 or L2
ball of radius R, f the average loss (no penalty: C is the regularizer).

Iteration k = 0..T-1 (x_0 = y_0 = z_0 = 0)::

    alpha = (k + 2) / (4 L_C),   r = 1 / (2 alpha L_C) = 2 / (k + 2)
    x     = r z + (1 - r) y
    g     = (1/n) sum_i clip(grad l_i(x)) + N(0, sigma^2 I)          the only data access
    y     = argmin_{y in C} (L_C / 2) ||y - x||_C^2 + <g, y - x>       "gradient step"
    z     = argmin_{z in C} B_w(z, z_prev) + alpha <g, z - z_prev>     "mirror step"
    return y_T

The printed algorithm uses the exact gradient in the y-step, which the
privacy proof does not cover (y_T is the output); here the **same noisy g**
drives both steps, so everything is post-processing of the T noisy gradients.
The paper's utility proof (eqs. 66-70) assumes the exact gradient in the
y-step, so with this fix its rate is not formally proven.

Geometry. ``constraint="l2"``: ||v||_C = ||v||_2 / R, w(x) = ||x||^2 / (2 R^2);
y = Proj(x - g / L), z = Proj(z - alpha R^2 g). ``constraint="l1"``: the ball
is the image of the simplex of R^{2p} under u -> R (u+ - u-), so the
iteration runs on the simplex with the negative entropy as mirror map
(1-strongly convex w.r.t. ||.||_1, Bregman radius ln(2p) from the uniform
point, which maps to w = 0): z is a multiplicative-weights step and the
y-step (L_C / 2) ||y - x||_1^2 + <c, y - x> over the simplex is solved exactly
by moving mass from the largest entries of c to the smallest (see
:func:`simplex_gradient_step`). In both cases L_C = L R^2 with L the L2
smoothness of f: f(R A u) is L R^2-smooth w.r.t. ||u||_1 (and f is L R^2-smooth
w.r.t. ||.||_2 / R); the paper's general bound L ||C||_2^2 with the diameter
||C||_2 = 2R would be 4 times larger.

Privacy (replace-one). The clipped mean gradient has L2 sensitivity 2C/n;
sigma = z 2C/n and the T releases compose as ``Gaussian(z, T)``, calibrated
exactly (Gaussian DP, :func:`dpopt.privacy.calibrate_gaussian`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from dpopt._core.validation import check_choice, check_positive_int, check_scalar
from dpopt.kernels.grad import l2clip_gradient
from dpopt.privacy import Gaussian, calibrate_gaussian
from dpopt.solvers._base import (
    Checkpoints,
    Option,
    make_result,
    one_of,
    positive,
    positive_int,
    register_solver,
)
from dpopt.solvers._common import (
    CHECKPOINT_EVERY,
    CLIP,
    SMOOTH_LOSSES,
    SMOOTHNESS,
    check_clip,
    global_smoothness,
    mean_noise_std,
)


def project_l2_ball(v, radius):
    """Euclidean projection onto {||w||_2 <= radius}."""
    norm = float(np.linalg.norm(v))
    return v if norm <= radius else v * (radius / norm)


def simplex_gradient_step(x, c, smoothness):
    """argmin_{y in simplex} (L / 2) ||y - x||_1^2 + <c, y - x> for x in the simplex.

    Moving mass t costs ||y - x||_1 = 2t. All of it goes to j* = argmin c; it is
    taken from the other entries in decreasing order of c. The objective
    2 L t^2 + t c_min - sum(removed c) has slope 4 L t - (c_(k) - c_min) on the
    k-th piece, so t* = max(M_{k-1}, (c_(k) - c_min) / (4 L)) at the first k with
    (c_(k) - c_min) / (4 L) <= M_k, M_k the cumulative mass of the k first
    entries (or all the mass if there is none).
    """
    j = int(np.argmin(c))
    order = np.argsort(-c, kind="stable")
    order = order[order != j]
    mass = np.cumsum(x[order])
    target = (c[order] - c[j]) / (4.0 * smoothness)
    hit = np.nonzero(target <= mass)[0]
    if hit.size:
        k = int(hit[0])
        t = max(mass[k - 1] if k > 0 else 0.0, float(target[k]))
    else:
        t = float(mass[-1]) if mass.size else 0.0
    y = x.copy()
    removed = np.minimum(x[order], np.maximum(t - (mass - x[order]), 0.0))
    y[order] -= removed
    y[j] += float(removed.sum())
    return np.maximum(y, 0.0)


def _lift(g, radius):
    """Gradient w.r.t. u of f(R (u+ - u-)) from the gradient g w.r.t. w."""
    return radius * np.concatenate([g, -g])


def _unlift(u, radius):
    p = u.size // 2
    return radius * (u[:p] - u[p:])


@register_solver("dp-accmd", description="DP accelerated mirror descent over an L1 or L2 ball, "
                 "for p >> n (Wang, Ye, Xu 2017, Alg. 3)", losses=SMOOTH_LOSSES,
                 penalties=("none",), family="dp-accmd", fit_intercept=False,
                 options=(
                     Option("iterations", 50, positive_int, "T, the number of noisy full "
                            "gradients"),
                     Option("constraint", "l1", one_of("l1", "l2"), "the ball C"),
                     Option("radius", 1.0, positive, "R, the radius of C"),
                     CLIP.but(doc="C, L2 clipping threshold of the per-sample gradients"),
                     SMOOTHNESS.but(doc='L of the average loss; "exact" reads it (warns)'),
                     CHECKPOINT_EVERY.but(doc="record y every this many iterations"),
                 ), run_length="iterations",
                 audit={"iterations": 10, "constraint": "l2", "radius": 1e6},
                 mechanism="Gaussian noise on the full clipped gradient, one release per iteration",
                 sensitivity="2 C / n")
def fit_dp_accmd(problem, *, epsilon, delta, rng, iterations=50, constraint="l1", radius=1.0,
                 clip=1.0, smoothness="exact", checkpoint_every=1):
    """Fit with DP-AccMD (module docstring); returns y_T.

    Parameters
    ----------
    iterations : int
        T, the number of noisy full gradients.
    constraint : "l1" or "l2"
        The ball C (mirror map: entropy on the lifted simplex, resp. Euclidean).
    radius : float
        R, the radius of C.
    clip : float
        C, L2 clipping threshold of the per-sample gradients (``inf`` only with
        epsilon = inf).
    smoothness : "exact" or float
        L, the L2 smoothness of the average loss (``"exact"`` computes it from
        the data without privacy and warns).
    checkpoint_every : int
        Record y every this many iterations (one pass = one full gradient).
    """
    T = check_positive_int(iterations, "iterations")
    check_choice(constraint, "constraint", ("l1", "l2"))
    R = check_scalar(radius, "radius", low=0.0, low_open=True)
    clip = check_clip(epsilon, clip)
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    L = global_smoothness(problem, smoothness)
    LC = L * R * R
    cal = calibrate_gaussian(epsilon, delta, T)
    sigma = (mean_noise_std(cal.noise_multiplier, clip, problem.n_samples) if cal.noise_multiplier
             else 0.0)
    p = problem.dim

    def noisy_gradient(w):
        g = l2clip_gradient(problem.X, problem.y, problem.row_norms, problem.loss.code,
                            problem.loss.param, problem.margins(w), clip)
        return g + sigma * rng.standard_normal(p) if sigma > 0 else g

    ck = Checkpoints()
    ck.record(problem.zeros(), 0)
    if constraint == "l2":
        y, zz = problem.zeros(), problem.zeros()
    else:
        y = np.full(2 * p, 1.0 / (2 * p))
        log_z = np.full(2 * p, -math.log(2 * p))
    for k in range(T):
        alpha = (k + 2) / (4.0 * LC)
        r = 2.0 / (k + 2)
        if constraint == "l2":
            x = r * zz + (1 - r) * y
            g = noisy_gradient(x)
            y = project_l2_ball(x - g / L, R)
            zz = project_l2_ball(zz - alpha * R * R * g, R)
            w = y
        else:
            x = r * np.exp(log_z) + (1 - r) * y
            c = _lift(noisy_gradient(_unlift(x, R)), R)
            y = simplex_gradient_step(x, c, LC)
            log_z = log_z - alpha * c
            log_z -= logsumexp(log_z)
            w = _unlift(y, R)
        if (k + 1) % checkpoint_every == 0 or k + 1 == T:
            ck.record(w, k + 1)
    return make_result(problem, w, solver="dp-accmd", calibration_or_spent=cal,
                       mechanisms=[Gaussian(cal.noise_multiplier, T)], n_iter=T, passes=T,
                       checkpoints=ck,
                       params={"iterations": T, "constraint": constraint, "radius": R,
                               "clip": clip, "smoothness": L, "sigma": sigma})
