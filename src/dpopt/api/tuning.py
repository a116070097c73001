"""Private hyperparameter selection by random stopping (Papernot & Steinke 2022).

N. Papernot, T. Steinke, "Hyperparameter Tuning with Renyi Differential
Privacy", ICLR 2022. The base algorithm Q draws a candidate uniformly from
the grid (independently of the data), fits it privately on a training split
and scores it privately on a disjoint validation split. The search runs Q a
random number K of times, K independent of the data, and releases the run
with the best noisy score (and nothing else about the other runs).

Privacy of one run Q (replace-one adjacency)
    the fit's own mechanisms (its ``FitResult.mechanisms``) composed with the
    score: the mean over the m validation records of a per-record score in
    an interval of length 1 (accuracy for a classifier; for a regressor
    -min(|y - f(x)|, score_clip) / score_clip), so replacing one record moves
    it by at most 1/m, plus Laplace noise of scale 1/(m score_epsilon): a
    ``Laplace(1 / score_epsilon)`` record. Q mixes the candidates with
    data-independent weights, so its Renyi divergence at every order is at
    most the largest one among the candidates (joint quasi-convexity), and
    its (eps, delta) curve is at most the largest delta among them.

The mechanisms of each candidate are obtained *before touching the data* by
fitting it on a public surrogate dataset of the same shape (standard normal
features; a classifier's labels are its declared classes, see
:func:`_probe_classes`): the calibrated noise depends only on (n, p), the
target (epsilon, delta) and the hyperparameters. Every real fit is then
checked to have exactly these mechanisms (else the search stops: the
analysis would not hold). Any run that fails on the private data stops the
search and is charged as the whole search (:func:`_charged_whole`): where the
search stopped is not an output the random stopping analysis covers.

Repetitions and total privacy (Renyi DP of order lambda, then converted)
    ``distribution="truncated-negative-binomial"`` (Theorem 2): K ~ D_{eta,gamma},
    P(K = k) proportional to binom(k + eta - 1, k) (1 - gamma)^k for k >= 1
    (eta = 1: geometric, eta = 0: logarithmic). The search is (lambda, eps')-RDP
    with eps' = eps_Q(lambda) + (1 + eta)(1 - 1/mu) eps_Q(mu)
    + (1 + eta) log(1/gamma) / mu + log E[K] / (lambda - 1), minimised over mu.
    ``"poisson"`` (Theorem 6): K ~ Poisson(mean); if Q is (eps_hat, delta_hat)-DP
    with eps_hat = log(1 + 1/(lambda - 1)), the search is (lambda, eps')-RDP with
    eps' = eps_Q(lambda) + mean * delta_hat + log(mean) / (lambda - 1)
    (delta_hat from the PLD accountant). With K = 0 nothing is selected.
The RDP curve is converted to (epsilon, delta)-DP with dp-accounting's
conversion (Canonne, Kamath, Steinke 2020, Prop. 12), minimised over the
orders.

Limits. A text column's levels must be declared (``categories=``): the private
partition selection that would choose them releases a level held by one record with
probability up to its threshold's delta, which no Renyi curve composes here (refused before
the data is read). The search is analysed under replace-one adjacency only, and the
RDP accountant has no replace-one analysis of Poisson subsampling, so
candidates whose fits are Poisson-subsampled (DP-SGD) are refused; solvers
whose mechanisms are Gaussian, Laplace, pure DP, zCDP or subsampled without
replacement work.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.compose import ColumnTransformer
from sklearn.model_selection import ParameterGrid
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, OrdinalEncoder
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import _num_samples, check_is_fitted, validate_data

from dpopt._core.exceptions import (
    ChargedFitError,
    ImputedValueWarning,
    NotReleasableError,
    PrivacyLeakWarning,
)
from dpopt._core.input import numeric_target
from dpopt._core.validation import check_choice, check_delta, check_scalar, default_delta
from dpopt.api._surrogate import surrogate
from dpopt.api.charge import charged, unchanged_on_failure
from dpopt.api.estimators import _classes_of
from dpopt.data.problem import _check_magnitude
from dpopt.data.sources import is_chunked_input
from dpopt.preprocessing._cells import check_cells, split_target
from dpopt.preprocessing._plan import declared_categories, plan_table
from dpopt.preprocessing.labels import category_values, declared_classes, labels_present
from dpopt.preprocessing.tables import as_pandas, is_frame
from dpopt.privacy import Gaussian, Laplace, gdp_mu
from dpopt.privacy.budget import Spend, _unbudgeted
from dpopt.privacy.dominance import dominated, gdp_mu2, pessimistic
from dpopt.privacy.repetition import (  # noqa: F401 (public here: the search's accounting)
    DISTRIBUTIONS,
    ORDERS,
    _delta_curve,
    rdp_curve,
    sample_repetitions,
    selection_epsilon,
    truncated_negative_binomial_gamma,
)

__all__ = ["PrivateHyperparameterSearch", "selection_epsilon", "rdp_curve",
           "truncated_negative_binomial_gamma", "sample_repetitions"]

# ---------------------------------------------------------------------------
# accounting


# ---------------------------------------------------------------------------
# candidates: estimators and Pipelines


def _steps(est, prefix=""):
    """(name, fitted part) of every leaf of a candidate: the steps of a Pipeline, the
    fitted transformers of a ColumnTransformer or FeatureUnion (recursively), or the
    estimator alone."""
    if isinstance(est, Pipeline):
        parts = list(est.steps)
    elif isinstance(est, ColumnTransformer):
        parts = [(name, t) for name, t, _ in est.transformers_]
    elif isinstance(est, FeatureUnion):
        parts = list(est.transformer_list)
    else:
        return [(prefix or "estimator", est)]
    out = []
    for name, part in parts:
        if part is None or isinstance(part, str):  # "passthrough", "drop"
            continue
        out += _steps(part, f"{prefix}{name}__" if not _is_leaf(part) else f"{prefix}{name}")
    return out


def _is_leaf(part):
    return not isinstance(part, (Pipeline, ColumnTransformer, FeatureUnion))


def _spent(est, params):
    """(records, adjacency, epsilon) of a fitted candidate: every dpopt estimator's
    ``fit_result_`` and private transformer's ``mechanisms_`` in it, composed (they all read
    the same records), in the order of its steps."""
    records, adjacency, eps, estimators = [], "replace-one", 0.0, 0
    for _, step in _steps(est):
        if hasattr(step, "fit_result_"):
            res = step.fit_result_
            records += list(res.mechanisms)
            adjacency = res.adjacency if res.adjacency != "replace-one" else adjacency
            eps, estimators = eps + res.epsilon, estimators + 1
        elif hasattr(step, "mechanisms_"):
            records += list(step.mechanisms_)
            eps = eps + getattr(step, "epsilon_spent_", 0.0)
            step_adjacency = getattr(step, "adjacency_", "replace-one")
            adjacency = step_adjacency if step_adjacency != "replace-one" else adjacency
    if not estimators:
        raise ValueError(f"candidate {params}: {type(est).__name__} has no dpopt estimator "
                         f"(no fit_result_); the search needs one to account its fits")
    return records, adjacency, eps


def _any_route(est, records):
    """The records a candidate's trials are accounted by: its probe's, and, when they are
    all Gaussian, one more Gaussian up to the mu^2 its steps may spend on any route. A
    default-path estimator's route (AdaSSP or DP-GD, the constant, what a route leaves
    unspent) follows released values, so the stand-in route can spend less than a trial;
    its calibration bounds any route by the mu of its target (epsilon, delta less the
    selection's), and Gaussian records compose by mu^2 alone (Dong, Roth & Su 2022)."""
    if not records or any(type(m) is not Gaussian for m in records):
        return records
    mu2 = 0.0
    for _, step in _steps(est):
        result = getattr(step, "fit_result_", None)
        if result is not None and "auto" in result.params:
            delta = result.delta - result.params["auto"].get("selection_delta", 0.0)
            mu2 += gdp_mu(float(step.epsilon), delta) ** 2
        elif result is not None or hasattr(step, "mechanisms_"):
            mu2 += gdp_mu2(result.mechanisms if result is not None else step.mechanisms_)
    unspent = mu2 - gdp_mu2(records)  # what the stand-in route left: one more Gaussian
    return records + [Gaussian(1.0 / math.sqrt(unspent), 1)] if unspent > 1e-9 * mu2 \
        else records


def _refuse_selected_levels(est, params):
    """A ValueError (from the probe: before the data is read) for a candidate that selects a
    text column's levels from the data (an estimator's table layer, a PrivateTableEncoder):
    that selection's threshold releases a level held by one record with probability up to
    its delta, an event outside the Renyi curves this search composes (module docstring),
    so the search could not account it."""
    for _, step in _steps(est):
        schema = getattr(step, "schema_", None) or getattr(getattr(step, "table_", None),
                                                          "schema", None)
        text = [c.name for c in getattr(schema, "columns", ()) if c.kind == "string"]
        if text:
            raise ValueError(f"candidate {params}: the levels of the text column(s) {text} "
                             f"would be selected from the data in each run, and the search's "
                             f"accounting has no room for that selection's delta; declare "
                             f"them (categories={{{text[0]!r}: [...]}})")


def _leaks(est):
    """PrivacyLeakWarning messages of a fitted candidate: its estimators' own, and every
    step fitted on the data outside dpopt's accounting."""
    leaks = []
    for name, step in _steps(est):
        leaks += list(getattr(step, "privacy_leaks_", []))
        if not (hasattr(step, "fit_result_") or hasattr(step, "mechanisms_")
                or _is_public(step)):
            leaks.append(f"Pipeline step {name!r} ({type(step).__name__}) is fitted on the "
                         f"private data without privacy: its statistics are outside the "
                         f"search's accounting (use dpopt.preprocessing's private transformers "
                         f"or public constants)")
    return leaks


def _is_public(step):
    """A step that learns nothing from the data: a FunctionTransformer, or an encoder
    whose categories are given (public schema, e.g.
    :func:`dpopt.preprocessing.public_one_hot_encoder`)."""
    if isinstance(step, FunctionTransformer):
        return True
    return isinstance(step, (OneHotEncoder, OrdinalEncoder)) and \
        not (isinstance(step.categories, str) and step.categories == "auto")


@contextlib.contextmanager
def _charged_whole(params):
    """Any failure of a real run or of its score: charged as the whole search. The run may
    have released before it failed (a solver refuses a non-finite model after its noisy
    steps; a label selection can keep no label), so whether it fails is an output of the
    data, and where the search stopped would tell, besides, that the runs before it did not
    fail: the random stopping analysis covers the best run's output only. The search's own
    checks (:meth:`PrivateHyperparameterSearch._validate`, the probes) refuse bad input
    before its reservation; what only the estimator's checks on the real data find is
    charged too."""
    try:
        yield
    except Exception as exc:
        raise ChargedFitError(f"candidate {params} failed on the private data "
                              f"({type(exc).__name__}: {exc}); the search's whole "
                              f"(epsilon, delta) is charged", whole=True) from exc


@contextlib.contextmanager
def _refused_as_candidate(params, n_train):
    """A candidate refused on public facts alone (:mod:`dpopt.pipeline.releasable`: too few
    rows at its epsilon), named, with the rows it is fitted on: the training part."""
    try:
        yield
    except NotReleasableError as exc:
        raise NotReleasableError(f"candidate {params}, fitted on the {n_train} training rows "
                                 f"(validation_fraction held out): {exc}") from None


def _final(est):
    """A candidate's estimator: the last step of a Pipeline, or the candidate."""
    return est.steps[-1][1] if isinstance(est, Pipeline) else est


#: The search's own report of a label set read without privacy (an explicit solver's probe).
PROBE_LABELS_READ = ("the search's probe read the classifier's label set from the training "
                     "rows' labels without privacy, as its explicit solver's fits do; declare "
                     "them with classes=[...]")


def _probe_classes(est, y, params):
    """(labels, whether read from y) of a candidate's probe: the set its real fits use, known
    without reading y's values. Declared (``classes=``, a bool y): public. An explicit
    solver reads ``np.unique`` of the training rows' labels in every real fit, with a
    PrivacyLeakWarning, so the probe reads the same set (``y`` is those labels) and the
    search reports it (:data:`PROBE_LABELS_READ`, also when no run follows). The default path selects
    the labels privately in each run, and the set it keeps (hence the mechanisms: one
    model or k) is not known in advance: refused before the data is read, since a probe
    that read the labels would both leak them and, when one run keeps another set, stop
    the search on a record's label."""
    final = _final(est)
    declared = declared_classes(y, getattr(final, "classes", None))
    if declared is not None:
        return declared, False
    if getattr(final, "solver", "auto") == "auto":
        raise ValueError(f"candidate {params}: a private search over a classifier needs its "
                         f"labels declared before it reads the data; pass classes=[...] to the "
                         f"estimator (or give y a bool dtype): each run of the "
                         f"default path selects its labels privately and could keep another "
                         f"set, which the search cannot account in advance")
    return _classes_of(y), True


# ---------------------------------------------------------------------------
# the search


class PrivateHyperparameterSearch(MetaEstimatorMixin, BaseEstimator):
    """Select hyperparameters of a dpopt estimator privately (random stopping).

    Parameters
    ----------
    estimator : a dpopt estimator (``dpopt.DPLasso(...)``, ...)
        Its own ``epsilon`` / ``delta`` (or those of the grid) are the privacy of
        one fit; the search's total is larger and reported in ``epsilon_spent_``.
        A classifier at ``solver="auto"`` needs its labels declared (``classes=``, or
        a bool y): see :func:`_probe_classes`.
    param_grid : dict or list of dicts
        As scikit-learn's ``ParameterGrid``; each run draws one candidate uniformly.
    distribution : "truncated-negative-binomial" or "poisson"
    mean_repetitions : float, default 10
        E[K], the expected number of runs.
    eta : float, default 1.0 (geometric)
        Shape of the truncated negative binomial, > -1.
    score_epsilon : float, default 0.1
        Privacy of each noisy validation score (Laplace, see module docstring).
    validation_fraction : float, default 0.2
        Share of the records held out (a random, data-independent split).
    score_clip : float or None
        Regressors only (required): residuals are clipped to this to bound the score.
    delta : float or None
        delta of the reported total; default 1/n^2.
    random_state : None or int
    accountant : dpopt.BudgetAccountant or None
        The search's total is checked and recorded as one black-box entry.

    Attributes
    ----------
    best_estimator_, best_params_ (None if K = 0), best_score_ (noisy),
    n_repetitions_ (K), epsilon_spent_, delta_spent_, candidate_mechanisms_,
    privacy_leaks_ (messages of the inner fits' PrivacyLeakWarnings).
    """

    def __init__(self, estimator, param_grid, *, distribution="truncated-negative-binomial",
                 mean_repetitions=10.0, eta=1.0, score_epsilon=0.1, validation_fraction=0.2,
                 score_clip=None, delta=None, random_state=None, accountant=None):
        self.estimator = estimator
        self.param_grid = param_grid
        self.distribution = distribution
        self.mean_repetitions = mean_repetitions
        self.eta = eta
        self.score_epsilon = score_epsilon
        self.validation_fraction = validation_fraction
        self.score_clip = score_clip
        self.delta = delta
        self.random_state = random_state
        self.accountant = accountant

    # -- parameters --------------------------------------------------------------
    def _check_params(self, n):
        check_choice(self.distribution, "distribution", DISTRIBUTIONS)
        check_scalar(self.mean_repetitions, "mean_repetitions", low=1.0, low_open=True)
        check_scalar(self.eta, "eta", low=-1.0, low_open=True)
        check_scalar(self.score_epsilon, "score_epsilon", low=0.0, low_open=True)
        check_scalar(self.validation_fraction, "validation_fraction", low=0.0, high=1.0,
                     low_open=True, high_open=True)
        if not is_classifier(self.estimator):
            if self.score_clip is None:
                raise ValueError("score_clip must be given for a regressor (it bounds the "
                                 "validation score's sensitivity)")
            check_scalar(self.score_clip, "score_clip", low=0.0, low_open=True)
        candidates = list(ParameterGrid(self.param_grid))
        if not candidates:
            raise ValueError("param_grid must contain at least one candidate")
        for c in candidates:
            bad = [k for k in c if k.rsplit("__", 1)[-1] in ("accountant", "random_state")]
            if bad:
                raise ValueError(f"param_grid must not set accountant or random_state (got "
                                 f"{bad}): the search sets them")
            params = clone(self.estimator).set_params(**c).get_params()
            if any(k.rsplit("__", 1)[-1] == "inference" and v is True for k, v in params.items()):
                raise ValueError("estimator: a search over inference=True candidates is "
                                 "refused: intervals of the model a search selected would be "
                                 "conditional on that data-dependent choice (post-selection "
                                 "inference); fit the chosen settings with inference=True on "
                                 "data the search did not see")
        delta = default_delta(n) if self.delta is None else check_delta(self.delta)
        if not isinstance(self.random_state, (type(None), numbers.Integral)):
            raise ValueError(f"random_state must be None or an int, got {self.random_state!r}")
        return candidates, delta

    # -- fit ------------------------------------------------------------------------
    def fit(self, X, y):
        """Run the search; the whole search is one (epsilon_spent_, delta_spent_) release.

        Refused over budget (``BudgetExceededError``) before touching the data,
        leaving the search as it was. Data-dependent constants computed by the
        inner fits are reported once each as ``PrivacyLeakWarning`` and kept in
        ``privacy_leaks_``.
        """
        with unchanged_on_failure(self):
            return self._fit(X, y)

    def _fit(self, X, y):
        X, y = self._validate(X, y)
        n = _num_samples(X)
        candidates, delta = self._check_params(n)
        self._check_magnitudes(candidates, X, y)
        rng = np.random.default_rng(self.random_state)
        perm = rng.permutation(n)
        m = max(1, int(round(self.validation_fraction * n)))
        if n - m < 2:
            raise ValueError(f"n_samples={n} is too small for validation_fraction={self.validation_fraction}")
        val, train = perm[:m], perm[m:]
        self.privacy_leaks_ = []
        mechanisms = self._probe(candidates, len(train), X, _safe_indexing(y, train))
        score_mech = Laplace(1.0 / float(self.score_epsilon))
        total = self._total_epsilon([mechs + [score_mech] for mechs in mechanisms], delta)
        with charged(self.accountant, total, delta, label="hyperparameter search") as slot:
            self._search(X, y, train, val, candidates, mechanisms, rng)
            slot.record(Spend("hyperparameter search", total, delta, "replace-one",
                              f"rdp ({self.distribution} random stopping)"))
        self.candidate_mechanisms_ = mechanisms
        self.epsilon_spent_ = total
        self.delta_spent_ = delta
        for msg in self.privacy_leaks_:
            warnings.warn(msg, PrivacyLeakWarning, stacklevel=3)
        return self

    def _validate(self, X, y):
        """Arrays are validated as numbers; a DataFrame is passed through unchanged (the
        estimator, or the pipeline, encodes its columns), ``y`` may name one of its columns
        (split off as the estimators do). Chunked data (Dask, a path) is refused, unread."""
        for key, value in self.estimator.get_params(deep=True).items():
            if key.rsplit("__", 1)[-1] == "categories" and isinstance(value, dict):
                declared_categories(value)  # dpopt's {column: levels}, before a clone copies
        for name, v in (("X", X), ("y", y)):
            if isinstance(v, str) and name == "y":
                if not is_frame(X):
                    raise ValueError(f"y={v!r} names a column: X must then be a DataFrame "
                                     f"holding it, got {type(X).__name__}")
            elif is_chunked_input(v):
                what = (f"the path {os.fspath(v)!r}" if isinstance(v, (str, os.PathLike))
                        else f"a Dask {type(v).__name__}")
                raise ValueError(f"{name}: the search takes in-memory data; got {what}. Its "
                                 f"random split into training and validation rows, and its "
                                 f"trials, index rows in memory: load the data first (e.g. "
                                 f".compute(), pandas.read_parquet), or fit the estimator alone "
                                 f"on the chunked data")
        if is_frame(X):  # a polars / pyarrow table is a frame, as to the estimators
            X = as_pandas(X)
        if isinstance(y, str):  # y names the target column, split off as the estimators do
            X, y = split_target(X, y)
        y = category_values(y)  # as the estimators read it
        if not is_frame(X):
            return validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=np.float64,
                                 y_numeric=not is_classifier(self.estimator))
        self.n_features_in_ = X.shape[1]
        self.feature_names_in_ = np.asarray(X.columns, dtype=object)
        # the cells' checks of every fit (text, infinities), before the search's first release:
        # a trial refusing them would be a failure after it, charging the whole search
        check_cells(X, plan_table(X))
        y = np.asarray(labels_present(y) if is_classifier(self.estimator)  # refused for free
                       else numeric_target(y, type(self).__name__))
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must be 1-dimensional with one entry per row of X "
                             f"({X.shape[0]}), got shape {y.shape}")
        return X, y

    def _check_magnitudes(self, candidates, X, y):
        """An explicit solver refuses entries beyond the magnitude limits for free (its
        ``Problem``); inside the search that refusal came in a trial, after the first
        release, charging the whole search. Checked before, on the raw data of a candidate
        that is the estimator itself (a Pipeline's steps change the scale first)."""
        if all(isinstance(est, Pipeline) or getattr(est, "solver", "auto") == "auto"
               for est in (self._candidate(c, 0) for c in candidates)):
            return
        values = X.select_dtypes("number").to_numpy(np.float64) if is_frame(X) else X
        _check_magnitude(values.data if sp.issparse(values) else values, "X")
        if not is_classifier(self.estimator):
            _check_magnitude(np.asarray(y, dtype=np.float64), "y")

    def _probe(self, candidates, n_train, X, y):
        """Each candidate's mechanisms, from a fit on public surrogate data of the same
        shape and schema (column dtypes, declared categories) and, for a classifier, the
        label set its real fits will use (:func:`_probe_classes`)."""
        prng = np.random.default_rng(12345)
        Xs = surrogate(X, n_train, prng)
        classifier = is_classifier(self.estimator)
        ys = None if classifier else prng.standard_normal(n_train)
        out = []
        for c in candidates:
            est = self._candidate(c, seed=0)
            if classifier:
                classes, read = _probe_classes(est, y, c)
                ys = classes[np.arange(n_train) % len(classes)]
                if read and PROBE_LABELS_READ not in self.privacy_leaks_:
                    self.privacy_leaks_.append(PROBE_LABELS_READ)
            with _unbudgeted(), warnings.catch_warnings(), _refused_as_candidate(c, n_train):
                warnings.simplefilter("ignore")
                est.fit(Xs, ys)
            _refuse_selected_levels(est, c)
            mechanisms, adjacency, eps = _spent(est, c)
            if math.isinf(eps):
                raise ValueError(f"candidate {c} is not private (epsilon=inf)")
            if adjacency != "replace-one":
                raise ValueError(f"candidate {c} is certified under {adjacency} adjacency; "
                                 f"the search supports replace-one only")
            out.append(pessimistic(_any_route(est, mechanisms)))
        return out

    def _candidate(self, params, seed):
        """A clone with ``params``; every ``random_state`` (an estimator's, or each step's of
        a Pipeline: distinct seeds, so that no two mechanisms share noise) drawn from
        ``seed``, every ``accountant`` None (the search is charged as a whole)."""
        est = clone(self.estimator)
        est.set_params(**params)
        names = sorted(est.get_params(deep=True))
        seeds = np.random.SeedSequence(seed).generate_state(len(names))
        updates = {}
        for name, s in zip(names, seeds):
            last = name.rsplit("__", 1)[-1]
            if last == "random_state":
                updates[name] = int(s) % (2 ** 31 - 1)
            elif last == "accountant":
                updates[name] = None
        est.set_params(**updates)
        return est

    def _total_epsilon(self, q_mechanisms, delta):
        curves = np.max([rdp_curve(ms) for ms in q_mechanisms], axis=0)
        delta_hats = None
        if self.distribution == "poisson":
            eps_hat = np.log1p(1.0 / (ORDERS - 1.0))
            delta_hats = np.max([_delta_curve(ms, eps_hat) for ms in q_mechanisms], axis=0)
        return selection_epsilon(curves, delta, distribution=self.distribution,
                                 mean_repetitions=float(self.mean_repetitions),
                                 eta=float(self.eta), delta_hats=delta_hats)

    def _search(self, X, y, train, val, candidates, mechanisms, rng):
        k = sample_repetitions(rng, self.distribution, float(self.mean_repetitions),
                               float(self.eta))
        self.n_repetitions_ = k
        best = (-math.inf, None, None)
        X_train, y_train = _safe_indexing(X, train), y[train]
        X_val, y_val = _safe_indexing(X, val), y[val]
        for _ in range(k):
            i = int(rng.integers(len(candidates)))
            est = self._candidate(candidates[i], seed=int(rng.integers(2 ** 31 - 1)))
            with _unbudgeted(), warnings.catch_warnings(), \
                    _charged_whole(candidates[i]):
                warnings.simplefilter("ignore")
                est.fit(X_train, y_train)
            spent, _, _ = _spent(est, candidates[i])
            if not dominated(spent, mechanisms[i]):
                raise ChargedFitError(f"candidate {candidates[i]} spent mechanisms that differ "
                                      f"from its data-independent probe; the selection's "
                                      f"accounting would not hold, and the search's whole "
                                      f"(epsilon, delta) is charged (a step whose output columns "
                                      f"depend on the data, e.g. categories read from it, cannot "
                                      f"be accounted in advance: declare them, e.g. with "
                                      f"dpopt.preprocessing.public_one_hot_encoder)", whole=True)
            leaks = _leaks(est)
            self.privacy_leaks_ += [m for m in leaks if m not in self.privacy_leaks_]
            with _charged_whole(candidates[i]):
                score = self._noisy_score(est, X_val, y_val, rng)
            if score > best[0]:
                best = (score, est, candidates[i])
        self.best_score_, self.best_estimator_, self.best_params_ = best
        if k == 0:
            warnings.warn("the random number of repetitions was 0: nothing was selected",
                          UserWarning, stacklevel=3)

    def _noisy_score(self, est, X, y, rng):
        with warnings.catch_warnings():  # X is private: whether it has a missing cell is too
            warnings.simplefilter("ignore", ImputedValueWarning)
            pred = est.predict(X)
        if is_classifier(est):
            s = (pred == y).astype(np.float64)
        else:
            clip = float(self.score_clip)
            s = -np.minimum(np.abs(y - pred), clip) / clip
        m = len(y)
        return float(s.mean() + rng.laplace(0.0, 1.0 / (m * float(self.score_epsilon))))

    # -- delegation ---------------------------------------------------------------------
    def _best(self):
        check_is_fitted(self, "n_repetitions_")
        if self.best_estimator_ is None:
            raise ValueError("no candidate was selected (the number of repetitions was 0)")
        return self.best_estimator_

    def predict(self, X):
        return self._best().predict(X)

    def predict_proba(self, X):
        return self._best().predict_proba(X)

    @property
    def classes_(self):
        """The chosen classifier's labels: the order of :meth:`predict_proba`'s columns (as
        scikit-learn's searches give them)."""
        return self._best().classes_

    def decision_function(self, X):
        return self._best().decision_function(X)

    def score(self, X, y):
        return self._best().score(X, y)
