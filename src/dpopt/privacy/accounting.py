"""Privacy accounting on top of dp-accounting, with the adjacency explicit.

Conventions (docs/design.md invariant 1)
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

import math

from dpopt._core.validation import check_choice, check_delta, check_epsilon, check_scalar
from dpopt.privacy.accountants import (  # noqa: F401 (public or shared: importable from here)
    _PLD,
    _RDP_EVENT,
    _RDP_ORDERS,
    PLD_DISCRETIZATION,
    PLD_MAX_POINTS,
    PLD_RELATIVE_STEP,
    PLD_SEARCH_DISCRETIZATION,
    PLD_SEARCH_MAX_POINTS,
    REFINE_SLACK,
    SUPPORTED_KINDS,
    _dominating_epsilon,
    _gdp_mu_of,
    _holds,
    _is_free,
    _is_non_private,
    _ops,
    _pld_epsilon,
    _pld_loss_range,
    _pld_of,
    _rdp_epsilon,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    rdp_accountant,
)
from dpopt.privacy.events import (  # noqa: F401 (the records are importable from here too)
    ADJACENCIES,
    MECHANISMS,
    ZCDP,
    Calibration,
    Gaussian,
    Laplace,
    ObjectivePerturbation,
    PureDP,
    SubsampledGaussian,
)
from dpopt.privacy.op_profile import (  # noqa: F401 (objective_perturbation_delta is public here)
    _OP_PLD_RMAX,
    _op_exact_epsilon,
    _op_pld,
    _op_rdp,
    objective_perturbation_delta,
)

ACCOUNTANTS = ("auto", "exact", "pld", "rdp")
SAMPLINGS = ("poisson", "without-replacement")

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
        ops = _ops(mechanisms)
        mu = _gdp_mu_of([m for m in mechanisms if m.kind == "gaussian"])
        return _op_exact_epsilon(ops[0], mu, delta) if ops else gdp_epsilon(mu, delta)
    if accountant == "pld":
        eps = _pld_epsilon(mechanisms, delta, adjacency, _pld_step, _pld_max_points)
        if _pld_step == PLD_DISCRETIZATION and 0.0 < eps * PLD_RELATIVE_STEP < _pld_step:
            # a small epsilon on a grid relative to it (every record rounds its loss up by
            # one step; both are upper bounds)
            eps = min(eps, _pld_epsilon(mechanisms, delta, adjacency, eps * PLD_RELATIVE_STEP,
                                        _pld_max_points))
        return eps
    return _rdp_epsilon(mechanisms, delta, adjacency)


def resolve_accountant(mechanisms, accountant="auto") -> str:
    """The accountant ``"auto"`` resolves to, or a ``ValueError`` if it cannot apply."""
    check_choice(accountant, "accountant", ACCOUNTANTS)
    all_gauss = _exact_applies(mechanisms)
    pld_ok = _holds("pld", mechanisms)
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
    return _holds("exact", mechanisms) and sum(m.count for m in _ops(mechanisms)) <= 1


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
        _CHECK[next(c for c in type(m).__mro__ if c in _CHECK)](m)
    return mechanisms


def _check_noise(m):
    check_scalar(m.noise_multiplier, "noise_multiplier", low=0.0, allow_inf=True)


def _check_op(m):
    _check_noise(m)
    check_scalar(m.shift, "shift", low=0.0, allow_inf=True)
    if isinstance(m.dof, bool) or m.dof not in (1, 2):
        raise ValueError(f"dof must be 1 or 2, got {m.dof!r}")


def _check_subsampled(m):
    _check_noise(m)
    check_scalar(m.sampling_rate, "sampling_rate", low=0.0, high=1.0)
    check_choice(m.sampling, "sampling", SAMPLINGS)


#: The parameter checks of each record type (one entry per type of MECHANISMS).
_CHECK = {
    Gaussian: _check_noise,
    Laplace: _check_noise,
    SubsampledGaussian: _check_subsampled,
    ObjectivePerturbation: _check_op,
    PureDP: lambda m: check_scalar(m.epsilon, "epsilon", low=0.0, allow_inf=True),
    ZCDP: lambda m: check_scalar(m.rho, "rho", low=0.0, allow_inf=True),
}


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
    final_step = min(PLD_DISCRETIZATION, epsilon * PLD_RELATIVE_STEP)

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
