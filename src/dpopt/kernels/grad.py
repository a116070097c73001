"""Full gradients of the average loss from clipped per-sample contributions.

For a linear model the per-sample gradient is l'(z_i; y_i) x_i, so no
per-sample gradient matrix is ever formed (invariant 5):

* coordinate-wise clipping (DP-CD/DP-GCD, Section 5.1 of the DP-CD paper):
  g_j = (1/n) sum_i clip(l'(z_i) x_ij, C_j); one pass over the non-zeros.
* L2 clipping (DP-SGD/DP-GD): the per-sample norm is |l'(z_i)| ||x_i||, so
  g = X^T (l'(z) * min(1, C / (|l'(z)| ||x_i||))) / n: a scalar weight per
  sample and one BLAS product.

The kernels inline ``vexp`` / ``logistic_deriv`` from :mod:`dpopt.kernels.vecmath`;
Numba's cache does not see edits there, so clear ``__pycache__`` after changing them
(last change: vexp at degree 12 with add-and-subtract rounding).
"""

import functools
import math

import numpy as np
from numba import njit, prange

from dpopt.kernels.losses import LOGISTIC, loss_deriv, loss_derivs
from dpopt.kernels.vecmath import FASTMATH, logistic_deriv


@njit(cache=True, nogil=True, parallel=False)
def _coordclip_dense(X, d, clip, n_div):
    n, p = X.shape
    g = np.empty(p)
    for j in prange(p):
        cj = clip[j]
        acc = 0.0
        for i in range(n):
            v = d[i] * X[i, j]
            acc += min(max(v, -cj), cj)
        g[j] = acc / n_div
    return g


@njit(cache=True, nogil=True)
def _coordclip_csc(data, indices, indptr, d, clip, n_div):
    p = indptr.shape[0] - 1
    g = np.empty(p)
    for j in range(p):
        cj = clip[j]
        acc = 0.0
        for t in range(indptr[j], indptr[j + 1]):
            v = d[indices[t]] * data[t]
            acc += min(max(v, -cj), cj)
        g[j] = acc / n_div
    return g


def is_sparse(X):
    """False for a dense ndarray, else X must be a scipy matrix (:func:`csc_arrays` and
    :func:`csr_arrays` check its format). Cheaper than ``scipy.sparse.issparse`` (0.1 against
    0.35 us), which counts in the per-iteration calls of DP-GCD."""
    return not isinstance(X, np.ndarray)


def csc_arrays(X):
    """``(data, indices, indptr)`` of a CSC matrix ``X`` (the column kernels' sparse format)."""
    if getattr(X, "format", None) != "csc":
        _wrong_format(X, "CSC", "column")
    return X.data, X.indices, X.indptr


def csr_arrays(X):
    """``(data, indices, indptr)`` of a CSR matrix ``X`` (the row kernels' sparse format)."""
    if getattr(X, "format", None) != "csr":
        _wrong_format(X, "CSR", "row")
    return X.data, X.indices, X.indptr


def _wrong_format(X, fmt, kind):
    got = getattr(X, "format", type(X).__name__)
    raise ValueError(f"X must be a dense ndarray or a {fmt} matrix for a {kind} kernel, got {got}")


def coordclip_gradient(X, y, loss_code, loss_param, z, clip):
    """g_j = (1/n) sum_i clip(l'(z_i; y_i) x_ij, clip_j) for every j (X dense or CSC)."""
    d = loss_derivs(loss_code, z, y, loss_param)
    n = float(X.shape[0])
    if is_sparse(X):
        return _coordclip_csc(*csc_arrays(X), d, clip, n)
    return _coordclip_dense(X, d, clip, n)


def l2clip_weights(y, row_norms, loss_code, loss_param, z, clip):
    """Per-sample weights l'(z_i) min(1, clip / (|l'(z_i)| ||x_i||)), ``row_norms`` = ||x_i||."""
    d = loss_derivs(loss_code, z, y, loss_param)
    scale = np.abs(d) * row_norms
    # clip / scale is only used where scale > clip: a zero or tiny scale (0/0, overflow) is not
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        factor = np.where(scale > clip, clip / scale, 1.0)
    return d * factor


def l2clip_gradient(X, y, row_norms, loss_code, loss_param, z, clip):
    """(1/n) sum_i clip_{L2}(l'(z_i) x_i, clip) (X dense or sparse, any layout)."""
    v = l2clip_weights(y, row_norms, loss_code, loss_param, z, clip)
    return np.asarray(X.T @ v).ravel() / X.shape[0]


# ---------------------------------------------------------------------------
# Row-major fused kernels: margins, clipping and gradient in one sweep over X.
#
# A full clipped gradient needs z = X w, then the per-sample weights, then
# X^T v: two sweeps over a column-major X. With the rows contiguous (C-ordered
# dense or CSR), row i is read once: z_i = x_i . w, its clipped contribution
# is added to g while x_i is still in L1. This is the layout DP-GD and DP-SGD
# want (DP-CD wants columns): they pass ``Problem.X_rows``, the one row-major
# copy per problem (built on first use, freed with the problem).

_OPTS = dict(cache=True, nogil=True, fastmath=FASTMATH, error_model="numpy")


@njit(inline="always", **_OPTS)
def _deriv(code, z, y, param):
    if code == LOGISTIC:
        return logistic_deriv(z, y)
    return loss_deriv(code, z, y, param)


@njit(inline="always", **_OPTS)
def _l2_weight(d, norm, clip):
    # d * min(1, clip / (|d| norm)): the per-sample gradient d x_i clipped to L2 norm clip
    s = abs(d) * norm
    if s > clip:
        return d * (clip / s)
    return d


@njit(**_OPTS)
def _rows_gradient_dense(Xr, y, w, code, param, rows, l2mode, clip, clips, norms, g):
    """g += sum over i in rows of the clipped per-sample gradients (l2mode: L2 clipping
    to ``clip`` with row norms ``norms``; else coordinate-wise clipping to ``clips``).

    Rows go four at a time: the four dot products share the loads of w, and g is
    read and written once per four rows.
    """
    p = Xr.shape[1]
    m = rows.shape[0]
    for t in range(0, m - 3, 4):
        i0, i1, i2, i3 = rows[t], rows[t + 1], rows[t + 2], rows[t + 3]
        z0 = z1 = z2 = z3 = 0.0
        for j in range(p):
            wj = w[j]
            z0 += Xr[i0, j] * wj
            z1 += Xr[i1, j] * wj
            z2 += Xr[i2, j] * wj
            z3 += Xr[i3, j] * wj
        if l2mode:
            d0 = _l2_weight(_deriv(code, z0, y[i0], param), norms[i0], clip)
            d1 = _l2_weight(_deriv(code, z1, y[i1], param), norms[i1], clip)
            d2 = _l2_weight(_deriv(code, z2, y[i2], param), norms[i2], clip)
            d3 = _l2_weight(_deriv(code, z3, y[i3], param), norms[i3], clip)
            for j in range(p):
                g[j] += d0 * Xr[i0, j] + d1 * Xr[i1, j] + d2 * Xr[i2, j] + d3 * Xr[i3, j]
        else:
            d0 = _deriv(code, z0, y[i0], param)
            d1 = _deriv(code, z1, y[i1], param)
            d2 = _deriv(code, z2, y[i2], param)
            d3 = _deriv(code, z3, y[i3], param)
            for j in range(p):
                c = clips[j]
                g[j] += (min(max(d0 * Xr[i0, j], -c), c) + min(max(d1 * Xr[i1, j], -c), c)
                         + min(max(d2 * Xr[i2, j], -c), c) + min(max(d3 * Xr[i3, j], -c), c))
    for t in range(m - m % 4, m):
        i = rows[t]
        zi = 0.0
        for j in range(p):
            zi += Xr[i, j] * w[j]
        d = _deriv(code, zi, y[i], param)
        if l2mode:
            d = _l2_weight(d, norms[i], clip)
            for j in range(p):
                g[j] += d * Xr[i, j]
        else:
            for j in range(p):
                g[j] += min(max(d * Xr[i, j], -clips[j]), clips[j])


@njit(**_OPTS)
def _rows_gradient_csr(data, indices, indptr, y, w, code, param, rows, l2mode, clip, clips, norms,
                       g):
    for t in range(rows.shape[0]):
        i = rows[t]
        zi = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            zi += data[k] * w[indices[k]]
        d = _deriv(code, zi, y[i], param)
        if l2mode:
            d = _l2_weight(d, norms[i], clip)
            for k in range(indptr[i], indptr[i + 1]):
                g[indices[k]] += d * data[k]
        else:
            for k in range(indptr[i], indptr[i + 1]):
                c = clips[indices[k]]
                g[indices[k]] += min(max(d * data[k], -c), c)


def rows_gradient(X_rows, y, loss_code, loss_param, w, rows, *, clip=None, clips=None,
                  row_norms=None, out=None):
    """Sum over ``rows`` (int64 indices) of per-sample gradients at ``w``, each clipped to
    L2 norm ``clip`` (with ``row_norms`` = ||x_i||) or coordinate-wise to ``clips``; one
    sweep over those rows of ``X_rows`` (C-ordered dense or CSR).

    Returns the SUM (divide by n or the batch size yourself), added to ``out`` if given.
    """
    if (clip is None) == (clips is None):
        raise ValueError("give exactly one of clip (L2) or clips (coordinate-wise)")
    l2mode = clip is not None
    if l2mode and row_norms is None:
        raise ValueError("row_norms are needed for L2 clipping (clip)")
    clip_val = float(clip) if l2mode else 0.0
    clip_arr = np.zeros(0) if l2mode else np.ascontiguousarray(clips, dtype=np.float64)
    norms = row_norms if l2mode else np.zeros(0)
    g = np.zeros(X_rows.shape[1]) if out is None else out
    w = np.ascontiguousarray(w, dtype=np.float64)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    if is_sparse(X_rows):
        _rows_gradient_csr(*csr_arrays(X_rows), y, w, loss_code, loss_param, rows, l2mode,
                           clip_val, clip_arr, norms, g)
    else:
        _rows_gradient_dense(X_rows, y, w, loss_code, loss_param, rows, l2mode, clip_val,
                             clip_arr, norms, g)
    return g


def full_gradient(X_rows, y, loss_code, loss_param, w, *, clip=None, clips=None,
                  row_norms=None):
    """(1/n) sum_i of clipped per-sample gradients at ``w`` (margins computed on the fly):
    the fused, single-sweep equivalent of ``l2clip_gradient(X, y, row_norms, ..., X @ w,
    clip)`` or ``coordclip_gradient(X, y, ..., X @ w, clips)``."""
    n = X_rows.shape[0]
    return rows_gradient(X_rows, y, loss_code, loss_param, w, _all_rows(n), clip=clip,
                         clips=clips, row_norms=row_norms) / n


@functools.lru_cache(maxsize=8)
def _all_rows(n):
    out = np.arange(n, dtype=np.int64)
    out.setflags(write=False)
    return out


# ---------------------------------------------------------------------------
# Chunks of rows as they come from a file or a Dask array (dpopt.data.chunked): the feature
# block only (float32 or float64, rows contiguous), the intercept's constant 1 implicit, the
# row norms computed in the same sweep as the margins. No copy of the chunk is made.


@njit(**_OPTS)
def _chunk_rows_gradient(X, y, w, code, param, rows, l2mode, clip, clips, intercept, g):
    """g += sum over i in rows of the per-sample gradients of the rows (x_i, 1 if intercept),
    clipped to L2 norm ``clip`` (l2mode) or coordinate-wise to ``clips``."""
    p = X.shape[1]
    for t in range(rows.shape[0]):
        i = rows[t]
        z = 0.0
        sq = 0.0
        for j in range(p):
            v = np.float64(X[i, j])
            z += v * w[j]
            sq += v * v
        if intercept:
            z += w[p]
            sq += 1.0
        d = _deriv(code, z, y[i], param)
        if l2mode:
            d = _l2_weight(d, math.sqrt(sq), clip)
            for j in range(p):
                g[j] += d * np.float64(X[i, j])
            if intercept:
                g[p] += d
        else:
            for j in range(p):
                g[j] += min(max(d * np.float64(X[i, j]), -clips[j]), clips[j])
            if intercept:
                g[p] += min(max(d, -clips[p]), clips[p])


def chunk_gradient_sum(X, y, w, loss_code, loss_param, rows=None, *, clip=None, clips=None,
                       fit_intercept=False):
    """Sum over ``rows`` (default all) of the clipped per-sample gradients of a chunk of rows
    ``X`` (features only; with ``fit_intercept`` w and the result have p + 1 entries, the
    last the intercept's): L2 clipping to ``clip`` or coordinate-wise to ``clips``. The same
    sum as :func:`rows_gradient` on the rows (x_i, 1), in one sweep."""
    if (clip is None) == (clips is None):
        raise ValueError("give exactly one of clip (L2) or clips (coordinate-wise)")
    X = np.asarray(X)
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    X = np.ascontiguousarray(X)
    rows = np.arange(X.shape[0], dtype=np.int64) if rows is None else \
        np.ascontiguousarray(rows, dtype=np.int64)
    l2mode = clip is not None
    g = np.zeros(X.shape[1] + int(fit_intercept))
    _chunk_rows_gradient(X, np.ascontiguousarray(y, dtype=np.float64),
                         np.ascontiguousarray(w, dtype=np.float64), loss_code, loss_param, rows,
                         l2mode, float(clip) if l2mode else 0.0,
                         np.zeros(0) if l2mode else np.ascontiguousarray(clips, dtype=np.float64),
                         bool(fit_intercept), g)
    return g
