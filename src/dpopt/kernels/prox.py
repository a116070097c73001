"""The scalar proximal operator every kernel applies, owned by the kernel layer.

psi_j(u) = l1_j |u| + (l2_j / 2) u^2 restricted to [lower_j, upper_j] (the separable
penalties of :mod:`dpopt.data.penalties`, which hands these arrays down):

    prox_{step psi_j}(v) = clip( soft_threshold(v, step l1_j) / (1 + step l2_j), lower_j, upper_j )

(soft-thresholding then shrinkage gives the elastic-net prox; the box is applied last,
which is exact because the unconstrained prox is monotone in v and psi_j is separable).
"""

from typing import NamedTuple

import numpy as np
from numba import njit


class ProxArrays(NamedTuple):
    """psi as the kernels take it: the per-coordinate arrays (length p, float64) l1_j, l2_j,
    lower_j, upper_j of the module docstring (``Penalty.arrays`` builds one)."""

    l1: np.ndarray
    l2: np.ndarray
    lo: np.ndarray
    up: np.ndarray


@njit(cache=True, nogil=True, inline="always")
def prox_scalar(v, step, l1, l2, lower, upper):
    """prox of step * psi_j at v (see module docstring). NaN propagates: an overflowed
    iterate must not be mapped silently to 0 (dpopt.solve then raises)."""
    if v != v:
        return v
    t = step * l1
    if v > t:
        u = v - t
    elif v < -t:
        u = v + t
    else:
        u = 0.0
    u = u / (1.0 + step * l2)
    return min(max(u, lower), upper)


@njit(cache=True, nogil=True)
def prox_vector(v, step, l1, l2, lower, upper):
    out = np.empty(v.shape[0])
    for j in range(v.shape[0]):
        out[j] = prox_scalar(v[j], step[j], l1[j], l2[j], lower[j], upper[j])
    return out
