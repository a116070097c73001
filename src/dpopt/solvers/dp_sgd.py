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
sampler is Poisson, as that analysis assumes: docs/design.md invariant 2);
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
from dpopt.privacy import ADJACENCIES, SubsampledGaussian, calibrate
from dpopt.solvers._base import Checkpoints, DefaultUse, Option, make_result, one_of, register_solver
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
    run_length,
    scaled_domain,
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


def default_settings(*, loss, n, dim, mu, row_bound, alpha=0.0, huber_threshold=1.0,
                     **public):
    """DP-SGD on the default path's scaled domain: the clip and step of
    :func:`dpopt.solvers.dp_gd.default_settings`, T = :func:`~dpopt.solvers._common.run_length`
    steps at the Poisson rate q = mu / sqrt(T) (the smallest rate whose noise multiplier
    sqrt(T) q / mu stays >= 1, where subsampling amplification is roughly linear), batch
    q n, so passes = q T. Public numbers only; the default path never chooses dp-sgd
    (:func:`dpopt.pipeline.default_path.rules` gives these settings)."""
    T = run_length(n, dim, mu)
    G, c, r = scaled_domain(loss, row_bound, T, huber_threshold)
    q = min(1.0, mu / math.sqrt(T))
    batch = max(1, int(round(q * n)))
    return {"passes": max(1, int(math.ceil(T * batch / n))), "step": 1.0, "clip": G * r,
            "batch_size": batch, "smoothness": max(c * r ** 2 + alpha, 1e-12)}


@register_solver("dp-sgd", description="DP proximal SGD, Poisson sampling, L2 clipping (baseline)",
                 family="dp-sgd", options=OPTIONS, run_length="passes",
                 audit={"passes": 2, "batch_size": 25}, distributed=True,
                 mechanism="Poisson-subsampled Gaussian on the sum of clipped per-sample gradients, passes *"
                           " n / b steps",
                 sensitivity="2 C (replace-one) or C (add-remove) for the sum",
                 default_path=DefaultUse(default_settings))  # settings only: never chosen
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
    sampler = problem.poisson_sampler(rng, rate)  # chunked: draws its 128-bit root first
    for t in range(1, passes + 1):
        batches = sampler.batches((t - 1) * steps_per_pass, steps_per_pass)
        noise = rng.standard_normal((steps_per_pass, problem.dim))
        w = problem.proximal_sgd_steps(w, batches, noise, gammas=gammas, clip=clip, sigma=sigma,
                                       batch_size=batch_size)
        if t % checkpoint_every == 0 or t == passes:
            ck.record(w, t)
    return make_result(problem, w, solver="dp-sgd", calibration_or_spent=cal,
                       mechanisms=[SubsampledGaussian(cal.noise_multiplier, rate, n_steps)],
                       n_iter=n_steps, passes=passes, checkpoints=ck, adjacency=adjacency,
                       params={"passes": passes, "step": step, "clip": clip,
                               "batch_size": batch_size, "accountant": accountant})
