"""The default path's high-dimensional route: private feature screening, then a small model.

When a classification problem has more features than a private full-dimensional fit can
use, :func:`dpopt.pipeline.default_path.fit_default` enters :func:`fit_screened`: one Gaussian release of
per-class sums of the row-normalized features gives noisy marginal scores of every
feature; the features whose score clears the noise's universal threshold (at most
:func:`dimension_limit` of them, the largest scores) are kept, and the default path runs
on those columns with the rest of the budget. The released model has p coefficients,
zero for the features not selected. With no feature selected the model is the constant
(majority-class) predictor, computed from the same release.

When (the rule, from public n, p, mu only)
------------------------------------------
A full-dimensional linear classifier on n records has an estimation error of order
sqrt(p / n) without privacy (the parametric rate) plus a privacy term of order
sqrt(p) / (n mu) for a mu-GDP fit with unit-norm rows and a 1-Lipschitz loss (the noisy
gradient / objective perturbation bounds of Bassily, Smith & Thakurta, FOCS 2014, in
Gaussian-DP units). Their sum exceeds the loss scale (1) when
``p > dimension_limit(n, mu) = 1 / (1 / sqrt(n) + 1 / (n mu))^2``: the full fit's
guarantee is then vacuous and the route is taken. The same limit (at the model's mu)
caps how many features are kept.

Mechanism and sensitivity (replace-one adjacency)
-------------------------------------------------
Rows are normalized, x -> x / ||x||_2 (a per-record map, free). The release is the vector
(S_+, S_-, n_+): the sums of the normalized rows of each class and the size of the
positive class, plus N(0, (2 / mu_sel)^2) noise on every entry. Replacing one record
(x, y) by (x', y'): if y = y', only S_y moves, by x' - x, of norm <= 2; if y != y',
S_y loses x and S_y' gains x' and n_+ moves by 1: norm sqrt(1 + 1 + 1) <= 2. So the L2
sensitivity is 2 and the release is the Gaussian mechanism with noise multiplier
1 / mu_sel, exactly mu_sel-GDP (Dong, Roth & Su 2022), recorded as ``Gaussian(1/mu_sel)``.
It composes with the rest of the default path in Gaussian-DP (mu^2 adds), and objective
perturbation calibrates against it through ``prior_mu``: the whole fit is one
composition of the target (epsilon, delta).

Post-processing (free): with ybar = 2 n_+ / n - 1, the marginal score of feature j is
c_j = (1 - ybar) S_+j - (1 + ybar) S_-j = sum_i (y_i - ybar) x_ij (the empirical
covariance of feature and label, times 2n: sure independence screening, Fan & Lv, JRSS-B
2008). Its noise has the same standard deviation s = sigma sqrt((1 - ybar)^2 + (1 + ybar)^2)
for every j, so the features are ranked by |c_j| and kept when |c_j| > s sqrt(2 log p),
the universal threshold (Donoho & Johnstone, Biometrika 1994) above which no pure-noise
score rises, with probability tending to 1 as p grows: the screen keeps no feature when
the data carry no signal the budget can see.

Why the Gaussian release rather than a peeling exponential mechanism (report-noisy-top-k,
Durfee & Rogers, NeurIPS 2019): it is one Gaussian mechanism, so the composition with the
rest of the path stays exact in Gaussian-DP (and inside objective perturbation's
``prior_mu``), and the number of kept features is chosen after the release, at no cost.
Its price is the row normalization: a score's signal shrinks with the row norm, where a
top-k exponential mechanism with per-score sensitivity pays sqrt(k) log p instead.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from dpopt.data.sources import is_chunked_input
from dpopt.pipeline.autofit import constant_fit
from dpopt.pipeline.default_path import (
    ColumnWarning,
    RowNormalization,
    dimension_limit,
    fit_default,
    high_dimensional,
    warn_columns,
)
from dpopt.pipeline.scaling import COLUMN_NOTES
from dpopt.preprocessing.feature_maps import normalize_rows
from dpopt.preprocessing.labels import LABELS_COUNTED
from dpopt.privacy import Gaussian, epsilon_of, gdp_mu
from dpopt.privacy.releases import begin

__all__ = ["dimension_limit", "high_dimensional", "release_class_sums", "marginal_scores",
           "select_features", "SelectedScaling", "fit_screened", "fit_routed", "SELECTION_SHARE",
           "SCORE_SENSITIVITY"]

#: Share of mu^2 (Gaussian-DP) that the screening release takes; the model gets the rest.
#: The two stages' errors both scale as 1 / mu, so neither is favoured.
SELECTION_SHARE = 0.5
#: L2 sensitivity of the released (S_+, S_-, n_+) under replace-one (module docstring).
SCORE_SENSITIVITY = 2.0


def _normalized_rows(X):
    return normalize_rows(sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X, float))


def class_sums(X, y):
    """Exact (S_+, S_-, n_+) of the row-normalized X (not private)."""
    Z = _normalized_rows(X)
    pos = np.asarray(y) > 0
    s_pos = np.asarray(Z[pos].sum(axis=0)).ravel()
    s_neg = np.asarray(Z[~pos].sum(axis=0)).ravel()
    return np.concatenate([s_pos, s_neg, [float(pos.sum())]])


def release_class_sums(X, y, mu, rng):
    """The Gaussian release (module docstring): noisy (S_+, S_-, n_+), its noise std and
    its record. ``y`` in {-1, +1}; L2 sensitivity :data:`SCORE_SENSITIVITY`."""
    exact = class_sums(X, y)
    sigma = SCORE_SENSITIVITY / mu
    return exact + rng.standard_normal(exact.size) * sigma, sigma, Gaussian(1.0 / mu, 1)


def marginal_scores(noisy, sigma, n):
    """(c, s, positive_rate): the noisy marginal scores c_j, the standard deviation s of
    their noise, and the noisy share of the positive class (post-processing)."""
    p = (noisy.size - 1) // 2
    s_pos, s_neg, n_pos = noisy[:p], noisy[p:2 * p], noisy[-1]
    rate = float(np.clip(n_pos / n, 0.5 / n, 1.0 - 0.5 / n))
    ybar = 2.0 * rate - 1.0
    scores = (1.0 - ybar) * s_pos - (1.0 + ybar) * s_neg
    return scores, sigma * math.hypot(1.0 - ybar, 1.0 + ybar), rate


def select_features(scores, noise_std, k_max):
    """Indices (increasing) of the features whose |score| exceeds the universal threshold
    noise_std sqrt(2 log p), at most ``k_max`` of them (the largest |score|)."""
    p = scores.size
    threshold = noise_std * math.sqrt(2.0 * math.log(max(p, 2)))
    above = np.flatnonzero(np.abs(scores) > threshold)
    if above.size > k_max:
        above = above[np.argsort(-np.abs(scores[above]), kind="stable")[:k_max]]
    return np.sort(above)


@dataclass(frozen=True)
class SelectedScaling:
    """The feature map of a model fitted on ``columns`` of p features: the inner map
    (:class:`~dpopt.preprocessing.feature_maps.Scaling` or
    :class:`~dpopt.preprocessing.feature_maps.RowNormalization`) applied to those columns;
    coefficients are 0 on every other feature."""

    inner: object
    columns: np.ndarray
    n_features: int

    @property
    def lower(self):
        """Bounds of the kept columns; [0, 0] for the others (the model does not use them)."""
        return None if self.inner.lower is None else self.embed(self.inner.lower)

    @property
    def upper(self):
        return None if self.inner.upper is None else self.embed(self.inner.upper)

    def _embedding(self):
        k = self.columns.size
        return sp.csr_matrix((np.ones(k), (np.arange(k), self.columns)),
                             shape=(k, self.n_features))

    def _columns_of(self, X):
        return sp.csc_matrix(X)[:, self.columns] if sp.issparse(X) else np.asarray(X)[:, self.columns]

    def transform(self, X):
        if self.columns.size == 0:
            return sp.csc_matrix((X.shape[0], 0))
        return self.inner.transform(self._columns_of(X))

    def prepare(self, X):
        """The p features ``coef_`` applies to: the selected columns mapped by the inner
        map, every other column 0."""
        if self.columns.size == 0:
            return sp.csc_matrix((X.shape[0], self.n_features))
        Z = self.inner.prepare(self._columns_of(X)) @ self._embedding()
        return sp.csc_matrix(Z) if sp.issparse(Z) else np.asarray(Z)

    def to_dict(self):
        out = dict(self.inner.to_dict())
        if out["type"] == "clip":
            out["lower"], out["upper"] = self.lower.tolist(), self.upper.tolist()
        else:
            out["columns"] = self.columns.tolist()
        return out

    def embed(self, values):
        """A length-p vector: ``values`` on the selected columns, 0 elsewhere."""
        out = np.zeros(self.n_features)
        out[self.columns] = values
        return out

    def unscale(self, coef, intercept):
        """Raw coefficients of a p-vector ``coef`` (0 off the selected columns)."""
        coef = np.asarray(coef, dtype=np.float64)
        if self.columns.size == 0:
            return np.zeros(self.n_features), float(intercept)
        raw, b = self.inner.unscale(coef[self.columns], intercept)
        return self.embed(raw), b


def _constant_fit(p, rate, fit_intercept, records, delta, plan, prior_delta=0.0):
    """The majority-class model from the released positive share (post-processing): the
    logit of the share as intercept (0 without an intercept), every coefficient 0.
    ``prior_delta``: the part of ``delta`` the table layer's thresholds spent."""
    b = math.log(rate / (1.0 - rate)) if fit_intercept else 0.0
    return constant_fit(p, fit_intercept, b, mechanisms=list(records),
                        epsilon=epsilon_of(records, delta - prior_delta), delta=delta,
                        accountant="exact",
                        plan=plan, scaling=SelectedScaling(RowNormalization(),
                                                           np.zeros(0, dtype=int), p),
                        noise_multiplier=records[0].noise_multiplier)


def fit_screened(X, y, *, loss, penalty, penalty_kwargs, fit_intercept, epsilon, delta, rng,
                 prior=None, spent_mu=0.0):
    """The route (module docstring): screen with ``SELECTION_SHARE`` of mu^2, then
    ``fit_default`` on the kept columns with the rest (``spent_mu`` tells it what was
    spent), or the constant model when none is kept. Returns an :class:`dpopt.pipeline.autofit.AutoFit`
    whose result holds the whole composition. ``prior``: the declared classes' noisy counts
    (:func:`screenable`), whose share of mu^2 and delta come first, as in ``fit_default``;
    ``spent_mu``: what a later release of the same fit keeps out (sum of mu^2)."""

    n, p = X.shape
    prior_delta = prior.delta if prior is not None else 0.0
    mu = gdp_mu(epsilon, delta - prior_delta)
    mu_left = math.sqrt(max(mu ** 2 * (1.0 - (prior.share if prior is not None else 0.0))
                            - spent_mu ** 2, 0.0))
    mu_sel = mu_left * math.sqrt(SELECTION_SHARE)
    mu_model = math.sqrt(mu_left ** 2 - mu_sel ** 2)
    begin()  # the screen, the route's first release (dpopt.privacy.releases)
    noisy, sigma, record = release_class_sums(X, y, mu_sel, rng)
    scores, noise_std, rate = marginal_scores(noisy, sigma, n)
    k_max = max(1, int(dimension_limit(n, mu_model)))
    columns = select_features(scores, noise_std, k_max)
    selection = {"mu": mu_sel, "n_selected": int(columns.size), "k_max": k_max,
                 "threshold": noise_std * math.sqrt(2.0 * math.log(max(p, 2))),
                 "columns": columns.tolist() if columns.size <= 50 else f"{columns.size} columns",
                 "rule": f"p={p} > dimension_limit(n={n}, mu={mu:.3g}) = "
                         f"{dimension_limit(n, mu):.0f}",
                 "class_rate": rate, "class_rate_sigma": sigma / n}
    if columns.size == 0:  # spent: the screen and the table layer's releases (its share)
        shares = {"feature_selection": mu_sel,
                  **({"selection": mu * math.sqrt(prior.share)} if prior and prior.share else {})}
        plan = {"solver": "none", "reason": "high-dimensional route: no feature's noisy marginal "
                "score cleared the universal threshold; the model is the majority-class "
                "constant from the released class share", "mu": math.hypot(*shares.values()),
                "mu_shares": shares, "scaling": "none",
                "row_bound": None, "model_options": {}, "screen": selection}
        if prior is not None:
            plan["table"], plan["selection_delta"] = prior.info, prior.delta
        return _constant_fit(p, rate, fit_intercept, [*(prior.records if prior else ()), record],
                             delta, plan, prior_delta)
    Xs = X[:, columns] if not sp.issparse(X) else sp.csc_matrix(X)[:, columns]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inner = fit_default(Xs, y, loss=loss, penalty=penalty, penalty_kwargs=penalty_kwargs,
                            fit_intercept=fit_intercept, epsilon=epsilon, delta=delta, rng=rng,
                            regression=False, spent_mu=math.hypot(spent_mu, mu_sel),
                            prior=prior)
    for w in caught:  # column warnings are re-issued below, in the original indices
        if not issubclass(w.category, ColumnWarning):
            warnings.warn(w.message, w.category, stacklevel=3)
    for key in COLUMN_NOTES:
        if key in inner.plan:
            inner.plan[key] = columns[inner.plan[key]].tolist()
    warn_columns(inner.plan, stacklevel=4)
    scaling = SelectedScaling(inner.scaling, columns, p)
    own = list(inner.result.mechanisms)  # the prior's first, as the inner fit lists them
    first = len(prior.records) if prior is not None else 0
    mechanisms = own[:first] + [record] + own[first:]
    total = epsilon_of(mechanisms, delta - prior_delta, adjacency=inner.result.adjacency)
    plan = {**inner.plan, "mu": mu, "mu_shares": {"feature_selection": mu_sel,
                                                  **inner.plan["mu_shares"]},
            "screen": selection}
    r = inner.result
    coef = scaling.embed(r.coef)  # p coefficients on the scaled domain, 0 where not kept
    result = replace(r, coef=coef, w=np.concatenate([coef, r.w[columns.size:]]), epsilon=total,
                     mechanisms=mechanisms, params={**r.params, "auto": plan})
    return replace(inner, result=result, scaling=scaling, plan=plan)


def fit_routed(X, y, *, loss, penalty, penalty_kwargs, fit_intercept, epsilon, delta, rng,
               regression=False, feature_bounds=None, prior=None, inference=False,
               constant_only=False, spent_mu=0.0, target_bounds=None):
    """The default path (:func:`dpopt.pipeline.default_path.fit_default`), through the
    screening route (:func:`fit_screened`) when the problem is a classification in memory
    with more features than a private full-dimensional fit can use (:func:`high_dimensional`,
    from public n, p and mu only). Same arguments and result as ``fit_default``. The route
    is not taken after releases of the table layer that select labels or categories, whose
    budget its screen would need (declare the labels with ``classes=`` to use it; their
    noisy counts, :func:`screenable`, come first), nor with public ``feature_bounds``.
    ``spent_mu``: a release of the same fit kept out of this one (the in-sample check's share,
    :mod:`dpopt.pipeline.in_sample`); the route's screen and model share what it leaves."""
    chunked = getattr(X, "is_chunked", False) is True or is_chunked_input(X)
    if (not (regression or chunked or inference) and screenable(prior)
            and feature_bounds is None
            and high_dimensional(*X.shape, gdp_mu(epsilon, delta))):
        return fit_screened(X, y, loss=loss, penalty=penalty, penalty_kwargs=penalty_kwargs,
                            fit_intercept=fit_intercept, epsilon=epsilon, delta=delta, rng=rng,
                            prior=prior, spent_mu=spent_mu)
    return fit_default(X, y, loss=loss, penalty=penalty, penalty_kwargs=penalty_kwargs,
                       fit_intercept=fit_intercept, epsilon=epsilon, delta=delta, rng=rng,
                       regression=regression, feature_bounds=feature_bounds, prior=prior,
                       inference=inference, constant_only=constant_only, spent_mu=spent_mu,
                       target_bounds=target_bounds)


def screenable(prior):
    """Whether the screening route runs after the table layer's releases ``prior``: none, or
    only the declared classes' noisy counts (a public label set; the counts name the
    majority over all n records, the records of neither class included, which the screen's
    class share cannot)."""
    return prior is None or (prior.info.get("column_share", 0.0) == 0.0
                             and prior.info.get("labels") == LABELS_COUNTED)
