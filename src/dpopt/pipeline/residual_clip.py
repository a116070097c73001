"""The private clip of the least-squares meat's residuals (:mod:`dpopt.pipeline.inference`):
the sandwich's meat is released with noise calibrated to a bound on |residual|, and that
bound is itself released first, as a private quantile, from a share of the inference's mu."""

from __future__ import annotations

import numpy as np

from dpopt.preprocessing._bounds import DEFAULT_QUANTILES
from dpopt.privacy import private_quantile_from_counts, quantile_counts, quantile_edges

__all__ = ["RESIDUAL_BOUND", "RESIDUAL_CLIP_SHARE", "RESIDUAL_BINS", "residual_clip"]

#: Bound on |residual| used for the least-squares meat (targets are in [-1, 1]): the public
#: end of the residual-scale histogram, and the clip when its scan finds no quantile.
RESIDUAL_BOUND = 2.0
#: Share of the least-squares inference mu^2 for the private clip of the residuals
#: (:func:`residual_clip`); the meat gets the rest.
RESIDUAL_CLIP_SHARE = 0.25
#: Geometric bins of the residual-scale histogram, between RESIDUAL_BOUND * 1e-4 and
#: RESIDUAL_BOUND (4 decades, a bin ratio of 1.17).
RESIDUAL_BINS = 60


def residual_clip(r, mu_clip, mu_meat, rng):
    """(C, records): the clip of the least-squares meat's residuals, a private quantile of
    |r_i| at level 1 - min(1%, 1 / (n mu_meat)), mu_clip-GDP.

    Why. The meat's noise is calibrated to the clip (sensitivity sqrt(2) C^2 B_a^2): with the
    public C = 2 it is calibrated to the target's whole range, while the residuals of a
    model with signal are a fraction of it (0.1 after scaling in a y = x + N(0, 1) design
    with wide target bounds), so the released meat sat within its own noise and the
    Satterthwaite degrees of freedom were 1-15. Clipping |r| at C biases the meat by
    n E(r^2 - C^2)+ and its noise is about C^2 / mu_meat: the rule of
    :func:`dpopt.pipeline.scaling.inference_levels` (their sum is smallest where the tail is
    1 / (n mu)), applied to the meat's own release.

    Privacy. r_i is a function of record i and of the released (public) estimate; one
    noisy histogram of |r_i| on public geometric bins between RESIDUAL_BOUND * 1e-4 and
    RESIDUAL_BOUND (:func:`dpopt.privacy.private_quantile_from_counts`: replace-one moves one
    count out of a bin and one into another, L2 sensitivity sqrt(2), noise sqrt(2) / mu_clip
    per count): a mu_clip-GDP Gaussian mechanism. C is public after it and the meat's release
    at mu_meat is calibrated to it; mu_clip^2 + mu_meat^2 is the inference mu^2, so the
    accounting of the plan is unchanged. A scan that finds no quantile (too few rows for
    the budget) keeps RESIDUAL_BOUND."""
    n = r.size
    level = 1.0 - min(DEFAULT_QUANTILES[0], 1.0 / (n * mu_meat))  # inference_levels' rule
    lower = RESIDUAL_BOUND * 1e-4
    edges = quantile_edges(lower, RESIDUAL_BOUND, RESIDUAL_BINS)
    bound, info = private_quantile_from_counts(rng, quantile_counts(np.abs(r), edges), level,
                                               0.5 * mu_clip ** 2, lower=lower,
                                               upper=RESIDUAL_BOUND, bins=RESIDUAL_BINS)
    return (RESIDUAL_BOUND if bound <= lower else bound), list(info["gaussian_records"])
