"""A second look at the target's range where its first histogram does not locate it
(:func:`target_second_look`).

The bounds' histograms are on a public signed log grid (:mod:`dpopt.preprocessing._bounds`).
A variable near 40 with a spread of 4 fills two of its bins; one near 0 with the same spread
splits its records between the two signs and spreads each half over about eight bins (0.1
to 10), so at a small share no bin clears the scans' thresholds and the range is unresolved.
An unresolved target made the training branch release a mean of y instead of any model.
(An unresolved feature is clipped to the public [-1, 1] whatever its scale; the same second
look for the features, released for the unresolved columns only, was measured and not kept:
docs/default_path.md.)

Mechanism. y's histogram is released once more on the same grid, sensitivity sqrt(2) under
replace-one (one record leaves one bin and enters another), N(0, 2 / mu_2^2) per count, one
``Gaussian(1 / mu_2)`` record, and pooled with the first release bin by bin with weights
1 / sigma_k^2 (post-processing: the release at sqrt(mu_1^2 + mu_2^2)) before the bounds'
scans read it again (its ends are the scans' own: no far end is confirmed by a fresh count,
as the first look's are). Whether it runs depends on the first release, and mu_2 comes out of
the model's share (:func:`~dpopt.pipeline.target_looks.from_model`), so both branches spend
the plan's mu^2: fully adaptive composition of Gaussian mechanisms (Smith & Thakurta 2022).
Hence only ahead of a Gaussian model (objective perturbation is calibrated against a
scaling mu that must not depend on the data).

mu_2 (:func:`second_look_mu`) is a function of public sizes only.
"""

from __future__ import annotations

import math

from dpopt.pipeline.target_looks import from_model, spares
from dpopt.preprocessing._bounds import DEFAULT_QUANTILES, histogram_bounds, resolvable_n_mu
from dpopt.preprocessing._refine import pooled_counts

__all__ = ["second_look_mu", "target_second_look"]


def second_look_mu(n, first, model, least=0.0):
    """mu_2 of :func:`target_second_look` from public (n, the first look's mu, the model's
    mu), or None. It brings the pooled look to n mu = 2
    :func:`~dpopt.preprocessing._bounds.resolvable_n_mu` (1): the public rule asks
    ``resolvable_n_mu`` for a variable whose records fill one decade of one sign, and one
    centred near 0 puts half of them on each side. At least ``first`` (the pooled release
    then has twice the first's mu^2, the doubling of the constant's own looks,
    :data:`dpopt.pipeline.mean_of_y.LOOKS`), and None where mu_2^2 is more than half of
    the ``model``'s mu^2 (a model left with less loses more to its noise than the range
    gains) or where it would leave the model less than ``least`` (the smallest usable
    epsilon's mu at the fit's delta: the look must not turn a fit into a refused one)."""
    need = 2.0 * resolvable_n_mu(1) / n
    mu = max(first, math.sqrt(max(need ** 2 - first ** 2, 0.0)))
    return mu if spares(model, mu, least) else None


def target_second_look(data, tb, mus, rng, q_kw=None, least_model_mu=0.0):
    """(lower, upper, noisy counts, sigma, records): y's range read again where its first
    histogram ``tb`` did not resolve (module docstring), (0, 0) where it still does not
    or where the model cannot spare mu_2 (no release then: :func:`second_look_mu` with
    ``least_model_mu``); ``mus`` gets ``target_second_look``."""
    n = data.shape[0]
    mu = second_look_mu(n, mus["target_bounds"], mus["model"], least_model_mu)
    if mu is None:
        return 0.0, 0.0, tb.noisy_counts, tb.sigma, []
    from_model(mus, "target_second_look", mu)
    again = data.target_bounds(mu, rng, **(q_kw or {}))
    noisy, sigma = pooled_counts(tb, again)
    quantiles = (q_kw or {}).get("quantiles", DEFAULT_QUANTILES)
    lo, hi, unresolved = histogram_bounds(noisy, sigma, n, quantiles, grid=tb.grid)
    lo, hi = (0.0, 0.0) if unresolved[0] else (float(lo[0]), float(hi[0]))
    return lo, hi, noisy, sigma, list(again.mechanisms)
