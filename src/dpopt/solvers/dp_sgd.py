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
add-remove only.

Sampler and random draws. The batches of a pass are drawn together by
:func:`poisson_batches`: the n * S (record, step) slots of the pass's S steps
are a Bernoulli(q) process, generated exactly by its geometric gaps
(ceil(E / -log(1 - q)) with ``E = rng.standard_exponential(chunk)``, in chunks
until the slots are covered), so
every record is in every batch independently with probability q. Then
``rng.standard_normal((S, dim))`` draws the pass's noise. That is the whole
RNG consumption per pass (geometric chunks, then one normal block); the steps
themselves run in one compiled call (:mod:`dpopt.kernels.sgd`) on a row-major
copy of X.

Chunked data (:class:`dpopt.data.chunked.ChunkedProblem`): each chunk samples its own rows,
every row independently with the same rate q, from streams keyed by the row's sampling block
and the step, rooted in 128 bits drawn from ``rng`` first (``rng.integers`` before any
noise); then, per pass, the same ``rng.standard_normal((S, dim))`` block. The sampler and
the accountant still agree (Poisson, rate q), so the accounting is unchanged; the batches
depend on the seed and the row index only, not on the chunking (see
:mod:`dpopt.data.chunked`), but differ from the in-memory draw.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from dpopt._core.validation import check_positive_int, check_scalar
from dpopt.data.chunked import sampling_entropy
from dpopt.kernels.sgd import sgd_steps
from dpopt.privacy import ADJACENCIES, SubsampledGaussian, calibrate
from dpopt.solvers._base import Checkpoints, Option, make_result, one_of, register_solver
from dpopt.solvers._common import (
    BATCH_SIZE,
    CHECKPOINT_EVERY,
    CLIP,
    PASSES,
    SMOOTHNESS,
    STEP,
    SUBSAMPLED_ACCOUNTANTS,
    adjacency_factor,
    check_clip,
    global_smoothness,
    poisson_batches,
)


@functools.lru_cache(maxsize=256)
def calibrate_sgd(epsilon, delta, rate, steps, adjacency, accountant):
    """Noise multiplier of ``steps`` Poisson-subsampled Gaussian steps (cached)."""
    return calibrate(lambda z: [SubsampledGaussian(z, rate, steps)], epsilon, delta,
                     adjacency=adjacency, accountant=accountant)


OPTIONS = (
    PASSES.but(doc="number of passes; one pass is round(n / batch_size) steps"),
    STEP.but(doc="gamma; the step size is gamma / beta"),
    CLIP.but(doc="C, the L2 clipping threshold of the per-sample gradients"),
    BATCH_SIZE.but(doc="expected Poisson batch size b (rate b / n); default round(sqrt(n))"),
    SMOOTHNESS.but(doc='beta, the global smoothness; "exact" reads it from the data (warns)'),
    Option("adjacency", "replace-one", one_of(*ADJACENCIES), "adjacency of the guarantee"),
    Option("accountant", "pld", one_of(*SUBSAMPLED_ACCOUNTANTS), "rdp: add-remove only"),
    CHECKPOINT_EVERY,
)


def chunked_sgd_pass(problem, w, entropy, first_step, noise, gammas, clip, sigma, rate,
                     batch_size):
    """``len(noise)`` proximal DP-SGD steps on a ChunkedProblem (one reduction each); the
    update is the one of :mod:`dpopt.kernels.sgd`."""
    for s in range(noise.shape[0]):
        g = problem.sampled_gradient_sum(w, clip=clip, entropy=entropy, step=first_step + s,
                                         rate=rate)
        w = problem.penalty.prox(w - gammas * (g + sigma * noise[s]) / batch_size, gammas)
    return w


@register_solver("dp-sgd", description="DP proximal SGD, Poisson sampling, L2 clipping (baseline)",
                 family="dp-sgd", options=OPTIONS, run_length="passes",
                 audit={"passes": 2, "batch_size": 25}, distributed=True,
                 mechanism="Poisson-subsampled Gaussian on the sum of clipped per-sample gradients, passes *"
                           " n / b steps",
                 sensitivity="2 C (replace-one) or C (add-remove) for the sum")
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
    clip = check_clip(epsilon, clip)
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    batch_size = max(1, round(math.sqrt(n))) if batch_size is None else \
        check_positive_int(batch_size, "batch_size")
    if batch_size > n:
        raise ValueError(f"batch_size must be <= n_samples={n}, got {batch_size}")
    gamma = check_scalar(step, "step", low=0.0, low_open=True) / global_smoothness(problem, smoothness)
    rate = batch_size / n
    steps_per_pass = max(1, round(n / batch_size))
    n_steps = passes * steps_per_pass
    cal = calibrate_sgd(epsilon, delta, rate, n_steps, adjacency, accountant)
    sens = adjacency_factor(adjacency) * clip  # of the batch sum
    sigma = 0.0 if math.isinf(clip) else cal.noise_multiplier * sens
    gammas = np.full(problem.dim, gamma)

    w = problem.zeros()
    ck = Checkpoints()
    ck.record(w, 0)
    entropy = sampling_entropy(rng) if problem.is_chunked else None
    for t in range(1, passes + 1):
        if problem.is_chunked:
            noise = rng.standard_normal((steps_per_pass, problem.dim))
            w = chunked_sgd_pass(problem, w, entropy, (t - 1) * steps_per_pass, noise, gammas,
                                 clip, sigma, rate, batch_size)
        else:
            rows, bounds = poisson_batches(rng, n, rate, steps_per_pass)
            noise = rng.standard_normal((steps_per_pass, problem.dim))
            sgd_steps(problem.X_rows, problem.y, problem.row_norms, problem.loss.code,
                      problem.loss.param, problem.penalty.arrays, w, rows, bounds, noise, gammas,
                      clip, sigma, batch_size)
        if t % checkpoint_every == 0 or t == passes:
            ck.record(w, t)
    return make_result(problem, w, solver="dp-sgd", calibration_or_spent=cal,
                       mechanisms=[SubsampledGaussian(cal.noise_multiplier, rate, n_steps)],
                       n_iter=n_steps, passes=passes, checkpoints=ck, adjacency=adjacency,
                       params={"passes": passes, "step": step, "clip": clip,
                               "batch_size": batch_size, "accountant": accountant})
