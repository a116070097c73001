"""scikit-learn transformers that scale with privately estimated statistics (public
estimators: in the api layer, because each ``fit`` is charged to a budget, which only the
api layer does, through :func:`dpopt.api.charge.charged`; their releases are functions of
:mod:`dpopt.preprocessing`).

Each transformer's ``fit`` is one (epsilon, delta)-DP release under
replace-one adjacency (n public), accounted as a composition of Gaussian
mechanisms: ``mu = gdp_mu(epsilon, delta)`` of Gaussian DP is split as
``mu^2 = sum_k mu_k^2`` over the releases (exact composition, Dong, Roth,
Su 2022). ``transform`` is post-processing of the released statistics.

========================  ======================================  ==========================
transformer               releases                                budget split (of mu^2)
========================  ======================================  ==========================
PrivateClipper            bounds (noisy histograms)               all
PrivateMinMaxScaler       bounds                                  all
PrivateStandardScaler     bounds; clipped sums; clipped squares   bounds_share, rest halved
PrivateRobustScaler       one set of noisy histograms             all (bounds, quartiles)
PrivateTableEncoder       levels' and missing cells' counts       all, plus the threshold's
                          (partition selection)                   delta
========================  ======================================  ==========================

``bounds=`` gives public bounds (NaN entries estimated): those features are not
released, and a transformer whose output depends only on the bounds
(clipper, min-max) then spends nothing. The standard and robust scalers
still release their statistics (mean/variance, quartiles) from the data.
"""


from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from dpopt._core.exceptions import PrivacyLeakWarning
from dpopt._core.input import check_X_input
from dpopt._core.validation import (
    check_epsilon,
    check_privacy_target,
    check_random_state,
    check_scalar,
    default_delta,
    sklearn_seed,
    warn_if_delta_exceeds_one_over_n,
)
from dpopt.api.charge import charged, unchanged_on_failure
from dpopt.preprocessing._bounds import (
    DEFAULT_CONFIDENCE,
    DEFAULT_QUANTILES,
    check_public_bounds,
    check_quantiles,
    histogram_bounds,
    histogram_quantiles,
    private_feature_bounds,
    release_histograms,
    warn_unresolved,
)
from dpopt.preprocessing._transformers import _clip_columns, release_clipped_moments
from dpopt.preprocessing.table_encoder import checked_table, release_table
from dpopt.privacy.accounting import epsilon_of, gdp_delta, gdp_mu
from dpopt.privacy.budget import Spend, resolve_budget

__all__ = ["PrivateClipper", "PrivateMinMaxScaler", "PrivateStandardScaler",
           "PrivateRobustScaler"]


def _calibrated_mu(epsilon, delta):
    """mu of the fit's Gaussian-DP budget, with a safe margin: the largest mu that is
    (epsilon, delta)-DP (:func:`gdp_mu`, verified), shrunk by a relative 1e-9 so that
    the round-off of splitting mu^2 over the releases and of re-composing their noise
    multipliers (~1e-15 relative) cannot push the composed epsilon past the target
    (Dong, Roth, Su 2022: the composition of mu_k-GDP releases is sqrt(sum mu_k^2)-GDP)."""
    return math.inf if math.isinf(epsilon) else gdp_mu(epsilon, delta) * (1.0 - 1e-9)

class _PrivateTransformer(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Shared fit logic: validation, budget, accounting, rollback on failure."""

    def fit(self, X, y=None):
        """Estimate the statistics privately; returns ``self``. A refused or failed fit
        leaves the transformer as it was and spends nothing."""
        with unchanged_on_failure(self):
            return self._fit(X)

    def _fit(self, X):
        epsilon, delta_given = check_privacy_target(self.epsilon, self.delta)
        quantiles = check_quantiles(self.quantiles)
        check_scalar(self.confidence, "confidence", low=0.0)
        self._check_extra_params()
        X = validate_data(self, check_X_input(X), accept_sparse=("csr", "csc"), dtype=np.float64)
        n, p = X.shape
        delta = default_delta(n) if delta_given is None else delta_given
        warn_if_delta_exceeds_one_over_n(delta, n)  # the estimators' rule (WeakPrivacyWarning)
        public = check_public_bounds(self.bounds, p)
        rng = check_random_state(sklearn_seed(self.random_state))
        mu = _calibrated_mu(epsilon, delta)
        if self._releases(public):  # one charge (dpopt.api.charge), recorded once it succeeded
            with charged(self.accountant, epsilon, delta, label=type(self).__name__) as slot:
                fitted, mechanisms = self._estimate(X, public, quantiles, mu, rng)
                spend = self._checked_spend(mechanisms, epsilon, delta)
                slot.record(spend)
        else:  # public bounds only: nothing released, nothing charged
            resolve_budget(self.accountant)  # a bad accountant is still refused
            fitted, mechanisms = self._estimate(X, public, quantiles, mu, rng)
            spend = self._checked_spend(mechanisms, epsilon, delta)
        if math.isinf(spend.epsilon):
            warnings.warn(f"{type(self).__name__}: epsilon=inf, the statistics are computed "
                          f"without noise; not differentially private", PrivacyLeakWarning,
                          stacklevel=3)
        for key, value in fitted.items():
            setattr(self, key, value)
        self.mechanisms_ = list(mechanisms)
        self.epsilon_spent_, self.delta_spent_ = spend.epsilon, spend.delta
        self.adjacency_ = "replace-one"
        return self

    def _checked_spend(self, mechanisms, epsilon, delta) -> Spend:
        """What the releases spent, refusing (before anything is recorded or returned) an
        under-calibrated fit: never more than the target (a RuntimeError is a dpopt bug)."""
        spend = self._spend(mechanisms, delta)
        if not math.isinf(epsilon) and spend.epsilon > epsilon:
            raise RuntimeError(f"{type(self).__name__}: internal calibration error, the releases "
                               f"would spend epsilon={spend.epsilon!r} > target {epsilon!r}; "
                               f"nothing was released or charged (please report this)")
        return spend

    def _spend(self, mechanisms, delta) -> Spend:
        name = type(self).__name__
        if not mechanisms:
            return Spend(name, 0.0, 0.0, "replace-one", "exact", ())
        eps = epsilon_of(mechanisms, delta, accountant="exact")
        target = check_epsilon(self.epsilon)
        if eps > target:  # round-off of the GDP inversion: the calibration certifies target
            mu = math.sqrt(sum(m.count / m.noise_multiplier ** 2 for m in mechanisms))
            eps = target if gdp_delta(mu, target) <= delta else eps
        return Spend(name, eps, delta, "replace-one", "exact", tuple(mechanisms))

    def _check_extra_params(self):
        pass

    def _releases(self, public) -> bool:
        """Whether the fit releases anything (else it spends nothing)."""
        lo, hi = public
        return bool(np.any(np.isnan(lo) | np.isnan(hi)))

    def _bounds(self, X, public, quantiles, mu, rng):
        fb = private_feature_bounds(X, mu, rng, quantiles=quantiles, bounds=public,
                                    confidence=self.confidence)
        return {"lower_": fb.lower, "upper_": fb.upper, "bounds_": fb}, fb.mechanisms

    def _check_transform_input(self, X):
        check_is_fitted(self, "lower_")
        return validate_data(self, X, accept_sparse=("csr", "csc"), dtype=np.float64,
                             reset=False)

    def output_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) per output feature of ``transform``: public (post-processing of
        the released statistics), e.g. a solver's ``coordinate_bound``."""
        check_is_fitted(self, "lower_")
        lo, hi = self._output_bounds()
        return np.minimum(lo, hi), np.maximum(lo, hi)

    def row_bound(self) -> float:
        """Public bound on the L2 norm of every transformed row (a solver's ``row_bound``):
        sqrt(sum_j max(|lower_j|, |upper_j|)^2) over the output bounds."""
        lo, hi = self.output_bounds()
        return float(np.sqrt(np.sum(np.maximum(np.abs(lo), np.abs(hi)) ** 2)))

    def privacy_report(self) -> str:
        """One line: what the fit released and its privacy."""
        check_is_fitted(self, "lower_")
        name = type(self).__name__
        if not self.mechanisms_:
            return f"{name}: public bounds only, nothing released (epsilon = 0)"
        if math.isinf(self.epsilon_spent_):
            return f"{name}: not private (epsilon = inf)"
        mu = math.sqrt(sum(m.count / m.noise_multiplier ** 2 for m in self.mechanisms_))
        return (f"{name}: ({self.epsilon_spent_:.4g}, {self.delta_spent_:.3g})-DP under "
                f"{self.adjacency_} adjacency, accountant exact (Gaussian DP, mu = {mu:.4g}), "
                f"{len(self.mechanisms_)} Gaussian release(s)")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


_COMMON_DOC = """
    Parameters
    ----------
    epsilon : float > 0
        Target epsilon of the fit (``inf``: no noise, with a PrivacyLeakWarning).
    delta : float in (0, 1) or None
        Target delta; None means 1/n^2 (n = number of rows of this fit).
    bounds : None or (lower, upper)
        Public bounds, scalars or arrays of length n_features; NaN entries are
        estimated privately. Public features are not released.
    quantiles : (q_lo, q_hi)
        Quantile levels targeted by the private bounds (default (0.01, 0.99)).
    confidence : float
        Margin of the histogram scan, in noise standard deviations (default 4).
    random_state : None, int, Generator
        Source of the noise.
    accountant : dpopt.BudgetAccountant or None
        Charged with the fit (None: the enclosing ``with BudgetAccountant(...)``).

    Attributes
    ----------
    lower_, upper_ : per-feature bounds. bounds_ : the :class:`FeatureBounds`.
    output_bounds(), row_bound() : public bounds of the transformed data (for a solver).
    epsilon_spent_, delta_spent_, mechanisms_, adjacency_ : the privacy of the fit.
"""


class PrivateClipper(_PrivateTransformer):
    """Clip every feature to private bounds [lower_, upper_] (one histogram release).
    """

    def __init__(self, *, epsilon=1.0, delta=None, bounds=None, quantiles=DEFAULT_QUANTILES,
                 confidence=DEFAULT_CONFIDENCE, random_state=None, accountant=None):
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.quantiles = quantiles
        self.confidence = confidence
        self.random_state = random_state
        self.accountant = accountant

    def _estimate(self, X, public, quantiles, mu, rng):
        return self._bounds(X, public, quantiles, mu, rng)

    def _output_bounds(self):
        return self.lower_, self.upper_

    def transform(self, X):
        X = self._check_transform_input(X)
        return _clip_columns(X, self.lower_, self.upper_)


PrivateClipper.__doc__ += _COMMON_DOC


class PrivateMinMaxScaler(_PrivateTransformer):
    """Clip to private bounds, then map [lower_, upper_] affinely onto [0, 1].

    ``x -> (clip(x) - lower_) * scale_`` with ``scale_ = 1 / (upper_ - lower_)``
    (0 for a collapsed feature, lower_ == upper_: its output is the constant 0).
    A feature with ``lower_ == 0`` maps 0 to 0, so one-hot and sparse columns
    keep their zeros; sparse input stays sparse when every ``lower_`` is 0
    (otherwise it is densified).
    """

    def __init__(self, *, epsilon=1.0, delta=None, bounds=None, quantiles=DEFAULT_QUANTILES,
                 confidence=DEFAULT_CONFIDENCE, random_state=None, accountant=None):
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.quantiles = quantiles
        self.confidence = confidence
        self.random_state = random_state
        self.accountant = accountant

    def _estimate(self, X, public, quantiles, mu, rng):
        fitted, mechanisms = self._bounds(X, public, quantiles, mu, rng)
        width = fitted["upper_"] - fitted["lower_"]
        with np.errstate(divide="ignore"):
            fitted["scale_"] = np.where(width > 0, 1.0 / width, 0.0)
        return fitted, mechanisms

    def _output_bounds(self):
        return np.zeros_like(self.scale_), (self.scale_ > 0).astype(float)

    def transform(self, X):
        X = self._check_transform_input(X)
        clipped = _clip_columns(X, self.lower_, self.upper_)
        if sp.issparse(clipped):
            if np.all(self.lower_ == 0):
                return sp.csc_matrix(clipped @ sp.diags(self.scale_))
            clipped = clipped.toarray()
        return (clipped - self.lower_) * self.scale_


PrivateMinMaxScaler.__doc__ += _COMMON_DOC

class _ClipCenterScale(_PrivateTransformer):
    """Clip to the private bounds, subtract a private centre (when the flag named
    ``_centering`` is set; never on sparse data) and divide by a private scale."""

    _centering = ""  # the constructor flag that turns centring on
    _center_attr = ""  # the fitted centre

    def _center(self):
        return getattr(self, self._center_attr) if getattr(self, self._centering) else 0.0

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = not getattr(self, self._centering)
        return tags

    def _output_bounds(self):
        center = self._center()
        return (self.lower_ - center) / self.scale_, (self.upper_ - center) / self.scale_

    def transform(self, X):
        X = self._check_transform_input(X)
        clipped = _clip_columns(X, self.lower_, self.upper_)
        if sp.issparse(clipped):
            if getattr(self, self._centering):
                raise ValueError(f"X: cannot center sparse data; fit with "
                                 f"{self._centering}=False")
            return sp.csc_matrix(clipped @ sp.diags(1.0 / self.scale_))
        return (clipped - self._center()) / self.scale_


class PrivateStandardScaler(_ClipCenterScale):
    """Clip to private bounds, then standardise with a private mean and variance.

    Releases (replace-one, n public), with w_j = upper_j - lower_j and c_j the
    midpoint, over the features with w_j > 0:

    1. the bounds (:func:`private_feature_bounds`), mu_b = mu sqrt(bounds_share)
       (skipped, mu_b = 0, when all bounds are public);
    2. T1_j = sum_i (x_ij - c_j) / w_j + N(0, s1^2): each term lies in [-1/2, 1/2],
       so replacing a record moves T1 by at most 1 per feature, L2 sensitivity
       sqrt(p); s1 = sqrt(p) / mu_m;
    3. T2_j = sum_i ((x_ij - c_j) / w_j)^2 + N(0, s2^2): each term lies in [0, 1/4],
       L2 sensitivity sqrt(p) / 4; s2 = sqrt(p) / (4 mu_v);

    with mu_m = mu_v = sqrt((mu^2 - mu_b^2) / 2). mean_ = c + w T1 / n,
    var_ = w^2 (T2 / n - (T1 / n)^2), scale_ = sqrt(var_) floored at w / 1000
    (1 for collapsed features, whose output is 0 - mean_ = 0).
    """

    _centering, _center_attr = "with_mean", "mean_"

    def __init__(self, *, epsilon=1.0, delta=None, bounds=None, quantiles=DEFAULT_QUANTILES,
                 confidence=DEFAULT_CONFIDENCE, bounds_share=0.5, with_mean=True,
                 random_state=None, accountant=None):
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.quantiles = quantiles
        self.confidence = confidence
        self.bounds_share = bounds_share
        self.with_mean = with_mean
        self.random_state = random_state
        self.accountant = accountant

    def _check_extra_params(self):
        check_scalar(self.bounds_share, "bounds_share", low=0.0, high=1.0, low_open=True,
                     high_open=True)
        if not isinstance(self.with_mean, (bool, np.bool_)):
            raise ValueError(f"with_mean must be a bool, got {self.with_mean!r}")

    def _releases(self, public):
        return True

    def _estimate(self, X, public, quantiles, mu, rng):
        if sp.issparse(X) and self.with_mean:
            raise ValueError("X: cannot center sparse data (with_mean=True would densify it); "
                             "pass with_mean=False")
        share = self.bounds_share if super()._releases(public) else 0.0
        mu_b = mu * math.sqrt(share) if share > 0 else math.inf  # nothing released if 0
        fitted, mechanisms = self._bounds(X, public, quantiles, mu_b, rng)
        lower, upper = fitted["lower_"], fitted["upper_"]
        width, center = upper - lower, (upper + lower) / 2
        live = np.flatnonzero(width > 0)
        mean, var = center.copy(), np.zeros_like(center)
        if live.size:
            mu_k = mu * math.sqrt((1.0 - share) / 2.0)
            t1, t2, records = release_clipped_moments(X[:, live], lower[live], upper[live],
                                                      mu_k, rng)
            n, w = X.shape[0], width[live]
            mean[live] = center[live] + w * t1 / n
            var[live] = w ** 2 * (t2 / n - (t1 / n) ** 2)
            mechanisms = mechanisms + records
        scale = np.where(width > 0, np.sqrt(np.maximum(var, (width / 1000) ** 2)), 1.0)
        fitted.update(mean_=mean, var_=var, scale_=scale)
        return fitted, mechanisms


PrivateStandardScaler.__doc__ += _COMMON_DOC


class PrivateRobustScaler(_ClipCenterScale):
    """Clip to private bounds, then centre by a private median and scale by a private IQR.

    One release: the noisy histograms of every feature (sensitivity sqrt(2 p),
    whole mu; see :func:`private_feature_bounds`). Post-processing reads the
    bounds (confidence-margin scan) and the quartiles q25, q50, q75 (noisy
    cumulative counts, no margin, interpolated inside the bin). center_ = q50,
    scale_ = q75 - q25 (1 when it is not positive). Public ``bounds`` fix the
    clipping bounds but the quartiles are still released.
    """

    _centering, _center_attr = "with_centering", "center_"

    def __init__(self, *, epsilon=1.0, delta=None, bounds=None, quantiles=DEFAULT_QUANTILES,
                 confidence=DEFAULT_CONFIDENCE, with_centering=True, random_state=None,
                 accountant=None):
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.quantiles = quantiles
        self.confidence = confidence
        self.with_centering = with_centering
        self.random_state = random_state
        self.accountant = accountant

    def _check_extra_params(self):
        if not isinstance(self.with_centering, (bool, np.bool_)):
            raise ValueError(f"with_centering must be a bool, got {self.with_centering!r}")

    def _releases(self, public):
        return True

    def _estimate(self, X, public, quantiles, mu, rng):
        if sp.issparse(X) and self.with_centering:
            raise ValueError("X: cannot center sparse data; pass with_centering=False")
        n, p = X.shape
        noisy, sigma, record = release_histograms(X, np.arange(p), mu, rng)
        lower, upper, unresolved = histogram_bounds(noisy, sigma, n, quantiles, self.confidence)
        warn_unresolved(np.flatnonzero(unresolved & np.isnan(public[0] + public[1])), sigma, n)
        pub_lo, pub_hi = public
        lower = np.where(np.isnan(pub_lo), np.minimum(lower, np.nan_to_num(pub_hi, nan=np.inf)),
                         pub_lo)
        upper = np.where(np.isnan(pub_hi), np.maximum(upper, lower), pub_hi)
        q25, q50, q75 = (np.clip(histogram_quantiles(noisy, n, q), lower, upper)
                         for q in (0.25, 0.5, 0.75))
        iqr = q75 - q25
        fitted = {"lower_": lower, "upper_": upper, "center_": q50,
                  "scale_": np.where(iqr > 0, iqr, 1.0), "quartiles_": np.vstack([q25, q50, q75])}
        return fitted, [record]


PrivateRobustScaler.__doc__ += _COMMON_DOC


class PrivateTableEncoder(TransformerMixin, BaseEstimator):
    """The table layer as a scikit-learn transformer: ``fit`` runs its private partition
    selection (:func:`dpopt.preprocessing.table_encoder.release_table`: one Gaussian
    mechanism on the levels' and missing cells' counts plus the threshold's delta, under
    replace-one adjacency) at ``(epsilon, delta)``, charged to ``accountant`` (or the
    active budget) as one release; ``transform`` gives the float matrix (one-hot levels +
    ``<other>``, bool 0/1, numeric with NaN -> 0, missing indicators), post-processing.
    ``public_bounds_`` gives [0, 1] for every 0/1 column (pass it to an estimator's
    ``feature_bounds=``); ``get_feature_names_out()`` and ``set_output(transform="pandas")``
    behave as in scikit-learn. ``epsilon_spent_``, ``delta_spent_`` and ``mechanisms_``
    report the release (nothing when every column is public). ``delta=None`` is 1/n², as
    for the estimators. ``coding="reference"`` leaves out one level per categorical column,
    the best-populated by the released counts (and ``<other>``), for a design with an
    intercept whose coefficients are identified (scikit-learn's
    ``OneHotEncoder(drop=...)``; docs/tables.md).
    """

    def __init__(self, *, epsilon=1.0, delta=1e-6, categories=None, coding="one-hot",
                 random_state=None, accountant=None):
        self.epsilon = epsilon
        self.delta = delta
        self.categories = categories
        self.coding = coding
        self.random_state = random_state
        self.accountant = accountant

    def fit(self, X, y=None):
        with unchanged_on_failure(self):
            return self._fit(X)

    def _fit(self, X):
        epsilon, delta = check_privacy_target(self.epsilon, self.delta)
        df = checked_table(X, epsilon, self.coding)
        delta = default_delta(len(df)) if delta is None else delta
        name = type(self).__name__
        with charged(self.accountant, epsilon, delta, label=name) as slot:
            release = release_table(df, epsilon, delta, self.categories, self.coding,
                                    check_random_state(self.random_state))
            slot.record(Spend(name, release.epsilon, release.delta, "replace-one", "exact",
                              tuple(release.records)))
        self.schema_ = release.schema
        self.feature_names_in_, self.n_features_in_ = release.names, len(release.names)
        self.mechanisms_ = release.records
        self.epsilon_spent_, self.delta_spent_ = release.epsilon, release.delta
        self.adjacency_ = "replace-one"
        self.public_bounds_ = release.public_bounds
        return self

    def transform(self, X):
        check_is_fitted(self, "schema_")
        return self.schema_.transform(X)

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self, "schema_")
        return np.array(self.schema_.feature_names_out(), dtype=object)
