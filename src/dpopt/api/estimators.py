"""scikit-learn estimators for private linear models.

Each estimator fits ``(X, y)`` privately; X may be an array, a sparse matrix, or a
DataFrame (pandas, or polars / pyarrow through narwhals) with numeric, bool, categorical,
string and missing values, encoded by the table layer :mod:`dpopt.preprocessing.tables` (categories and
labels chosen privately or declared with ``categories=`` / ``classes=``; public
``feature_bounds=``). The default, ``solver="auto"``, is
the default path of :mod:`dpopt.pipeline.default_path`: private end to end, ``epsilon`` the
only knob (private feature / row-norm / target bounds, scaling, and a
mechanism chosen from the loss, penalty, n and p; ``auto_`` and
``fit_result_.params["auto"]`` say what was chosen and why; ``predict`` applies
the same feature map, ``feature_bounds_``). Any registered solver can be named
instead (``solver=``, with ``solver_options``; it must support the estimator's
loss and penalty); the estimator then builds a :class:`dpopt.Problem` from the
data as given and calls :func:`dpopt.solve`:

========================  ==================  =========================================
estimator                 loss                penalty
========================  ==================  =========================================
DPLogisticRegression      logistic            ``penalty=`` l2 (default), l1, elastic_net, none
DPLinearRegression        squared             l2 with ``alpha`` (none when ``alpha=0``)
DPLasso                   squared             l1: alpha ||w||_1
DPElasticNet              squared             elastic_net (scikit-learn's alpha, l1_ratio)
DPHuberRegressor          huber(threshold)    l2 with ``alpha``
========================  ==================  =========================================

Losses and penalties follow scikit-learn's scaling: (1/n) sum_i l(x_i^T w; y_i)
+ psi(w) with the squared loss (x^T w - y)^2 / 2 and the L2 penalty
alpha/2 ||w||^2 (scikit-learn's HuberRegressor and Ridge put no 1/2 on the
L2 term: use twice their alpha; LogisticRegression's C is 1 / (n alpha)).
The intercept (``fit_intercept=True``) is an unpenalized column of ones.

Privacy
-------
``epsilon``, ``delta`` are the target of the fit; ``delta=None`` means
1/n^2 with n the number of training samples of *this* fit, the papers'
choice. It changes with n (each cross-validation fold gets its own), and
it is a reasonable default only because 1/n^2 << 1/n; pass an explicit
delta to control it. ``epsilon_spent_``, ``delta_spent_``, ``adjacency_``
and ``fit_result_`` (the :class:`dpopt.FitResult`, with the accounted
mechanisms) report what was actually certified. The solver's calibration
accountant is a solver option (``solver_options={"accountant": "rdp"}``).

``accountant`` is a :class:`dpopt.BudgetAccountant` (or None: the one of an
enclosing ``with BudgetAccountant(...)``, if any). A fit that would exceed
it raises :class:`dpopt.BudgetExceededError` before touching the data and
leaves the estimator as it was.

Model selection: scikit-learn's ``cross_val_score`` and ``GridSearchCV`` spend epsilon on
every fit (each fold of each candidate is a private fit of the same records: their privacy
composes, and the choice of the best leaks too; nothing in scikit-learn reports it). Use
:class:`dpopt.PrivateHyperparameterSearch`: the whole search is one accounted release.

Multiclass: ``DPLogisticRegression`` with k >= 3 classes fits k one-vs-rest models as one
release (:mod:`dpopt.pipeline.multiclass`).

Data-dependent quantities (explicit solvers). The solvers' defaults compute smoothness
constants from the training data without privacy (e.g. DP-CD's step sizes
and clipping thresholds, ``smoothness="exact"``); they raise
:class:`dpopt.PrivacyLeakWarning`. The estimators re-raise every such
warning from ``fit`` (attributed to the caller, prefixed with the estimator
name) and keep their messages in ``privacy_leaks_`` (empty when nothing
leaked), so a pipeline can assert on it. To avoid them, give the constants
as public knowledge through ``solver_options`` (e.g. DP-CD's
``{"smoothness": M}`` from known feature bounds). Preprocessing fitted on
the private data (e.g. a ``StandardScaler`` in a ``Pipeline``) is outside
dpopt's accounting: scale with public constants when the guarantee must
cover the whole pipeline.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from dpopt._core.exceptions import PrivacyLeakWarning
from dpopt._core.input import check_Xy_input
from dpopt._core.validation import (
    check_bool,
    check_privacy_target,
    check_random_state,
    default_delta,
    sklearn_seed,
)
from dpopt.data import Problem
from dpopt.data.chunked import ChunkedProblem, as_dask_arrays, is_chunked_input
from dpopt.data.losses import huber
from dpopt.pipeline.inference import InferenceMixin
from dpopt.pipeline.multiclass import OneVsRestProblems, fit_default_one_vs_rest, solve_one_vs_rest
from dpopt.pipeline.selection import default_alpha, fit_selected
from dpopt.preprocessing.tables import (
    TableEncoder,
    as_pandas,
    check_two_classes,
    declared_classes,
    encode_labels,
    is_frame,
    label_prior,
    plan_table,
    prepare_default,
    public_table,
)
from dpopt.privacy.budget import Spend, resolve_budget
from dpopt.solvers import check_distributed, get_solver, solve

__all__ = ["DPLogisticRegression", "DPLinearRegression", "DPLasso", "DPElasticNet",
           "DPHuberRegressor"]

_RESERVED_OPTIONS = ("epsilon", "delta", "random_state", "rng", "problem", "budget")


def _ledger_entry(result, label):
    """What a BudgetAccountant records: the result (its mechanisms compose exactly), or,
    when the table layer's threshold spent a delta outside the mechanisms, the black-box
    (epsilon, delta) of the whole fit (composed by the ledger's (epsilon, delta) rule)."""
    if not (result.params.get("auto") or {}).get("selection_delta"):
        return result
    return Spend(label, float(result.epsilon), float(result.delta), result.adjacency,
                 result.accountant, ())


def _check_auto_epsilon(epsilon):
    if math.isinf(epsilon):
        raise ValueError("solver='auto' needs a finite epsilon: its scaling is private; "
                         "pass an explicit solver for a non-private fit")


def _resolve_alpha(penalty_kwargs, loss, n):
    """``alpha="auto"``: scikit-learn's default model on n rows
    (:func:`dpopt.pipeline.selection.default_alpha`: 1/n for the logistic loss, its C=1)."""
    if penalty_kwargs.get("alpha") != "auto":
        return penalty_kwargs
    if not (isinstance(n, numbers.Integral) or (isinstance(n, float) and n.is_integer())):
        raise ValueError(f"alpha='auto' is 1/n, but the number of rows is unknown ({n}): give "
                         f"a Dask array with known chunk sizes (X.compute_chunk_sizes()) or "
                         f"an explicit alpha")
    alpha = default_alpha(loss if isinstance(loss, str) else loss.name, n)
    return {**penalty_kwargs, "alpha": 0.0 if alpha is None else alpha}


class _DPLinearModel(BaseEstimator):
    """Shared fit logic; subclasses define ``_loss()`` and ``_penalty()``."""

    _classifier = False

    # -- what the subclass defines --------------------------------------------
    def _loss(self):
        raise NotImplementedError

    def _penalty(self) -> tuple[str, dict]:
        raise NotImplementedError

    # -- fit ------------------------------------------------------------------------
    def fit(self, X, y):
        """Fit privately; returns ``self``. See the module docstring for privacy."""
        state = dict(self.__dict__)
        try:
            return self._fit(X, y)
        except BaseException:  # refused or failed: leave the estimator as it was
            self.__dict__.clear()
            self.__dict__.update(state)
            raise

    def _fit(self, X, y):
        epsilon, delta_given, spec, options = self._check_params()
        if spec is None:
            _check_auto_epsilon(epsilon)  # the arguments before the data
        if is_chunked_input(X):
            return self._fit_chunked(X, y, epsilon, delta_given, spec, options)
        if spec is None:
            return self._fit_default_path(X, y, epsilon, delta_given)
        names, self.table_ = None, None
        if is_frame(X) and any(c.kind != "numeric" for c in
                               plan_table(X, getattr(self, "categories", None))):
            names, X = np.asarray(X.columns, dtype=object), self._public_table(X)
        y = check_Xy_input(X, y, numeric=not self._classifier)
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=np.float64,
                             y_numeric=not self._classifier)
        if names is not None:
            self.feature_names_in_, self.n_features_in_ = names, len(names)
        if getattr(self, "feature_bounds", None) is not None:
            raise ValueError("feature_bounds= applies to solver='auto' (the default path); an "
                             "explicit solver takes the data as given")
        with warnings.catch_warnings(record=True) as label_leaks:
            warnings.simplefilter("always")
            target = self._encode_y(y)
        delta = default_delta(X.shape[0]) if delta_given is None else delta_given
        penalty, penalty_kwargs = self._penalty()
        penalty_kwargs = _resolve_alpha(penalty_kwargs, self._loss(), X.shape[0])
        self.alpha_ = penalty_kwargs.get("alpha")
        self.auto_ = None
        if self._n_classes() > 2:  # one-vs-rest (dpopt.pipeline.multiclass): k problems, one release
            def binary(relabel):
                return Problem(X, relabel(target), loss=self._loss(), penalty=penalty,
                               fit_intercept=self.fit_intercept, **penalty_kwargs)

            return self._solve(OneVsRestProblems(binary, self._n_classes()), spec, epsilon,
                               delta, options)
        problem = Problem(X, target, loss=self._loss(), penalty=penalty,
                          fit_intercept=self.fit_intercept, **penalty_kwargs)
        return self._solve(problem, spec, epsilon, delta, options, label_leaks)

    def _public_table(self, X):
        """An explicit solver's DataFrame with a non-numeric column: encoded with its public
        schema only (declared categories, bool, numeric; a missing value imputed at 0 or
        encoded as ``<other>``, no indicator); a string column without declared categories
        is refused."""
        schema, Xf = public_table(X, getattr(self, "categories", None))
        self.table_ = TableEncoder(schema, np.asarray(X.columns, dtype=object))
        return Xf

    def _fit_default_path(self, X, y, epsilon, delta_given):
        """The default path on arrays or tables: the table layer (:mod:`dpopt.preprocessing.tables`:
        column kinds, private selection of categories and labels, public bounds) inside the
        same accounted composition as :func:`dpopt.pipeline.default_path.fit_default`."""
        _check_auto_epsilon(epsilon)
        frame = is_frame(X)
        if frame:
            if X.shape[1] == 0:
                raise ValueError("X has 0 features (a DataFrame with no columns): a fit needs "
                                 "at least one feature")
            y = self._check_table_target(X, y)
        else:
            y = check_Xy_input(X, y, numeric=not self._classifier)
            X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=np.float64,
                                 y_numeric=not self._classifier)
            if self._classifier:
                check_classification_targets(y)
        n = X.shape[0]
        delta = default_delta(n) if delta_given is None else delta_given
        penalty, penalty_kwargs = self._penalty()
        out = {}

        def prepare(rng):
            Xf, yy, classes, encoder, bounds, prior = prepare_default(
                X, y, epsilon=epsilon, delta=delta, categories=getattr(self, "categories", None),
                feature_bounds=getattr(self, "feature_bounds", None),
                classes=getattr(self, "classes", None), classifier=self._classifier, rng=rng)
            out.update(classes=classes, encoder=encoder)
            target = self._encode_classes(yy, classes) if self._classifier else yy
            return Xf, target, bounds, prior

        self._fit_auto(prepare, epsilon, delta, penalty, penalty_kwargs)
        if self._classifier:
            self.classes_ = out["classes"]
        self.table_ = out["encoder"]
        if frame:
            self.feature_names_in_ = np.asarray(X.columns, dtype=object)
            self.n_features_in_ = len(X.columns)
        return self

    def _check_table_target(self, X, y):
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y "
                             f"is None")
        n = len(as_pandas(X))
        if len(y) != n:
            raise ValueError(f"X has {n} rows but y has {len(y)}")
        if n == 0:
            raise ValueError("X has 0 rows: a fit needs data")
        if self._classifier:
            import pandas as pd

            if pd.isna(pd.Series(np.asarray(y, dtype=object))).any():
                raise ValueError("y has missing labels: drop those rows first (the labels "
                                 "cannot be imputed)")
            return y
        try:
            values = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{type(self).__name__} needs a numeric target y; got values like "
                             f"{np.asarray(y)[:3].tolist()}") from None
        if not np.all(np.isfinite(values)):
            raise ValueError("y has missing or infinite values: drop those rows first")
        return values

    def _encode_classes(self, index, classes):
        """The loss's target from label indices into the selected/declared ``classes``."""
        return index

    def _fit_chunked(self, X, y, epsilon, delta_given, spec, options):
        """Fit of Dask / on-disk data through :mod:`dpopt.data.chunked`: the default path
        (:mod:`dpopt.pipeline.chunked`) or an explicit distributed solver."""
        if spec is None:
            _check_auto_epsilon(epsilon)  # before the data is read
        else:
            check_distributed(spec)
        X, y = as_dask_arrays(X, y)
        penalty, penalty_kwargs = self._penalty()

        def problem_of(target, loss=None, **extra):
            return ChunkedProblem(X, target, loss=loss or self._loss(), penalty=penalty,
                                  fit_intercept=self.fit_intercept, **extra, **penalty_kwargs)

        n = int(X.shape[0]) if X is not None and not math.isnan(X.shape[0]) else None
        if spec is None:
            if n is None:  # a ChunkedProblem source: its own target, counted by the problem
                n = problem_of(y).n_samples
            penalty_kwargs = _resolve_alpha(penalty_kwargs, self._loss(), n)
            self.alpha_ = penalty_kwargs.get("alpha")
            delta = default_delta(n) if delta_given is None else delta_given
            self.table_ = None

            def prepare(rng):
                target, prior = self._chunked_default_target(y, n, epsilon, delta, rng)
                multiclass = self._n_classes() > 2  # class indices: "squared" checks no labels
                return (problem_of(target, "squared" if multiclass else None), None, None,
                        prior)

            self._fit_auto(prepare, epsilon, delta, penalty, penalty_kwargs)
            self.n_features_in_ = self.fit_result_.coef.shape[-1]
            return self
        penalty_kwargs = _resolve_alpha(penalty_kwargs, self._loss(), n)
        self.alpha_ = penalty_kwargs.get("alpha")
        with warnings.catch_warnings(record=True) as label_leaks:
            warnings.simplefilter("always")
            target = self._encode_chunked_y(y)
        multiclass = self._n_classes() > 2  # target: class indices ("squared": no label check)
        problem = problem_of(target, "squared" if multiclass else None)
        delta = default_delta(problem.n_samples) if delta_given is None else delta_given
        self.n_features_in_ = problem.n_features
        self.auto_ = None
        if multiclass:  # one-vs-rest (dpopt.pipeline.multiclass): validated once above
            def binary(relabel):
                return ChunkedProblem(X, target.map_blocks(relabel, dtype=np.float64),
                                      loss=self._loss(), penalty=penalty,
                                      fit_intercept=self.fit_intercept, validate=False,
                                      **penalty_kwargs)

            problem = OneVsRestProblems(binary, self._n_classes())
        return self._solve(problem, spec, epsilon, delta, options, label_leaks)

    def _chunked_default_target(self, y, n, epsilon, delta, rng):
        """The loss's target of chunked data on the default path, and the releases it took
        (regressors: y itself, nothing)."""
        return y, None

    def _n_classes(self):
        """k > 2: a one-vs-rest fit of the classes found by ``_encode_y`` (0 for regressors)."""
        return len(getattr(self, "classes_", ())) if self._classifier else 0

    def _encode_chunked_y(self, y):
        return y

    def _solve(self, problem, spec, epsilon, delta, options, earlier=()):
        budget = resolve_budget(self.accountant)
        run = solve_one_vs_rest if isinstance(problem, OneVsRestProblems) else solve
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = run(problem, spec.name, epsilon=epsilon, delta=delta,
                         random_state=sklearn_seed(self.random_state), budget=budget, **options)
        self.privacy_leaks_ = []
        if not spec.private or math.isinf(result.epsilon):
            msg = (f"{type(self).__name__}: solver {spec.name!r} with epsilon={epsilon:g} is not "
                   f"private; the model is not differentially private")
            self.privacy_leaks_.append(msg)
            warnings.warn(msg, PrivacyLeakWarning, stacklevel=4)  # _solve, _fit, fit, caller
        self._surface(list(earlier) + list(caught), stacklevel=5)
        self._set_fitted(result)
        return self

    def _surface(self, caught, stacklevel):
        """Re-raise the fit's warnings from the caller; leaks are prefixed with the estimator
        name and kept in ``privacy_leaks_``."""
        for w in caught:
            if issubclass(w.category, PrivacyLeakWarning):
                msg = f"{type(self).__name__}: {w.message}"
                if msg in self.privacy_leaks_:  # e.g. the same leak in each one-vs-rest fit
                    continue
                self.privacy_leaks_.append(msg)
                warnings.warn(msg, PrivacyLeakWarning, stacklevel=stacklevel)
            else:
                warnings.warn(w.message, w.category, stacklevel=stacklevel)

    def _fit_auto(self, prepare, epsilon, delta, penalty, penalty_kwargs):
        """The default path (:mod:`dpopt.pipeline.default_path`): private bounds, scaling,
        mechanism, and the private choice between the model and the constant
        (:mod:`dpopt.pipeline.selection`; one-vs-rest for k >= 3 classes). ``prepare(rng)``
        gives ``(X, target, public bounds, prior releases)``; it runs inside the budget
        reservation, so a refused fit reads nothing and a failed one charges nothing."""
        _check_auto_epsilon(epsilon)
        rng = check_random_state(sklearn_seed(self.random_state))
        budget = resolve_budget(self.accountant)
        name = type(self).__name__
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with contextlib.ExitStack() as stack:
                slot = (stack.enter_context(budget.spend(epsilon, delta, label=name))
                        if budget is not None else None)
                X, target, bounds, prior = prepare(rng)
                inference = bool(getattr(self, "inference", False))
                if self._n_classes() > 2:  # one-vs-rest, one composition (dpopt.pipeline.multiclass)
                    if inference:
                        raise ValueError("inference=True gives intervals for a binary or linear "
                                         "model; the one-vs-rest fit of k >= 3 classes has none")
                    n = X.n_samples if getattr(X, "is_chunked", False) else X.shape[0]
                    penalty_kwargs = _resolve_alpha(penalty_kwargs, self._loss(), n)
                    auto = fit_default_one_vs_rest(
                        X, target, self._n_classes(), penalty=penalty,
                        penalty_kwargs=penalty_kwargs, fit_intercept=self.fit_intercept,
                        epsilon=epsilon, delta=delta, rng=rng, feature_bounds=bounds,
                        prior=prior)
                else:  # the model or the constant, chosen privately (dpopt.pipeline.selection)
                    auto = fit_selected(X, target, loss=self._loss(), penalty=penalty,
                                        penalty_kwargs=penalty_kwargs,
                                        fit_intercept=self.fit_intercept, epsilon=epsilon,
                                        delta=delta, rng=rng, regression=not self._classifier,
                                        feature_bounds=bounds, prior=prior,
                                        inference=inference)
                if auto.result.epsilon > epsilon * (1 + 1e-9):  # never expected: exact split
                    raise RuntimeError(f"internal error: the default path would spend "
                                       f"{auto.result.epsilon} > epsilon={epsilon}; nothing "
                                       f"is released")
                if slot is not None:
                    slot.record(_ledger_entry(auto.result, name), label=name)
        self.privacy_leaks_ = []
        self._surface(caught, stacklevel=6)
        self.auto_ = auto
        self.alpha_ = auto.plan.get("alpha", penalty_kwargs.get("alpha"))
        self._set_fitted(auto.result)
        coef, intercept = auto.raw_model()
        self.coef_ = coef.reshape(self.coef_.shape)
        self.intercept_ = (np.atleast_1d(np.asarray(intercept, dtype=np.float64))
                           if np.ndim(self.intercept_) else float(intercept))
        self.feature_bounds_ = (None if auto.scaling.lower is None else
                                (auto.scaling.lower, auto.scaling.upper))
        return self

    def _check_params(self):
        """Everything that can be checked before reading the data, by the checks
        :func:`dpopt.solve` uses (the default delta needs n: resolved by ``_fit``)."""
        epsilon, delta = check_privacy_target(self.epsilon, self.delta)
        check_bool(self.fit_intercept, "fit_intercept")
        if check_bool(getattr(self, "inference", False), "inference") and self.solver != "auto":
            raise ValueError(f"inference=True needs solver='auto' (intervals use the default "
                             f"path's releases), got solver={self.solver!r}")
        spec = None if self.solver == "auto" else get_solver(self.solver)
        options = {} if self.solver_options is None else self.solver_options
        if not isinstance(options, dict):
            raise ValueError(f"solver_options must be a dict or None, got {options!r}")
        bad = sorted(k for k in options if k in _RESERVED_OPTIONS)
        if bad:
            raise ValueError(f"solver_options must not set {bad}: they are estimator "
                             f"parameters (epsilon, delta, random_state, accountant)")
        if spec is None:
            if options:
                raise ValueError(f"solver_options={options!r} needs an explicit solver: "
                                 f"solver='auto' sets every knob itself (pass e.g. "
                                 f"solver='dp-cd' with your options)")
            return epsilon, delta, spec, {}
        return epsilon, delta, spec, spec.check_options(options, what="solver_options")

    def _encode_y(self, y):
        return y

    def _set_fitted(self, result):
        coef = np.asarray(result.coef, dtype=np.float64)
        self.coef_ = coef
        self.intercept_ = (np.asarray(result.intercept, dtype=np.float64)  # one-vs-rest: (k,)
                           if np.ndim(result.intercept) else float(result.intercept))
        self.n_iter_ = int(result.n_iter)
        self.epsilon_spent_ = float(result.epsilon)
        self.delta_spent_ = float(result.delta)
        self.adjacency_ = result.adjacency
        self.fit_result_ = result

    # -- predict ----------------------------------------------------------------------
    def _decision(self, X):
        check_is_fitted(self, "coef_")
        if is_chunked_input(X):
            return self._chunked_decision(X)
        table = getattr(self, "table_", None)
        if table is not None:
            return self._margins(table.transform(X))
        X = validate_data(self, X, accept_sparse=("csr", "csc"), dtype=np.float64, reset=False)
        return self._margins(X)

    def _margins(self, X):
        if getattr(self, "auto_", None) is not None:  # the default path's feature map
            X = self.auto_.scaling.prepare(X)
        if np.ndim(self.coef_) == 2 and self.coef_.shape[0] > 1:  # one-vs-rest: (n, k)
            return np.asarray(X @ self.coef_.T) + self.intercept_
        coef = np.ravel(self.coef_)
        return np.asarray(X @ coef).ravel() + float(np.ravel(self.intercept_)[0])

    def _chunked_decision(self, X):
        """Margins of chunked data (Dask array, data frame or path, as ``fit`` takes them):
        a lazy Dask array, one task per row chunk, each applying the feature map and the
        model to its chunk (nothing is computed here)."""
        X, _ = as_dask_arrays(X, None)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has shape {X.shape}; the model was fitted on "
                             f"{self.n_features_in_} features")
        if self._n_classes() > 2:  # one column per class
            return X.map_blocks(self._margins_of_chunk, chunks=(X.chunks[0], (self._n_classes(),)),
                                dtype=np.float64)
        return X.map_blocks(self._margins_of_chunk, drop_axis=1, dtype=np.float64)

    def _margins_of_chunk(self, chunk):
        return self._margins(chunk.astype(np.float64, copy=False))

    def privacy_report(self) -> str:
        """The privacy of the fitted model: one line, plus what leaked, if anything."""
        check_is_fitted(self, "coef_")
        if getattr(self, "auto_", None) is not None:
            line = self.auto_.report(type(self).__name__)
        else:
            line = self.fit_result_.privacy_report()
        if self.privacy_leaks_:
            line = "NOT end-to-end private: " + " | ".join(self.privacy_leaks_) + "\n" + line
        return line

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class _Regressor(RegressorMixin, _DPLinearModel):
    def predict(self, X):
        """X @ coef_ + intercept_ (features clipped to ``feature_bounds_`` on the default path)."""
        return self._decision(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # see DPLogisticRegression.__sklearn_tags__
        return tags


# ---------------------------------------------------------------------------------


def _classes_of(y):
    """The label set ``classes_`` of a classifier's target (sorted).

    The one place an estimator reads its classes from ``y``: private label selection
    (declared classes, or classes chosen by noisy counts) replaces this function; until
    then the label set is released as it is, like scikit-learn does. ``y`` may be a Dask
    array (chunked fits: one pass)."""
    if hasattr(y, "dask") and hasattr(y, "compute"):
        import dask.array as da

        y = da.unique(y).compute()
    check_classification_targets(y)
    return np.unique(y)


def _probabilities(margins):
    if margins.ndim == 2:  # one-vs-rest: each class's sigmoid, normalized over the classes
        p = np.exp(-np.logaddexp(0.0, -margins))
        return p / p.sum(axis=1, keepdims=True)
    p1 = np.exp(-np.logaddexp(0.0, -margins))
    return np.column_stack([1.0 - p1, p1])


def _log_probabilities(margins):
    if margins.ndim == 2:
        with np.errstate(divide="ignore"):
            return np.log(_probabilities(margins))
    return np.column_stack([-np.logaddexp(0.0, margins), -np.logaddexp(0.0, -margins)])


def _class_index(y, classes):
    """Class indices 0..k-1 of a chunk of labels (k = len(classes))."""
    return np.searchsorted(classes, y).astype(np.float64)


class DPLogisticRegression(InferenceMixin, ClassifierMixin, _DPLinearModel):
    """Differentially private logistic regression, binary or multiclass (one-vs-rest).

    Minimizes (1/n) sum_i log(1 + exp(-y_i (x_i^T w + b))) + psi(w) with a
    solver from the registry. Any two labels are accepted: ``classes_[1]``
    is mapped to +1 and ``classes_[0]`` to -1. With k >= 3 classes, k binary
    models (class c against the rest) are fitted on the same features and
    composed as one release (:mod:`dpopt.pipeline.multiclass`: the Gaussian-DP budget
    split mu / sqrt(k) per class, or the PLD composition for objective
    perturbation); ``coef_`` is then (k, n_features), ``predict_proba`` (n, k)
    (each class's sigmoid, normalized), ``privacy_report()`` one (epsilon, delta).

    Model selection: ``cross_val_score`` / ``GridSearchCV`` spend ``epsilon`` on
    every fit (module docstring); use :class:`dpopt.PrivateHyperparameterSearch`.

    Parameters
    ----------
    epsilon : float, default 1.0
        Target epsilon of the fit (``inf``: no privacy, refused under a budget).
    delta : float or None, default None (1/n^2, see the module docstring)
    penalty : {"l2", "l1", "elastic_net", "none"}, default "l2"
    alpha : float or "auto", default "auto"
        Penalty strength (l2: alpha/2 ||w||^2; l1: alpha ||w||_1). ``"auto"`` is 1/n
        (n the rows the model is fitted on), scikit-learn's ``LogisticRegression(C=1)`` in
        this scaling; on the default path it applies to the privately scaled features.
    l1_ratio : float, default 0.5 (elastic_net only)
    fit_intercept : bool, default True
    solver : str, default "auto"
        ``"auto"``: the private default path (module docstring); or any registered
        solver supporting the logistic loss and the penalty.
    solver_options : dict or None
        Passed to the solver (e.g. ``{"passes": 20, "clip": 1.0}``).
    random_state : None, int, RandomState or numpy Generator
    accountant : dpopt.BudgetAccountant or None
    classes : list or None
        The labels, declared (public: nothing spent). None: a categorical or bool y gives
        them; otherwise the default path selects them privately (:mod:`dpopt.preprocessing.tables`: noisy
        label counts above a threshold, a label held by few records is never released) and
        an explicit solver reads ``np.unique(y)`` with a PrivacyLeakWarning. A label outside
        ``classes`` counts as ``classes[0]``.
    categories : dict or None
        ``{column: levels}`` declared for DataFrame columns (public schema).
    feature_bounds : dict or None
        ``{column name or index: (lower, upper)}`` public bounds (default path): those
        features cost no budget.
    inference : bool, default False
        Default path only: also release what standard errors need (a share of the same
        epsilon, in the one report and charge); then ``conf_int``, ``bse_`` and
        ``summary`` give Wald inference (:mod:`dpopt.pipeline.inference`, docs/inference.md).

    Attributes
    ----------
    classes_, coef_ (1 or k, n_encoded_features), intercept_ (1 or k,), n_iter_,
    epsilon_spent_, delta_spent_, adjacency_, fit_result_, privacy_leaks_, n_features_in_,
    alpha_ (the penalty strength used: ``alpha`` resolved, None without a penalty),
    feature_names_in_ (DataFrames), table_ (the table encoding of a DataFrame:
    ``table_.get_feature_names_out()`` names the columns of ``coef_``; None for arrays).
    """

    _classifier = True

    def __init__(self, *, epsilon=1.0, delta=None, penalty="l2", alpha="auto", l1_ratio=0.5,
                 fit_intercept=True, solver="auto", solver_options=None, random_state=None,
                 accountant=None, classes=None, categories=None, feature_bounds=None,
                 inference=False):
        self.inference = inference
        self.epsilon = epsilon
        self.delta = delta
        self.penalty = penalty
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.solver_options = solver_options
        self.random_state = random_state
        self.accountant = accountant
        self.classes = classes
        self.categories = categories
        self.feature_bounds = feature_bounds

    def _loss(self):
        return "logistic"

    def _penalty(self):
        if self.penalty not in ("l2", "l1", "elastic_net", "none"):
            raise ValueError(f"penalty must be one of ['elastic_net', 'l1', 'l2', 'none'], "
                             f"got {self.penalty!r}")
        if self.penalty == "none":
            return "none", {}
        if not (self.alpha == "auto" if isinstance(self.alpha, str) else
                isinstance(self.alpha, numbers.Real) and not isinstance(self.alpha, bool)
                and self.alpha >= 0 and math.isfinite(self.alpha)):
            raise ValueError(f"alpha must be 'auto' or a non-negative finite number, got "
                             f"{self.alpha!r}")
        kwargs = {"alpha": self.alpha}
        if self.penalty == "elastic_net":
            kwargs["l1_ratio"] = self.l1_ratio
        return self.penalty, kwargs

    def _encode_classes(self, index, classes):
        """Sets ``classes_``; binary: classes[1] -> +1, classes[0] (and any label outside
        classes) -> -1; k >= 3: the class indices (one-vs-rest, as floats)."""
        self._set_classes(np.asarray(classes))
        if len(classes) > 2:
            return index.astype(np.float64)
        return np.where(index == 1, 1.0, -1.0)

    def _encode_y(self, y):
        """An explicit solver's labels: ``classes=`` or a categorical / bool target are public;
        otherwise ``np.unique(y)`` is read from the data without privacy (a
        PrivacyLeakWarning; the default path selects the labels privately). Binary: +-1
        labels; multiclass: class indices 0..k-1 (as floats)."""
        check_classification_targets(y)
        declared = declared_classes(y, self.classes)
        if declared is not None:
            return self._encode_classes(encode_labels(y, declared), declared)
        warnings.warn("classes_ = np.unique(y) is read from the data without privacy (which "
                      "labels occur is released); declare them with classes=[...] or use "
                      "solver='auto', which selects them privately", PrivacyLeakWarning,
                      stacklevel=2)
        self._set_classes(_classes_of(y))
        if self._n_classes() > 2:
            return _class_index(y, self.classes_)
        return np.where(y == self.classes_[1], 1.0, -1.0)

    def _set_classes(self, classes):
        if classes.size < 2:
            raise ValueError("DPLogisticRegression needs at least 2 classes in y, got 1 class")
        self.classes_ = classes

    def _chunked_default_target(self, y, n, epsilon, delta, rng):
        """Chunked labels on the default path: declared (``classes=``) or chosen privately
        from their counts (one pass, summed over the chunks; :func:`dpopt.preprocessing.tables.label_prior`,
        the release of the in-memory path)."""
        import dask.array as da

        y = y if isinstance(y, da.Array) else da.from_array(np.asarray(y))
        prior = None
        if self.classes is not None:
            classes = declared_classes(None, self.classes)
        else:
            values, counts = da.compute(*da.unique(y, return_counts=True))
            classes, prior = label_prior(dict(zip(values.tolist(), counts.tolist())), n,
                                         epsilon, delta, rng)
        check_two_classes(classes, epsilon)
        self.classes_ = classes
        index = da.zeros(y.shape, dtype=np.int64, chunks=y.chunks)
        for i, c in enumerate(classes):
            index = da.where(y == c, i, index)
        return self._encode_classes(index, classes), prior

    def _encode_chunked_y(self, y):
        """The same encoding of a Dask array of labels (one pass for the label set)."""
        import dask.array as da

        y = y if isinstance(y, da.Array) else da.from_array(np.asarray(y))
        self._set_classes(_classes_of(y))  # one pass for the label set
        if self._n_classes() > 2:
            return da.map_blocks(_class_index, y, self.classes_, dtype=np.float64)
        return da.where(y == self.classes_[1], 1.0, -1.0)

    def _set_fitted(self, result):
        super()._set_fitted(result)
        self.coef_ = self.coef_.reshape(-1, self.coef_.shape[-1])
        self.intercept_ = np.atleast_1d(self.intercept_)

    def decision_function(self, X):
        """Binary: margin x^T coef + intercept, positive means ``classes_[1]``.
        Multiclass: (n, k), each class's margin against the rest."""
        return self._decision(X)

    def predict_proba(self, X):
        """Columns: P(classes_[j]) under the logistic model (multiclass: each class's
        one-vs-rest sigmoid, normalized to sum to one)."""
        return self._per_chunk(self._decision(X), _probabilities, len(self.classes_))

    def predict_log_proba(self, X):
        return self._per_chunk(self._decision(X), _log_probabilities, len(self.classes_))

    def predict(self, X):
        return self._per_chunk(self._decision(X), self._labels)

    def _labels(self, margins):
        if margins.ndim == 2:
            return self.classes_[np.argmax(margins, axis=1)]
        return self.classes_[(margins > 0).astype(int)]

    def _per_chunk(self, margins, func, columns=None):
        """``func(margins)``, chunk by chunk when the margins are a (lazy) Dask array."""
        if isinstance(margins, np.ndarray):
            return func(margins)
        if margins.ndim == 2:  # one-vs-rest: (n, k) margins
            if columns is None:
                return margins.map_blocks(func, drop_axis=1, dtype=self.classes_.dtype)
            return margins.map_blocks(func, chunks=(margins.chunks[0], (columns,)),
                                      dtype=np.float64)
        if columns is None:
            return margins.map_blocks(func, dtype=self.classes_.dtype)
        return margins.map_blocks(func, new_axis=1, chunks=(margins.chunks[0], (columns,)),
                                  dtype=np.float64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        # A private fit at the default epsilon on scikit-learn's check data (tens of samples)
        # is noisy by design: its training score is not a correctness check.
        tags.classifier_tags.poor_score = True
        return tags


class DPLinearRegression(InferenceMixin, _Regressor):
    """Differentially private least squares, optionally ridge.

    Minimizes (1/n) sum_i (x_i^T w + b - y_i)^2 / 2 + alpha/2 ||w||^2
    (no penalty when ``alpha=0``, the default). Parameters as
    :class:`DPLogisticRegression` (without ``penalty``, ``l1_ratio``), ``inference`` included.
    Model selection: ``cross_val_score`` / ``GridSearchCV`` spend epsilon per fit: use
    :class:`dpopt.PrivateHyperparameterSearch`.
    Note: the squared loss has no bounded gradient; the solvers' clipping
    bounds each record's influence, which biases the fit when residuals
    exceed the clipping threshold (scale X and y).
    """

    def __init__(self, *, epsilon=1.0, delta=None, alpha=0.0, fit_intercept=True,
                 solver="auto", solver_options=None, random_state=None, accountant=None,
                 categories=None, feature_bounds=None, inference=False):
        self.inference = inference
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.solver_options = solver_options
        self.random_state = random_state
        self.accountant = accountant
        self.categories = categories
        self.feature_bounds = feature_bounds

    def _loss(self):
        return "squared"

    def _penalty(self):
        if isinstance(self.alpha, numbers.Real) and self.alpha == 0:
            return "none", {}
        return "l2", {"alpha": self.alpha}


class DPLasso(_Regressor):
    """Differentially private Lasso: (1/n) sum_i (x_i^T w + b - y_i)^2 / 2 + alpha ||w||_1
    (scikit-learn's Lasso objective). Parameters as :class:`DPLinearRegression`;
    ``alpha`` defaults to 1.0 as in scikit-learn. Model selection: ``cross_val_score`` /
    ``GridSearchCV`` spend epsilon per fit: use :class:`dpopt.PrivateHyperparameterSearch`."""

    def __init__(self, *, epsilon=1.0, delta=None, alpha=1.0, fit_intercept=True,
                 solver="auto", solver_options=None, random_state=None, accountant=None,
                 categories=None, feature_bounds=None):
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.solver_options = solver_options
        self.random_state = random_state
        self.accountant = accountant
        self.categories = categories
        self.feature_bounds = feature_bounds

    def _loss(self):
        return "squared"

    def _penalty(self):
        return "l1", {"alpha": self.alpha}


class DPElasticNet(_Regressor):
    """Differentially private elastic net: squared loss + alpha l1_ratio ||w||_1
    + alpha (1 - l1_ratio)/2 ||w||^2 (scikit-learn's ElasticNet objective). Model selection:
    ``cross_val_score`` / ``GridSearchCV`` spend epsilon per fit: use
    :class:`dpopt.PrivateHyperparameterSearch`."""

    def __init__(self, *, epsilon=1.0, delta=None, alpha=1.0, l1_ratio=0.5, fit_intercept=True,
                 solver="auto", solver_options=None, random_state=None, accountant=None,
                 categories=None, feature_bounds=None):
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.solver_options = solver_options
        self.random_state = random_state
        self.accountant = accountant
        self.categories = categories
        self.feature_bounds = feature_bounds

    def _loss(self):
        return "squared"

    def _penalty(self):
        return "elastic_net", {"alpha": self.alpha, "l1_ratio": self.l1_ratio}


class DPHuberRegressor(_Regressor):
    """Differentially private Huber regression.

    Minimizes (1/n) sum_i H_t(x_i^T w + b - y_i) + alpha/2 ||w||^2 with
    H_t(r) = r^2/2 for |r| <= t and t|r| - t^2/2 beyond (``threshold`` t,
    on the raw residual: unlike scikit-learn's HuberRegressor there is no
    jointly estimated scale, so standardize y or pick t in y's units).
    The loss is t-Lipschitz, so clipping rarely binds for small t. Model selection:
    ``cross_val_score`` / ``GridSearchCV`` spend epsilon per fit: use
    :class:`dpopt.PrivateHyperparameterSearch`.
    """

    def __init__(self, *, epsilon=1.0, delta=None, threshold=1.35, alpha=1e-4,
                 fit_intercept=True, solver="auto", solver_options=None, random_state=None,
                 accountant=None, categories=None, feature_bounds=None):
        self.epsilon = epsilon
        self.delta = delta
        self.threshold = threshold
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.solver_options = solver_options
        self.random_state = random_state
        self.accountant = accountant
        self.categories = categories
        self.feature_bounds = feature_bounds

    def _loss(self):
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, numbers.Real) \
                or not (self.threshold > 0 and math.isfinite(self.threshold)):
            raise ValueError(f"threshold must be a positive finite number, got "
                             f"{self.threshold!r}")
        return huber(float(self.threshold))

    def _penalty(self):
        if isinstance(self.alpha, numbers.Real) and self.alpha == 0:
            return "none", {}
        return "l2", {"alpha": self.alpha}
