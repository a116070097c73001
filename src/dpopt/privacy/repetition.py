"""Private selection by random repetition (Papernot & Steinke, "Hyperparameter Tuning with
Renyi Differential Privacy", ICLR 2022): run a private mechanism a random number of times
(truncated negative binomial or Poisson) and release the best run; the Renyi-DP curve of
one run, the curve of the repeated selection, and the draw of the number of repetitions.
Used by :class:`dpopt.api.tuning.PrivateHyperparameterSearch`.
"""

from __future__ import annotations

import math

import numpy as np
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon
from scipy import optimize

from dpopt._core.validation import check_scalar
from dpopt.privacy.accounting import (
    _RDP_ORDERS,
    PLD_DISCRETIZATION,
    _op_rdp,
    _pld_of,
    rdp_accountant,
)
from dpopt.privacy.events import ObjectivePerturbation, SubsampledGaussian

DISTRIBUTIONS = ("truncated-negative-binomial", "poisson")


ORDERS = np.asarray(_RDP_ORDERS, dtype=np.float64)


def rdp_curve(mechanisms, orders=ORDERS) -> np.ndarray:
    """Renyi DP of the composition of ``mechanisms`` (replace-one, unsampled or
    sampled without replacement) at every order.

    Objective-perturbation records (the default path of the logistic and Huber
    estimators) enter by their dominating privacy loss Y = shift + m^2/2 + m R,
    R ~ chi_dof (:class:`dpopt.privacy.ObjectivePerturbation`): first-order dominance
    bounds every E[e^{(a-1) loss}], so the Renyi divergence of order a is at most
    shift + m^2/2 + log E[e^{(a-1) m R}] / (a - 1), added to the curve of the others
    (RDP composes by addition, Mironov 2017)."""
    if any(isinstance(m, SubsampledGaussian) and m.sampling == "poisson" for m in mechanisms):
        raise ValueError("the RDP accountant has no replace-one analysis of Poisson "
                         "subsampling: private selection does not support this solver")
    ops = [m for m in mechanisms if isinstance(m, ObjectivePerturbation)]
    others = [m for m in mechanisms if not isinstance(m, ObjectivePerturbation)]
    curve = np.asarray(rdp_accountant(others, "replace-one", orders).rdp, dtype=np.float64)
    orders = np.asarray(orders, dtype=np.float64)
    return curve + sum((_op_rdp(m, orders) for m in ops), np.zeros_like(curve))


def _delta_curve(mechanisms, epsilons) -> np.ndarray:
    """delta(eps) of the composition (PLD, pessimistic) at each eps."""
    total = None
    for m in mechanisms:
        pld = _pld_of(m, "replace-one", PLD_DISCRETIZATION)
        total = pld if total is None else total.compose(pld)
    eps = np.asarray(epsilons, dtype=np.float64)
    order = np.argsort(eps)
    out = np.empty_like(eps)
    out[order] = total.get_delta_for_epsilon(list(eps[order]))
    return out


def _expected_tnb(eta, gamma) -> float:
    if eta == 0:
        return (1.0 / gamma - 1.0) / math.log(1.0 / gamma)
    return eta * (1.0 - gamma) / (gamma * (1.0 - gamma ** eta))


def truncated_negative_binomial_gamma(mean, eta) -> float:
    """gamma in (0, 1) such that E[K] = ``mean`` for K ~ D_{eta, gamma}."""
    mean = check_scalar(mean, "mean_repetitions", low=1.0, low_open=True)
    eta = check_scalar(eta, "eta", low=-1.0, low_open=True)

    def f(log_gamma):
        return math.log(_expected_tnb(eta, math.exp(log_gamma))) - math.log(mean)

    lo, hi = -60.0, math.log1p(-1e-12)
    if f(lo) < 0:
        raise ValueError(f"mean_repetitions={mean} is not reachable with eta={eta}")
    return math.exp(optimize.brentq(f, lo, hi, xtol=1e-14))


def selection_epsilon(curves, delta, *, distribution, mean_repetitions, eta=1.0,
                      delta_hats=None, orders=ORDERS) -> float:
    """Epsilon at ``delta`` of the random-stopping search (module docstring).

    ``curves`` is Q's RDP at ``orders``; ``delta_hats`` (Poisson only) Q's delta at
    eps_hat = log(1 + 1/(order - 1)) for every order.
    """
    eps_q = np.asarray(curves, dtype=np.float64)
    lam = np.asarray(orders, dtype=np.float64)
    if distribution == "poisson":
        mu = float(mean_repetitions)
        eps_prime = eps_q + mu * np.asarray(delta_hats) + math.log(mu) / (lam - 1.0)
    else:
        gamma = truncated_negative_binomial_gamma(mean_repetitions, eta)
        inner = np.min((1 + eta) * (1 - 1 / lam) * eps_q + (1 + eta) * math.log(1 / gamma) / lam)
        eps_prime = eps_q + inner + math.log(_expected_tnb(eta, gamma)) / (lam - 1.0)
    eps, _ = compute_epsilon(list(lam), list(eps_prime), delta)
    return float(eps)


def sample_repetitions(rng, distribution, mean_repetitions, eta=1.0) -> int:
    """Draw K (independent of the data)."""
    if distribution == "poisson":
        return int(rng.poisson(mean_repetitions))
    gamma = truncated_negative_binomial_gamma(mean_repetitions, eta)
    # inversion: p_1 proportional to eta (1 - gamma), p_{k+1} = p_k (1 - gamma)(k + eta)/(k + 1)
    norm = math.log(1 / gamma) if eta == 0 else (gamma ** -eta - 1.0) / eta
    u = rng.random() * norm
    k, p, cum = 1, 1.0 - gamma, 0.0
    while True:
        cum += p
        if u <= cum or k > 10 ** 7:
            return k
        p *= (1.0 - gamma) * (k + eta) / (k + 1)
        k += 1
