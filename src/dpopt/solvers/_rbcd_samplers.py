"""The samplings of DP random block coordinate descent (:mod:`dpopt.solvers.dp_rbcd`): which
block S of coordinates a step updates, with its marginal probabilities p_j = P(j in S) and
the ESO constants v_j the step sizes need (Maranjyan, Sadiev & Richtárik 2024, arbitrary
sampling). A sampling is public: it depends on the dimension and public constants only, and
every draw comes from the fit's Generator.
"""

from __future__ import annotations

import numbers

import numpy as np

from dpopt._core.validation import check_choice, check_positive_int, check_scalar


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


SAMPLINGS = ("uniform", "importance", "importance-sqrt", "nice", "bernoulli", "full")


_BUILTIN = (UniformSampler, ImportanceSampler, NiceSampler, BernoulliSampler, FullSampler)
