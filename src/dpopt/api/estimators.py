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
the same feature map, ``feature_bounds_``, and a regressor clips its predictions to
``target_range_``, the private range its target was clipped to). Any registered solver can be named
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

import functools
import math
import numbers
import warnings

import numpy as np
from scipy.special import log_softmax
from sklearn.base import ClassifierMixin

from dpopt._core.exceptions import PrivacyLeakWarning
from dpopt.api._linear_model import (
    _DPLinearModel,
    _Regressor,
)
from dpopt.api._scoring import ChunkedScoreMixin
from dpopt.api.modelio import is_multinomial, probabilities
from dpopt.data.losses import huber
from dpopt.pipeline.inference import InferenceMixin
from dpopt.preprocessing.dask_tables import declared_counts_prior
from dpopt.preprocessing.labels import (
    OTHER_LABEL,
    check_label_targets,
    computed_with_checks,
    declared_classes,
    encode_labels,
    label_checks,
    label_prior,
    signed_labels,
)
from dpopt.preprocessing.table_encoder import check_labels_kept

#: The warning of an explicit solver that reads its label set from y.
LABELS_READ = ("classes_ = np.unique(y) is read from the data without privacy (which labels "
               "occur is released); declare them with classes=[...] or use solver='auto', "
               "which selects them privately")

__all__ = ["DPLogisticRegression", "DPLinearRegression", "DPLasso", "DPElasticNet",
           "DPHuberRegressor"]

# ---------------------------------------------------------------------------------


class DPLogisticRegression(InferenceMixin, ChunkedScoreMixin, ClassifierMixin, _DPLinearModel):
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
    feature_bounds : dict, (lower, upper) or None
        ``{column name or index: (lower, upper)}`` public bounds (default path): those
        features cost no budget. For arrays also two NumPy arrays (lower, upper) of one
        value per feature, NaN at both ends where the bounds are to be estimated (the form
        of ``feature_bounds_``).
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
        classes) -> -1; k >= 3: the class indices (one-vs-rest, as floats; a label outside
        classes is -1, a negative of every class). One label (the
        default path's selection kept one): every record -> -1, and the fit releases the
        classifier of that label (:func:`dpopt.pipeline.constant.fit_one_class`)."""
        if len(classes) == 1:
            self.classes_ = np.asarray(classes)
        else:
            self._set_classes(np.asarray(classes))
        if len(classes) > 2:
            return index.astype(np.float64)
        return np.where(index == 1, 1.0, -1.0)

    def _encode_y(self, y):
        """An explicit solver's labels: ``classes=`` or a bool target are public; otherwise
        ``np.unique(y)`` is read from the data without privacy (a PrivacyLeakWarning; the
        default path selects the labels privately), a categorical target's too (its
        categories are most often made from the labels). Binary: +-1 labels; multiclass:
        class indices 0..k-1 (as floats)."""
        check_label_targets(y)
        declared = declared_classes(y, self.classes)
        if declared is not None:
            return self._encode_classes(encode_labels(y, declared), declared)
        warnings.warn(LABELS_READ, PrivacyLeakWarning, stacklevel=2)
        self._set_classes(_classes_of(y))
        if self._n_classes() > 2:
            return _class_index(y, self.classes_)
        return np.where(y == self.classes_[1], 1.0, -1.0)

    def _set_classes(self, classes):
        if classes.size < 2:
            raise ValueError("DPLogisticRegression needs at least 2 classes in y, got 1 class")
        self.classes_ = classes

    def _chunked_default_target(self, y, n, epsilon, delta, rng, chosen=None,
                                count_declared=False):
        """Chunked labels on the default path: declared (``classes=``; with
        ``count_declared`` their counts summed over the chunks and released as in memory,
        :func:`dpopt.preprocessing.dask_tables.declared_counts_prior`) or chosen privately
        from their counts (one pass, summed over the chunks; :func:`dpopt.preprocessing.labels.label_prior`,
        the release of the in-memory path); ``chosen``: already selected with a table's
        columns (:func:`dpopt.preprocessing.dask_tables.prepare_dask`). Returns (the loss's
        target, the label releases or None, two classes' signed labels with 0 for a record of
        neither class, which the held-out choice scores: :func:`dpopt.pipeline.selection.fit_selected`)."""
        # lazy: dask is an optional dependency (pip install dpopt[dask])
        import dask.array as da

        y = _one_column(y if isinstance(y, da.Array) else da.from_array(np.asarray(y)))
        prior, declared, checks = None, None, ()
        if chosen is None:  # the in-memory checks, in the pass that counts (before a release)
            declared = declared_classes(y, self.classes)  # a bool y's are public
            checks = label_checks(y, self.classes)
        if chosen is not None:
            classes = np.asarray(chosen)
        elif declared is not None:
            classes = declared
            if count_declared and len(classes) >= 2:
                prior = declared_counts_prior(y, classes, n, epsilon, delta, rng, checks)
            else:
                computed_with_checks([], checks)
        else:
            values, counts = computed_with_checks(da.unique(y, return_counts=True), checks)
            classes, prior = label_prior(dict(zip(values.tolist(), counts.tolist())), n,
                                         epsilon, delta, rng)
        info = prior.info if prior is not None and declared is None else {}  # selected
        check_labels_kept(classes, epsilon, info.get("selection_mu"), info.get("selection_delta"),
                          getattr(prior, "records", ()), getattr(prior, "delta", 0.0))
        self.classes_ = classes
        index = _chunked_index(y, classes)
        signed = index.map_blocks(signed_labels, dtype=np.float64) if len(classes) == 2 else None
        return self._encode_classes(index, classes), prior, signed

    def _encode_chunked_y(self, y):
        """The same encoding of a Dask array of labels (one pass for the label set)."""
        # lazy: dask is an optional dependency (pip install dpopt[dask])
        import dask.array as da

        y = _one_column(y if isinstance(y, da.Array) else da.from_array(np.asarray(y)))
        checks = label_checks(y, self.classes)  # the in-memory checks, in the label set's pass
        declared = declared_classes(y, self.classes)
        if declared is None:  # the in-memory warning and label set (one pass)
            warnings.warn(LABELS_READ, PrivacyLeakWarning, stacklevel=3)
            declared = _classes_of(computed_with_checks([da.unique(y)], checks)[0])
        else:
            computed_with_checks([], checks)
        return self._encode_classes(_chunked_index(y, declared), declared)

    def _set_fitted(self, result):
        super()._set_fitted(result)
        self.coef_ = self.coef_.reshape(-1, self.coef_.shape[-1])
        self.intercept_ = np.atleast_1d(self.intercept_)

    def decision_function(self, X):
        """Binary: margin x^T coef + intercept, positive means ``classes_[1]``.
        Multiclass: (n, k), each class's logit in the multinomial model (or its margin
        against the rest, one-vs-rest)."""
        return self._decision(X)

    def predict_proba(self, X):
        """Columns: P(classes_[j]) under the logistic model (multiclass: the softmax of the
        default path's multinomial model, or each class's one-vs-rest sigmoid normalized to
        sum to one; one released label: a column of 1)."""
        margins = self._decision(X)
        return self._per_chunk(margins, _certain if len(self.classes_) == 1 else
                               functools.partial(probabilities, multinomial=self._multinomial()),
                               len(self.classes_))

    def predict_log_proba(self, X):
        margins = self._decision(X)
        return self._per_chunk(margins, _log_certain if len(self.classes_) == 1 else
                               functools.partial(_log_probabilities,
                                                 multinomial=self._multinomial()),
                               len(self.classes_))

    def _multinomial(self):
        """Whether the fit is one multinomial model (softmax margins)."""
        return is_multinomial(self.fit_result_.params)

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


def _certain(margins):
    """The probabilities of the one released label: a column of 1."""
    return np.ones((margins.shape[0], 1))


def _log_certain(margins):
    return np.zeros((margins.shape[0], 1))


class DPLinearRegression(InferenceMixin, _Regressor):
    """Differentially private least squares, optionally ridge.

    Minimizes (1/n) sum_i (x_i^T w + b - y_i)^2 / 2 + alpha/2 ||w||^2 on the raw
    coefficients (no penalty when ``alpha=0``, the default). Parameters as
    :class:`DPLogisticRegression` (without ``penalty``, ``l1_ratio``), ``inference`` included,
    and ``target_bounds`` (every regressor here): a public (lower, upper) of y, known
    without the data (a codebook, a physical range; ends at most 1e150 in magnitude). The
    default path then releases no histogram of y (its share goes to the model), clips y to
    it and predicts within it; a small table gains most (docs/default_path.md, "Public
    knowledge instead of budget").
    Model selection: ``cross_val_score`` / ``GridSearchCV`` spend epsilon per fit: use
    :class:`dpopt.PrivateHyperparameterSearch`.
    Note: the squared loss has no bounded gradient; the solvers' clipping
    bounds each record's influence, which biases the fit when residuals
    exceed the clipping threshold (scale X and y).
    """

    def __init__(self, *, epsilon=1.0, delta=None, alpha=0.0, fit_intercept=True,
                 solver="auto", solver_options=None, random_state=None, accountant=None,
                 categories=None, feature_bounds=None, target_bounds=None, inference=False):
        self.target_bounds = target_bounds
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
    (scikit-learn's Lasso objective, on the raw coefficients: ``alpha`` is in the units of
    the data, whatever the private scaling; docs/default_path.md, "The penalty"). Parameters
    as :class:`DPLinearRegression`; ``alpha`` defaults to 1.0 as in scikit-learn. Model
    selection: ``cross_val_score`` / ``GridSearchCV`` spend epsilon per fit: use
    :class:`dpopt.PrivateHyperparameterSearch`."""

    def __init__(self, *, epsilon=1.0, delta=None, alpha=1.0, fit_intercept=True,
                 solver="auto", solver_options=None, random_state=None, accountant=None,
                 categories=None, feature_bounds=None, target_bounds=None):
        self.target_bounds = target_bounds
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
    + alpha (1 - l1_ratio)/2 ||w||^2 (scikit-learn's ElasticNet objective, on the raw
    coefficients, as :class:`DPLasso`). Model selection:
    ``cross_val_score`` / ``GridSearchCV`` spend epsilon per fit: use
    :class:`dpopt.PrivateHyperparameterSearch`."""

    def __init__(self, *, epsilon=1.0, delta=None, alpha=1.0, l1_ratio=0.5, fit_intercept=True,
                 solver="auto", solver_options=None, random_state=None, accountant=None,
                 categories=None, feature_bounds=None, target_bounds=None):
        self.target_bounds = target_bounds
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
                 accountant=None, categories=None, feature_bounds=None, target_bounds=None):
        self.target_bounds = target_bounds
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


def _classes_of(y):
    """The label set ``classes_`` of a classifier's target (sorted).

    The one place an estimator reads its classes from ``y``: private label selection
    (declared classes, or classes chosen by noisy counts) replaces this function; until
    then the label set is released as it is, like scikit-learn does. ``y`` may be a Dask
    array (chunked fits: one pass)."""
    if hasattr(y, "dask") and hasattr(y, "compute"):
        # lazy: dask is an optional dependency (pip install dpopt[dask])
        import dask.array as da

        y = da.unique(y).compute()
    check_label_targets(y)
    return np.unique(y)


def _log_probabilities(margins, multinomial=False):
    if margins.ndim == 2 and multinomial:
        return log_softmax(margins, axis=1)
    if margins.ndim == 2:
        with np.errstate(divide="ignore"):
            return np.log(probabilities(margins))
    return np.column_stack([-np.logaddexp(0.0, margins), -np.logaddexp(0.0, -margins)])


def _one_column(y):
    """A chunked y of one column as a vector (in memory scikit-learn ravels it too)."""
    if y.ndim == 2 and y.shape[1] == 1:
        return y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"y must be 1-dimensional (one label per row), got shape {y.shape}")
    return y


def _chunked_index(y, classes):
    """Each chunked label's index in ``classes``, :data:`OTHER_LABEL` outside them (a
    per-record map, lazy)."""
    # lazy: dask is an optional dependency (pip install dpopt[dask])
    import dask.array as da

    index = da.full(y.shape, OTHER_LABEL, dtype=np.int64, chunks=y.chunks)
    for i, c in enumerate(classes):
        index = da.where(y == c, i, index)
    return index


def _class_index(y, classes):
    """Class indices 0..k-1 of a chunk of labels (k = len(classes))."""
    return np.searchsorted(classes, y).astype(np.float64)
