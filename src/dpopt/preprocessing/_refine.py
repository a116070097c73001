"""Second looks at a target's range: a concentrated range read again (location, then scale),
and an unresolved histogram released again and pooled with the first.

The public grid of :mod:`dpopt.preprocessing._bounds` places a value within a factor of one
bin (10^(1/4) = 1.78 on the default grid), not within its own spread: values of 1000 +- 30
get [562, 1778]. :func:`concentrated` says when released bounds leave the spread inside
them unknown; :func:`refined_bounds` then releases one more histogram, of the values
clipped into those bounds, on :data:`REFINE_BINS` equal bins, and reads narrower bounds
from it.

Mechanism and privacy. The counts of n values clipped into [lower, upper] on equal bins
(:func:`linear_counts`): replacing one record moves one unit from one bin to another, an
L2 sensitivity of sqrt(2) under replace-one adjacency (1 under add-remove, so the record is
conservative there). Gaussian noise of sigma = sqrt(2) / mu per count makes the release the
Gaussian mechanism of multiplier 1 / mu, mu-GDP (Dong, Roth & Su 2022), recorded as
``Gaussian(1 / mu, 1)``. [lower, upper] must be public or released before (the default
path's target bounds are). Reading the bounds (scans, fences) is post-processing.

An unresolved histogram (:func:`pooled_counts`, :func:`histogram_mean`). When the first
histogram of a target cannot locate it (its bulk spread over more bins than the noise lets
through), a second release of the same counts on the same grid, with what the budget has
left, is pooled with the first bin by bin with weights 1/sigma^2: independent Gaussian
noises on the same counts, so the pooled histogram is the release at mu = sqrt(mu_1^2 +
mu_2^2) (one Gaussian mechanism's output, read by the same scans), and its bulk's counts
stand out by that much more. Where it resolves, nothing is left for a noisy mean: the
constant is read from the pooled counts themselves (post-processing).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from dpopt._core.validation import check_positive_int
from dpopt.preprocessing._bounds import (
    DEFAULT_BIN_CONFIDENCE,
    DEFAULT_CONFIDENCE,
    DEFAULT_GRID,
    DEFAULT_QUANTILES,
    _scan_bounds,
    check_mu,
    check_quantiles,
    histogram_quantiles,
    release_counts,
)

__all__ = ["REFINE_BINS", "RefinedRange", "bin_sums", "bins_inside", "concentrated",
           "histogram_mean", "linear_counts", "look_mean", "pooled_counts", "refined_bounds",
           "skew_adjusted_fences", "spread_bound", "spread_estimate", "within_bins", "zeros_only"]

#: Equal-width bins of the grid on which a concentrated range is read again
#: (:func:`refined_bounds`): a relative resolution of 1/16 of the range.
REFINE_BINS = 16


def concentrated(lower, upper, grid=DEFAULT_GRID) -> bool:
    """Whether ``[lower, upper]``, read on ``grid``, leaves the spread inside it unknown:
    one sign and at most two bins of the grid wide (``|upper| / |lower| <= 10^(2 /
    bins_per_decade)``, 3.16 on the default grid). A log grid places a value within a
    factor of one bin (1.78), not within its own spread: a target of 40 +- 2.5 gets
    [31.6, 56.2], ten of its standard deviations. A range that spans more bins has
    already been read at the grid's resolution, so a second look cannot narrow it much.
    A function of released numbers and the public grid only (post-processing)."""
    return bool(within_bins(float(lower), float(upper), 2, grid))


def within_bins(lower, upper, bins, grid=DEFAULT_GRID):
    """Whether ``lower < upper`` have one sign and are at most ``bins`` bins of the log
    ``grid`` apart (``|upper| / |lower| <= 10^(bins / bins_per_decade)``, up to the rounding
    of the computed edges); elementwise on arrays."""
    lower, upper = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    lo, hi = np.abs(lower), np.abs(upper)
    with np.errstate(invalid="ignore"):
        return ((lower < upper) & (lower * upper > 0.0)
                & (np.maximum(lo, hi) <= np.minimum(lo, hi)
                   * 10.0 ** (bins / grid.bins_per_decade) * (1.0 + 1e-9)))


def linear_counts(values, lower, upper, bins=REFINE_BINS) -> np.ndarray:
    """Exact counts of ``values`` clipped into ``[lower, upper]`` on ``bins`` equal bins
    (every value is counted once, so replacing one record moves one unit between two
    bins). Per-chunk counts add up to the counts of the whole."""
    v = np.clip(np.asarray(values, dtype=np.float64), lower, upper)
    return np.histogram(v, bins=bins, range=(lower, upper))[0].astype(np.float64)


class RefinedRange(NamedTuple):
    """What :func:`refined_bounds` reads from its release: the bounds, the release's record,
    :func:`spread_bound` of the values clipped to those bounds, :func:`spread_estimate`
    of them (at most the bound), and :func:`look_mean` of the values clipped to the range
    the look read, with its noise's public standard deviation and the bound on its rounding
    (post-processing)."""

    lower: float
    upper: float
    record: object
    spread: float
    scale: float
    mean: float
    mean_sd: float
    mean_rounding: float


def refined_bounds(counts, n, lower, upper, mu, rng, *, quantiles=DEFAULT_QUANTILES,
                   confidence=DEFAULT_CONFIDENCE, bin_confidence=DEFAULT_BIN_CONFIDENCE):
    """Bounds inside a released range ``[lower, upper]`` from one more Gaussian histogram:
    ``counts`` = :func:`linear_counts` of the n values, released with N(0, sigma^2) per
    count, sigma = sqrt(2) / mu (replace-one sensitivity sqrt(2): one record leaves one
    bin and enters another; under add-remove one count moves, sensitivity 1, so the
    record is conservative there), i.e. the Gaussian mechanism of multiplier 1 / mu,
    mu-GDP. The bounds are read by the scans of :func:`histogram_bounds` (same quantiles
    and margins, and the check of its coarser readings: the noisy count inside must
    exceed n/2 by ``confidence`` standard deviations of its noise); where a scan never
    stops, the scans cross or that check fails, ``[lower, upper]`` is kept. Each end is
    then widened to the fences of :func:`skew_adjusted_fences` (from the quartiles,
    interpolated in the noisy cumulative counts) where they are wider, and kept inside
    ``[lower, upper]``: the bounds clip the target, and a
    scan at a small budget stops at the first bin its noise lets it trust, about one
    standard deviation from the centre at n = 200, which biases a clipped mean and
    shrinks a fitted slope. The quartiles' noisy counts are sums of many bins, accurate
    where a tail's single bins are not.
    Returns a :class:`RefinedRange` (lower, upper, record, spread: :func:`spread_bound` of
    the values clipped to the bounds read); the record is spent whatever is read."""
    mu = check_mu(mu)
    n = check_positive_int(n, "n")
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 1 or counts.size < 2:
        raise ValueError(f"counts must be a 1-d array of at least 2 bins, got shape "
                         f"{counts.shape}")
    if not (np.isfinite(lower) and np.isfinite(upper) and lower < upper):
        raise ValueError(f"need finite lower < upper, got {lower}, {upper}")
    quantiles = check_quantiles(quantiles)
    noisy, sigma, record = release_counts(counts[None, :], mu, rng)
    edges = np.linspace(lower, upper, counts.size + 1)
    lo, hi, unresolved = _scan_bounds(noisy, sigma, n, quantiles, confidence,
                                      (edges[:-1], edges[1:]), bin_confidence,
                                      inside_margin=confidence)
    if unresolved[0]:
        low, high = float(lower), float(upper)
    else:
        low, high = skew_adjusted_fences(*(
            float(histogram_quantiles(noisy, n, q, ends=(edges[:-1], edges[1:]))[0])
            for q in (0.25, 0.5, 0.75)))
        low, high = (max(float(lower), min(float(lo[0]), low)),
                     min(float(upper), max(float(hi[0]), high)))
    spread = spread_bound(noisy[0], sigma, n, edges, low, high, confidence)
    return RefinedRange(low, high, record, spread,
                        min(spread, spread_estimate(noisy[0], edges, low, high)),
                        *look_mean(noisy[0], sigma, n, edges))


def look_mean(noisy, sigma, n, edges):
    """(estimate, sd, rounding) of the mean of the n values clipped to the equal bins
    ``edges``, from one noisy histogram of them (Gaussian noise of sd ``sigma`` per count):
    c + sum_k n~_k (m_k - c) / n, with m_k the bins' middles and c the range's middle, clipped
    to the range. Every value is counted once (:func:`linear_counts` clips into the range),
    so the exact counts sum to n and the estimate's expectation is the mean of the clipped
    values rounded to their bins' middles. ``sd`` = sigma ||m - c||_2 / n is its noise's
    standard deviation, public; ``rounding`` = half a bin bounds the rounding's bias, which
    the noise does not cover: a year near 2005 in one of 5 bins over [1778, 3162] reads as
    that bin's middle, 87 years off (an independent audit, session 29), while values spread
    over the bins round to within a few hundredths of their standard deviation (0.02 to
    0.08 on 4 bins, measured on normal, log-normal and the diabetes targets). Against a
    noisy mean of the clipped values at the same mu over a range as wide, the noise is 0.79
    times on 4 bins, 1.15 on 8, 1.63 on 16. Computed relative to the range's half-width, so
    that public ranges near the ends of the floating-point range neither overflow nor
    underflow. Post-processing."""
    edges = np.asarray(edges, dtype=np.float64)
    lower, upper = float(edges[0]), float(edges[-1])
    half = 0.5 * upper - 0.5 * lower
    centre = 0.5 * lower + 0.5 * upper
    unit = (0.5 * (edges[:-1] + edges[1:]) - centre) / half  # the middles in [-1, 1]
    estimate = centre + half * (float(np.dot(np.ravel(noisy), unit)) / n)
    sd = half * (float(sigma) * float(np.linalg.norm(unit)) / n)
    return (float(np.clip(estimate, lower, upper)), float(sd),
            float(half / (edges.size - 1)))


def spread_bound(noisy, sigma, n, edges, lower, upper, confidence=DEFAULT_CONFIDENCE):
    """An upper bound on the standard deviation of n values clipped to ``[lower, upper]``,
    in units of that range's half-width (so at most 1), from one noisy histogram of them
    on the bins ``edges`` (each count with Gaussian noise of sd ``sigma``). Post-processing.

    For any c, Var(v) <= E (v - c)^2 <= sum_k (n_k / n) g_k with g_k the largest (v - c)^2
    over bin k clipped to the range (its farther end), c the noisy counts' mean; the noisy
    sum sum_k n~_k g_k misses the exact one by a Gaussian of sd sigma ||g||_2, so adding
    ``confidence`` of those keeps the bound above it but with probability Phi(-confidence).
    The bins' widths make it loose by about one bin (1/16 of the first range on the
    refine's bins). Used as the residual scale of AdaSSP's ridge choice (the target's
    variance bounds the variance of its noise around any regression function)."""
    if not upper > lower:
        return 1.0
    a, b, floor = _unit_bins(edges, lower, upper)
    noisy = np.ravel(noisy)
    weights = np.maximum(noisy, 0.0)
    total = float(weights.sum())
    c = float(np.dot(weights, 0.5 * (a + b))) / total if total > 0 else 0.0
    g = np.maximum((a - c) ** 2, (b - c) ** 2)
    second = (float(np.dot(noisy, g)) + confidence * sigma * float(np.linalg.norm(g))) / n
    return float(min(1.0, max(math.sqrt(max(second, 0.0)), floor)))


def spread_estimate(noisy, edges, lower, upper):
    """An estimate (not a bound) of the standard deviation of the values clipped to
    ``[lower, upper]``, in units of that range's half-width, from the same noisy histogram
    as :func:`spread_bound`: the variance of the bins' middles weighted by their noisy
    counts (negative counts as 0), plus each bin's own (b - a)^2 / 12 (values spread evenly
    inside a bin), at least half the narrowest bin and at most 1. The scale of the Huber
    threshold on DP-GD's least squares (:func:`dpopt.pipeline.curvature.huber_in_place_of_squares`),
    where an upper bound, about a bin and a margin of noise above the spread, sets the
    threshold too high. Post-processing."""
    if not upper > lower:
        return 1.0
    a, b, floor = _unit_bins(edges, lower, upper)
    weights = np.maximum(np.ravel(noisy), 0.0)
    total = float(weights.sum())
    if not total > 0.0:
        return 1.0
    middle = 0.5 * (a + b)
    c = float(np.dot(weights, middle)) / total
    variance = float(np.dot(weights, (middle - c) ** 2 + (b - a) ** 2 / 12.0)) / total
    return float(min(1.0, max(math.sqrt(variance), floor)))


def _unit_bins(edges, lower, upper):
    """(a, b, floor): the bins ``edges`` clipped to ``[lower, upper]`` and mapped to
    [-1, 1], and half the narrowest of them: below it the histogram tells nothing about a
    spread (and a noise far below its mean gave 0, a Huber threshold of 0 downstream)."""
    half = 0.5 * (upper - lower)
    a = (np.clip(edges[:-1], lower, upper) - lower) / half - 1.0
    b = (np.clip(edges[1:], lower, upper) - lower) / half - 1.0
    floor = 0.5 * float(np.min((b - a)[b > a])) if np.any(b > a) else 1.0
    return a, b, floor


def skew_adjusted_fences(q25, q50, q75):
    """The adjusted boxplot's fences (Hubert & Vandervieren 2008) from three quartiles:
    ``[q25 - 1.5 e^(-4b) IQR, q75 + 1.5 e^(3b) IQR]`` for a skewness b >= 0 (mirrored for
    b < 0), with the quartile skewness b = (q75 + q25 - 2 q50) / IQR (Bowley) in place of
    their medcouple, which needs the data. b = 0 gives Tukey's fences (1.5 IQR: 99.3% of
    a normal inside); a right-skewed target gets a longer upper fence (lognormal(0, 1):
    b = 0.32, 98% inside instead of 92%)."""
    iqr = max(q75 - q25, 0.0)
    b = 0.0 if iqr == 0.0 else float(np.clip((q75 + q25 - 2.0 * q50) / iqr, -1.0, 1.0))
    down, up = (math.exp(-4.0 * b), math.exp(3.0 * b)) if b >= 0 else \
        (math.exp(-3.0 * b), math.exp(4.0 * b))
    return q25 - 1.5 * down * iqr, q75 + 1.5 * up * iqr


def pooled_counts(*releases):
    """Releases of the same histograms (each a :class:`~dpopt.preprocessing._bounds.FeatureBounds`
    with ``noisy_counts`` on one grid), pooled bin by bin with weights 1/sigma_k^2: the noisy
    counts and their noise's standard deviation (sum_k 1/sigma_k^2)^(-1/2), that of one
    release at mu = sqrt(sum_k mu_k^2) (module docstring). Post-processing."""
    weights = [r.sigma ** -2.0 for r in releases]
    noisy = sum(w * r.noisy_counts for w, r in zip(weights, releases)) / sum(weights)
    return noisy, sum(weights) ** -0.5


def bins_inside(lower, upper, grid=DEFAULT_GRID):
    """The bins of ``grid`` that lie within ``[lower, upper]`` (bin edges of the grid, as
    released bounds are): a boolean mask."""
    lo_end, hi_end = grid.bin_ends()
    return (lo_end >= lower) & (hi_end <= upper)


def zeros_only(noisy, sigma, lower, upper, grid=DEFAULT_GRID):
    """Whether released bounds ``[lower, upper]`` around 0 hold nothing but the exact zeros,
    up to the noise: the noisy count of their bins other than the zero bin is below
    2 sigma sqrt(their number) (a one-sided test at 2.3%). The bulk of a zero-inflated target
    (counts, amounts) is the zero bin; where its nonzero values are too few per bin to
    stand out, the scans run through them and stop at the zero bin or, on noise, a few
    bins beside it ([0, 0.03] for values from 0.03 to 57): a range that then clips the
    nonzero values to almost 0, which read as [0, 0] they are not (the callers then place
    them or release the constant). Post-processing of one histogram's counts."""
    if not (lower <= 0.0 <= upper and upper > lower):
        return False
    inside = bins_inside(lower, upper, grid)
    inside[grid.zero_bin] = False
    k = int(np.sum(inside))
    return k == 0 or float(np.sum(np.ravel(noisy)[inside])) < 2.0 * sigma * math.sqrt(k)


def histogram_mean(noisy, lower, upper, grid=DEFAULT_GRID):
    """The mean of the values in ``[lower, upper]`` (bin edges of ``grid``) read from one
    noisy histogram: each bin inside at the middle of its ends, weighted by its noisy count
    (a ratio of noisy sums; the bounds' release guarantees that the count inside is above
    half of n), clipped to the range. Its error is the noise on the bins inside, weighted by
    their values, and the spread of the values within a bin (a log bin is a factor 1.78
    wide, so the middle can be off by about a tenth of the value). Post-processing."""
    weighted, total = bin_sums(noisy, bins_inside(lower, upper, grid), grid)
    if not total > 0.0:
        return 0.5 * (lower + upper)
    return float(np.clip(weighted / total, lower, upper))


def bin_sums(noisy, mask, grid=DEFAULT_GRID):
    """(sum of the noisy counts of the bins ``mask`` at the middles of their ends, sum of
    those counts): a histogram's mean read from its bins is their ratio. Post-processing."""
    lo_end, hi_end = grid.bin_ends()
    counts = np.ravel(noisy)[mask]
    return float(np.dot(counts, 0.5 * (lo_end[mask] + hi_end[mask]))), float(np.sum(counts))
