"""The scaling steps of the default path (:mod:`dpopt.pipeline.default_path`): the data
adapter in memory (:class:`InMemoryData`; :class:`dpopt.pipeline.chunked.ChunkedData` is its
chunked twin) and the private releases that fix the features' and the target's scales
(:func:`private_scaling`: the indicator test, bounds, means, centred bounds, re-centring, row
norm, target bounds). Every release here is a Gaussian mechanism whose sensitivity its
function states; the shares of mu^2 come from :func:`dpopt.pipeline.default_path.plan_budget`."""

from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.sparse as sp

from dpopt.data import Problem
from dpopt.data.chunked import is_chunked_input
from dpopt.pipeline.chunked import ChunkedData
from dpopt.pipeline.second_look import target_second_look
from dpopt.pipeline.target_looks import (
    NARROW_BAND,
    from_model,
    keeps_least,
    looks_at_target,
    spares,
)
from dpopt.preprocessing import private_feature_bounds, private_target_bounds
from dpopt.preprocessing._bounds import (
    COARSE_GRID,
    DEFAULT_CONFIDENCE,
    DEFAULT_GRID,
    DEFAULT_QUANTILES,
    ZERO_INFLATED_FALLBACK,
    bounds_resolvable,
    check_public_bounds,
    private_bounds_from_counts,
    public_bounds,
    scaled_feature_histograms,
)
from dpopt.preprocessing._indicators import other_value_counts, private_indicators
from dpopt.preprocessing._norms import (
    ROW_NORM_QUANTILE,
    mean_noise,
    noisy_means,
    noisy_target_mean,
    private_row_bound,
)
from dpopt.preprocessing._refine import (
    REFINE_BINS,
    linear_counts,
    refined_bounds,
    within_bins,
    zeros_only,
)
from dpopt.preprocessing.far_ends import confirm_mu, confirmed_range, target_histogram
from dpopt.preprocessing.feature_maps import RowNormalization, Scaling, TargetScaling
from dpopt.preprocessing.folded import folded_centred_bounds
from dpopt.preprocessing.shares import SHARES  # noqa: F401 (the default path's, here too)
from dpopt.preprocessing.thin_tails import tail_steps
from dpopt.privacy.releases import begin

#: The largest share a scaling step may take when its default share cannot resolve it.
MAX_SHARE = 0.30
#: The noise sd of the re-centring's means, on features spanning [-1, 1] (:func:`recentre_mu`).
RECENTRE_SD = 0.1


def inference_levels(n, mu):
    """Clip levels of a least-squares fit with ``inference=True``: (feature and target
    quantiles, row-norm quantile), their tails ``min(fixed, 1 / (n mu))`` (the fixed levels: 1% each
    side, :data:`~dpopt.preprocessing._bounds.DEFAULT_QUANTILES`; 5% of the rows,
    :data:`~dpopt.preprocessing._norms.ROW_NORM_QUANTILE`; the indicator test's share of
    values outside {0, 1} likewise); ``mu`` the Gaussian-DP mu of the model path's plan
    (its shares' root sum of squares: public n, p and epsilon).

    Why (docs/inference.md, "The estimand"). Clipping a fraction q of a value at C biases a
    moment by E(X - C)+ = q e(C) (e: the mean excess beyond C) and the model's noise, whose
    sensitivity grows with C, by about C / (n mu); their sum is smallest where
    d/dC = -q + 1 / (n mu) = 0, i.e. q = 1 / (n mu) (about 1 / mu records clipped). There the
    bias, q e(C), is e(C) / C times the noise and q e(C) sqrt(n) times the sampling error:
    both go to 0 as n mu grows (light tails), so the clipped data's estimand converges to the
    raw coefficient, which fixed levels never do. Below about 1 / (n mu) the release's own
    margin (its noise) decides how much is clipped, so smaller levels would not clip less.
    The levels are functions of public n and epsilon (n is public under replace-one): the
    releases, their sensitivities and records are unchanged. Not for the logistic model:
    its estimand moved little with today's levels, and its intervals covered less with the
    wider bounds (measured: docs/inference.md)."""
    tail = 1.0 / (n * mu)
    q = min(DEFAULT_QUANTILES[0], 1.0 - DEFAULT_QUANTILES[1], tail)
    return (q, 1.0 - q), 1.0 - min(1.0 - ROW_NORM_QUANTILE, tail)


def bounds_grid(n, p, mu_bounds):
    """The public grid of the feature-bound release at ``mu_bounds``, or None.

    The default grid (4 bins per decade) where :func:`bounds_resolvable` says it can see a
    feature's bulk; else :data:`~dpopt.preprocessing._bounds.COARSE_GRID` (1 bin per
    decade: a decade's records sit in one bin, four times the count, at the same noise),
    where that can; else None, and rows are normalized. The coarse bounds place each
    range within a factor of 10 of the data's, which is what min-max scaling needs to put
    features of very different units (an area near 1,000 beside a ratio near 0.1) on
    comparable scales; row normalization leaves the largest unit to dominate every row.
    Reading the default grid's counts on coarser bins after the release (the free second
    reading of :func:`~dpopt.preprocessing._bounds.histogram_bounds`) sums four noises per
    bin, so it needs twice the records; releasing on the coarse grid does not.

    The plan (:func:`dpopt.pipeline.default_path.plan_budget`) offers the coarse grid to
    binary classifiers only. A regression's held-out choice releases, at these sizes, mostly the
    constant, and its constant is read off the model's own release (AdaSSP's noisy X^T y,
    whose noise grows with R and shrinks with the model's share), so the budget the coarse
    bounds take from the model costs it more than the scales give (measured on the
    practitioner benchmark's 225-row regression, docs/default_path.md); a classifier's
    constant comes from label counts released on all rows and does not depend on the
    model's share. Nor with ``inference=True``: the intervals were validated on the default
    grid's scaling. Nor for k >= 3 classes (:mod:`dpopt.pipeline.multiclass`): the coarse
    bounds' share left its k models worse than row normalization on a 178-row, 3-class
    table (wine: accuracy 0.20-0.24 against 0.33-0.40 at epsilon = 1, measured before the
    one-vs-rest fit had its own held-out choice)."""
    for grid in (DEFAULT_GRID, COARSE_GRID):
        if bounds_resolvable(n, p, mu_bounds, grid):
            return grid
    return None


def public_count(feature_bounds):
    """How many features ``feature_bounds`` (lower, upper; NaN where unknown) makes public."""
    if feature_bounds is None:
        return 0
    return int(np.sum(~(np.isnan(feature_bounds[0]) | np.isnan(feature_bounds[1]))))


#: The plan's keys naming the features the scaling could not keep as they are (one
#: :class:`ColumnWarning` and one report line each, :func:`warn_columns`).
COLUMN_NOTES = ("grid_end_features", "fallback_features", "dropped_features")


#: The line of a regression target whose released range reaches the grid's end.
TARGET_END = (f"the target's values reach +-{DEFAULT_GRID.edges[-1]:.0e}, the end of the bounds' "
              f"grid, and are clipped there; divide y by a public constant (thousands, "
              f"millions) or give its public range (target_bounds=(lower, upper))")


class ColumnWarning(UserWarning):
    """Features the default path's scaling fell back on or dropped (:func:`note_columns`)."""


def note_columns(fb, scaling):
    """The plan's record of the features the private bounds could not place, and one
    :class:`ColumnWarning` per kind (post-processing of the release; nothing is spent):
    ``fallback_features`` took the public range ``ZERO_INFLATED_FALLBACK`` (bounds
    collapsed onto the zero bin, or unresolved); ``dropped_features`` are constant after
    scaling (equal bounds), so the model cannot use them."""
    fell = (np.flatnonzero(fb.fallback) if fb.fallback is not None
            else np.zeros(0, dtype=int))
    dropped = np.flatnonzero(scaling.scale == 0)
    note = {"grid_end_features": at_grid_end(fb).tolist(), "fallback_features": fell.tolist(),
            "dropped_features": dropped.tolist()}
    warn_columns(note, stacklevel=5)
    return note


def at_grid_end(fb):
    """The released features with a bound at the end of the bounds' grid (+-10^max_decade):
    their values reach past it and are clipped there (all of them, when the whole column
    lies beyond, which then collapses). Read from the released bounds: free."""
    if fb.private_index is None or len(fb.private_index) == 0:
        return np.zeros(0, dtype=np.intp)
    cols = np.asarray(fb.private_index)
    end = fb.grid.edges[-1]
    hit = (np.abs(fb.lower[cols]) >= end) | (np.abs(fb.upper[cols]) >= end)
    if fb.fallback is not None:
        hit &= ~fb.fallback[cols]
    return cols[hit]


class InMemoryData:
    """The data-dependent steps of :func:`fit_default` on arrays in memory (dense or
    sparse). :class:`dpopt.pipeline.chunked.ChunkedData` does the same steps on chunked
    data, with the same releases: the two share every privacy-relevant function."""

    chunked = False
    #: A public (lower, upper) of the target (``target_bounds=``), or None; when given,
    #: :meth:`target_bounds` releases nothing (``public_bounds``).
    public_target = None

    def __init__(self, X, y, fit_intercept=False):
        self.X, self.y, self.fit_intercept = X, y, fit_intercept
        self.shape = X.shape
        self.sparse = sp.issparse(X)
        self._scaled = None

    def scaled(self, scaling):
        """``scaling.transform(X)``, computed once per scaling (``Scaling.design``: laid out
        as the Problem's design, which then needs no copy)."""
        if self._scaled is None or self._scaled[0] is not scaling:
            design = getattr(scaling, "design", None)
            Xs = (design(self.X, self.fit_intercept) if design is not None
                  else scaling.transform(self.X))
            self._scaled = (scaling, Xs)
        return self._scaled[1]

    def feature_bounds(self, mu, rng, bounds=None, grid=DEFAULT_GRID,
                       quantiles=DEFAULT_QUANTILES):
        return private_feature_bounds(self.X, mu, rng, bounds=bounds, grid=grid,
                                      fallback=ZERO_INFLATED_FALLBACK, quantiles=quantiles)

    def other_value_counts(self, columns):
        return other_value_counts(self.X, columns)

    def scaled_sums(self, scaling):
        # the column sums of the scaled X, without storing it (Scaling.column_sums)
        return scaling.column_sums(self.X)

    def means(self, scaling, mu, rng):
        return noisy_means(self.scaled_sums(scaling), self.shape[0], mu, rng)

    def centred_bounds(self, scaling, columns, mu, rng, quantiles=DEFAULT_QUANTILES):
        # the counts of scaling.transform(X), without storing it (the design that follows
        # uses the narrowed map, another array)
        counts = scaled_feature_histograms(self.X, scaling, columns, DEFAULT_GRID)
        return private_bounds_from_counts(counts, self.shape[0], mu, rng, quiet=True,
                                          quantiles=quantiles)

    def row_bound(self, scaling, mu, rng, quantile=ROW_NORM_QUANTILE):
        return private_row_bound(self.scaled(scaling), mu, rng, quantile)

    def target_bounds(self, mu, rng, quantiles=DEFAULT_QUANTILES):
        if self.public_target is not None:
            return public_bounds(*self.public_target, self.shape[0])
        return private_target_bounds(self.y, mu, rng, quiet=True, quantiles=quantiles)

    def confirmed_target_range(self, noisy, sigma, lower, upper, mu, rng,
                               quantiles=DEFAULT_QUANTILES):
        return confirmed_range(noisy, sigma, self.shape[0], lower, upper, mu, rng,
                               lambda: target_histogram(self.y), quantiles=quantiles)

    def refined_target_bounds(self, lower, upper, mu, rng, bins=REFINE_BINS):
        counts = linear_counts(self.y, lower, upper, bins)
        return refined_bounds(counts, self.shape[0], lower, upper, mu, rng)

    def target_mean(self, target, mu, rng):
        total = float(np.sum(np.clip(target.transform(self.y), -1.0, 1.0)))  # exact bound
        return noisy_target_mean(total, self.shape[0], mu, rng)

    def problem(self, scaling, target, relabel=None, **kwargs):
        """The scaled Problem; ``relabel`` (a per-record map of y, e.g. one class against
        the rest) is applied to the target. Scaled values below 1e-150 in magnitude (a
        row of tiny raw values normalized, a tiny value over a wide range) are set to 0
        (``zero_tiny``): the raw data passed its checks before any release, and a refusal
        here would depend on one record after them."""
        y = self.y if target is None else target.transform(self.y)
        y = y if relabel is None else relabel(y)
        return Problem(self.scaled(scaling), y, zero_tiny=True, **kwargs)


def raw_unit_penalty(problem, scaling, target):
    """The squared loss's penalty on the raw coefficients, as the regressors' docstrings
    state it (scikit-learn's objectives), on the scaled problem (post-processing: the
    scaling is released). A scaled feature is u_j = (x_j - o_j) / s_j and the target
    t = (y - c) / h, so a raw coefficient is w_j = v_j h / s_j and, divided by h^2 as the
    squared loss is, alpha l1 |w_j| + alpha l2 / 2 w_j^2 becomes alpha l1 / (h s_j) |v_j|
    + alpha l2 / (2 s_j^2) v_j^2. Rows normalized (no per-feature scale) keep the penalty
    as given, and so do other losses; a collapsed feature (s_j = 0: 0 on every row) and a
    collapsed target (h = 0) take the factor 1 for their s_j or h."""
    if (problem.loss.name != "squared" or problem.penalty.name == "none"
            or not isinstance(scaling, Scaling)):
        return problem
    h = target.half_width if target is not None else 1.0
    s = np.asarray(scaling.scale, dtype=np.float64)
    inv = np.divide(1.0, s, out=np.ones_like(s), where=s > 0)
    pad = [1.0] * (problem.dim - len(s))  # the intercept (unpenalized)
    l1 = np.concatenate([inv / h if h > 0 else inv, pad])
    problem.penalty = problem.penalty.weighted(l1, np.concatenate([inv ** 2, pad]))
    return problem


def _data_of(X, y, loss, fit_intercept, target_bounds=None):
    """The data adapter of :func:`fit_default`: in memory, or chunked (a
    :class:`~dpopt.data.chunked.ChunkedProblem`, or a Dask collection / path with ``y``),
    with the public target range ``target_bounds`` (or None)."""
    if getattr(X, "is_chunked", False) is True or is_chunked_input(X):
        data = ChunkedData.of(X, y, loss=loss, fit_intercept=fit_intercept)
    else:
        data = InMemoryData(X, y, fit_intercept)
    data.public_target = target_bounds
    return data


def private_scaling(data, mus, *, fit_intercept, center, regression, rng, bounds=None,
                    row_mode=None, gaussian_model=False, least_model_mu=0.0):
    """The scaling steps of :func:`fit_default` (the releases of the module table with the
    mu of ``mus``; rows normalized, for free, when ``mus`` has no ``feature_bounds``).
    Returns ``(scaling, target_scaling or None, R, records, columns_note)``, the note naming
    the columns whose bounds fell back or collapsed (:func:`note_columns`). ``bounds``:
    public (lower, upper) per feature, NaN where unknown (those cost nothing). The feature
    bounds' histograms are on :func:`bounds_grid` of their mu (the note has ``coarse_grid``
    True when that is the coarse grid). ``gaussian_model``: whether the model mechanism is
    Gaussian, so that a release decided by the data may take its mu out of the model's (the
    re-centring after the (free) narrowing of a feature whose mean missed its values, the
    count of a far end of the target's range): objective perturbation is calibrated against
    the scaling's mu, which must not depend on the data, so there the re-centring does not
    run and the far end's mu leaves the model whether or not its count runs.
    ``least_model_mu``: the mu the model must keep after a release decided by the data
    (the smallest usable epsilon at the fit's delta), so that such a release never turns a
    fit the plan admits into a refused one."""
    begin()  # the model path's first release (dpopt.privacy.releases)
    records, columns_note = [], {}
    # inference=True on a regression: clip levels shrinking with n mu (a consistent estimand)
    levels = {}
    if "inference" in mus and regression and not data.chunked:
        mu_fit = math.sqrt(sum(v * v for v in mus.values()))  # the plan's mu, public
        quantiles, row_q = inference_levels(data.shape[0], mu_fit)
        levels = {"quantiles": quantiles, "row": {"quantile": row_q}}
        columns_note["inference_levels"] = {"tail": quantiles[0], "row_tail": 1.0 - row_q}
    q_kw = {"quantiles": levels["quantiles"]} if levels else {}
    if row_mode is None:
        row_mode = "feature_bounds" not in mus
    if row_mode:
        scaling, R = RowNormalization(), 1.0
    else:
        mu_b = mus.get("feature_bounds", math.inf)
        if "indicators" in mus and not data.sparse:
            q_ind = _quantiles(q_kw)[0]
            bounds, rec, columns_note["indicator_features"] = _indicators(
                data, bounds, mus["indicators"], rng, q_ind)
            records += rec
        private = data.shape[1] - public_count(bounds)
        if private == 0:  # every bound is public now: the histograms' mu goes to the model
            _to_model(mus, "feature_bounds", "centred_bounds")
        grid = (bounds_grid(data.shape[0], private, mu_b) if private else None) or DEFAULT_GRID
        fb = data.feature_bounds(mu_b, rng, bounds=bounds, grid=grid, **q_kw)
        records += list(fb.mechanisms)
        scaling = Scaling.from_bounds(fb.lower, fb.upper, shift=fit_intercept, sparse=data.sparse)
        columns_note.update(note_columns(fb, scaling), coarse_grid=grid is COARSE_GRID)
        if center:
            means, rec = data.means(scaling, mus["feature_means"], rng)
            records += rec
            scaling = scaling.centered(means)
            if "centred_bounds" in mus:
                reach = DEFAULT_CONFIDENCE * mean_noise(*data.shape, mus["feature_means"])
                scaling, rec, moved, folded = _narrow(data, scaling, fb, mus["centred_bounds"],
                                                      rng, reach, q_kw,
                                                      fold="inference" not in mus)
                records += rec
                if moved.size:  # narrowed about their bounds' middle (free)
                    columns_note["recentred_features"] = moved.tolist()
                if folded:  # their centred range read on |v| (free)
                    columns_note["folded_features"] = folded
                mu_c = (recentre_mu(data.shape[0], moved.size, mus, least_model_mu)
                        if gaussian_model else None)
                if mu_c is not None:  # then centred by a second location release
                    from_model(mus, "recentre", mu_c)
                    scaling, rec = recentre(data, scaling, moved, mus["recentre"], rng)
                    records += rec
        R, rec = data.row_bound(scaling, mus["row_norm"], rng, **levels.get("row", {}))
        records += rec
    target = None
    if regression:
        if data.public_target is not None:  # for the report (_column_lines)
            columns_note["public_target"] = [float(v) for v in data.public_target]
        tb = data.target_bounds(mus.get("target_bounds", math.inf), rng, **q_kw)
        records += list(tb.mechanisms)
        # a far end confirmed by a fresh count, its mu out of the model's: when the count
        # runs, or in any case before objective perturbation (gaussian_model)
        mu_c = confirm_mu(mus["target_bounds"], mus["model"]) if "target_bounds" in mus else None
        if mu_c is not None and not keeps_least(mus["model"], (mu_c / mus["model"]) ** 2,
                                                least_model_mu):
            mu_c = None  # no count: a far end is cut where the restarted scan finds the data
        if mu_c is not None and not gaussian_model:
            from_model(mus, "target_confirm", mu_c)
        lo, hi, rec, far = target_range(data, tb, mu_c, rng, q_kw)
        if rec and gaussian_model:
            from_model(mus, "target_confirm", mu_c)
        records += rec
        if far:
            columns_note["target_far_ends"] = far
        noisy, sigma = tb.noisy_counts, tb.sigma
        if (gaussian_model and fit_intercept and sigma > 0 and tb.unresolved is not None
                and tb.unresolved[0]):  # not located: a second look, pooled with the first
            lo, hi, noisy, sigma, rec = target_second_look(data, tb, mus, rng, q_kw,
                                                             least_model_mu)
            records += rec
            if rec:
                columns_note["target_second_look"] = bool(hi > lo)
        if data.public_target is None and max(abs(lo), abs(hi)) >= tb.grid.edges[-1]:
            columns_note["target_grid_end"] = True
            warnings.warn(TARGET_END, ColumnWarning, stacklevel=5)
        if hi > lo and sigma > 0 and zeros_only(noisy, sigma, lo, hi, tb.grid):
            lo = hi = 0.0  # the zeros alone: collapsed (fit_default releases a mean of y)
        if (data.public_target is None and hi > lo and sigma > 0 and fit_intercept
                and "inference" not in mus):
            # a thin tail beyond the range: the constant's mean may be clipped further out
            # than the model's target (dpopt.pipeline.constant.all_rows_mean; free)
            steps = tail_steps(noisy, sigma, data.shape[0], lo, hi, grid=tb.grid,
                               quantiles=_quantiles(q_kw))
            if steps["lower"] or steps["upper"]:
                columns_note["target_tail"] = {"range": [lo, hi], **steps}
        # not with inference=True: the narrower range clips about 1% of a normal target,
        # a bias of the estimand that intervals at large n would not cover. Its mu leaves
        # the model by public sizes alone, so the model's calibration (objective
        # perturbation's prior) is the same whatever the first look said; a range collapsed
        # onto one value cannot be read again and leaves it unspent
        if fit_intercept and "inference" not in mus:
            lo, hi = looks_at_target(data, lo, hi, mus, rng, gaussian_model, columns_note,
                                      records, least_model_mu)
        target = TargetScaling.from_bounds(lo, hi, shift=fit_intercept)
    return scaling, target, R, records, columns_note


def target_range(data, tb, mu, rng, q_kw=None):
    """(lower, upper, records, note) of the target's released range ``tb`` (a
    :class:`FeatureBounds` of y), each far end kept only on a fresh count at ``mu`` (None:
    replaced by its inner end where the restarted scan found the data, kept otherwise), by
    :func:`dpopt.preprocessing.far_ends.confirmed_range`. A public range, or one released
    without noise, is taken as it is."""
    lo, hi = float(tb.lower[0]), float(tb.upper[0])
    if data.public_target is not None or not tb.sigma > 0:
        return lo, hi, [], None
    return data.confirmed_target_range(tb.noisy_counts, tb.sigma, lo, hi, mu, rng,
                                       **(q_kw or {}))


def _to_model(mus, *steps):
    """Give the model the mu of plan ``steps`` that will not run (their releases are
    skipped because of an earlier release's outcome): sum of mu^2 unchanged, and every
    branch spends at most the target (fully adaptive composition of Gaussian mechanisms,
    Smith & Thakurta 2022, as :func:`refine_mu`)."""
    freed = sum(mus.pop(step, 0.0) ** 2 for step in steps)
    mus["model"] = math.sqrt(mus["model"] ** 2 + freed)


def _indicators(data, bounds, mu, rng, quantile=DEFAULT_QUANTILES[0]):
    """The indicator test (:mod:`dpopt.preprocessing._indicators`) on the columns with no
    public bound, at its ``quantile`` (the share of values outside {0, 1} that a [0, 1]
    range may clip): (bounds with [0, 1] for the columns it finds to be 0/1 indicators, its
    records, those columns). They are then public to the feature bounds' release, which
    counts only the others (its noise is sqrt(2 p') / mu for p' released columns), and, as
    a table's bool columns, are not narrowed around their means."""
    lower, upper = check_public_bounds(bounds, data.shape[1], "feature_bounds")
    # only columns with no public side: a side the user gave is never replaced
    columns = np.flatnonzero(np.isnan(lower) & np.isnan(upper))
    if columns.size == 0:
        return bounds, [], []
    test = private_indicators(data.other_value_counts(columns), data.shape[0], mu, rng,
                              columns, quantile)
    found = test.indicator_columns
    lower[found], upper[found] = 0.0, 1.0
    return (lower, upper), list(test.mechanisms), found.tolist()


def _short(columns, head=20):
    """A list of column indices for a report line, its first ``head`` then an ellipsis."""
    shown = ", ".join(str(int(c)) for c in list(columns)[:head])
    return f"[{shown}]" if len(columns) <= head else f"[{shown}, ...]"


def _narrow(data, scaling, fb, mu, rng, reach, q_kw=None, fold=True):
    """The centred features' own scale (step "centred bounds"): private bounds of the
    centred, scaled values of every feature whose bounds were released, then
    :meth:`Scaling.narrowed`. A feature whose values fill a small part of its first bounds
    (a year in [1778, 3162] on the public grid, a longitude in [-178, -100]) otherwise
    spans a sliver of [-1, 1] that the mechanism's noise and ridge swamp; its centred
    values sit near 0, where the signed-log grid is fine, so the second histogram finds
    their spread within a factor 10^(1/bins_per_decade). A mean, then a range around it:
    the location-then-scale refinement of Karwa & Vadhan (ITCS 2018) and Biswas et al.
    (CoinPress, NeurIPS 2020). One histogram per released feature on the public grid:
    L2 sensitivity sqrt(2 p') under replace-one, one Gaussian record (mu-GDP), p' the
    number of released features (public, whatever the data). ``reach`` bounds the noisy
    means' error (``DEFAULT_CONFIDENCE`` standard deviations of :func:`noisy_means`, public):
    a feature whose first bounds are one bin of the grid (:func:`within_bins`) and whose centred
    bounds are one-sided within it, the far end less its rounding to a bin edge (a factor
    10^(1/bins_per_decade)), is narrowed about their middle (:meth:`Scaling.narrowed`); where
    such a feature's centred bounds are unresolved, they are read again folded onto |v|
    (:func:`~dpopt.preprocessing.folded.folded_centred_bounds`), unless ``fold`` is False
    (with ``inference=True``: the folded scan stops inside the 1%/99% quantiles at a small
    budget, and the clipping it adds biases the coefficients the intervals are for, as the
    target's narrower range would). Returns (scaling, records, the re-centred features, the
    features read folded)."""
    columns = fb.private_index
    if columns is None or len(columns) == 0:
        return scaling, [], np.zeros(0, dtype=np.intp), []
    cb = data.centred_bounds(scaling, columns, mu, rng, **(q_kw or {}))
    # one bin of the grid: all the first release knows of such a feature is its order of
    # magnitude, so its values may fill a sliver of that range (a year in [1778, 3162]);
    # over several bins a feature fills a good part of its range, and a one-sided
    # centred range is then the histogram's noise, not a mean that missed its bulk
    narrow = within_bins(fb.lower[columns], fb.upper[columns], 1, fb.grid)
    lower, upper, folded = folded_centred_bounds(cb, narrow & fold, data.shape[0],
                                                 _quantiles(q_kw))
    # the far end of a one-sided centred range is rounded outwards by up to one bin of the
    # grid: the values lie within reach when that end, less the rounding, does
    rounded = reach * 10.0 ** (1.0 / cb.grid.bins_per_decade)
    out = scaling.narrowed(columns, lower, upper, np.where(narrow, rounded, 0.0))
    return (out, list(cb.mechanisms), np.flatnonzero(out.offset != scaling.offset),
            [int(c) for c in np.asarray(columns)[folded]])


def _quantiles(q_kw):
    """The bounds' quantile levels of the scaling's keywords (``inference=True``'s levels)."""
    return (q_kw or {}).get("quantiles", DEFAULT_QUANTILES)


def recentre_mu(n, k, mus, least=0.0):
    """The mu of the re-centring of k features (:func:`recentre`), or None (no feature,
    or the model would keep less than half its mu^2, or less than ``least``, the smallest
    usable epsilon's mu). Their narrowed values span [-1, 1], so a mean with noise sd
    ``RECENTRE_SD`` = 0.1 leaves an offset whose square is about 1% of that range's: sd
    2 sqrt(k) / (n mu) = 0.1. Never more than the first location step's mu."""
    if k == 0:
        return None
    mu = min(mus["feature_means"], 2.0 * math.sqrt(k) / (n * RECENTRE_SD))
    return mu if spares(mus["model"], mu, least) else None


def recentre(data, scaling, columns, mu, rng):
    """Step "re-centring": the location step again, for the features :func:`_narrow`
    re-centred on the middle of one-sided bounds (a log-grid bin is coarse, so that middle
    can sit half a range away from the values and the rows' norm grows by it). Their
    narrowed values lie in [-1, 1]; mapped to [0, 1] by (z + 1) / 2 they are released by
    :func:`noisy_means` (sensitivity sqrt(k) for k features under replace-one: one Gaussian
    record of multiplier 1/mu), then :meth:`Scaling.recentred` subtracts the noisy means.
    CoinPress (Biswas et al., NeurIPS 2020) iterates location and scale the same way; mu
    (:func:`recentre_mu`) is taken out of the model's (the features are known only after
    the centred bounds: fully adaptive composition)."""
    n = data.shape[0]
    sums = np.asarray(data.scaled_sums(scaling), dtype=float)[columns]
    half, records = noisy_means(0.5 * (sums + n), n, mu, rng)
    return scaling.recentred(columns, 2.0 * half - 1.0), records


def warn_columns(plan, stacklevel=2):
    """One :class:`ColumnWarning` per line of :func:`_column_lines` about columns."""
    for text in _column_lines({k: plan.get(k) for k in COLUMN_NOTES}):
        warnings.warn(text, ColumnWarning, stacklevel=stacklevel)


def _column_lines(plan):
    """The warning / report lines naming the features the scaling fell back on or dropped."""
    lines = []
    sel = plan.get("screen")
    if sel:
        lines.append(f"high-dimensional route ({sel['rule']}): a private screen kept "
                     f"{sel['n_selected']} features (noisy |score| > {sel['threshold']:.3g}); "
                     f"every other coefficient is 0")
    found = plan.get("indicator_features") or []
    if found:
        lines.append(f"features {_short(found)} ({len(found)}): a private count of their values "
                     f"outside {{0, 1}} found them 0/1 indicators; their range is [0, 1]")
    moved = plan.get("recentred_features") or []
    if moved:
        again = ("re-centred by a second noisy mean" if "recentre" in plan.get("mu_shares", {})
                 else "not centred again (objective perturbation's budget is fixed in advance)")
        lines.append(f"features {_short(moved)} ({len(moved)}): their values fill a sliver of one "
                     f"bin of the bounds' grid, which the noisy mean missed; they were narrowed "
                     f"about the middle of their centred range and {again}")
    folded = plan.get("folded_features") or []
    if folded:
        lines.append(f"features {_short(folded)} ({len(folded)}): their values fill a sliver of "
                     f"one bin of the bounds' grid and their centred values, on both signs, did "
                     f"not resolve; their centred range was read on |x - mean| (the same "
                     f"counts, folded)")
    public_y = plan.get("public_target")
    coded = (plan.get("table") or {}).get("target_coding")
    if coded:
        lines.append(f"columns {coded['columns']} are target-coded (the private means of y of "
                     f"their values' {coded['buckets']} buckets, noise sd {coded['sigma']:.3g})"
                     + ("" if not public_y else
                        f"; y's range [{public_y[0]:g}, {public_y[1]:g}] "
                        + ("was released with them" if coded.get("range_released", True)
                           else "is public (target_bounds=)")
                        + " and y is clipped to it (no second histogram of y)"))
    elif public_y:
        lines.append(f"the target's range [{public_y[0]:g}, {public_y[1]:g}] is public "
                     f"(target_bounds=): y is clipped to it, no histogram of y is released")
    if plan.get("target_grid_end"):
        lines.append(TARGET_END)
    if plan.get("target_narrow_band"):
        lines.append(NARROW_BAND.format(*plan["target_narrow_band"]))
    ends = plan.get("grid_end_features") or []
    if ends:
        lines.append(f"features {_short(ends)} ({len(ends)}): their private bounds reach "
                     f"+-{DEFAULT_GRID.edges[-1]:.0e}, the end of the bounds' grid. Either their "
                     f"values do, and are clipped there (divide them by a public constant: "
                     f"thousands, millions), or a column with few values the histogram's "
                     f"noise could not place; public bounds settle both")
    fell, dropped = plan.get("fallback_features") or [], plan.get("dropped_features") or []
    if fell:
        lo, hi = ZERO_INFLATED_FALLBACK
        m = max(abs(lo), abs(hi))
        lines.append(f"features {fell} ({len(fell)}): the private bounds could not place their "
                     f"values at this budget; they are clipped to a public range instead of "
                     f"being dropped: [{lo:g}, {hi:g}] where the bulk is exactly 0 "
                     f"(zero-inflated: exact for 0/1 indicators, counts become 'nonzero'), "
                     f"[{-m:g}, {m:g}] where nothing could be located. Give public bounds "
                     f"to keep their scale")
    if dropped:
        lines.append(f"features {dropped} ({len(dropped)}) are dropped: their bounds are equal, "
                     f"so they are constant after scaling and the model cannot use them")
    return lines
