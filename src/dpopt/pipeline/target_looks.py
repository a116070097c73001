"""The looks at a regression target's range after its first histogram, and the plan's budget
moves that the releases decided by an earlier one's outcome make (:func:`from_model`).

A range read on the public log grid places the target within a factor of one bin of its
magnitude, not within its spread (a target near 40 +- 2.5 gets [31.6, 56.2], a year near
2005 +- 8 gets [1778, 3162]). A look releases the histogram of y clipped to that range on
equal bins (:func:`dpopt.preprocessing._refine.refined_bounds`: sensitivity sqrt(2) under
replace-one, a Gaussian record) and reads narrower bounds from it. How many bins a look's
mu resolves (:func:`refine_bins`), whether the model path takes a first look
(:func:`refine_mu`) and further ones (:func:`looks_at_target`), and when a narrow band
far from 0 is reported (:func:`narrow_band`) are functions of public sizes and released
values only; which looks run depends on earlier releases, and their mu^2 add up within the
plan's (fully adaptive composition of Gaussian mechanisms, Smith & Thakurta 2022). The
constant's own looks are in :func:`dpopt.pipeline.mean_of_y.private_mean_of_y`. Where the
first histogram does not locate the target at all (a target centred near 0 splits its records
between the two signs of the grid), :func:`dpopt.pipeline.second_look.target_second_look` releases it once
more on the same grid, pooled with the first.
"""

from __future__ import annotations

import math

from dpopt.preprocessing._bounds import DEFAULT_BIN_CONFIDENCE
from dpopt.preprocessing._refine import REFINE_BINS, concentrated
from dpopt.preprocessing.shares import SHARES

__all__ = ["MIN_REFINE_BINS", "NARROWING", "NARROW_BAND", "RESOLUTION", "from_model",
           "keeps_least", "spares", "least_refine_mu", "look_estimates", "looks_at_target",
           "narrow_band", "narrowed",
           "pooled", "read_again", "refine_bins", "refine_mu", "refine_resolvable", "weighable"]


def refine_resolvable(n, mu_refine):
    """Whether :func:`refined_bounds` at ``mu_refine`` can narrow a range on its 16 bins,
    from public n and mu: ``mu_refine >= least_refine_mu(n)``."""
    return mu_refine >= least_refine_mu(n)


def least_refine_mu(n, bins=REFINE_BINS):
    """The least mu at which :func:`refined_bounds` can narrow a range of n values on
    ``bins`` equal bins: a bulk that fills half of them (a narrowing by 2, the least that
    pays for the budget the step takes) puts about 2n/bins records in each, and a bin is
    trusted when its noisy count exceeds t sigma, sigma = sqrt(2) / mu (the rule of
    :func:`bounds_resolvable`): 2n/bins >= t sqrt(2) / mu."""
    return (bins / 2) * DEFAULT_BIN_CONFIDENCE * math.sqrt(2.0) / n


#: The fewest equal bins a look at the target's range reads (:func:`refine_bins`).
MIN_REFINE_BINS = 4


def refine_bins(n, mu_refine):
    """The most equal bins, at most 16, on which a look at ``mu_refine`` reads a range of n
    values (the inverse of :func:`least_refine_mu`: B = 2 n mu / (t sqrt 2)), or 0 below
    :data:`MIN_REFINE_BINS`. Public n and mu only."""
    bins = min(REFINE_BINS, int(math.floor(2.0 * n * mu_refine * (1.0 + 1e-9)
                                           / (DEFAULT_BIN_CONFIDENCE * math.sqrt(2.0)))))
    return bins if bins >= MIN_REFINE_BINS else 0


#: A look at the target's range is followed by another when it narrowed the range by at
#: least this factor (:func:`narrowed`).
NARROWING = 2.0 * math.sqrt(2.0)


#: The looks stop at a range narrower than this share of its magnitude (:func:`narrowed`).
RESOLUTION = 1e-9


def narrowed(lower, upper, was):
    """Whether a look narrowed a range ``was`` wide to ``[lower, upper]`` by at least
    :data:`NARROWING` (released bounds only). The look's equal bins locate the values
    within a bin or two, not their spread: where they narrowed the range that much, the
    values may fill far less of the new one, and a further look, whose budget costs the
    mean (or the model) a factor sqrt(2) of noise at most, can narrow it by more than that
    again; where they did not, the range is about as wide as the values and the looks
    stop. They stop too at a range narrower than :data:`RESOLUTION` of its magnitude: a
    constant target narrows by 16 at every look, and its equal bins would soon fall below
    the spacing of floating-point numbers (an independent audit, session 28: the fit
    failed after 17 looks at y = 2005 on 20,000 rows)."""
    width = upper - lower
    return (width > RESOLUTION * max(abs(lower), abs(upper)) and NARROWING * width <= was)


def narrow_band(auto):
    """[lower, upper], the private range a regressor's target was scaled to, when it is a
    narrow band far from 0: one sign, its ends within two bins of the log grid of each other
    (:func:`~dpopt.preprocessing._refine.concentrated`: a factor 3.16); else None. The grid
    places such a target within a factor of one bin (1.78) of its magnitude, not within its
    spread; the looks narrow it while they can (:func:`looks_at_target`), which at a few
    hundred rows and epsilon <= 1 still leaves a year near 2005 with a spread of 8 in 10 to
    25 of its standard deviations, and the model's and the constant's noise grow with that
    width (an independent fuzz, session 28: R^2 down to -100 before the looks went on, -4
    after, at n = 375 and epsilon = 0.5). A public range or offset removes it, which the
    report and a ColumnWarning then say (:data:`NARROW_BAND`). A function of released
    values (post-processing); None with a public target range."""
    target = getattr(auto, "target", None)
    if (target is None or not target.half_width > 0 or auto.plan.get("public_target")
            or not concentrated(target.lower, target.upper)):
        return None
    return [float(target.lower), float(target.upper)]


#: The line of a regression target whose range is a narrow band far from 0 (:func:`narrow_band`).
NARROW_BAND = ("the target's private range [{0:.4g}, {1:.4g}] is a narrow band far from 0: "
               "ranges are located on a logarithmic grid, so when y varies much less than its "
               "size (a year, a temperature, a score) the model and the constant carry noise in "
               "proportion to that range's width, many times y's spread; give the target's "
               "public range (target_bounds=(lower, upper)) or subtract a public offset from y "
               "before fitting")


def from_model(mus, step, mu):
    """Give plan ``step`` the mu ``mu`` out of the model's (a release decided by an earlier
    one's outcome): sum of mu^2 unchanged (fully adaptive composition, as
    :func:`dpopt.pipeline.scaling._to_model`).
    A step given mu twice holds their mu^2 summed (the target's further looks)."""
    mus[step] = math.hypot(mus.get(step, 0.0), mu)
    mus["model"] = math.sqrt(max(mus["model"] ** 2 - mu ** 2, 0.0))


def keeps_least(mu, share, least):
    """Whether a model of Gaussian-DP ``mu`` that gives ``share`` of its mu^2 to releases
    keeps at least ``least`` (the mu of the smallest usable epsilon at the fit's delta), with
    a relative margin of 1e-9 for the rounding of the squares."""
    return mu ** 2 * (1.0 - share) >= least ** 2 * (1.0 + 1e-9)


def spares(model, mu, least):
    """Whether a release of ``mu`` taken out of the ``model``'s mu (a step decided by an
    earlier release's outcome) leaves the model at least half its mu^2 (a model left with
    less loses more to its noise than the step gains) and :func:`keeps_least`'s floor."""
    return mu ** 2 <= 0.5 * model ** 2 and keeps_least(model, (mu / model) ** 2, least)


def refine_mu(n, mus, least=0.0):
    """The mu of the model path's second look at the target's range, or None.

    The model's noise, in the target's units, is proportional to the width of the
    target's range, so a range that the log grid left ten standard deviations wide (a
    target of 40 +- 2.5 in [31.6, 56.2]) costs the model what a 3-times narrower one
    would not; and whatever the width, each end is rounded outwards to a bin edge, a
    factor up to 1.78 (a price whose 99% quantile is 244,000 gets 316,228: its top bin
    alone is 44% of the upper end). The second look (:func:`refined_bounds`) takes the larger of
    ``SHARES["target_bounds"]`` of the whole mu^2 and the least mu at which
    :func:`least_refine_mu`, out of the model's own mu^2, and only while the
    model keeps at least half of it (its noise grows by at most sqrt(2), less than the
    narrowing it buys). Whether it runs depends on the released target bounds; the
    total mu^2 is the same on both branches (fully adaptive composition, Smith &
    Thakurta 2022). ``mus`` is the plan's split (:func:`split_mu`); ``least``: the mu the
    model must keep (the smallest usable epsilon's at the fit's delta, public), so that a
    look never turns a fit the plan admits into a refused one."""
    whole = math.sqrt(sum(m ** 2 for m in mus.values()))
    mu_r = max(whole * math.sqrt(SHARES["target_bounds"]), least_refine_mu(n))
    return mu_r if spares(mus["model"], mu_r, least) else None


def read_again(data, lo, hi, rng, records, further_mu, first_mu=None):
    """The looks at a target's range ``[lo, hi]``, the one loop of both paths: a look at
    ``first_mu`` (if given), then one at each mu that ``further_mu()`` gives (it spends it,
    or returns None to stop) while the last look :func:`narrowed` the range. Each look reads
    ``data.refined_target_bounds`` on :func:`refine_bins` of its mu and appends its record
    to ``records``. Returns (lo, hi, the looks' RefinedRanges in order)."""
    mu, looks = first_mu, []
    while hi > lo:
        mu = mu if mu is not None else further_mu()
        if mu is None:
            break
        was = hi - lo
        look = data.refined_target_bounds(lo, hi, mu, rng, refine_bins(data.shape[0], mu))
        lo, hi = look.lower, look.upper
        records.append(look.record)
        looks.append(look)
        mu = None
        if not narrowed(lo, hi, was):
            break
    return lo, hi, looks


def look_estimates(looks):
    """The looks' own estimates of the mean of y (:func:`~dpopt.preprocessing._refine.look_mean`),
    for :func:`pooled`: (``RefinedRange.mean``, the root of its noise's variance plus its
    rounding bound squared) in y's units. Weighted by that bound on their mean squared error,
    a look can only lower the pooled error bound: an estimate of error at most e_l pooled
    with the noisy mean's (sd e_d) has error at most e_d e_l / sqrt(e_d^2 + e_l^2) < e_d,
    whatever the rounding. A look that did not narrow the range is then not lost: its
    histogram carries about as much of the mean as a noisy mean at its mu would, where
    otherwise a look costs the mean a factor sqrt(2) of noise (the price that made the looks
    a loss on targets the grid had already placed to within their spread). A look whose
    values sat in a bin or two of its range (a narrow band on the grid's range) has a large
    rounding bound and weighs little."""
    return [(look.mean, math.hypot(look.mean_sd, look.mean_rounding)) for look in looks]


def weighable(value, error):
    """Whether :func:`pooled` weighs an estimate: a finite value, a finite positive error."""
    return error is not None and math.isfinite(value) and math.isfinite(error) and error > 0.0


def pooled(estimates):
    """(mean, error): the average of independent estimates of one mean, ``estimates`` =
    [(value, error), ...], weighted by 1 / error^2 (their noise sds, or bounds on their root
    mean squared error), and the error of the average; None when no estimate has a finite
    positive error and a finite value. The weights are relative to the smallest error, so
    that errors near the ends of the floating-point range neither overflow nor underflow.
    Post-processing where the errors are public (they follow from n, the mus and released
    ranges)."""
    found = [(float(m), float(s)) for m, s in estimates if weighable(m, s)]
    if not found:
        return None
    least = min(s for _, s in found)
    weights = [(least / s) ** 2 for _, s in found]
    total = math.fsum(weights)
    try:  # values near the largest float can overflow their weighted sum
        mean = math.fsum(w * m for w, (m, _) in zip(weights, found)) / total
    except OverflowError:
        return None
    return (mean, least / math.sqrt(total)) if math.isfinite(mean) else None


def looks_at_target(data, lo, hi, mus, rng, gaussian_model, columns_note, records, least=0.0):
    """The model path's looks at the target's range ``[lo, hi]`` (:func:`read_again`):
    (lo, hi) narrowed.

    The first is :func:`refine_mu`'s, on 16 equal bins, its mu out of the model whatever the
    range (objective perturbation's calibration may not depend on it). Further looks run for
    a Gaussian model only (fully adaptive composition: their mu is decided by released
    ranges, Smith & Thakurta 2022): a first one where :func:`refine_mu` declines and the
    range is :func:`~dpopt.preprocessing._refine.concentrated` (a narrow band far from 0,
    which the log grid places within a factor of its magnitude, not of its spread), and
    another each time a look narrowed the range by :data:`NARROWING` or more
    (:func:`narrowed`). Each takes half of what the model can still give while it keeps
    half of its mu^2 from before the looks (:func:`_further_look_mu`), on as many bins as
    that resolves (:func:`refine_bins`), and never below ``least``. One Gaussian record each
    (:func:`refined_bounds`)."""
    n, model0 = data.shape[0], mus["model"]
    first = refine_mu(n, mus, least)
    if first is not None:
        from_model(mus, "target_refine", first)
    elif not concentrated(lo, hi):
        return lo, hi

    def further_mu():
        mu = _further_look_mu(n, mus, model0, least) if gaussian_model else None
        if mu is not None:
            from_model(mus, "target_refine", mu)
        return mu

    lo, hi, looks = read_again(data, lo, hi, rng, records, further_mu, first)
    if looks:
        last = looks[-1]
        columns_note["target_spread"], columns_note["target_scale"] = last.spread, last.scale
        found = pooled(look_estimates(looks))
        if found is not None:
            columns_note["target_look_mean"] = list(found)
    if len(looks) > 1:
        columns_note["target_looks"] = len(looks)
    return lo, hi


def _further_look_mu(n, mus, model0, least=0.0):
    """The mu of a further look at the target's range (:func:`looks_at_target`): half of
    what the model can still give while it keeps half of ``model0`` ** 2 (so each look has
    as many bins as that resolves, and the looks together never take more), at least the
    least mu for :data:`MIN_REFINE_BINS` bins; None when that is more than is left (the
    model keeping ``least`` too)."""
    left = mus["model"] ** 2 - max(0.5 * model0 ** 2, least ** 2)
    mu = max(math.sqrt(max(0.5 * left, 0.0)), least_refine_mu(n, MIN_REFINE_BINS))
    return mu if mu ** 2 <= left else None
