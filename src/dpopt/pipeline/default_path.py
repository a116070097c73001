"""``solver="auto"``: the estimators' default path, private end to end.

A plain ``DPLogisticRegression(epsilon=1).fit(X, y)`` on raw data runs this
pipeline. Every scaling step is a Gaussian mechanism: with mu the Gaussian-DP
parameter (Dong, Roth & Su 2022) of the target (epsilon, delta), step k gets
mu_k with sum_k mu_k^2 = mu^2. A Gaussian model mechanism gets the remaining
mu, so the fit is (epsilon, delta)-DP exactly; objective perturbation (not
Gaussian) is calibrated against the whole target given the scaling's mu
(``prior_mu``), which its dominating pair composes with exactly.

====================  ==========  ============================================================
step                  share mu^2  what it releases (replace-one adjacency)
====================  ==========  ============================================================
indicator test        2%          (dense) per-feature noisy counts of values outside {0, 1}
                                  -> 0/1 columns get public [0, 1] and no histogram
                                  (:mod:`dpopt.preprocessing._indicators`)
feature bounds        10%         per-feature noisy histograms on a public grid -> lower/upper
                                  quantiles (:func:`dpopt.preprocessing.private_feature_bounds`)
centred bounds        10%         (dense, with an intercept, when the feature bounds take their
                                  default share) per-feature noisy histograms of the centred
                                  scaled values -> each feature's spread around its mean
re-centring           from the    (features whose noisy mean missed their values) noisy means
                      model's     of the narrowed features (:func:`~.scaling.recentre`)
row-norm bound        3%          noisy log-histogram of the scaled rows' norms -> its 95%
                                  quantile R (:func:`dpopt.privacy.private_quantile`)
target bounds         5%          (regression) noisy histogram of y -> lower/upper quantiles
far end's count       from the    (an end of y's range more than 10^1.5 times beyond the scan
                      model's     restarted inside it) records beyond it, noisy -> kept or cut
                                  (:mod:`dpopt.preprocessing.far_ends`)
curvature             2-50% of    (least squares where AdaSSP declines) noisy Gram matrix ->
                      the model's a bound on lambda_max(X^T X / n), DP-GD's smoothness
                                  (:mod:`dpopt.pipeline.curvature`)
model                 the rest    the mechanism of :data:`AUTO_TABLE` on the scaled data
====================  ==========  ============================================================

Why these shares: the bounds only need to be right within a factor (they fix a
scale, not a statistic), and a 15-18% share costs the model a factor
1/sqrt(0.82..0.85) ~ 1.09 in noise standard deviation, whatever n and epsilon.

Scaling (post-processing of the bounds, free): dense features are clipped to
their private bounds and mapped to [0, 1] (min-max; a column whose bounds
collapse becomes 0); sparse features are clipped and divided by their largest
absolute bound (zeros stay zeros). Without an intercept no shift is applied, so
the model class is unchanged. Rows longer than R are rescaled to norm R by the
mechanism (so the guarantee never depends on the data). A regression target is
clipped to its private bounds and mapped to [-1, 1]. The fitted coefficients
are mapped back to raw units; ``predict`` clips features to the same bounds.

The model mechanism and its settings come from (loss, penalty, n, p, mu) only, by
the table below (:func:`choose_solver`), and the explicit solvers get their
knobs from :func:`rules`, derived from the scaled domain (not from the data):

===========================  =============================  ====================================
loss                         penalty                        mechanism
===========================  =============================  ====================================
squared                      none, l2                       ``adassp`` (Wang 2018): one pass,
                                                            adaptive ridge, near-optimal n >> p;
                                                            ``dp-gd`` with a released curvature
                                                            where AdaSSP declines (its noise on
                                                            X^T X above the Gram's scale)
logistic, huber              none, l2                       ``objective-perturbation``
                                                            (Redberg, Koskela & Wang 2023)
any                          l1, elastic_net; or the        ``dp-cd`` with :func:`rules`
                             absolute loss                  (prox handles L1; clipping never binds)
===========================  =============================  ====================================

Columns the feature bounds cannot place (bounds collapsed onto the exact zero bin:
zero-inflated indicators and counts; or unresolved) get a public range instead of being
dropped ([0, 1], resp. [-1, 1]: ``fallback`` of :func:`dpopt.preprocessing.private_feature_bounds`);
a :class:`ColumnWarning` and a line of the report name them, and any feature still
dropped. A classification problem with more features than a private full-dimensional fit
can use takes the screening route of :mod:`dpopt.pipeline.feature_selection` first.

When a mechanism of the table is not registered in the running installation,
the next rule applies (``dp-gd`` with :func:`rules`), and ``fit_result_.params``
says so.

Chunked data (a :class:`~dpopt.data.chunked.ChunkedProblem`, Dask collections, files read
out of core): the same plan and the same releases, the data-dependent parts (histogram
counts, column sums, row-norm counts) computed per chunk and summed by Dask's tree, the
noise added once on the client by the functions used in memory (:class:`InMemoryData` and
:class:`dpopt.pipeline.chunked.ChunkedData` share them: :func:`noisy_means`,
:func:`row_bound_from_counts`, :func:`dpopt.preprocessing.private_bounds_from_counts`), so the
sensitivities and records are those above. Only distributed mechanisms are chosen: the rows
of the table leading to ``dp-cd`` lead to ``dp-gd`` with :func:`rules` (:data:`CHUNKED_REASON`:
DP-CD takes one cluster-wide reduction per coordinate, DP-GD one per step).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np

from dpopt._core.exceptions import ChargedFitError
from dpopt._core.validation import MIN_EPSILON
from dpopt.pipeline.autofit import AutoFit, constant_fit  # noqa: F401 (AutoFit: public here too)
from dpopt.pipeline.curvature import (
    curvature_step,
    huber_in_place_of_squares,
    intercept_step,
    one_step_share,
    rescaled_huber_fit,
    steps_above,
)
from dpopt.pipeline.inference import SUPPORTED as INFERENCE_PATHS
from dpopt.pipeline.inference import Inference, release_inference, unsupported_reason
from dpopt.pipeline.mean_of_y import adassp_mean_instead, private_mean_of_y
from dpopt.pipeline.scaling import (  # noqa: F401 (the scaling steps, public here too)
    MAX_SHARE,
    SHARES,
    TARGET_END,
    ColumnWarning,
    InMemoryData,
    _column_lines,
    _data_of,
    bounds_resolvable,
    note_columns,
    private_scaling,
    public_count,
    raw_unit_penalty,
    warn_columns,
)
from dpopt.preprocessing._bounds import COARSE_GRID, DEFAULT_GRID
from dpopt.preprocessing.feature_maps import (  # noqa: F401 (the maps of AutoFit)
    RowNormalization,
    Scaling,
    TargetScaling,
)
from dpopt.privacy import (
    Gaussian,
    epsilon_of,
    gdp_epsilon,
    gdp_mu,
)
from dpopt.privacy.releases import begin
from dpopt.solvers import available_solvers, get_solver, solve_uncharged
from dpopt.solvers._common import run_length  # noqa: F401 (the rules' run length, public here)

#: Share of mu^2 of the releases of :mod:`dpopt.pipeline.inference` (``inference=True`` only): they
#: fix a variance, not the model, so they need to be right within tens of percent.
INFERENCE_SHARE = 0.10



# --------------------------------------------------------------------------- the table


#: Why chunked data never goes to dp-cd (recorded in ``params["auto"]["reason"]``).
CHUNKED_REASON = "chunked data: dp-cd takes one cluster-wide reduction per coordinate"


def choose_solver(loss, penalty, n, p, available, *, chunked=False, mu=None) -> tuple[str, str]:
    """The mechanism for (loss, penalty) and why, read from the solvers' declarations
    (``register_solver(..., default_path=DefaultUse(...))``): among the ``available``
    solvers whose declaration applies, the highest rank. ``chunked``: the data is a
    :class:`~dpopt.data.chunked.ChunkedProblem`, so only solvers declared ``distributed``
    run; when the best one is not (dp-cd: one reduction per coordinate), the best
    distributed one is chosen and the reason says so. ``mu``: the model's Gaussian-DP
    mu; given, when the best solver's ``declines(n, p + 1, mu)`` gives a reason (its
    error bound at these public sizes, e.g. AdaSSP's noise on X^T X above its scale), the
    solver its declaration names ``instead`` is chosen and the reason says why. (n, p) are
    public sizes; the data is never read."""
    uses = sorted((get_solver(name) for name in available), key=lambda s: -_rank(s))
    fits = [s for s in uses if s.default_path is not None and s.default_path.applies(loss, penalty)]
    if not fits:
        raise ValueError(f"no solver of the default path fits loss={loss!r}, penalty={penalty!r}")
    declined = []
    if mu is not None:
        best = fits[0].default_path
        why = best.declines and best.declines(n, p + 1, mu)
        instead = [s for s in fits if s.name == best.instead]
        if why and instead:
            declined, fits = [f"{fits[0].name} passed over: {why}"], instead
    best = fits[0]
    chosen = next((s for s in fits if s.distributed), None) if chunked else best
    if chosen is None:
        raise ValueError(f"no distributed solver of the default path fits loss={loss!r}, "
                         f"penalty={penalty!r}")
    why = chosen.default_path.why.format(loss=loss, penalty=penalty)
    why = "; ".join([*declined, why])
    return chosen.name, why if chosen is best else f"{CHUNKED_REASON}: {why}"


def _rank(spec):
    return spec.default_path.rank if spec.default_path is not None else -math.inf


def rules(solver, *, loss, n, dim, mu, row_bound, alpha=0.0, huber_threshold=1.0,
          inference=False, **released):
    """Public settings of ``solver`` on data scaled by the default path: its declared
    ``DefaultUse.settings`` (dp-gd, dp-sgd, dp-cd, adassp, objective perturbation; each
    solver module's ``default_settings`` says how they follow from the scaled domain).

    ``row_bound`` is R (features of every row have norm <= R after scaling; each feature
    is in [0, 1] or [-1, 1]); ``dim`` counts the intercept column; ``inference``: the fit
    also gives intervals (AdaSSP then keeps its eigenvalue release). Nothing here reads the
    data. ``released``: numbers already released privately, passed to every solver's
    settings, each taking what it reads (dp-gd's ``curvature``, :mod:`dpopt.pipeline.curvature`;
    AdaSSP's ``target_spread``, the second look at the target's range).
    """
    use = get_solver(solver).default_path
    if use is None:
        raise ValueError(f"no rule for solver {solver!r}")
    return use.settings(loss=loss, n=n, dim=dim, mu=mu, row_bound=row_bound, alpha=alpha,
                        huber_threshold=huber_threshold, inference=inference, **released)


# --------------------------------------------------------------------------- the pipeline


def dimension_limit(n, mu) -> float:
    """The largest p for which a full-dimensional private fit's error bound
    sqrt(p / n) + sqrt(p) / (n mu) stays below 1 (:mod:`dpopt.pipeline.feature_selection`):
    beyond it a classifier takes the screening route, and a regressor, which has none, is
    released as the constant (:func:`fit_default`)."""
    return 1.0 / (1.0 / math.sqrt(n) + 1.0 / (n * mu)) ** 2


def high_dimensional(n, p, mu) -> bool:
    """Whether p is beyond :func:`dimension_limit`: the screening route for a classifier
    (:func:`dpopt.pipeline.feature_selection.fit_routed`), the constant for a regressor."""
    return p > dimension_limit(n, mu)


def plan_budget(n, p, mu, *, regression, center, public=0, inference=False, coarse=False,
                sparse=False, public_target=False):
    """Shares of mu^2 for the scaling steps, from public (n, p, mu) only.

    Feature bounds get ``SHARES["feature_bounds"]``, or ``MAX_SHARE`` when that is
    what :func:`bounds_resolvable` needs, on the default grid, or else (``coarse``: a
    binary classifier without ``inference``) on the coarse one
    (:func:`~dpopt.pipeline.scaling.bounds_grid`), or nothing: then rows are normalized
    (free) and no mean or row norm is needed either. Means are released only when
    features are centred (dense data with an intercept). A regression target gets
    ``SHARES["target_bounds"]`` or ``MAX_SHARE`` likewise; if even that cannot
    resolve one histogram, no private fit can learn the target's scale: the plan is
    then ``None`` (see :func:`fit_default` and :func:`model_possible`); a public target
    range (``public_target``) needs no share, the rule still says if a model is possible.
    ``public`` of the p features have public bounds (``feature_bounds=``, the 0/1 columns of
    :mod:`dpopt.preprocessing.tables`): only the others are released, and when none is
    left the bounds cost nothing.
    ``inference``: :data:`INFERENCE_SHARE` for the
    releases of :mod:`dpopt.pipeline.inference` (only with per-feature bounds: a row-normalized
    model has no raw-unit coefficients).
    """
    shares = {}
    if public >= p:  # every bound is public: scale without a release
        if center:
            shares["feature_means"] = SHARES["feature_means"]
        shares["row_norm"] = SHARES["row_norm"]
        if inference:
            shares["inference"] = INFERENCE_SHARE
    p = p - public
    # the coarse grid: binary classifiers only, and not for inference
    # (dpopt.pipeline.scaling.bounds_grid says why)
    grids = ((DEFAULT_GRID, COARSE_GRID) if coarse and not (regression or inference)
             else (DEFAULT_GRID,))
    tries = [(share, grid) for grid in grids
             for share in (SHARES["feature_bounds"], MAX_SHARE)] if p > 0 else []
    for share, grid in tries:
        if bounds_resolvable(n, p, mu * math.sqrt(share), grid):
            shares["feature_bounds"] = share
            if not sparse:  # which columns are 0/1 indicators (public [0, 1] after it)
                shares["indicators"] = SHARES["indicators"]
            if center:
                shares["feature_means"] = SHARES["feature_means"]
                if share == SHARES["feature_bounds"] and grid is DEFAULT_GRID:
                    # not where the bounds need MAX_SHARE or the coarse grid
                    shares["centred_bounds"] = SHARES["centred_bounds"]
            shares["row_norm"] = SHARES["row_norm"]
            if inference:
                shares["inference"] = INFERENCE_SHARE
            break
    if regression:
        share = next((s for s in (SHARES["target_bounds"], MAX_SHARE)
                      if bounds_resolvable(n, 1, mu * math.sqrt(s))), None)
        if share is None:
            return None
        if not public_target:
            shares["target_bounds"] = share
    return shares


def model_possible(n, epsilon, delta, prior=None, spent_mu=0.0, p=1):
    """Whether the default path can fit a regression model on n rows of p features, from
    public facts only: :func:`plan_budget` is not None, i.e. the target's histogram is
    resolvable on the default grid at ``MAX_SHARE`` of what the ``prior`` releases leave,
    and p is within :func:`dimension_limit`. Otherwise the
    released predictor is the private mean of y (:func:`_no_model`), and the held-out
    selection (:mod:`dpopt.pipeline.selection`) asks first, so that the constant is
    computed from all n rows. ``spent_mu``: what a release before the model path keeps
    (the held-out choice's constant on all rows)."""
    mu = gdp_mu(epsilon, delta - (prior.delta if prior is not None else 0.0))
    mu = math.sqrt(max(mu ** 2 - spent_mu ** 2, 0.0))
    return bounds_resolvable(n, 1, mu * math.sqrt(MAX_SHARE)) and not high_dimensional(n, p, mu)


#: The model's share of mu is shrunk by this relative amount (:func:`split_mu`).
ROUNDING_MARGIN = 1e-12


def split_mu(epsilon, delta, shares, *, spent_mu=0.0):
    """(mu, {step: mu_step}): ``model`` gets what the shares leave (sum of mu^2 = mu^2).
    ``spent_mu``: Gaussian-DP mu already spent by an earlier release of the same fit; the
    shares then split sqrt(mu^2 - spent_mu^2) and ``mu`` is still the whole target's."""
    mu = gdp_mu(epsilon, delta)
    avail = math.sqrt(max(mu ** 2 - spent_mu ** 2, 0.0))
    out = {k: avail * math.sqrt(v) for k, v in shares.items()}
    # what the steps leave, less a relative 1e-12: the rounding of the squares and sums
    # above must not make the composition spend more than the target
    left = max(avail ** 2 - sum(v ** 2 for v in out.values()), 0.0)
    out["model"] = math.sqrt(left) * (1.0 - ROUNDING_MARGIN)
    return mu, out


def fit_default(X, y, *, loss, penalty, penalty_kwargs, fit_intercept, epsilon, delta, rng,
                regression, spent_mu=0.0, feature_bounds=None, prior=None, inference=False,
                constant_only=False, target_bounds=None):
    """Run the default path (module docstring) and return an :class:`AutoFit`.

    ``y`` is already encoded for the loss ({-1, +1} labels for logistic). ``X`` may also
    be chunked: a :class:`~dpopt.data.chunked.ChunkedProblem` (``y`` None: its own target)
    or a Dask collection / path (with ``y``); the same releases are then computed chunk by
    chunk and the mechanism is a distributed one (:mod:`dpopt.pipeline.chunked`). The
    returned ``result`` is the model's FitResult with ``epsilon``, ``mechanisms`` and
    ``accountant`` replaced by those of the whole composition.

    ``inference``: also release what :mod:`dpopt.pipeline.inference` needs for standard
    errors (its share of mu is in the plan and the composition); a ValueError before the
    data is read when the path cannot give them
    (:func:`dpopt.pipeline.inference.unsupported_reason`).

    ``constant_only``: release only the constant (:func:`_no_model`), as when
    :func:`plan_budget` finds no model possible; the held-out selection asks for it when
    its training rows could not fit a model (:func:`model_possible`).

    ``spent_mu``: the Gaussian-DP mu a release before this call spent (the screening route
    of :func:`dpopt.pipeline.feature_selection.fit_routed` calls here on the kept columns),
    which the plan leaves out (the steps here share sqrt(mu^2 - spent_mu^2)) and objective
    perturbation counts in its ``prior_mu``.
    ``target_bounds``: a regression target's public (lower, upper), checked by the caller:
    no histogram of y is released (its share stays with the model); y is clipped to it.
    """
    data = _data_of(X, y, loss, fit_intercept, target_bounds)
    n, p = data.shape
    loss_name = loss if isinstance(loss, str) else loss.name
    center = fit_intercept and not data.sparse
    if inference:
        check_inference(loss_name, penalty, penalty_kwargs, data.chunked, n, p)
    delta_total, delta = delta, delta - (prior.delta if prior is not None else 0.0)
    public = public_count(feature_bounds)
    whole = gdp_mu(epsilon, delta)
    mu_avail = math.sqrt(max(whole ** 2 - spent_mu ** 2, 0.0))
    prior_sq = prior.share * whole ** 2 if prior is not None else 0.0  # a share of the whole
    # a regressor with more features than any private fit can use: the constant (its
    # d x d releases would not fit in memory either; a classifier is screened first)
    wide = regression and high_dimensional(n, p, mu_avail)
    shares = None if constant_only or wide else plan_budget(
        n, p, mu_avail, regression=regression, center=center, public=public, inference=inference,
        coarse=True, sparse=data.sparse, public_target=target_bounds is not None)
    if shares is None:
        left = math.sqrt(max(mu_avail ** 2 - prior_sq, 0.0))
        why = (f"p={p} features are more than a private fit on n_samples={n} can use at "
               f"epsilon={epsilon:g} (dimension_limit {dimension_limit(n, mu_avail):.0f})"
               if wide else None)
        reason = (constant_only, SMALLER_DELTA) if isinstance(constant_only, str) else (why,)
        return _no_model(data, p, fit_intercept, delta, n, epsilon, left, rng, prior, *reason)
    if prior_sq:
        shares["selection"] = prior_sq / mu_avail ** 2
    mu_total, mus = split_mu(epsilon, delta, shares, spent_mu=spent_mu)
    row_mode = "feature_bounds" not in shares and public < p
    if row_mode:
        _warn_row_normalization(n, p, epsilon)
    # a mu decided by the data moves to or from the model only ahead of a Gaussian mechanism
    gaussian = choose_solver(loss_name, getattr(penalty, "name", penalty), n, p,
                             available_solvers(), chunked=data.chunked)[0] != "objective-perturbation"
    if gaussian:  # the plan's model share, before the data is read
        eps_plan = gdp_epsilon(mus["model"], delta)
        if eps_plan < MIN_EPSILON and regression and prior is not None and prior.records:
            # the table layer has spent already: the caller releases the constant on all
            # rows (dpopt.pipeline.selection) rather than a charged refusal
            raise NoModelShare(_share_too_small(eps_plan, epsilon, delta_total, n))
        _check_model_share(eps_plan, epsilon, delta_total, n)
    least = gdp_mu(MIN_EPSILON, delta)  # the model's floor: the smallest usable epsilon's mu
    scaling, target, R, records, columns_note = private_scaling(
        data, mus, fit_intercept=fit_intercept, center=center, regression=regression, rng=rng,
        bounds=feature_bounds, row_mode=row_mode, gaussian_model=gaussian,
        least_model_mu=least)
    records = (list(prior.records) if prior is not None else []) + records
    coded = prior.info.get("target_coding", {}) if prior is not None else {}
    if coded.get("grid_end"):
        columns_note["target_grid_end"] = True  # y's range released by the table layer
        warnings.warn(TARGET_END, ColumnWarning, stacklevel=4)
    if (coded.get("target_tail") and fit_intercept and not inference and target is not None
            and [target.lower, target.upper] == coded["target_tail"]["range"]):
        columns_note["target_tail"] = coded["target_tail"]  # its thin tail, for the constant
    scaled_how = ("row-normalized" if row_mode else "private feature bounds"
                  + (" (coarse grid, 1 bin per decade)" if columns_note.get("coarse_grid")
                     else ""))
    problem = raw_unit_penalty(data.problem(scaling, target, loss=loss, penalty=penalty,
                                            fit_intercept=fit_intercept, **penalty_kwargs),
                               scaling, target)
    collapsed = target is not None and target.half_width == 0 and fit_intercept
    # the declarations' error bounds at these public sizes and the model's mu (AdaSSP may
    # decline); not with rows normalized (too few rows to place per-feature bounds: the
    # held-out choice mostly releases the constant, and AdaSSP's X^T y gives it a second,
    # free estimate), with inference, or for a collapsed target (AdaSSP's mean instead)
    judged = None if inference or row_mode or collapsed else mus["model"]
    solver, why = choose_solver(loss_name, problem.penalty.name, problem.n_samples, p,
                                available_solvers(), chunked=data.chunked, mu=judged)
    curvature = None
    if solver == "dp-gd" and loss_name == "squared":
        curvature, rec = curvature_step(problem, mus, R, rng, least=least)
        records += [rec] if rec is not None else []
        problem, columns_note["huber_threshold"] = huber_in_place_of_squares(
            problem, columns_note.get("target_scale"))
    # numbers released on the way, for the settings that take them (each ignores the rest)
    released = {k: v for k, v in (("curvature", curvature),
                                  ("target_spread", columns_note.get("target_spread")))
                if v is not None}
    options = _model_options(solver, problem, mus["model"], R,
                             inference=inference, **released)
    step_mu = spread_mu = None  # DP-GD's least squares (curvature.py): the steps' mus
    if curvature is not None and fit_intercept and not inference and not collapsed:
        # (L1 / elastic net keep their last iterate: no re-reading); each step only where
        # the model keeps its floor
        reread, step = steps_above(mus["model"], options["passes"],
                                   options.get("output") == "suffix", least)
        if reread:
            spread_mu = one_step_share(mus, "spread", options["passes"], after=1)
        if step:
            step_mu = one_step_share(mus, "intercept", options["passes"])  # out of their noise
    eps_model = gdp_epsilon(mus["model"], delta)
    if solver == "objective-perturbation":
        # not a Gaussian mechanism: it calibrates against the whole target, given the
        # Gaussian releases above (their mu adds in quadrature to its Gaussian part)
        options["prior_mu"] = math.sqrt(max(mu_total ** 2 - mus["model"] ** 2, 0.0))
        eps_model = epsilon
    _check_model_share(eps_model, epsilon, delta_total, n, records, prior)
    if solver == "adassp" and collapsed and not inference:
        return adassp_mean_instead(data, p, eps_model, delta, delta_total, mu_total, mus,
                                   scaling, target, records, R, rng,
                                   {"scaling": scaled_how, **columns_note}, prior, options)
    # uncharged: the api-level caller charges the whole pipeline once
    if spread_mu is not None:
        result = rescaled_huber_fit(problem, options, mus["model"], spread_mu, delta, rng)
        columns_note["tail_huber_threshold"] = result.params["tail_huber_threshold"]
    else:
        result = solve_uncharged(problem, solver, epsilon=eps_model, delta=delta,
                                 random_state=rng, **options)
    if step_mu is not None:
        result = intercept_step(problem, result, step_mu, rng)

    stats = getattr(result, "release", None)
    released = None  # the inference releases: only on a path with a usable noise law
    degenerate = target is not None and target.half_width == 0  # the model is 0
    if "inference" in mus and solver in INFERENCE_PATHS and not degenerate:
        scaled, rec = release_inference(problem, result, solver, row_bound=R,
                                        mu=mus["inference"], rng=rng,
                                        adassp_release=stats)
        result.mechanisms = list(result.mechanisms) + rec
        released = Inference.from_scaled(scaled, scaling, target, fit_intercept, n)
    mechanisms = records + list(result.mechanisms)
    total = epsilon_of(mechanisms, delta, adjacency=result.adjacency)
    plan = {"solver": solver, "reason": why, "mu": mu_total, "mu_shares": mus,
            "scaling": scaled_how, "row_bound": R, "model_options": _public(options),
            "public_bounds": public, **columns_note}
    if prior is not None:
        plan["table"] = prior.info
        plan["selection_delta"] = prior.delta
    if inference and released is None:
        plan["inference_unavailable"] = unsupported_reason_of(solver, row_mode, degenerate)
    result = replace(result, epsilon=total, delta=delta_total, mechanisms=mechanisms,
                     accountant="exact" if all(isinstance(m, Gaussian) for m in mechanisms)
                     else result.accountant,
                     params={**result.params, "auto": plan})
    if stats is not None:  # AdaSSP's noisy statistics (post-processing uses them)
        result.release = stats
    return AutoFit(result, scaling, target, plan, released)


def check_inference(loss_name, penalty, penalty_kwargs, chunked=False, n=1, p=1):
    """ValueError, before any data is read, when the path's mechanism cannot give intervals
    (the choice reads (loss, penalty) only: n and p matter only to a decline, with mu)."""
    pen = "none" if penalty == "l2" and not penalty_kwargs.get("alpha") else penalty
    solver = choose_solver(loss_name, pen, n, p, available_solvers(), chunked=chunked)[0]
    reason = unsupported_reason(solver, chunked=chunked)
    if reason is not None:
        raise ValueError(f"inference=True: {reason}")


def unsupported_reason_of(solver, row_mode, degenerate_target=False):
    return unsupported_reason(solver, row_normalized=row_mode,
                              degenerate_target=degenerate_target)


def _warn_row_normalization(n, p, epsilon):
    """The documented fall-back when the features' ranges cannot be located (public n, p,
    epsilon only): every row is divided by its norm (a per-record map, free)."""
    warnings.warn(f"n_samples={n} is too few to locate the ranges of the {p} features privately "
                  f"at epsilon={epsilon:g}: rows are normalized to unit norm instead (free, and "
                  f"predict does the same); give more data, a larger epsilon, or scale X "
                  f"with public bounds", UserWarning, stacklevel=4)


#: The advice of a budget whose delta leaves the model no usable epsilon.
SMALLER_DELTA = ", or a delta << 1/n (the default is 1/n^2)"


class NoModelShare(ValueError):
    """A plan whose model share is worth no usable epsilon, found after the table layer's
    releases (``prior``): :func:`dpopt.pipeline.selection.fit_selected` then releases the
    constant on all rows (``constant_only`` set to this reason), where a refusal would be
    charged. Raised before any release of :func:`fit_default`."""


def _check_model_share(eps_model, epsilon, delta, n, records=(), prior=None):
    """Refuse a plan whose model share is below the smallest epsilon a solver accepts. A
    mu-GDP share is (gdp_epsilon(mu, delta), delta)-DP, and that epsilon is 0 when delta >=
    2 Phi(mu/2) - 1: a large delta (or a tiny epsilon) leaves the model's share nothing to
    calibrate to. The error names the user's values. Checked on the plan's share before
    the data is read (n, p, epsilon, delta only: a ValueError, nothing spent), and again
    before the solver runs, after the releases whose outcome moved mu out of the model
    (``records``: then the refusal depends on the data and is charged, ChargedFitError)."""
    if eps_model < MIN_EPSILON:
        why = f"{_share_too_small(eps_model, epsilon, delta, n)}. Use a larger epsilon{SMALLER_DELTA}"
        if records:
            raise ChargedFitError(why, records, prior.delta if prior is not None else 0.0)
        raise ValueError(why)


def _share_too_small(eps_model, epsilon, delta, n):
    """Why the model's share of (epsilon, delta) calibrates nothing (the user's values)."""
    return (f"epsilon={epsilon:g} with delta={delta:g} is too small a budget for the default "
            f"path ({n} rows to train on): its model share is worth epsilon {eps_model:.3g} at "
            f"this delta, below the smallest usable {MIN_EPSILON:g}"
            + (f"; delta is also far above 1/n={1 / n:.3g}, which makes epsilon meaningless"
               if delta > 1 / n else ""))


def _no_model(data, p, fit_intercept, delta, n, epsilon, mu, rng, prior=None, why=None,
              instead=", or fewer features"):
    """The documented result when n is too small to locate the target's range for a model
    at this epsilon (:func:`plan_budget` returns None), or for the reason ``why`` (more
    features than a private fit can use; a model share below the smallest usable epsilon
    after the table layer's releases, where a refusal would be charged): no model, only
    the intercept; ``instead``: what else the user can change.

    With an intercept the constant is the private mean of y released with ``mu``
    (:func:`dpopt.pipeline.mean_of_y.private_mean_of_y`: its range, then its mean; 0 when the
    range does not resolve). Predicting the raw constant 0 is arbitrarily worse than the
    mean when y sits far from 0 (R^2 of -300 on a target near 40), hence the coarser grids
    of that release. Without an intercept the constant is 0 (the only constant model then;
    nothing is spent)."""
    begin()  # the constant's releases (dpopt.privacy.releases)
    spent = list(prior.records) if prior is not None else []
    target, intercept, what, spent_mu = None, 0.0, "the constant 0", 0.0
    if fit_intercept and mu > 0:
        target, intercept, rec, what, spent_mu = private_mean_of_y(data, mu, rng)
        spent += rec
    public_y = getattr(data, "public_target", None) is not None
    if why is None:
        missed = "one histogram on them" if public_y else "the target's range"
        why = (f"n_samples={n} is too few to fit a model privately at epsilon={epsilon:g} "
               f"(even {MAX_SHARE:.0%} of the budget could not resolve {missed})")
        instead = "" if public_y else (", or give y's public range (target_bounds=(lower, "
                                       "upper) on a regressor)")
    reason = f"{why}: the released predictor is {what}; use a larger epsilon{instead}"
    warnings.warn(reason, UserWarning, stacklevel=4)
    plan = {"solver": "none", "reason": reason, "mu": spent_mu,
            "mu_shares": {}, "unlearnable": True, "constant": what, "scaling": "none",
            "row_bound": None, "model_options": {}}
    if public_y:  # no narrow-band warning about a range the user gave
        plan["public_target"] = [float(v) for v in data.public_target]
    return constant_fit(p, fit_intercept, intercept, mechanisms=spent,
                        epsilon=epsilon_of(spent, delta) if spent else 0.0,
                        delta=delta + (prior.delta if prior else 0.0), accountant="none",
                        plan=plan, target=target)


def _model_options(solver, problem, mu, R, *, inference=False, **released):
    """The solver's settings on the scaled domain (:func:`rules`), with the numbers already
    released that it takes (``released``: dp-gd's curvature, AdaSSP's target spread). The
    smoothness is the loss's alone (``alpha`` 0): every solver here applies the penalty by
    its prox, exact for L1 and L2, so the step needs no room for it; counting the L2 part
    would let one heavily weighted coordinate (:func:`raw_unit_penalty`) shrink every step."""
    threshold = problem.loss.param if problem.loss.name == "huber" else 1.0
    return rules(solver, loss=problem.loss.name, n=problem.n_samples, dim=problem.dim, mu=mu,
                 row_bound=R, alpha=0.0, huber_threshold=threshold, inference=inference,
                 penalty=problem.penalty.name, **released)



def _public(options):
    return {k: (v.tolist() if isinstance(v, np.ndarray) and v.size <= 8 else
                f"array({v.shape[0]})" if isinstance(v, np.ndarray) else v)
            for k, v in options.items()}
