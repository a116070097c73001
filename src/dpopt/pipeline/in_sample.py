"""Do no harm below the held-out choice's size: the model is checked on the rows it was
trained on, with a share of the budget kept out of its training for that check.

The held-out choice (:mod:`dpopt.pipeline.selection`) needs ``MIN_VALIDATION`` held-out rows,
so n >= 100. Below that the model used to be released unchecked, and on tables of 30-90
rows at epsilon <= 4 it was often worse than the constant (docs/default_path.md, "Tables
of a few dozen rows"). Here (:func:`fit_in_sample`) the training branch runs on all n rows
with sqrt(mu^2 - mu_s^2), mu_s = sqrt(``VALIDATION_FRACTION``) times the branch's planned mu
(the fraction of mu^2 that the held-out choice takes of the rows: the same convention,
not tuned), and then the same score release and decision as the held-out choice
(:func:`dpopt.pipeline.choice.select_released`) run on all n rows with mu_s: the model is
released when its noisy mean score beats the constant's by ``MARGIN`` standard deviations.
A classifier's constant is named by its labels' noisy counts on all n rows (released by the
table layer for this use, as for the held-out choice: :func:`choice_runs`).

Privacy (replace-one adjacency, n public). Given the training branch's output, every
candidate is a fixed function and the score release is a composition of Gaussian
mechanisms of total mu_s on the n records (their sensitivities as in
:mod:`dpopt.pipeline.selection`: each mean score moves by at most 1/n). Every record meets
both the training branch and the score release, so they compose sequentially (adaptive
composition: the candidates depend on the branch's output, which GDP composition allows,
Dong, Roth & Su 2022): mu_branch^2 + mu_s^2 = mu^2. The fit's records are the branch's
and one ``Gaussian(1 / mu_s)`` (:func:`dpopt.pipeline.constant.composed`), so its reported
(epsilon, delta) is that of the whole pipeline.

The check's cost is the model's: mu_branch = sqrt(0.8) mu. What the score sees is the
model's *training* score, which is optimistic by its fit to the sampling noise; the privacy
noise of the released model is independent of the data, so its harm is measured in full.
Where n mu_s is small the check is blind: its noise exceeds any gain a model could show (at
most the scaled target's variance / 4), and it releases the constant whatever the model is
worth (measured, and not yet decided otherwise: docs/default_path.md).
A regressor whose training branch could not fit a model with mu_branch
(:func:`dpopt.pipeline.default_path.model_possible`) releases the private mean of y with
the whole budget, as the held-out choice does on its training rows. When the branch's
target range collapsed there is no model to check: its constant is pooled with a mean on
all rows released with mu_s (or, with no range at all, the mean on all rows takes mu_s and
what the branch left unspent), as the held-out choice does with its constant's share. For k >= 3 classes
:mod:`dpopt.pipeline.multiclass_selection` makes its own choice the same way (this
module's :func:`in_sample_mu`, its class scores on all rows).
"""

from __future__ import annotations

import math

from dpopt.pipeline.choice import held_out_mean, pooled_constant, select_released
from dpopt.pipeline.constant import all_rows_mean, composed, mu_left
from dpopt.pipeline.default_path import model_possible
from dpopt.pipeline.majority import released_majority, screened_majority
from dpopt.privacy import Gaussian, gdp_mu

__all__ = ["in_sample_mu", "fit_in_sample", "with_check"]


def in_sample_mu(planned, fraction):
    """mu_s of the check: the ``fraction`` of mu^2 of the training branch's ``planned``
    mu (public: the plan's mu after the table layer's share)."""
    return planned * math.sqrt(fraction)


def fit_in_sample(fit, X, y, scored, records, *, mu_s, n, p, epsilon, delta, prior,
                  regression, fit_intercept, rng, **fit_kwargs):
    """The default path checked on its own rows (module docstring). ``fit`` runs the training
    branch (``fit_kwargs``: its arguments but ``spent_mu``), ``scored`` is (X, y) as the
    check scores them, ``records(X, y)`` their data adapter. Returns an
    :class:`~dpopt.pipeline.autofit.AutoFit`, or None when a regressor's branch could not
    fit a model with the check's share kept out (the caller then releases the constant)."""
    if regression and not model_possible(n, epsilon, delta, prior, spent_mu=mu_s, p=p):
        return None
    auto = fit(X, y, epsilon=epsilon, delta=delta, prior=prior, regression=regression,
               fit_intercept=fit_intercept, rng=rng, spent_mu=mu_s, **fit_kwargs)
    if auto.plan.get("unlearnable"):  # a constant already: nothing to check, mu_s unspent
        auto.plan["selection"] = {"released": "model", "reason": "no selection: nothing was "
                                  "learned on the training rows"}
        return auto
    data = records(*scored)
    if regression and auto.target is not None and auto.target.half_width == 0:
        # no range, no model: the mean on all rows with mu_s and what the branch left
        whole = gdp_mu(epsilon, delta - (prior.delta if prior is not None else 0.0))
        return held_out_mean(auto, data, mu_left(auto, prior, whole, mu_s), rng, prior,
                             spent=True)
    if regression and auto.plan.get("target_collapsed"):  # the branch released a mean: a
        all_rows, auto = all_rows_mean(auto, data, mu_s, rng, prior)  # second one, pooled
        auto.plan["mu_shares"]["constant"] = mu_s  # the plan's split: sum of mu^2 = mu^2
        return pooled_constant(auto, n, all_rows)
    majority = None if regression else released_majority(prior, n) or screened_majority(auto.plan)
    chosen = select_released(auto, data, regression, fit_intercept, mu_s, rng, n, majority,
                             in_sample=True)
    return with_check(chosen, mu_s, prior)


def with_check(chosen, mu_s, prior):
    """``chosen`` (a fit and the choice made on all its rows) with the check in its plan and
    its composition: ``Gaussian(1 / mu_s)`` after the branch's records (module docstring)."""
    chosen.plan["selection"]["in_sample"] = True
    chosen.plan["mu_shares"] = {**chosen.plan["mu_shares"], "in_sample_check": mu_s}
    return composed(chosen, [Gaussian(1.0 / mu_s, 1)], prior)
