"""scikit-learn estimators for private linear models.

Each estimator fits ``(X, y)`` privately. The default, ``solver="auto"``, is
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
from dpopt._core.validation import (
    check_bool,
    check_privacy_target,
    check_random_state,
    default_delta,
    sklearn_seed,
)
from dpopt.data import Problem
from dpopt.data.chunked import is_chunked_input
from dpopt.inference import InferenceMixin
from dpopt.privacy.budget import resolve_budget
from dpopt.solvers import get_solver, solve

__all__ = ["DPLogisticRegression", "DPLinearRegression", "DPLasso", "DPElasticNet",
           "DPHuberRegressor"]

_RESERVED_OPTIONS = ("epsilon", "delta", "random_state", "rng", "problem", "budget")


def _check_auto_epsilon(epsilon):
    if math.isinf(epsilon):
        raise ValueError("solver='auto' needs a finite epsilon: its scaling is private; "
                         "pass an explicit solver for a non-private fit")


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
        if is_chunked_input(X):
            return self._fit_chunked(X, y, epsilon, delta_given, spec, options)
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=np.float64,
                             y_numeric=not self._classifier)
        target = self._encode_y(y)
        delta = default_delta(X.shape[0]) if delta_given is None else delta_given
        penalty, penalty_kwargs = self._penalty()
        if spec is None:
            return self._fit_auto(X, target, epsilon, delta, penalty, penalty_kwargs)
        self.auto_ = None
        problem = Problem(X, target, loss=self._loss(), penalty=penalty,
                          fit_intercept=self.fit_intercept, **penalty_kwargs)
        return self._solve(problem, spec, epsilon, delta, options)

    def _fit_chunked(self, X, y, epsilon, delta_given, spec, options):
        """Fit of Dask / on-disk data through :mod:`dpopt.data.chunked`: the default path
        (:mod:`dpopt.pipeline.chunked`) or an explicit distributed solver."""
        from dpopt.data.chunked import ChunkedProblem, as_dask_arrays

        if spec is None:
            _check_auto_epsilon(epsilon)  # before the data is read
        else:
            from dpopt.data.chunked import check_distributed

            check_distributed(spec)
        X, y = as_dask_arrays(X, y)
        penalty, penalty_kwargs = self._penalty()
        problem = ChunkedProblem(X, self._encode_chunked_y(y), loss=self._loss(),
                                 penalty=penalty, fit_intercept=self.fit_intercept,
                                 **penalty_kwargs)
        delta = default_delta(problem.n_samples) if delta_given is None else delta_given
        self.n_features_in_ = problem.n_features
        if spec is None:
            return self._fit_auto(problem, None, epsilon, delta, penalty, penalty_kwargs)
        self.auto_ = None
        return self._solve(problem, spec, epsilon, delta, options)

    def _encode_chunked_y(self, y):
        return y

    def _solve(self, problem, spec, epsilon, delta, options):
        budget = resolve_budget(self.accountant)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = solve(problem, spec.name, epsilon=epsilon, delta=delta,
                           random_state=sklearn_seed(self.random_state), budget=budget, **options)
        self.privacy_leaks_ = []
        if not spec.private or math.isinf(result.epsilon):
            msg = (f"{type(self).__name__}: solver {spec.name!r} with epsilon={epsilon:g} is not "
                   f"private; the model is not differentially private")
            self.privacy_leaks_.append(msg)
            warnings.warn(msg, PrivacyLeakWarning, stacklevel=4)  # _solve, _fit, fit, caller
        self._surface(caught, stacklevel=5)
        self._set_fitted(result)
        return self

    def _surface(self, caught, stacklevel):
        """Re-raise the fit's warnings from the caller; leaks are prefixed with the estimator
        name and kept in ``privacy_leaks_``."""
        for w in caught:
            if issubclass(w.category, PrivacyLeakWarning):
                msg = f"{type(self).__name__}: {w.message}"
                self.privacy_leaks_.append(msg)
                warnings.warn(msg, PrivacyLeakWarning, stacklevel=stacklevel)
            else:
                warnings.warn(w.message, w.category, stacklevel=stacklevel)

    def _fit_auto(self, X, target, epsilon, delta, penalty, penalty_kwargs):
        """The default path (:mod:`dpopt.pipeline.default_path`): private bounds, scaling, mechanism."""
        from dpopt.pipeline.default_path import fit_default

        _check_auto_epsilon(epsilon)
        rng = check_random_state(sklearn_seed(self.random_state))
        budget = resolve_budget(self.accountant)
        name = type(self).__name__
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with contextlib.ExitStack() as stack:
                slot = (stack.enter_context(budget.spend(epsilon, delta, label=name))
                        if budget is not None else None)
                auto = fit_default(X, target, loss=self._loss(), penalty=penalty,
                                   penalty_kwargs=penalty_kwargs,
                                   fit_intercept=self.fit_intercept, epsilon=epsilon,
                                   delta=delta, rng=rng, regression=not self._classifier,
                                   inference=bool(getattr(self, "inference", False)))
                if auto.result.epsilon > epsilon * (1 + 1e-9):  # never expected: exact split
                    raise RuntimeError(f"internal error: the default path would spend "
                                       f"{auto.result.epsilon} > epsilon={epsilon}; nothing "
                                       f"is released")
                if slot is not None:
                    slot.record(auto.result, label=name)
        self.privacy_leaks_ = []
        self._surface(caught, stacklevel=5)
        self.auto_ = auto
        self._set_fitted(auto.result)
        coef, intercept = auto.raw_model()
        self.coef_ = coef.reshape(self.coef_.shape)
        self.intercept_ = (np.array([intercept]) if np.ndim(self.intercept_) else
                           float(intercept))
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
        self.intercept_ = float(result.intercept)
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
        X = validate_data(self, X, accept_sparse=("csr", "csc"), dtype=np.float64, reset=False)
        return self._margins(X)

    def _margins(self, X):
        if getattr(self, "auto_", None) is not None:  # the default path's feature map
            X = self.auto_.scaling.prepare(X)
        coef = np.ravel(self.coef_)
        return np.asarray(X @ coef).ravel() + float(np.ravel(self.intercept_)[0])

    def _chunked_decision(self, X):
        """Margins of chunked data (Dask array, data frame or path, as ``fit`` takes them):
        a lazy Dask array, one task per row chunk, each applying the feature map and the
        model to its chunk (nothing is computed here)."""
        from dpopt.data.chunked import as_dask_arrays

        X, _ = as_dask_arrays(X, None)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has shape {X.shape}; the model was fitted on "
                             f"{self.n_features_in_} features")
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


def _probabilities(margins):
    p1 = np.exp(-np.logaddexp(0.0, -margins))
    return np.column_stack([1.0 - p1, p1])


def _log_probabilities(margins):
    return np.column_stack([-np.logaddexp(0.0, margins), -np.logaddexp(0.0, -margins)])


class DPLogisticRegression(InferenceMixin, ClassifierMixin, _DPLinearModel):
    """Differentially private binary logistic regression.

    Minimizes (1/n) sum_i log(1 + exp(-y_i (x_i^T w + b))) + psi(w) with a
    solver from the registry. Any two labels are accepted: ``classes_[1]``
    is mapped to +1 and ``classes_[0]`` to -1 (more than two classes raise).

    Parameters
    ----------
    epsilon : float, default 1.0
        Target epsilon of the fit (``inf``: no privacy, refused under a budget).
    delta : float or None, default None (1/n^2, see the module docstring)
    penalty : {"l2", "l1", "elastic_net", "none"}, default "l2"
    alpha : float, default 1e-3
        Penalty strength (l2: alpha/2 ||w||^2).
    l1_ratio : float, default 0.5 (elastic_net only)
    fit_intercept : bool, default True
    solver : str, default "auto"
        ``"auto"``: the private default path (module docstring); or any registered
        solver supporting the logistic loss and the penalty.
    solver_options : dict or None
        Passed to the solver (e.g. ``{"passes": 20, "clip": 1.0}``).
    random_state : None, int, RandomState or numpy Generator
    accountant : dpopt.BudgetAccountant or None
    inference : bool, default False
        Default path only: also release what standard errors need (a share of the same
        epsilon, in the one report and charge); then ``conf_int``, ``bse_`` and
        ``summary`` give Wald inference (:mod:`dpopt.inference`, docs/inference.md).

    Attributes
    ----------
    classes_, coef_ (1, n_features), intercept_ (1,), n_iter_, epsilon_spent_,
    delta_spent_, adjacency_, fit_result_, privacy_leaks_, n_features_in_.
    """

    _classifier = True

    def __init__(self, *, epsilon=1.0, delta=None, penalty="l2", alpha=1e-3, l1_ratio=0.5,
                 fit_intercept=True, solver="auto", solver_options=None, random_state=None,
                 accountant=None, inference=False):
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

    def _loss(self):
        return "logistic"

    def _penalty(self):
        if self.penalty not in ("l2", "l1", "elastic_net", "none"):
            raise ValueError(f"penalty must be one of ['elastic_net', 'l1', 'l2', 'none'], "
                             f"got {self.penalty!r}")
        if self.penalty == "none":
            return "none", {}
        kwargs = {"alpha": self.alpha}
        if self.penalty == "elastic_net":
            kwargs["l1_ratio"] = self.l1_ratio
        return self.penalty, kwargs

    def _encode_y(self, y):
        check_classification_targets(y)
        classes = np.unique(y)
        if classes.size > 2:
            raise ValueError(f"Only binary classification is supported. DPLogisticRegression "
                             f"got {classes.size} classes in y")
        if classes.size < 2:
            raise ValueError("DPLogisticRegression needs 2 classes in y, got 1 class")
        self.classes_ = classes
        return np.where(y == classes[1], 1.0, -1.0)

    def _encode_chunked_y(self, y):
        """The same encoding of a Dask array of labels (one pass for the label set)."""
        import dask.array as da

        y = y if isinstance(y, da.Array) else da.from_array(np.asarray(y))
        self._encode_y(da.unique(y).compute())  # checks the label set, sets classes_
        return da.where(y == self.classes_[1], 1.0, -1.0)

    def _set_fitted(self, result):
        super()._set_fitted(result)
        self.coef_ = self.coef_.reshape(1, -1)
        self.intercept_ = np.array([self.intercept_])

    def decision_function(self, X):
        """Margin x^T coef + intercept; positive means ``classes_[1]``."""
        return self._decision(X)

    def predict_proba(self, X):
        """Columns: P(classes_[0]), P(classes_[1]) under the logistic model."""
        return self._per_chunk(self._decision(X), _probabilities, 2)

    def predict_log_proba(self, X):
        return self._per_chunk(self._decision(X), _log_probabilities, 2)

    def predict(self, X):
        return self._per_chunk(self._decision(X), self._labels)

    def _labels(self, margins):
        return self.classes_[(margins > 0).astype(int)]

    def _per_chunk(self, margins, func, columns=None):
        """``func(margins)``, chunk by chunk when the margins are a (lazy) Dask array."""
        if isinstance(margins, np.ndarray):
            return func(margins)
        if columns is None:
            return margins.map_blocks(func, dtype=self.classes_.dtype)
        return margins.map_blocks(func, new_axis=1, chunks=(margins.chunks[0], (columns,)),
                                  dtype=np.float64)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        # A private fit at the default epsilon on scikit-learn's check data (tens of samples)
        # is noisy by design: its training score is not a correctness check.
        tags.classifier_tags.poor_score = True
        return tags


class DPLinearRegression(InferenceMixin, _Regressor):
    """Differentially private least squares, optionally ridge.

    Minimizes (1/n) sum_i (x_i^T w + b - y_i)^2 / 2 + alpha/2 ||w||^2
    (no penalty when ``alpha=0``, the default). Parameters as
    :class:`DPLogisticRegression` (without ``penalty``, ``l1_ratio``), ``inference`` included.
    Note: the squared loss has no bounded gradient; the solvers' clipping
    bounds each record's influence, which biases the fit when residuals
    exceed the clipping threshold (scale X and y).
    """

    def __init__(self, *, epsilon=1.0, delta=None, alpha=0.0, fit_intercept=True,
                 solver="auto", solver_options=None, random_state=None, accountant=None,
                 inference=False):
        self.inference = inference
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.solver_options = solver_options
        self.random_state = random_state
        self.accountant = accountant

    def _loss(self):
        return "squared"

    def _penalty(self):
        if isinstance(self.alpha, numbers.Real) and self.alpha == 0:
            return "none", {}
        return "l2", {"alpha": self.alpha}


class DPLasso(_Regressor):
    """Differentially private Lasso: (1/n) sum_i (x_i^T w + b - y_i)^2 / 2 + alpha ||w||_1
    (scikit-learn's Lasso objective). Parameters as :class:`DPLinearRegression`;
    ``alpha`` defaults to 1.0 as in scikit-learn."""

    def __init__(self, *, epsilon=1.0, delta=None, alpha=1.0, fit_intercept=True,
                 solver="auto", solver_options=None, random_state=None, accountant=None):
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.solver_options = solver_options
        self.random_state = random_state
        self.accountant = accountant

    def _loss(self):
        return "squared"

    def _penalty(self):
        return "l1", {"alpha": self.alpha}


class DPElasticNet(_Regressor):
    """Differentially private elastic net: squared loss + alpha l1_ratio ||w||_1
    + alpha (1 - l1_ratio)/2 ||w||^2 (scikit-learn's ElasticNet objective)."""

    def __init__(self, *, epsilon=1.0, delta=None, alpha=1.0, l1_ratio=0.5, fit_intercept=True,
                 solver="auto", solver_options=None, random_state=None, accountant=None):
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.solver_options = solver_options
        self.random_state = random_state
        self.accountant = accountant

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
    The loss is t-Lipschitz, so clipping rarely binds for small t.
    """

    def __init__(self, *, epsilon=1.0, delta=None, threshold=1.35, alpha=1e-4,
                 fit_intercept=True, solver="auto", solver_options=None, random_state=None,
                 accountant=None):
        self.epsilon = epsilon
        self.delta = delta
        self.threshold = threshold
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.solver_options = solver_options
        self.random_state = random_state
        self.accountant = accountant

    def _loss(self):
        from dpopt.data.losses import huber

        if isinstance(self.threshold, bool) or not isinstance(self.threshold, numbers.Real) \
                or not (self.threshold > 0 and math.isfinite(self.threshold)):
            raise ValueError(f"threshold must be a positive finite number, got "
                             f"{self.threshold!r}")
        return huber(float(self.threshold))

    def _penalty(self):
        if isinstance(self.alpha, numbers.Real) and self.alpha == 0:
            return "none", {}
        return "l2", {"alpha": self.alpha}
