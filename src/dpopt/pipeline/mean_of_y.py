"""The constant predictor of a regressor released with a mu of its own (no model): a private
mean of y, its range located first (:func:`private_mean_of_y`).

The default path releases it when n is too small for a model at this epsilon
(:func:`dpopt.pipeline.default_path.fit_default`'s ``_no_model``) and when the training rows'
target scale collapsed (the held-out choice's constant, :mod:`dpopt.pipeline.selection`).
Every release is a Gaussian mechanism on the scaled target or its histogram, and their mu^2
add up to the mu given, so the release is mu-GDP (Dong, Roth & Su 2022); which releases run
depends on the earlier ones, which fully adaptive composition of Gaussian mechanisms allows
(Smith & Thakurta 2022).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

from dpopt.pipeline.autofit import constant_fit
from dpopt.pipeline.scaling import bounds_resolvable, target_range
from dpopt.pipeline.target_looks import look_estimates, pooled, read_again, refine_bins
from dpopt.preprocessing._bounds import (
    DEFAULT_BIN_CONFIDENCE,
    DEFAULT_QUANTILES,
    coarsened,
    coarser_grids,
    histogram_bounds,
)
from dpopt.preprocessing._refine import (
    bin_sums,
    bins_inside,
    concentrated,
    histogram_mean,
    pooled_counts,
    zeros_only,
)
from dpopt.preprocessing.far_ends import confirm_mu
from dpopt.preprocessing.feature_maps import TargetScaling
from dpopt.preprocessing.thin_tails import extended_tails
from dpopt.privacy import epsilon_of, resolve_accountant
from dpopt.solvers.adassp import calibrate_adassp, check_budget_split

__all__ = ["LOOKS", "private_mean_of_y", "adassp_mean_instead"]


def private_mean_of_y(data, mu, rng):
    """The constant predictor released with ``mu`` alone (no model): location, then scale,
    then the mean, three Gaussian mechanisms, so mu-GDP together (Dong, Roth & Su 2022).

    1. The target's bounds: histograms on the public log grid (sensitivity sqrt(2); read
       again on coarser grids where the default one does not resolve, free), released in
       looks at the cumulative shares :data:`LOOKS` of mu^2 and pooled (:func:`_looks`),
       until they resolve at the share s the public rule asks (3/4, or 1/4 or 1/2 where
       that already resolves the default grid with twice the records per bin that
       :func:`bounds_resolvable` asks: its rule assumes a decade spread evenly over the
       bins; a skewed target puts fewer records in some, and the bounds must hold half of
       n), or earlier where the range holds the bulk (:func:`_holds_the_bulk`): a bound
       that does not clear its threshold leaves nothing to centre on, while the mean's
       noise degrades smoothly, so the bounds get what they need and the mean the rest.
       Where 3/4 does not resolve, the rest of mu releases it once more, pooled with the
       looks (:func:`_released_again`), and the constant is read from the pooled counts:
       in the range the scans resolve, else from the bins its largest bin places
       (:func:`_placed`), else 0 (no bin clears the noise). A far end of the range is kept
       only on a fresh count whose mu comes out of the mean's (:func:`_confirmed`,
       :mod:`dpopt.preprocessing.far_ends`); on the last look, with nothing left, it is cut
       only where the scan restarted inside it finds the data.
    2. Where those bounds are :func:`~dpopt.preprocessing._bounds.concentrated` (one sign,
       at most two log bins wide: the grid located the target but not its spread), half of
       the rest reads them again on equal bins (:func:`refined_bounds`, sensitivity
       sqrt(2)), as many as that half resolves (at most 16, at least 4:
       :func:`~dpopt.pipeline.target_looks.refine_bins`), and again while a look narrowed the
       range by 2 sqrt(2) or more (:func:`~dpopt.pipeline.target_looks.read_again`: a year near
       2005 with a spread of 8 is 170 of its standard deviations wide on the log grid, 40
       after one look). The mean's noise is proportional to the width of its range, so
       narrowing a range of ten standard deviations to three pays for the budget it takes
       (and a range that does not narrow much costs the mean at most a factor sqrt(2)
       of noise, once). Whether
       this step runs is a function of the first release; both branches spend the same
       total mu^2, which fully adaptive composition allows for Gaussian mechanisms (Smith &
       Thakurta 2022, GDP privacy filters).
    3. The mean of y clipped to the range and mapped to [-1, 1] (sensitivity 2/n under
       replace-one), with what is left, pooled with step 2's looks' own estimates of the
       mean (:func:`~dpopt.preprocessing._refine.look_mean`; inverse-variance weights from
       public sds, post-processing), so a look that did not narrow the range is not lost.

    With a public target range (``target_bounds=``, :attr:`InMemoryData.public_target`)
    step 1 is skipped and its share goes to the mean.

    Returns ``(TargetScaling or None, the constant in its scaled units, records, what, mu
    spent)``."""
    n = data.shape[0]
    if data.public_target is not None:
        tb = data.target_bounds(0.0, rng)
        lo, hi, share, records, far = float(tb.lower[0]), float(tb.upper[0]), 0.0, [], ""
    else:
        rule = next((s for s in (0.25, 0.5) if bounds_resolvable(n / 2, 1, mu * math.sqrt(s))),
                    0.75)
        lo, hi, share, (releases, records) = _looks(data, mu, rng, rule)
        if lo is None:  # not located at LOOKS[-1]: the last share, pooled, is read
            return _released_again(data, (releases, records), mu, rng)
        lo, hi, share, far = _confirmed(data, releases, records, lo, hi, share, mu, rng)
    if not hi > lo:
        return (None, 0.0, records, "the constant 0 (the histogram of y collapsed onto 0)"
                + far, mu * math.sqrt(share))
    rest, what = 1.0 - share, ("the private mean of y (its public range, then a noisy mean)"
                               if data.public_target is not None else "the private mean of y "
                               "(its range by a histogram, then a noisy mean)")
    looks = []
    if concentrated(lo, hi):
        def further_mu():  # half of what the mean has left, where it resolves 4 bins or more
            nonlocal rest
            look = mu * math.sqrt(0.5 * rest)
            if not refine_bins(n, look):
                return None
            rest *= 0.5
            return look

        lo, hi, looks = read_again(data, lo, hi, rng, records, further_mu)
    target = TargetScaling.from_bounds(lo, hi, shift=True)
    mu_mean = mu * math.sqrt(rest)
    mean, rec = data.target_mean(target, mu_mean, rng)
    if looks:
        what = (f"the private mean of y (its range by a histogram, read again on equal bins"
                f"{f' {len(looks)} times' if len(looks) > 1 else ''}, then a noisy mean, "
                f"pooled with the looks' own)")
        mean = _with_looks(target, mean, n, mu_mean, looks)
    return target, mean, records + rec, what + far, mu


def _with_looks(target, mean, n, mu_mean, looks):
    """The noisy mean ``mean`` (``target``'s scaled units; sd 2 / (n mu_mean) there) pooled
    with the looks' own estimates of the mean, weighted by their error bounds
    (:func:`~dpopt.pipeline.target_looks.look_estimates`, :func:`~dpopt.pipeline.target_looks.pooled`),
    in scaled units, clipped to [-1, 1]. Post-processing."""
    if not target.half_width > 0:
        return mean
    found = pooled([(mean, 2.0 / (n * mu_mean))]
                   + [target.scaled_estimate(m, e) for m, e in look_estimates(looks)])
    return mean if found is None else float(np.clip(found[0], -1.0, 1.0))


#: The cumulative shares of mu^2 at which :func:`private_mean_of_y` reads y's histogram:
#: each look releases it again with the difference and pools it with the earlier ones.
LOOKS = (0.25, 0.5, 0.75)


def _looks(data, mu, rng, rule):
    """Step 1 of :func:`private_mean_of_y`: y's histogram released with LOOKS[0] of mu^2,
    then, while it does not resolve, again with the next increment, pooled with the earlier
    releases (:func:`~dpopt.preprocessing._refine.pooled_counts`: the release at the
    cumulative mu). Returns (lower, upper, share spent, (releases, records)), lower None
    when LOOKS[-1] does not resolve."""
    releases, records, spent, n = [], [], 0.0, data.shape[0]
    for share in LOOKS:
        tb = data.target_bounds(mu * math.sqrt(share - spent), rng)
        releases.append(tb)
        records += list(tb.mechanisms)
        spent = share
        noisy, sigma = pooled_counts(*releases)
        lo, hi = _located(noisy, sigma, n, tb.grid)
        if lo is not None and (share >= rule or _holds_the_bulk(noisy, sigma, n, lo, hi,
                                                                tb.grid)):
            return lo, hi, share, (releases, records)
    return None, None, spent, (releases, records)


def _confirmed(data, releases, records, lower, upper, share, mu, rng):
    """The located range with each far end confirmed by a fresh count (appended to
    ``records``) whose mu (``confirm_mu`` of :mod:`dpopt.preprocessing.far_ends`) comes out
    of the mean's share, or replaced by its inner end; then widened over a thin tail of y
    where that lowers the mean's estimated error at the mu left to it
    (:func:`~dpopt.preprocessing.thin_tails.extended_tails`, post-processing of the same
    counts). Returns (lower, upper, share of mu^2 spent, the words for the report:
    :func:`far_words`)."""
    noisy, sigma = pooled_counts(*releases)
    mu_c = confirm_mu(mu * math.sqrt(share), mu * math.sqrt(1.0 - share))
    lower, upper, rec, note = data.confirmed_target_range(noisy, sigma, lower, upper, mu_c, rng)
    records += rec
    share = share + (mu_c / mu) ** 2 if rec else share
    n, mu_mean = data.shape[0], mu * math.sqrt(max(1.0 - share, 0.0))
    if mu_mean > 0 and upper > lower:  # a range collapsed onto one value stays the constant
        lower, upper = extended_tails(noisy, sigma, n, lower, upper, mu_mean)
    return lower, upper, share, far_words(note)


def far_words(note):
    """What the report says of a far end (the note of ``confirmed_range``,
    :mod:`dpopt.preprocessing.far_ends`): "" when no end was far."""
    return "" if not note else "; a far end of its range " + ", ".join(
        f"{end} {what}" for end, what in note.items())


def _located(noisy, sigma, n, grid, final=False):
    """(lower, upper) read from y's pooled histogram by the bounds' scans, or (None, None)
    where they do not resolve. A range collapsed onto the zero bin (the bulk of y is
    exactly 0: counts, amounts) says nothing of the nonzero values, whose mean is the
    constant's whole difference from 0: the same counts without the zero bin are read for
    the nonzero values' range, at the quantile levels of their noisy number n - (zero bin)
    (post-processing), and [0, 0] is kept only when they do not resolve at the last look
    (``final``; before it, the looks go on). A target within 1% of the zero bin's count of
    being all zeros keeps 0, which is then within the rule's own tolerance."""
    lo, hi, unresolved = histogram_bounds(noisy, sigma, n, DEFAULT_QUANTILES, grid=grid)
    if unresolved[0]:
        return None, None
    lo, hi = float(lo[0]), float(hi[0])
    if not (lo == hi == 0.0 or zeros_only(noisy, sigma, lo, hi, grid)):
        return lo, hi
    counts = _without_zeros(noisy, grid)
    n_nonzero = n - float(np.ravel(noisy)[grid.zero_bin])
    if n_nonzero > DEFAULT_QUANTILES[0] * n:
        lo_nz, hi_nz, unresolved = histogram_bounds(counts, sigma, n_nonzero,
                                                    DEFAULT_QUANTILES, grid=grid)
        if not unresolved[0]:
            return min(0.0, float(lo_nz[0])), max(0.0, float(hi_nz[0]))
    return (0.0, 0.0) if final or n_nonzero <= DEFAULT_QUANTILES[0] * n else (None, None)


def _without_zeros(noisy, grid):
    """A copy of the noisy counts with the zero bin's set to 0: the nonzero values alone
    (post-processing)."""
    counts = np.ravel(noisy).copy()
    counts[grid.zero_bin] = 0.0
    return counts


def _holds_the_bulk(noisy, sigma, n, lower, upper, grid):
    """Whether an early look's range may be kept: its noisy count holds the quantile levels'
    share of n (98%) up to one standard deviation of its noise (post-processing). A scan at
    a small budget stops at the first bins its noise lets it trust, inside the spread of a
    wide or heavy-tailed target: that range leaves records out, and the looks go on to the
    share the public rule asks. The test is one-sided and strict on purpose: a range that
    leaves records out biases the mean, one turned away only costs the early stop (a range
    holding every record passes with probability above Phi(1) = 84%)."""
    inside = bins_inside(lower, upper, grid)
    level = DEFAULT_QUANTILES[1] - DEFAULT_QUANTILES[0]
    count = float(np.sum(np.ravel(noisy)[inside]))
    return count >= level * n - sigma * math.sqrt(np.sum(inside))


def _released_again(data, releases, mu, rng):
    """The last look of :func:`private_mean_of_y` when LOOKS[-1] of mu^2 did not locate y:
    the rest of mu releases the histogram once more, pooled with the earlier ones (the
    release at mu); where that resolves, the constant is the pooled histogram's own mean in
    its range (:func:`histogram_mean`), else the mean of the bins its largest bin places,
    on the default grid or its coarser readings (:func:`_placed`), else 0. Where the scans
    located the zeros alone ([0, 0]), the zero bin is left out of that placing, so the
    nonzero values are placed and the zeros count at 0. All are Gaussian histograms of sensitivity
    sqrt(2) whose mu^2 add up to mu^2; each runs only after the earlier failed (fully
    adaptive composition, Smith & Thakurta 2022). Nothing is left for the count that would
    confirm a far end of the range read (:mod:`dpopt.preprocessing.far_ends`; at these
    budgets a count precise enough to keep a real end would take about half of mu^2): a far
    end is cut where the scan restarted inside it finds the data, kept otherwise. The same
    return as :func:`private_mean_of_y`."""
    releases, records = releases
    last = data.target_bounds(mu * math.sqrt(1.0 - LOOKS[-1]), rng)
    releases, records = releases + [last], records + list(last.mechanisms)
    noisy, sigma = pooled_counts(*releases)
    n = data.shape[0]
    lo, hi = _located(noisy, sigma, n, last.grid, final=True)
    if lo is not None and hi > lo:
        lo, hi, _, note = data.confirmed_target_range(noisy, sigma, lo, hi, None, rng)
        target = TargetScaling.from_bounds(lo, hi, shift=True)
        mean = float(np.clip(target.transform(histogram_mean(noisy, lo, hi, last.grid)), -1, 1))
        return (target, mean, records, "the private mean of y (read from its histograms, "
                "pooled: three looks did not resolve its range)" + far_words(note), mu)
    # [0, 0]: the zeros resolved, the nonzero values did not
    counts = np.ravel(noisy) if lo is None else _without_zeros(noisy, last.grid)
    placed = _placed(counts, sigma, last.grid)
    if placed is None:
        return (None, 0.0, records, "the constant 0 (its histograms, pooled, did not resolve "
                "its range)", mu)
    lower, upper = min(placed[0], 0.0), max(placed[1], 0.0)
    lower, upper, _, note = data.confirmed_target_range(noisy, sigma, lower, upper, None, rng)
    mean = bin_sums(counts, bins_inside(lower, upper, last.grid), last.grid)[0] / n
    target = TargetScaling.from_bounds(lower, upper, shift=True)
    return (target, float(np.clip(target.transform(mean), -1, 1)), records,
            "the private mean of y (read from the bins its histograms, pooled, place: the "
            "scans did not resolve its range)" + far_words(note), mu)


def _placed(counts, sigma, grid):
    """The range (lower, upper) that :func:`_anchored` places on y's pooled histogram
    ``counts`` read on ``grid``, else on its coarser readings (2, then 1 bin per decade:
    :func:`~dpopt.preprocessing._bounds.coarsened`, sums of the same counts whose noise
    bound the threshold uses, as the scans' own coarser readings do), or None. A
    zero-inflated target's nonzero values (a count or an amount with 75-85% zeros, on a
    few hundred rows) spread over many fine bins of a few dozen records each, none of which
    clears the noise, while a decade holds most of them. Post-processing."""
    grids = (grid, *coarser_grids(grid))
    confidence = _union_confidence(grids)
    for reading in grids:
        noisy, s = ((counts, sigma) if reading is grid
                    else coarsened(counts, sigma, grid, reading))
        placed = _anchored(np.ravel(noisy), s, reading, confidence)
        if placed is not None:
            return _ends(placed, reading)
    return None


def _ends(placed, grid):
    """(lowest lower end, highest upper end) of the bins ``placed`` on ``grid``."""
    lo_end, hi_end = grid.bin_ends()
    return float(lo_end[placed].min()), float(hi_end[placed].max())


def _union_confidence(grids):
    """The threshold, in noise standard deviations, at which the largest noise bin of any of
    ``grids`` clears it with the probability that the largest of the first grid's bins
    clears ``DEFAULT_BIN_CONFIDENCE`` (3.7e-4 over the default grid's 109 bins; Bonferroni
    over all the readings' bins: 4.62 with the two coarser readings). A bin placed by noise
    puts the constant wherever that bin is, so reading more grids must not make it likelier."""
    first = grids[0].n_bins * float(norm.sf(DEFAULT_BIN_CONFIDENCE))
    return float(norm.isf(first / sum(g.n_bins for g in grids)))


def _anchored(noisy, sigma, grid, confidence=DEFAULT_BIN_CONFIDENCE):
    """The bins of y's pooled histogram that place its records when the scans do not resolve
    (post-processing): a boolean mask, or None. The scans pay a margin growing with the
    square root of the bins they cross from the grid's far ends, so a target of a few
    hundred records at a small budget, whose three or four bins each stand 2-6 noise
    standard deviations high, does not resolve, and the constant would be 0: an R^2 loss of
    (mean / sd)^2, about 4 on the diabetes target. Read instead (the location step of
    Karwa & Vadhan, ITCS 2018):

    * the largest bin, when it clears the scan's own threshold for trusting one bin
      (``DEFAULT_BIN_CONFIDENCE`` sigma: a noise bin does with probability 3.7e-4 over the
      109 bins of the grid), grown by its larger neighbour while that neighbour's noisy
      count exceeds 2 sigma (:func:`_grown`);
    * its mirror image on the other sign (the same magnitudes), grown the same way, when
      its noisy count exceeds 2 sigma sqrt(bins) (a one-sided test of one window fixed
      before it is read: 2.3% on noise). A target centred at 0 has its records on both
      signs; the largest bin finds one side only.

    The mean is then the placed bins' noisy counts at their middles, over n: the records
    the bins do not place count at 0, the constant the fallback would release."""
    counts = np.ravel(noisy)
    anchor = int(np.argmax(counts))
    if counts[anchor] < confidence * sigma:
        return None
    first, last = _grown(counts, anchor, anchor, sigma)
    placed = np.zeros(counts.size, dtype=bool)
    placed[first:last + 1] = True
    mirror = counts.size - 1 - last, counts.size - 1 - first  # the grid is symmetric about 0
    if counts[mirror[0]:mirror[1] + 1].sum() > 2.0 * sigma * math.sqrt(last - first + 1):
        first, last = _grown(counts, *mirror, sigma)
        placed[first:last + 1] = True
    return placed


def _grown(counts, first, last, sigma):
    """The window [first, last] of bins grown by its larger neighbour while that neighbour's
    noisy count exceeds 2 sigma (the one-sided test of the mirror's window, 2.3% on noise).
    Leaving out a bin of true count c at a distance d from the mean biases a histogram's
    mean by c d / N, keeping it adds noise of standard deviation sigma d / N, so a bin is
    worth its noise when c > sigma; but a bin whose noisy count clears sigma is kept
    because its noise is high (a noise bin does 16% of the time, with a mean count of 1.5
    sigma), and growing at sigma walked into noise bins (measured: one fit of a target
    centred at 0 at R^2 -2.1). The window is contiguous, so a noise bin far away never
    enters."""
    while True:
        below = counts[first - 1] if first > 0 else -math.inf
        above = counts[last + 1] if last + 1 < counts.size else -math.inf
        if max(below, above) <= 2.0 * sigma:
            return first, last
        if below >= above:
            first -= 1
        else:
            last += 1


def adassp_mean_instead(data, p, eps_model, delta, delta_total, mu_total, mus, scaling,
                        target, records, R, rng, columns_note, prior, options):
    """The training rows' target histogram collapsed (both bounds in one bin: the target's
    scale is unknown, so AdaSSP would fit a model of one value): AdaSSP's own releases are
    spent on the private mean of y instead. Its calibration at the model's epsilon gives
    the multipliers (z_1, z_2, z_3) of its three releases (:func:`~dpopt.solvers.adassp.calibrate_adassp`);
    the target's histogram is released again with z_2 (sensitivity sqrt(2), as the first
    look, a far larger share than the first look had), and where it resolves, the mean of
    y clipped to that range with z_3 (sensitivity 2 on the sum). The records are
    ``Gaussian(z_2), Gaussian(z_3)``, and ``Gaussian(z_1)`` when a far end of that range is
    confirmed by a count (:mod:`dpopt.preprocessing.far_ends`) at z_1: a sub-multiset of
    AdaSSP's planned records, so every accounting that holds for the planned model holds
    here (a search's data-independent probe accounts exactly those); z_1 is otherwise not
    spent. Which branch runs is a function of
    released numbers (adaptive composition). ``plan["constant_sd"]`` is the mean's
    standard deviation in its scaled units (public), for pooling
    (:func:`dpopt.pipeline.constant.released_mean`). When even that range does not
    resolve, the collapsed range is kept and the constant is its point."""
    n = data.shape[0]
    shares = check_budget_split(options["budget_split"])  # AdaSSP's default_settings
    _, zs = calibrate_adassp(eps_model, delta, shares)
    mu_bounds, mu_mean = (_mu_of(z) for z in zs[1:])
    tb = data.target_bounds(mu_bounds, rng)
    rec = list(tb.mechanisms)
    # a far end's count at z_1, the multiplier of AdaSSP's release this branch leaves unspent
    lo, hi, count, far = target_range(data, tb, _mu_of(zs[0]) if math.isfinite(zs[0]) else None,
                                      rng)
    rec += count
    found, mean, sd = target, 0.0, None
    what = "the constant at the collapsed range (a second histogram did not resolve it)"
    if hi > lo:
        found = TargetScaling.from_bounds(lo, hi, shift=True)
        mean, spent = data.target_mean(found, mu_mean, rng)
        rec += spent
        sd, what = 2.0 / (n * mu_mean), "the private mean of y (its range, then its mean)"
    mechanisms = records + rec
    plan = {"solver": "none", "reason": (f"the training rows' histogram of y collapsed to one "
                                         f"value: AdaSSP's releases gave {what} instead"),
            "mu": mu_total, "mu_shares": mus, "target_collapsed": True, "constant": what,
            "constant_sd": sd, "row_bound": R, "model_options": {}, **columns_note,
            **({"target_far_ends": far} if far else {})}
    if prior is not None:
        plan["table"] = prior.info
        plan["selection_delta"] = prior.delta
    return constant_fit(p, True, mean, mechanisms=mechanisms,
                        epsilon=epsilon_of(mechanisms, delta), delta=delta_total,
                        accountant=resolve_accountant(mechanisms, "auto"), plan=plan,
                        scaling=scaling, target=found)


def _mu_of(z):
    """1 / z, rounded down where needed so that the record's multiplier 1 / mu is >= z."""
    mu = 1.0 / z
    return mu if 1.0 / mu >= z else math.nextafter(mu, 0.0)
