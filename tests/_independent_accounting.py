"""Independent epsilon computations for the accounting cross-checks (test-only code).

Nothing here calls dpopt.privacy: each function either goes to dp-accounting
directly (building its DpEvents by hand) or computes privacy-loss
distributions from scratch with numpy, so that a bug in dpopt's translation
(units of the noise multiplier, adjacency, counts) shows up as a mismatch.

Units: as in dpopt, a noise multiplier z is sigma / Delta with Delta the L2
sensitivity under the stated adjacency. dp-accounting's Poisson-subsampled
Gaussian uses sigma / C with C the per-record norm; under replace-one
Delta = 2C, so its multiplier is 2z (the mixture components sit at -1 and +1),
under add-remove Delta = C and it is z.
"""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
from scipy import optimize, special

# ---------------------------------------------------------------------------
# closed forms and dp-accounting used directly


def gaussian_epsilon(z, steps, delta):
    """Analytic Gaussian mechanism (Balle & Wang 2018) as implemented by dp-accounting:
    ``steps`` Gaussian mechanisms with multiplier z compose to one with z / sqrt(steps)."""
    return float(dpa.get_epsilon_gaussian(z / math.sqrt(steps), delta))


def eq18_epsilon_numeric(z, steps, delta):
    """DP-CD paper eq. (16)-(18): min over alpha > 1 of N alpha / (2 z^2) + log(1/delta)/(alpha-1),
    minimised numerically (not the closed form)."""
    f = lambda a: steps * a / (2 * z * z) + math.log(1 / delta) / (a - 1)  # noqa: E731
    a_star = 1 + z * math.sqrt(2 * math.log(1 / delta) / steps)
    res = optimize.minimize_scalar(f, bounds=(1 + 1e-12, 10 * a_star + 10), method="bounded",
                                   options={"xatol": 1e-12})
    return float(min(res.fun, f(a_star)))


def zcdp_epsilon_continuous(rho, delta):
    """rho-zCDP to (epsilon, delta) with the RDP conversion dp-accounting uses
    (Canonne, Kamath, Steinke 2020: eps = rho a + log(1 - 1/a) - log(delta a) / (a - 1)),
    minimised over every real order a > 1 (any grid of orders gives at least this)."""
    f = lambda a: rho * a + math.log1p(-1 / a) - math.log(delta * a) / (a - 1)  # noqa: E731
    a_star = 1 + math.sqrt(math.log(1 / delta) / rho)
    res = optimize.minimize_scalar(f, bounds=(1 + 1e-9, 20 * a_star + 10), method="bounded",
                                   options={"xatol": 1e-10})
    return max(0.0, float(min(res.fun, f(a_star))))


def dpa_pld_poisson_epsilon(z, q, steps, delta, adjacency):
    """dp-accounting's PLD accountant on a hand-built PoissonSampledDpEvent."""
    if adjacency == "add-remove":
        acc = dpa.pld.PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
        acc.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z)), steps)
        return float(acc.get_epsilon(delta))
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    pld = pldlib.from_gaussian_mechanism(
        standard_deviation=2 * z, sampling_prob=q,
        neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE).self_compose(steps)
    return float(pld.get_epsilon_for_delta(delta))


def dpa_rdp_poisson_epsilon(z, q, steps, delta, orders=None):
    """dp-accounting's RDP accountant (add-remove) on a hand-built event."""
    kwargs = {} if orders is None else {"orders": list(orders)}
    acc = dpa.rdp.RdpAccountant(**kwargs)
    acc.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z)), steps)
    return float(acc.get_epsilon(delta))


# ---------------------------------------------------------------------------
# privacy-loss distributions from scratch


def _mixture_logpdf(x, s, q, shift):
    """log of (1 - q) N(0, s^2) + q N(shift, s^2) at x."""
    base = -0.5 * (x / s) ** 2
    moved = -0.5 * ((x - shift) / s) ** 2
    if q >= 1.0:
        return moved
    if q <= 0.0:
        return base
    return np.logaddexp(np.log1p(-q) + base, math.log(q) + moved)


def subsampled_gaussian_losses(z, q, adjacency, n_points=100_001):
    """(probabilities, privacy losses) of one Poisson-subsampled Gaussian step, for each
    ordered pair (P, Q) of the dominating pairs; x ~ P on a fine grid (|x| <= 12 s + 2,
    the neglected mass is below 1e-30)."""

    if adjacency == "replace-one":
        s = 2.0 * z  # record norm 1: the components sit at -1 and +1, sensitivity 2
        pairs = [((q, -1.0), (q, 1.0))]
    else:
        s = z
        pairs = [((q, -1.0), (0.0, 0.0)), ((0.0, 0.0), (q, 1.0))]
    x = np.linspace(-12 * s - 2, 12 * s + 2, n_points)
    out = []
    for (qp, sp), (qq, sq) in pairs:
        logp = _mixture_logpdf(x, s, qp, sp)
        logq = _mixture_logpdf(x, s, qq, sq)
        w = np.exp(logp - special.logsumexp(logp))
        out.append((w, logp - logq))
    return out


def _compose(w, losses, steps, h, rounding):
    """PMF of the sum of ``steps`` i.i.d. losses rounded to the grid h (FFT)."""
    idx = np.ceil(losses / h) if rounding == "up" else np.floor(losses / h)
    keep = w > 1e-22  # the dropped mass (< 1e-16 in all) is negligible against delta >= 1e-9
    idx, w = idx[keep].astype(np.int64), w[keep]
    lo = idx.min()
    pmf = np.bincount(idx - lo, weights=w)
    size = steps * (pmf.size - 1) + 1
    nfft = 1 << int(math.ceil(math.log2(size)))
    total = np.fft.irfft(np.fft.rfft(pmf, nfft) ** steps, nfft)[:size]
    total = np.clip(total, 0.0, None)
    return (np.arange(size) + steps * lo) * h, total


class _Profile:
    """delta(eps) = sum_{v > eps} p(v) (1 - e^(eps - v)) of a discrete PLD, in O(log n)."""

    def __init__(self, values, pmf):
        pos = values > 0
        self.v, p = values[pos], pmf[pos]
        self.s1 = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])
        self.s2 = np.concatenate([np.cumsum((p * np.exp(-self.v))[::-1])[::-1], [0.0]])

    def delta(self, eps):
        k = np.searchsorted(self.v, eps, side="right")
        return float(self.s1[k] - math.exp(eps) * self.s2[k])


def _epsilon_for_delta(values, pmf, delta):
    prof = _Profile(values, pmf)
    if prof.delta(0.0) <= delta:
        return 0.0
    hi = float(values.max())
    if prof.delta(hi) > delta:
        return math.inf
    return float(optimize.brentq(lambda e: prof.delta(e) - delta, 0.0, hi, xtol=1e-10))


def hand_pld_epsilon_bracket(z, q, steps, delta, adjacency, h=1e-4):
    """(optimistic, pessimistic) epsilon of ``steps`` Poisson-subsampled Gaussian steps,
    from our own discretisation: losses rounded down (a lower bound up to the neglected
    tails) or up (an upper bound)."""
    lo_eps, hi_eps = 0.0, 0.0
    for w, losses in subsampled_gaussian_losses(z, q, adjacency):
        lo_eps = max(lo_eps, _epsilon_for_delta(*_compose(w, losses, steps, h, "down"), delta))
        hi_eps = max(hi_eps, _epsilon_for_delta(*_compose(w, losses, steps, h, "up"), delta))
    return lo_eps, hi_eps


def hockey_stick_gaussian(sens, sigma, eps):
    """delta(eps) of the Gaussian mechanism by numerical integration of
    int max(0, p(x) - e^eps q(x)) dx, p = N(0, sigma^2), q = N(sens, sigma^2)."""
    from scipy import integrate, stats

    p, qd = stats.norm(0, sigma), stats.norm(sens, sigma)
    # p > e^eps q  <=>  x < sens/2 - eps sigma^2 / sens
    cut = sens / 2 - eps * sigma ** 2 / sens
    f = lambda x: p.pdf(x) - math.exp(eps) * qd.pdf(x)  # noqa: E731
    val, _ = integrate.quad(f, -np.inf, cut, epsabs=1e-15, epsrel=1e-12, limit=500)
    return max(val, 0.0)


def dpa_pld_compose(parts, delta, pessimistic=True, step=1e-4):
    """Epsilon of a composition built directly with dp-accounting's PLD constructors.

    ``parts``: ("gaussian", std in sensitivity units, count), ("poisson", std in
    dp-accounting's units, q, count, "replace-one" | "add-remove") or ("pure", eps, count).
    ``pessimistic=False`` rounds losses down: a lower reference."""
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    kw = {"value_discretization_interval": step}
    total = None
    for part in parts:
        if part[0] == "gaussian":
            pld = pldlib.from_gaussian_mechanism(part[1] / math.sqrt(part[2]),
                                                 pessimistic_estimate=pessimistic, **kw)
        elif part[0] == "poisson":
            rel = (dpa.NeighboringRelation.REPLACE_ONE if part[4] == "replace-one"
                   else dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
            pld = pldlib.from_gaussian_mechanism(part[1], sampling_prob=part[2],
                                                 neighboring_relation=rel,
                                                 pessimistic_estimate=pessimistic,
                                                 **kw).self_compose(part[3])
        else:
            pld = pldlib.from_privacy_parameters(
                dpa.pld.common.DifferentialPrivacyParameters(part[1], 0.0), **kw
            ).self_compose(part[2])
        total = pld if total is None else total.compose(pld)
    return float(total.get_epsilon_for_delta(delta))


def pure_and_gaussian_epsilon(eps_pure, count_pure, mu, delta):
    """Exact epsilon of ``count_pure`` worst-case eps_pure-DP mechanisms (randomized response
    dominates every eps-DP mechanism, Kairouz, Oh, Viswanath 2015) composed with a mu-GDP
    mechanism: the privacy loss is (2K - T) eps_pure + N(mu^2 / 2, mu^2) with K ~ Bin(T, p),
    p = e^eps / (1 + e^eps), so delta(eps) = sum_k P(K = k) delta_mu(eps - (2k - T) eps_pure)
    with delta_mu(x) = Phi(-x/mu + mu/2) - e^x Phi(-x/mu - mu/2) for any real x."""
    from scipy import stats

    T = int(count_pure)
    k = np.arange(T + 1)
    pk = stats.binom.pmf(k, T, 1.0 / (1.0 + math.exp(-eps_pure)))
    shift = (2 * k - T) * eps_pure

    def delta_at(eps):
        x = eps - shift
        if mu == 0:
            return float(np.sum(pk * -np.expm1(np.minimum(x, 0.0))))
        a = special.ndtr(-x / mu + mu / 2)
        b = np.exp(x + special.log_ndtr(-x / mu - mu / 2))
        return float(np.sum(pk * np.maximum(a - b, 0.0)))

    return _epsilon_at(delta_at, delta, xtol=1e-12)


def _epsilon_at(delta_of, delta, xtol):
    """The epsilon >= 0 where the non-increasing profile ``delta_of`` reaches ``delta``
    (0 if it is already below), bracketed by doubling then brentq."""
    if delta_of(0.0) <= delta:
        return 0.0
    hi = 1.0
    while delta_of(hi) > delta:
        hi *= 2.0
    return float(optimize.brentq(lambda e: delta_of(e) - delta, 0.0, hi, xtol=xtol))


# ---------------------------------------------------------------------------
# preprocessing releases (dpopt.preprocessing)


def histogram_release_epsilon(sigma, n_features, delta):
    """Epsilon of one release of ``n_features`` noisy histograms with N(0, sigma^2) on
    every count, from first principles: replacing one record moves one unit between two
    bins of each histogram, so the L2 sensitivity is sqrt(2 p); the Gaussian mechanism's
    delta(eps) is integrated numerically (hockey stick) and inverted with brentq."""
    sens = math.sqrt(2.0 * n_features)
    return _epsilon_at(lambda e: hockey_stick_gaussian(sens, sigma, e), delta, xtol=1e-10)


def gaussian_composition_epsilon(pairs, delta):
    """Epsilon of the composition of Gaussian mechanisms given as (sigma, L2 sensitivity)
    pairs, with dp-accounting's PLD built directly (pessimistic, fine grid)."""
    parts = [("gaussian", sigma / sens, 1) for sigma, sens in pairs]
    return dpa_pld_compose(parts, delta, pessimistic=True, step=1e-5)


# ---------------------------------------------------------------------------
# objective perturbation (dominating privacy loss shift + m^2/2 + m R, R ~ chi_dof)


def op_delta_quad(eps, m, shift, dof, nu=0.0):
    """delta(eps) = E_R[h(eps - shift - m^2/2 - m R)] by adaptive quadrature, with
    h(x) = E[(1 - e^(x - G))_+], G ~ N(nu^2/2, nu^2), written out from the normal CDF
    (h(x) = (1 - e^x)_+ when nu = 0); R has density 2 phi(r) (dof 1) or r e^(-r^2/2) (dof 2)."""
    from scipy import integrate, stats

    def h(x):
        if nu == 0:
            return max(0.0, 1.0 - math.exp(min(x, 0.0)))
        a = stats.norm.cdf(-x / nu + nu / 2)
        b = math.exp(x + stats.norm.logcdf(-x / nu - nu / 2)) if x < 700 else 0.0
        return max(a - b, 0.0)

    def dens(r):
        return 2 * stats.norm.pdf(r) if dof == 1 else r * math.exp(-r * r / 2)

    c = shift + m * m / 2
    # split where h changes fastest (eps - c - m r = 0) so quad sees the kink
    knot = max((eps - c) / m, 0.0) if m > 0 else 0.0
    pts = sorted({0.0, knot, knot + 1.0, 40.0})
    total = 0.0
    for a, b in zip(pts[:-1], pts[1:]):
        if b > a:
            total += integrate.quad(lambda r: dens(r) * h(eps - c - m * r), a, b,
                                    epsabs=1e-16, epsrel=1e-11, limit=400)[0]
    return total


def op_delta_closed_form(eps, m, shift):
    """Redberg, Koskela & Wang's profile (dof 1, no other mechanism), with the Gaussian
    profile delta_G(e) = Phi(-e/m + m/2) - e^e Phi(-e/m - m/2):
    2 delta_G(eps - shift) if eps - shift >= m^2/2, else 1 - 2 e^(eps - shift) Phi(-m)."""
    from scipy import stats

    e = eps - shift
    if e >= m * m / 2:
        return 2 * (stats.norm.cdf(-e / m + m / 2) - math.exp(e) * stats.norm.cdf(-e / m - m / 2))
    return 1 - 2 * math.exp(e) * stats.norm.cdf(-m)


def op_epsilon_quad(z, shift, dof, delta, z_gauss=math.inf):
    """Epsilon of objective perturbation (multiplier z) composed with a Gaussian mechanism
    (multiplier z_gauss), by root-finding on :func:`op_delta_quad`."""
    m, nu = 1 / z, (0.0 if math.isinf(z_gauss) else 1 / z_gauss)
    return _epsilon_at(lambda e: op_delta_quad(e, m, shift, dof, nu), delta, xtol=1e-12)


def op_sum_delta(eps, m, shift, k, nu=0.0, h=1e-3, r_max=40.0):
    """delta(eps) of k objective perturbations with the same (m, shift) and dof 2, composed
    with nu-GDP: E[g(eps - k (shift + m^2/2) - m S)], S = R_1 + ... + R_k, R_i iid with
    density r e^(-r^2/2), g(x) = E[(1 - e^(x - G))_+], G ~ N(nu^2/2, nu^2). The density of
    S is the k-fold numerical convolution of the Rayleigh density on a grid of step h
    (FFT), the expectation a Riemann sum (accurate to ~1e-3 relative at h = 1e-3)."""
    from scipy import signal, special

    r = np.arange(0.0, r_max, h)
    dens = r * np.exp(-r * r / 2)
    total = dens.copy()
    for _ in range(k - 1):
        total = signal.fftconvolve(total, dens)[: k * len(r)] * h
    s = np.arange(len(total)) * h
    x = eps - k * (shift + m * m / 2) - m * s
    if nu == 0:
        g = -np.expm1(np.minimum(x, 0.0))
    else:
        log_a = special.log_ndtr(-x / nu + nu / 2)
        log_b = np.minimum(x + special.log_ndtr(-x / nu - nu / 2), log_a)
        g = np.maximum(np.exp(log_a) - np.exp(log_b), 0.0)
    return float(np.sum(np.clip(total, 0.0, None) * g) * h)
