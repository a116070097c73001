"""Scalar losses on the margin z = x^T w, compiled with Numba.

One function per quantity with the loss chosen by an integer code, so that
every solver kernel can call ``loss_deriv(code, z, y, param)`` inline. The
formulas are written to be overflow free for any finite margin.

=========  ====  ==============================  =====================
loss       code  value l(z; y)                   derivative dl/dz
=========  ====  ==============================  =====================
squared    0     (z - y)^2 / 2                   z - y
logistic   1     log(1 + exp(-y z)), y in +-1    -y / (1 + exp(y z))
huber      2     r^2/2 if |r|<=d else d|r|-d^2/2  clip(r, -d, d), r=z-y
absolute   3     |z - y|                         sign(z - y)
=========  ====  ==============================  =====================
"""

import math

import numpy as np
from numba import njit, prange  # noqa: F401

SQUARED = 0
LOGISTIC = 1
HUBER = 2
ABSOLUTE = 3


@njit(cache=True, nogil=True, inline="always")
def _log1pexp(t):
    # log(1 + e^t) without overflow.
    if t > 0.0:
        return t + math.log1p(math.exp(-t))
    return math.log1p(math.exp(t))


@njit(cache=True, nogil=True, inline="always")
def _sigmoid_neg(t):
    # 1 / (1 + e^t) without overflow.
    if t >= 0.0:
        e = math.exp(-t)
        return e / (1.0 + e)
    return 1.0 / (1.0 + math.exp(t))


@njit(cache=True, nogil=True, inline="always")
def loss_value(code, z, y, param):
    if code == SQUARED:
        r = z - y
        return 0.5 * r * r
    if code == LOGISTIC:
        return _log1pexp(-y * z)
    if code == HUBER:
        r = abs(z - y)
        if r <= param:
            return 0.5 * r * r
        return param * r - 0.5 * param * param
    return abs(z - y)


@njit(cache=True, nogil=True, inline="always")
def loss_deriv(code, z, y, param):
    if code == SQUARED:
        return z - y
    if code == LOGISTIC:
        return -y * _sigmoid_neg(y * z)
    if code == HUBER:
        r = z - y
        return min(max(r, -param), param)
    r = z - y
    if r > 0.0:
        return 1.0
    if r < 0.0:
        return -1.0
    return 0.0


@njit(cache=True, nogil=True)
def loss_values(code, z, y, param):
    out = np.empty(z.shape[0])
    for i in range(z.shape[0]):
        out[i] = loss_value(code, z[i], y[i], param)
    return out


@njit(cache=True, nogil=True)
def loss_derivs(code, z, y, param):
    out = np.empty(z.shape[0])
    for i in range(z.shape[0]):
        out[i] = loss_deriv(code, z[i], y[i], param)
    return out
