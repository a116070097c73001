"""DP-GD: full-batch noisy clipped proximal gradient descent (baseline).

    w <- prox_{Gamma psi}( w - Gamma (g(w) + eta) ),   eta ~ N(0, sigma^2 I)

with g the average of clipped per-sample gradients, either L2 clipping to C
(``clipping="l2"``, the DP-SGD convention) or coordinate-wise clipping to
C_j = C sqrt(M_j / sum_k M_k) (``"coordinate"``, as DP-CD; ||(C_j)||_2 = C).
Both make ||g(D) - g(D')||_2 <= 2C/n under replace-one adjacency, so
sigma = z 2C/n and T steps are a homogeneous Gaussian composition
(Gaussian-DP accountant, exact). Step: ``step_rule="global"`` uses
Gamma = (gamma / beta) I with beta the global smoothness; ``"eso"`` uses
Gamma = diag(gamma / (min(p, omega) M_j)) with omega the largest number of
non-zeros in a row (the ESO step of the full sampling in DP-RBCD).
``output="last"`` returns the last iterate x_T (Wang, Ye, Xu 2017, Theorem 6.2:
PL objectives); ``"random"`` returns x_tau with tau uniform on {0, ..., T-1}
(Theorem 6.3, general smooth non-convex objectives: the bound is on the average
of E||grad F(x_t)||^2 over t = 0..T-1; the paper's "uniformly sampled from
{0, ..., m-1}" is a typo for T). ``params["tau"]`` is the index returned (T for
"last").

Speed: each step is one sweep over a row-major copy of X (margins, clipping
and gradient fused, :func:`dpopt.kernels.grad.full_gradient`), instead of the
two sweeps X w and X^T v. Random draws: with ``output="random"`` first
``rng.integers(0, passes)`` (tau), then ``rng.standard_normal(dim)`` per step.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt._core.validation import check_positive_int, check_scalar
from dpopt.kernels.grad import full_gradient
from dpopt.privacy import Gaussian, calibrate_gaussian
from dpopt.solvers._base import Checkpoints, Option, make_result, one_of, register_solver
from dpopt.solvers._common import (
    CHECKPOINT_EVERY,
    CLIP,
    PASSES,
    SMOOTHNESS,
    STEP,
    check_clip,
    coordinate_clips,
    coordinate_smoothness,
    global_smoothness,
    max_row_nnz,
    mean_noise_std,
)


def gd_steps(problem, step, step_rule, smoothness):
    """The diagonal of Gamma for the chosen rule (see module docstring)."""
    if step_rule == "global":
        return np.full(problem.dim, step / global_smoothness(problem, smoothness))
    M = coordinate_smoothness(problem, smoothness)
    out = np.zeros(problem.dim)
    scale = min(problem.dim, max_row_nnz(problem))
    np.divide(step, scale * M, out=out, where=M > 0)
    return out


def clipped_gradient(problem, w, **clipping):
    """(1/n) sum_i of clipped per-sample gradients: in memory, or summed over the chunks of
    a :class:`dpopt.data.chunked.ChunkedProblem` (the same quantity up to rounding)."""
    if problem.is_chunked:
        return problem.gradient_sum(w, **clipping) / problem.n_samples
    norms = problem.row_norms if clipping.get("clip") is not None else None  # L2 only
    return full_gradient(problem.X_rows, problem.y, problem.loss.code, problem.loss.param, w,
                         row_norms=norms, **clipping)


OPTIONS = (
    PASSES.but(doc="T, the number of full-gradient steps (one per pass)"),
    STEP.but(doc="gamma: Gamma = gamma / beta (global) or gamma / (min(p, omega) M_j) (eso)"),
    CLIP.but(doc="C, the L2 or overall coordinate clipping threshold"),
    Option("clipping", "l2", one_of("l2", "coordinate"), "per-sample L2 or coordinate clipping"),
    Option("step_rule", "global", one_of("global", "eso"), "global or ESO step (module docstring)"),
    SMOOTHNESS.but(doc='"exact" (warns), beta (global) or the M_j (eso / coordinate clipping)'),
    Option("output", "last", one_of("last", "random"), "last iterate or x_tau, tau uniform"),
    CHECKPOINT_EVERY,
)


@register_solver("dp-gd", description="DP proximal gradient descent, full batch (baseline)",
                 family="dp-gd", options=OPTIONS, run_length="passes", audit={"passes": 10},
                 distributed=True,
                 mechanism="Gaussian noise on the full clipped gradient, one release per pass",
                 sensitivity="2 C / n (L2 or coordinate-wise clipping)")
def fit_dp_gd(problem, *, epsilon, delta, rng, passes=10, step=1.0, clip=1.0, clipping="l2",
              step_rule="global", smoothness="exact", output="last", checkpoint_every=1):
    """Fit with DP-GD; one pass = one full-gradient step (see module docstring).

    ``smoothness``: ``"exact"`` (non-private, warns), a float beta for
    ``step_rule="global"``, or an array of M_j for ``"eso"`` / coordinate clipping.
    """
    passes = check_positive_int(passes, "passes")
    step = check_scalar(step, "step", low=0.0, low_open=True)
    clip = check_clip(epsilon, clip)
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    gamma = gd_steps(problem, step, step_rule, smoothness)
    if clipping == "coordinate":
        clips = coordinate_clips(coordinate_smoothness(problem, smoothness), clip)
    cal = calibrate_gaussian(epsilon, delta, passes)
    sigma = 0.0 if math.isinf(clip) else mean_noise_std(cal.noise_multiplier, clip, problem.n_samples)
    pen = problem.penalty

    w = problem.zeros()
    ck = Checkpoints()
    ck.record(w, 0)
    # Theorem 6.3 bounds the average of E||grad F(x_t)||^2 over t = 0..T-1: draw tau there
    # (data-independent, so it is drawn first and only x_tau is kept).
    tau = int(rng.integers(0, passes)) if output == "random" else passes
    out = w.copy()
    for t in range(1, passes + 1):
        g = clipped_gradient(problem, w, clips=clips) if clipping == "coordinate" else \
            clipped_gradient(problem, w, clip=clip)
        noise = rng.standard_normal(problem.dim)
        w = pen.prox(w - gamma * (g + sigma * noise), gamma)
        if t == tau:
            out = w.copy()
        if t % checkpoint_every == 0 or t == passes:
            ck.record(w, t)
    w = out
    return make_result(problem, w, solver="dp-gd", calibration_or_spent=cal,
                       mechanisms=[Gaussian(cal.noise_multiplier, passes)], n_iter=passes,
                       passes=passes, checkpoints=ck,
                       params={"passes": passes, "step": step, "clip": clip, "clipping": clipping,
                               "step_rule": step_rule, "output": output, "tau": tau})
