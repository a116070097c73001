"""Heavy-tailed family: the theorems' parameter rules (iterations, clip, steps)."""

from __future__ import annotations

import math

import numpy as np

# ---------------------------------------------------------------------------
# parameter rules (theorems; constants up to absolute factors, knobs default 1)


def acsa_iterations(n, d, eps, k, beta_d_over_r):
    """Theorem 31: T = ceil(min{(beta D / r_k)^(2k/(5k-1)) (eps n / sqrt d)^((2k-2)/(5k-1)),
    sqrt(beta D / r_k) n^(1/4)}), at least 1."""
    a = beta_d_over_r
    t2 = math.sqrt(a) * n ** 0.25
    if math.isinf(eps):
        t = t2
    else:
        t1 = a ** (2 * k / (5 * k - 1)) * (eps * n / math.sqrt(d)) ** ((2 * k - 2) / (5 * k - 1))
        t = min(t1, t2)
    return max(1, int(math.ceil(t)))


def one_pass_clip(r, n, d, eps, T, k, prox=False):
    """Theorems 31/34: C = r_k (eps n / sqrt(d T))^(1/k); Theorem 48 (``prox``):
    C = r_k (eps n / (sqrt(d) T))^(1/k)."""
    if math.isinf(eps):
        return math.inf
    denom = math.sqrt(d) * T if prox else math.sqrt(d * T)
    return r * (eps * n / denom) ** (1.0 / k)


def clip_fraction(n, d, eps, T, prox=False):
    """q such that the theorems' C is the Markov bound on the (1 - q)-quantile."""
    if math.isinf(eps):
        return 0.0
    return (math.sqrt(d) * T if prox else math.sqrt(d * T)) / (eps * n)


def sgd_iterations(n, d, eps, k, kappa, scale):
    """Theorem 34: T = ceil(4 kappa ln(scale (n + (eps^2 n^2 / d)^((k-1)/k)))),
    scale = mu beta D^2 / r_k^2 (1 when unknown); at least 1."""
    inner = n if math.isinf(eps) else n + (eps * eps * n * n / d) ** ((k - 1) / k)
    return max(1, int(math.ceil(4.0 * kappa * math.log(max(scale * inner, math.e)))))


def stich_schedule(T, beta, mu):
    """Step sizes eta_t and averaging weights zeta_t, t = 0..T-1 (Stich 2019, Lemma 3,
    with a = mu/2, g = beta, as Theorem 34 prescribes; kappa_S = 2g/a = 4 beta/mu)."""
    kappa_s = 4.0 * beta / mu
    if T <= 2.0 * beta / mu:
        eta = np.full(T, 1.0 / beta)
        # zeta_t = (1 - a eta)^(-(t+1)); normalised in log space against overflow
        log_w = -(np.arange(T) + 1.0) * math.log1p(-min(mu / (2.0 * beta), 1 - 1e-16))
        zeta = np.exp(log_w - log_w.max())
        return eta, zeta
    t0 = int(math.ceil(T / 2.0))
    t = np.arange(T, dtype=np.float64)
    shift = kappa_s + np.maximum(t - t0, 0.0)
    eta = np.where(t < t0, 1.0 / beta, 4.0 / (mu * shift))
    zeta = np.where(t < t0, 0.0, shift ** 2)
    return eta, zeta


def proxsgd_iterations(n, kappa, gap=None, mu=None, bias_var=None):
    """Theorem 48: T = 2 ceil(kappa ln(Delta mu / (B^2 + Sigma^2))) when the gap bound
    Delta is known, else the fallback T = 2 ceil(kappa ln n); at least 2."""
    if gap is None or bias_var is None or bias_var <= 0:
        return max(2, 2 * int(math.ceil(kappa * math.log(max(n, 2)))))
    return max(2, 2 * int(math.ceil(kappa * math.log(max(gap * mu / bias_var, math.e)))))


