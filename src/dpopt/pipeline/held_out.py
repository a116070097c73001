"""The held-out release of :mod:`dpopt.pipeline.selection`: the candidates, their per-record
scores on the held-out records, and the Gaussian release of their sums.

Candidates (:func:`candidates`) are fixed functions once the training branch has released:
its model and the constant predictors. A record's score is in [0, 1] (a classifier: whether
the candidate predicts its label; a regressor: 1 - (y - f(x))^2 / 4 on the training
branch's scaled target, y and f(x) in [-1, 1]), and a regressor's released number is the
paired difference model - constant, bounded by :func:`prediction_gap_bound`. The release
adds Gaussian noise to the means of those per-record numbers, calibrated to their
replace-one sensitivity (:func:`noisy_scores`: sqrt(k) / m for k score columns;
:func:`noisy_difference_total`: 2 T / m, T <= H the released clip); the privacy argument of
the whole choice is in :mod:`dpopt.pipeline.selection`.

The per-record numbers are summed where the records are (:func:`score_totals` over one block
of rows, with a count of the records that break their bound): once in memory, chunk by
chunk for chunked data (:func:`held_out_totals`), and the noise is added once to the sums
(:func:`noisy_score_totals`, :func:`noisy_difference_total`), so both layouts release the
same thing. A record beyond its bound stops the release (the noise would be too small for
it): never expected, an internal error.

A regressor's clip (:func:`clipped_difference_split`). H bounds a record's score gap
|s_model - s_constant| = |f(x) - c| |2 y - f(x) - c| / 4 <= min(1, |f(x) - c|) over the whole
scaled domain (every feature at +-1 at once), so it is 1 on most tables while a record's
gap is typically a tenth of that or less, and the difference's noise 2 H / (m mu) is then far
above the scale of what it measures. So a quarter of the score release's mu^2
(:data:`GAP_SHARE`) first releases a histogram of the held-out records' score gaps on a
public grid (:data:`GAP_EDGES`; replacing one record moves one unit between two bins:
sensitivity sqrt(2)), the scan of the features' bounds reads its upper 1% bound T from the
noisy counts (post-processing), and each paired difference is clipped to [-T, T] (T <= H;
H where the scan does not stop) before the rest of mu^2 releases their mean with noise
2 T / (m mu_d): sensitivity 2 T / m, T a function of released numbers. The clipped mean
differs from the mean only on records whose gap exceeds T, at most about 1% of them beyond
the scan's own margin. The histogram is of the gaps themselves, not of a bound on them
(|f(x) - c|, which reads the features only and was the histogram until session 31): the
squared error's gaps are a factor |2 y - f(x) - c| / 4 below that bound, which the clip
then follows.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.data.chunked import _features
from dpopt.preprocessing._bounds import (
    DEFAULT_BIN_CONFIDENCE,
    DEFAULT_CONFIDENCE,
    DEFAULT_QUANTILES,
    release_counts,
)
from dpopt.privacy.mechanisms import noisy_scan

__all__ = ["candidates", "per_record_scores", "score_totals", "summed_over_records",
           "held_out_totals", "noisy_scores", "noisy_score_totals", "prediction_gap_bound",
           "noisy_difference_total", "gap_edges", "gap_counts", "noisy_gap_counts", "gap_clip",
           "clipped_difference_split", "GAP_EDGES", "GAP_SHARE"]

#: The public grid of the score gaps' histogram (:func:`noisy_gap_counts`): [0, 1e-3],
#: then 12 bins of a factor 10^(1/4) up to 1 (the scores are in [0, 1]: so are the gaps).
GAP_EDGES = np.concatenate([[0.0], 1e-3 * 10.0 ** (np.arange(13) / 4.0)])
#: The share of the score release's mu^2 that the gaps' histogram takes: the bound only
#: needs to be right within a bin, as the smallest histogram share of a range elsewhere
#: (:func:`dpopt.pipeline.mean_of_y.private_mean_of_y`).
GAP_SHARE = 0.25
#: The gaps' upper quantile level read by the scan (the features' bounds' level).
GAP_LEVEL = DEFAULT_QUANTILES[1]


def _outside_unit(scores):
    """Per record: whether a score is not in [0, 1] (the bound the noise assumes; NaN is not)."""
    return ~np.all((scores >= 0) & (scores <= 1), axis=1)


def _beyond(differences, bound):
    """Per record: whether a paired difference is not in [-bound, bound] (up to rounding;
    NaN is not)."""
    return ~(np.abs(differences) <= bound * (1 + 1e-9) + 1e-12)


def noisy_scores(per_record, mu, rng):
    """Mean of each column of ``per_record`` (values in [0, 1], m rows, k columns) plus
    N(0, sigma^2), sigma = sqrt(k) / (m mu): a Gaussian mechanism of multiplier 1 / mu
    (L2 sensitivity sqrt(k) / m under replace-one). Returns (noisy means, sigma)."""
    if np.any(_outside_unit(per_record)):
        raise RuntimeError("internal error: a per-record score outside [0, 1]; nothing is "
                           "released")
    return noisy_score_totals(per_record.sum(axis=0), per_record.shape[0], mu, rng)


def noisy_score_totals(totals, m, mu, rng):
    """:func:`noisy_scores` from the k column sums ``totals`` of m per-record scores in
    [0, 1] (checked where they were summed: :func:`score_totals`)."""
    k = len(totals)
    sigma = math.sqrt(k) / (m * mu)
    return np.asarray(totals, dtype=np.float64) / m + sigma * rng.standard_normal(k), sigma


def _margins(scaling, Xs, coef, intercept):
    """Margins of a candidate on the scaled features ``Xs`` (``scaling.transform``)."""
    columns = getattr(scaling, "columns", None)  # the screening route's kept columns:
    if columns is not None:  # its scaled features are those columns, its coef has all p
        coef = coef[columns]
    return np.asarray(Xs @ coef).ravel() + intercept


def candidates(auto, regression, fit_intercept, constant=None):
    """[(name, coef, intercept)] in the training branch's scaled units; the first is the
    model, the others constants (module docstring); ``constant`` is a regressor's noisy
    mean of the scaled target."""
    r = auto.result
    coef = np.asarray(r.coef, dtype=np.float64).ravel()
    zero = np.zeros_like(coef)
    out = [("model", coef, float(r.intercept))]
    if not fit_intercept:
        return out + [("zero", zero, 0.0)]
    if regression:
        return out + [("noisy mean of y", zero, float(constant))]
    return out + [("constant +1", zero, 1.0), ("constant -1", zero, -1.0)]


def per_record_scores(scaling, target, cands, X_val, y_val, regression):
    """Per-record scores in [0, 1] (module docstring), one column per released number:
    for a classifier with an intercept the two constants share one column (their scores
    sum to 1), so only the model's and the positive-label rate are released. ``scaling``,
    ``target``: the training branch's maps (``target`` None for a classifier)."""
    Xs = scaling.transform(X_val)  # once for all candidates
    margins = [_margins(scaling, Xs, c, b) for _, c, b in cands]
    if regression:
        y = np.clip(target.transform(y_val), -1.0, 1.0)  # exact bound despite rounding
        return np.column_stack([1.0 - np.square(y - np.clip(f, -1.0, 1.0)) / 4.0
                                for f in margins])
    hits = [(np.where(f > 0, 1.0, -1.0) == y_val).astype(np.float64) for f in margins]
    if len(cands) == 3:  # model, +1, -1: the score of -1 is 1 - that of +1
        return np.column_stack(hits[:2])
    return np.column_stack(hits)


def score_totals(X_val, y_val, *, scaling, target, cands, regression, bound, clip=None):
    """What the held-out release sums over one block of records: a regressor's paired
    differences model - constant (one column, each in [-bound, bound], then clipped to
    [-clip, clip] when a released ``clip`` <= bound is given), a classifier's score
    columns (each in [0, 1]); and, last, how many records break those bounds (0 unless
    something is wrong: the release then refuses). A row of the block's sums, so that in
    memory it is one call and out of core a sum over chunks (:func:`summed_over_records`)."""
    scores = per_record_scores(scaling, target, cands, X_val, y_val, regression)
    if regression:
        scores = scores[:, :1] - scores[:, 1:2]
        broken = _beyond(scores[:, 0], bound)
        if clip is not None:
            scores = np.clip(scores, -clip, clip)
    else:
        broken = _outside_unit(scores)
    return np.append(scores.sum(axis=0), np.count_nonzero(broken))


def _chunk_totals(xb, yb, *, totals_of, **kwargs):
    """``totals_of`` of one chunk (run on the workers: a module-level pure function)."""
    return totals_of(_features(xb), np.asarray(yb, dtype=np.float64)[:, 0], **kwargs)[None, :]


def summed_over_records(data, totals_of, width, **kwargs):
    """The sums ``totals_of(X, y, **kwargs)`` (a row of ``width`` numbers whose last counts
    the records that break the bound their release's noise assumes) over the records of
    ``data``: one call in memory, a sum over chunks out of core. Refuses (nothing is
    released) when any record broke its bound; returns the other sums."""
    if data.chunked:
        totals = data.raw._reduce(_chunk_totals, width, totals_of=totals_of, **kwargs)
    else:
        totals = totals_of(data.X, data.y, **kwargs)
    if totals[-1] != 0:
        raise RuntimeError("internal error: a per-record score beyond its bound; nothing is "
                           "released")
    return totals[:-1]


def held_out_totals(data, **kwargs):
    """:func:`score_totals` over the held-out records ``data`` (in memory, or chunked: one
    pass, summed over the chunks); refuses when a record broke its bound."""
    width = 2 if kwargs["regression"] else 3  # one or two columns, then the count
    return summed_over_records(data, score_totals, width, **kwargs)


def prediction_gap_bound(model, constant):
    """H = min(1, |b - c| + ||w||_1): a bound on |f(x) - c| over the scaled domain (every
    scaled feature in [-1, 1]: min-max then centred, narrowed, sparse or row-normalized),
    hence on each record's score difference |s_model - s_constant| <= min(1, |f(x) - c|)
    (with y, f(x) and c in [-1, 1] the difference of the scores 1 - (y - f)^2 / 4 is
    |f - c| |2 y - f - c| / 4 <= |f - c|, and both scores are in [0, 1]; clipping
    predictions to [-1, 1] only brings them closer). A function of released numbers only
    (the model, the constant): post-processing."""
    (_, w, b), (_, _, c) = model, constant
    return float(min(1.0, abs(b - c) + np.sum(np.abs(w))))


def noisy_difference_total(total, m, bound, mu, rng):
    """The mean of m per-record score differences in [-bound, bound], from their sum
    ``total`` (checked where they were summed: :func:`score_totals`), plus N(0, sigma^2),
    sigma = 2 bound / (m mu): replacing one record moves the mean by at most 2 bound / m
    (replace-one), so this is a Gaussian mechanism of multiplier 1 / mu, mu-GDP. A bound of
    H < 1 makes it 1/H times more precise than releasing the two scores (their difference
    has standard deviation 2 / (m mu)). Returns (noisy mean, sigma)."""
    if bound <= 0.0:  # the model is the constant: nothing to compare, nothing released
        return 0.0, math.inf
    sigma = 2.0 * bound / (m * mu)
    return float(total / m + sigma * rng.standard_normal()), sigma


def gap_edges(scale=1.0):
    """The gaps' grid: :data:`GAP_EDGES` with every edge above 0 times ``scale`` (a released
    or public number in (0, 1]) and, where ``scale`` < 1, a last bin [scale, 1], so that the
    grid still covers every gap in [0, 1]. The held-out check on a target range W / W_a times
    wider than the model's (:func:`dpopt.pipeline.choice.select_released`) has score gaps
    (W_a / W)^2 times smaller, |f - c| |2 y - f - c| / 4 with both factors in its units: its
    grid is scaled by that, else its clip T could not go below 1e-3 while the gaps did."""
    if not scale > 0.0:  # NaN or 0: np.histogram would count nothing
        raise ValueError(f"internal error: the gaps' grid scale must be positive, got {scale!r}")
    if scale >= 1.0:
        return GAP_EDGES
    return np.append(GAP_EDGES * scale, 1.0)


def gap_counts(X_val, y_val, *, scaling, target, cands, edges=GAP_EDGES):
    """The counts, on ``edges`` (:func:`gap_edges`), of one block's score gaps
    |s_model - s_constant| (:func:`per_record_scores` of the model ``cands[0]`` and the
    constant ``cands[1]``, in [0, 1]); and, last, 0 (no record can break a histogram's
    bound). Summed over chunks out of core."""
    scores = per_record_scores(scaling, target, cands[:2], X_val, y_val, True)
    gaps = np.minimum(np.abs(scores[:, 0] - scores[:, 1]), 1.0)
    counts = np.histogram(gaps, bins=edges)[0].astype(np.float64)
    return np.append(counts, 0.0)


def noisy_gap_counts(data, *, scaling, target, cands, mu, rng, edges=GAP_EDGES):
    """The held-out records' score gaps counted on ``edges`` (:func:`gap_counts`, in
    memory or summed over chunks) plus N(0, sigma^2) per count, sigma = sqrt(2) / mu:
    replacing one record moves one unit between two bins (replace-one sensitivity
    sqrt(2)), so this is the Gaussian mechanism of multiplier 1 / mu, mu-GDP. Returns
    (noisy counts, sigma)."""
    counts = summed_over_records(data, gap_counts, edges.size, scaling=scaling,
                                 target=target, cands=cands, edges=edges)
    noisy, sigma, _ = release_counts(counts[None, :], mu, rng)  # one histogram: sqrt(2) / mu
    return noisy[0], sigma


def gap_clip(noisy, sigma, m, bound, edges=GAP_EDGES):
    """The clip T read from the gaps' noisy counts on ``edges`` (post-processing): the scan
    of the features' bounds (its margins too) from the top at the :data:`GAP_LEVEL` of the m
    records; T is the upper edge of the bin where it stops, at most ``bound`` (H), and H
    where it does not stop."""
    stop = noisy_scan(noisy, (1.0 - GAP_LEVEL) * m, sigma, DEFAULT_CONFIDENCE, from_top=True,
                      bin_confidence=DEFAULT_BIN_CONFIDENCE)[0]
    return float(bound) if stop < 0 else min(float(bound), float(edges[stop + 1]))


def clipped_difference_split(data, *, scaling, target, cands, bound, mu, rng, gap_scale=1.0):
    """The regressor's score release at ``mu`` in two Gaussian mechanisms: the gaps'
    histogram with mu_q = sqrt(:data:`GAP_SHARE`) mu, giving the clip T
    (:func:`noisy_gap_counts`, :func:`gap_clip`), and the clipped differences' mean with
    mu_d = sqrt(1 - GAP_SHARE) mu (mu_q^2 + mu_d^2 = mu^2, so the release is still mu-GDP).
    A model equal to the constant (``bound`` H = 0) has nothing to compare: no histogram.
    ``gap_scale``: the grid's scale (:func:`gap_edges`). Returns (T, mu_d, the histogram's
    noise sigma = sqrt(2) / mu_q, or None)."""
    if bound <= 0.0:
        return bound, mu, None
    mu_q, mu_d = mu * math.sqrt(GAP_SHARE), mu * math.sqrt(1.0 - GAP_SHARE)
    edges = gap_edges(gap_scale)
    noisy, sigma = noisy_gap_counts(data, scaling=scaling, target=target, cands=cands,
                                    mu=mu_q, rng=rng, edges=edges)
    return gap_clip(noisy, sigma, data.shape[0], bound, edges), mu_d, sigma
