"""The default path's feature maps: post-processing of private bounds (free), applied the
same way at fit and at predict time. :class:`Scaling` clips each feature to its bounds and
maps it to [0, 1] (or divides a sparse feature by its largest bound), :class:`RowNormalization`
divides each row by its norm when the bounds cannot be located, :class:`TargetScaling` maps
the target's bounds to [-1, 1]. Each maps a model's coefficients back to raw units."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from dpopt.data.rows import rows_of
from dpopt.kernels import clipscale
from dpopt.kernels.design import block_rows


def _compiled(X, p):
    """Whether the compiled maps take X: a dense contiguous float64 matrix of p columns
    (anything else takes the NumPy expression, which also raises on a shape mismatch)."""
    return (isinstance(X, np.ndarray) and X.dtype == np.float64 and X.ndim == 2
            and X.shape[1] == p and (X.flags.c_contiguous or X.flags.f_contiguous))


#: Stored values clipped per group of columns (:func:`clip_sparse`): bounds the temporaries.
CLIP_BLOCK = 1 << 22


def clip_sparse(X, lower, upper):
    """A CSC copy of sparse X with every stored value clipped to its column's
    [lower_j, upper_j] (implicit zeros untouched), in place on the copy, a group of columns
    at a time (at most :data:`CLIP_BLOCK` values): no per-value index or bound arrays of the
    whole matrix."""
    X = sp.csc_matrix(X, dtype=np.float64, copy=True)
    indptr, p, start = X.indptr, X.shape[1], 0
    while start < p:
        end = int(np.searchsorted(indptr, indptr[start] + CLIP_BLOCK, side="right")) - 1
        end = min(max(end, start + 1), p)
        a, b = indptr[start], indptr[end]
        cols = np.repeat(np.arange(start, end), np.diff(indptr[start:end + 1]))
        np.clip(X.data[a:b], lower[cols], upper[cols], out=X.data[a:b])
        start = end
    return X


@dataclass(frozen=True)
class Scaling:
    """Post-processing of private bounds: clip to [lower, upper], subtract ``offset``,
    divide by ``scale`` (0 where the bounds collapsed: that feature becomes 0)."""

    lower: np.ndarray
    upper: np.ndarray
    offset: np.ndarray
    scale: np.ndarray

    @classmethod
    def from_bounds(cls, lower, upper, *, shift, sparse):
        lower, upper = np.asarray(lower, float), np.asarray(upper, float)
        if sparse:  # zero must stay inside the clipping box so that zeros stay zeros
            lower, upper = np.minimum(lower, 0.0), np.maximum(upper, 0.0)
        if shift and not sparse:
            offset, scale = lower, upper - lower
        else:
            offset, scale = np.zeros_like(lower), np.maximum(np.abs(lower), np.abs(upper))
        return cls(lower, upper, offset, scale)

    def transform(self, X):
        inv = self._inverse_scale()
        if sp.issparse(X):  # offset is 0 for sparse data
            X = self.clip(X) @ sp.diags(inv)
            X.eliminate_zeros()
            return sp.csc_matrix(X)
        source = self._source(X)
        if source is not None:  # one pass, value for value the NumPy expression below
            base, rows = source
            return clipscale.clip_scale_rows(base, rows, *self._arrays(inv),
                                             np.empty((rows.shape[0], base.shape[1])))
        if _compiled(X, self.scale.shape[0]) and X.flags.f_contiguous:
            return clipscale.clip_scale_columns(X, *self._arrays(inv), np.empty_like(X))
        return (np.clip(X, self.lower, self.upper) - self.offset) * inv

    def design(self, X, intercept):
        """``transform(X)``; with ``intercept``, for a contiguous float64 X (or a
        :class:`~dpopt.data.rows.RowSubset` of one), as the first p columns of a
        Fortran-ordered (n, p + 1) array whose last column is ones: the design
        :class:`dpopt.data.Problem` builds with an intercept, which it then takes without
        a copy (one array of n (p + 1) values instead of two)."""
        p = self.scale.shape[0]
        source = self._source(X)
        fortran = _compiled(X, p) and X.flags.f_contiguous
        if not intercept or (source is None and not fortran):
            return self.transform(X)
        out = np.empty((X.shape[0], p + 1), order="F")
        arrays = self._arrays(self._inverse_scale())
        if source is not None:
            clipscale.clip_scale_to_fortran(*source, *arrays, out[:, :p], block_rows(p))
        else:
            clipscale.clip_scale_columns(X, *arrays, out[:, :p])
        out[:, p] = 1.0
        return out[:, :p]

    def column_sums(self, X):
        """``transform(X).sum(axis=0)`` as a 1-d array, without storing the transform
        when X is a C-ordered float64 array with at least two columns, or a
        :class:`~dpopt.data.rows.RowSubset` of one (the compiled sum adds in NumPy's
        order, so the result is the same bit for bit)."""
        source = self.compiled_source(X)
        if source is not None and X.shape[1] >= 2:
            return clipscale.clip_scale_column_sums(*source)
        return np.asarray(self.transform(X).sum(axis=0)).ravel()

    def compiled_source(self, X):
        """``(base, rows, lower, upper, offset, inv)`` for kernels that apply this map row
        by row without storing it (a C-ordered float64 X with this map's p columns, or a
        :class:`~dpopt.data.rows.RowSubset` of one); None otherwise."""
        source = self._source(X)
        return None if source is None else (*source, *self._arrays(self._inverse_scale()))

    def _source(self, X):
        """(base, rows) for the compiled row passes (:func:`dpopt.data.rows.rows_of`),
        when X has this map's p columns; else None."""
        source = rows_of(X)
        return source if source is not None and X.shape[1] == self.scale.shape[0] else None

    def _inverse_scale(self):
        return np.divide(1.0, self.scale, out=np.zeros_like(self.scale), where=self.scale > 0)

    def _arrays(self, inv):
        return tuple(np.ascontiguousarray(np.broadcast_to(a, inv.shape), dtype=np.float64)
                     for a in (self.lower, self.upper, self.offset, inv))

    def centered(self, means):
        """The same map followed by subtracting ``means`` (in scaled units)."""
        return replace(self, offset=self.offset + np.asarray(means) * self.scale)

    def narrowed(self, columns, lower, upper, reach=0.0):
        """The same centred map with feature ``columns[k]`` clipped to [lower[k], upper[k]]
        (bounds of its centred, scaled values: private bounds released after centring) and
        divided by s_k = min(1, max(|lower[k]|, |upper[k]|)), so that it spans [-1, 1]
        instead of a small part of it (its centred values lie in [-1, 1] already: a
        wider range is not stretched).

        Bounds that do not surround the mean (lower[k] < 0 < upper[k] fails) are one-sided
        for one of two reasons. The noisy mean missed a bulk narrower than the mean's own
        noise (a year in [2000, 2015] whose first bounds are [1778, 3162]): then the near
        end lies within ``reach`` of 0 (the caller's bound on the mean's error, in the same
        scaled units), and the feature is re-centred on the middle of its bounds and divided
        by their half-width, so it spans [-1, 1] about its own centre (also where that
        half-width exceeds 1, bounds read wider than the values on noise: capped at 1 it
        let values reach beyond [-1, 1], the domain every later release assumes).
        Otherwise (collapsed, unresolved, or a one-sided range beyond ``reach``) the
        feature keeps its map: narrowing it would make it a constant or clip most of its
        values. Post-processing of released bounds and of the released mean: free."""
        columns = np.asarray(columns, dtype=np.intp)
        lower, upper = np.asarray(lower, float), np.asarray(upper, float)
        surround = (lower < 0) & (upper > 0)
        with np.errstate(invalid="ignore"):
            missed = (((lower > 0) | (upper < 0)) & (lower < upper)
                      & (np.maximum(np.abs(lower), np.abs(upper)) <= reach))
        keep = surround | missed
        middle = np.where(missed, 0.5 * (lower + upper), 0.0)
        half = np.where(missed, 0.5 * (upper - lower), np.maximum(np.abs(lower), np.abs(upper)))
        c, lower, upper = columns[keep], lower[keep], upper[keep]
        middle = middle[keep]
        s = np.where(missed[keep], half[keep], np.minimum(1.0, half[keep]))
        lo, hi, sc, off = self.lower.copy(), self.upper.copy(), self.scale.copy(), self.offset.copy()
        lo[c] = np.maximum(lo[c], off[c] + lower * sc[c])
        hi[c] = np.minimum(hi[c], off[c] + upper * sc[c])
        hi[c] = np.maximum(lo[c], hi[c])
        off[c] = off[c] + middle * sc[c]
        sc[c] = sc[c] * s
        return replace(self, lower=lo, upper=hi, offset=off, scale=sc)

    def recentred(self, columns, means):
        """The same map with the values of feature ``columns[k]`` (in [-1, 1]) shifted by
        ``-means[k]`` and divided by 1 + |means[k]|, so that they stay in [-1, 1]."""
        columns = np.asarray(columns, dtype=np.intp)
        means = np.asarray(means, dtype=float)
        off, sc = self.offset.copy(), self.scale.copy()
        off[columns] = off[columns] + means * sc[columns]
        sc[columns] = sc[columns] * (1.0 + np.abs(means))
        return replace(self, offset=off, scale=sc)

    def to_dict(self):
        """The map ``coef_`` needs at prediction time, for a model file."""
        return {"type": "clip", "lower": self.lower.tolist(), "upper": self.upper.tolist()}

    def prepare(self, X):
        """The features ``coef_`` applies to: X clipped to [lower, upper] (sparse stays sparse)."""
        return self.clip(X)

    def clip(self, X):
        """X clipped to [lower, upper] feature-wise (sparse stays sparse)."""
        if sp.issparse(X):
            return clip_sparse(X, self.lower, self.upper)
        return np.clip(X, self.lower, self.upper)

    def unscale(self, coef, intercept):
        """Coefficients on raw (clipped) features: w_j / s_j, b - sum_j w_j o_j / s_j."""
        inv = np.divide(1.0, self.scale, out=np.zeros_like(self.scale), where=self.scale > 0)
        raw = coef * inv
        return raw, float(intercept - raw @ self.offset)


#: Rows whose largest entry is beyond this are scaled down before their norm is taken: the
#: square of an entry above about 1.3e154 overflows, and the row's norm with it.
_LARGE_ENTRY = 2.0 ** 500


def _without_overflow(X):
    """X with every row whose largest |entry| exceeds :data:`_LARGE_ENTRY` multiplied by a
    power of 2 that brings that entry near 1: exact (no rounding, but for entries far below
    the largest, which underflow as they would in the norm), so the row's direction and
    every other row are unchanged, bit for bit. Without it the norm of such a row is inf
    and the row becomes 0."""
    big = np.asarray(abs(X).max(axis=1).todense()).ravel() if sp.issparse(X) else \
        np.max(np.abs(X), axis=1)
    rows = np.flatnonzero(big > _LARGE_ENTRY)
    if rows.size == 0:
        return X
    factors = np.ones(X.shape[0])
    factors[rows] = np.ldexp(1.0, -np.frexp(big[rows])[1])
    if sp.issparse(X):
        return sp.diags(factors) @ X
    return np.asarray(X, dtype=np.float64) * factors[:, None]


def normalize_rows(X):
    """x -> x / ||x||_2 for every row (0 stays 0; a copy), a row too large to square
    included (:func:`_without_overflow`): the one row normalization of training and
    prediction."""
    return normalize(_without_overflow(X), norm="l2", copy=True)


@dataclass(frozen=True)
class RowNormalization:
    """x -> x / ||x||_2 for every row (0 stays 0): a per-record map that reads no other
    record, so it costs no privacy. Used when the budget cannot locate per-feature
    bounds (:func:`dpopt.pipeline.default_path.bounds_resolvable`); the model is then linear in the normalized
    features and ``coef_`` applies to them."""

    lower = upper = None

    def transform(self, X):
        if X.shape[0] == 0:  # an empty chunk (a held-out split can leave one): nothing to map
            return sp.csc_matrix(X, dtype=np.float64) if sp.issparse(X) else np.zeros(X.shape)
        out = normalize_rows(X)
        return sp.csc_matrix(out) if sp.issparse(out) else out

    prepare = transform

    def to_dict(self):
        return {"type": "row-normalize"}

    def unscale(self, coef, intercept):
        return np.asarray(coef, dtype=np.float64), float(intercept)


@dataclass(frozen=True)
class TargetScaling:
    """y -> (clip(y, lower, upper) - center) / half_width, into [-1, 1]."""

    lower: float
    upper: float
    center: float
    half_width: float

    @classmethod
    def from_bounds(cls, lower, upper, *, shift):
        if shift:
            center, half = 0.5 * (lower + upper), 0.5 * (upper - lower)
        else:
            center, half = 0.0, max(abs(lower), abs(upper))
        return cls(float(lower), float(upper), float(center), float(half))

    def transform(self, y):
        if self.half_width == 0:
            return np.zeros_like(y)
        return (np.clip(y, self.lower, self.upper) - self.center) / self.half_width

    def scaled_estimate(self, value, error):
        """An estimate of y's mean in y's units and its error (a standard deviation or a
        bound on it) in the scaled units of :meth:`transform`, unclipped (an estimate, not a
        record). Requires ``half_width > 0``."""
        return (value - self.center) / self.half_width, error / self.half_width
