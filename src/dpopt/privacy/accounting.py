"""Privacy accounting on top of dp-accounting, with the adjacency explicit.

Conventions (DESIGN.md, invariant 1)
------------------------------------
*Adjacency* is ``"replace-one"`` (the default and the papers' convention:
neighbouring datasets differ in the value of one record) or ``"add-remove"``.

A *noise multiplier* is always ``z = sigma / Delta`` where ``Delta`` is the L2
(or, for Laplace, L1) sensitivity of the released quantity **under the stated
adjacency**. For a mean of n values clipped to norm C that is Delta = 2C/n
under replace-one; for the noisy sum of Poisson-sampled clipped gradients it
is 2C under replace-one and C under add-remove. Internally this is translated
to dp-accounting's convention (multiplier relative to the per-record bound C).

Mechanism records
-----------------
:class:`Gaussian`, :class:`SubsampledGaussian`, :class:`Laplace`,
:class:`PureDP` (any epsilon-DP mechanism, e.g. report-noisy-max) and
:class:`ZCDP`, each with a ``count`` of adaptive repetitions, and
:class:`ObjectivePerturbation` (the privacy-loss bound of objective
perturbation, see its docstring). A list of them is a composition, accounted
by :func:`epsilon_of`:

``"exact"``
    Gaussian differential privacy (Dong, Roth, Su 2022): the composition of
    Gaussian mechanisms with multipliers z_k is exactly mu-GDP with
    mu = sqrt(sum_k 1/z_k^2), and its privacy profile is the analytic
    Gaussian mechanism's (Balle & Wang 2018). Exact, for unsampled Gaussians;
    with one :class:`ObjectivePerturbation` record added, a one-dimensional
    integral evaluated as a certified upper Riemann sum (see that class).
``"pld"``
    dp-accounting's privacy-loss-distribution accountant, pessimistic
    discretisation (an upper bound). Gaussian, Poisson-subsampled Gaussian
    (both adjacencies), Laplace and pure-DP mechanisms.
``"rdp"``
    dp-accounting's Renyi accountant. Adds zCDP mechanisms and fixed-size
    sampling without replacement (replace-one, Wang-Balle-Kasiviswanathan 2019).
``"auto"``
    ``"exact"`` when it applies, else ``"pld"``, else ``"rdp"``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import dp_accounting as dpa
import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pldlib
from dp_accounting.rdp import rdp_privacy_accountant as rdp_mod
from scipy import optimize, special

from dpopt._core.validation import check_choice, check_delta, check_epsilon, check_scalar

ADJACENCIES = ("replace-one", "add-remove")
ACCOUNTANTS = ("auto", "exact", "pld", "rdp")
SAMPLINGS = ("poisson", "without-replacement")
PLD_DISCRETIZATION = 1e-4  # final certification
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
# mechanism records


@dataclass(frozen=True)
class Gaussian:
    """``count`` Gaussian mechanisms with noise multiplier sigma / Delta."""

    noise_multiplier: float
    count: int = 1


@dataclass(frozen=True)
class SubsampledGaussian:
    """``count`` steps of a noisy sum over a random batch.

    ``sampling="poisson"`` includes each record independently with probability
    ``sampling_rate``; ``"without-replacement"`` draws a batch of fixed size
    ``sampling_rate * n`` (replace-one only; give ``dataset_size``).
    """

    noise_multiplier: float
    sampling_rate: float
    count: int = 1
    sampling: str = "poisson"
    dataset_size: int | None = None


@dataclass(frozen=True)
class Laplace:
    """``count`` Laplace mechanisms with scale / L1-sensitivity = noise_multiplier."""

    noise_multiplier: float
    count: int = 1


@dataclass(frozen=True)
class PureDP:
    """``count`` mechanisms that are each ``epsilon``-DP (delta = 0)."""

    epsilon: float
    count: int = 1


@dataclass(frozen=True)
class ZCDP:
    """``count`` mechanisms that are each ``rho``-zCDP."""

    rho: float
    count: int = 1


@dataclass(frozen=True)
class ObjectivePerturbation:
    """``count`` runs of objective perturbation, through their privacy-loss bound.

    With m = 1 / noise_multiplier, every ordering (D, D') of neighbours has a
    privacy loss log(p_D / p_D')(theta), theta ~ M(D), that is stochastically
    dominated (first order) by

        Y = shift + m^2 / 2 + m R,     R ~ chi_dof   (dof = 1: |N(0, 1)|, dof = 2: Rayleigh)

    (:mod:`dpopt.solvers.objective_perturbation` derives it: ``shift`` bounds the
    log-determinant of the Jacobian, m R + m^2 / 2 the Gaussian part; dof = 1
    under add-remove, as in Redberg, Koskela & Wang, NeurIPS 2023, dof = 2 under
    replace-one).

    Why this composes. Y >= 0, so E[e^{-Y}] <= 1 and there is a pair (P*, Q*)
    whose privacy loss under P* is exactly Y: P* the law of Y, Q* with density
    e^{-y} dP* plus an atom of mass 1 - E[e^{-Y}] where P* has none. Since
    v -> (1 - alpha e^{-v})_+ is non-decreasing for every alpha >= 0, first-order
    dominance of the loss gives H_alpha(M(D) || M(D')) <= H_alpha(P* || Q*) for
    all alpha >= 0 and both orderings: (P*, Q*) is a dominating pair (Zhu, Dong,
    Wang, AISTATS 2022, Def. 7), and dominating pairs compose adaptively by
    taking products (their Thm. 10). So the composition with Gaussian records of
    total mu is dominated by the loss Y + G, G ~ N(mu^2/2, mu^2) independent:

        delta(eps) = E_R[ delta_mu(eps - shift - m^2/2 - m R) ],
        delta_mu(x) = Phi(-x/mu + mu/2) - e^x Phi(-x/mu - mu/2)   (any real x; mu = 0: (1 - e^x)_+).

    ``shift`` is a deterministic constant of the dominating pair, so it may be
    moved out only here (eps(delta) = shift + ... would be wrong in general: with
    the Gaussian part it is not, because the folded term is not Gaussian). The
    PLD accountant discretises Y (rounded up), the RDP accountant uses
    eps(a) = shift + m^2/2 + log E[e^{(a-1) m R}] / (a - 1) (first-order
    dominance bounds every E[e^{(a-1) loss}]).
    """

    noise_multiplier: float
    shift: float = 0.0
    dof: int = 1
    count: int = 1


MECHANISMS = (Gaussian, SubsampledGaussian, Laplace, PureDP, ZCDP, ObjectivePerturbation)


@dataclass(frozen=True)
class Calibration:
    """Result of a calibration: the noise and the privacy it actually gives."""

    noise_multiplier: float
    epsilon: float
    delta: float
    accountant: str
    adjacency: str


# ---------------------------------------------------------------------------
# Gaussian differential privacy (exact)


def gdp_delta(mu: float, epsilon: float) -> float:
    """delta(epsilon) of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    if mu == 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    a = special.ndtr(-epsilon / mu + mu / 2)
    # e^eps Phi(-eps/mu - mu/2) <= Phi(-eps/mu + mu/2) exactly; the cap only guards the
    # exponent against round-off (OverflowError for epsilon ~ 1e300).
    log_b = min(epsilon + special.log_ndtr(-epsilon / mu - mu / 2),
                special.log_ndtr(-epsilon / mu + mu / 2))
    return float(max(a - math.exp(log_b), 0.0))


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
    eps = optimize.brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14)
    # brentq brackets the root; step up until the profile certifies it (doubling steps:
    # fixed relative steps took millions of iterations for tiny epsilons).
    step = max(eps * 1e-14, 1e-300)
    while gdp_delta(mu, eps) > delta:
        eps, step = eps + step, 2.0 * step
    return float(eps)


def gdp_mu(epsilon: float, delta: float) -> float:
    """Largest mu such that mu-GDP is (epsilon, delta)-DP."""
    hi = 1.0
    while gdp_delta(hi, epsilon) < delta:
        hi *= 2.0
    mu = optimize.brentq(lambda m: gdp_delta(m, epsilon) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14)
    step = mu * 1e-14
    while gdp_delta(mu, epsilon) > delta:
        mu, step = max(mu - step, 0.0), 2.0 * step
    return float(mu)


# ---------------------------------------------------------------------------
# composition


def epsilon_of(mechanisms, delta, *, adjacency="replace-one", accountant="auto",
               _pld_step=PLD_DISCRETIZATION, _pld_max_points=PLD_MAX_POINTS) -> float:
    """Epsilon at ``delta`` of the adaptive composition of ``mechanisms``.

    Never optimistic: ``"exact"`` is exact up to floating point (rounded up),
    ``"pld"`` and ``"rdp"`` are upper bounds.
    """
    mechanisms = _check_mechanisms(mechanisms)
    delta = check_delta(delta)
    check_choice(adjacency, "adjacency", ADJACENCIES)
    accountant = resolve_accountant(mechanisms, accountant)
    if not mechanisms:
        return 0.0
    if any(_is_non_private(m) for m in mechanisms):
        return math.inf
    mechanisms = [m for m in mechanisms if not _is_free(m)]
    if not mechanisms:
        return 0.0
    if accountant == "exact":
        ops = [m for m in mechanisms if isinstance(m, ObjectivePerturbation)]
        mu = _gdp_mu_of([m for m in mechanisms if isinstance(m, Gaussian)])
        return _op_exact_epsilon(ops[0], mu, delta) if ops else gdp_epsilon(mu, delta)
    if accountant == "pld":
        return _pld_epsilon(mechanisms, delta, adjacency, _pld_step, _pld_max_points)
    return _rdp_epsilon(mechanisms, delta, adjacency)


def resolve_accountant(mechanisms, accountant="auto") -> str:
    """The accountant ``"auto"`` resolves to, or a ``ValueError`` if it cannot apply."""
    check_choice(accountant, "accountant", ACCOUNTANTS)
    all_gauss = _exact_applies(mechanisms)
    pld_ok = not any(isinstance(m, ZCDP) or (isinstance(m, SubsampledGaussian)
                                              and m.sampling == "without-replacement")
                     for m in mechanisms)
    if accountant == "auto":
        return "exact" if all_gauss else ("pld" if pld_ok else "rdp")
    if accountant == "exact" and not all_gauss:
        raise ValueError("accountant='exact' (Gaussian DP) applies only to compositions of "
                         "unsampled Gaussian mechanisms (with at most one objective perturbation); "
                         "use 'pld' or 'rdp'")
    if accountant == "pld" and not pld_ok:
        raise ValueError("accountant='pld' does not support zCDP mechanisms or sampling without "
                         "replacement; use 'rdp'")
    return accountant


def _exact_applies(mechanisms) -> bool:
    """Unsampled Gaussians, plus at most one objective perturbation (one count)."""
    ops = sum(m.count for m in mechanisms if isinstance(m, ObjectivePerturbation))
    return ops <= 1 and all(isinstance(m, (Gaussian, ObjectivePerturbation)) for m in mechanisms)


def _check_mechanisms(mechanisms):
    if isinstance(mechanisms, MECHANISMS):
        mechanisms = [mechanisms]
    mechanisms = list(mechanisms)
    for m in mechanisms:
        if not isinstance(m, MECHANISMS):
            raise ValueError(f"mechanisms must be Gaussian, SubsampledGaussian, Laplace, PureDP, "
                             f"ZCDP or ObjectivePerturbation records, got {m!r}")
        if isinstance(m.count, bool) or int(m.count) != m.count or m.count < 0:
            raise ValueError(f"count must be a non-negative integer, got {m.count!r}")
        if isinstance(m, (Gaussian, SubsampledGaussian, Laplace, ObjectivePerturbation)):
            check_scalar(m.noise_multiplier, "noise_multiplier", low=0.0, allow_inf=True)
        if isinstance(m, ObjectivePerturbation):
            check_scalar(m.shift, "shift", low=0.0, allow_inf=True)
            if isinstance(m.dof, bool) or m.dof not in (1, 2):
                raise ValueError(f"dof must be 1 or 2, got {m.dof!r}")
        if isinstance(m, SubsampledGaussian):
            check_scalar(m.sampling_rate, "sampling_rate", low=0.0, high=1.0)
            check_choice(m.sampling, "sampling", SAMPLINGS)
        if isinstance(m, PureDP):
            check_scalar(m.epsilon, "epsilon", low=0.0, allow_inf=True)
        if isinstance(m, ZCDP):
            check_scalar(m.rho, "rho", low=0.0, allow_inf=True)
    return mechanisms


def _is_non_private(m) -> bool:
    if m.count == 0:
        return False
    if isinstance(m, ObjectivePerturbation):
        return m.noise_multiplier == 0 or math.isinf(m.shift)
    if isinstance(m, (Gaussian, Laplace)):
        return m.noise_multiplier == 0
    if isinstance(m, SubsampledGaussian):
        return m.noise_multiplier == 0 and m.sampling_rate > 0
    if isinstance(m, PureDP):
        return math.isinf(m.epsilon)
    return math.isinf(m.rho)


def _is_free(m) -> bool:
    if m.count == 0:
        return True
    if isinstance(m, ObjectivePerturbation):
        return math.isinf(m.noise_multiplier) and m.shift == 0
    if isinstance(m, (Gaussian, Laplace)):
        return math.isinf(m.noise_multiplier)
    if isinstance(m, SubsampledGaussian):
        return math.isinf(m.noise_multiplier) or m.sampling_rate == 0
    if isinstance(m, PureDP):
        return m.epsilon == 0
    return m.rho == 0


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
             if isinstance(m, (Gaussian, SubsampledGaussian))]
    pure = sum(m.count / m.noise_multiplier for m in mechanisms if isinstance(m, Laplace))
    pure += sum(m.count * m.epsilon for m in mechanisms if isinstance(m, PureDP))
    ops = [m for m in mechanisms if isinstance(m, ObjectivePerturbation)]
    if ops:  # basic composition: half of delta shared equally by the K objective perturbations
        k = sum(m.count for m in ops)
        pure += sum(m.count * _op_exact_epsilon(replace(m, count=1), 0.0, delta / (2 * k))
                    for m in ops)
        delta = delta / 2
    return (gdp_epsilon(_gdp_mu_of(gauss), delta) if gauss else 0.0) + pure


def _pld_loss_range(m, adjacency) -> float:
    """Generous width (in nats) of the truncated privacy-loss support of one PLD building
    block of ``m``; only used to coarsen the grid (see PLD_MAX_POINTS)."""
    if isinstance(m, (Gaussian, SubsampledGaussian)):
        if isinstance(m, Gaussian):
            s, shift = m.noise_multiplier / math.sqrt(m.count), 1.0
        else:  # dp-accounting units (see _pld_of); replace-one mixtures are 2 apart
            s, shift = ((2.0 * m.noise_multiplier, 2.0) if adjacency == "replace-one"
                        else (m.noise_multiplier, 1.0))
        # loss of N(0, s^2) vs N(shift, s^2) over |x| <= 10 s + shift (mass e^-50 beyond)
        return 2.0 * (shift * (10.0 * s + shift) + 0.5 * shift * shift) / (s * s)
    if isinstance(m, ObjectivePerturbation):
        mm = 1.0 / m.noise_multiplier
        return m.count * (m.shift + 0.5 * mm * mm + _OP_PLD_RMAX * mm) + 1e-3
    if isinstance(m, Laplace):
        return 2.0 / m.noise_multiplier
    return 2.0 * m.epsilon


def _pld_of(m, adjacency, step):
    if isinstance(m, Gaussian):
        return pldlib.from_gaussian_mechanism(
            standard_deviation=m.noise_multiplier / math.sqrt(m.count), sensitivity=1.0,
            value_discretization_interval=step)
    if isinstance(m, SubsampledGaussian):
        if adjacency == "replace-one":
            # dp-accounting's REPLACE_ONE multiplier is sigma / C with the replace-one
            # sensitivity 2C: translate our sigma / (2C).
            rel, z = dpa.NeighboringRelation.REPLACE_ONE, 2.0 * m.noise_multiplier
        else:
            rel, z = dpa.NeighboringRelation.ADD_OR_REMOVE_ONE, m.noise_multiplier
        single = pldlib.from_gaussian_mechanism(
            standard_deviation=z, sensitivity=1.0, sampling_prob=m.sampling_rate,
            value_discretization_interval=step, neighboring_relation=rel)
        return single.self_compose(m.count)
    if isinstance(m, ObjectivePerturbation):
        return _op_pld(m, step)
    if isinstance(m, Laplace):
        return pldlib.from_laplace_mechanism(
            parameter=m.noise_multiplier, sensitivity=1.0,
            value_discretization_interval=step).self_compose(m.count)
    # PureDP
    params = dpa.pld.common.DifferentialPrivacyParameters(m.epsilon, 0.0)
    return pldlib.from_privacy_parameters(params, value_discretization_interval=step
                                          ).self_compose(m.count)


_RDP_ORDERS = np.concatenate([np.linspace(1.01, 1.99, 50), np.linspace(2, 12, 101),
                              np.arange(13, 65), [80, 96, 128, 160, 192, 256, 384, 512, 1024]])


def _rdp_epsilon(mechanisms, delta, adjacency) -> float:
    ops = [m for m in mechanisms if isinstance(m, ObjectivePerturbation)]
    acc = rdp_accountant([m for m in mechanisms if not isinstance(m, ObjectivePerturbation)],
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
    wor = [m for m in mechanisms if isinstance(m, SubsampledGaussian)
           and m.sampling == "without-replacement"]
    poisson = [m for m in mechanisms if isinstance(m, SubsampledGaussian) and m.sampling == "poisson"]
    if wor and adjacency != "replace-one":
        raise ValueError("sampling without replacement is analysed under replace-one adjacency only")
    if poisson and adjacency == "replace-one":
        raise ValueError("the RDP accountant has no replace-one analysis of Poisson sampling; "
                         "use accountant='pld' or adjacency='add-remove'")
    rel = (dpa.NeighboringRelation.REPLACE_ONE if wor
           else dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
    acc = dpa.rdp.RdpAccountant(orders=list(orders), neighboring_relation=rel)
    for m in mechanisms:
        if isinstance(m, ObjectivePerturbation):
            raise ValueError("rdp_accountant cannot hold ObjectivePerturbation records (no "
                             "dp-accounting event); use epsilon_of(..., accountant='rdp')")
        if isinstance(m, Gaussian):
            acc.compose(dpa.ZCDpEvent(rho=0.5 / m.noise_multiplier ** 2), m.count)
        elif isinstance(m, SubsampledGaussian) and m.sampling == "poisson":
            acc.compose(dpa.PoissonSampledDpEvent(
                m.sampling_rate, dpa.GaussianDpEvent(m.noise_multiplier)), m.count)
        elif isinstance(m, SubsampledGaussian):
            if m.dataset_size is None:
                raise ValueError("sampling without replacement needs dataset_size")
            # round a fractional batch size up: rounding to nearest (half-to-even) could
            # account for a smaller batch than the sampler draws (optimistic epsilon)
            size = min(math.ceil(m.sampling_rate * m.dataset_size - 1e-9), m.dataset_size)
            acc.compose(dpa.SampledWithoutReplacementDpEvent(
                m.dataset_size, size, dpa.GaussianDpEvent(m.noise_multiplier)), m.count)
        elif isinstance(m, Laplace):
            acc.compose(dpa.LaplaceDpEvent(m.noise_multiplier), m.count)
        elif isinstance(m, PureDP):
            # epsilon-DP implies (epsilon^2 / 2)-zCDP (Bun & Steinke 2016, Prop. 1.4)
            acc.compose(dpa.ZCDpEvent(rho=0.5 * m.epsilon ** 2), m.count)
        else:
            acc.compose(dpa.ZCDpEvent(rho=m.rho), m.count)
    return acc


# ---------------------------------------------------------------------------
# calibration


def calibrate(make_mechanisms, epsilon, delta, *, adjacency="replace-one", accountant="auto",
              rtol=1e-3) -> Calibration:
    """Smallest noise multiplier z (to ``rtol``) whose composition is (epsilon, delta)-DP.

    ``make_mechanisms(z)`` returns the composition for multiplier z; its epsilon
    must decrease in z. The returned z always satisfies epsilon(z) <= epsilon
    (checked, never overshooting the target). ``epsilon = inf`` gives z = 0.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    check_choice(adjacency, "adjacency", ADJACENCIES)
    if math.isinf(epsilon):
        return Calibration(0.0, math.inf, delta, "none", adjacency)
    acc = resolve_accountant(_check_mechanisms(make_mechanisms(1.0)), accountant)
    if acc == "exact":
        exact = _calibrate_gdp(make_mechanisms, epsilon, delta)
        if exact is not None:
            return Calibration(exact[0], exact[1], delta, "exact", adjacency)

    # PLD grids relative to the target so that small epsilons stay tight.
    search_step = min(PLD_SEARCH_DISCRETIZATION, epsilon / 200)
    final_step = min(PLD_DISCRETIZATION, epsilon / 2000)

    def eps_at(z, step=search_step):
        points = PLD_SEARCH_MAX_POINTS if step == search_step else PLD_MAX_POINTS
        return epsilon_of(make_mechanisms(z), delta, adjacency=adjacency, accountant=acc,
                          _pld_step=step, _pld_max_points=points)

    lo, hi = 1.0, 1.0
    if eps_at(hi) <= epsilon:
        while eps_at(lo) <= epsilon:
            hi, lo = lo, lo / 2.0
            if lo < 1e-8:
                return Calibration(hi, eps_at(hi), delta, acc, adjacency)
    else:
        while eps_at(hi) > epsilon:
            lo, hi = hi, hi * 2.0
            if hi > 1e12:
                raise _calibration_failure(eps_at(hi), epsilon, delta, acc)
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        if eps_at(mid) <= epsilon:
            hi = mid
        else:
            lo = mid
    achieved = eps_at(hi, final_step)
    grow = rtol
    while achieved > epsilon:  # the fine grid disagreed with the coarse one: step up
        hi, grow = hi * (1.0 + grow), 2.0 * grow
        achieved = eps_at(hi, final_step)
    if achieved < epsilon * (1.0 - REFINE_SLACK):
        hi, achieved = _refine_on_fine_grid(lambda z: eps_at(z, final_step), epsilon, hi,
                                            achieved, rtol)
    return Calibration(hi, achieved, delta, acc, adjacency)


def _calibration_failure(eps_at_huge_noise, epsilon, delta, accountant):
    if math.isinf(eps_at_huge_noise):
        # the PLD's truncated tails (mass ~e^-50 per composed step) exceed delta
        return ValueError(f"delta={delta:g} is too small for the {accountant} accountant of this "
                          f"composition (even a noise multiplier of 1e12 is not certified); "
                          f"use a larger delta")
    return ValueError(f"no noise multiplier below 1e12 achieves epsilon={epsilon} at "
                      f"delta={delta:g}")


def _refine_on_fine_grid(eps_fine, epsilon, hi, achieved, rtol):
    """Lower ``hi`` to the smallest multiplier the certification grid certifies.

    The pessimism of a coarse PLD grid grows with the number of composed steps
    (for 75,000 Poisson-subsampled steps a 2e-3 grid can double epsilon), so the
    coarse bisection may stop far above the smallest certified multiplier. A
    bracketed secant (Illinois) on log epsilon against log z needs a few fine
    evaluations; every returned value is certified on the fine grid.
    """
    lo = hi
    while True:  # bracket: eps_fine(lo) > epsilon >= eps_fine(hi) = achieved
        lo /= 1.5
        e_lo = eps_fine(lo)
        if e_lo > epsilon:
            break
        hi, achieved = lo, e_lo
        if lo < 1e-8:
            return hi, achieved
    target = math.log(epsilon)
    # achieved can be 0 (a (0, delta) certificate for a huge multiplier): bisect then
    f_lo = math.log(e_lo) - target
    f_hi = math.log(achieved) - target if achieved > 0 else -math.inf
    side = 0
    while hi / lo > 1.0 + rtol:
        a, b = math.log(lo), math.log(hi)
        secant = math.isfinite(f_hi) and f_hi != f_lo
        x = b - f_hi * (b - a) / (f_hi - f_lo) if secant else 0.5 * (a + b)
        # stay strictly inside the bracket, at least rtol / 4 from its ends
        pad = 0.25 * math.log1p(rtol)
        x = min(max(x, a + pad), b - pad)
        mid = math.exp(x)
        e = eps_fine(mid)
        f = math.log(e) - target if e > 0 else -math.inf
        if e <= epsilon:
            hi, achieved, f_hi = mid, e, f
            if side == 1:
                f_lo *= 0.5
            side = 1
        else:
            lo, f_lo = mid, f
            if side == -1:
                f_hi *= 0.5
            side = -1
    return hi, achieved


def _calibrate_gdp(make_mechanisms, epsilon, delta):
    # When every multiplier scales with z, mu(z) = mu(1) / z: solve exactly.
    if not all(isinstance(m, Gaussian) for m in make_mechanisms(1.0)):
        return None
    mu1 = _gdp_mu_of(make_mechanisms(1.0))
    if not math.isclose(_gdp_mu_of(make_mechanisms(2.0)) * 2.0, mu1, rel_tol=1e-12):
        return None
    z, rel = mu1 / gdp_mu(epsilon, delta), 1e-12
    while gdp_epsilon(_gdp_mu_of(make_mechanisms(z)), delta) > epsilon:
        z, rel = z * (1 + rel), 2.0 * rel
    return z, gdp_epsilon(_gdp_mu_of(make_mechanisms(z)), delta)


def calibrate_gaussian(epsilon, delta, steps, *, accountant="exact", adjacency="replace-one"
                       ) -> Calibration:
    """Noise multiplier for ``steps`` Gaussian mechanisms of equal multiplier.

    ``"exact"`` solves the Gaussian-DP equation: z = sqrt(steps) / mu(epsilon, delta).
    ``"rdp"`` is the continuous-order RDP bound of the DP-CD paper (eq. 18),
    ``"paper"`` its Theorem 3.1 closed form (valid for epsilon <= 1, delta < 1/3,
    reproduction only); ``"pld"`` calibrates with the PLD accountant.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    steps = int(check_scalar(steps, "steps", low=1, integer=True))
    check_choice(accountant, "accountant", ("exact", "rdp", "paper", "pld"))
    if math.isinf(epsilon):
        return Calibration(0.0, math.inf, delta, "none", adjacency)
    if accountant == "exact":
        z, eps = _calibrate_gdp(lambda z: [Gaussian(z, steps)], epsilon, delta)
        return Calibration(z, eps, delta, "exact", adjacency)
    if accountant == "pld":
        return calibrate(lambda z: [Gaussian(z, steps)], epsilon, delta, adjacency=adjacency,
                         accountant="pld")
    if accountant == "rdp":
        z = rdp_gaussian_noise(epsilon, delta, steps)
        return Calibration(z, rdp_gaussian_epsilon(z, steps, delta), delta, "rdp", adjacency)
    if epsilon > 1 or delta >= 1 / 3:
        raise ValueError("accountant='paper' (DP-CD Theorem 3.1) needs epsilon <= 1 and delta < 1/3")
    z = math.sqrt(3 * steps * math.log(1 / delta)) / epsilon
    return Calibration(z, rdp_gaussian_epsilon(z, steps, delta), delta, "paper", adjacency)


def rdp_gaussian_epsilon(noise_multiplier, steps, delta) -> float:
    """DP-CD paper eq. (18): min over alpha > 1 of N alpha / (2 z^2) + log(1/delta) / (alpha - 1)
    = N / (2 z^2) + sqrt(2 N log(1/delta)) / z."""
    z, n = float(noise_multiplier), float(steps)
    return n / (2 * z * z) + math.sqrt(2 * n * math.log(1 / delta)) / z


def rdp_gaussian_noise(epsilon, delta, steps) -> float:
    """Inverse of :func:`rdp_gaussian_epsilon`:
    z = sqrt(N) / (sqrt(2 log(1/delta) + 2 eps) - sqrt(2 log(1/delta)))."""
    a = 2 * math.log(1 / delta)
    z, rel = math.sqrt(steps) / (math.sqrt(a + 2 * epsilon) - math.sqrt(a)), 1e-12
    while rdp_gaussian_epsilon(z, steps, delta) > epsilon:
        z, rel = z * (1 + rel), 2.0 * rel
    return z


# ---------------------------------------------------------------------------
# zCDP conversions


def zcdp_to_dp(rho, delta) -> float:
    """Epsilon at ``delta`` of a rho-zCDP mechanism (RDP conversion of dp-accounting)."""
    rho = check_scalar(rho, "rho", low=0.0, allow_inf=True)
    return epsilon_of([ZCDP(rho)], delta, accountant="rdp")


def dp_to_zcdp(epsilon, delta) -> float:
    """Largest rho such that rho-zCDP implies (epsilon, delta)-DP by :func:`zcdp_to_dp`."""
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if math.isinf(epsilon):
        return math.inf
    lo, hi = 0.0, max(epsilon, 1.0)
    while zcdp_to_dp(hi, delta) <= epsilon:
        hi *= 2
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if zcdp_to_dp(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo


# ---------------------------------------------------------------------------
# objective perturbation: Y = shift + m^2/2 + m R, R ~ chi_dof (ObjectivePerturbation)

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


def _op_exact_epsilon(op, mu, delta) -> float:
    """Smallest epsilon >= 0 whose certified delta bound is <= delta (count 1)."""
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
