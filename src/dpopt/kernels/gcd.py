"""Kernels of greedy coordinate descent: fused clipped gradient, greedy scores, margin update.

Clipped gradient (the DP-CD paper's coordinate-wise clipping, used by DP-GCD):

    g_j = (1/n) sum_i clip(l'(z_i; y_i) x_ij, C_j),   clip(v, c) = max(-c, min(c, v)).

Same values as :func:`dpopt.kernels.grad.coordclip_gradient` (up to the order of
the floating-point additions), but faster: the sums are compiled with
reassociation allowed
(``fastmath={"reassoc"}``, so the inner loops vectorize; no other fast-math
flag, so infinite thresholds keep their meaning), and the logistic
derivatives use NumPy's vectorized ``exp``. No per-sample gradient matrix is
formed (docs/design.md invariant 5). Large dense problems (n p >= 2^21) use
Numba's threads (``numba.set_num_threads`` / ``NUMBA_NUM_THREADS``; the
result does not depend on their number), as BLAS does for ``X.T @ v``.

Greedy scores (rule codes below) are computed in score space from the clipped
gradient; every score is (1 / sqrt(curv_j))-Lipschitz in g_j, which the DP-GCD
solver uses to bound their sensitivity (see :mod:`dpopt.solvers.dp_gcd`).
"""

import math

import numpy as np
from numba import njit, prange

from dpopt.kernels.grad import _coordclip_csc, csc_arrays, is_sparse
from dpopt.kernels.losses import LOGISTIC, loss_deriv, loss_derivs
from dpopt.kernels.prox import prox_scalar
from dpopt.kernels.vecmath import PARALLEL_MIN_SIZE, threads_for  # noqa: F401 (tests read it)

GS_L = 0  # |g_j + l2_j w_j| / sqrt(curv_j)                 (smooth penalty, Nutini et al. 2015)
GS_S = 1  # dist(-g_j, d psi_j(w_j)) / sqrt(curv_j)
GS_R = 2  # sqrt(curv_j) |prox_{psi_j / curv_j}(w_j - g_j / curv_j) - w_j|
GS_Q = 3  # sqrt(-2 min_a [g_j a + curv_j a^2 / 2 + psi_j(w_j + a) - psi_j(w_j)])

_FM = {"reassoc"}


@njit(cache=True, nogil=True, fastmath=_FM)
def _logistic_finish(t, e, y):
    # -y / (1 + exp(y z)) from t = y z and e = exp(-|t|), overflow free (as loss_deriv).
    n = t.shape[0]
    d = np.empty(n)
    for i in range(n):
        ei = e[i]
        s = ei / (1.0 + ei) if t[i] >= 0.0 else 1.0 / (1.0 + ei)
        d[i] = -y[i] * s
    return d


def fast_loss_derivs(y, loss_code, loss_param, z):
    """l'(z_i; y_i) for every sample; the logistic case uses NumPy's SIMD ``exp``
    (same formula as :func:`dpopt.kernels.losses.loss_deriv`, equal up to rounding)."""
    if loss_code == LOGISTIC:
        t = y * z
        return _logistic_finish(t, np.exp(-np.abs(t)), y)
    return loss_derivs(loss_code, z, y, loss_param)


@njit(cache=True, nogil=True, fastmath=_FM, inline="always")
def _columns4(X, d, clip, n_div, g, j):
    # Columns j..j+3 (or the last < 4) in one sweep over the rows: d[i] is loaded
    # once for four columns and the four sums are independent (about 1.5x faster
    # than one column at a time).
    n, p = X.shape
    if j + 4 <= p:
        c0, c1, c2, c3 = clip[j], clip[j + 1], clip[j + 2], clip[j + 3]
        a0 = a1 = a2 = a3 = 0.0
        for i in range(n):
            di = d[i]
            a0 += min(max(di * X[i, j], -c0), c0)
            a1 += min(max(di * X[i, j + 1], -c1), c1)
            a2 += min(max(di * X[i, j + 2], -c2), c2)
            a3 += min(max(di * X[i, j + 3], -c3), c3)
        g[j], g[j + 1], g[j + 2], g[j + 3] = a0 / n_div, a1 / n_div, a2 / n_div, a3 / n_div
    else:
        for jj in range(j, p):
            cj = clip[jj]
            acc = 0.0
            for i in range(n):
                acc += min(max(d[i] * X[i, jj], -cj), cj)
            g[jj] = acc / n_div


@njit(cache=True, nogil=True, fastmath=_FM)
def _clipgrad_dense(X, d, clip, n_div):
    g = np.empty(X.shape[1])
    for b in range((X.shape[1] + 3) // 4):
        _columns4(X, d, clip, n_div, g, 4 * b)
    return g


@njit(cache=True, nogil=True, fastmath=_FM, parallel=True)
def _clipgrad_dense_parallel(X, d, clip, n_div):
    # Same values as _clipgrad_dense bit for bit (each column is summed by one thread
    # in the same order); threads as numba.get_num_threads().
    g = np.empty(X.shape[1])
    for b in prange((X.shape[1] + 3) // 4):
        _columns4(X, d, clip, n_div, g, 4 * b)
    return g


def clipped_gradient(X, y, loss_code, loss_param, z, clip):
    """g_j = (1/n) sum_i clip(l'(z_i; y_i) x_ij, clip_j) for every j (X dense or CSC).

    One pass over the non-zeros: column-major for dense (Fortran) and CSC data,
    so every column is summed in registers (a gather of the derivatives for
    sparse data; measured faster than a row-major CSR scatter).
    """
    return clipped_gradient_from_derivs(X, fast_loss_derivs(y, loss_code, loss_param, z), clip)


def clipped_gradient_from_derivs(X, d, clip):
    """:func:`clipped_gradient` from the derivatives d_i = l'(z_i; y_i), kept up to
    date by :func:`add_column` (an update of w_j changes d only on column j's rows)."""
    n = float(X.shape[0])
    if is_sparse(X):
        return _coordclip_csc(*csc_arrays(X), d, clip, n)
    if threads_for(X.shape[0] * X.shape[1]) > 1:
        return _clipgrad_dense_parallel(X, d, clip, n)
    return _clipgrad_dense(X, d, clip, n)


@njit(cache=True, nogil=True, inline="always")
def _psi(u, l1, l2):
    return l1 * abs(u) + 0.5 * l2 * u * u


@njit(cache=True, nogil=True)
def greedy_scores(rule, cand, g, w, curv, l1, l2, lo, up):
    """Scores of the candidate coordinates ``cand`` for ``rule`` (codes above).

    ``curv_j`` > 0 is the curvature the step assumes (M_j / gamma, plus l2_j
    for GS-L); psi_j(u) = l1_j |u| + l2_j u^2 / 2 + indicator(lo_j <= u <= up_j).
    """
    k = cand.shape[0]
    out = np.empty(k)
    for m in range(k):
        j = cand[m]
        c = curv[j]
        gj = g[j]
        wj = w[j]
        if rule == GS_L:
            out[m] = abs(gj + l2[j] * wj) / math.sqrt(c)
        elif rule == GS_S:
            # subdifferential of psi_j at w_j: [a, b]
            base = l2[j] * wj
            if wj > 0.0:
                a = base + l1[j]
                b = a
            elif wj < 0.0:
                a = base - l1[j]
                b = a
            else:
                a = -l1[j]
                b = l1[j]
            if wj >= up[j]:
                b = np.inf
            if wj <= lo[j]:
                a = -np.inf
            x = -gj
            dist = 0.0
            if x < a:
                dist = a - x
            elif x > b:
                dist = x - b
            out[m] = dist / math.sqrt(c)
        else:
            t = 1.0 / c
            u = prox_scalar(wj - gj * t, t, l1[j], l2[j], lo[j], up[j])
            alpha = u - wj
            if rule == GS_R:
                out[m] = math.sqrt(c) * abs(alpha)
            else:
                v = gj * alpha + 0.5 * c * alpha * alpha + _psi(u, l1[j], l2[j]) \
                    - _psi(wj, l1[j], l2[j])
                out[m] = math.sqrt(max(-2.0 * v, 0.0))
    return out


@njit(cache=True, nogil=True)
def add_column_dense(X, z, j, delta, d, y, code, param):
    """z += delta * X[:, j]; refresh d_i = l'(z_i; y_i) where z changed (if d has n entries)."""
    refresh = d.shape[0] == z.shape[0]
    for i in range(X.shape[0]):
        x = X[i, j]
        if x != 0.0:
            z[i] += delta * x
            if refresh:
                d[i] = loss_deriv(code, z[i], y[i], param)


@njit(cache=True, nogil=True)
def add_column_csc(data, indices, indptr, z, j, delta, d, y, code, param):
    """As :func:`add_column_dense` for CSC X: O(nnz of column j)."""
    refresh = d.shape[0] == z.shape[0]
    for t in range(indptr[j], indptr[j + 1]):
        i = indices[t]
        z[i] += delta * data[t]
        if refresh:
            d[i] = loss_deriv(code, z[i], y[i], param)


_NO_DERIVS = np.empty(0)


def add_column(X, y, loss_code, loss_param, z, j, delta, d=None):
    """Margins update after w_j moved by ``delta``: O(n) dense, O(nnz of column) sparse
    (X dense or CSC).

    With ``d`` (the derivatives l'(z_i; y_i)) the changed entries are refreshed too.
    """
    d = _NO_DERIVS if d is None else d
    if is_sparse(X):
        add_column_csc(*csc_arrays(X), z, j, delta, d, y, loss_code, loss_param)
    else:
        add_column_dense(X, z, j, delta, d, y, loss_code, loss_param)
