"""Private preprocessing: data bounds and scaling estimated under differential privacy.

Function-level core (budgeted in Gaussian-DP ``mu``, composing exactly with the
solvers' Gaussian mechanisms: ``mu_total^2 = sum_k mu_k^2``):

* :func:`private_feature_bounds` -- per-feature (lower, upper) from one Gaussian
  release of noisy histograms on a public grid (L2 sensitivity ``sqrt(2 p)``);
* :func:`private_target_bounds` -- the same for a 1-d target (sensitivity ``sqrt(2)``).

scikit-learn transformers (in :mod:`dpopt.api.transformers`, importable from here; each
with ``epsilon``, ``delta``, ``bounds``, ``random_state``, ``accountant``): :class:`PrivateClipper`,
:class:`PrivateMinMaxScaler`, :class:`PrivateStandardScaler`,
:class:`PrivateRobustScaler`; categorical columns: :func:`public_one_hot_encoder`.
See docs/preprocessing.md.
"""

from dpopt.preprocessing._bounds import (
    DEFAULT_BIN_CONFIDENCE,
    DEFAULT_CONFIDENCE,
    DEFAULT_GRID,
    DEFAULT_QUANTILES,
    FeatureBounds,
    SignedLogGrid,
    feature_histograms,
    histogram_bounds,
    histogram_quantiles,
    private_bounds_from_counts,
    private_feature_bounds,
    private_target_bounds,
    release_counts,
    release_histograms,
)
from dpopt.preprocessing._transformers import public_one_hot_encoder, release_clipped_moments

#: The private transformers are public estimators charged to a budget, so they live in the
#: api layer (:mod:`dpopt.api.transformers`); their old import path still works.
_IN_API = ("PrivateClipper", "PrivateMinMaxScaler", "PrivateRobustScaler",
           "PrivateStandardScaler")


def __getattr__(name):
    if name in _IN_API:
        # lazy: a compatibility alias of a class in the api layer (above this one), resolved
        # on first use so that preprocessing never imports api
        import importlib

        return getattr(importlib.import_module("dpopt.api.transformers"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "DEFAULT_BIN_CONFIDENCE", "DEFAULT_CONFIDENCE", "DEFAULT_GRID", "DEFAULT_QUANTILES",
    "FeatureBounds", "SignedLogGrid", "feature_histograms",
    "histogram_bounds", "histogram_quantiles", "private_feature_bounds", "private_target_bounds",
    "private_bounds_from_counts", "release_counts", "release_histograms", "PrivateClipper",
    "PrivateMinMaxScaler", "PrivateRobustScaler", "PrivateStandardScaler",
    "public_one_hot_encoder", "release_clipped_moments",
]
