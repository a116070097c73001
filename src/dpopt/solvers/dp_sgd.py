"""DP-SGD: proximal stochastic gradient descent with Poisson sampling (baseline).

Abadi et al. 2016 with the proximal step and constant step size gamma / beta
used as the baseline of the DP-CD and DP-GCD papers. Step t:

    B_t   ~ Poisson(q): every record is in the batch independently with prob. q = b / n
    g_t   = (1/b) ( sum_{i in B_t} clip_{L2}(l'(x_i^T w; y_i) x_i, C) + N(0, sigma^2 I) )
    w    <- prox_{(gamma/beta) psi}( w - (gamma/beta) g_t )

For a linear model the per-sample gradient norm is |l'| ||x_i||, so clipping is
a scalar weight per sampled row (no per-sample matrix). The sum is divided by
the expected batch size b (public), not by |B_t|.

Privacy. The noisy sum changes by at most 2C when one record is replaced and
by C when one is added or removed, so sigma = z * 2C (replace-one, default)
or z * C (``adjacency="add-remove"``). T = passes / q steps of the
Poisson-subsampled Gaussian mechanism are accounted with dp-accounting's PLD
accountant, whose subsampled-Gaussian analysis covers both relations (the
sampler is Poisson, as that analysis assumes: DESIGN.md invariant 2);
``accountant="rdp"`` (Mironov et al. 2019, as in the papers) is available for
add-remove only. A batch is drawn as |B| ~ Binomial(n, q) followed by a uniform
subset of that size, which is the same distribution as independent inclusion.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from dpopt._validation import check_choice, check_positive_int, check_scalar
from dpopt.exceptions import PrivacyLeakWarning
from dpopt.kernels.grad import l2clip_weights
from dpopt.privacy import ADJACENCIES, SubsampledGaussian, calibrate
from dpopt.solvers._base import Checkpoints, make_result, register_solver
from dpopt.solvers.dp_cd import check_privacy_params


@functools.lru_cache(maxsize=256)
def calibrate_sgd(epsilon, delta, rate, steps, adjacency, accountant):
    """Noise multiplier of ``steps`` Poisson-subsampled Gaussian steps (cached)."""
    return calibrate(lambda z: [SubsampledGaussian(z, rate, steps)], epsilon, delta,
                     adjacency=adjacency, accountant=accountant)


def sgd_step_size(problem, step, smoothness):
    """gamma / beta with beta the global smoothness (given, or computed with a warning)."""
    if isinstance(smoothness, str):
        check_choice(smoothness, "smoothness", ("exact",))
        warnings.warn("the step size uses the global smoothness computed from the private data "
                      "without privacy; pass smoothness=<beta> to avoid this", PrivacyLeakWarning,
                      stacklevel=3)
        beta = problem.global_smoothness()
    else:
        beta = check_scalar(smoothness, "smoothness", low=0.0, low_open=True)
    return step / beta


def _rows(problem, idx):
    return problem.X_csr[idx] if problem.is_sparse else problem.X[idx]


@register_solver("dp-sgd", description="DP proximal SGD, Poisson sampling, L2 clipping (baseline)",
                 family="dp-sgd")
def fit_dp_sgd(problem, *, epsilon, delta, rng, passes=10, step=1.0, clip=1.0, batch_size=None,
               smoothness="exact", adjacency="replace-one", accountant="pld", checkpoint_every=1):
    """Fit with DP-SGD (module docstring). One pass = n / batch_size steps.

    Parameters
    ----------
    passes : int
    step : float
        gamma; the step size is gamma / beta.
    clip : float
        L2 clipping threshold C of the per-sample gradients.
    batch_size : int, optional
        Expected batch size b (sampling rate b / n); default round(sqrt(n)).
    smoothness : "exact" or float
        beta (the global smoothness); ``"exact"`` computes it without privacy (warns).
    adjacency : "replace-one" or "add-remove"
    accountant : "pld" or "rdp" (rdp: add-remove only)
    """
    n = problem.n_samples
    passes = check_positive_int(passes, "passes")
    clip = check_privacy_params(epsilon, clip)
    check_choice(adjacency, "adjacency", ADJACENCIES)
    check_choice(accountant, "accountant", ("pld", "rdp"))
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    batch_size = max(1, round(math.sqrt(n))) if batch_size is None else \
        check_positive_int(batch_size, "batch_size")
    if batch_size > n:
        raise ValueError(f"batch_size must be <= n_samples={n}, got {batch_size}")
    gamma = sgd_step_size(problem, check_scalar(step, "step", low=0.0, low_open=True), smoothness)
    rate = batch_size / n
    steps_per_pass = max(1, round(n / batch_size))
    n_steps = passes * steps_per_pass
    cal = calibrate_sgd(epsilon, delta, rate, n_steps, adjacency, accountant)
    sens = 2.0 * clip if adjacency == "replace-one" else clip
    sigma = 0.0 if math.isinf(clip) else cal.noise_multiplier * sens
    pen = problem.penalty

    w = problem.zeros()
    ck = Checkpoints()
    ck.record(w, 0)
    for t in range(1, n_steps + 1):
        idx = np.sort(rng.choice(n, size=rng.binomial(n, rate), replace=False))
        rows = _rows(problem, idx)
        weights = l2clip_weights(problem, np.asarray(rows @ w).ravel(), clip, rows=idx)
        g = (np.asarray(rows.T @ weights).ravel() + sigma * rng.standard_normal(problem.dim))
        w = pen.prox(w - gamma * g / batch_size, gamma)
        if t % steps_per_pass == 0 and ((t // steps_per_pass) % checkpoint_every == 0
                                        or t == n_steps):
            ck.record(w, t / steps_per_pass)
    return make_result(problem, w, solver="dp-sgd", calibration_or_spent=cal,
                       mechanisms=[SubsampledGaussian(cal.noise_multiplier, rate, n_steps)],
                       n_iter=n_steps, passes=passes, checkpoints=ck, adjacency=adjacency,
                       params={"passes": passes, "step": step, "clip": clip,
                               "batch_size": batch_size, "accountant": accountant})
