"""The fit logic the estimators share (:class:`_DPLinearModel`): argument checks, the default
path on arrays, tables and chunks (the table layer's releases, the held-out selection,
one-vs-rest), explicit solvers, one charge to the budget, and the warnings a fit re-raises.
The public estimators are in :mod:`dpopt.api.estimators`.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from dpopt._core.exceptions import PrivacyLeakWarning
from dpopt._core.input import check_Xy_input, numeric_target, one_target
from dpopt._core.validation import (
    check_bool,
    check_fit_delta,
    check_privacy_target,
    check_random_state,
    check_target_range,
    default_delta,
    sklearn_seed,
)
from dpopt.api._scoring import ChunkedScoreMixin
from dpopt.api.charge import (
    charged,
    charged_after,
    charged_solve,
    ledger_entry,
    no_intervals,
    unchanged_on_failure,
)
from dpopt.data import Problem
from dpopt.data.chunked import ChunkedProblem, as_dask_arrays, is_chunked_input
from dpopt.data.penalties import check_penalty
from dpopt.data.sources import open_table
from dpopt.pipeline.autofit import prediction_range
from dpopt.pipeline.constant import fit_one_class
from dpopt.pipeline.default_path import check_inference
from dpopt.pipeline.multiclass import OneVsRestProblems
from dpopt.pipeline.multiclass_selection import fit_selected_one_vs_rest
from dpopt.pipeline.releasable import check_releasable
from dpopt.pipeline.scaling import ColumnWarning
from dpopt.pipeline.selection import choice_runs, fit_selected, n_features
from dpopt.pipeline.selection import resolve_alpha as _resolve_alpha
from dpopt.pipeline.target_looks import NARROW_BAND, narrow_band
from dpopt.preprocessing._cells import is_label, split_target
from dpopt.preprocessing._plan import no_reference_without_intercept
from dpopt.preprocessing.dask_tables import (
    chunked_design,
    dask_table,
    is_dask_frame,
    prepare_dask,
    set_input_names,
    split_default_target,
)
from dpopt.preprocessing.labels import (
    category_values,
    check_label_targets,
    labels_present,
    signed_labels,
)
from dpopt.preprocessing.table_encoder import (
    array_bounds,
    explicit_table,
    known_target_range,
    no_column_left,
    numbers_at_prediction,
    prepare_default,
)
from dpopt.preprocessing.tables import as_pandas, is_frame
from dpopt.solvers import check_distributed, get_solver
from dpopt.solvers.adassp import declines_at as adassp_declines_at

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
        with unchanged_on_failure(self):
            return self._fit(X, y)

    def _fit(self, X, y):
        epsilon, delta_given, spec, options = self._check_params()
        if spec is None:
            _check_auto_epsilon(epsilon)  # the arguments before the data
        if is_frame(X) and is_label(y):  # y names the target column (as a str only)
            X, y = split_target(as_pandas(X), y)
        if is_chunked_input(X):
            return self._fit_chunked(X, y, epsilon, delta_given, spec, options)
        y = category_values(y)
        if spec is None:
            return self._fit_default_path(X, y, epsilon, delta_given)
        names, self.table_ = None, None
        if is_frame(X):  # the public schema; numbers only: an array, missing cells at 0
            names, X, self.table_ = explicit_table(X, getattr(self, "categories", None))
        y = check_Xy_input(X, y, numeric=not self._classifier)
        if self._classifier and y is not None:  # a missing label named before scikit-learn's
            labels_present(y)
        X, y = self._validate_data(X, y)
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
        self.auto_ = self.target_range_ = None
        if self._n_classes() > 2:  # one-vs-rest (dpopt.pipeline.multiclass): k problems, one release
            def binary(relabel):
                return Problem(X, relabel(target), loss=self._loss(), penalty=penalty,
                               fit_intercept=self.fit_intercept, **penalty_kwargs)

            return self._solve(OneVsRestProblems(binary, self._n_classes()), spec, epsilon,
                               delta, options, label_leaks)
        problem = Problem(X, target, loss=self._loss(), penalty=penalty,
                          fit_intercept=self.fit_intercept, **penalty_kwargs)
        return self._solve(problem, spec, epsilon, delta, options, label_leaks)

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
            if getattr(self, "inference", False) and not self.fit_intercept:
                no_reference_without_intercept(as_pandas(X), getattr(self, "categories", None))
        else:
            y = check_Xy_input(X, y, numeric=not self._classifier)
            if self._classifier and y is not None:  # a missing label named before sklearn's
                y = labels_present(y)
            X, y = self._validate_data(X, y)
            if self._classifier:
                check_label_targets(y)
        n = X.shape[0]
        delta = default_delta(n) if delta_given is None else delta_given
        penalty, penalty_kwargs = self._penalty()
        out = {}

        count_declared = self._counts_declared(n, X.shape[1], epsilon, delta)

        def prepare(rng):
            Xf, yy, classes, encoder, bounds, prior = prepare_default(
                X, y, epsilon=epsilon, delta=delta, categories=getattr(self, "categories", None),
                feature_bounds=getattr(self, "feature_bounds", None),
                classes=getattr(self, "classes", None),
                classifier=self._classifier, rng=rng,
                count_declared=count_declared, coding=self._coding(),
                target_range=self._public_target(), gradient_model=adassp_declines_at)
            if Xf.shape[1] == 0:
                raise no_column_left(prior)
            out.update(classes=classes, encoder=encoder)
            target = self._encode_classes(yy, classes) if self._classifier else yy
            if self._classifier and len(classes) == 2:  # neither class: 0 (fit_selected)
                target = signed_labels(yy)
            return Xf, target, bounds, prior

        self._fit_auto(prepare, epsilon, delta, penalty, penalty_kwargs, releasable=(n, y))
        if self._classifier:
            self.classes_ = out["classes"]
        self.table_ = out["encoder"]
        if frame:  # the names the table layer read (a pyarrow Table's .columns is its data)
            names = self.table_.feature_names_in
            self.feature_names_in_ = np.asarray(list(names), dtype=object)
            self.n_features_in_ = len(names)
        return self

    def _check_table_target(self, X, y):
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y "
                             f"is None")
        y = one_target(y)
        n = len(as_pandas(X))
        if len(y) != n:
            raise ValueError(f"X has {n} rows but y has {len(y)}")
        if n == 0:
            raise ValueError("X has 0 rows: a fit needs data")
        if self._classifier:  # continuous numbers are refused as for arrays, before any release
            y = labels_present(y)
            if np.asarray(y).dtype.kind == "f":
                check_label_targets(y)
            return y
        return numeric_target(y, type(self).__name__)

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
        X = open_table(X)  # a Parquet file is the table it holds
        if spec is None and is_dask_frame(X):  # as a pandas DataFrame: the table layer
            return self._fit_chunked_table(X, y, epsilon, delta_given)
        encoder = names = None
        if is_dask_frame(X):  # an explicit solver: text by the public schema only
            X, y, encoder, names = dask_table(X, y, getattr(self, "categories", None))
        X, y = as_dask_arrays(X, y)
        penalty, penalty_kwargs = self._penalty()

        def problem_of(target, loss=None, default_path=False):
            # the default path's records carry no penalty (it is set on the scaled problem)
            # and skip the magnitude check (the scaled data pass it, as in memory)
            kw = {} if default_path else {"penalty": penalty, **penalty_kwargs}
            return ChunkedProblem(X, target, loss=loss or self._loss(),
                                  fit_intercept=self.fit_intercept,
                                  check_magnitude=not default_path, **kw)

        n = int(X.shape[0]) if X is not None and not math.isnan(X.shape[0]) else None
        if spec is None:
            if n is None:  # a ChunkedProblem source: its own target, counted by the problem
                n = problem_of(y, default_path=True).n_samples
            # alpha="auto" stays: the held-out choice resolves it on the training rows
            delta = default_delta(n) if delta_given is None else delta_given
            self.table_ = None

            width = (int(X.shape[1]) if X is not None and not math.isnan(X.shape[1])
                     else None)
            count_declared = width is not None and self._counts_declared(n, width, epsilon,
                                                                         delta)
            given = getattr(self, "feature_bounds", None)
            if width is not None:  # public: refused before the labels' release
                array_bounds(given, width)

            def prepare(rng):
                target, prior, scored = self._chunked_default_target(
                    y, n, epsilon, delta, rng, count_declared=count_declared)
                multiclass = self._n_classes() > 2  # class indices: "squared" checks no labels
                problem = problem_of(target, "squared" if multiclass else None, default_path=True)
                bounds = array_bounds(given, problem.n_features)
                return problem, scored, bounds, prior

            self._fit_auto(prepare, epsilon, delta, penalty, penalty_kwargs, chunked=True,
                           releasable=(n, y))
            set_input_names(self, None, self.fit_result_.coef.shape[-1])
            return self
        penalty_kwargs = _resolve_alpha(penalty_kwargs, self._loss(), n)
        self.alpha_ = penalty_kwargs.get("alpha")
        with warnings.catch_warnings(record=True) as label_leaks:
            warnings.simplefilter("always")
            target = self._encode_chunked_y(y)
        multiclass = self._n_classes() > 2  # target: class indices ("squared": no label check)
        problem = problem_of(target, "squared" if multiclass else None)
        delta = default_delta(problem.n_samples) if delta_given is None else delta_given
        set_input_names(self, names, problem.n_features)
        self.auto_ = self.target_range_ = None
        self.table_ = encoder
        if multiclass:  # one-vs-rest (dpopt.pipeline.multiclass): validated once above
            def binary(relabel):
                return ChunkedProblem(X, target.map_blocks(relabel, dtype=np.float64),
                                      loss=self._loss(), penalty=penalty,
                                      fit_intercept=self.fit_intercept, validate=False,
                                      **penalty_kwargs)

            problem = OneVsRestProblems(binary, self._n_classes())
        return self._solve(problem, spec, epsilon, delta, options, label_leaks, depth=1)

    def _fit_chunked_table(self, X, y, epsilon, delta_given):
        """The default path on a Dask DataFrame of any dtypes, as on a pandas DataFrame:
        the table's releases with their counts summed over the partitions
        (:func:`prepare_dask`, the same selection as in memory), then the chunked default
        path on the encoded partitions; one composition, as in memory."""
        _check_auto_epsilon(epsilon)
        frame, y, n = split_default_target(X, y, classifier=self._classifier,
                                           who=type(self).__name__)
        penalty, penalty_kwargs = self._penalty()  # alpha="auto": resolved on the training rows
        delta = default_delta(n) if delta_given is None else delta_given

        count_declared = self._counts_declared(n, len(frame.columns), epsilon, delta)

        def prepare(rng):
            encoded, classes, encoder, bounds, prior = prepare_dask(
                frame, y, n=n, epsilon=epsilon, delta=delta,
                categories=getattr(self, "categories", None),
                feature_bounds=getattr(self, "feature_bounds", None),
                classes=getattr(self, "classes", None), classifier=self._classifier, rng=rng,
                count_declared=count_declared, who=type(self).__name__)
            self.table_ = encoder
            Xa, target = as_dask_arrays(encoded, y)
            scored = None
            if self._classifier:
                target, _, scored = self._chunked_default_target(target, n, epsilon, delta, rng,
                                                                 chosen=classes)
            loss = "squared" if self._n_classes() > 2 else self._loss()
            # the records: the penalty and the magnitude check are the scaled problem's
            problem = ChunkedProblem(Xa, target, loss=loss, fit_intercept=self.fit_intercept,
                                     check_magnitude=False)
            return problem, scored, bounds, prior

        self._fit_auto(prepare, epsilon, delta, penalty, penalty_kwargs, chunked=True,
                       releasable=(n, y))
        set_input_names(self, self.table_.feature_names_in, None)
        return self

    def _chunked_default_target(self, y, *args, **kwargs):
        """The loss's target of chunked data on the default path, and the releases it took
        (regressors: y itself, nothing, no labels to score)."""
        return y, None, None

    def _counts_declared(self, n, p, epsilon, delta):
        """Whether declared classes get noisy counts on all n rows, in memory and chunked:
        they name the majority where the held-out choice runs, on the high-dimensional route
        too (its screen's class share counted the records of neither class as negatives,
        and a fuzz saw the minority class released), and where the model is checked on its
        own rows (fewer rows: dpopt.pipeline.in_sample). Public facts only."""
        return bool(self._classifier and self.fit_intercept and choice_runs(
            n, inference=bool(getattr(self, "inference", False))))

    def _n_classes(self):
        """k > 2: a one-vs-rest fit of the classes found by ``_encode_y`` (0 for regressors)."""
        return len(getattr(self, "classes_", ())) if self._classifier else 0

    def _encode_chunked_y(self, y):
        return y

    def _solve(self, problem, spec, epsilon, delta, options, earlier=(), depth=0):
        """An explicit solver's fit, its warnings raised from the caller of ``fit`` (``depth``:
        the frames between ``_fit`` and this call, 1 from ``_fit_chunked``)."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = charged_solve(problem, spec, epsilon, delta, options, self.accountant,
                                    sklearn_seed(self.random_state))
        self.privacy_leaks_ = []
        if not spec.private or math.isinf(result.epsilon):
            msg = (f"{type(self).__name__}: solver {spec.name!r} with epsilon={epsilon:g} is not "
                   f"private; the model is not differentially private")
            self.privacy_leaks_.append(msg)
            warnings.warn(msg, PrivacyLeakWarning, stacklevel=4 + depth)  # _solve, _fit, fit
        self._surface(list(earlier) + list(caught), stacklevel=5 + depth)
        self._set_fitted(result)
        return self

    def _validate_data(self, X, y):
        """scikit-learn's checks of in-memory training data (numbers, finite, lengths). Its
        finiteness test sums the data first, which overflows on values near the largest float
        and would warn (a warning decided by the data, which the chunked layout does not
        raise): the test itself is exact either way, so the warning is silenced."""
        with np.errstate(over="ignore", invalid="ignore"):
            return validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=np.float64,
                                 y_numeric=not self._classifier)

    def _surface(self, caught, stacklevel):
        """Re-raise the fit's warnings from the caller, each once (one-vs-rest fits repeat
        them); leaks are prefixed with the estimator name and kept in ``privacy_leaks_``."""
        for w in {(w.category, str(w.message)): w for w in caught}.values():
            if issubclass(w.category, PrivacyLeakWarning):
                msg = f"{type(self).__name__}: {w.message}"
                if msg in self.privacy_leaks_:  # e.g. the same leak in each one-vs-rest fit
                    continue
                self.privacy_leaks_.append(msg)
                warnings.warn(msg, PrivacyLeakWarning, stacklevel=stacklevel)
            else:
                warnings.warn(w.message, w.category, stacklevel=stacklevel)

    def _fit_auto(self, prepare, epsilon, delta, penalty, penalty_kwargs, chunked=False,
                  *, releasable):
        """The default path (:mod:`dpopt.pipeline.default_path`): private bounds, scaling,
        mechanism, and the private choice between the model and the constant
        (:mod:`dpopt.pipeline.selection`; one-vs-rest for k >= 3 classes). ``prepare(rng)``
        gives ``(X, target, public bounds, prior releases)``; it runs inside the budget
        reservation, so a refused fit reads nothing and a failed one charges nothing (but
        a :class:`ChargedFitError`, :mod:`dpopt.api.charge`); ``chunked`` (Dask, public)
        refuses ``inference=True`` before it; ``releasable`` (n, y): a fit with too few rows
        to release anything reliable is refused before it (:mod:`dpopt.pipeline.releasable`)."""
        _check_auto_epsilon(epsilon)
        check_releasable(*releasable, epsilon, delta, classifier=self._classifier,
                         fit_intercept=self.fit_intercept, classes=getattr(self, "classes", None),
                         target_bounds=self._public_target())
        if getattr(self, "inference", False):  # refused before the table layer's releases
            loss = self._loss()
            check_inference(getattr(loss, "name", loss), penalty, penalty_kwargs, chunked)
            declared = getattr(self, "classes", None) if self._classifier else None
            if declared is not None and len(declared) > 2:  # public: refused for free
                raise no_intervals(len(declared), None)
        rng = check_random_state(sklearn_seed(self.random_state))
        name = type(self).__name__
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with charged(self.accountant, epsilon, delta, label=name) as slot:
                X, target, bounds, prior = prepare(rng)  # a ChargedFitError is charged
                inference = bool(getattr(self, "inference", False))
                if inference and self._classifier and self._n_classes() != 2:
                    raise no_intervals(self._n_classes(), prior)
                with charged_after(prior, epsilon, delta):
                    auto = self._fit_prepared(X, target, bounds, prior, rng, epsilon, delta,
                                              penalty, penalty_kwargs, inference)
                slot.record(ledger_entry(auto.result, name), label=name)
        self.privacy_leaks_ = []
        self._surface(caught, stacklevel=6)
        band = None if self._classifier else narrow_band(auto)
        if band is not None:  # post-processing of the released range (pipeline.scaling)
            auto.plan["target_narrow_band"] = band
            warnings.warn(NARROW_BAND.format(*band), ColumnWarning, stacklevel=5)
        self.auto_ = auto
        self.alpha_ = auto.plan.get("alpha", penalty_kwargs.get("alpha"))
        self._set_fitted(auto.result)
        coef, intercept = auto.raw_model()
        self.coef_ = coef.reshape(self.coef_.shape)
        self.intercept_ = (np.atleast_1d(np.asarray(intercept, dtype=np.float64))
                           if np.ndim(self.intercept_) else float(intercept))
        self.feature_bounds_ = (None if auto.scaling.lower is None else
                                (auto.scaling.lower, auto.scaling.upper))
        self.target_range_ = prediction_range(auto)
        return self

    def _fit_prepared(self, X, target, bounds, prior, rng, epsilon, delta, penalty,
                      penalty_kwargs, inference):
        """The default path's fit after the table layer's releases (``prior``)."""
        if self._n_classes() == 1:  # the selection kept one label: its classifier
            auto = fit_one_class(n_features(X), label=self.classes_[0],
                                 fit_intercept=self.fit_intercept, epsilon=epsilon,
                                 delta=delta, prior=prior)
        elif self._n_classes() > 2:  # one-vs-rest, one composition (dpopt.pipeline.multiclass)
            # the model or the majority class (dpopt.pipeline.multiclass_selection)
            auto = fit_selected_one_vs_rest(
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
                                inference=inference,
                                target_bounds=known_target_range(
                                    self._public_target(), prior))
        if auto.result.epsilon > epsilon * (1 + 1e-9):  # never expected: exact split
            raise RuntimeError(f"internal error: the default path would spend "
                               f"{auto.result.epsilon} > epsilon={epsilon}; nothing "
                               f"is released")
        return auto

    def _check_params(self):
        """Everything that can be checked before reading the data, by the checks
        :func:`dpopt.solve` uses (the default delta needs n: resolved by ``_fit``)."""
        epsilon, delta = check_privacy_target(self.epsilon, self.delta)
        check_fit_delta(delta)
        check_bool(self.fit_intercept, "fit_intercept")
        if check_bool(getattr(self, "inference", False), "inference") and self.solver != "auto":
            raise ValueError(f"inference=True needs solver='auto' (intervals use the default "
                             f"path's releases), got solver={self.solver!r}")
        spec = None if self.solver == "auto" else get_solver(self.solver)
        if self._public_target() is not None and spec is not None:
            raise ValueError("target_bounds= applies to solver='auto' (the default path); an "
                             "explicit solver takes the data as given")
        options = {} if self.solver_options is None else self.solver_options
        if not isinstance(options, dict):
            raise ValueError(f"solver_options must be a dict or None, got {options!r}")
        bad = sorted(k for k in options if k in _RESERVED_OPTIONS)
        if bad:
            raise ValueError(f"solver_options must not set {bad}: they are estimator "
                             f"parameters (epsilon, delta, random_state, accountant)")
        if spec is None and options:
            raise ValueError(f"solver_options={options!r} needs an explicit solver: "
                             f"solver='auto' sets every knob itself (pass e.g. "
                             f"solver='dp-cd' with your options)")
        self._loss()  # the loss's and the penalty's parameters (a table's releases come next)
        check_penalty(*self._penalty())
        return epsilon, delta, spec, ({} if spec is None else
                                      spec.check_options(options, what="solver_options"))

    def _encode_y(self, y):
        return y

    def _coding(self):
        """How the table layer codes categorical columns: against a reference level for
        intervals, else with an intercept by the private means of y where the selection
        cannot name most values (string columns, :mod:`dpopt.preprocessing.target_coding`),
        else one-hot."""
        if getattr(self, "inference", False):
            return "reference"
        return "target" if self.fit_intercept else "one-hot"

    def _public_target(self):
        """The regressor's ``target_bounds`` as (lower, upper) floats, or None
        (:func:`~dpopt._core.validation.check_target_range`, before anything is read)."""
        given = getattr(self, "target_bounds", None)
        return None if given is None else check_target_range(given)

    def _set_fitted(self, result):
        self.coef_ = np.asarray(result.coef, dtype=np.float64)
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
        if table is not None and table.schema is not None:  # a block of rows at a time
            return np.concatenate([self._margins(b) for b in table.prediction_blocks(X)])
        if table is not None:
            return self._margins(table.transform(X, at_prediction=True))
        if getattr(self, "feature_names_in_", None) is not None:  # fitted on numbers only:
            X = numbers_at_prediction(X, self.feature_names_in_)  # a missing cell at 0, as at fit
        X = validate_data(self, X, accept_sparse=("csr", "csc"), dtype=np.float64, reset=False)
        return self._margins(X)

    def _margins(self, X):
        if getattr(self, "auto_", None) is not None:  # the default path's feature map
            X = self.auto_.scaling.prepare(X)
        if np.ndim(self.coef_) == 2 and self.coef_.shape[0] > 1:  # one-vs-rest: (n, k)
            return np.asarray(X @ self.coef_.T) + self.intercept_
        return np.asarray(X @ np.ravel(self.coef_)).ravel() + float(np.ravel(self.intercept_)[0])

    def _chunked_decision(self, X):
        """Margins of chunked data (Dask array, data frame or path, as ``fit`` takes them):
        a lazy Dask array, one task per row chunk, each applying the feature map and the
        model to its chunk (nothing is computed here); a model fitted on a table takes a
        Dask DataFrame, its columns matched by name (:func:`chunked_design`)."""
        X = chunked_design(open_table(X), getattr(self, "table_", None),
                           getattr(self, "feature_names_in_", None), np.shape(self.coef_)[-1])
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


class _Regressor(ChunkedScoreMixin, RegressorMixin, _DPLinearModel):
    def predict(self, X):
        """X @ coef_ + intercept_; on the default path the features are clipped to
        ``feature_bounds_`` and the prediction to ``target_range_``, as the fit and its
        held-out choice saw them (docs/default_path.md)."""
        margins = self._decision(X)
        bounds = getattr(self, "target_range_", None)
        return margins if bounds is None else margins.clip(*bounds)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # see DPLogisticRegression.__sklearn_tags__
        return tags
