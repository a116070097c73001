"""The default path's feature map (x_ij clipped to [lower_j, upper_j], minus offset_j, times
inv_j) and the column sums of its output, in one compiled pass each.

Written to give what NumPy gives for ``(np.clip(X, lower, upper) - offset) * inv`` (with
length-p arrays broadcast along the rows) and for its ``.sum(axis=0)``, value for value:

* ``np.clip`` is ``min(max(x, lo), hi)`` (:func:`_clip`). The one freedom is the sign of a
  zero on a tie (``max(-0.0, 0.0)``): NumPy's own answer there depends on whether an element
  goes through its vectorized loop or its scalar tail (so on the alignment of the arrays);
  ``-0.0 == 0.0``, and no sum, product or comparison downstream tells them apart;
* the subtraction and the multiplication are two IEEE operations (no fused multiply-add
  can form from ``(t - o) * s``, and no fast-math flag is set here);
* NumPy reduces ``axis=0`` of a C-ordered array with at least two columns row by row, the
  inner loop over the columns: ``acc_j += x_ij`` for i = 0, 1, ..., n - 1 in order. The
  column-sum kernel adds in the same order (callers use it only in that case).

The callers (:class:`dpopt.preprocessing.feature_maps.Scaling`) check equality against the
NumPy expression in the tests; the maps are post-processing of private bounds, so how they
are computed changes no privacy argument, only the time.
"""

import numpy as np
from numba import njit, prange

from dpopt.kernels.vecmath import threads_for


@njit(cache=True, nogil=True, inline="always")
def _clip(x, lo, hi):
    """min(max(x, lo), hi), NaN propagating like NumPy's clip."""
    if x != x:
        return x
    t = x if x > lo else lo
    return hi if hi < t else t


@njit(cache=True, nogil=True)
def clip_scale_rows(X, rows, lower, upper, offset, inv, out):
    """out[t, j] = (clip(X[i, j], lower[j], upper[j]) - offset[j]) * inv[j] with i = rows[t],
    row by row (C-ordered X and out)."""
    p = X.shape[1]
    for t in range(rows.shape[0]):
        i = rows[t]
        for j in range(p):
            out[t, j] = (_clip(X[i, j], lower[j], upper[j]) - offset[j]) * inv[j]
    return out


@njit(cache=True, nogil=True)
def clip_scale_columns(X, lower, upper, offset, inv, out):
    """The same map of all rows, column by column (Fortran-ordered X and out)."""
    n, p = X.shape
    for j in range(p):
        lo, hi, o, s = lower[j], upper[j], offset[j], inv[j]
        for i in range(n):
            out[i, j] = (_clip(X[i, j], lo, hi) - o) * s
    return out


@njit(cache=True, nogil=True, inline="always")
def _write_block(X, rows, lower, upper, offset, inv, out, t0, t1):
    """out[t, j] for the rows t0..t1 - 1, column after column (each a contiguous run)."""
    for j in range(X.shape[1]):
        lo, hi, o, s = lower[j], upper[j], offset[j], inv[j]
        for t in range(t0, t1):
            out[t, j] = (_clip(X[rows[t], j], lo, hi) - o) * s


@njit(cache=True, nogil=True)
def clip_scale_rows_to_fortran(X, rows, lower, upper, offset, inv, out, block):
    """The same map of the rows ``rows`` of a C-ordered X into a Fortran-ordered ``out``,
    ``block`` rows at a time (a block of X stays in cache while each of its columns is
    written as one contiguous run)."""
    for t0 in range(0, rows.shape[0], block):
        _write_block(X, rows, lower, upper, offset, inv, out, t0, min(t0 + block, rows.shape[0]))
    return out


@njit(cache=True, nogil=True, parallel=True)
def _clip_scale_blocks_parallel(X, rows, lower, upper, offset, inv, out, block):
    """:func:`clip_scale_rows_to_fortran` with the blocks on Numba's threads (each block
    writes its own rows of ``out``: the same values)."""
    n = rows.shape[0]
    for b in prange((n + block - 1) // block):
        _write_block(X, rows, lower, upper, offset, inv, out, b * block, min(b * block + block, n))
    return out


def clip_scale_to_fortran(X, rows, lower, upper, offset, inv, out, block):
    """:func:`clip_scale_rows_to_fortran`, on Numba's threads for a large pass."""
    if threads_for(rows.shape[0] * X.shape[1]) > 1:
        return _clip_scale_blocks_parallel(X, rows, lower, upper, offset, inv, out, block)
    return clip_scale_rows_to_fortran(X, rows, lower, upper, offset, inv, out, block)


@njit(cache=True, nogil=True)
def clip_scale_column_sums(X, rows, lower, upper, offset, inv):
    """sum over i in ``rows`` of (clip(X[i, j], lower[j], upper[j]) - offset[j]) * inv[j]
    for every j, adding row after row in the order of ``rows`` (C-ordered X: NumPy's order
    for ``axis=0`` of ``X[rows]``), without storing the map."""
    p = X.shape[1]
    acc = np.zeros(p)
    for t in range(rows.shape[0]):
        i = rows[t]
        for j in range(p):
            acc[j] += (_clip(X[i, j], lower[j], upper[j]) - offset[j]) * inv[j]
    return acc
