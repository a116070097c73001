"""The Poisson-batch sampler :func:`poisson_batches` and its Numba loops.

Raw arrays in, raw arrays out: the random draws are made by the caller.
"""

import math

import numpy as np
from numba import njit

from dpopt._core.validation import check_choice


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


def poisson_batches(rng, n, rate, steps, *, draw="gaps"):
    """Poisson batches of range(n) for ``steps`` steps: ``(rows, bounds)``, the rows of
    step s in ``rows[bounds[s]:bounds[s + 1]]``.

    Every (record, step) pair is in independently with probability ``rate`` (the
    sampling the subsampled-Gaussian accountant analyses). Two documented draw orders:

    * ``"gaps"`` (dp-sgd): the slots s n + i form a Bernoulli process whose gaps are
      Geometric(rate), drawn by inversion ceil(E / -log(1 - rate)), E ~ Exp(1); the rows
      of a step come out sorted.
    * ``"sizes"`` (dp-svrg): |B_s| ~ Binomial(n, rate), then a uniform subset of that
      size, drawn with replacement and redrawn without replacement if it repeats an index
      (both give a uniform subset, so the mixture is uniform).
    """
    check_choice(draw, "draw", ("gaps", "sizes"))
    if draw == "gaps":
        return _poisson_by_gaps(rng, n, rate, steps)
    sizes = rng.binomial(n, rate, size=steps)
    bounds = np.zeros(steps + 1, dtype=np.int64)
    np.cumsum(sizes, out=bounds[1:])
    rows = rng.integers(0, n, size=int(bounds[-1]), dtype=np.int64)
    if rows.size > 1:
        key = np.sort(np.repeat(np.arange(steps, dtype=np.int64), sizes) * n + rows)
        for t in np.unique(key[1:][key[1:] == key[:-1]] // n):
            rows[bounds[t]:bounds[t + 1]] = rng.choice(n, size=sizes[t], replace=False)
    return rows, bounds


def _poisson_by_gaps(rng, n, rate, steps):
    total = n * steps
    if rate >= 1.0:
        rows = np.tile(np.arange(n, dtype=np.int64), steps)
        return rows, np.arange(steps + 1, dtype=np.int64) * n
    mean = total * rate
    chunk = int(mean + 6.0 * math.sqrt(mean) + 16)
    scale = -1.0 / math.log1p(-rate)
    parts, last = [], -1
    while last < total:
        pos = gap_positions(rng.standard_exponential(chunk), scale, last)
        parts.append(pos)
        last = int(pos[-1])
    pos = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return split_slots(pos, n, steps)
