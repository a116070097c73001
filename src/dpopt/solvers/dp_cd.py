"""DP-CD: differentially private proximal coordinate descent.

Mangold, Bellet, Salmon, Tommasi, "Differentially Private Coordinate Descent
for Composite Empirical Risk Minimization", ICML 2022 (seed 003; notes in
``shared/papers/003_dp_cd.md``).

Each step draws j uniformly (with replacement) and sets

    w_j <- prox_{gamma_j psi_j}( w_j - gamma_j (g_j + eta_j) ),
    g_j  = (1/n) sum_i clip(d l(x_i^T w; y_i) / d w_j, C_j),
    C_j  = C sqrt(M_j / sum_k M_k),  gamma_j = gamma / M_j,  eta_j ~ N(0, sigma_j^2).

Privacy (replace-one adjacency). g_j has sensitivity Delta_j = 2 C_j / n, and
sigma_j = z Delta_j with one noise multiplier z for every coordinate, so every
step is a Gaussian mechanism with multiplier z whichever j is drawn. The N =
passes * p steps compose adaptively; z is calibrated numerically so that the
composition is (epsilon, delta)-DP (``accountant="exact"``: Gaussian DP,
mu = sqrt(N) / z; ``"rdp"``: the paper's eq. (18); ``"paper"``: Theorem 3.1's
closed form, reproduction only). Every intermediate iterate is a
post-processing of the released noisy coordinate gradients, so the recorded
checkpoints are covered by the same guarantee.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from dpopt._validation import check_choice, check_positive_int, check_scalar
from dpopt.exceptions import PrivacyLeakWarning
from dpopt.kernels.cd import cd_steps
from dpopt.privacy import Gaussian, calibrate_gaussian
from dpopt.solvers._base import Checkpoints, make_result, register_solver


def resolve_smoothness(problem, smoothness):
    """Coordinate smoothness constants M_j: ``"exact"`` (computed from the data
    without privacy, with a :class:`PrivacyLeakWarning`) or a user array."""
    if isinstance(smoothness, str):
        check_choice(smoothness, "smoothness", ("exact",))
        warnings.warn("smoothness='exact' computes the coordinate smoothness constants from the "
                      "private data without privacy; pass them as an array (public knowledge) "
                      "to avoid this", PrivacyLeakWarning, stacklevel=3)
        return problem.coordinate_smoothness()
    M = np.asarray(smoothness, dtype=np.float64)
    if M.shape != (problem.dim,):
        raise ValueError(f"smoothness must have shape ({problem.dim},), got {M.shape}")
    if not np.all(np.isfinite(M)) or np.any(M < 0):
        raise ValueError("smoothness must be finite and non-negative")
    return M


def coordinate_clips(M, clip):
    """C_j = C sqrt(M_j / sum_k M_k), so that ||(C_j)_j||_2 = C (Section 5.1)."""
    total = M.sum()
    if total <= 0:
        raise ValueError("all coordinate smoothness constants are zero (X is all zeros?)")
    return clip * np.sqrt(M / total)


def coordinate_steps(M, step):
    """gamma_j = gamma / M_j; a coordinate with M_j = 0 (all-zero column) never moves."""
    out = np.zeros_like(M)
    np.divide(step, M, out=out, where=M > 0)
    return out


def check_privacy_params(epsilon, clip):
    clip = check_scalar(clip, "clip", low=0.0, low_open=True, allow_inf=True)
    if math.isinf(clip) and not math.isinf(epsilon):
        raise ValueError("clip must be finite when epsilon is finite (unbounded sensitivity)")
    return clip


@register_solver("dp-cd", description="DP proximal coordinate descent with coordinate-wise "
                 "clipping (Mangold et al. 2022)", family="dp-cd")
def fit_dp_cd(problem, *, epsilon, delta, rng, passes=10, step=1.0, clip=1.0,
              smoothness="exact", accountant="exact", checkpoint_every=1):
    """Fit with DP-CD.

    Parameters
    ----------
    passes : int
        Number of passes; one pass is p coordinate steps (N = passes * p).
    step : float
        gamma, the step scale: gamma_j = gamma / M_j.
    clip : float
        C, the overall clipping threshold (``inf`` only with epsilon = inf).
    smoothness : "exact" or array of shape (p,)
        M_j used for steps and clipping thresholds.
    accountant : "exact", "rdp" or "paper"
        How the noise multiplier is calibrated (module docstring).
    checkpoint_every : int
        Record the iterate every this many passes.
    """
    passes = check_positive_int(passes, "passes")
    step = check_scalar(step, "step", low=0.0, low_open=True)
    clip = check_privacy_params(epsilon, clip)
    check_choice(accountant, "accountant", ("exact", "rdp", "paper"))
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    p = problem.dim
    M = resolve_smoothness(problem, smoothness)
    clips = coordinate_clips(M, clip)
    steps = coordinate_steps(M, step)
    n_steps = passes * p
    cal = calibrate_gaussian(epsilon, delta, n_steps, accountant=accountant)
    # sigma_j = z * Delta_j with Delta_j = 2 C_j / n (replace-one); no noise when epsilon = inf
    sigma = np.zeros(p) if cal.noise_multiplier == 0 else \
        cal.noise_multiplier * 2.0 * clips / problem.n_samples

    w = problem.zeros()
    z = problem.margins(w)
    ck = Checkpoints()
    ck.record(w, 0)
    for t in range(1, passes + 1):
        coords = rng.integers(0, p, size=p)
        noise = rng.standard_normal(p)
        cd_steps(problem, z, w, coords, noise, steps, clips, sigma)
        if t % checkpoint_every == 0 or t == passes:
            ck.record(w, t)
    return make_result(problem, w, solver="dp-cd", calibration_or_spent=cal,
                       mechanisms=[Gaussian(cal.noise_multiplier, n_steps)], n_iter=n_steps,
                       passes=passes, checkpoints=ck,
                       params={"passes": passes, "step": step, "clip": clip,
                               "accountant": accountant})
