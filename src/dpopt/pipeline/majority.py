"""The constant classifier of the held-out choice (:mod:`dpopt.pipeline.selection`): its class
and rate read from releases on all rows, and the test of the model's held-out accuracy
against that rate.

Where the table layer released the labels' noisy counts on all n rows (selected labels, or
declared classes' counts), they name the majority class and give its rate for free
(:func:`released_majority`); the high-dimensional route releases the positive share with its
screen (:func:`screened_majority`). The held-out rows then release the model's accuracy
alone, one number of sensitivity 1/m, and :func:`against_known_rate` compares it with the
rate, at a margin that keeps the expected loss of releasing a worse model within
:data:`TOLERANCE` (:func:`tolerance_margin`). All of it is post-processing but the accuracy's
release, whose privacy is argued in :mod:`dpopt.pipeline.selection`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from scipy.optimize import brentq, minimize_scalar
from scipy.stats import norm

from dpopt.pipeline.held_out import noisy_score_totals

__all__ = ["ARGMAX_LOSS", "MARGIN", "TOLERANCE", "Majority", "against_known_rate", "rate_noise",
           "kept_rate", "released_majority", "screened_majority", "tolerance_margin",
           "worst_loss"]

#: The model is released when its noisy score beats the constant's by this many standard
#: deviations of the noisy difference.
MARGIN = 2.0
#: The do-no-harm tolerance in accuracy (docs/practitioner.md: a classifier scores at least
#: the majority rate minus this): the bound :func:`against_known_rate` keeps on the
#: worst-case expected loss of releasing the model.
TOLERANCE = 0.005


class Majority(NamedTuple):
    """The constant classifier as the held-out choice reads it: ``best`` its index among the
    candidates' constants (+1, -1); ``rate`` its accuracy over the records the model is scored
    on, with noise sd ``sd``; ``resolved`` whether the counts tell the majority; ``rates`` the
    two constants' accuracies (+1, -1); ``probability`` the rate of its class among the two
    classes' records, which the released constant predicts; ``source`` the release read."""

    best: int
    rate: float
    resolved: bool
    sd: float
    probability: float
    rates: tuple
    source: str = "the labels' noisy counts"


def released_majority(prior, n=None):
    """The :class:`Majority` read from the label counts the table layer released on all
    ``n`` rows (:func:`dpopt.preprocessing.labels.select_labels`: the kept labels' noisy
    counts, classes_[1] -> +1; declared classes'
    :func:`~dpopt.preprocessing.table_encoder.noisy_class_counts`), or None without them.
    Its rate is :func:`kept_rate`: over the n records where records of neither class are
    resolved, since the held-out choice scores those wrong for every candidate; its
    probability is the count over the two counts' sum (a record of neither class says
    nothing of which of the two is likelier). Post-processing of a release already in the
    composition: free, and its noise (sqrt(2) / mu_y on counts of all n rows) is far below
    the held-out rate's (one part in m). The held-out release then only compares the model
    with that constant."""
    counts = None if prior is None else prior.info.get("label_counts")
    if counts is None or len(counts) != 2:
        return None
    best = 0 if counts[1] >= counts[0] else 1  # candidates: model, constant +1, constant -1
    # resolved: the noisy difference of the counts (std sqrt(2) sigma) beats MARGIN of it
    sigma = prior.info["label_sigma"]
    resolved = abs(counts[1] - counts[0]) > MARGIN * math.sqrt(2.0) * sigma
    rate, sd = kept_rate(counts, sigma, n)
    probability = kept_rate(counts, sigma)[0]
    other = rate * max(min(float(c) for c in counts), 0.0) / max(max(counts), 1e-12)
    return Majority(best, rate, bool(resolved), sd, probability,
                    (rate, other) if best == 0 else (other, rate))


def kept_rate(counts, sigma, n=None):
    """(rate, its noise sd) of the majority constant from the k labels' noisy counts (noise
    sd ``sigma`` each) on all n rows: the largest count over N, their sum, whose noise is
    smaller than that of the count over n (:func:`rate_noise`) when every record holds one
    of the k labels. A record of no kept or declared label is scored wrong for every
    candidate on the held-out rows (:data:`~dpopt.preprocessing.labels.OTHER_LABEL`), and
    for the constant too, so its rate over the same records is the count over n: used when
    those records are resolved, n - N > MARGIN sqrt(k) sigma (the noise of n - N is
    sqrt(k) sigma), with noise sd sigma / n. Over N regardless, a table with most of its
    records outside the declared classes had its constant's rate overstated by n / N and
    kept the constant against a far better model even at epsilon = 100. ``n`` None: N.
    Post-processing of the counts and public n."""
    counts = [max(float(c), 0.0) for c in counts]
    total, top, k = max(sum(counts), 1e-12), max(counts), len(counts)
    if n is not None and n - total > MARGIN * math.sqrt(k) * sigma:
        return top / n, sigma / n
    rate = top / total
    return rate, rate_noise(sigma, rate, k, total)


def rate_noise(sigma, rate, k, total):
    """The standard deviation of a class rate r = c_b / N read from k noisy counts (each
    with noise sd ``sigma``, N their sum): r moves by ((1 - r) e_b - r sum_{o != b} e_o) / N,
    so sigma sqrt((1 - r)^2 + (k - 1) r^2) / N, to first order in the noise of N."""
    return sigma * math.sqrt((1.0 - rate) ** 2 + (k - 1) * rate ** 2) / total


def screened_majority(plan):
    """The :class:`Majority` read from the positive-class share the high-dimensional route
    released with its screen (:func:`dpopt.pipeline.feature_selection.fit_screened`: n_+ plus N(0, s^2) on the
    training rows, so a rate with noise s / n), or None off that route. A release of the
    training branch, already in its records: reading it is post-processing, and its noise is
    far below the held-out rate's on the m held-out rows (a part of n)."""
    screen = plan.get("screen")
    if not screen or "class_rate" not in screen:
        return None
    rate, sd = screen["class_rate"], screen["class_rate_sigma"]
    best = 0 if rate >= 0.5 else 1  # candidates: model, constant +1, constant -1
    top = max(rate, 1.0 - rate)
    return Majority(best, top, bool(abs(2.0 * rate - 1.0) > MARGIN * 2.0 * sd), sd, top,
                    (rate, 1.0 - rate), "the screen's class share")


def against_known_rate(total, m, mu, rng, rate, rate_sd):
    """The held-out choice of a classifier when an earlier release on all rows gives the
    majority class and its rate r (the labels' noisy counts, :func:`released_majority`; the
    screen's class share, :func:`screened_majority`): only the model's held-out accuracy is
    released, from its correct count ``total`` over m records (one column, sensitivity 1/m:
    one record's correctness flips at most once; sigma = 1 / (m mu)).

    The model is released when its noisy accuracy a beats r by the larger of

    * ``MARGIN`` standard deviations of the privacy noise, s_dp = sqrt(sigma^2 + rate_sd^2);
    * the least margin at which the worst-case expected loss against the constant,
      s max_u u Phi(-u - k) over a true loss of u s, stays within ``TOLERANCE``
      (:func:`tolerance_margin`), s = sqrt(s_dp^2 + a (1 - a) / m) counting the held-out
      sample's own noise (a from the release: post-processing). A paired comparison on the
      same rows has little sampling noise when the model mostly agrees with the constant;
      the model's accuracy alone keeps a (1 - a) / m, which dominates as mu grows, so this
      second margin holds the loss to the do-no-harm tolerance there.

    Returns (noisy accuracy, sigma, whether the model is released)."""
    (noisy,), sigma = noisy_score_totals([total], m, mu, rng)
    a = min(max(float(noisy), 0.0), 1.0)
    s_dp = math.hypot(sigma, rate_sd)
    s = math.sqrt(s_dp ** 2 + a * (1.0 - a) / m)
    margin = max(MARGIN * s_dp, s * tolerance_margin(TOLERANCE / s))
    return float(noisy), sigma, bool(noisy - rate > margin)


def worst_loss(k):
    """max_{u >= 0} u Phi(-u - k): the largest expected loss, in standard deviations s of a
    noisy estimate of a candidate's gain, of releasing it when that estimate exceeds k s,
    over a true loss of u s. 0.170 at k = 0 (a plain argmax, :data:`ARGMAX_LOSS`), falling
    towards 0 as k grows."""
    res = minimize_scalar(lambda u: -u * norm.cdf(-u - k), bounds=(0.0, 10.0), method="bounded")
    return float(-res.fun)


#: :func:`worst_loss` of a plain argmax (k = 0): 0.170, at u = 0.752.
ARGMAX_LOSS = worst_loss(0.0)


def tolerance_margin(ratio):
    """The least k >= 0 with :func:`worst_loss` (k) <= ``ratio``: the margin that keeps the
    expected loss of releasing a model worse than the constant within ``ratio`` standard
    deviations."""
    if ARGMAX_LOSS <= ratio:
        return 0.0
    return float(brentq(lambda k: worst_loss(k) - ratio, 0.0, 40.0, xtol=1e-6))
