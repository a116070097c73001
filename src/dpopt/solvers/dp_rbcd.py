"""DP-RBCD: differentially private random block coordinate descent with arbitrary sampling.

Maranjyan, Sadiev, Richtarik, "Differentially Private Random Block Coordinate
Descent" (seed 000; the algorithm is called DP-SkGD there; notes in
``shared/papers/000_dp_rbcd.md``), Algorithm 1, with the practical additions
of DP-CD (Mangold et al. 2022): coordinate-wise clipping and a separable prox.

The update
----------
Every step draws a set S of coordinates from a sampling with marginals
p_j = P(j in S) > 0 (a :class:`Sampler`), independently of the data, and sets
for j in S

    w_j <- prox_{gamma_j psi_j}( w_j - gamma_j (g_j + eta_j) ),
    g_j  = (1/n) sum_i clip(d l(x_i^T w; y_i) / d w_j, C_j),   C_j = C sqrt(M_j / sum_k M_k),
    eta_S ~ N(0, sigma_S^2 I_|S|),  sigma_S = z * 2 ||C_S||_2 / n,
    gamma_j = gamma / v_j(S),       v_j(S) = min(|S|, omega) M_j.

The paper writes the step as theta - Gamma C (grad + eta) with the sketch
C = Diag(1{j in S} / p_j) and Gamma = P M^{-1}; the p_j cancel, so the effective
step on a drawn coordinate is 1 / M_j (here gamma / v_j(S)). The code applies it
directly and never divides by p_j: the marginals do not enter the update (nor the
privacy); they define what a pass is (below) and must be positive (the sampling is
"proper"), so that every coordinate is updated.

Safe block steps (ESO)
----------------------
The M_j = c ||X_j||^2 / n (c the curvature of the loss) are coordinate-wise
constants: with them a step on a block larger than one coordinate can diverge
(the notes, section 6 item 10). For a linear model f = (1/n) sum_i phi(x_i^T w)
with phi'' <= c and a move h supported on S, Cauchy-Schwarz on the at most
min(|S|, omega_i) non-zeros of x_i restricted to S gives

    (x_i^T h)^2 <= min(|S|, omega) sum_{j in S} x_ij^2 h_j^2,
    f(w + h) <= f(w) + <grad f(w), h> + (1/2) sum_{j in S} min(|S|, omega) M_j h_j^2,

with omega the largest number of non-zeros in a row (p for dense data). So
v_j(S) = min(|S|, omega) M_j satisfies the descent lemma for *every* drawn block
(not only in expectation): singletons keep M_j, tau-nice blocks get
min(tau, omega) M_j, the full set min(p, omega) M_j (DP-GD's ``step_rule="eso"``).
``block_smoothness="size"`` (default) uses the drawn |S| per step, which for
variable-size samplings (Bernoulli) is tighter than any fixed bound and still
safe step by step; ``"max"`` uses the fixed v_j = min(s_max, omega) M_j with s_max
the sampler's largest block (p for Bernoulli or a user sampler), the fixed
diagonal matrix of the paper's Assumption 4. A tighter data-derived bound
(omega_S = max_i |S cap supp(x_i)|) would read the private sparsity pattern at
every step and is not used. For sparse data omega is itself computed from the
private data (``PrivacyLeakWarning``) unless given.

Privacy (replace-one adjacency)
-------------------------------
Given S, each per-sample clipped vector restricted to S has entries |.| <= C_j,
hence L2 norm <= ||C_S||_2; replacing one record moves g_S by at most
Delta_S = 2 ||C_S||_2 / n in L2. The noise is isotropic on the block with
sigma_S = z Delta_S, so whatever S is drawn the step is a Gaussian mechanism
with the same noise multiplier z, i.e. 1/z-GDP. The set S is drawn from the
solver's generator independently of the data: drawing it is a mechanism that
ignores the data (perfectly private), and Gaussian-DP composes adaptively (each
mechanism may be chosen from the previous outputs, here S and the released
iterates), so releasing S and then the noisy block gradient is 1/z-GDP, and the N
steps fixed in advance compose to sqrt(N)/z-GDP, a homogeneous Gaussian
composition (``calibrate_gaussian``, "exact"; "rdp"/"pld" and the paper's closed
form "paper", Theorem 7, also available). The per-sample terms depend on w only
through the margins X w, a post-processing of released iterates. The blocks and
every intermediate iterate are covered by the same guarantee (paper, footnote 1).
No privacy amplification is claimed from sampling coordinates: the data is never
subsampled. As everywhere in the library, Delta_S holds up to floating-point
rounding (for the full set ||C_S|| = C by construction and C is used).

Empty blocks (Bernoulli sampling) are no-op steps: nothing data-dependent is
released, yet each one is still counted as one of the N Gaussian steps of the
composition (which must be fixed before the draws). This over-counts, never
under-counts, and keeps the marginals exactly q_j (no redraw, which would
change them to q_j / (1 - prod_l (1 - q_l))).

Passes
------
A pass is p / E|S| steps on average (E|S| = sum_j p_j), i.e. p coordinate
updates in expectation: pass t ends after step ceil(t p / E|S|), so a pass is
p steps for single-coordinate samplings (DP-CD), one step for the full set
(DP-GD), and ceil / floor of p / tau steps for tau-nice blocks (e.g. 3, 2, 2, 2,
3, ... for p = 9, tau = 4). The noise multiplier is calibrated for the
N = ceil(passes p / E|S|) steps, fixed before any draw.

Special cases
-------------
``sampling="uniform"`` draws per pass ``rng.integers(0, p, size=p)`` then
``rng.standard_normal(p)``, the draws of DP-CD, and runs DP-CD's kernel
(``cd_steps``): it reproduces ``dpopt.solve(pb, "dp-cd", ...)`` bit for bit.
``sampling="full"`` draws ``rng.standard_normal(p)`` per step and runs DP-GD's
fused gradient and prox (margins X w recomputed after each full step): it
reproduces ``dpopt.solve(pb, "dp-gd", clipping="coordinate", step_rule="eso", ...)``
bit for bit.

Chunked data
------------
On a :class:`dpopt.data.chunked.ChunkedProblem` (row-chunked Dask or on-disk data) each
non-empty block step is one pass over the chunks: every chunk task computes the margins of
its rows at w and returns the sums of its clipped per-sample gradient entries on S, Dask
adds them in a tree (one reduction of an |S|-vector), and the client adds the noise and
takes the prox step of :func:`~dpopt.kernels.block.block_steps`
(:class:`dpopt.data.steps.ReducedBlockSteps`, behind ``problem.block_steps``).
The sampler's draws, the noise and the accounting are the in-memory ones, in the same
order, so at a fixed seed the chunked fit equals the in-memory fit up to rounding (the
in-memory solver updates its margins incrementally, the chunks recompute them). The cost is
one read of the data per block step, so it pays only with large blocks: a pass is p / E|S|
reads. Samplings of single coordinates (DP-CD's p reads per pass) are refused on chunked data.

Not from the paper: the prox (post-processing, not covered by its rates), the
clipping (the paper assumes Lipschitz losses), the last iterate as output (the
paper averages inner iterates with restarts; DP-CD in this library returns the
last iterate too), the per-draw ESO.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt._core.validation import check_choice, check_positive_int, check_scalar
from dpopt.privacy import Gaussian, calibrate_gaussian
from dpopt.solvers._base import Checkpoints, Option, make_result, one_of, register_solver
from dpopt.solvers._common import (
    CHECKPOINT_EVERY,
    CLIP,
    GAUSSIAN_ACCOUNTANTS,
    PASSES,
    SMOOTHNESS,
    STEP,
    check_clip,
    coordinate_clips,
    coordinate_smoothness,
    max_row_nnz,
    mean_noise_std,
)
from dpopt.solvers._rbcd_samplers import (  # noqa: F401 (public here: users subclass Sampler)
    SAMPLINGS,
    BernoulliSampler,
    FullSampler,
    ImportanceSampler,
    NiceSampler,
    Sampler,
    UniformSampler,
    _CheckedSampler,
    make_sampler,
)

# ---------------------------------------------------------------------------
# solver


def pass_ends(sampler, dim, passes) -> np.ndarray:
    """Step count at the end of each pass: ceil(t p / E|S|), t = 0..passes."""
    expected = float(sampler.expected_size)
    if not math.isfinite(expected) or expected <= 0 or expected > dim * (1 + 1e-9):
        raise ValueError(f"sampling has expected block size {expected!r}, must be in (0, p]")
    per_pass = dim / expected
    return np.array([max(t, math.ceil(t * per_pass - 1e-9)) for t in range(passes + 1)],
                    dtype=np.int64)


def block_clip_norms(indptr, indices, clips, clip):
    """||C_S||_2 for every block: C_j for a singleton, C for the full set, else sqrt(sum C_j^2)."""
    k, p = indptr.shape[0] - 1, clips.shape[0]
    sizes = np.diff(indptr)
    owner = np.repeat(np.arange(k), sizes)
    norms = np.sqrt(np.bincount(owner, weights=clips[indices] ** 2, minlength=k))
    single = sizes == 1
    norms[single] = clips[indices[indptr[:-1][single]]]
    norms[sizes == p] = clip
    return norms


def check_chunked_blocks(problem, sampling, block_size, sampler=None):
    """ValueError for a sampling of single coordinates on data where every block step reads
    every row (``problem.block_step_reads_all_rows``: chunked data, module docstring); a
    named sampling is checked before any pass."""
    if not problem.block_step_reads_all_rows:
        return
    if sampler is not None:
        single = sampler.max_size == 1
    else:
        single = isinstance(sampling, str) and (
            sampling in ("uniform", "importance", "importance-sqrt")
            or (sampling == "nice" and block_size == 1))
    if single:
        raise ValueError(f"sampling={sampling!r} updates one coordinate per step; on chunked data "
                         f"every step is one pass over the data (p passes per pass of DP-RBCD): "
                         f"use large blocks (sampling='nice' or 'bernoulli' with a large "
                         f"block_size, or 'full'), or dp-gd")


def _resolve_omega(problem, omega, sampler):
    if omega is not None:
        return check_positive_int(omega, "omega")
    if sampler.max_size <= 1:
        return 1  # singletons: min(1, omega) = 1 whatever omega is
    return max_row_nnz(problem, warn_option="omega")


OPTIONS = (
    Option("sampling", "uniform", None, "block sampling: a name of SAMPLINGS or a sampler object"),
    Option("block_size", None, None, "tau for nice / bernoulli sampling"),
    Option("probabilities", None, None, "marginals p_j for importance / bernoulli sampling"),
    PASSES.but(doc="number of passes; one pass is p / E|S| steps on average"),
    STEP.but(doc="gamma: gamma_j = gamma / v_j(S)"),
    CLIP.but(doc="C, the overall clipping threshold (inf only with epsilon = inf)"),
    SMOOTHNESS.but(doc='M_j: "exact" (PrivacyLeakWarning) or a public array'),
    Option("block_smoothness", "size", one_of("size", "max"), "v_j(S) per drawn block or fixed"),
    Option("omega", None, None, "public bound on the non-zeros per row"),
    Option("accountant", "exact", one_of(*GAUSSIAN_ACCOUNTANTS), "calibration of the noise"),
    CHECKPOINT_EVERY,
)


@register_solver("dp-rbcd", description="DP random block coordinate descent with arbitrary "
                 "sampling (DP-SkGD, Maranjyan et al.), coordinate-wise clipping", family="dp-rbcd",
                 options=OPTIONS, run_length="passes", audit={"passes": 10},
                 distributed=True,
                 mechanism="Gaussian noise on the clipped gradient of a random block S per step (sampled "
                           "independently of the data)",
                 sensitivity="2 ‖C_S‖₂ / n for block S")
def fit_dp_rbcd(problem, *, epsilon, delta, rng, sampling="uniform", block_size=None,
                probabilities=None, passes=10, step=1.0, clip=1.0, smoothness="exact",
                block_smoothness="size", omega=None, accountant="exact", checkpoint_every=1):
    """Fit with DP-RBCD (see the module docstring for the update, steps and privacy).

    Parameters
    ----------
    sampling : str or sampler object
        ``"uniform"`` (DP-CD), ``"importance"`` (p_j proportional to M_j, or to
        ``probabilities``), ``"importance-sqrt"`` (to sqrt(M_j)), ``"nice"``
        (tau = ``block_size``), ``"bernoulli"`` (marginals ``probabilities`` or
        ``block_size`` / p), ``"full"`` (DP-GD), or an object with ``marginals()``
        and ``draw(rng)`` (see :func:`make_sampler`).
    passes : int
        Number of passes; one pass is p / E|S| steps on average (p coordinate updates).
    step : float
        gamma: gamma_j = gamma / v_j(S).
    clip : float
        C, the overall clipping threshold (``inf`` only with epsilon = inf).
    smoothness : "exact" or array of shape (p,)
        M_j used for steps, clipping thresholds and importance probabilities.
    block_smoothness : "size" or "max"
        v_j(S) = min(|S|, omega) M_j per drawn block, or the fixed min(s_max, omega) M_j.
    omega : int, optional
        Public bound on the non-zeros per row (default: p dense, computed sparse).
    accountant : "exact", "rdp", "pld" or "paper"
    checkpoint_every : int
        Record the iterate every this many passes.
    """
    passes = check_positive_int(passes, "passes")
    step = check_scalar(step, "step", low=0.0, low_open=True)
    clip = check_clip(epsilon, clip)
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    p, n = problem.dim, problem.n_samples
    if isinstance(sampling, str):
        check_choice(sampling, "sampling", SAMPLINGS)
    check_chunked_blocks(problem, sampling, block_size)
    M = coordinate_smoothness(problem, smoothness)
    sampler = make_sampler(sampling, p, smoothness=M, block_size=block_size,
                           probabilities=probabilities)
    check_chunked_blocks(problem, sampling, block_size, sampler)
    clips = coordinate_clips(M, clip)
    omega = _resolve_omega(problem, omega, sampler)
    ends = pass_ends(sampler, p, passes)
    n_steps = int(ends[-1])
    cal = calibrate_gaussian(epsilon, delta, n_steps, accountant=accountant)
    z_mult = cal.noise_multiplier
    fixed_scale = float(min(sampler.max_size, omega))

    w = problem.zeros()
    stepper = problem.block_steps(w)  # in memory: margins kept; chunked: a reduction per block
    ck = Checkpoints()
    ck.record(w, 0)
    n_empty = n_updates = 0
    for t in range(1, passes + 1):
        k = int(ends[t] - ends[t - 1])
        indptr, indices = sampler.draw_many(rng, k)
        noise = rng.standard_normal(int(indptr[-1]))
        sizes = np.diff(indptr)
        if z_mult == 0.0:
            sigma = np.zeros(k)
        elif sampler.max_size == 1:
            sigma = mean_noise_std(z_mult, clips[indices], n)
        else:
            sigma = mean_noise_std(z_mult, block_clip_norms(indptr, indices, clips, clip), n)
        if block_smoothness == "size":
            scale = np.minimum(sizes, omega).astype(np.float64)
        else:
            scale = np.full(k, fixed_scale)
        stepper.run_pass(w, indptr, indices, noise, sigma, scale, step, M, clips)
        n_empty += int(np.count_nonzero(sizes == 0))
        n_updates += int(indptr[-1])
        if t % checkpoint_every == 0 or t == passes:
            ck.record(w, t)
    return make_result(problem, w, solver="dp-rbcd", calibration_or_spent=cal,
                       mechanisms=[Gaussian(z_mult, n_steps)], n_iter=n_steps, passes=passes,
                       checkpoints=ck,
                       params={"sampling": repr(sampler) if not isinstance(sampling, str)
                               else sampling, "block_size": block_size, "passes": passes,
                               "step": step, "clip": clip, "accountant": accountant,
                               "block_smoothness": block_smoothness, "omega": omega,
                               "steps_per_pass": n_steps / passes,
                               "expected_block_size": sampler.expected_size,
                               "coordinate_updates": n_updates, "empty_steps": n_empty})
