"""A regressor's constant candidate in the held-out choice (:mod:`dpopt.pipeline.selection`):
released on all rows, and pooled with what the training branch already released. And the
classifier of one label (:func:`fit_one_class`), when the private label selection keeps one.

At small n the held-out choice mostly releases the constant, so its precision is what the
fit delivers. Drawn from the training branch alone (AdaSSP's noisy X^T y, whose intercept
entry carries noise proportional to the row bound, on 80% of the rows) or from the held-out
rows (20% of the rows, half of mu_v), it lost up to 0.1 of R^2 on a 225-row table where the
exact mean loses 0.016 (docs/default_path.md). So the choice keeps mu_c out of the training
branch and spends it on the mean of y over all n rows.

Mechanism (:func:`release_constant`). The targets are clipped to the training branch's
released target scale (post-processing of its release) and mapped to [-1, 1]; their sum
moves by at most 2 when one record is replaced (replace-one adjacency, n public), and
N(0, (2 / mu_c)^2) on it is the Gaussian mechanism of multiplier 1 / mu_c, mu_c-GDP (Dong,
Roth & Su 2022), recorded as ``Gaussian(1 / mu_c)``. Where y's histogram shows a thin tail
beyond that scale, the same mean on a wider range is released in pieces whose mu_k^2 add up
to mu_c^2 (:func:`release_in_pieces`): one mu_c-GDP mechanism, the same record.

Privacy of the whole. The training branch runs on sqrt(mu^2 - mu_c^2) (its ``spent_mu``). A
training record meets that branch and this release; a held-out record meets the score
release (dominated by the branch's own records: ``selection.validation_mu``) and this one.
Either way the records reported, the branch's and this Gaussian, dominate the pipeline, so
its (epsilon, delta) is theirs (:func:`composed`); fully adaptive composition of Gaussians
(Smith & Thakurta 2022) covers that the release's range is the training branch's output.

Its share (:func:`constant_mu`) follows from public (n, mu). The released constant is then
the inverse-variance average of the noisy means available (:func:`pooled_mean`,
:func:`check_constant`; post-processing).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from dpopt.pipeline.autofit import constant_fit
from dpopt.pipeline.scaling import SHARES
from dpopt.pipeline.target_looks import pooled, weighable
from dpopt.preprocessing.feature_maps import TargetScaling
from dpopt.preprocessing.thin_tails import widened
from dpopt.privacy import Gaussian, epsilon_of

__all__ = ["CONSTANT_LOSS", "constant_mu", "release_constant", "release_in_pieces",
           "all_rows_mean", "composed", "pooled_mean", "check_constant", "wider_estimate",
           "looks_mean", "released_mean", "mu_left", "fit_one_class", "AllRows"]

#: The R^2 a regressor's released constant may lose to its noise (:func:`constant_mu`): a
#: tenth of the do-no-harm tolerance (0.01).
CONSTANT_LOSS = 0.001


def constant_mu(n, mu):
    """mu_c of the constant on all n rows, from public (n, mu): the least at which its noise
    costs at most :data:`CONSTANT_LOSS` of R^2, and at most the default share of the
    largest scaling step (``SHARES["feature_bounds"]``, 10% of mu^2). The mean of n targets
    scaled into [-1, 1] has noise 2 / (n mu_c); the scaled target's standard deviation is
    at least about 1/4 (its range is its private 1%/99% quantiles, +-2.33 standard
    deviations of a normal target, each end rounded outwards by at most a factor 10^(1/4)
    on the grid), so the loss is at most (8 / (n mu_c))^2. Large n needs almost nothing
    (0.8% of mu^2 at n = 15,000, epsilon = 1); small n takes the cap. A larger cap (30%)
    left the training branch's target histogram too little: it placed too narrow a range
    more often (measured, docs/default_path.md)."""
    return min(mu * math.sqrt(SHARES["feature_bounds"]), 8.0 / (n * math.sqrt(CONSTANT_LOSS)))


def mu_left(auto, prior, whole, mu_c):
    """The mu the constant on all rows may spend when the training branch's target scale
    collapsed (no model, nothing to compare): mu_c and what the branch left unspent, so
    sqrt(whole^2 (1 - the table layer's share) - the branch's own mu^2), shrunk by a
    relative 1e-12 for rounding. A training record meets the branch's releases and this
    one, whose mu^2 then add up to at most the budget; a held-out record meets this one
    alone. The amount depends on the branch's output, which fully adaptive composition of
    Gaussian mechanisms allows (Smith & Thakurta 2022), so it holds only when the branch's
    records are all Gaussian (else mu_c). ``whole``: the GDP mu of the fit's target
    (epsilon, delta less the table layer's delta)."""
    own = auto.result.mechanisms[len(prior.records) if prior is not None else 0:]
    if not all(type(m) is Gaussian for m in own):
        return mu_c
    spent = math.fsum(m.count / m.noise_multiplier ** 2 for m in own)
    budget = whole ** 2 * (1.0 - (prior.share if prior is not None else 0.0))
    return max(mu_c, math.sqrt(max(budget - spent, 0.0)) * (1.0 - 1e-12))


def release_constant(target, data, mu_c, rng):
    """The release of the module docstring on the n targets of ``data`` (the records'
    adapter, in memory or chunked: :meth:`~dpopt.pipeline.scaling.InMemoryData.target_mean`
    sums them, chunk by chunk out of core) scaled by ``target`` (the training branch's
    target scale): (noisy mean, its standard deviation, records)."""
    mean, records = data.target_mean(target, mu_c, rng)
    return mean, 2.0 / (data.shape[0] * mu_c), records


def release_in_pieces(target, wider, data, mu_c, rng):
    """The mean of y clipped to ``wider``'s range [L, U], which contains ``target``'s [l, u],
    released as its pieces: the means of y clipped to [L, l], [l, u] and [u, U] (those of
    positive width W_k), each scaled into [-1, 1] and released by :func:`release_constant`
    with mu_k = mu_c sqrt(W_k / W), W = U - L. Since clip(y, L, U) = clip(y, L, l) +
    clip(y, l, u) + clip(y, u, U) - l - u, their sum (post-processing) is the mean on [L, U],
    with noise variance sum_k (W_k / (n mu_k))^2 = (W / (n mu_c))^2 in y's units: exactly that
    of one release on [L, U] at mu_c (before each piece's noisy mean is clipped to its own
    [-1, 1], post-processing that brings each piece nearer its true value: an independent
    review measured a root mean squared error of 1.03 against 1.21 for one release, with a
    bias of -0.21 against -0.08 where an outer piece's mean lies at its end). And the piece
    [l, u] is the mean of y clipped to the model's range, which the held-out check's
    constant needs (:func:`pooled_mean`), for free.

    Privacy: replacing one record moves each piece's scaled sum by at most 2, so piece k is
    mu_k-GDP; sum_k mu_k^2 = mu_c^2 (each mu_k shrunk by a relative 1e-12 for rounding), and
    the pieces compose to one mu_c-GDP mechanism (Dong, Roth & Su 2022), recorded as one
    ``Gaussian(1 / mu_c)``, the record of the single release it replaces. Replace-one
    adjacency, n public. Returns (:class:`AllRows`, records)."""
    if not wider.lower <= target.lower < target.upper <= wider.upper:
        raise ValueError("internal error: the wider range must contain the target's")
    width = wider.upper - wider.lower
    ends = (wider.lower, target.lower, target.upper, wider.upper)
    outer, outer_var, narrow = -(target.lower + target.upper), 0.0, None
    for a, b in zip(ends[:-1], ends[1:]):
        mu_k = mu_c * math.sqrt((b - a) / width) * (1.0 - 1e-12) if b > a else 0.0
        if not mu_k > 0 and (a, b) != (target.lower, target.upper):
            outer += a  # an end not moved, or so little that its mu underflows to 0:
            continue  # clip(y, a, b) is a to within b - a (nothing released for it)
        if (a, b) == (target.lower, target.upper):
            narrow = release_constant(target, data, mu_k, rng)[:2]
            continue
        piece = type(target).from_bounds(a, b, shift=True)
        mean, sd, _ = release_constant(piece, data, mu_k, rng)
        outer += piece.center + piece.half_width * mean
        outer_var += (piece.half_width * sd) ** 2
    return AllRows(*narrow, wider, outer, math.sqrt(outer_var)), [Gaussian(1.0 / mu_c, 1)]


def wider_estimate(all_rows, target, narrow):
    """(mean, standard deviation) of y clipped to ``all_rows.wider``'s range, in its scaled
    units: the pieces' sum of :func:`release_in_pieces`, with ``narrow`` = (mean, sd) in
    ``target``'s scaled units for the piece on the model's range (that piece alone, or
    pooled with the training branch's noisy means of the same clipped y). Post-processing."""
    mean, sd = narrow
    raw = target.center + target.half_width * mean + all_rows.outer
    spread = math.hypot(target.half_width * sd, all_rows.outer_sd)
    mean, sd = all_rows.wider.scaled_estimate(raw, spread)
    return float(np.clip(mean, -1.0, 1.0)), sd


def check_constant(auto, n_train, all_rows):
    """The held-out check's constant where the release on all rows came in pieces over a
    wider range (:func:`release_in_pieces`): :func:`wider_estimate` with the piece on the
    model's range pooled with the training branch's own noisy means of the same clipped y
    (:func:`_free_means`, weights 1/sd^2). Returns (mean, sd, source), in the wider range's
    scaled units. Post-processing."""
    found = _known_means(auto, n_train, all_rows)
    mean, sd = wider_estimate(all_rows, auto.target, pooled([f[:2] for f in found]))
    what = " and ".join(w for _, _, w in found)
    return mean, sd, (f"{what} (already released: no new spending), on y clipped to its "
                      f"range widened over a thin tail of y, [{all_rows.wider.lower:.4g}, "
                      f"{all_rows.wider.upper:.4g}]")


class AllRows(NamedTuple):
    """The release on all rows: the noisy mean of y clipped to the training branch's target
    scale and its standard deviation (its scaled units); and, where it was released in
    pieces over a ``wider`` range (:func:`release_in_pieces`), the noisy mean of y clipped
    there less the piece on the model's range (``outer``, y's units, and its standard
    deviation: :func:`wider_estimate` adds that piece back)."""

    mean: float
    sd: float
    wider: TargetScaling | None = None
    outer: float = 0.0
    outer_sd: float = 0.0


def all_rows_mean(auto, data, mu_c, rng, prior, n_train=None, check_sd=None):
    """:func:`release_constant` on the records of ``data`` (all n rows), with the training
    branch's target scale; or, where the branch's histogram of y shows a thin tail beyond its
    range (``plan["target_tail"]``) and clipping the mean further out lowers its estimated
    error at (n, mu_c) (:func:`~dpopt.preprocessing.thin_tails.widened`, post-processing of
    that release), in pieces over the wider range (:func:`release_in_pieces`): the model
    gains from y clipped at its bulk (its noise grows with the range), the constant may not
    (its mean is biased by the tail left out: a count of visits to a doctor clipped at 3.16
    has mean 1.6 where it is 2.9, R^2 -0.08).

    Where the range is widened, the held-out check scores y clipped to it, and its
    candidates predict there: the mean on that range (:func:`check_constant`) and the model
    raised by y's mean beyond its own range (``AllRows.outer``,
    :func:`dpopt.pipeline.choice.select_released`), judged on the y the released one
    predicts, not on the clipped y the model was fitted to. The check releases a constant of
    its own, at half of its mu, when the noisy means it can pool are less precise than
    ``check_sd`` (scaled units, :func:`pooled_mean`); the range is widened only where it does
    not bring about such a release that the model's range would have spared
    (:func:`_check_sd`). Not where the branch released a mean of y instead of a model
    (``target_collapsed``: its range is the mean's own). ``n_train``: the rows the branch
    trained on (default all n). Returns (:class:`AllRows`, ``auto`` with the record in its
    composition and ``plan["constant_mu"]``)."""
    n = data.shape[0]
    n_train = n if n_train is None else n_train
    wider = _wider(auto, n, n_train, mu_c, check_sd)
    if wider is None:
        mean, sd, records = release_constant(auto.target, data, mu_c, rng)
        all_rows = AllRows(mean, sd)
    else:
        all_rows, records = release_in_pieces(auto.target, wider, data, mu_c, rng)
    auto.plan["constant_mu"] = mu_c
    return all_rows, composed(auto, records, prior)


def _wider(auto, n, n_train, mu_c, check_sd):
    """The :class:`TargetScaling` of the wider range of :func:`all_rows_mean`, or None
    (its ends in ``plan["constant_range"]``)."""
    tail, target = auto.plan.get("target_tail"), auto.target
    if tail is None or auto.plan.get("target_collapsed"):
        return None
    free = [(v, sd) for v, sd, _ in _free_means(auto, n_train)]
    both = pooled(free + [(0.0, 2.0 / (n * mu_c))])  # the constant kept: its sd
    lo, hi = widened(*tail["range"], tail, n, mu_c, target.half_width * both[1])
    if (lo, hi) == tuple(tail["range"]):
        return None
    wider = TargetScaling.from_bounds(lo, hi, shift=True)
    if not mu_c * math.sqrt(2.0 * target.half_width / (hi - lo)) > 0:  # underflow: keep it
        return None
    if check_sd is not None and both[1] <= check_sd < _check_sd(wider, target, free, n, mu_c):
        return None  # widened, the check would release a constant of its own
    auto.plan["constant_range"] = [lo, hi]
    return wider


def _check_sd(wider, target, free, n, mu_c):
    """The standard deviation, in ``wider``'s scaled units, of the held-out check's constant
    on the wider range (:func:`check_constant`) before its pieces are released: the piece on
    the model's range at mu_a = mu_c sqrt(W_a / W), pooled with the branch's ``free`` means,
    and the outer pieces, whose variances add to (W^2 - W W_a) / (n mu_c)^2 in y's units."""
    inner, width = target.upper - target.lower, wider.upper - wider.lower
    piece = 2.0 / (n * mu_c * math.sqrt(inner / width))
    outer = math.sqrt(width * (width - inner)) / (n * mu_c)
    planned = AllRows(0.0, piece, wider, 0.0, outer)
    return wider_estimate(planned, target, pooled(free + [(0.0, piece)]))[1]


def _free_means(auto, n_train):
    """The training branch's own noisy means of y, already released, as (value, sd, what)
    in its scaled units (:func:`released_mean`, :func:`looks_mean`)."""
    return [(v, sd, what) for v, sd, what in (
        (*(released_mean(auto, n_train) or (None, None)), "the training branch's release"),
        (*(looks_mean(auto) or (None, None)), "the training branch's looks at y's range"))
        if v is not None and weighable(v, sd)]


def _known_means(auto, n_train, all_rows):
    """:func:`_free_means` and the release on all rows (its mean on the branch's target
    scale), where weighable."""
    found = _free_means(auto, n_train)
    if all_rows is not None and weighable(*all_rows[:2]):
        found.append((*all_rows[:2], "the release on all rows"))
    return found


def composed(auto, records, prior, **changes):
    """``auto`` with ``records`` (releases on all rows) added to its composition and its
    (epsilon, delta) recomputed from them (the table layer's ``prior`` keeps its delta)."""
    r = auto.result
    mechanisms = list(r.mechanisms) + list(records)
    total = epsilon_of(mechanisms, r.delta - (prior.delta if prior is not None else 0.0),
                       adjacency=r.adjacency)
    exact = all(isinstance(m, Gaussian) for m in mechanisms)
    result = replace(r, epsilon=total, mechanisms=mechanisms,
                     accountant="exact" if exact else r.accountant, **changes)
    if getattr(r, "release", None) is not None:  # not a field: AdaSSP's noisy statistics
        result.release = r.release
    return replace(auto, result=result)


def pooled_mean(auto, n_train, all_rows, sigma_alternative, paid=None):
    """The constant from the noisy means already released: AdaSSP's (:func:`released_mean`),
    the training branch's looks at y's range (:func:`looks_mean`) and the one on all rows
    (``all_rows`` = (mean, sd) or :class:`AllRows`, or None), averaged with weights 1/e^2
    (:func:`~dpopt.pipeline.target_looks.pooled`; independent Gaussian noises, e their sds,
    and for the looks a bound on their root mean squared error that covers the rounding of
    their bins; they also differ by the training rows' sampling, a 1/n term), when that is
    more precise than ``sigma_alternative`` (the held-out release's). ``paid``: that
    release, made because they were not, as (mean, sd, what): it joins them, so what they
    carry is not thrown away. Post-processing.
    Returns (mean, source) or (None, None)."""
    found = _known_means(auto, n_train, all_rows)
    both = pooled([(v, sd) for v, sd, _ in ([paid] if paid else []) + found])
    if both is None:
        return (float(paid[0]), paid[2]) if paid else (None, None)
    if paid is None and both[1] > sigma_alternative:
        return None, None
    free = " and ".join(w for _, _, w in found) + " (already released: no new spending)"
    source = free if paid is None else paid[2] + (f", pooled with {free}" if found else "")
    return float(np.clip(both[0], -1.0, 1.0)), source


def looks_mean(auto):
    """The training branch's looks' own estimate of the mean of y
    (``plan["target_look_mean"]``, y's units, :func:`~dpopt.pipeline.target_looks.look_estimates`)
    in the scaled units of its target scale, with its error bound, or None.
    Post-processing of releases already paid for."""
    found, target = auto.plan.get("target_look_mean"), auto.target
    if found is None or target is None or not target.half_width > 0:
        return None
    return target.scaled_estimate(*found)


def released_mean(auto, n_train):
    """The training branch's own noisy mean of the scaled target and its standard
    deviation, or None. When its target histogram collapsed, the branch released the
    private mean of y with the model's share (``plan["target_collapsed"]``,
    :func:`dpopt.pipeline.default_path.fit_default`): that mean and its public standard
    deviation. AdaSSP releases X^T y + N(0, sigma_3^2 I) on rows with the
    intercept's constant 1 appended, so that entry is sum_i y_i + N(0, sigma_3^2) over the
    clipped, scaled targets of the n_train training rows: divided by n_train it is a noisy
    mean of standard deviation sigma_3 / n_train (post-processing of a release already
    paid for). The standard deviation is public (the mechanism's calibration)."""
    if auto.plan.get("target_collapsed"):  # the branch released a mean instead of a model
        sd = auto.plan.get("constant_sd")
        return None if sd is None else (float(auto.result.intercept), sd)
    release = getattr(auto.result, "release", None)
    if release is None or auto.plan.get("solver") != "adassp" or release.xty.size < 1:
        return None
    sigma_3 = auto.result.params["sigmas"][2]
    return float(np.clip(release.xty[-1] / n_train, -1.0, 1.0)), sigma_3 / n_train


def fit_one_class(n_features, *, label, fit_intercept, epsilon, delta, prior):
    """The released classifier when the private label selection (the table layer's
    ``prior``, on all n rows) kept a single label: it predicts that label for every row.
    The label is the only one released, and a label whose noisy count stayed below the
    threshold cannot be named, so there is no model to fit and no other candidate; nothing
    more is released, the rest of the budget is not spent, and the fit reports the prior's
    (epsilon, delta) alone. Where the labels' counts are skewed this is the majority class
    (the do-no-harm constant); it is warned and reported. Returns an :class:`AutoFit`
    (zero coefficients: every margin is 0, the first and only class)."""
    label = label.item() if isinstance(label, np.generic) else label  # its plain repr
    records = list(prior.records)
    delta_g = delta - prior.delta  # the Gaussian mechanisms' part, as on the model path
    reason = (f"the private label selection kept one label of y ({label!r}) at "
              f"epsilon={epsilon:g}: the released classifier predicts it for every row (the "
              f"other labels are held by too few records to be released); the rest of the "
              f"budget is not spent. Declare the labels with classes=[...] to fit a model")
    warnings.warn(reason, UserWarning, stacklevel=4)
    plan = {"solver": "none", "reason": reason, "mu": 0.0, "mu_shares": {}, "unlearnable": True,
            "alpha": None,
            "constant": f"the label {label!r}", "scaling": "none", "row_bound": None,
            "model_options": {}, "table": prior.info, "selection_delta": prior.delta,
            "selection": {"released": "the only label kept", "reason": reason}}
    return constant_fit(n_features, fit_intercept, 0.0, mechanisms=records,
                        epsilon=epsilon_of(records, delta_g) if records else 0.0, delta=delta,
                        accountant="exact", plan=plan)
