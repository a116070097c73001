"""Do no harm: the default path releases the better of its model and the constant predictor,
chosen privately on a held-out part of the data.

The wrapper (:func:`fit_selected`) splits the records once, by a permutation drawn from the
fit's generator (independent of the data), into a *training* part and a *validation* part
of m rows: a share f = :data:`VALIDATION_FRACTION` of n, or fewer where fewer already resolve
the choice at the plan's mu (:func:`validation_rows`, from public n and mu; below n = 100,
too few to hold out, the same choice is made on all rows with a share of the budget kept
for it: :mod:`dpopt.pipeline.in_sample`). The training part
runs the model path (:func:`dpopt.pipeline.default_path.fit_default`, whatever mechanism it chooses: its
scaling, its mechanism, a high-dimensional route). Given what that branch released, every
candidate predictor is a fixed function, and the validation part releases their mean
per-record scores with Gaussian noise; the released model is a function of the noisy
scores (post-processing; the releases and the decision: :mod:`dpopt.pipeline.choice`).
Candidates (:func:`~dpopt.pipeline.held_out.candidates`):

* the model released by the training branch;
* the constant predictor: for a classifier both classes (the majority class is the better
  of the two on the validation part, no estimate needed); for a regressor the noisy mean
  of the validation part's scaled target (its data adapter's ``target_mean``), released
  first by the validation branch. Without an intercept the only constant is 0. (The model's own
  intercept is not the mean of y: it absorbs the noise of the private feature means, which
  can be large with many features and a small budget.)

Scores (per record, in [0, 1]). Classifier: 1 if the candidate predicts the label, so
the two constants' scores sum to 1 and one number (the positive-label rate) gives both.
Regressor, on the training branch's private target scale (y clipped and mapped to
[-1, 1], predictions clipped to [-1, 1]): 1 - (y - f(x))^2 / 4, the squared error on that
scale, the loss the estimators' R^2 (``score``) measures. Where the constant on all rows was
released on a wider range (a skewed target's thin tail, :func:`dpopt.pipeline.constant.
all_rows_mean`), the same on that wider range's scale, with the model raised to it
(:func:`dpopt.pipeline.choice.select_released`); ``plan["selection"]["noisy_mean"]`` and
``["sigma_mean"]`` are then in its units, and the gaps' grid is scaled with it. (Until session 31 it was the
absolute error, for its resolution: errors e << 1 differ far more in |e| than in e^2. On a
skewed target that chose a predictor near the median, which wins the absolute error while
it loses R^2 to the mean. The resolution is now the clip's: below.)
A regressor has two candidates (the model and one constant), so one number is released:
the mean paired difference of their scores, each record's difference clipped at a bound T
released first from the histogram of those differences
(:func:`~dpopt.pipeline.held_out.clipped_difference_split`), so the noise follows the
scale of the squared errors' differences, however small.

Privacy (replace-one adjacency). Each mean score moves by at most 1/m when one validation
record is replaced, so the k released means have L2 sensitivity sqrt(k) / m; N(0, sigma^2)
noise with sigma = sqrt(k) / (m mu_s) makes them a Gaussian mechanism of multiplier
1 / mu_s, i.e. mu_s-GDP (Dong, Roth & Su 2022). A regressor's release is two Gaussian
mechanisms whose mu^2 add up to mu_s^2: the score gaps' histogram (sensitivity sqrt(2))
and the clipped differences' mean (sensitivity 2 T / m, T released before it: adaptive
composition of Gaussians is GDP composition). For a regressor the constant is the noisy
mean of the scaled target, released on all n rows with a share mu_c kept out of the
training branch and pooled with AdaSSP's own noisy mean (:mod:`dpopt.pipeline.constant`,
where its privacy is argued); when neither is more precise, the validation branch first
releases the mean of its scaled target (values in [-1, 1], sensitivity 2/m) with
N(0, (2 / (m mu_m))^2); the two Gaussians compose to mu_v-GDP with mu_m = mu_s =
mu_v / sqrt(2) (an even split: neither release is known to need more). A classifier's
validation branch spends all of mu_v on the scores. The split is independent of the data, so a
replaced record is either a training record (the pipeline's privacy is that of the training
branch: the scores are post-processing of its output on unchanged validation records) or a
validation record (that of the score release, given the unchanged training output): for
each fixed split it is the one or the other (parallel composition, McSherry 2009), and the
mixture over splits is no worse than the worse branch (the hockey-stick divergence is
jointly convex). mu_v is the Gaussian-DP parameter of the *Gaussian records* of the
training branch (:func:`validation_mu`): the training branch's composition contains them,
so it dominates a mu_v-GDP release (its trade-off function is below G_{mu_v}), and the
training branch's records are a dominating description of the whole pipeline: the fit
reports them, its (epsilon, delta) is theirs, a budget charges them once. When the training
branch is all Gaussian (AdaSSP, DP-CD, DP-GD), mu_v is its whole mu; an objective
perturbation record of multiplier z counts as a Gaussian of multiplier z, which it
dominates (:func:`validation_mu`).

Decision. The best constant c is the one named by an earlier release (below), else the one
with the largest noisy score; the model is released when its noisy score beats c's by more
than two standard deviations s of the noisy difference (:data:`MARGIN`: a one-sided test at
level Phi(-2) = 2.3%). With a true difference d the model is released with probability
Phi(d/s - 2), so when the model is worse (d < 0) the expected loss against the constant,
|d| Phi(-2 - |d|/s), is at most 0.0033 s (0.033 s with one standard deviation, 0.17 s for a
plain argmax, the minimax-regret rule), at the price of keeping the constant when the model
is better by less than about 2 s. As epsilon grows, s -> 0 and the rule is the non-private
held-out comparison. A classifier's margin chosen as the smallest whose worst-case expected
loss stays below 0.005 accuracy (s counting the held-out sample's noise too) was measured
and not adopted: it raised low-epsilon cells with signal by 0.01-0.03 but released bad
models on tables without signal (docs/default_path.md).

Which constant. When the labels were selected privately (the table layer's partition
selection on all n rows, :func:`released_majority`), their released noisy counts name the
majority class and its rate, for free; declared labels get the same noisy counts, released
by the table layer on all n rows for this use (a Gaussian of sensitivity sqrt(2) over the
public classes; :func:`dpopt.preprocessing.table_encoder.noisy_class_counts`); the
high-dimensional route releases the positive share with its screen
(:func:`screened_majority`). With the majority's rate known, the held-out rows release the
model's accuracy alone, one column of sensitivity 1/m, and compare it with that rate
(:func:`against_known_rate`, which gives its margins).

Otherwise (none of these: a held-out choice without counts) the best constant of the
held-out release can be the minority class when the noise is large; that costs at most
(2p - 1) Phi(-(2p - 1) / (2 s)) <= 0.34 s against the majority rate p. Releasing the model
whenever the majority is not resolved (:func:`constant_resolved`, reported in the plan) was
measured and rejected: its loss against the constant is bounded only by the unresolved gap
2p - 1 <~ 4 s.

Chunked data (:class:`~dpopt.data.chunked.ChunkedProblem`, Dask collections, files read out of
core) runs the same choice: the same split, the training branch on the problem's
:meth:`~dpopt.data.chunked.ChunkedProblem.take` of the training rows, and the held-out sums
computed chunk by chunk (:func:`held_out_totals`, with the count of records beyond their
bound, which must be 0) before the noise is added once on the client: the same releases
with the same sensitivities.

What it costs: the model is trained on n - m rows, so at a fixed epsilon its noise is
that of a fit on n - m rows (the noise of a Gaussian mechanism on a mean scales as
1 / (n mu)): m = 0.2 n costs the model what spending 80% of the budget on all rows would, and
it buys a validation release with no extra budget. f = 0.2 is the one-fold hold-out of
five-fold cross-validation, the convention of :class:`dpopt.api.tuning.PrivateHyperparameterSearch`;
it was not tuned on any benchmark. Where the score release's margin is already within the
do-no-harm tolerance on fewer rows (large n mu), :func:`validation_rows` holds out only
those (at least :data:`SAMPLE_ROWS`) and the model trains on the rest.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import warnings

import numpy as np
import scipy.sparse as sp

from dpopt._core.exceptions import WeakPrivacyWarning
from dpopt._core.validation import warn_if_delta_exceeds_one_over_n
from dpopt.data.chunked import is_chunked_input
from dpopt.data.rows import RowSubset
from dpopt.pipeline.choice import (  # noqa: F401 (choose, constant_resolved: public here too)
    choose,
    constant_resolved,
    held_out_mean,
    pooled_constant,
    select_released,
)
from dpopt.pipeline.chunked import ChunkedData
from dpopt.pipeline.constant import all_rows_mean, constant_mu, mu_left
from dpopt.pipeline.default_path import NoModelShare, model_possible
from dpopt.pipeline.feature_selection import fit_routed
from dpopt.pipeline.held_out import (  # noqa: F401 (the held-out releases: public here too)
    GAP_SHARE,
    held_out_totals,
    noisy_difference_total,
    noisy_scores,
)
from dpopt.pipeline.in_sample import fit_in_sample, in_sample_mu
from dpopt.pipeline.majority import (  # noqa: F401 (TOLERANCE, tolerance_margin: public here too)
    ARGMAX_LOSS,
    MARGIN,
    TOLERANCE,
    against_known_rate,
    released_majority,
    screened_majority,
    tolerance_margin,
)
from dpopt.pipeline.scaling import _data_of
from dpopt.privacy import Gaussian, ObjectivePerturbation, gdp_mu

__all__ = ["VALIDATION_FRACTION", "MARGIN", "against_known_rate", "fit_selected",
           "selection_runs", "validation_mu", "default_alpha", "noisy_scores", "choose",
           "constant_resolved"]

#: Share of the records held out to choose between the model and the constant.
VALIDATION_FRACTION = 0.2
#: Fewer validation records than this: no held-out selection (one record would move a score
#: by more than 1/MIN_VALIDATION); the model is checked on its own rows instead
#: (:mod:`dpopt.pipeline.in_sample`), or released unchecked where no check runs.
MIN_VALIDATION = 20


#: Held-out rows whose own sampling noise keeps the worst expected loss of a plain argmax,
#: ``ARGMAX_LOSS`` (0.170) standard deviations of the compared difference, within
#: ``TOLERANCE``: a per-record difference of scores in [-1, 1] has a mean of standard
#: deviation at most 1/sqrt(m), so ARGMAX_LOSS / sqrt(m) <= TOLERANCE at m = 1156.
SAMPLE_ROWS = math.ceil((ARGMAX_LOSS / TOLERANCE) ** 2)


def validation_rows(n, mu=None, spread=2.0):
    """m, the held-out part of n records: ``VALIDATION_FRACTION`` n, or fewer where fewer
    already resolve the choice, so that the model trains on more rows.

    The score release puts noise of standard deviation ``spread`` / (m mu) on the compared
    difference (``spread``: m times its sensitivity; 1 for a classifier's accuracy against a
    rate released on all rows, 2 for the difference of two noisy scores, 2 / sqrt(1 -
    GAP_SHARE) for a regressor's clipped differences, T <= 1). Its margin of MARGIN such
    standard deviations is within ``TOLERANCE`` from m >= MARGIN spread / (TOLERANCE mu) on,
    and at least :data:`SAMPLE_ROWS` keep the held-out sample's own noise within it too: a
    model better than the constant by more than about the tolerance is then released, and
    more held-out rows buy nothing the do-no-harm target measures. m grows like 1/mu, so at
    small epsilon or small n it is ``VALIDATION_FRACTION`` n. ``mu`` None: that fraction.
    A regressor's gaps' histogram needs about 51 / mu of them to read its clip (18 times fewer;
    docs/default_path.md, "Levers measured in session 34"). Public facts only (n, the plan's
    mu): the split stays independent of the data."""
    m = int(math.floor(VALIDATION_FRACTION * n))
    if mu is None or not mu > 0:
        return m
    return min(m, max(SAMPLE_ROWS, math.ceil(MARGIN * spread / (TOLERANCE * mu))))


def planned_mu(epsilon, delta, prior, spent=0.0):
    """The score release's mu as the plan sets it, before any data is read: the training
    branch's own (the whole mu of (epsilon, delta), less the table layer's ``prior`` share
    and the ``spent`` mu kept out of the branch), which :func:`validation_mu` then reads from
    its records."""
    whole = gdp_mu(epsilon, delta - (prior.delta if prior else 0.0))
    return math.sqrt(max(whole ** 2 * (1.0 - (prior.share if prior else 0.0)) - spent ** 2, 0.0))


def checked_mu(epsilon, delta, prior):
    """mu_s of the check on all rows (:func:`dpopt.pipeline.in_sample.in_sample_mu`): the
    ``VALIDATION_FRACTION`` of mu^2 of the plan's mu (:func:`planned_mu`). Public."""
    return in_sample_mu(planned_mu(epsilon, delta, prior), VALIDATION_FRACTION)


def score_spread(regression, prior):
    """The ``spread`` of :func:`validation_rows` for the held-out release that will run
    (:func:`_select`): a classifier whose majority rate comes from label counts on all rows
    releases its accuracy alone (1); without them two scores are compared (2); a
    regressor's difference is clipped at T <= 1 and released with 1 - GAP_SHARE of mu^2."""
    if regression:
        return 2.0 / math.sqrt(1.0 - GAP_SHARE)
    return 1.0 if released_majority(prior) is not None else 2.0


def default_alpha(loss, n):
    """The default L2 strength of the default path: scikit-learn's default model on n rows.

    ``LogisticRegression(C=1)`` minimises sum_i loss_i + ||w||^2 / 2, which in this
    library's averaged scaling is alpha = 1 / (n C) = 1 / n; ``LinearRegression`` has no
    penalty (alpha = 0). The Huber loss keeps its estimators' default. So as epsilon grows the
    default path converges to those models on its scaled features (docs/default_path.md says
    what the [0, 1] scaling changes against scikit-learn's StandardScaler)."""
    return {"logistic": 1.0 / float(n), "squared": 0.0}.get(loss)


def validation_mu(mechanisms):
    """The largest mu such that ``mechanisms`` (the training branch's records) dominate a
    mu-GDP release: sqrt of the sum over records of count / z^2, over

    * :class:`~dpopt.privacy.Gaussian` records (multiplier z: each is (1/z)-GDP; GDP
      composes in quadrature, Dong, Roth & Su 2022, Cor. 3.3);
    * :class:`~dpopt.privacy.ObjectivePerturbation` records with m = 1/z: their dominating
      pair has privacy loss shift + m^2/2 + m R with shift >= 0 and R ~ chi_dof >= 0, which
      first-order dominates the Gaussian pair's loss m^2/2 + m Z, Z ~ N(0, 1)
      (P(R > r) >= P(Z > r) for every r: chi_1 and the Rayleigh tails 2 Phi(-r) and
      e^{-r^2/2} are >= Phi(-r)); every hockey-stick divergence is non-decreasing in the
      loss, so the record dominates an m-GDP mechanism (Zhu, Dong & Wang 2022, Def. 7), and
      dominating pairs compose by products (their Thm. 10).

    Any other record is left out: leaving out a mechanism of a composition can only make
    it more private, so the bound stays valid (merely smaller)."""
    total = 0.0
    for m in mechanisms:
        if isinstance(m, (Gaussian, ObjectivePerturbation)) and m.noise_multiplier > 0:
            total += m.count / m.noise_multiplier ** 2
    return math.sqrt(total)


# --------------------------------------------------------------------------- the wrapper


def is_chunked(X):
    """Whether X is a :class:`~dpopt.data.chunked.ChunkedProblem` (its own target)."""
    return getattr(X, "is_chunked", False) is True


def n_features(X):
    """The feature count of an array, a sparse matrix or a
    :class:`~dpopt.data.chunked.ChunkedProblem`."""
    return int(X.n_features) if is_chunked(X) else int(X.shape[1])


def as_records(X, y, loss, fit_intercept):
    """(X, y) as the held-out choice reads them: chunked input (Dask collections, paths) as
    one :class:`~dpopt.data.chunked.ChunkedProblem`, validated once, with y None; anything
    else unchanged."""
    if not is_chunked(X) and is_chunked_input(X):
        return ChunkedData.of(X, y, loss=loss, fit_intercept=fit_intercept).raw, None
    return X, y


def _rows(X, y, index):
    """(X, y) of the records ``index``: a chunked problem's :meth:`~dpopt.data.chunked.ChunkedProblem.take`
    (its own target; y None); for a C-ordered float64 array, a
    :class:`~dpopt.data.rows.RowSubset` (the scaling's compiled passes read the rows in place
    instead of a copy of most of X)."""
    if is_chunked(X):
        return X.take(index), None
    return (RowSubset.of(X, index) if not sp.issparse(X) else sp.csr_matrix(X)[index]), y[index]


def _records(X, y, target_bounds=None):
    """The data adapter of the records (X, y) for the releases made here (a chunked problem
    carries its own target, y None), with the public target range ``target_bounds``."""
    return _data_of(X, y, None, False, target_bounds)


def fit_selected(X, y, *, loss, penalty, penalty_kwargs, fit_intercept, epsilon, delta, rng,
                 regression, fit=None, feature_bounds=None, prior=None, inference=False,
                 target_bounds=None):
    """The default path with the private choice between its model and the constant
    (module docstring). Same arguments and result as :func:`dpopt.pipeline.default_path.fit_default`
    (``fit``, default that function, runs the training branch); ``plan["selection"]``
    records the candidates' noisy scores, sigma, mu_v and what was released; ``plan["alpha"]``
    the penalty strength used.

    A ``penalty_kwargs["alpha"]`` of ``"auto"`` is resolved to :func:`default_alpha` of the
    training rows. Data too small for :data:`MIN_VALIDATION` held-out rows run the model
    path on all rows and check it there (:mod:`dpopt.pipeline.in_sample`; without an
    intercept or with ``inference``, without a selection: the plan says why). Chunked data (a
    :class:`~dpopt.data.chunked.ChunkedProblem`, or what it takes, with ``y``) runs the same
    choice on the same split: the training branch on the problem's
    :meth:`~dpopt.data.chunked.ChunkedProblem.take` of the training rows, the held-out sums
    per chunk (:func:`held_out_totals`), the noise on the client from the same generator.

    ``feature_bounds`` / ``prior``: the table layer's public bounds and its releases on all n
    rows before this call (:mod:`dpopt.preprocessing.tables`), handed to the training branch.
    The held-out release is dominated by the training branch's *own* records, not the
    prior's: a held-out record meets the prior and the score release, a training record the
    prior and the training branch, so the prior is common to both sides. ``target_bounds``:
    a regression target's public (lower, upper), for every release of the target here and
    in the training branch (no histogram of y is released).

    A plan whose model share is worth no usable epsilon after the table layer's releases
    (:class:`~dpopt.pipeline.default_path.NoModelShare`, before any release of the branch)
    releases the constant on all n rows instead, as a plan with too few rows does."""
    args = (X, y)
    kwargs = dict(loss=loss, penalty=penalty, penalty_kwargs=penalty_kwargs,
                  fit_intercept=fit_intercept, epsilon=epsilon, delta=delta, rng=rng,
                  regression=regression, fit=fit, feature_bounds=feature_bounds, prior=prior,
                  inference=inference, target_bounds=target_bounds)
    try:
        return _fit_selected(*args, **kwargs)
    except NoModelShare as reason:
        return _fit_selected(*args, **kwargs, constant_only=str(reason))


def _fit_selected(X, y, *, loss, penalty, penalty_kwargs, fit_intercept, epsilon, delta, rng,
                  regression, fit=None, feature_bounds=None, prior=None, inference=False,
                  target_bounds=None, constant_only=False):
    """:func:`fit_selected`; ``constant_only``: a NoModelShare's reason."""
    extra = {k: v for k, v in (("feature_bounds", feature_bounds), ("prior", prior),
                               ("inference", inference or None),
                               ("target_bounds", target_bounds)) if v is not None}
    fit = fit_routed if fit is None else fit
    loss_name = loss if isinstance(loss, str) else loss.name
    X, y = as_records(X, y, loss, fit_intercept)
    (X, y), scored = _neither_class(X, y, regression, prior, fit_intercept)
    n = X.n_samples if is_chunked(X) else X.shape[0]
    runs = regression and fit_intercept and selection_runs(n)
    # a share kept for the constant on all rows (dpopt.pipeline.constant; no selection, none)
    whole = gdp_mu(epsilon, delta - (prior.delta if prior else 0.0))
    mu_c = constant_mu(n, whole) if runs and not inference else 0.0
    m = validation_rows(n, planned_mu(epsilon, delta, prior, mu_c),
                        score_spread(regression, prior))
    p = n_features(X)
    constant_only = constant_only or (runs and not model_possible(
        n - m, epsilon, delta, prior, spent_mu=mu_c, p=p))
    if not constant_only and in_sample_runs(n, inference=inference, fit_intercept=fit_intercept):
        kwargs = resolve_alpha(penalty_kwargs, loss_name, n)
        checked = fit_in_sample(
            fit, X, y, scored, lambda *xy: _records(*xy, target_bounds), n=n, p=p,
            mu_s=checked_mu(epsilon, delta, prior),
            epsilon=epsilon, delta=delta, prior=prior, regression=regression,
            fit_intercept=fit_intercept, rng=rng, loss=loss, penalty=penalty,
            penalty_kwargs=kwargs, **{k: v for k, v in extra.items() if k != "prior"})
        if checked is not None:
            checked.plan["alpha"] = kwargs.get("alpha")
            return checked
        constant_only, extra["constant_only"] = True, True
    if constant_only or not selection_runs(n, inference=inference):
        why = (constant_only if isinstance(constant_only, str)
               else INFERENCE_NO_SELECTION if inference
               else f"n_samples={n} leaves fewer than {MIN_VALIDATION} held-out rows"
               if not constant_only else
               f"n_samples={n} is too few for a model of {p} features at epsilon={epsilon:g}, "
               f"so the constant is released from all rows")
        kwargs = resolve_alpha(penalty_kwargs, loss_name, n)
        if constant_only:
            extra["constant_only"] = constant_only  # True, or a NoModelShare's reason
        auto = fit(X, y, loss=loss, penalty=penalty, penalty_kwargs=kwargs,
                   fit_intercept=fit_intercept, epsilon=epsilon, delta=delta, rng=rng,
                   regression=regression, **extra)
        auto.plan["alpha"] = kwargs.get("alpha")
        auto.plan["selection"] = {"released": ("noisy mean of y" if auto.plan.get("unlearnable")
                                               else "model"), "reason": f"no selection: {why}"}
        return auto
    warn_if_delta_exceeds_one_over_n(delta, n)  # the guarantee is about all n records
    val, train = split_rows(n, m, rng)
    kwargs = resolve_alpha(penalty_kwargs, loss_name, n - m)
    if mu_c:
        extra["spent_mu"] = mu_c
    with _delta_judged_on(n):
        auto = fit(*_rows(X, y, train), loss=loss, penalty=penalty,
                   penalty_kwargs=kwargs, fit_intercept=fit_intercept, epsilon=epsilon,
                   delta=delta, rng=rng, regression=regression, **extra)
    auto.plan["alpha"] = kwargs.get("alpha")
    if auto.plan.get("unlearnable"):
        auto.plan["selection"] = {"released": "model", "reason": "no selection: nothing was "
                                  "learned on the training rows"}
        return auto
    mu_v = branch_mu(auto, prior)
    if mu_v == 0.0:
        return auto
    majority = (None if regression or not fit_intercept
                else released_majority(prior, n) or screened_majority(auto.plan))
    all_rows = None
    if mu_c and auto.target is not None:
        mu_all = mu_left(auto, prior, whole, mu_c) if auto.target.half_width == 0 else 0.0
        if mu_all and n * mu_all >= m * mu_v:  # more than the held-out rows could
            return held_out_mean(auto, _records(X, y, target_bounds), mu_all, rng, prior,
                                  spent=True)
        if auto.target.half_width > 0:
            all_rows, auto = all_rows_mean(auto, _records(X, y, target_bounds), mu_c, rng,
                                          prior, n - m, check_sd=2.0 * math.sqrt(2.0) / (m * mu_v))
            auto.plan["mu_shares"]["constant"] = mu_c  # the plan's split: sum of mu^2 = mu^2
            if auto.plan.get("target_collapsed"):  # two noisy means, no model: pool them
                return pooled_constant(auto, n - m, all_rows)
    return select_released(auto, _records(*_rows(*scored, val), target_bounds), regression,
                           fit_intercept, mu_v, rng, n - m, majority, all_rows)


def _neither_class(X, y, regression, prior, fit_intercept=True):
    """((X, y) the model trains on, (X, y) the held-out choice scores) of a binary classifier
    whose labels mark the records of neither class with 0 (a label the private selection did
    not keep, or outside the declared classes; :data:`~dpopt.preprocessing.labels.OTHER_LABEL`).
    The model trains on them as the negative class (-1), as a one-vs-rest model does. The
    held-out choice scores them wrong for every candidate (0: no released classifier
    predicts their label) where the labels' counts on all n rows give the constant's rate
    (:func:`~dpopt.pipeline.majority.released_majority`: over the same n records) and
    without an intercept (the model and the zero predictor, each scored); only with an
    intercept and no counts, whose two constants are scored as one column (their scores
    summing to one), are they compared on the training labels. A chunked problem carries
    its training labels and ``y`` is then the signed labels of the same records (a Dask
    array), scored through :meth:`~dpopt.data.chunked.ChunkedProblem.with_target`.
    Per-record maps: n is unchanged."""
    if regression or y is None:
        return (X, y), (X, y)
    counted = (prior is not None and prior.info.get("label_counts") is not None
               or not fit_intercept)
    if is_chunked(X):
        return (X, None), (X.with_target(y) if counted else X, None)
    y = np.asarray(y, dtype=np.float64)
    train = np.where(y == 0.0, -1.0, y)
    return (X, train), (X, y if counted else train)


def split_rows(n, m, rng):
    """(validation, training) row indices, sorted: m rows held out by a permutation from
    the fit's generator (independent of the data)."""
    perm = rng.permutation(n)
    return np.sort(perm[:m]), np.sort(perm[m:])


def branch_mu(auto, prior):
    """mu_v: what the training branch's own records (after the table layer's ``prior``)
    dominate (:func:`validation_mu`); when it is 0, ``auto.plan["selection"]`` says that
    there is no selection."""
    mu_v = validation_mu(auto.result.mechanisms[len(prior.records) if prior is not None else 0:])
    if mu_v == 0.0:
        auto.plan["selection"] = {"released": "model", "reason": "no selection: the training "
                                  "branch has no record that dominates a Gaussian score release"}
    return mu_v


def in_sample_runs(n, *, inference=False, fit_intercept=True):
    """Whether :func:`fit_selected` checks its model on its own rows
    (:mod:`dpopt.pipeline.in_sample`): too few rows to hold any out, an intercept (the
    constants to compare with), no ``inference``. Public facts only."""
    return fit_intercept and not inference and not selection_runs(n)


def choice_runs(n, *, inference=False, fit_intercept=True):
    """Whether a binary classifier's fit chooses privately between its model and the
    constant, held out or in-sample: the table layer then releases the declared labels'
    counts on all n rows (they name the majority class). Public facts only."""
    return selection_runs(n, inference=inference) or in_sample_runs(
        n, inference=inference, fit_intercept=fit_intercept)


def selection_runs(n, *, inference=False):
    """Whether :func:`fit_selected` holds rows out to choose between the model and the
    constant, from public facts (n, ``inference``), in memory and on chunked data alike: the
    table layer releases the declared labels' counts only then (they name the majority
    class)."""
    return not inference and validation_rows(n) >= MIN_VALIDATION


#: Why ``inference=True`` fits on all rows (docs/inference.md): the intervals are the test
#: of the model against no signal, the held-out choice would make them conditional on the
#: model's release (post-selection), and training on (1 - f) n rows widens them by up to
#: 1 / (1 - f) = 1.25 where the privacy noise dominates.
INFERENCE_NO_SELECTION = ("inference=True: the model is fitted on all rows and its intervals "
                          "test it against no signal")


@contextlib.contextmanager
def _delta_judged_on(n):
    """Re-raise the training branch's warnings, except a "delta > 1/n" warning about its
    own rows: the guarantee is about the n records of the whole data, so the caller's
    check on n is the one that applies."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        if not (issubclass(w.category, WeakPrivacyWarning) and "1/n" in str(w.message)):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def resolve_alpha(penalty_kwargs, loss, n):
    """``alpha="auto"`` resolved to :func:`default_alpha` of ``n`` rows (other values as
    given); n must be known (a Dask array with unknown chunk sizes is refused)."""
    if penalty_kwargs.get("alpha") != "auto":
        return penalty_kwargs
    if not (isinstance(n, numbers.Integral) or (isinstance(n, float) and n.is_integer())):
        raise ValueError(f"alpha='auto' is 1/n, but the number of rows is unknown ({n}): give "
                         f"a Dask array with known chunk sizes (X.compute_chunk_sizes()) or "
                         f"an explicit alpha")
    alpha = default_alpha(loss if isinstance(loss, str) else loss.name, n)
    return {**penalty_kwargs, "alpha": 0.0 if alpha is None else alpha}


