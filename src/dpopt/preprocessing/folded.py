"""Centred values read folded onto their magnitudes: the symmetric range [-h, h] of a
variable centred near 0 from the same noisy histogram whose signed reading does not resolve
(post-processing of that release, free). Used for the centred bounds of features whose first
bounds are one bin of the grid (:func:`dpopt.pipeline.scaling._narrow`)."""

from __future__ import annotations

import math

import numpy as np

from dpopt.preprocessing._bounds import (
    DEFAULT_BIN_CONFIDENCE,
    DEFAULT_CONFIDENCE,
    DEFAULT_GRID,
    coarsened,
    coarser_grids,
)
from dpopt.privacy.mechanisms import noisy_scan

__all__ = ["folded_bounds", "folded_centred_bounds"]


def folded_bounds(noisy, sigma, n, quantiles, grid=DEFAULT_GRID):
    """(lower, upper, unresolved): the symmetric range [-h, h] read from noisy histograms of
    centred values folded onto |v| (post-processing of the same release, free).

    Centred values split their records between the two signs of the grid and spread each
    half over several bins, so at a small budget no bin of either side clears the scans'
    thresholds and the signed reading is unresolved, while their magnitudes |v| put the
    records of both halves in the same bins. Each negative bin's noisy count is added to its
    mirror positive bin (the grid is symmetric), so a folded bin carries at most two noises
    (standard deviation ``sigma`` sqrt(2), which the scan uses). Only the upper end of |v|
    is read, by the scan from the top (its tail (1 - q_hi) n, margins as in
    :func:`~dpopt.preprocessing._bounds.histogram_bounds`): h is the upper end of its stop
    bin, on the default grid or, where that scan does not stop, on its coarser readings
    (:func:`~dpopt.preprocessing._bounds.coarsened`). The scan stops where its bins' counts
    clear their noise. Where no bin of the data clears it, the first rule can stop the scan
    inside the bulk (its margin grows over the forty empty bins it crossed first): a stop
    whose noisy count above it, up to |v| = 1, exceeds n/2 puts h below the median of |v|,
    and is refused for the coarser readings' (an independent review measured 2-3% of folded
    features clipped over half their values without this test). A stop on noise above the
    data (at most 6e-4 of scans over empty bins) gives an h that clips nothing and narrows
    less. The signed reading's inside test (the range holds half of n by four deviations)
    does not apply: it would add the noise of every bin from 1e-4 up to h, about twenty,
    where |v| has its records in a few. The range about the mean is [-h, h]: for a skewed
    variable it is wider than its values on the short side, and it holds the long side up
    to the quantile of |v|. Rows whose scans never stop, or stop at the zero bin, get h = 0
    and stay unresolved."""
    noisy = np.atleast_2d(np.asarray(noisy, dtype=np.float64))
    z = grid.zero_bin
    folded = np.zeros_like(noisy)
    folded[:, z] = noisy[:, z]
    folded[:, z + 1:] = noisy[:, z + 1:] + noisy[:, z - 1::-1]
    h, unresolved = np.zeros(len(noisy)), np.ones(len(noisy), dtype=bool)
    for reading in (grid, *coarser_grids(grid)):
        rows = np.flatnonzero(unresolved)
        if rows.size == 0:
            break
        counts, s = ((folded[rows], sigma * math.sqrt(2.0)) if reading is grid
                     else coarsened(folded[rows], sigma * math.sqrt(2.0), grid, reading))
        ends = reading.bin_ends()[1][reading.zero_bin:]
        half = counts[:, reading.zero_bin:]
        b = noisy_scan(half, (1.0 - quantiles[1]) * n, s, DEFAULT_CONFIDENCE, from_top=True,
                       bin_confidence=DEFAULT_BIN_CONFIDENCE)
        # the noisy count above the stop, up to |v| = 1 (centred scaled values lie within
        # [-1, 1]; beyond, only noise): more than half of n there puts h below the median
        cum = np.cumsum(np.where(ends <= 1.0, half, 0.0), axis=1)
        above = cum[:, -1] - cum[np.arange(rows.size), np.maximum(b, 0)]
        ok = (b >= 0) & (above <= n / 2)
        h[rows[ok]] = ends[b[ok]]
        unresolved[rows[ok]] = h[rows[ok]] <= 0.0
    return -h, h, unresolved


def folded_centred_bounds(cb, narrow, n, quantiles):
    """The centred bounds ``cb``, with those of the ``narrow`` features (first bounds one bin
    of the log grid) that its signed reading left unresolved read again folded onto |v|
    (:func:`~dpopt.preprocessing.folded.folded_bounds`: the same counts, free), where that
    resolves them. Such a feature may fill a sliver of its first range (a value near 40
    with a spread of 1 fills a sixth of [31.6, 56.2]), so its centred values sit near 0 on
    both signs, where the signed reading splits them. A feature spread over several bins
    already fills a good part of its range: the folded reading, whose scan stops where its
    bins clear their noise (inside the 1%/99% quantiles at a small budget), would clip it
    more than it narrows it (measured, docs/default_path.md). Returns (lower, upper, the
    positions in ``cb`` of the ranges read folded)."""
    lower, upper = np.array(cb.lower, dtype=float), np.array(cb.upper, dtype=float)
    rows = (np.flatnonzero(np.asarray(cb.unresolved) & np.asarray(narrow, dtype=bool))
            if cb.unresolved is not None else np.zeros(0, dtype=np.intp))
    if len(rows) and cb.noisy_counts is not None and cb.sigma > 0:
        lo, hi, still = folded_bounds(cb.noisy_counts[rows], cb.sigma, n, quantiles, cb.grid)
        lower[rows[~still]], upper[rows[~still]] = lo[~still], hi[~still]
        rows = rows[~still]
    else:
        rows = np.zeros(0, dtype=np.intp)
    return lower, upper, rows
