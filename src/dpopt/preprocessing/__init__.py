"""Private preprocessing: data bounds and scaling estimated under differential privacy.

Function-level core (budgeted in Gaussian-DP ``mu``, composing exactly with the
solvers' Gaussian mechanisms: ``mu_total^2 = sum_k mu_k^2``):

* :func:`private_feature_bounds` -- per-feature (lower, upper) from one Gaussian
  release of noisy histograms on a public grid (L2 sensitivity ``sqrt(2 p)``);
* :func:`private_target_bounds` -- the same for a 1-d target (sensitivity ``sqrt(2)``).

scikit-learn transformers (each with ``epsilon``, ``delta``, ``bounds``,
``random_state``, ``accountant``): :class:`PrivateClipper`,
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
from dpopt.preprocessing._transformers import (
    PrivateClipper,
    PrivateMinMaxScaler,
    PrivateRobustScaler,
    PrivateStandardScaler,
    public_one_hot_encoder,
    release_clipped_moments,
)

__all__ = [
    "DEFAULT_BIN_CONFIDENCE", "DEFAULT_CONFIDENCE", "DEFAULT_GRID", "DEFAULT_QUANTILES",
    "FeatureBounds", "SignedLogGrid", "feature_histograms",
    "histogram_bounds", "histogram_quantiles", "private_feature_bounds", "private_target_bounds",
    "private_bounds_from_counts", "release_counts", "release_histograms", "PrivateClipper",
    "PrivateMinMaxScaler", "PrivateRobustScaler", "PrivateStandardScaler",
    "public_one_hot_encoder", "release_clipped_moments",
]
