"""Proximal coordinate-descent steps with per-sample coordinate clipping.

One step on coordinate j (DP-CD paper, Algorithm 1 line 7 with the clipped
gradient of Section 5.1):

    g_j   = (1/n) sum_i clip(l'(z_i; y_i) x_ij, c_j) + sigma_j * noise_k
    w_j  <- prox_{step_j psi_j}(w_j - step_j g_j)
    z    <- z + (w_j_new - w_j_old) X[:, j]          (margins kept up to date)

The coordinates and standard-normal draws are passed in (drawn by the solver
from its Generator), so the kernel is deterministic. With clip = inf and
sigma = 0 this is plain (non-private) proximal coordinate descent.
Cost: O(n) per dense step, O(nnz of column j) per sparse step.
"""

import numpy as np
from numba import njit

from dpopt.kernels.losses import loss_deriv
from dpopt.problem.penalties import prox_scalar


@njit(cache=True, nogil=True)
def cd_steps_dense(X, y, z, w, code, param, coords, noise, step, clip, sigma, l1, l2, lo, up):
    n = X.shape[0]
    for k in range(coords.shape[0]):
        j = coords[k]
        cj = clip[j]
        g = 0.0
        for i in range(n):
            d = loss_deriv(code, z[i], y[i], param) * X[i, j]
            g += min(max(d, -cj), cj)
        g = g / n + sigma[j] * noise[k]
        old = w[j]
        new = prox_scalar(old - step[j] * g, step[j], l1[j], l2[j], lo[j], up[j])
        if new != old:
            w[j] = new
            delta = new - old
            for i in range(n):
                z[i] += delta * X[i, j]


@njit(cache=True, nogil=True)
def cd_steps_sparse(data, indices, indptr, n, y, z, w, code, param, coords, noise, step, clip,
                    sigma, l1, l2, lo, up):
    for k in range(coords.shape[0]):
        j = coords[k]
        cj = clip[j]
        g = 0.0
        for t in range(indptr[j], indptr[j + 1]):
            i = indices[t]
            d = loss_deriv(code, z[i], y[i], param) * data[t]
            g += min(max(d, -cj), cj)
        g = g / n + sigma[j] * noise[k]
        old = w[j]
        new = prox_scalar(old - step[j] * g, step[j], l1[j], l2[j], lo[j], up[j])
        if new != old:
            w[j] = new
            delta = new - old
            for t in range(indptr[j], indptr[j + 1]):
                z[indices[t]] += delta * data[t]


def cd_steps(problem, z, w, coords, noise, step, clip, sigma):
    """Run the steps ``coords`` on ``problem`` in place (updates ``w`` and margins ``z``)."""
    pen = problem.penalty
    coords = np.ascontiguousarray(coords, dtype=np.int64)
    if problem.is_sparse:
        X = problem.X
        cd_steps_sparse(X.data, X.indices, X.indptr, problem.n_samples, problem.y, z, w,
                        problem.loss.code, problem.loss.param, coords, noise, step, clip, sigma,
                        pen.l1, pen.l2, pen.lo, pen.up)
    else:
        cd_steps_dense(problem.X, problem.y, z, w, problem.loss.code, problem.loss.param, coords,
                       noise, step, clip, sigma, pen.l1, pen.l2, pen.lo, pen.up)
