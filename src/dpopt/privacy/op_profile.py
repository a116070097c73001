"""The privacy profile of objective perturbation (:class:`~dpopt.privacy.events.ObjectivePerturbation`):
its privacy loss is Y = shift + m^2/2 + m R with R ~ chi_dof (Redberg, Koskela & Wang,
NeurIPS 2023), composed with a Gaussian part of parameter mu as a one-dimensional integral
(a certified upper Riemann sum), or handed to dp-accounting as a PLD or an RDP curve. Used
by :mod:`dpopt.privacy.accounting`; nothing here draws noise.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pldlib
from scipy import optimize, special

_OP_RMAX = 45.0  # P(R > 45) < 1e-439: below every representable delta
_OP_GRID = 45001  # Riemann step 1e-3: relative error ~ 1e-3 * r* of delta (r* ~ 6 at 1e-9)
_OP_PLD_RMAX = 12.0  # PLD support; the mass beyond (< 1e-31) goes to infinity (pessimistic)


def _chi_sf(r, dof):
    """P(R > r) for R ~ chi_1 (|N(0, 1)|) or chi_2 (Rayleigh), r >= 0."""
    r = np.asarray(r, dtype=np.float64)
    return 2.0 * special.ndtr(-r) if dof == 1 else np.exp(-0.5 * r * r)


def _gdp_delta_any(x, mu):
    """E[(1 - e^(x - G))_+], G ~ N(mu^2/2, mu^2), for every real x (vectorised);
    mu = 0 gives (1 - e^x)_+."""
    x = np.asarray(x, dtype=np.float64)
    if mu == 0:
        return -np.expm1(np.minimum(x, 0.0))
    log_a = special.log_ndtr(-x / mu + mu / 2)
    log_b = np.minimum(x + special.log_ndtr(-x / mu - mu / 2), log_a)  # b <= a exactly
    return np.maximum(np.exp(log_a) - np.exp(log_b), 0.0)


@functools.lru_cache(maxsize=2)
def _op_grid(dof):
    """The Riemann grid on [0, RMAX], P(R > r) on it and the mass of each cell."""
    r = np.linspace(0.0, _OP_RMAX, _OP_GRID)
    sf = _chi_sf(r, dof)
    return r, sf, sf[:-1] - sf[1:]


def _op_delta_bounds(epsilon, op, mu):
    """Lower and upper Riemann sums of delta(eps) = E_R[g(R)] for ``op`` (count 1)
    composed with mu-GDP: g(r) = delta_mu(eps - shift - m^2/2 - m r) is non-decreasing
    in r, so the sums over [0, RMAX] bracket the integral (the mass beyond RMAX is
    added to the upper sum with g <= 1)."""
    m = 0.0 if math.isinf(op.noise_multiplier) else 1.0 / op.noise_multiplier
    r, sf, mass = _op_grid(op.dof)
    g = _gdp_delta_any(epsilon - op.shift - 0.5 * m * m - m * r, mu)
    upper = float(np.dot(mass, g[1:]) + sf[-1]) * (1.0 + 1e-9)  # + round-off of the sum
    lower = float(np.dot(mass, g[:-1]))
    return lower, min(upper, 1.0)


def objective_perturbation_delta(epsilon, op, gaussian_mu=0.0) -> float:
    """Certified upper bound on delta(epsilon) of one :class:`ObjectivePerturbation`
    (count 1) composed with a ``gaussian_mu``-GDP composition of Gaussians."""
    return _op_delta_bounds(float(epsilon), op, float(gaussian_mu))[1]


@functools.lru_cache(maxsize=64)
def _op_exact_epsilon(op, mu, delta) -> float:
    """Smallest epsilon >= 0 whose certified delta bound is <= delta (count 1). A pure
    function of its (public, hashable) arguments, so remembered: a default fit asks it for
    the same composition twice (the mechanism's result and the pipeline's total)."""
    if op.count != 1:
        raise ValueError("the exact accountant handles one objective perturbation (count 1)")

    def excess(e):
        return objective_perturbation_delta(e, op, mu) - delta

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        if hi > 1e307:
            return math.inf
        hi *= 2.0
    eps = optimize.brentq(excess, 0.0, hi, xtol=1e-13, rtol=1e-13)
    step = max(eps * 1e-13, 1e-300)
    while excess(eps) > 0:  # brentq brackets the root: step up until certified
        eps, step = eps + step, 2.0 * step
    return float(eps)


def _op_pld(op, step):
    """PLD of the dominating pair: Y rounded up to the grid (pessimistic), the tail
    beyond R = _OP_PLD_RMAX as infinite loss; symmetric (Y bounds both orderings)."""
    m = 0.0 if math.isinf(op.noise_multiplier) else 1.0 / op.noise_multiplier
    c = op.shift + 0.5 * m * m
    k_lo = math.ceil(c / step)
    if m == 0:
        probs, inf_mass = {k_lo: 1.0}, 0.0
    else:
        k_hi = math.ceil((c + m * _OP_PLD_RMAX) / step)
        ks = np.arange(k_lo, k_hi + 1)
        sf = _chi_sf(np.maximum((ks * step - c) / m, 0.0), op.dof)
        mass = np.concatenate([[1.0 - sf[0]], sf[:-1] - sf[1:]])  # Y in ((k-1)h, kh]
        probs = {int(k): float(p) for k, p in zip(ks, mass) if p > 0}
        inf_mass = float(sf[-1])
    pld = pldlib.PrivacyLossDistribution.create_from_rounded_probability(
        probs, inf_mass, step, pessimistic_estimate=True)
    return pld.self_compose(op.count) if op.count > 1 else pld


def _op_rdp(op, orders):
    """RDP curve count * (shift + m^2/2 + log E[e^{(a-1) m R}] / (a - 1)) at ``orders``."""
    m = 0.0 if math.isinf(op.noise_multiplier) else 1.0 / op.noise_multiplier
    t = (orders - 1.0) * m
    if op.dof == 1:  # E e^{t|Z|} = 2 e^{t^2/2} Phi(t)
        log_mgf = 0.5 * t * t + math.log(2.0) + special.log_ndtr(t)
    else:  # Rayleigh: E e^{tR} = 1 + t sqrt(2 pi) e^{t^2/2} Phi(t)
        with np.errstate(divide="ignore"):
            log_term = np.log(t) + 0.5 * math.log(2 * math.pi) + 0.5 * t * t + special.log_ndtr(t)
        log_mgf = np.logaddexp(0.0, log_term)
    return op.count * (op.shift + 0.5 * m * m + log_mgf / (orders - 1.0))
