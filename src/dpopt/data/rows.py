"""A subset of the rows of a dense matrix that is not copied.

The default path's held-out selection (:mod:`dpopt.pipeline.selection`) splits the records
into a training and a validation part. Gathering the training rows ``X[train]`` copies most
of X into freshly allocated memory before anything is computed on it; the compiled passes of
the scaling (:mod:`dpopt.kernels.binning`, :mod:`dpopt.kernels.clipscale`) instead read the
rows of a :class:`RowSubset` in place, in the order of ``rows``, and compute exactly what
they compute on the copy. Any other consumer sees the copy: ``np.asarray(subset)`` is
``X[rows]``, and indexing a subset indexes that copy.
"""

from __future__ import annotations

import numpy as np


class RowSubset:
    """The rows ``rows`` of the C-ordered float64 matrix ``base``, in that order, uncopied."""

    ndim = 2

    def __init__(self, base, rows):
        if not (isinstance(base, np.ndarray) and base.ndim == 2 and base.dtype == np.float64
                and base.flags.c_contiguous):
            raise ValueError("RowSubset needs a C-ordered float64 2-d array")
        self.base = base
        self.rows = np.ascontiguousarray(rows, dtype=np.int64)
        if self.rows.ndim != 1 or (self.rows.size and not (
                0 <= self.rows.min() and self.rows.max() < base.shape[0])):
            raise ValueError(f"rows must be a 1-d array of row indices in [0, {base.shape[0]})")
        self.shape = (self.rows.shape[0], base.shape[1])
        self.dtype = base.dtype

    @classmethod
    def of(cls, X, rows):
        """A :class:`RowSubset` of X when X is a C-ordered float64 array, else ``X[rows]``."""
        if (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64
                and X.flags.c_contiguous):
            return cls(X, rows)
        return X[rows]

    def __len__(self):
        return self.shape[0]

    def __array__(self, dtype=None, copy=None):
        out = self.base[self.rows]
        return out if dtype is None else out.astype(dtype, copy=False)

    def __getitem__(self, key):
        return np.asarray(self)[key]


def rows_of(X):
    """(C-ordered float64 array, int64 row indices) read by the compiled passes: a
    :class:`RowSubset`'s base and rows, or a C-ordered float64 X and all its rows; None for
    any other X."""
    if isinstance(X, RowSubset):
        return X.base, X.rows
    if (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64
            and X.flags.c_contiguous):
        return X, np.arange(X.shape[0], dtype=np.int64)
    return None
