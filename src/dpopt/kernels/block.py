"""Proximal block coordinate steps with per-sample coordinate clipping.

One step on a block S (DP-RBCD / DP-SkGD with the step matrix Gamma C of
the paper, written directly as the effective step gamma / v_j on S):

    g_j   = (1/n) sum_i clip(l'(z_i; y_i) x_ij, c_j) + sigma_k * noise_t   for j in S
    w_j  <- prox_{gamma_j psi_j}(w_j - gamma_j g_j),  gamma_j = step / (scale_k M_j)
    z    <- z + X_S (w_S_new - w_S_old)                  (margins kept up to date)

Every g_j of a block is computed from the margins *before* the step (a block
gradient step, not a Gauss-Seidel sweep); the margins move once, after the
whole block. Blocks are given in CSR style: step k updates the coordinates
``indices[indptr[k]:indptr[k+1]]`` (distinct) with the standard normals
``noise[indptr[k]:indptr[k+1]]``, noise std ``sigma[k]`` and ESO factor
``scale[k]``. An empty block is a no-op. When ``incremental[k]`` is false the
margins are *not* updated after step k: the caller recomputes them (the solver
does this after a full-set step, with one BLAS product).

Singleton and full-set passes are NOT run here: the DP-RBCD solver sends them
to :func:`dpopt.kernels.cd.cd_steps` and to DP-GD's fused gradient
(:func:`dpopt.kernels.grad.full_gradient`), the kernels of the solvers they
reduce to, so that the special cases agree bit for bit. On a singleton this
kernel gives the same values up to rounding (those kernels use vectorized,
re-associated sums).
Cost per step: O(n |S|) dense (one loss derivative per sample, shared by the
block), O(nnz of the columns of S) sparse (derivatives computed per non-zero, or
once per sample when the block's columns hold more than n non-zeros).
"""

import numpy as np
from numba import njit

from dpopt.kernels.grad import csc_arrays, is_sparse
from dpopt.kernels.losses import loss_deriv
from dpopt.kernels.prox import prox_scalar


@njit(cache=True, nogil=True, inline="always")
def _gamma(step, scale, mj):
    if mj > 0.0:
        return step / (scale * mj)
    return 0.0


@njit(cache=True, nogil=True)
def block_steps_dense(X, y, z, w, code, param, indptr, indices, noise, sigma, scale, incremental,
                      step, M, clip, l1, l2, lo, up):
    n = X.shape[0]
    d = np.empty(n)
    delta = np.empty(indices.shape[0])
    for k in range(indptr.shape[0] - 1):
        a, b = indptr[k], indptr[k + 1]
        if b - a > 1:
            for i in range(n):
                d[i] = loss_deriv(code, z[i], y[i], param)
        for t in range(a, b):
            j = indices[t]
            cj = clip[j]
            g = 0.0
            if b - a == 1:
                for i in range(n):
                    v = loss_deriv(code, z[i], y[i], param) * X[i, j]
                    g += min(max(v, -cj), cj)
            else:
                for i in range(n):
                    v = d[i] * X[i, j]
                    g += min(max(v, -cj), cj)
            g = g / n + sigma[k] * noise[t]
            gam = _gamma(step, scale[k], M[j])
            old = w[j]
            new = prox_scalar(old - gam * g, gam, l1[j], l2[j], lo[j], up[j])
            if new != old:
                w[j] = new
            delta[t] = new - old
        if incremental[k]:
            for t in range(a, b):
                dt = delta[t]
                if dt != 0.0:
                    j = indices[t]
                    for i in range(n):
                        z[i] += dt * X[i, j]


@njit(cache=True, nogil=True)
def block_steps_sparse(data, rows, colptr, n, y, z, w, code, param, indptr, indices, noise, sigma,
                       scale, incremental, step, M, clip, l1, l2, lo, up):
    delta = np.empty(indices.shape[0])
    d = np.empty(n)
    for k in range(indptr.shape[0] - 1):
        a, b = indptr[k], indptr[k + 1]
        nnz = 0
        for t in range(a, b):
            nnz += colptr[indices[t] + 1] - colptr[indices[t]]
        shared = b - a > 1 and nnz > n  # one derivative per sample is cheaper
        if shared:
            for i in range(n):
                d[i] = loss_deriv(code, z[i], y[i], param)
        for t in range(a, b):
            j = indices[t]
            cj = clip[j]
            g = 0.0
            if shared:
                for s in range(colptr[j], colptr[j + 1]):
                    v = d[rows[s]] * data[s]
                    g += min(max(v, -cj), cj)
            else:
                for s in range(colptr[j], colptr[j + 1]):
                    i = rows[s]
                    v = loss_deriv(code, z[i], y[i], param) * data[s]
                    g += min(max(v, -cj), cj)
            g = g / n + sigma[k] * noise[t]
            gam = _gamma(step, scale[k], M[j])
            old = w[j]
            new = prox_scalar(old - gam * g, gam, l1[j], l2[j], lo[j], up[j])
            if new != old:
                w[j] = new
            delta[t] = new - old
        if incremental[k]:
            for t in range(a, b):
                dt = delta[t]
                if dt != 0.0:
                    j = indices[t]
                    for s in range(colptr[j], colptr[j + 1]):
                        z[rows[s]] += dt * data[s]


def block_steps(X, y, loss_code, loss_param, prox, z, w, indptr, indices, noise, sigma, scale,
                incremental, step, M, clip):
    """Run the block steps in place (updates ``w`` and, where ``incremental``, the margins ``z``).

    ``X`` is dense (Fortran-ordered) or CSC, ``prox`` the penalty's
    :class:`~dpopt.kernels.prox.ProxArrays`. ``indptr`` (k + 1,), ``indices`` and ``noise``
    (indptr[-1],) describe the k blocks; ``sigma``, ``scale`` (float) and ``incremental``
    (bool) have one entry per step; ``step`` is the scalar gamma; ``M`` and ``clip`` have
    length p.
    """
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int64)
    noise = np.ascontiguousarray(noise, dtype=np.float64)
    sigma = np.ascontiguousarray(sigma, dtype=np.float64)
    scale = np.ascontiguousarray(scale, dtype=np.float64)
    incremental = np.ascontiguousarray(incremental, dtype=np.bool_)
    args = (loss_code, loss_param, indptr, indices, noise, sigma, scale, incremental, float(step),
            M, clip, *prox)
    if is_sparse(X):
        block_steps_sparse(*csc_arrays(X), X.shape[0], y, z, w, *args)
    else:
        block_steps_dense(X, y, z, w, *args)
