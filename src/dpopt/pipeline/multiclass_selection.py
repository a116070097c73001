"""Do no harm for k >= 3 classes: the multiclass default fit (one multinomial model, or
one-vs-rest) or the majority class, chosen privately on held-out rows.

The binary default path releases the better of its model and the constant
(:mod:`dpopt.pipeline.selection`); the one-vs-rest fit (:mod:`dpopt.pipeline.multiclass`) had no
such check, and on a 178-row, 3-class table it scored below the majority class at epsilon
= 1. :func:`fit_selected_one_vs_rest` applies the same protocol:

1. one data-independent split, by a permutation from the fit's generator, into training
   rows and m validation rows (:func:`dpopt.pipeline.selection.validation_rows`: a share
   ``VALIDATION_FRACTION`` of n, or fewer where fewer resolve the choice; at least
   ``MIN_VALIDATION`` rows, else the same choice on all n rows with a share of its own,
   :mod:`dpopt.pipeline.in_sample`; an intercept, else no selection); in memory or chunked (the
   training rows a :meth:`~dpopt.data.chunked.ChunkedProblem.take`, the held-out sums
   chunk by chunk: :func:`held_out_class_totals`);
2. the multiclass default path on the training rows at the whole (epsilon, delta);
3. on the validation rows one Gaussian release of the mean per-record scores
   (:func:`noisy_class_scores`): whether the model predicts the label, and for each class c
   whether the label is c (the accuracy of the constant c). Replacing one record (x, y) by
   (x', y') moves the model's mean by at most 1/m (its correctness goes from 0 or 1 to 0
   or 1) and two class means by 1/m each (y's down, y''s up), so the k + 1 means have L2
   sensitivity sqrt(3) / m whatever k; N(0, (sqrt(3) / (m mu_v))^2) on each is a Gaussian
   mechanism of multiplier 1 / mu_v (audited: :func:`dpopt.api.release_audits.audit_class_scores`);
4. the model is released when its noisy score beats the best constant's by ``MARGIN``
   standard deviations of the noisy difference (:func:`dpopt.pipeline.selection.choose`); the
   best constant is the class of the largest noisy rate. When the table layer released the
   labels' noisy counts on all rows, they give the majority and every class's rate, and step
   3 releases the model's accuracy alone instead (:func:`_against_counts`: one mean of
   sensitivity 1/m, noise 1 / (m mu_v) where the k + 1 means had sqrt(3) / (m mu_v) each).

Privacy is that of the binary choice: a replaced record is a training record (the scores
are post-processing of the training branch's output) or a validation record (the score
release, given the unchanged training output), and mu_v is the Gaussian-DP parameter the
training branch's own records dominate (:func:`dpopt.pipeline.selection.validation_mu`), so the
training branch's records describe the whole pipeline: its (epsilon, delta) is the fit's.

The constant, when released, is a model with zero coefficients and the intercepts
logit(rate_c) of the noisy class rates (clipped; log(rate_c) for the multinomial model's
softmax): it predicts the chosen class and its probabilities are the rates
(post-processing).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from dpopt._core.validation import warn_if_delta_exceeds_one_over_n
from dpopt.pipeline.held_out import _margins, summed_over_records
from dpopt.pipeline.in_sample import with_check
from dpopt.pipeline.majority import MARGIN, against_known_rate, kept_rate
from dpopt.pipeline.multiclass import fit_default_one_vs_rest
from dpopt.pipeline.selection import (
    MIN_VALIDATION,
    _delta_judged_on,
    _records,
    _rows,
    as_records,
    branch_mu,
    checked_mu,
    choose,
    in_sample_runs,
    is_chunked,
    planned_mu,
    resolve_alpha,
    split_rows,
    validation_rows,
)

__all__ = ["fit_selected_one_vs_rest", "class_scores", "class_totals", "noisy_class_scores",
           "noisy_class_totals"]


def fit_selected_one_vs_rest(X, labels, n_classes, *, penalty, penalty_kwargs, fit_intercept,
                             epsilon, delta, rng, feature_bounds=None, prior=None):
    """:func:`dpopt.pipeline.multiclass.fit_default_one_vs_rest` with the held-out choice of
    the module docstring; same arguments and result, ``plan["selection"]`` records it.
    ``labels`` are class indices 0..k-1; ``penalty_kwargs["alpha"]`` may be ``"auto"``."""
    X, labels = as_records(X, labels, "squared", fit_intercept)
    chunked = is_chunked(X)
    n = X.n_samples if chunked else X.shape[0]
    counts = None if prior is None else prior.info.get("label_counts")
    known = counts is not None and len(counts) == n_classes  # the rates are released already
    # the score release's difference has noise 1 / (m mu) against known rates, else
    # sqrt(6) / (m mu) (two of the k + 1 means)
    m = validation_rows(n, planned_mu(epsilon, delta, prior), 1.0 if known else math.sqrt(6.0))
    kw = dict(penalty=penalty, fit_intercept=fit_intercept, epsilon=epsilon, delta=delta,
              rng=rng, feature_bounds=feature_bounds, prior=prior)
    if fit_intercept and in_sample_runs(n):  # too few rows to hold out: check on all rows
        mu_s = checked_mu(epsilon, delta, prior)
        kwargs = resolve_alpha(penalty_kwargs, "logistic", n)
        auto = fit_default_one_vs_rest(X, labels, n_classes, penalty_kwargs=kwargs,
                                       spent_mu=mu_s, **kw)
        auto.plan["alpha"] = kwargs.get("alpha")
        labels = None if chunked else np.asarray(labels)
        chosen = _choose(auto, _records(X, labels), n_classes, mu_s, rng, counts if known
                         else None, prior, n, "in-sample check")
        return with_check(chosen, mu_s, prior)
    if not fit_intercept or m < MIN_VALIDATION:
        kwargs = resolve_alpha(penalty_kwargs, "logistic", n)
        auto = fit_default_one_vs_rest(X, labels, n_classes, penalty_kwargs=kwargs, **kw)
        auto.plan["alpha"] = kwargs.get("alpha")
        why = "no intercept" if not fit_intercept else f"fewer than {MIN_VALIDATION} rows to hold out"
        auto.plan["selection"] = {"released": "model", "reason": f"no selection: {why}"}
        return auto
    labels = None if chunked else np.asarray(labels)
    warn_if_delta_exceeds_one_over_n(delta, n)  # the guarantee is about all n records
    val, train = split_rows(n, m, rng)
    kwargs = resolve_alpha(penalty_kwargs, "logistic", n - m)
    with _delta_judged_on(n):
        auto = fit_default_one_vs_rest(*_rows(X, labels, train), n_classes,
                                       penalty_kwargs=kwargs, **kw)
    auto.plan["alpha"] = kwargs.get("alpha")
    mu_v = branch_mu(auto, prior)
    if mu_v == 0.0:
        return auto
    return _choose(auto, _records(*_rows(X, labels, val)), n_classes, mu_v, rng,
                   counts if known else None, prior, n, "held-out selection")


def _choose(auto, data, n_classes, mu_v, rng, counts, prior, n, how):
    """The score release on the records of ``data`` (held out, or all n rows for the
    in-sample check) with mu_v, and the choice it makes (module docstring); ``counts``: the
    labels' noisy counts on all n rows, when released."""
    totals, m = held_out_class_totals(data, auto, n_classes)
    if counts is not None:
        noisy, sigma, best, use_model = _against_counts(totals[0], m, mu_v, rng, counts,
                                                        prior.info["label_sigma"], n)
        columns, sensitivity, majority = 1, 1.0 / m, best
    else:
        noisy, sigma = noisy_class_totals(totals, m, mu_v, rng)
        best, use_model = choose(noisy[0], noisy[1:], sigma)
        columns, sensitivity, majority = n_classes + 1, math.sqrt(3.0) / m, None
    record = {"released": "model" if use_model else f"constant class {best}",
              "candidates": ["model"] + [f"constant class {c}" for c in range(n_classes)],
              "noisy_scores": [float(s) for s in noisy], "sigma": sigma, "mu": mu_v,
              "validation_rows": m, "released_columns": columns,
              "sensitivity": sensitivity, "margin": MARGIN,
              "majority_from": None if majority is None else "the labels' noisy counts",
              "reason": (f"{how} on {m} rows (Gaussian, mu={mu_v:.3g}, "
                         f"sigma={sigma:.3g}): released "
                         f"{'the model' if use_model else f'the constant class {best}'}")}
    plan = {**auto.plan, "selection": record}
    result = auto.result
    if not use_model:
        result = replace(result, **_constant(result, noisy[1:], best,
                                             auto.plan.get("multinomial", False)))
    result = replace(result, params={**result.params, "auto": plan})
    return replace(auto, result=result, plan=plan)


def _against_counts(correct, m, mu, rng, counts, label_sigma, n):
    """The choice when the table layer released the labels' noisy counts on all n rows
    (std ``label_sigma`` each): the classes' rates are counts / their sum (the released
    constant's probabilities), the majority is the largest, and only the model's held-out
    accuracy is released (:func:`dpopt.pipeline.majority.against_known_rate`: sensitivity
    1/m instead of the sqrt(3)/m of the k + 1 means), against the majority's rate from
    :func:`dpopt.pipeline.majority.kept_rate` (over n where records of no kept label are
    resolved: they are wrong for the model and for the constant alike). Returns (noisy
    scores of the model and the k constants, sigma, the majority, whether the model is
    released)."""
    counts = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
    rates, best = counts / max(float(counts.sum()), 1e-12), int(np.argmax(counts))
    r, r_sd = kept_rate(counts, label_sigma, n)
    score, sigma, use = against_known_rate(correct, m, mu, rng, r, r_sd)
    return np.concatenate([[score], rates]), sigma, best, use


def class_scores(scaling, coef, intercept, X_val, y_val, n_classes):
    """Per-record scores of the candidates (m, k + 1) in {0, 1}: the model's correctness
    (the class of the largest margin; ``coef``, ``intercept``: the k rows of the multinomial
    model or the k binary models on the ``scaling`` of the training branch) and the one-hot label (each
    constant's correctness). A label outside the classes (index
    :data:`~dpopt.preprocessing.labels.OTHER_LABEL`) is wrong for every candidate: its
    model column and its row are 0."""
    Xs = scaling.transform(X_val)
    margins = np.column_stack([_margins(scaling, Xs, np.asarray(c, float), float(b))
                               for c, b in zip(coef, intercept)])
    y_val = np.asarray(y_val)
    onehot = (y_val[:, None] == np.arange(n_classes)[None, :]).astype(np.float64)
    return np.column_stack([np.argmax(margins, axis=1) == y_val, onehot]).astype(np.float64)


def _not_a_class_row(per_record):
    """Per record: whether its scores break the structure the sensitivity needs (a 0/1
    column, then a row with at most one 1: one-hot, or all 0 for a label outside the
    classes)."""
    first, onehot = per_record[:, 0], per_record[:, 1:]
    return ~(((first == 0) | (first == 1)) & np.all((onehot == 0) | (onehot == 1), axis=1)
             & (onehot.sum(axis=1) <= 1))


def class_totals(X_val, y_val, **kwargs):
    """The column sums of :func:`class_scores` over one block of records and, last, how many
    records break the structure the sensitivity needs (:func:`_not_a_class_row`)."""
    per_record = class_scores(X_val=X_val, y_val=y_val, **kwargs)
    return np.append(per_record.sum(axis=0), np.count_nonzero(_not_a_class_row(per_record)))


def held_out_class_totals(data, auto, n_classes):
    """(column sums, m) of the held-out records ``data`` (in memory, or summed chunk by
    chunk: :func:`dpopt.pipeline.held_out.summed_over_records`, which refuses when a record
    breaks the structure)."""
    r = auto.result
    totals = summed_over_records(data, class_totals, n_classes + 2, scaling=auto.scaling,
                                 coef=np.asarray(r.coef, dtype=np.float64),
                                 intercept=np.asarray(r.intercept, dtype=np.float64),
                                 n_classes=n_classes)
    return totals, data.shape[0]


def noisy_class_scores(per_record, mu, rng):
    """Mean of each column of ``per_record`` ((m, k + 1): a 0/1 column, then a one-hot row
    per record; :func:`class_scores`) plus N(0, sigma^2), sigma = sqrt(3) / (m mu): replacing
    one record moves at most three means by 1/m each (module docstring), so this is a
    Gaussian mechanism of multiplier 1 / mu, mu-GDP. The structure the bound needs is
    checked, not assumed. Returns (noisy means, sigma)."""
    if np.any(_not_a_class_row(per_record)):
        raise RuntimeError("internal error: class scores that are not a 0/1 column and a "
                           "one-hot label; nothing is released")
    return noisy_class_totals(per_record.sum(axis=0), per_record.shape[0], mu, rng)


def noisy_class_totals(totals, m, mu, rng):
    """:func:`noisy_class_scores` from the column sums ``totals`` of m checked records."""
    sigma = math.sqrt(3.0) / (m * mu)
    totals = np.asarray(totals, dtype=np.float64)
    return totals / m + sigma * rng.standard_normal(totals.size), sigma


def _constant(result, rates, best, multinomial=False):
    """The constant ``best`` as the fit's model: zero coefficients, intercepts whose
    probabilities are the noisy rates (the logits of the rates for one-vs-rest's normalized
    sigmoids, their logarithms for a ``multinomial`` model's softmax), the chosen class's
    raised above the others'."""
    p = np.clip(np.asarray(rates, dtype=np.float64), 1e-3, 1.0 - 1e-3)
    b = np.log(p) if multinomial else np.log(p / (1.0 - p))
    b[best] = max(b[best], b.max() + 1e-6)
    coef = np.zeros_like(np.asarray(result.coef, dtype=np.float64))
    return {"coef": coef, "intercept": b, "w": np.column_stack([coef, b])}  # an intercept
