"""The accountants, one rule per record kind: which kinds each holds, declared in
:data:`SUPPORTED_KINDS`, and how it accounts each (tables keyed by ``record.kind`` of
:mod:`dpopt.privacy.events`, instead of type switches):

* ``"exact"``, Gaussian differential privacy (Dong, Roth, Su 2022): :func:`gdp_delta`,
  :func:`gdp_epsilon`, :func:`gdp_mu` (mu = sqrt(sum_k 1/z_k^2) for Gaussian records; one
  objective-perturbation run is folded in by :mod:`dpopt.privacy.op_profile`);
* ``"pld"``, dp-accounting's privacy-loss distributions (pessimistic discretisation, an
  upper bound): :data:`_PLD` (loss range, distribution) per kind;
* ``"rdp"``, dp-accounting's Renyi accountant: :data:`_RDP_EVENT` (the dp-accounting event
  of one repetition) per kind; objective perturbation's RDP curve is added to its vector.

:data:`_LIMITS` says per kind when a record releases without privacy (epsilon = inf) or
releases nothing (free). Composition, calibration and the public entry points are in
:mod:`dpopt.privacy.accounting`.
"""

from __future__ import annotations

import math
from dataclasses import replace

import dp_accounting as dpa
import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pldlib
from dp_accounting.rdp import rdp_privacy_accountant as rdp_mod
from scipy import optimize, special

from dpopt.privacy.events import Gaussian
from dpopt.privacy.op_profile import _OP_PLD_RMAX, _op_exact_epsilon, _op_pld, _op_rdp

PLD_DISCRETIZATION = 1e-4  # final certification
PLD_RELATIVE_STEP = 1 / 2000  # below epsilon = 0.2 the final grid is epsilon / 2000
PLD_SEARCH_DISCRETIZATION = 2e-3  # bisection steps (pessimistic, so still an upper bound)
REFINE_SLACK = 0.02  # refine on the final grid when the coarse search left more epsilon unused
# Cap on the grid of one mechanism's privacy-loss distribution: tiny noise multipliers
# have huge loss ranges, and a fixed interval would need billions of points (MemoryError
# or a hang). Coarser grids keep the pessimistic estimate an upper bound.
# Beyond PLD_MAX_POINTS nats of loss range (noise multipliers ~1e-3 and below, where
# epsilon is in the thousands) the PLD is replaced by a dominating bound (_dominating_epsilon).
PLD_MAX_POINTS = 2e5
PLD_SEARCH_MAX_POINTS = 2e4

# ---------------------------------------------------------------------------
# Gaussian differential privacy (exact)


def gdp_delta(mu: float, epsilon: float) -> float:
    """delta(epsilon) of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    if mu == 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    x, h = -epsilon / mu, mu / 2
    if h <= SMALL_HALF_MU:
        return _gdp_delta_small(x, h)
    a = special.ndtr(x + h)
    # e^eps Phi(x - h) <= Phi(x + h) exactly; the cap only guards the exponent against
    # round-off (OverflowError for epsilon ~ 1e300).
    log_b = min(epsilon + special.log_ndtr(x - h), special.log_ndtr(x + h))
    return float(max(a - math.exp(log_b), 0.0))


#: Below this mu / 2, :func:`gdp_delta` reads delta from the expansion of log Phi.
SMALL_HALF_MU = 1e-3


def _gdp_delta_small(x, h):
    """delta of mu-GDP at x = -eps/mu, h = mu/2 <= :data:`SMALL_HALF_MU`. Written
    Phi(x + h) - e^eps Phi(x - h) it is a difference of two numbers that agree to many more
    digits than delta has (at eps = 1.7e-6 and delta = 1e-30 it came out 1.9e-5 off in
    relative terms, and gdp_mu certified mus whose true delta was above the target).
    Instead delta = -Phi(x + h) expm1(E), E = eps - [R(x + h) - R(x - h)], R = log Phi,
    whose Taylor terms in h are 2 h R1(x) + h^3 R3(x) / 3 (the next, h^5 R5 / 60, is below
    1e-15 of E here), with R1 = lam = phi / Phi and R3 = lam ((x + lam)(x + 2 lam) - 1).
    As eps = -2 h x, E = 2 h (-x - lam) - h^3 R3 / 3: no digit is lost to eps."""
    upper = special.ndtr(x + h)
    if upper == 0.0:  # below the smallest double, as delta is
        return 0.0
    lam = math.exp(-0.5 * x * x - 0.5 * math.log(2.0 * math.pi) - special.log_ndtr(x))
    r3 = lam * ((x + lam) * (x + 2.0 * lam) - 1.0)
    exponent = min(2.0 * h * (-x - lam) - h ** 3 * r3 / 3.0, 0.0)
    return float(max(-upper * math.expm1(exponent), 0.0))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest epsilon >= 0 with delta(epsilon) <= delta for mu-GDP."""
    if mu == 0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    if gdp_delta(mu, 0.0) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while gdp_delta(mu, hi) > delta:
        hi *= 2.0
    # tolerances relative (an absolute 1e-14 was 1e-9 of epsilon = 1e-5: the round trip
    # epsilon -> gdp_mu -> gdp_epsilon came back above the target)
    eps = optimize.brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, hi, xtol=1e-300,
                          rtol=1e-14, maxiter=500)
    # brentq brackets the root; step up until the profile certifies it (doubling steps:
    # fixed relative steps took millions of iterations for tiny epsilons).
    step = max(eps * 1e-14, 1e-300)
    while gdp_delta(mu, eps) > delta:
        eps, step = eps + step, 2.0 * step
    return float(eps)


def gdp_mu(epsilon: float, delta: float) -> float:
    """Largest mu such that mu-GDP is (epsilon, delta)-DP, certified with a relative margin
    of :data:`CERTIFY_MARGIN` on delta: the residual error of :func:`gdp_delta` against
    60-digit arithmetic over epsilon in [1e-6, 100] and delta in [1e-30, 0.5] (2e-12
    relative below its switch, up to 1.4e-10 just above it, at mu near 2e-3 and delta
    near 1e-30) must not make a mu whose true delta is above the target. (``maxiter``: a
    relative tolerance takes more steps than 100 below epsilon = 3e-10.)"""
    hi = 1.0
    while gdp_delta(hi, epsilon) < delta:
        hi *= 2.0
    mu = optimize.brentq(lambda m: gdp_delta(m, epsilon) - delta, 0.0, hi, xtol=1e-300,
                         rtol=1e-14, maxiter=500)
    step, target = mu * 1e-14, delta * (1.0 - CERTIFY_MARGIN)
    while gdp_delta(mu, epsilon) > target:
        mu, step = max(mu - step, 0.0), 2.0 * step
    return float(mu)


#: :func:`gdp_mu`'s relative margin on delta.
CERTIFY_MARGIN = 1e-9


# ---------------------------------------------------------------------------
# declarations and per-kind rules


#: The record kinds (``record.kind``) each accountant holds, declared: a composition with
#: a kind outside an accountant's set is refused by it ("exact" also holds at most one
#: objective-perturbation run). The rules per kind are the tables below.
SUPPORTED_KINDS = {
    "exact": frozenset({"gaussian", "objective-perturbation"}),
    "pld": frozenset({"gaussian", "poisson-gaussian", "laplace", "pure",
                      "objective-perturbation"}),
    "rdp": frozenset({"gaussian", "poisson-gaussian", "wor-gaussian", "laplace", "pure",
                      "zcdp", "objective-perturbation"}),
}


def _holds(accountant, mechanisms) -> bool:
    return all(m.kind in SUPPORTED_KINDS[accountant] for m in mechanisms)


def _ops(mechanisms) -> list:
    return [m for m in mechanisms if m.kind == "objective-perturbation"]


def _subsampled_non_private(m):
    return m.noise_multiplier == 0 and m.sampling_rate > 0


def _subsampled_free(m):
    return math.isinf(m.noise_multiplier) or m.sampling_rate == 0


#: Per kind: (releases without privacy, releases nothing), for a record with count > 0.
_LIMITS = {
    "gaussian": (lambda m: m.noise_multiplier == 0, lambda m: math.isinf(m.noise_multiplier)),
    "laplace": (lambda m: m.noise_multiplier == 0, lambda m: math.isinf(m.noise_multiplier)),
    "poisson-gaussian": (_subsampled_non_private, _subsampled_free),
    "wor-gaussian": (_subsampled_non_private, _subsampled_free),
    "pure": (lambda m: math.isinf(m.epsilon), lambda m: m.epsilon == 0),
    "zcdp": (lambda m: math.isinf(m.rho), lambda m: m.rho == 0),
    "objective-perturbation": (lambda m: m.noise_multiplier == 0 or math.isinf(m.shift),
                               lambda m: math.isinf(m.noise_multiplier) and m.shift == 0),
}


def _is_non_private(m) -> bool:
    return m.count != 0 and _LIMITS[m.kind][0](m)


def _is_free(m) -> bool:
    return m.count == 0 or _LIMITS[m.kind][1](m)


def _gdp_mu_of(mechanisms) -> float:
    return math.sqrt(sum(m.count / m.noise_multiplier ** 2 for m in mechanisms))


def _pld_epsilon(mechanisms, delta, adjacency, step, max_points=PLD_MAX_POINTS) -> float:
    width = max(_pld_loss_range(m, adjacency) for m in mechanisms)
    if width > max_points:  # a grid interval above 1 nat: the PLD is useless and huge
        return _dominating_epsilon(mechanisms, delta)
    step = max(step, width / max_points)
    total = None
    for m in mechanisms:
        pld = _pld_of(m, adjacency, step)
        total = pld if total is None else total.compose(pld)
    return float(total.get_epsilon_for_delta(delta))


def _dominating_epsilon(mechanisms, delta) -> float:
    """A valid, cruder upper bound: every (sub)sampled Gaussian step is dominated by the
    unsampled Gaussian with the same multiplier (subsampling only mixes in identical
    outputs), composed exactly (GDP) with all of delta; Laplace and pure-DP mechanisms
    by basic composition."""
    gauss = [Gaussian(m.noise_multiplier, m.count) for m in mechanisms
             if m.kind in ("gaussian", "poisson-gaussian", "wor-gaussian")]
    pure = sum(m.count / m.noise_multiplier for m in mechanisms if m.kind == "laplace")
    pure += sum(m.count * m.epsilon for m in mechanisms if m.kind == "pure")
    ops = _ops(mechanisms)
    if ops:  # basic composition: half of delta shared equally by the K objective perturbations
        k = sum(m.count for m in ops)
        pure += sum(m.count * _op_exact_epsilon(replace(m, count=1), 0.0, delta / (2 * k))
                    for m in ops)
        delta = delta / 2
    return (gdp_epsilon(_gdp_mu_of(gauss), delta) if gauss else 0.0) + pure


def _pld_loss_range(m, adjacency) -> float:
    """Generous width (in nats) of the truncated privacy-loss support of one PLD building
    block of ``m``; only used to coarsen the grid (see PLD_MAX_POINTS)."""
    return _PLD[m.kind][0](m, adjacency)


def _pld_of(m, adjacency, step):
    return _PLD[m.kind][1](m, adjacency, step)


def _gaussian_loss_range(s, shift) -> float:
    """Loss of N(0, s^2) vs N(shift, s^2) over |x| <= 10 s + shift (mass e^-50 beyond)."""
    return 2.0 * (shift * (10.0 * s + shift) + 0.5 * shift * shift) / (s * s)


def _subsampled_units(m, adjacency):
    """(dp-accounting's relation, its multiplier): its REPLACE_ONE multiplier is sigma / C
    with the replace-one sensitivity 2C, so our sigma / (2C) is doubled."""
    if adjacency == "replace-one":
        return dpa.NeighboringRelation.REPLACE_ONE, 2.0 * m.noise_multiplier
    return dpa.NeighboringRelation.ADD_OR_REMOVE_ONE, m.noise_multiplier


def _subsampled_loss_range(m, adjacency) -> float:
    # dp-accounting units (see _subsampled_units); replace-one mixtures are 2 apart
    s, shift = ((2.0 * m.noise_multiplier, 2.0) if adjacency == "replace-one"
                else (m.noise_multiplier, 1.0))
    return _gaussian_loss_range(s, shift)


def _subsampled_pld(m, adjacency, step):
    rel, z = _subsampled_units(m, adjacency)
    single = pldlib.from_gaussian_mechanism(
        standard_deviation=z, sensitivity=1.0, sampling_prob=m.sampling_rate,
        value_discretization_interval=step, neighboring_relation=rel)
    return single.self_compose(m.count)


def _op_loss_range(m, adjacency) -> float:
    mm = 1.0 / m.noise_multiplier
    return m.count * (m.shift + 0.5 * mm * mm + _OP_PLD_RMAX * mm) + 1e-3


def _pure_pld(m, adjacency, step):
    params = dpa.pld.common.DifferentialPrivacyParameters(m.epsilon, 0.0)
    return pldlib.from_privacy_parameters(params, value_discretization_interval=step
                                          ).self_compose(m.count)


#: The PLD accountant's rules, per kind it holds (SUPPORTED_KINDS["pld"]):
#: (loss range in nats, privacy-loss distribution).
_PLD = {
    "gaussian": (
        lambda m, adjacency: _gaussian_loss_range(m.noise_multiplier / math.sqrt(m.count), 1.0),
        lambda m, adjacency, step: pldlib.from_gaussian_mechanism(
            standard_deviation=m.noise_multiplier / math.sqrt(m.count), sensitivity=1.0,
            value_discretization_interval=step)),
    "poisson-gaussian": (_subsampled_loss_range, _subsampled_pld),
    "objective-perturbation": (_op_loss_range, lambda m, adjacency, step: _op_pld(m, step)),
    "laplace": (
        lambda m, adjacency: 2.0 / m.noise_multiplier,
        lambda m, adjacency, step: pldlib.from_laplace_mechanism(
            parameter=m.noise_multiplier, sensitivity=1.0,
            value_discretization_interval=step).self_compose(m.count)),
    "pure": (lambda m, adjacency: 2.0 * m.epsilon, _pure_pld),
}


_RDP_ORDERS = np.concatenate([np.linspace(1.01, 1.99, 50), np.linspace(2, 12, 101),
                              np.arange(13, 65), [80, 96, 128, 160, 192, 256, 384, 512, 1024]])


def _rdp_epsilon(mechanisms, delta, adjacency) -> float:
    ops = _ops(mechanisms)
    acc = rdp_accountant([m for m in mechanisms if m.kind != "objective-perturbation"],
                         adjacency)
    if not ops:
        return float(acc.get_epsilon(delta))
    # dp-accounting has no event for this curve: add it to the accountant's RDP vector
    orders = np.asarray(acc._orders, dtype=np.float64)
    curve = np.asarray(acc._rdp, dtype=np.float64) + sum(_op_rdp(m, orders) for m in ops)
    return float(rdp_mod.compute_epsilon(orders, curve, delta)[0])


def rdp_accountant(mechanisms, adjacency="replace-one", orders=_RDP_ORDERS):
    """A dp-accounting ``RdpAccountant`` holding the composition of ``mechanisms``
    (Gaussian and pure-DP records enter as zCDP; see the module docstring)."""
    wor = [m for m in mechanisms if m.kind == "wor-gaussian"]
    poisson = [m for m in mechanisms if m.kind == "poisson-gaussian"]
    if wor and adjacency != "replace-one":
        raise ValueError("sampling without replacement is analysed under replace-one adjacency only")
    if poisson and adjacency == "replace-one":
        raise ValueError("the RDP accountant has no replace-one analysis of Poisson sampling; "
                         "use accountant='pld' or adjacency='add-remove'")
    rel = (dpa.NeighboringRelation.REPLACE_ONE if wor
           else dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
    acc = dpa.rdp.RdpAccountant(orders=list(orders), neighboring_relation=rel)
    for m in mechanisms:
        if m.kind == "objective-perturbation":
            raise ValueError("rdp_accountant cannot hold ObjectivePerturbation records (no "
                             "dp-accounting event); use epsilon_of(..., accountant='rdp')")
        acc.compose(_RDP_EVENT[m.kind](m), m.count)
    return acc


def _without_replacement_event(m):
    if m.dataset_size is None:
        raise ValueError("sampling without replacement needs dataset_size")
    # round a fractional batch size up: rounding to nearest (half-to-even) could
    # account for a smaller batch than the sampler draws (optimistic epsilon)
    size = min(math.ceil(m.sampling_rate * m.dataset_size - 1e-9), m.dataset_size)
    return dpa.SampledWithoutReplacementDpEvent(m.dataset_size, size,
                                                dpa.GaussianDpEvent(m.noise_multiplier))


#: The RDP accountant's rules: the dp-accounting event of one repetition, per kind it holds
#: through dp-accounting (objective perturbation's curve is added by _rdp_epsilon).
_RDP_EVENT = {
    "gaussian": lambda m: dpa.ZCDpEvent(rho=0.5 / m.noise_multiplier ** 2),
    "poisson-gaussian": lambda m: dpa.PoissonSampledDpEvent(
        m.sampling_rate, dpa.GaussianDpEvent(m.noise_multiplier)),
    "wor-gaussian": _without_replacement_event,
    "laplace": lambda m: dpa.LaplaceDpEvent(m.noise_multiplier),
    # epsilon-DP implies (epsilon^2 / 2)-zCDP (Bun & Steinke 2016, Prop. 1.4)
    "pure": lambda m: dpa.ZCDpEvent(rho=0.5 * m.epsilon ** 2),
    "zcdp": lambda m: dpa.ZCDpEvent(rho=m.rho),
}
