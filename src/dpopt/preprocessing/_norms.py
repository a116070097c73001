"""The default path's private releases of column means and of the row-norm bound, shared by
the in-memory data (:mod:`dpopt.pipeline.default_path`) and the chunks
(:mod:`dpopt.pipeline.chunked`): both count or sum exactly, then release through these.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.data.statistics import row_sq_norms
from dpopt.privacy import Gaussian, private_quantile_from_counts, quantile_counts, quantile_edges

#: Level of the private quantile of the scaled rows' norms (the row bound R).
ROW_NORM_QUANTILE = 0.95
#: Geometric bins of the row-norm histogram (between min(1e-3, sqrt(p) / 2) and sqrt(p)).
ROW_NORM_BINS = 60



def private_means(Xs, mu, rng):
    """Noisy column means of features scaled into [0, 1] (:func:`noisy_means` of the
    column sums)."""
    return noisy_means(np.asarray(Xs.sum(axis=0)).ravel(), Xs.shape[0], mu, rng)


def noisy_means(sums, n, mu, rng):
    """Noisy column means from the exact column sums of n rows scaled into [0, 1] (summed
    in memory or over chunks): each column sum moves by at most 1 when one record is
    replaced, so the p sums have L2 sensitivity sqrt(p); N(0, p / mu^2) noise on each makes
    one Gaussian mechanism of multiplier 1/mu."""
    p = len(sums)
    noisy = sums + rng.standard_normal(p) * (math.sqrt(p) / mu)  # means' sd: mean_noise
    return np.clip(noisy / n, 0.0, 1.0), [Gaussian(1.0 / mu, 1)]


def mean_noise(n, p, mu):
    """The standard deviation sqrt(p) / (n mu) of each mean of :func:`noisy_means` (public)."""
    return math.sqrt(p) / (n * mu)


def noisy_target_mean(total, n, mu, rng):
    """The mean of n targets scaled into [-1, 1] from their exact sum: replacing one record
    moves the sum by at most 2, so N(0, (2 / mu)^2) noise on it is mu-GDP; clipped to
    [-1, 1] (post-processing). Returns (mean, records)."""
    noisy = (total + (2.0 / mu) * rng.standard_normal()) / n
    return float(np.clip(noisy, -1.0, 1.0)), [Gaussian(1.0 / mu, 1)]


def row_norms(X):
    return np.sqrt(row_sq_norms(X))


def private_row_bound(X_scaled, mu, rng, quantile=ROW_NORM_QUANTILE):
    """R: private ``quantile`` (default ROW_NORM_QUANTILE) of the scaled rows' norms, capped
    at the domain bound sqrt(p) (every scaled feature is in [-1, 1]), and equal to it when
    the noisy scan finds no quantile (too few rows for the budget). One noisy histogram of
    sensitivity sqrt(2) (replace-one): a Gaussian mechanism of multiplier 1/mu, whatever the
    (public) level."""
    p = X_scaled.shape[1]
    return row_bound_from_counts(quantile_counts(row_norms(X_scaled), row_norm_edges(p)), p,
                                 mu, rng, quantile)


def _row_norm_range(p):
    """(lower, upper) of the row-norm histogram: public, from p only; the upper end is the
    domain bound sqrt(p) of p scaled features."""
    cap = math.sqrt(p)
    return min(1e-3, cap / 2), cap


def row_norm_edges(p):
    """The public edges of the row-norm histogram (:data:`ROW_NORM_BINS` geometric bins)."""
    return quantile_edges(*_row_norm_range(p), ROW_NORM_BINS)


def row_bound_from_counts(counts, p, mu, rng, quantile=ROW_NORM_QUANTILE):
    """:func:`private_row_bound` from the exact counts of the scaled rows' norms on
    :func:`row_norm_edges` (counted in memory or summed over chunks)."""
    lower, cap = _row_norm_range(p)
    rho = 0.5 * mu ** 2  # private_quantile's rho-zCDP histogram is sqrt(2 rho)-GDP
    r, info = private_quantile_from_counts(rng, counts, quantile, rho, lower=lower,
                                           upper=cap, bins=ROW_NORM_BINS)
    # a scan that never stopped (too few rows for this budget) says nothing: use the domain
    return (cap if r <= lower else r), list(info["gaussian_records"])
