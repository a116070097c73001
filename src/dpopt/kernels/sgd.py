"""Proximal DP-SGD steps on row-major data (one compiled call per pass).

Step s uses the rows ``rows[bounds[s]:bounds[s+1]]`` (the Poisson batch B_s,
drawn by the solver) and the standard-normal vector ``noise[s]``:

    G   = sum_{i in B_s} clip_L2(l'(x_i . w; y_i) x_i, C)        (one sweep over B_s)
    w  <- prox_{gamma psi}( w - gamma (G + sigma noise[s]) / b )

with b the expected batch size. Clipping is exact per sample (the scalar
weight of :mod:`dpopt.kernels.grad`), so ||G(D) - G(D')|| <= 2C (replace-one)
or C (add-remove) whatever the vectorization does to the rounding of sums.
"""

import numpy as np
from numba import njit

from dpopt.kernels.grad import (
    _OPTS,
    _rows_gradient_csr,
    _rows_gradient_dense,
    csr_arrays,
    is_sparse,
)
from dpopt.kernels.prox import prox_scalar


@njit(inline="always", **_OPTS)
def _prox_update(w, g, noise_s, sigma, gamma, inv_b, l1, l2, lo, up):
    for j in range(w.shape[0]):
        v = w[j] - gamma[j] * (g[j] + sigma * noise_s[j]) * inv_b
        w[j] = prox_scalar(v, gamma[j], l1[j], l2[j], lo[j], up[j])


@njit(**_OPTS)
def _sgd_dense(Xr, y, w, code, param, norms, rows, bounds, noise, clip, sigma, gamma, inv_b,
               l1, l2, lo, up):
    g = np.empty(w.shape[0])
    empty = np.zeros(0)
    for s in range(bounds.shape[0] - 1):
        g[:] = 0.0
        _rows_gradient_dense(Xr, y, w, code, param, rows[bounds[s]:bounds[s + 1]], True, clip,
                             empty, norms, g)
        _prox_update(w, g, noise[s], sigma, gamma, inv_b, l1, l2, lo, up)


@njit(**_OPTS)
def _sgd_csr(data, indices, indptr, y, w, code, param, norms, rows, bounds, noise, clip, sigma,
             gamma, inv_b, l1, l2, lo, up):
    g = np.empty(w.shape[0])
    empty = np.zeros(0)
    for s in range(bounds.shape[0] - 1):
        g[:] = 0.0
        _rows_gradient_csr(data, indices, indptr, y, w, code, param, rows[bounds[s]:bounds[s + 1]],
                           True, clip, empty, norms, g)
        _prox_update(w, g, noise[s], sigma, gamma, inv_b, l1, l2, lo, up)


def sgd_steps(X_rows, y, row_norms, loss_code, loss_param, prox, w, rows, bounds, noise, gamma,
              clip, sigma, batch_size):
    """Run ``len(bounds) - 1`` proximal DP-SGD steps in place on ``w`` (module docstring).

    ``X_rows``: the features, C-ordered dense or CSR; ``row_norms``: ||x_i||; ``prox``: the
    penalty's :class:`~dpopt.kernels.prox.ProxArrays`; ``gamma``: per-coordinate step sizes
    (array of length dim); ``noise``: shape (steps, dim); ``clip``: L2 threshold C (inf = no
    clipping); ``sigma``: noise std on the SUM of clipped gradients.
    """
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    bounds = np.ascontiguousarray(bounds, dtype=np.int64)
    noise = np.ascontiguousarray(noise, dtype=np.float64)
    gamma = np.ascontiguousarray(gamma, dtype=np.float64)
    args = (y, w, loss_code, loss_param, row_norms, rows, bounds, noise, float(clip),
            float(sigma), gamma, 1.0 / batch_size, *prox)
    if is_sparse(X_rows):
        _sgd_csr(*csr_arrays(X_rows), *args)
    else:
        _sgd_dense(X_rows, *args)
