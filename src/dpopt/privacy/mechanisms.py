"""Noise mechanisms. Each function states the sensitivity it assumes.

The caller passes the noise scale already multiplied by the sensitivity
(sigma = z * Delta); these helpers only draw, so that every draw comes from
the solver's ``numpy.random.Generator`` (invariant 6).

Private selection (report-noisy-max)
------------------------------------
:func:`report_noisy_max` releases the index of the largest noisy score.
Its guarantee is stated for a score vector s(D) in R^k whose entries each move
by at most ``Delta`` between neighbouring datasets, in any direction
(``|s_j(D) - s_j(D')| <= Delta`` for every j; the scores are *not* assumed
monotone, i.e. they need not all move the same way). Under that assumption,
:func:`report_noisy_max_scale` gives the noise scale that makes the released
index epsilon-DP and :func:`report_noisy_max_epsilon` the epsilon a given scale
actually achieves.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt._core.validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_positive_int,
    check_scalar,
)
from dpopt.privacy.accounting import ZCDP, Gaussian

RNM_NOISES = ("laplace", "gumbel")


def gaussian_noise(rng: np.random.Generator, sigma, size=None):
    """N(0, sigma^2) noise; with sigma = z * Delta (L2 sensitivity) this is the
    Gaussian mechanism accounted by :class:`dpopt.privacy.Gaussian` (z)."""
    return rng.normal(0.0, 1.0, size) * sigma


def laplace_noise(rng: np.random.Generator, scale, size=None):
    """Laplace(0, scale) noise; scale = b * Delta_1 gives :class:`dpopt.privacy.Laplace` (b)."""
    return rng.laplace(0.0, 1.0, size) * scale


def _check_rho(rho, name="rho"):
    return check_scalar(rho, name, low=0.0, low_open=True, allow_inf=True)


# ---------------------------------------------------------------------------
# private quantile (for the clipping threshold)


def noisy_scan(noisy_counts, tail_count, sigma, confidence, *, from_top, bin_confidence=None):
    """The confidence-margin scan of noisy histograms (post-processing, free).

    ``noisy_counts`` holds one noisy histogram per row (shape ``(k, bins)`` or
    ``(bins,)``, bins in increasing order of value), each count with Gaussian
    noise of standard deviation ``sigma``. Scanning each row from the top bin
    down (``from_top=True``) the noisy counts are accumulated; after ``j``
    bins the accumulated count has noise std ``sigma sqrt(j)``, and the scan
    stops at the first bin where it exceeds ``tail_count + confidence * sigma
    * sqrt(j)``. From the bottom (``from_top=False``) it stops at the first bin
    where the accumulated count reaches (``>=``) that threshold: the q-quantile
    is the smallest value with at least ``q m`` values at or below it, and the
    smallest with at most ``(1 - q) m`` values above it.

    Why a margin: over empty bins the accumulated noise is a random walk; the
    probability that it crosses ``c sqrt(j)`` standard deviations within the
    first ``J`` bins is 1.3-1.8% (c = 3), 0.3-0.4% (c = 3.5), 0.04-0.06% (c = 4)
    for J = 40..109 (simulated). Without the margin the scan would stop in an empty
    region at the edge of the public range. The price is a bias towards the
    bulk: the stop bin has about ``tail_count`` plus the margin values beyond it.

    Second rule (``bin_confidence = t``, optional): the scan also stops where the
    accumulated count *of the bins whose own noisy count exceeds t sigma* passes
    ``tail_count`` (same comparison). Bins that clear ``t sigma`` are real mass
    with high probability (an empty bin does with probability Phi(-t): 3.4e-6
    for t = 4.5, so at most 3.7e-4 over 109 bins), so this rule needs no
    margin growing with ``j``; it stops near the true level when the tail sits
    in a few well-populated bins, while the first rule still catches tails
    spread thinly over many bins. A scan stops at the first bin where either
    rule does: the false-stop probabilities add.

    Returns the index of the stop bin of every row (``-1`` where the scan never
    stops), as an int array of shape ``(k,)``.
    """
    c = np.atleast_2d(np.asarray(noisy_counts, dtype=np.float64))
    k, bins = c.shape
    tail = np.broadcast_to(np.asarray(tail_count, dtype=np.float64), (k,))[:, None]
    ordered = c[:, ::-1] if from_top else c
    acc = np.cumsum(ordered, axis=1)
    threshold = tail + confidence * sigma * np.sqrt(np.arange(1.0, bins + 1.0))
    hit = acc > threshold if from_top else acc >= threshold
    if bin_confidence is not None:
        kept = np.cumsum(np.where(ordered > bin_confidence * sigma, ordered, 0.0), axis=1)
        hit |= (kept > tail) if from_top else (kept >= tail) & (kept > 0)
    first = np.argmax(hit, axis=1)
    index = bins - 1 - first if from_top else first
    return np.where(hit.any(axis=1), index, -1)


def private_quantile(rng, values, quantile, rho, *, lower=1e-6, upper=1e6, bins=60,
                     confidence=3.0):
    """Private ``quantile`` of non-negative ``values`` from a noisy log-scale histogram.

    Mechanism: count the values in ``bins`` geometric bins between the public
    bounds ``lower`` and ``upper`` plus an underflow and an overflow bin, and
    add ``N(0, sigma_h^2)`` to every count. Under replace-one adjacency one
    record leaves one bin and enters another: L2 sensitivity ``sqrt(2)``, so
    ``sigma_h = 1 / sqrt(rho)`` makes the release ``rho``-zCDP (a Gaussian
    mechanism with noise multiplier ``1 / sqrt(2 rho)``, i.e. sqrt(2 rho)-GDP).

    Post-processing (free), by :func:`noisy_scan`. For a level ``quantile >= 1/2``
    the noisy counts are accumulated from the top bin down; after j bins the accumulated tail
    has noise std ``sigma_h sqrt(j)``, and the scan stops at the first edge
    where the noisy tail exceeds ``(1 - quantile) m + confidence * sigma_h sqrt(j)``
    (m = number of values, public). The estimate is the edge above that bin.
    Levels below 1/2 scan the cumulative counts from the bottom the same way.
    The margin makes the scan robust: over empty bins the noisy tail is a
    random walk, and crossing ``3 sqrt(j)`` standard deviations within 40
    bins has probability about 1.3% (simulated), whereas a noisy binary
    search can be sent out of range by one wrong decision. The price is a
    downward bias (more clipping) when the budget cannot resolve the tail:
    the returned edge has at least about ``(1 - quantile) m`` values above it,
    plus the margin. Resolution: one bin ratio ``(upper / lower)^(1 / bins)``.

    Returns ``(estimate, info)`` with ``info = {"records": [ZCDP(rho, 1)],
    "gaussian_records": [Gaussian(1/sqrt(2 rho), 1)], "sigma_count": sigma_h,
    "edges": edges}``; the estimate lies in [lower, upper].
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size < 1:
        raise ValueError(f"values must be a non-empty 1-d array, got shape {v.shape}")
    if not np.all(np.isfinite(v)) or np.any(v < 0):
        raise ValueError("values must be finite and non-negative")
    edges = quantile_edges(lower, upper, bins)
    return private_quantile_from_counts(rng, quantile_counts(v, edges), quantile, rho,
                                        lower=lower, upper=upper, bins=bins,
                                        confidence=confidence)


def quantile_edges(lower=1e-6, upper=1e6, bins=60):
    """The public geometric edges of :func:`private_quantile`'s histogram (validated)."""
    lower = check_scalar(lower, "lower", low=0.0, low_open=True)
    upper = check_scalar(upper, "upper", low=0.0, low_open=True)
    if not lower < upper:
        raise ValueError(f"need lower < upper, got lower={lower}, upper={upper}")
    bins = check_positive_int(bins, "bins")
    return np.geomspace(lower, upper, bins + 1)


def quantile_counts(values, edges):
    """Exact counts of non-negative ``values`` in the ``len(edges) + 1`` bins of
    :func:`private_quantile` (bin 0: v < lower; bin b: edges[b-1] <= v < edges[b];
    the last: v >= upper). Additive: counts of disjoint parts (chunks) sum to the counts of
    the whole."""
    return np.bincount(np.searchsorted(edges, values, side="right"), minlength=len(edges) + 1)


def private_quantile_from_counts(rng, counts, quantile, rho, *, lower=1e-6, upper=1e6, bins=60,
                                 confidence=3.0):
    """:func:`private_quantile` from exact counts already made by :func:`quantile_counts`
    with ``quantile_edges(lower, upper, bins)`` (e.g. summed over the chunks of a Dask
    array): the same release (sensitivity sqrt(2), rho-zCDP), scan, noise draws and
    records. The number of values m is the sum of the counts (public under replace-one)."""
    q = check_scalar(quantile, "quantile", low=0.0, high=1.0, low_open=True, high_open=True)
    rho = _check_rho(rho)
    edges = quantile_edges(lower, upper, bins)
    conf = check_scalar(confidence, "confidence", low=0.0)
    counts = np.asarray(counts)
    if counts.shape != (edges.size + 1,):
        raise ValueError(f"counts must have shape ({edges.size + 1},) (bins + 2), got "
                         f"{counts.shape}")
    sigma_h = 0.0 if math.isinf(rho) else 1.0 / math.sqrt(rho)
    noisy = counts + gaussian_noise(rng, sigma_h, counts.shape)
    m = int(round(float(counts.sum())))
    ext = np.concatenate([[lower], edges, [upper]])  # ext[b + 1] = upper end of bin b
    if q >= 0.5:
        b = noisy_scan(noisy, (1.0 - q) * m, sigma_h, conf, from_top=True)[0]
        est = lower if b < 0 else ext[b + 1]
    else:
        b = noisy_scan(noisy, q * m, sigma_h, conf, from_top=False)[0]
        est = upper if b < 0 else ext[b + 1]
    info = {"records": [ZCDP(rho, 1)],
            "gaussian_records": [Gaussian(math.inf if sigma_h == 0 else 1.0 / math.sqrt(2 * rho),
                                          1)],
            "sigma_count": sigma_h, "edges": edges}
    return float(min(max(est, lower), upper)), info


# ---------------------------------------------------------------------------
# advanced composition (the shuffle-model oracles of dpopt.solvers.heavy_tailed use it)


def advanced_composition_split(epsilon, delta, count):
    """Largest per-mechanism (eps0, delta0) whose ``count``-fold adaptive composition
    is (epsilon, delta)-DP by the advanced composition theorem (Dwork, Rothblum,
    Vadhan 2010): eps = sqrt(2 k ln(1/delta')) eps0 + k eps0 (e^eps0 - 1),
    delta = k delta0 + delta', with delta' = delta / 2 and delta0 = delta / (2k)
    (the paper's Algorithm 13 split). Also compared with basic composition
    (eps0 = eps / k, delta0 = delta / k) and the better one is returned."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    k = check_positive_int(count, "count")
    if k == 1:
        return epsilon, delta
    dprime = delta / 2.0

    def total(e0):
        return math.sqrt(2 * k * math.log(1 / dprime)) * e0 + k * e0 * math.expm1(e0)

    lo, hi = 0.0, epsilon
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if total(mid) <= epsilon:
            lo = mid
        else:
            hi = mid
    if lo >= epsilon / k:
        return lo, delta / (2.0 * k)
    return epsilon / k, delta / k


def report_noisy_max(scores, scale, rng: np.random.Generator, noise="gumbel") -> int:
    """Index of the largest of ``scores[j] + scale * N_j`` (N_j i.i.d., drawn from ``rng``).

    Parameters
    ----------
    scores : 1-d array of finite floats
        Scores computed from the private data, each of sensitivity ``Delta``
        (see the module docstring; no monotonicity is assumed).
    scale : float >= 0
        Noise scale b. ``0`` returns the exact argmax (first index on ties)
        and draws nothing: no privacy.
    rng : numpy Generator
    noise : "gumbel" or "laplace"

    Privacy (replace-one or add-remove: whichever adjacency ``Delta`` is stated for)
    ---------------------------------------------------------------------------------
    ``noise="gumbel"``: P[j] = exp(s_j / b) / sum_k exp(s_k / b) (the Gumbel-max
    trick), i.e. the exponential mechanism with utility s and epsilon = 2 Delta / b.
    Proof sketch: for neighbours D, D' the numerator ratio is at most
    exp(Delta / b) and the normaliser ratio at most exp(Delta / b), so
    P_D[j] <= exp(2 Delta / b) P_D'[j] (McSherry & Talwar 2007). It is moreover
    (2 Delta / b)-bounded-range: P_D[j] / P_D'[j] divided by P_D[i] / P_D'[i]
    equals exp(((s_j - s'_j) - (s_i - s'_i)) / b) <= exp(2 Delta / b), which
    gives rho = epsilon^2 / 8 zero-concentrated DP (Durfee & Rogers 2019;
    Cesar & Rogers 2021), a 4x smaller rho than the generic epsilon^2 / 2.

    ``noise="laplace"``: report-noisy-max with Laplace(b) noise, epsilon = 2 Delta / b.
    Proof sketch: fix the noise r_{-j} of the other entries and let r* be the
    smallest r_j for which j wins on D. On D', any r_j >= r* + 2 Delta makes
    s'_j + r_j >= s_j + r* + Delta >= max_{k != j}(s_k + r_k) + Delta
    >= max_{k != j}(s'_k + r_k), so j also wins (ties have probability 0); the
    Laplace tail gives
    P[r_j >= r* + 2 Delta] >= exp(-2 Delta / b) P[r_j >= r*], hence
    P_D'[j] >= exp(-2 Delta / b) P_D[j]. The factor 2 is needed because scores
    may move in opposite directions; Dwork & Roth's Claim 3.9 (scale Delta /
    epsilon) assumes monotone counting queries and does not apply here.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or scores.shape[0] == 0:
        raise ValueError(f"scores must be a non-empty 1-d array, got shape {scores.shape}")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    scale = check_scalar(scale, "scale", low=0.0)
    check_choice(noise, "noise", RNM_NOISES)
    if scale == 0.0:
        return int(np.argmax(scores))
    draw = rng.gumbel(0.0, 1.0, scores.shape[0]) if noise == "gumbel" else \
        rng.laplace(0.0, 1.0, scores.shape[0])
    return int(np.argmax(scores + scale * draw))


def report_noisy_max_scale(sensitivity, epsilon, noise="gumbel") -> float:
    """Noise scale b = 2 Delta / epsilon making :func:`report_noisy_max` epsilon-DP.

    Valid for scores of sensitivity ``Delta`` in the sense of the module
    docstring (non-monotone), for both noises. ``epsilon = inf`` gives 0.
    """
    sensitivity = check_scalar(sensitivity, "sensitivity", low=0.0)
    epsilon = check_epsilon(epsilon, target=False)
    check_choice(noise, "noise", RNM_NOISES)
    if math.isinf(epsilon):
        return 0.0
    return 2.0 * sensitivity / epsilon


def report_noisy_max_epsilon(sensitivity, scale, noise="gumbel") -> float:
    """The epsilon that :func:`report_noisy_max` with ``scale`` provably achieves:
    2 Delta / b (``inf`` for b = 0). This is what to report for the DP-GCD
    paper's calibration b = Delta / epsilon' (which gives 2 epsilon', not epsilon')."""
    sensitivity = check_scalar(sensitivity, "sensitivity", low=0.0)
    scale = check_scalar(scale, "scale", low=0.0)
    check_choice(noise, "noise", RNM_NOISES)
    if sensitivity == 0.0:
        return 0.0
    if scale == 0.0:
        return math.inf
    return 2.0 * sensitivity / scale


def exponential_mechanism_zcdp(epsilon) -> float:
    """rho = epsilon^2 / 8: the zCDP of an epsilon-DP exponential mechanism (it is
    epsilon-bounded-range; Cesar & Rogers 2021, Lemma 3.2 with Durfee & Rogers 2019)."""
    epsilon = check_scalar(epsilon, "epsilon", low=0.0, allow_inf=True)
    return epsilon * epsilon / 8.0


def advanced_composition_epsilon(epsilon0, count, delta) -> float:
    """Advanced composition (Dwork & Roth 2014, Thm 3.20) of ``count`` adaptive
    epsilon0-DP mechanisms: (eps, delta)-DP with
    eps = sqrt(2 k log(1/delta)) epsilon0 + k epsilon0 (e^epsilon0 - 1)."""
    epsilon0 = check_scalar(epsilon0, "epsilon0", low=0.0, allow_inf=True)
    count = int(check_scalar(count, "count", low=0, integer=True))
    delta = check_scalar(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    if math.isinf(epsilon0):
        return math.inf
    return (math.sqrt(2.0 * count * math.log(1.0 / delta)) * epsilon0
            + count * epsilon0 * math.expm1(epsilon0))


def advanced_composition_epsilon0(epsilon, delta, count) -> float:
    """Largest epsilon0 whose ``count``-fold advanced composition is (epsilon, delta)-DP.

    Solved numerically (the DP-GCD paper's eq. (2) with count = 2T, Remark 4.3);
    the result never overshoots: ``advanced_composition_epsilon(result) <= epsilon``.
    """
    from scipy.optimize import brentq

    epsilon = check_epsilon(epsilon)
    count = int(check_scalar(count, "count", low=1, integer=True))
    if math.isinf(epsilon):
        return math.inf

    def gap(e0):
        return advanced_composition_epsilon(e0, count, delta) - epsilon

    hi = 1.0
    while gap(hi) < 0:
        hi *= 2.0
    e0 = brentq(gap, 0.0, hi, xtol=1e-15, rtol=1e-14)
    while gap(e0) > 0:
        e0 = np.nextafter(e0, 0.0) * (1 - 1e-14)
    return float(e0)
