"""The releases of the private transformers (:mod:`dpopt.api.transformers`, whose ``fit``
is charged to a budget in the api layer): clipping columns to public or released bounds,
and the noisy clipped moments of the standard scaler; plus the public one-hot encoder."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import OneHotEncoder

from dpopt.preprocessing.feature_maps import clip_sparse
from dpopt.privacy.accounting import Gaussian
from dpopt.privacy.mechanisms import gaussian_noise

__all__ = ["public_one_hot_encoder", "release_clipped_moments"]


def _clip_columns(X, lower, upper):
    """Clip every column to [lower_j, upper_j]; sparse input stays sparse when every
    interval contains 0 (the implicit zeros are unchanged), else it is densified."""
    if sp.issparse(X):
        if np.all((lower <= 0) & (upper >= 0)):
            return clip_sparse(X, lower, upper)
        X = X.toarray()
    return np.clip(X, lower, upper)

def release_clipped_moments(X, lower, upper, mu, rng):
    """Noisy normalised first and second moments of X clipped to [lower, upper].

    With c = (lower + upper) / 2 and w = upper - lower > 0 (public, per column):
    T1_j = sum_i (x_ij - c_j) / w_j + N(0, (sqrt(p) / mu)^2) and
    T2_j = sum_i ((x_ij - c_j) / w_j)^2 + N(0, (sqrt(p) / (4 mu))^2).
    Replace-one: each clipped term of T1 lies in [-1/2, 1/2] and of T2 in
    [0, 1/4], so one record moves T1 by at most 1 and T2 by at most 1/4 per
    column: L2 sensitivities sqrt(p) and sqrt(p) / 4. Each release has noise
    multiplier 1 / mu: recorded as ``Gaussian(1 / mu, 2)`` (sqrt(2) mu GDP).
    Returns (T1, T2, records); mu = inf adds no noise (``Gaussian(0, 2)``).
    """
    lower, upper = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    if np.any(upper <= lower):
        raise ValueError("release_clipped_moments needs upper > lower for every column")
    clipped = _clip_columns(X, lower, upper)
    n, p = X.shape
    if sp.issparse(clipped):
        s1 = np.asarray(clipped.sum(axis=0)).ravel()
        s2 = np.asarray(clipped.multiply(clipped).sum(axis=0)).ravel()
    else:
        s1, s2 = clipped.sum(axis=0), (clipped ** 2).sum(axis=0)
    c, w = (upper + lower) / 2, upper - lower
    t1 = (s1 - n * c) / w
    t2 = (s2 - 2 * c * s1 + n * c ** 2) / w ** 2
    if math.isinf(mu):
        return t1, t2, [Gaussian(0.0, 2)]
    t1 = t1 + gaussian_noise(rng, math.sqrt(p) / mu, p)
    t2 = t2 + gaussian_noise(rng, math.sqrt(p) / 4 / mu, p)
    return t1, t2, [Gaussian(1.0 / mu, 2)]

def public_one_hot_encoder(categories, **kwargs):
    """A scikit-learn ``OneHotEncoder`` with the categories given as public schema.

    ``categories``: one list of categories per column (the schema, known
    without looking at the private data). Categories read from the data
    (``categories="auto"``) would reveal which values occur, e.g. a rare
    category present only because of one person: that is not covered by any
    dpopt guarantee. Unknown categories encode as all zeros. The output lies
    in [0, 1]: pass public bounds (0, 1) for these columns, never estimate them.
    """
    if isinstance(categories, str) or not all(
            isinstance(c, (list, tuple, np.ndarray)) for c in categories):
        raise ValueError("categories must be a list with one list of categories per column "
                         "(the public schema), not 'auto'")
    kwargs.setdefault("handle_unknown", "ignore")
    return OneHotEncoder(categories=[list(c) for c in categories], **kwargs)
