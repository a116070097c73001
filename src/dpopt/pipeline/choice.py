"""The private choice between a released model and the constant predictor, made on scored
records: the releases and the decision that :mod:`dpopt.pipeline.selection` (on held-out
rows) and :mod:`dpopt.pipeline.in_sample` (on all rows, with a share of the budget kept for
it) both make. The mechanisms, their sensitivities and the decision rule are argued in
:mod:`dpopt.pipeline.selection`'s docstring; what differs between the two callers is only
which records are scored and how the score release composes with the training branch
(parallel composition on held-out rows, sequential on all rows).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from dpopt.pipeline.constant import check_constant, composed, pooled_mean
from dpopt.pipeline.held_out import (
    candidates,
    clipped_difference_split,
    held_out_totals,
    noisy_difference_total,
    noisy_score_totals,
    prediction_gap_bound,
)
from dpopt.pipeline.majority import MARGIN, against_known_rate
from dpopt.pipeline.mean_of_y import private_mean_of_y
from dpopt.pipeline.target_looks import pooled
from dpopt.privacy import Gaussian

__all__ = ["choose", "constant_resolved", "constant_model", "held_out_mean", "select_released",
           "pooled_constant"]


def choose(noisy_model, noisy_constants, sigma, best=None):
    """(index of the best constant, whether the model is released): the model when its
    noisy score exceeds the best constant's by MARGIN standard deviations of the
    difference (sigma sqrt(2): two independent noises; post-processing only). ``best``:
    the constant already chosen by an earlier release (the labels' noisy counts), else
    the one with the largest noisy score."""
    best = int(np.argmax(noisy_constants)) if best is None else int(best)
    return best, bool(noisy_model - noisy_constants[best] > MARGIN * sigma * math.sqrt(2.0))


def constant_resolved(noisy_constants, sigma):
    """Whether the noisy release resolves the constant (reported in the plan; not used by
    the decision, see the module docstring). A classifier's two constants score s and 1 - s:
    the better one is resolved when it beats the other by MARGIN standard deviations of their
    noisy difference (2 sigma: 2 s - 1 carries twice the noise of s). A single constant (a
    regressor's noisy mean, or the zero model without an intercept) is resolved: its noisy
    score measures that very constant."""
    if len(noisy_constants) == 2:
        return abs(noisy_constants[0] - noisy_constants[1]) > MARGIN * 2.0 * sigma
    return True


def constant_model(result, mean, plan):
    """The FitResult fields of the constant ``mean`` (scaled units): zero coefficients, the
    intercept, and ``plan`` as its ``params["auto"]``."""
    coef = np.zeros_like(np.asarray(result.coef, dtype=np.float64))
    return dict(coef=coef, intercept=float(mean), w=np.append(coef.ravel(), mean),
                params={**result.params, "auto": plan})


def held_out_mean(auto, data, mu_v, rng, prior=None, spent=False):
    """The released predictor when the training branch's target scale collapsed (its
    histogram of y did not resolve: the model is the constant 0 in raw units): the private
    mean of the held-out y (:func:`dpopt.pipeline.mean_of_y.private_mean_of_y` with mu_v, the
    same domination argument as the score release), 0 if that range does not resolve
    either. Nothing is compared: both candidates are constants, and 0 has no claim.
    ``spent``: the rows are all n rows and mu the constant's own mu_c (kept out of the
    training branch), whose records join the composition."""
    target, mean, records, what, spent_mu = private_mean_of_y(data, mu_v, rng)
    rows, m = "all" if spent else "held-out", data.shape[0]
    record = {"released": f"noisy mean of y ({rows})", "candidates": ["noisy mean of y"],
              "mu": mu_v, "validation_rows": int(m),
              "reason": (f"{rows} constant on {m} rows (Gaussian, mu={mu_v:.3g}): "
                         f"the training rows' histogram of y did not resolve its range, so "
                         f"the released predictor is {what}")}
    plan = {**auto.plan, "selection": record}
    if spent:  # the constant's own mu_c, in the plan's split
        plan.update(constant_mu=mu_v, mu_shares={**plan["mu_shares"], "constant": mu_v})
    changes = constant_model(auto.result, mean, plan)
    if spent:  # its Gaussians compose to exactly one of mu = spent_mu (GDP): one record, as
        # on the other branch (a search's data-independent probe expects that structure)
        merged = [Gaussian(1.0 / spent_mu, 1)] if spent_mu > 0 else []  # 0: nothing read
        return replace(composed(auto, merged, prior, **changes), plan=plan, target=target)
    return replace(auto, result=replace(auto.result, **changes), plan=plan, target=target)


def select_released(auto, data, regression, fit_intercept, mu_v, rng, n_train, majority=None,
                    all_rows=None, in_sample=False):
    """The held-out release on the records of ``data`` (the validation rows' adapter) and
    the choice it makes (module docstring); ``in_sample``: ``data`` holds all n rows, the
    training rows too (:mod:`dpopt.pipeline.in_sample`), and the plan says so. ``all_rows``:
    the release on all rows (:class:`~dpopt.pipeline.constant.AllRows`) or None. Where it
    was released in pieces over a range wider than the model's target, the check scores y
    clipped to that wider range, in its units, and both candidates predict there: the mean
    on the wider range (:func:`~dpopt.pipeline.constant.check_constant`), and the model
    raised by the noisy mean of y beyond its own range (``AllRows.outer``: a model fitted
    to y clipped to its range misses that part of y's mean, as a constant clipped there
    would); whichever the check releases, its range is the prediction's."""
    rows, how = ("all", "in-sample check") if in_sample else ("the held-out", "held-out selection")
    m = data.shape[0]
    if regression and fit_intercept and auto.target is not None and auto.target.half_width == 0:
        return held_out_mean(auto, data, mu_v, rng)
    mu_scores, constant, source, sigma_mean = mu_v, None, None, None
    wider = all_rows.wider if regression and fit_intercept and all_rows is not None else None
    target = auto.target
    if wider is not None:  # the check on y clipped to the constant's wider range
        target = wider
        constant, sigma_mean, source = check_constant(auto, n_train, all_rows)
        if sigma_mean > 2.0 * math.sqrt(2.0) / (m * mu_v):  # the held-out release, pooled
            mu_scores = mu_v / math.sqrt(2.0)
            held = data.target_mean(wider, mu_scores, rng)[0]
            constant, sigma_mean = pooled([(held, 2.0 / (m * mu_scores)),
                                           (constant, sigma_mean)])
            constant = float(np.clip(constant, -1.0, 1.0))
            source = f"{rows} rows (half of mu_v), pooled with {source}"
    elif regression and fit_intercept:
        half = mu_v / math.sqrt(2.0)
        constant, source = pooled_mean(auto, n_train, all_rows, 2.0 / (m * half))
        if constant is None:  # the held-out release, with what the others carry
            mu_scores = half
            held, sigma_mean = data.target_mean(auto.target, mu_scores, rng)[0], 2.0 / (m * half)
            constant, source = pooled_mean(auto, n_train, all_rows, math.inf, paid=(
                held, sigma_mean, f"{rows} rows (half of mu_v)"))
    cands = candidates(auto, regression, fit_intercept, constant)
    if wider is not None:  # the model raised by y's mean beyond its range, in wider's units
        cands[0] = ("model", *_model_in(auto, wider, all_rows.outer))
    maps = {"scaling": auto.scaling, "target": target, "cands": cands}
    bound = prediction_gap_bound(cands[0], cands[1]) if regression else None
    scale = 1.0 if wider is None else (auto.target.half_width / wider.half_width) ** 2
    clip, mu_d, gap_sigma = (clipped_difference_split(data, **maps, bound=bound, mu=mu_scores,
                                                      rng=rng, gap_scale=scale)
                             if regression else (None,) * 3)
    totals = held_out_totals(data, **maps, regression=regression, bound=bound, clip=clip)
    if regression:  # the paired difference, model minus constant, clipped at T <= H
        noisy_d, sigma = noisy_difference_total(float(totals[0]), m, clip, mu_d, rng)
        noisy, released_columns = np.array([noisy_d]), 1
        best, use_model = 0, bool(noisy_d > MARGIN * sigma)
    elif majority is not None and fit_intercept:  # the constant's rate is released already
        best = majority.best
        score, sigma, use_model = against_known_rate(totals[0], m, mu_scores, rng,
                                                     majority.rate, majority.sd)
        noisy, released_columns = np.array([score, *majority.rates]), 1
    else:
        noisy, sigma = noisy_score_totals(totals, m, mu_scores, rng)
        released_columns = len(totals)
        if released_columns < len(cands):  # classifier: constant -1 scores 1 - (constant +1)
            noisy = np.append(noisy, 1.0 - noisy[1])
        best, use_model = choose(noisy[0], noisy[1:], sigma,
                                 None if majority is None else majority.best)
    resolved = (True if regression else majority.resolved if majority is not None
                else constant_resolved(noisy[1:], sigma))
    name, coef, intercept = cands[0] if use_model else cands[1 + best]
    if not use_model and not regression and fit_intercept:
        # the constant's probability: the noisy rate of its class (post-processing)
        rate = noisy[1 + best] if majority is None else majority.probability
        rate = float(np.clip(rate, 0.5 + 1e-9, 1.0 - 1e-6))
        intercept = math.copysign(math.log(rate / (1.0 - rate)), intercept)
    record = {"released": "model" if use_model else name,
              "candidates": [c[0] for c in cands],
              "noisy_scores": [float(s) for s in noisy], "sigma": sigma, "mu": mu_v,
              "mu_scores": mu_scores, "noisy_mean": constant, "noisy_mean_from": source,
              "sigma_mean": sigma_mean, "constant_resolved": resolved,
              "validation_rows": int(m), "released_columns": released_columns,
              "margin": MARGIN, "difference_bound": clip, "gap_bound": bound, "gap_sigma": gap_sigma,
              "majority_from": None if majority is None else majority.source,
              "model_raised_by": None if wider is None else all_rows.outer,
              "reason": (f"{how} on {m} rows (Gaussian, mu={mu_v:.3g}, "
                         f"sigma={sigma:.3g}): released {'the model' if use_model else name}"
                         + ("" if resolved else " (which class is the majority is not "
                                                "resolved at this budget)"))}
    plan = {**auto.plan, "selection": record}
    result = auto.result
    if not use_model or wider is not None:  # the constant, or the model on wider's scale
        w = np.append(coef, intercept) if fit_intercept else coef.copy()
        result = replace(result, coef=coef.reshape(np.shape(result.coef)),
                         intercept=float(intercept), w=w)
    result = replace(result, params={**result.params, "auto": plan})
    return replace(auto, result=result, plan=plan, target=wider or auto.target)


def pooled_constant(auto, n_train, all_rows):
    """The released predictor when the training branch released the private mean of y
    instead of a model (its target histogram collapsed): that mean and the one on all rows,
    pooled with weights 1/sd^2 (:func:`dpopt.pipeline.constant.pooled_mean`). Both are
    constants, so nothing is compared and the held-out rows release nothing.
    Post-processing."""
    mean, source = pooled_mean(auto, n_train, all_rows, math.inf)
    record = {"released": "noisy mean of y (pooled)", "candidates": ["noisy mean of y"],
              "noisy_mean": mean, "noisy_mean_from": source,
              "reason": (f"no model: the training rows' histogram of y collapsed, so the "
                         f"training branch released the private mean of y; released {source}")}
    plan = {**auto.plan, "selection": record}
    return replace(auto, result=replace(auto.result, **constant_model(auto.result, mean, plan)),
                   plan=plan)


def _model_in(auto, wider, outer):
    """The model's (coef, intercept) in ``wider``'s scaled units, its raw predictions raised
    by ``outer``: the noisy mean of clip(y, wider) - clip(y, model's range) (y's units,
    :func:`~dpopt.pipeline.constant.release_in_pieces`), the part of y's mean that the
    model, fitted to y clipped to its range, leaves out. Post-processing."""
    t, ratio = auto.target, auto.target.half_width / wider.half_width
    coef = np.asarray(auto.result.coef, dtype=np.float64).ravel() * ratio
    raw = t.center + t.half_width * float(auto.result.intercept) + outer
    return coef, float((raw - wider.center) / wider.half_width)
