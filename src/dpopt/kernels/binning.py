"""Exact histogram counts of many columns on a public sorted grid, in one pass over the data.

The default path's feature-bound release (Gaussian noise on per-feature histograms on the
public signed log grid of :mod:`dpopt.preprocessing`) needs, for every value v of every
column, the bin

    zero + 1 + k   if v > 0,      zero - 1 - k   if v < 0,      zero   otherwise,

with k = #{edges e_t < |v|} (``np.searchsorted(edges, |v|, side="left")``). A binary
search per value costs about log2(53) ~ 6 unpredictable comparisons; here k is found
arithmetically and then checked against the same edges, so the counts are exactly those
of the search (the release's privacy argument is about the counts, which do not change).

Lookup table. For a non-negative double the bit pattern is increasing in the value, so
its top 16 bits (sign, 11 exponent bits, 4 mantissa bits) split [0, inf] into cells
[low_c, low_{c+1}) of relative width at most 1/16. The table covers the cells from the one
holding the first edge to the one holding the last (a few hundred entries for the default
grid: it stays in the L1 cache); ``table[c - first]`` is the number of edges < low_c, a
lower bound of k for every value of cell c, and the cells outside are clamped to the ends
(below the first edge's cell the count is 0, above the last one's the last entry is still a
lower bound). The kernel then advances while ``edges[k] < |v|``, a fixed number of times
(the most edges any cell holds: one for the default grid, whose edges are 10^(1/4) ~ 1.78
apart), which ends on the exact count. ``edges`` must be sorted, positive and finite; NaN
and infinity are refused by the callers before counting (a NaN would land in the zero bin,
as ``np.where`` puts it).
"""

import numpy as np
from numba import njit, prange

from dpopt.kernels.clipscale import _clip
from dpopt.kernels.vecmath import _float_to_bits as _float_bits
from dpopt.kernels.vecmath import threads_for

#: Right shift of the bits of |v| giving its cell (16 - 1 sign bit = 15 bits of key).
_CELL_SHIFT = 48


def grid_lookup(edges):
    """``(padded, table, first, steps)`` for the kernels: the sorted positive finite
    ``edges`` followed by +inf; ``table[c - first]`` = #{edges < smallest double of cell c}
    for the cells c = first, ..., of the first to the last edge (module docstring);
    ``steps`` the most edges a cell holds (the clamped ends included), so that ``steps``
    advances from the table always reach the exact count."""
    edges = np.asarray(edges, dtype=np.float64)
    if edges.ndim != 1 or edges.size < 1 or not (np.all(np.isfinite(edges)) and edges[0] > 0
                                                  and np.all(np.diff(edges) > 0)):
        raise ValueError("edges must be a sorted 1-d array of positive finite numbers")
    first, last = (edges[[0, -1]].view(np.int64) >> _CELL_SHIFT).tolist()
    lows = (np.arange(first, last + 1, dtype=np.int64) << _CELL_SHIFT).view(np.float64)
    table = np.searchsorted(edges, lows, side="left").astype(np.int64)
    steps = int(max(np.max(np.diff(table), initial=0), edges.size - table[-1]))
    return np.append(edges, np.inf), table, int(first), max(steps, 1)


@njit(cache=True, nogil=True, inline="always")
def _bin(v, edges, table, first, zero, steps):
    """The bin of v (module docstring), without branches: the table's lower bound of the
    count of edges below |v| (its cell clamped to the table), advanced ``steps`` times by
    one where the next edge is still below |v| (``edges`` padded with +inf, so the count
    stops at the number of edges)."""
    a = abs(v)
    cell = min(max((_float_bits(a) >> _CELL_SHIFT) - first, 0), table.shape[0] - 1)
    k = table[cell]
    for _ in range(steps):
        k += edges[k] < a
    sign = np.int64(v > 0.0) - np.int64(v < 0.0)
    return zero + sign * (1 + k)


@njit(cache=True, nogil=True, inline="always")
def _count_rows(counts, X, rows, t0, t1, columns, edges, table, first, zero, steps):
    """Add the bins of the rows ``rows[t0:t1]`` of the columns ``columns`` to ``counts``."""
    for t in range(t0, t1):
        i = rows[t]
        for r in range(columns.shape[0]):
            counts[r, _bin(X[i, columns[r]], edges, table, first, zero, steps)] += 1


@njit(cache=True, nogil=True, inline="always")
def _count_mapped_rows(counts, X, rows, t0, t1, lower, upper, offset, inv, columns, edges,
                       table, first, zero, steps):
    """:func:`_count_rows` of the map (clip(X[i, j], lower[j], upper[j]) - offset[j]) * inv[j]."""
    for t in range(t0, t1):
        i = rows[t]
        for r in range(columns.shape[0]):
            j = columns[r]
            v = (_clip(X[i, j], lower[j], upper[j]) - offset[j]) * inv[j]
            counts[r, _bin(v, edges, table, first, zero, steps)] += 1


@njit(cache=True, nogil=True)
def dense_counts_by_rows(X, rows, columns, edges, table, first, zero, steps, n_bins):
    """Counts (len(columns), n_bins) of the columns ``columns`` over the rows ``rows`` of a
    C-ordered X, read row by row (contiguous)."""
    counts = np.zeros((columns.shape[0], n_bins), dtype=np.int64)
    _count_rows(counts, X, rows, 0, rows.shape[0], columns, edges, table, first, zero, steps)
    return counts


@njit(cache=True, nogil=True)
def clip_scale_counts_by_rows(X, rows, lower, upper, offset, inv, columns, edges, table, first,
                              zero, steps, n_bins):
    """Counts of the columns ``columns`` of the map (clip(X[i, j], lower[j], upper[j]) -
    offset[j]) * inv[j] (:mod:`dpopt.kernels.clipscale`, the same two IEEE operations, so
    the same values and bins) over the rows ``rows`` of a C-ordered X, without storing the
    map: the counts of ``dense_counts_by_rows`` on its output."""
    counts = np.zeros((columns.shape[0], n_bins), dtype=np.int64)
    _count_mapped_rows(counts, X, rows, 0, rows.shape[0], lower, upper, offset, inv, columns,
                       edges, table, first, zero, steps)
    return counts


@njit(cache=True, nogil=True, parallel=True)
def _dense_counts_in_chunks(X, rows, columns, edges, table, first, zero, steps, n_bins,
                            n_chunks):
    """:func:`dense_counts_by_rows` on ``n_chunks`` consecutive runs of ``rows`` at once
    (Numba's threads), each into its own counts, then added: integers, so exactly the same
    counts whatever the number of threads."""
    n, size = rows.shape[0], (rows.shape[0] + n_chunks - 1) // n_chunks
    parts = np.zeros((n_chunks, columns.shape[0], n_bins), dtype=np.int64)
    for c in prange(n_chunks):
        _count_rows(parts[c], X, rows, c * size, min(n, (c + 1) * size), columns, edges, table,
                    first, zero, steps)
    return parts.sum(axis=0)


@njit(cache=True, nogil=True, parallel=True)
def _clip_scale_counts_in_chunks(X, rows, lower, upper, offset, inv, columns, edges, table,
                                 first, zero, steps, n_bins, n_chunks):
    """:func:`clip_scale_counts_by_rows` in chunks, as :func:`_dense_counts_in_chunks`."""
    n, size = rows.shape[0], (rows.shape[0] + n_chunks - 1) // n_chunks
    parts = np.zeros((n_chunks, columns.shape[0], n_bins), dtype=np.int64)
    for c in prange(n_chunks):
        _count_mapped_rows(parts[c], X, rows, c * size, min(n, (c + 1) * size), lower, upper,
                           offset, inv, columns, edges, table, first, zero, steps)
    return parts.sum(axis=0)


def _chunks(rows, columns):
    """Number of row chunks for a counting pass: Numba's threads on a large pass, else 1."""
    return threads_for(rows.shape[0] * columns.shape[0])


def counts_by_rows(X, rows, columns, edges, table, first, zero, steps, n_bins):
    """:func:`dense_counts_by_rows`, on Numba's threads for a large pass (same counts)."""
    k = _chunks(rows, columns)
    if k == 1:
        return dense_counts_by_rows(X, rows, columns, edges, table, first, zero, steps, n_bins)
    return _dense_counts_in_chunks(X, rows, columns, edges, table, first, zero, steps, n_bins, k)


def clip_scale_counts(X, rows, lower, upper, offset, inv, columns, edges, table, first, zero,
                      steps, n_bins):
    """:func:`clip_scale_counts_by_rows`, on Numba's threads for a large pass (same counts)."""
    k = _chunks(rows, columns)
    args = (X, rows, lower, upper, offset, inv, columns, edges, table, first, zero, steps,
            n_bins)
    return (clip_scale_counts_by_rows(*args) if k == 1
            else _clip_scale_counts_in_chunks(*args, k))


@njit(cache=True, nogil=True)
def dense_counts_by_columns(X, columns, edges, table, first, zero, steps, n_bins):
    """Counts of the columns ``columns`` of an X of any other layout, column by column."""
    counts = np.zeros((columns.shape[0], n_bins), dtype=np.int64)
    for r in range(columns.shape[0]):
        j = columns[r]
        for i in range(X.shape[0]):
            counts[r, _bin(X[i, j], edges, table, first, zero, steps)] += 1
    return counts


@njit(cache=True, nogil=True)
def csc_counts(data, indptr, n_rows, columns, edges, table, first, zero, steps, n_bins):
    """Counts of the columns ``columns`` of a CSC matrix: its stored values, and the
    implicit zeros (n_rows - stored) in the zero bin."""
    counts = np.zeros((columns.shape[0], n_bins), dtype=np.int64)
    for r in range(columns.shape[0]):
        j = columns[r]
        start, stop = indptr[j], indptr[j + 1]
        counts[r, zero] += n_rows - (stop - start)
        for t in range(start, stop):
            counts[r, _bin(data[t], edges, table, first, zero, steps)] += 1
    return counts


#: Bits of +inf: a double's bits without the sign are >= these exactly when it is not finite.
INF_BITS = 0x7FF0000000000000


@njit(cache=True, nogil=True)
def all_finite_rows(X, rows):
    """Whether every value of the rows ``rows`` of X is finite: the largest of the values'
    bits without the sign (an integer maximum, which vectorizes) is below those of +inf."""
    top = 0
    for t in range(rows.shape[0]):
        i = rows[t]
        for j in range(X.shape[1]):
            top = max(top, _float_bits(X[i, j]) & 0x7FFFFFFFFFFFFFFF)
    return top < INF_BITS


# ---------------------------------------------------------------------------
# values outside {0, 1} (the default path's indicator test, dpopt.preprocessing._indicators)


@njit(cache=True, nogil=True, inline="always")
def _count_other_rows(counts, X, rows, start, stop, columns):
    """Add to ``counts[k]`` the rows ``rows[start:stop]`` whose value in ``columns[k]`` is
    neither 0 nor 1."""
    for r in range(start, stop):
        i = rows[r]
        for k in range(columns.shape[0]):
            v = X[i, columns[k]]
            if v != 0.0 and v != 1.0:
                counts[k] += 1


@njit(cache=True, nogil=True)
def other_counts_by_rows(X, rows, columns):
    """#{r : X[rows[r], columns[k]] not in {0, 1}} for every k, in one pass over the rows."""
    counts = np.zeros(columns.shape[0], dtype=np.int64)
    _count_other_rows(counts, X, rows, 0, rows.shape[0], columns)
    return counts


@njit(cache=True, nogil=True, parallel=True)
def _other_counts_in_chunks(X, rows, columns, n_chunks):
    """:func:`other_counts_by_rows` on ``n_chunks`` consecutive runs of ``rows`` on Numba's
    threads, then added: integers, the same counts whatever the number of threads."""
    n, size = rows.shape[0], (rows.shape[0] + n_chunks - 1) // n_chunks
    parts = np.zeros((n_chunks, columns.shape[0]), dtype=np.int64)
    for c in prange(n_chunks):
        _count_other_rows(parts[c], X, rows, c * size, min(n, (c + 1) * size), columns)
    return parts.sum(axis=0)


def other_counts(X, rows, columns):
    """:func:`other_counts_by_rows`, on Numba's threads for a large pass (same counts)."""
    k = _chunks(rows, columns)
    return (other_counts_by_rows(X, rows, columns) if k == 1
            else _other_counts_in_chunks(X, rows, columns, k))
