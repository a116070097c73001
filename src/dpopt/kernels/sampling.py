"""Numba loops of the Poisson-batch sampler (:func:`dpopt.solvers._common.poisson_batches`).

Raw arrays in, raw arrays out: the random draws are made by the caller.
"""

import math

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def gap_positions(expo, scale, start):
    """Slots of a Bernoulli process: start + cumulative gaps max(ceil(E_k * scale), 1)."""
    out = np.empty(expo.shape[0], dtype=np.int64)
    pos = start
    for k in range(expo.shape[0]):
        pos += max(np.int64(math.ceil(expo[k] * scale)), 1)
        out[k] = pos
    return out


@njit(cache=True, nogil=True)
def split_slots(pos, n, steps):
    """Slots s n + i below n * steps -> (rows i, bounds of every step s)."""
    total = n * steps
    m = 0
    while m < pos.shape[0] and pos[m] < total:
        m += 1
    rows = np.empty(m, dtype=np.int64)
    bounds = np.zeros(steps + 1, dtype=np.int64)
    for k in range(m):
        s = pos[k] // n
        rows[k] = pos[k] - s * n
        bounds[s + 1] += 1
    for s in range(steps):
        bounds[s + 1] += bounds[s]
    return rows, bounds
