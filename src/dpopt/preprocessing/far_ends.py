"""A far end of the target's range is kept only on fresh evidence: a noisy count of the
records beyond it.

Why. The scans that read a range from a released histogram (:mod:`._bounds`) cross about
fifty empty bins on each side of the data before they reach it, and stop in that empty
region by noise alone in about 1e-3 of scans (at the default confidences 4 and 4.5). For a
feature it costs little: its range is read again, centred. The target's range sets the
scale of the model and of the constant alike: a lower end at -2.9e7 for a target in
[-5, 5] multiplies every released number's noise, in y's units, by 10^6 (R^2 -1.8e8 on
fresh data, at one seed in about 800). One reading of one release cannot tell such a
stop from a real cluster of records whose bin stands just above the threshold (reading
the same counts more strictly cuts real far clusters: docs/preprocessing.md); a second,
independent release can.

Which ends are far (post-processing, free). Each end's *inner end* is the same scan run
again from the bin next to it, towards the data, with a fresh walk (the end's bin and the
noise accumulated on the way to it left behind, and the exact zero bin left out: a point
mass of zeros says nothing of where the other values end): after a false stop it crosses
the rest of the empty region and stops at the data; next to a heavy tail it stops within a
bin or two. A restarted scan that never stops, or stops beyond the other end's bin, gives
that bin's edge (the least range the reading supports). The lower end is far when it widens
the range more than ``FAR_FACTOR`` = 10^1.5 times: ``upper - lower > 10^1.5 (upper - inner
lower)``, and the upper end likewise: more than the decade a restarted scan may cross before
a thin real tail adds up to its margin. A far end whose own released bin and its neighbour
towards the data hold q n records plus ``EVIDENT`` = 6 deviations of their summed noise is
not far after all: noise alone gets there with probability 1e-9 (a 0/1 target's upper end,
whose restarted scan stops in the zero bin; a cluster of thousands of records). That
stricter reading of the same release can only spare a count, never cut an end.

Mechanism (only when an end is far). The exact number of records in the far end's bin, the
next bin towards the data (a cluster astride a bin edge) and beyond (for the lower end, the
records in those two bins or any lower one; for the upper, likewise above), plus
N(0, sigma_c^2) noise, sigma_c = Delta / mu: under replace-one adjacency one record moves
each count by at most 1, so Delta = 1 for one end and sqrt(2) for both (add-remove: 1 per
count, the record is conservative there). mu-GDP, recorded as ``Gaussian(1 / mu)``. Whether
it runs is a function of the released histogram; the caller takes its mu out of a later step
of the same fit when it runs, so both branches spend the same total (fully adaptive
composition of Gaussian mechanisms, Smith & Thakurta 2022); before objective perturbation,
whose calibration must not depend on the data, it is taken in any case.

Decision (post-processing). A scan's end claims that at least ``q n`` records (q = 1%) lie
at or beyond it. The far end is kept when its noisy count reaches ``q n / 2 +
CONFIRM_CONFIDENCE sigma_c`` (2.5 standard deviations): a stop on noise over an empty region
(true count 0) passes with probability at most Phi(-2.5) = 0.6%. A real cluster passes when
it holds that many records and a few sigma_c more; the scan itself stops on a cluster only
when its count reaches about q n plus the scan's margin, or 4.5 of the histogram's noise
deviations (sqrt(2) sigma_c at the default mu), so the clusters the scan finds pass unless
q n / 2 is large against sigma_c and the cluster holds barely q n. Otherwise the end is
replaced by its inner end. With no budget for the count (``mu`` None: a caller with nothing
left to spend) a far end is replaced by its inner end where the restarted scan found the data
inside the range, and kept where it did not (a zero-inflated target's thin nonzero values
look alike whether its upper end is real or noise: only a count tells them apart).
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.preprocessing._bounds import (
    DEFAULT_BIN_CONFIDENCE,
    DEFAULT_CONFIDENCE,
    DEFAULT_GRID,
    DEFAULT_QUANTILES,
    feature_histograms,
)
from dpopt.privacy.accounting import Gaussian
from dpopt.privacy.mechanisms import gaussian_noise, noisy_scan

__all__ = ["FAR_FACTOR", "CONFIRM_CONFIDENCE", "EVIDENT", "far_ends", "noisy_beyond", "confirmed_range",
           "confirm_mu", "target_histogram"]

#: An end is far when it makes the range more than this many times wider than its inner end:
#: a decade and a half (six bins of the default grid), beyond the decade that a restarted
#: scan may cross before a thin real tail adds up to its margin.
FAR_FACTOR = 10.0 ** 1.5
#: The fresh count keeps a far end at ``q n / 2`` plus this many of its noise's deviations.
CONFIRM_CONFIDENCE = 2.5
#: A far end whose own released counts stand this many noise deviations above q n is kept
#: without a count (:func:`_evident`).
EVIDENT = 6.0


def confirm_mu(mu_histogram, mu_next):
    """The mu of the count, out of a later step's ``mu_next``: the histogram's own mu (its
    noise then sqrt(2) times smaller than a bin's, for one end), at most half of
    ``mu_next`` squared."""
    return min(mu_histogram, mu_next / math.sqrt(2.0))


def target_histogram(y, grid=DEFAULT_GRID):
    """The exact histogram of a 1-d target on ``grid`` (what the count reads, in memory)."""
    return feature_histograms(np.asarray(y, dtype=np.float64)[:, None], [0], grid)[0]


def _stop_bins(lower, upper, ends):
    """The stop bins of a reading (``lower``, ``upper``), -1 where there is none (the scans
    round outwards to bin edges; the coarser readings' edges are edges of ``grid`` too). Two
    bins share an end where the grid's exact zero bin and the overflow bins meet their
    neighbours: the lower end's bin is the inner one of the two, the upper end's likewise, so
    that the count covers both and the restarted scan begins past both. ``ends``: the grid's
    (lower ends, upper ends) of its bins."""
    lo_end, hi_end = ends
    b_lo = np.flatnonzero(lo_end == lower)
    b_hi = np.flatnonzero(hi_end == upper)
    return (int(b_lo[-1]) if b_lo.size else -1), (int(b_hi[0]) if b_hi.size else -1)


def far_ends(noisy, sigma, n, lower, upper, *, grid=DEFAULT_GRID, quantiles=DEFAULT_QUANTILES):
    """Which ends of the reading (``lower``, ``upper``) of the noisy histogram ``noisy`` (one
    row of ``grid``'s bins, noise std ``sigma``, public ``n``) are far (module docstring).
    Returns ``{"lower": (stop bin, inner end, found), "upper": ...}`` for the far ends only
    (post-processing). A restarted scan that never stops, or stops at or beyond the other
    end's bin, gives the other end's bin as the inner end (the least range the reading
    supports) and ``found`` False: the reading then holds no evidence that the data end
    elsewhere, only a count can tell."""
    noisy = np.ravel(np.asarray(noisy, dtype=np.float64))
    lo_end, hi_end = ends = grid.bin_ends()
    b_lo, b_hi = _stop_bins(lower, upper, ends)
    if b_lo < 0 or b_hi < 0 or b_lo >= b_hi:
        return {}
    lo_q, hi_q = quantiles
    scan = dict(sigma=sigma, confidence=DEFAULT_CONFIDENCE, bin_confidence=DEFAULT_BIN_CONFIDENCE)
    rest = noisy.copy()
    rest[grid.zero_bin] = 0.0  # the exact zeros say nothing of where the other values end
    r_lo = int(noisy_scan(rest[b_lo + 1:], lo_q * n, from_top=False, **scan)[0])
    r_hi = int(noisy_scan(rest[:b_hi], (1.0 - hi_q) * n, from_top=True, **scan)[0])
    s_lo, s_hi = b_lo + 1 + r_lo, r_hi  # the restarted scans' stop bins
    near_zero = {grid.zero_bin - 1, grid.zero_bin, grid.zero_bin + 1}
    # found: stopped inside the range, or on the other end's bin (the data in one bin), but
    # not beside the zeros, which the restarts leave out
    found_lo = r_lo >= 0 and (s_lo < b_hi or (s_lo == b_hi and b_hi not in near_zero))
    found_hi = r_hi >= 0 and (s_hi > b_lo or (s_hi == b_lo and b_lo not in near_zero))
    inner_lo = lo_end[s_lo] if found_lo else lo_end[b_hi]
    inner_hi = hi_end[s_hi] if found_hi else hi_end[b_lo]
    far = {}
    if upper - lower > FAR_FACTOR * (upper - inner_lo) and not _evident(noisy, sigma, n, b_lo, +1, lo_q):
        far["lower"] = (b_lo, float(inner_lo), bool(found_lo))
    if upper - lower > FAR_FACTOR * (inner_hi - lower) and not _evident(noisy, sigma, n, b_hi, -1,
                                                                      1.0 - hi_q):
        far["upper"] = (b_hi, float(inner_hi), bool(found_hi))
    return far


def _evident(noisy, sigma, n, b, towards, q):
    """Whether the released counts of the stop bin ``b`` and its neighbour towards the data
    hold at least q n records plus ``EVIDENT`` standard deviations of their summed noise
    (sigma sqrt(2)): noise alone reaches that with probability Phi(-6) = 1e-9 per pair of
    bins, so such an end needs no count (a 0/1 target's upper end, a cluster of thousands).
    A stricter reading of the same release can only spare a count, never cut an end."""
    pair = noisy[b] + noisy[b + towards]
    return bool(pair >= q * n + EVIDENT * sigma * math.sqrt(2.0))


def noisy_beyond(counts, stops, mu, rng):
    """The mechanism: for each end of ``stops`` (``{"lower": bin, "upper": bin}``, one or
    both), the number of records of the exact histogram ``counts`` in that bin, the next one
    towards the data (a cluster astride a bin edge) and beyond, plus N(0, sigma_c^2) noise
    with sigma_c = sqrt(len(stops)) / mu (replace-one: each count moves by at most 1).
    Returns (noisy counts in the order of ``stops``, sigma_c)."""
    exact = np.ravel(counts)
    beyond = {"lower": lambda b: exact[:b + 2].sum(), "upper": lambda b: exact[max(b - 1, 0):].sum()}
    true = np.array([beyond[end](b) for end, b in stops.items()], dtype=np.float64)
    sigma_c = math.sqrt(len(stops)) / mu
    return true + gaussian_noise(rng, sigma_c, true.shape), sigma_c


def confirmed_range(noisy, sigma, n, lower, upper, mu, rng, counts, *, grid=DEFAULT_GRID,
                    quantiles=DEFAULT_QUANTILES):
    """The range (``lower``, ``upper``) read from the noisy histogram ``noisy`` with each far
    end confirmed by a fresh count or replaced by its inner end (module docstring).

    ``counts``: a function of no argument returning the exact histogram of the same values
    on ``grid`` (called only when an end is far: on chunked data it is a pass). ``mu``: the
    count's Gaussian-DP mu, or None (nothing to spend: a far end is replaced where the
    restarted scan found the data inside, kept otherwise). Returns
    ``(lower, upper, records, note)``: ``records`` is ``[Gaussian(1 / mu)]`` when the count
    was released, else ``[]``; ``note`` None when no end was far, else a dict for the
    fit's report (``{"lower": "kept" or "cut", ...}``)."""
    far = far_ends(noisy, sigma, n, lower, upper, grid=grid, quantiles=quantiles)
    if not far:
        return lower, upper, [], None
    ends = dict(zip(("lower", "upper"), (lower, upper)))
    note, records = {}, []
    if mu is None or mu <= 0.0:  # cut only where the restarted scan found the data inside
        kept = {end: not found for end, (_, _, found) in far.items()}
    else:
        released, sigma_c = noisy_beyond(counts(), {e: b for e, (b, _, _) in far.items()}, mu,
                                         rng)
        tail = {"lower": quantiles[0] * n, "upper": (1.0 - quantiles[1]) * n}
        kept = {end: bool(c >= 0.5 * tail[end] + CONFIRM_CONFIDENCE * sigma_c)
                for end, c in zip(far, released)}
        records.append(Gaussian(1.0 / mu, 1))
    for end in far:
        note[end] = "kept" if kept[end] else "cut"
        if not kept[end]:
            ends[end] = far[end][1]
    lower, upper = sorted((ends["lower"], ends["upper"]))  # two inner ends may cross
    return lower, upper, records, note
