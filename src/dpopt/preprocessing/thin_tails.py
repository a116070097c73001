"""A thin tail that the scans of y's histogram left out, and the range a mean of y is then
clipped to (post-processing of the released histogram: no new release, nothing spent).

Why. A range read from y's noisy histogram (:mod:`._bounds`) claims that at most the
quantile's tail (q n records, q = 1%) lies beyond each end. At a small n mu the scan from
the top stops at the first bin that clears its noise: a skewed count (visits to a doctor,
median 1, 90% quantile 8, 99% quantile 23) on 300 rows gets the upper end 3.16, and the mean
of y clipped there is 1.6 where the mean is 2.9, a constant that loses 0.08 of R^2 to its
bias alone. Summed over a few bins (half a decade, a decade), that tail stands clear of the
noise (:func:`tail_steps`).

Whether to clip the mean further out is a bias-variance choice (:func:`widened`): a range
of width W gives the mean of n records clipped to it, released with mu, noise of standard
deviation W / (n mu) in y's units (sensitivity W / n under replace-one), while each tail left
out biases it by (its records' distance beyond the end) / n. The same noisy counts bound
that bias from below (every record of a bin lies beyond the bin's inner end), less one
standard deviation of their noise; the range that minimizes that squared bias plus the
variance is kept. So an end moves only where the histogram proves the bias it removes is
worth the noise it adds.

Only a mean is clipped to the widened range (:mod:`dpopt.pipeline.mean_of_y`,
:func:`dpopt.pipeline.constant.all_rows_mean`), never a model's target: a model's noise grows
with y's range too, and clipping y at its bulk is a variance reduction it can use (extending
the model's range was measured and not kept: docs/default_path.md).
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.preprocessing._bounds import DEFAULT_GRID, DEFAULT_QUANTILES

__all__ = ["TAIL_WINDOWS", "TAIL_CONFIDENCE", "tail_steps", "widened", "extended_tails"]

#: The windows of the default grid's bins (a bin, half a decade, a decade) counted beyond an end.
TAIL_WINDOWS = (1, 2, 4)
#: A window is a step when it holds this many deviations of its noise more than the tail.
TAIL_CONFIDENCE = 3.0


def tail_steps(noisy, sigma, n, lower, upper, *, grid=DEFAULT_GRID,
               quantiles=DEFAULT_QUANTILES, confidence=TAIL_CONFIDENCE):
    """The steps over which each end of the range (``lower``, ``upper``) read from the noisy
    histogram ``noisy`` (noise std ``sigma``, public ``n``) may move outwards.

    From an end, the window of the next w bins (w in :data:`TAIL_WINDOWS`, the smaller
    first) is a step when its noisy count exceeds the quantile's whole tail plus
    ``confidence`` deviations of its summed noise (sigma sqrt(w)): more records lie beyond
    the end than the quantile it stands for allows. Noise alone passes one test with
    probability Phi(-3) = 1.3e-3; the steps go on from each step's outer end while a window
    passes. An end that is not an edge of ``grid``'s bins (a public range, a reading on
    equal bins) has no step.

    Returns ``{"lower": [...], "upper": [...]}``, each a list of steps outwards, a step
    ``[outer end, share, moment, v0, v1, v2]``: the window's noisy count over n, and over n
    the sum of its bins' noisy counts times each bin's end nearest the range (every record
    of a bin lies at or beyond that end, so the moment bounds the records' distance from the
    range from below, whatever the shape of the tail within a bin), then the sums over its
    bins of (sigma / n)^2 times 1, that end and its square: the variance of (moment - share
    e) is v2 - 2 e v1 + e^2 v0 (y's units; unbiased noisy counts, negative ones too; plain
    floats, for the plan)."""
    steps = {"lower": [], "upper": []}
    noisy = np.ravel(np.asarray(noisy, dtype=np.float64))
    if not sigma > 0 or noisy.size != grid.n_bins:
        return steps
    lo_end, hi_end = grid.bin_ends()
    # the outer of two bins sharing an end (the zero bin beside (0, e_0]): what lies beyond
    # the end, not at it
    b_lo, b_hi = np.flatnonzero(lo_end == lower), np.flatnonzero(hi_end == upper)
    if b_lo.size == 0 or b_hi.size == 0:
        return steps
    tail = {"lower": quantiles[0] * n, "upper": (1.0 - quantiles[1]) * n}
    for side, b, step, ends in (("lower", int(b_lo[0]), -1, lo_end),
                                ("upper", int(b_hi[-1]), +1, hi_end)):
        inner = hi_end if step < 0 else lo_end  # each bin's end nearest the range
        while (window := _next_window(noisy, sigma, b, step, tail[side], confidence)) is not None:
            counts = noisy[window]
            b = int(window[-1])
            edge, var = inner[window], (sigma / n) ** 2
            steps[side].append([float(ends[b]), float(counts.sum() / n),
                                float(counts @ edge / n), window.size * var,
                                float(edge.sum()) * var, float(edge @ edge) * var])
    return steps


def _next_window(noisy, sigma, b, step, tail, confidence):
    """The first window of :data:`TAIL_WINDOWS` bins beyond bin ``b`` (in direction
    ``step``) that lies on the grid and whose noisy count clears the rule of
    :func:`tail_steps` (bin indices), or None."""
    for w in TAIL_WINDOWS:
        window = b + step * np.arange(1, w + 1)
        if (window.min() >= 0 and window.max() < noisy.size
                and noisy[window].sum() > tail + confidence * sigma * math.sqrt(w)):
            return window
    return None


def widened(lower, upper, steps, n, mu, sd_kept=None):
    """The range a mean of ``n`` records released with ``mu`` (Gaussian-DP, sensitivity
    (upper - lower) / n) is best clipped to: (``lower``, ``upper``) moved over as many of
    each side's ``steps`` (:func:`tail_steps`) as minimize the estimated squared bias plus
    variance of that mean. Stopping an upper end at e leaves out the steps beyond it, whose
    records would lower the mean by at least (moment - share e) each (the moments are lower
    bounds, :func:`tail_steps`); a lower end likewise raises it. That noisy shift is taken
    one standard deviation of its noise lower (the one-standard-error rule: a shift that
    the counts' noise could make is not one they show), and squared; the variance is
    ((upper - lower) / (n mu))^2, or ``sd_kept``^2 for the range as it is (the mean kept
    there may pool estimates already released: :func:`dpopt.pipeline.constant.all_rows_mean`).
    So the range moves only as far as the bias the histogram proves pays for the noise it
    adds. Both parts are deliberate: a price whose upper tenth lies within a third of a bin
    above the end (a bin of the log grid is a factor 1.78 wide) would have been widened on
    the bias its bins' middles suggest, and a window that passed its test partly on noise
    in an empty bin far out would have been widened on the distance of that bin
    (docs/default_path.md measures both). Post-processing of released counts and public
    (n, mu).
    Returns (lower, upper)."""
    def end_and_bias(side, j, end):  # the end after j steps; the shift of what lies
        end = steps[side][j - 1][0] if j else end  # beyond it, and that shift's variance
        rest = steps[side][j:]
        return (end, sum(st[2] - st[1] * end for st in rest),
                sum(st[5] - 2.0 * end * st[4] + end ** 2 * st[3] for st in rest))

    best = None
    for j_lo in range(len(steps["lower"]) + 1):
        for j_hi in range(len(steps["upper"]) + 1):
            lo, below, v_lo = end_and_bias("lower", j_lo, lower)
            hi, above, v_hi = end_and_bias("upper", j_hi, upper)
            # the shift one standard deviation of its noise lower: what the counts prove
            shift = max(abs(above + below) - math.sqrt(max(v_lo + v_hi, 0.0)), 0.0)
            noise = sd_kept if (j_lo, j_hi) == (0, 0) and sd_kept is not None else (
                (hi - lo) / (n * mu))
            mse = shift ** 2 + noise ** 2
            if best is None or mse < best[0]:
                best = (mse, lo, hi)
    return best[1], best[2]


def extended_tails(noisy, sigma, n, lower, upper, mu, *, grid=DEFAULT_GRID,
                   quantiles=DEFAULT_QUANTILES):
    """:func:`widened` of :func:`tail_steps`: the range the mean of the same ``n`` records,
    released with ``mu``, is clipped to."""
    steps = tail_steps(noisy, sigma, n, lower, upper, grid=grid, quantiles=quantiles)
    return widened(lower, upper, steps, n, mu)
