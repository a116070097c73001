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
takes the prox step of :func:`~dpopt.kernels.block.block_steps` (:func:`chunked_block_steps`).
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
import numbers

import numpy as np

from dpopt._core.validation import check_choice, check_positive_int, check_scalar
from dpopt.kernels.block import block_steps
from dpopt.kernels.cd import cd_steps
from dpopt.kernels.grad import full_gradient
from dpopt.kernels.prox import prox_vector
from dpopt.privacy import Gaussian, calibrate_gaussian
from dpopt.solvers._base import Checkpoints, Option, make_result, one_of, register_solver
from dpopt.solvers._common import (
    CHECKPOINT_EVERY,
    CLIP,
    GAUSSIAN_ACCOUNTANTS,
    PASSES,
    SMOOTHNESS,
    STEP,
    cd_work,
    check_clip,
    coordinate_clips,
    coordinate_smoothness,
    coordinate_steps,
    max_row_nnz,
    mean_noise_std,
)

SAMPLINGS = ("uniform", "importance", "importance-sqrt", "nice", "bernoulli", "full")

# ---------------------------------------------------------------------------
# samplings


class Sampler:
    """A distribution over subsets of {0, ..., dim - 1}, drawn independently of the data.

    Subclasses give :meth:`marginals` (p_j = P(j in S), all > 0) and :meth:`draw`
    (one set: sorted distinct int64 indices, every random draw from ``rng``).
    :meth:`draw_many` returns k i.i.d. sets in CSR form ``(indptr, indices)``;
    the default calls :meth:`draw` k times, subclasses vectorize it.
    """

    dim: int

    def marginals(self) -> np.ndarray:
        raise NotImplementedError

    def draw(self, rng) -> np.ndarray:
        indptr, indices = self.draw_many(rng, 1)
        return indices

    def draw_many(self, rng, k):
        sets = [self.draw(rng) for _ in range(k)]
        return _pack(sets)

    @property
    def expected_size(self) -> float:
        """E|S| = sum_j p_j."""
        return float(np.sum(self.marginals()))

    @property
    def max_size(self) -> int:
        """Largest possible |S| (used by ``block_smoothness="max"``)."""
        return self.dim

    def __repr__(self):
        return f"{type(self).__name__}(dim={self.dim})"


def _pack(sets):
    sizes = np.array([len(s) for s in sets], dtype=np.int64)
    indptr = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    indices = (np.concatenate(sets).astype(np.int64, copy=False) if sets
               else np.zeros(0, dtype=np.int64))
    return indptr, indices


def _check_dim(dim):
    return check_positive_int(dim, "dim")


def _check_probabilities(probabilities, dim, name, *, normalize):
    q = np.asarray(probabilities, dtype=np.float64) if not isinstance(probabilities, str) else None
    if q is None or q.ndim != 1 or (dim is not None and q.shape != (dim,)):
        want = f"({dim},)" if dim is not None else "(p,)"
        raise ValueError(f"{name} must be an array of shape {want}, got {probabilities!r}")
    if not np.all(np.isfinite(q)) or np.any(q <= 0):
        raise ValueError(f"{name} must be finite and > 0 for every coordinate (a proper sampling)")
    if normalize:
        return q / q.sum()
    if np.any(q > 1):
        raise ValueError(f"{name} must be <= 1 (inclusion probabilities)")
    return q


class UniformSampler(Sampler):
    """One coordinate, uniformly: p_j = 1/p (DP-CD). Draws ``rng.integers(0, p, size=k)``."""

    def __init__(self, dim):
        self.dim = _check_dim(dim)

    def marginals(self):
        return np.full(self.dim, 1.0 / self.dim)

    @property
    def expected_size(self):
        return 1.0

    @property
    def max_size(self):
        return 1

    def draw_many(self, rng, k):
        return np.arange(k + 1, dtype=np.int64), rng.integers(0, self.dim, size=k)


class _ProbabilitySampler(Sampler):
    """A sampler defined by one probability per coordinate (its marginals)."""

    normalize = False  # whether the given weights are rescaled to sum to 1

    def __init__(self, probabilities):
        self.probabilities = _check_probabilities(probabilities, None, "probabilities",
                                                  normalize=self.normalize)
        self.dim = self.probabilities.shape[0]

    def marginals(self):
        return self.probabilities.copy()


class ImportanceSampler(_ProbabilitySampler):
    """One coordinate j with probability p_j (given weights, normalized to sum 1)."""

    normalize = True

    @property
    def expected_size(self):
        return 1.0

    @property
    def max_size(self):
        return 1

    def draw_many(self, rng, k):
        return (np.arange(k + 1, dtype=np.int64),
                rng.choice(self.dim, size=k, p=self.probabilities).astype(np.int64))


class NiceSampler(Sampler):
    """tau-nice sampling: a uniformly random subset of exactly tau coordinates, p_j = tau/p.

    tau = 1 draws like :class:`UniformSampler` and tau = p like :class:`FullSampler`
    (no random draw), so those cases coincide with DP-CD and DP-GD.
    """

    def __init__(self, dim, tau):
        self.dim = _check_dim(dim)
        self.tau = check_positive_int(tau, "block_size")
        if self.tau > self.dim:
            raise ValueError(f"block_size must be <= p = {self.dim}, got {self.tau}")

    def marginals(self):
        return np.full(self.dim, self.tau / self.dim)

    @property
    def expected_size(self):
        return float(self.tau)

    @property
    def max_size(self):
        return self.tau

    def draw_many(self, rng, k):
        if self.tau == 1:
            return UniformSampler(self.dim).draw_many(rng, k)
        if self.tau == self.dim:
            return FullSampler(self.dim).draw_many(rng, k)
        sets = [np.sort(rng.choice(self.dim, size=self.tau, replace=False, shuffle=False))
                for _ in range(k)]
        return _pack(sets)

    def __repr__(self):
        return f"NiceSampler(dim={self.dim}, tau={self.tau})"


class BernoulliSampler(_ProbabilitySampler):
    """Independent sampling: each j enters S with probability q_j, independently.

    The empty set has probability prod_j (1 - q_j) > 0 unless some q_j = 1; an
    empty step is a no-op that the solver still counts in the composition (see the
    module docstring), so the marginals are exactly q_j.
    """

    @property
    def empty_probability(self):
        return float(np.prod(1.0 - self.probabilities))

    def draw_many(self, rng, k):
        if np.all(self.probabilities == 1.0):  # deterministic: the full set, no draw
            return FullSampler(self.dim).draw_many(rng, k)
        mask = rng.random((k, self.dim)) < self.probabilities
        indptr = np.zeros(k + 1, dtype=np.int64)
        np.cumsum(mask.sum(axis=1), out=indptr[1:])
        return indptr, np.nonzero(mask)[1].astype(np.int64)


class FullSampler(Sampler):
    """S = {0, ..., p - 1} always (p_j = 1): full-gradient DP-GD. Uses no randomness."""

    def __init__(self, dim):
        self.dim = _check_dim(dim)

    def marginals(self):
        return np.ones(self.dim)

    @property
    def expected_size(self):
        return float(self.dim)

    def draw_many(self, rng, k):
        return (np.arange(k + 1, dtype=np.int64) * self.dim,
                np.tile(np.arange(self.dim, dtype=np.int64), k))


class _CheckedSampler(Sampler):
    """Wraps a user-supplied (duck-typed) sampler and validates everything it returns."""

    def __init__(self, sampler, dim):
        for attr in ("marginals", "draw"):
            if not callable(getattr(sampler, attr, None)):
                raise ValueError(f"sampling must be one of {list(SAMPLINGS)} or an object with "
                                 f"methods marginals() and draw(rng); {sampler!r} has no {attr}()")
        self.inner, self.dim = sampler, dim
        self._marginals = _check_probabilities(sampler.marginals(), dim, "sampling.marginals()",
                                               normalize=False)
        size = getattr(sampler, "max_size", dim)
        self._max = dim if not isinstance(size, numbers.Integral) else int(min(max(size, 1), dim))

    def marginals(self):
        return self._marginals.copy()

    @property
    def max_size(self):
        return self._max

    def draw_many(self, rng, k):
        many = getattr(self.inner, "draw_many", None)
        if callable(many):
            out = many(rng, k)
            if not (isinstance(out, tuple) and len(out) == 2):
                raise ValueError("sampling.draw_many(rng, k) must return (indptr, indices)")
            indptr, indices = (np.asarray(a) for a in out)
            if (indptr.ndim != 1 or indptr.shape[0] != k + 1 or indptr.dtype.kind not in "iu"
                    or indptr[0] != 0 or np.any(np.diff(indptr) < 0)):
                raise ValueError("sampling.draw_many returned an invalid indptr")
            if indices.ndim != 1 or indices.shape[0] != indptr[-1]:
                raise ValueError("sampling.draw_many returned indices inconsistent with indptr")
            sets = [indices[indptr[i]:indptr[i + 1]] for i in range(k)]
        else:
            sets = [self.inner.draw(rng) for _ in range(k)]
        return _pack([self._check_set(s) for s in sets])

    def _check_set(self, s):
        s = np.asarray(s)
        if s.ndim != 1 or (s.size and s.dtype.kind not in "iu"):
            raise ValueError(f"sampling.draw(rng) must return a 1-D integer array, got {s!r}")
        s = np.sort(s.astype(np.int64))
        if s.size and (s[0] < 0 or s[-1] >= self.dim):
            raise ValueError(f"sampling.draw(rng) returned an index outside [0, {self.dim})")
        if s.size > self._max or np.any(np.diff(s) == 0):
            raise ValueError("sampling.draw(rng) must return distinct indices (a set), at most "
                             "max_size of them")
        return s

    def __repr__(self):
        return f"user sampler {self.inner!r}"


_BUILTIN = (UniformSampler, ImportanceSampler, NiceSampler, BernoulliSampler, FullSampler)


def make_sampler(sampling, dim, *, smoothness=None, block_size=None, probabilities=None):
    """A :class:`Sampler` on ``dim`` coordinates from a name or a user object.

    ``"uniform"``; ``"importance"``: p_j proportional to ``probabilities`` if
    given, else to the smoothness constants M_j; ``"importance-sqrt"``: p_j
    proportional to sqrt(M_j); ``"nice"``: tau-nice with tau = ``block_size``;
    ``"bernoulli"``: independent with marginals ``probabilities`` (or
    q_j = ``block_size`` / p); ``"full"``. An object with ``marginals()`` and
    ``draw(rng)`` (optionally ``draw_many(rng, k)``, ``max_size``) is validated
    and used as is; it must draw only from ``rng`` and independently of the data.
    """
    dim = _check_dim(dim)
    if not isinstance(sampling, str):
        if type(sampling) in _BUILTIN:
            if sampling.dim != dim:
                raise ValueError(f"sampling has dim {sampling.dim}, the problem has dim {dim}")
            return sampling
        return _CheckedSampler(sampling, dim)
    check_choice(sampling, "sampling", SAMPLINGS)
    if block_size is not None and sampling not in ("nice", "bernoulli"):
        raise ValueError(f"block_size is only used with sampling='nice' or 'bernoulli', "
                         f"not {sampling!r}")
    if probabilities is not None and sampling not in ("importance", "bernoulli"):
        raise ValueError(f"probabilities is only used with sampling='importance' or "
                         f"'bernoulli', not {sampling!r}")
    if sampling == "uniform":
        return UniformSampler(dim)
    if sampling == "full":
        return FullSampler(dim)
    if sampling == "nice":
        if block_size is None:
            raise ValueError("sampling='nice' needs block_size (tau)")
        return NiceSampler(dim, block_size)
    if sampling == "bernoulli":
        if (probabilities is None) == (block_size is None):
            raise ValueError("sampling='bernoulli' needs exactly one of probabilities (q_j) "
                             "or block_size (q_j = block_size / p)")
        if probabilities is None:
            tau = check_scalar(block_size, "block_size", low=0.0, high=dim, low_open=True)
            probabilities = np.full(dim, tau / dim)
        q = _check_probabilities(probabilities, dim, "probabilities", normalize=False)
        return BernoulliSampler(q)
    if probabilities is not None:  # importance with user weights
        _check_probabilities(probabilities, dim, "probabilities", normalize=True)
        return ImportanceSampler(probabilities)
    M = np.asarray(smoothness, dtype=np.float64)
    if np.any(M <= 0):
        raise ValueError("importance sampling needs every smoothness constant M_j > 0 "
                         "(an all-zero column would get probability 0)")
    return ImportanceSampler(M if sampling == "importance" else np.sqrt(M))


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
    """ValueError for a sampling of single coordinates on chunked data (module docstring:
    one read of the data per block step); a named sampling is checked before any pass."""
    if not problem.is_chunked:
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


def chunked_block_steps(problem, w, indptr, indices, noise, sigma, scale, step, M, clips):
    """The block steps of one pass on a ChunkedProblem, in place on ``w`` (arguments as for
    :func:`~dpopt.kernels.block.block_steps`): per non-empty block S, one reduction of the
    |S| clipped gradient sums at w, then the same noise, steps and prox on the client."""
    pen = problem.penalty
    for k in range(indptr.shape[0] - 1):
        block = indices[indptr[k]:indptr[k + 1]]
        if block.size == 0:
            continue
        g = problem.gradient_sum(w, clips=clips, coordinates=block) / problem.n_samples \
            + sigma[k] * noise[indptr[k]:indptr[k + 1]]
        gam = np.zeros(block.size)
        np.divide(step, scale[k] * M[block], out=gam, where=M[block] > 0)
        w[block] = prox_vector(w[block] - gam * g, gam, pen.l1[block], pen.l2[block],
                               pen.lo[block], pen.up[block])


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
    z, work = (None, None) if problem.is_chunked else (problem.margins(w), None)
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
        if problem.is_chunked:
            chunked_block_steps(problem, w, indptr, indices, noise, sigma, scale, step, M, clips)
        else:
            full = sizes == p
            z, work = _run_pass(problem, z, w, indptr, indices, noise, sigma, scale, ~full,
                                step, M, clips, work)
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


def _run_pass(problem, z, w, indptr, indices, noise, sigma, scale, incremental, step, M, clips,
              work=None):
    """One pass of block steps; after a full-set step the margins are recomputed as X w.
    Returns (margins, work): ``work`` is the :class:`~dpopt.kernels.cd.CDWork` that a pass
    of singletons leaves open for the next one (``z`` is stale until it is finished).

    The two special cases run the very code of the solvers they reduce to, so that they
    agree bit for bit: a pass of singletons with unit ESO factor is DP-CD's
    :func:`~dpopt.kernels.cd.cd_steps`, a pass of full-set steps is DP-GD's fused
    coordinate-clipped gradient (:func:`~dpopt.kernels.grad.full_gradient`) and vector prox.
    """
    p = w.shape[0]
    sizes = np.diff(indptr)
    if len(sizes) and np.all(sizes == 1) and np.all(scale == 1.0):
        sig = np.zeros(p)
        sig[indices] = sigma  # sigma of a singleton {j} depends on j only
        work = work or cd_work(problem, z)
        cd_steps(work, w, indices, noise, coordinate_steps(M, step), clips, sig)
        return z, work
    if work is not None:
        z = work.finish()
    if len(sizes) and np.all(sizes == p):
        pen = problem.penalty
        for k in range(len(sizes)):
            gam = np.zeros(p)
            np.divide(step, scale[k] * M, out=gam, where=M > 0)
            g = full_gradient(problem.X_rows, problem.y, problem.loss.code, problem.loss.param,
                              w, clips=clips)
            w[:] = pen.prox(w - gam * (g + sigma[k] * noise[indptr[k]:indptr[k + 1]]), gam)
        return problem.margins(w), None
    data = (problem.X, problem.y, problem.loss.code, problem.loss.param, problem.penalty.arrays)
    if incremental.all():
        block_steps(*data, z, w, indptr, indices, noise, sigma, scale, incremental, step, M,
                    clips)
        return z, None
    refresh = np.flatnonzero(~incremental)
    start = 0
    for stop in list(refresh + 1) + [indptr.shape[0] - 1]:
        if stop > start:
            block_steps(*data, z, w, indptr[start:stop + 1], indices, noise, sigma[start:stop],
                        scale[start:stop], incremental[start:stop], step, M, clips)
            if not incremental[stop - 1]:
                z = problem.margins(w)
            start = stop
    return z, None
