"""Full gradients of the average loss from clipped per-sample contributions.

For a linear model the per-sample gradient is l'(z_i; y_i) x_i, so no
per-sample gradient matrix is ever formed (invariant 5):

* coordinate-wise clipping (DP-CD/DP-GCD, Section 5.1 of the DP-CD paper):
  g_j = (1/n) sum_i clip(l'(z_i) x_ij, C_j); one pass over the non-zeros.
* L2 clipping (DP-SGD/DP-GD): the per-sample norm is |l'(z_i)| ||x_i||, so
  g = X^T (l'(z) * min(1, C / (|l'(z)| ||x_i||))) / n: a scalar weight per
  sample and one BLAS product.
"""

import numpy as np
from numba import njit, prange

from dpopt.kernels.losses import loss_derivs


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


def coordclip_gradient(problem, z, clip):
    """g_j = (1/n) sum_i clip(l'(z_i; y_i) x_ij, clip_j) for every j."""
    d = loss_derivs(problem.loss.code, z, problem.y, problem.loss.param)
    n = float(problem.n_samples)
    if problem.is_sparse:
        X = problem.X
        return _coordclip_csc(X.data, X.indices, X.indptr, d, clip, n)
    return _coordclip_dense(problem.X, d, clip, n)


def l2clip_weights(problem, z, clip, rows=None):
    """Per-sample weights l'(z_i) min(1, clip / (|l'(z_i)| ||x_i||)) (rows optional)."""
    y = problem.y if rows is None else problem.y[rows]
    norms = problem.row_norms if rows is None else problem.row_norms[rows]
    d = loss_derivs(problem.loss.code, z, y, problem.loss.param)
    scale = np.abs(d) * norms
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(scale > clip, clip / scale, 1.0)
    return d * factor


def l2clip_gradient(problem, z, clip):
    """(1/n) sum_i clip_{L2}(l'(z_i) x_i, clip)."""
    v = l2clip_weights(problem, z, clip)
    return np.asarray(problem.X.T @ v).ravel() / problem.n_samples
