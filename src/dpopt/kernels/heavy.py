"""Kernel of the noisy clipped regularized subgradient method (heavy-tailed DP-SO).

``subgradient_steps`` runs ``noise.shape[0]`` steps of Algorithm 3 of Lowy &
Razaviyayn on one dense batch (rows of X in C order)::

    g  = (1/s) sum_i clip_{L2}(l'(x_i^T w; y_i) x_i, C) + sigma * noise_t
    w <- Proj_{B(0, R) ∩ B(c, D)}( w - eta (g + lam (w - c) + l1 sign(w) + l2 w) )

The per-sample norm is |l'| ||x_i||, so clipping is a scalar weight (no
per-sample matrix). The projection onto the intersection of two balls is the
closed form of :func:`dpopt.solvers.heavy_tailed.project_two_balls`.
"""

import math

import numpy as np
from numba import njit

from dpopt.kernels.losses import loss_deriv


@njit(cache=True, nogil=True)
def _dist(a, b):
    acc = 0.0
    for j in range(a.shape[0]):
        d = a[j] - b[j]
        acc += d * d
    return math.sqrt(acc)


@njit(cache=True, nogil=True)
def _proj_ball(x, c, r, out):
    nd = _dist(x, c)
    if nd <= r or not math.isfinite(r):
        out[:] = x
    else:
        f = r / nd
        for j in range(x.shape[0]):
            out[j] = c[j] + (x[j] - c[j]) * f


@njit(cache=True, nogil=True)
def _inside(x, c, r, tol):
    if not math.isfinite(r):
        return True
    return _dist(x, c) <= r * (1.0 + tol) + tol


@njit(cache=True, nogil=True)
def project_two_balls_nb(v, c1, r1, c2, r2, out):
    """Projection of v onto B(c1, r1) ∩ B(c2, r2), written into ``out``."""
    p = v.shape[0]
    if _inside(v, c1, r1, 0.0) and _inside(v, c2, r2, 0.0):
        out[:] = v
        return
    p1 = np.empty(p)
    _proj_ball(v, c1, r1, p1)
    if _inside(p1, c2, r2, 1e-9):
        out[:] = p1
        return
    p2 = np.empty(p)
    _proj_ball(v, c2, r2, p2)
    if _inside(p2, c1, r1, 1e-9):
        out[:] = p2
        return
    dist = _dist(c1, c2)
    if dist == 0.0:
        out[:] = p1 if r1 <= r2 else p2
        return
    e = (c2 - c1) / dist
    h = (r1 * r1 - r2 * r2 + dist * dist) / (2.0 * dist)
    rim = math.sqrt(max(r1 * r1 - h * h, 0.0))
    te = 0.0
    for j in range(p):
        te += (v[j] - c1[j]) * e[j]
    radial = np.empty(p)
    nr = 0.0
    for j in range(p):
        radial[j] = v[j] - (te - h) * e[j] - (c1[j] + h * e[j])
        nr += radial[j] * radial[j]
    nr = math.sqrt(nr)
    if nr == 0.0:
        k = 0
        for j in range(p):
            if abs(e[j]) < abs(e[k]):
                k = j
        radial[:] = 0.0
        radial[k] = 1.0
        dot = e[k]
        nr = 0.0
        for j in range(p):
            radial[j] -= dot * e[j]
            nr += radial[j] * radial[j]
        nr = math.sqrt(nr)
    for j in range(p):
        out[j] = c1[j] + h * e[j] + radial[j] * (rim / nr)


@njit(cache=True, nogil=True)
def subgradient_steps(X, y, norms, code, param, w, center, radius, dball, eta, lam, clip,
                     sigma, noise, l1, l2):
    """Run ``noise.shape[0]`` steps in place on ``w`` (see module docstring)."""
    s, p = X.shape
    z = np.empty(s)
    g = np.empty(p)
    v = np.empty(p)
    origin = np.zeros(p)
    for t in range(noise.shape[0]):
        for i in range(s):
            acc = 0.0
            for j in range(p):
                acc += X[i, j] * w[j]
            z[i] = acc
        g[:] = 0.0
        for i in range(s):
            d = loss_deriv(code, z[i], y[i], param)
            sc = abs(d) * norms[i]
            if sc > clip:
                d *= clip / sc
            for j in range(p):
                g[j] += d * X[i, j]
        for j in range(p):
            sg = 0.0
            if w[j] > 0.0:
                sg = 1.0
            elif w[j] < 0.0:
                sg = -1.0
            gj = g[j] / s + sigma * noise[t, j] + lam * (w[j] - center[j]) + l1[j] * sg \
                + l2[j] * w[j]
            v[j] = w[j] - eta * gj
        project_two_balls_nb(v, origin, radius, center, dball, w)
