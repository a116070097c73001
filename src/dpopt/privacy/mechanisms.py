"""Noise mechanisms. Each function states the sensitivity it assumes.

The caller passes the noise scale already multiplied by the sensitivity
(sigma = z * Delta); these helpers only draw, so that every draw comes from
the solver's ``numpy.random.Generator`` (invariant 6).
"""

from __future__ import annotations

import numpy as np


def gaussian_noise(rng: np.random.Generator, sigma, size=None):
    """N(0, sigma^2) noise; with sigma = z * Delta (L2 sensitivity) this is the
    Gaussian mechanism accounted by :class:`dpopt.privacy.Gaussian` (z)."""
    return rng.normal(0.0, 1.0, size) * sigma


def laplace_noise(rng: np.random.Generator, scale, size=None):
    """Laplace(0, scale) noise; scale = b * Delta_1 gives :class:`dpopt.privacy.Laplace` (b)."""
    return rng.laplace(0.0, 1.0, size) * scale
