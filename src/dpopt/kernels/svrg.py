"""Inner loop of (DP-)SVRG for linear models, compiled with Numba.

One call runs a chunk of inner steps t = 0..len(starts)-2 of Prox-SVRG with
per-sample L2 clipping and Gaussian noise (dpopt.solvers.dp_svrg):

    v_t = (1/b) sum_{i in B_t} [clip(l'(x_i^T w) x_i) - clip(l'(x_i^T w~) x_i)]
          + g~ + s * xi_t,                                   xi_t ~ N(0, I)
    w  <- prox_{eta psi}(w - eta v_t)

The batch B_t is ``idx[starts[t]:starts[t+1]]``. For a linear model a clipped
per-sample gradient is a scalar weight times x_i, so the snapshot side enters
through ``snap_weights[i] = clip weight of sample i at w~`` (computed once per
epoch with the full gradient g~) and only the margin x_i^T w is computed per
sampled row. ``wsum`` accumulates the iterates (for the epoch average).
``clip = inf`` disables clipping. Dense rows come from a C-ordered copy of X.
"""

import math

import numpy as np
from numba import njit

from dpopt.kernels.grad import csr_arrays, is_sparse
from dpopt.kernels.losses import loss_deriv
from dpopt.kernels.prox import prox_scalar


@njit(cache=True, nogil=True, inline="always")
def clip_weight(d, norm, clip):
    """l' min(1, C / (|l'| ||x||)): the scalar of the L2-clipped gradient l' x."""
    s = abs(d) * norm
    if s > clip:
        return d * (clip / s)
    return d


@njit(cache=True, nogil=True, inline="always")
def _prox_update(w, v, noise_t, snap_grad, inv_b, scale, eta, l1, l2, lo, up, wsum):
    for j in range(w.shape[0]):
        g = v[j] * inv_b + snap_grad[j] + scale * noise_t[j]
        w[j] = prox_scalar(w[j] - eta * g, eta, l1[j], l2[j], lo[j], up[j])
        wsum[j] += w[j]


@njit(cache=True, nogil=True)
def svrg_steps_dense(Xc, y, norms, code, param, w, snap_weights, snap_grad, starts, idx, noise,
                     inv_b, scale, eta, clip, l1, l2, lo, up, wsum):
    p = w.shape[0]
    v = np.empty(p)
    for t in range(starts.shape[0] - 1):
        v[:] = 0.0
        for k in range(starts[t], starts[t + 1]):
            i = idx[k]
            z = 0.0
            for j in range(p):
                z += Xc[i, j] * w[j]
            d = clip_weight(loss_deriv(code, z, y[i], param), norms[i], clip) - snap_weights[i]
            if d != 0.0:
                for j in range(p):
                    v[j] += d * Xc[i, j]
        _prox_update(w, v, noise[t], snap_grad, inv_b, scale, eta, l1, l2, lo, up, wsum)


@njit(cache=True, nogil=True)
def svrg_steps_csr(data, indices, indptr, y, norms, code, param, w, snap_weights, snap_grad,
                   starts, idx, noise, inv_b, scale, eta, clip, l1, l2, lo, up, wsum):
    p = w.shape[0]
    v = np.empty(p)
    for t in range(starts.shape[0] - 1):
        v[:] = 0.0
        for k in range(starts[t], starts[t + 1]):
            i = idx[k]
            z = 0.0
            for a in range(indptr[i], indptr[i + 1]):
                z += data[a] * w[indices[a]]
            d = clip_weight(loss_deriv(code, z, y[i], param), norms[i], clip) - snap_weights[i]
            if d != 0.0:
                for a in range(indptr[i], indptr[i + 1]):
                    v[indices[a]] += d * data[a]
        _prox_update(w, v, noise[t], snap_grad, inv_b, scale, eta, l1, l2, lo, up, wsum)


def svrg_steps(X_rows, y, row_norms, loss_code, loss_param, prox, w, snap_weights, snap_grad,
               starts, idx, noise, inv_b, scale, eta, clip, wsum):
    """Run ``len(starts) - 1`` inner steps in place on ``w`` and ``wsum`` (module docstring).

    ``X_rows``: the features, C-ordered dense or CSR; ``row_norms``: ||x_i||; ``prox``: the
    penalty's :class:`~dpopt.kernels.prox.ProxArrays`.
    """
    args = (y, row_norms, loss_code, loss_param, w, snap_weights, snap_grad, starts, idx, noise,
            float(inv_b), float(scale), float(eta),
            float(clip) if math.isfinite(clip) else np.inf, *prox, wsum)
    if is_sparse(X_rows):
        svrg_steps_csr(*csr_arrays(X_rows), *args)
    else:
        svrg_steps_dense(X_rows, *args)
