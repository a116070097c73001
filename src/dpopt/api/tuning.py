"""Private hyperparameter selection by random stopping (Papernot & Steinke 2022).

N. Papernot, T. Steinke, "Hyperparameter Tuning with Renyi Differential
Privacy", ICLR 2022. The base algorithm Q draws a candidate uniformly from
the grid (independently of the data), fits it privately on a training split
and scores it privately on a disjoint validation split. The search runs Q a
random number K of times, K independent of the data, and releases the run
with the best noisy score (and nothing else about the other runs).

Privacy of one run Q (replace-one adjacency)
    the fit's own mechanisms (its ``FitResult.mechanisms``) composed with the
    score: the mean over the m validation records of a per-record score in
    an interval of length 1 (accuracy for a classifier; for a regressor
    -min(|y - f(x)|, score_clip) / score_clip), so replacing one record moves
    it by at most 1/m, plus Laplace noise of scale 1/(m score_epsilon): a
    ``Laplace(1 / score_epsilon)`` record. Q mixes the candidates with
    data-independent weights, so its Renyi divergence at every order is at
    most the largest one among the candidates (joint quasi-convexity), and
    its (eps, delta) curve is at most the largest delta among them.

The mechanisms of each candidate are obtained *before touching the data* by
fitting it on a public surrogate dataset of the same shape (standard normal
features, arbitrary labels): the calibrated noise depends only on (n, p),
the target (epsilon, delta) and the hyperparameters. Every real fit is then
checked to have exactly these mechanisms (else the search stops with an
error: the analysis would not hold).

Repetitions and total privacy (Renyi DP of order lambda, then converted)
    ``distribution="truncated-negative-binomial"`` (Theorem 2): K ~ D_{eta,gamma},
    P(K = k) proportional to binom(k + eta - 1, k) (1 - gamma)^k for k >= 1
    (eta = 1: geometric, eta = 0: logarithmic). The search is (lambda, eps')-RDP
    with eps' = eps_Q(lambda) + (1 + eta)(1 - 1/mu) eps_Q(mu)
    + (1 + eta) log(1/gamma) / mu + log E[K] / (lambda - 1), minimised over mu.
    ``"poisson"`` (Theorem 6): K ~ Poisson(mean); if Q is (eps_hat, delta_hat)-DP
    with eps_hat = log(1 + 1/(lambda - 1)), the search is (lambda, eps')-RDP with
    eps' = eps_Q(lambda) + mean * delta_hat + log(mean) / (lambda - 1)
    (delta_hat from the PLD accountant). With K = 0 nothing is selected.
The RDP curve is converted to (epsilon, delta)-DP with dp-accounting's
conversion (Canonne, Kamath, Steinke 2020, Prop. 12), minimised over the
orders.

Limits. The search is analysed under replace-one adjacency only, and the
RDP accountant has no replace-one analysis of Poisson subsampling, so
candidates whose fits are Poisson-subsampled (DP-SGD) are refused; solvers
whose mechanisms are Gaussian, Laplace, pure DP, zCDP or subsampled without
replacement work.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon
from scipy import optimize
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.model_selection import ParameterGrid
from sklearn.utils.validation import check_is_fitted, validate_data

from dpopt._core.exceptions import PrivacyLeakWarning
from dpopt._core.validation import check_choice, check_delta, check_scalar, default_delta
from dpopt.privacy import Laplace, SubsampledGaussian
from dpopt.privacy.accounting import _RDP_ORDERS, PLD_DISCRETIZATION, _pld_of, rdp_accountant
from dpopt.privacy.budget import Spend, _unbudgeted, resolve_budget

__all__ = ["PrivateHyperparameterSearch", "selection_epsilon", "rdp_curve",
           "truncated_negative_binomial_gamma", "sample_repetitions"]

DISTRIBUTIONS = ("truncated-negative-binomial", "poisson")
ORDERS = np.asarray(_RDP_ORDERS, dtype=np.float64)


# ---------------------------------------------------------------------------
# accounting


def rdp_curve(mechanisms, orders=ORDERS) -> np.ndarray:
    """Renyi DP of the composition of ``mechanisms`` (replace-one, unsampled or
    sampled without replacement) at every order."""
    if any(isinstance(m, SubsampledGaussian) and m.sampling == "poisson" for m in mechanisms):
        raise ValueError("the RDP accountant has no replace-one analysis of Poisson "
                         "subsampling: private selection does not support this solver")
    return np.asarray(rdp_accountant(mechanisms, "replace-one", orders).rdp, dtype=np.float64)


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


# ---------------------------------------------------------------------------
# the search


class PrivateHyperparameterSearch(MetaEstimatorMixin, BaseEstimator):
    """Select hyperparameters of a dpopt estimator privately (random stopping).

    Parameters
    ----------
    estimator : a dpopt estimator (``dpopt.DPLasso(...)``, ...)
        Its own ``epsilon`` / ``delta`` (or those of the grid) are the privacy of
        one fit; the search's total is larger and reported in ``epsilon_spent_``.
    param_grid : dict or list of dicts
        As scikit-learn's ``ParameterGrid``; each run draws one candidate uniformly.
    distribution : "truncated-negative-binomial" or "poisson"
    mean_repetitions : float, default 10
        E[K], the expected number of runs.
    eta : float, default 1.0 (geometric)
        Shape of the truncated negative binomial, > -1.
    score_epsilon : float, default 0.1
        Privacy of each noisy validation score (Laplace, see module docstring).
    validation_fraction : float, default 0.2
        Share of the records held out (a random, data-independent split).
    score_clip : float or None
        Regressors only (required): residuals are clipped to this to bound the score.
    delta : float or None
        delta of the reported total; default 1/n^2.
    random_state : None or int
    accountant : dpopt.BudgetAccountant or None
        The search's total is checked and recorded as one black-box entry.

    Attributes
    ----------
    best_estimator_, best_params_ (None if K = 0), best_score_ (noisy),
    n_repetitions_ (K), epsilon_spent_, delta_spent_, candidate_mechanisms_,
    privacy_leaks_ (messages of the inner fits' PrivacyLeakWarnings).
    """

    def __init__(self, estimator, param_grid, *, distribution="truncated-negative-binomial",
                 mean_repetitions=10.0, eta=1.0, score_epsilon=0.1, validation_fraction=0.2,
                 score_clip=None, delta=None, random_state=None, accountant=None):
        self.estimator = estimator
        self.param_grid = param_grid
        self.distribution = distribution
        self.mean_repetitions = mean_repetitions
        self.eta = eta
        self.score_epsilon = score_epsilon
        self.validation_fraction = validation_fraction
        self.score_clip = score_clip
        self.delta = delta
        self.random_state = random_state
        self.accountant = accountant

    # -- parameters --------------------------------------------------------------
    def _check_params(self, n):
        check_choice(self.distribution, "distribution", DISTRIBUTIONS)
        check_scalar(self.mean_repetitions, "mean_repetitions", low=1.0, low_open=True)
        check_scalar(self.eta, "eta", low=-1.0, low_open=True)
        check_scalar(self.score_epsilon, "score_epsilon", low=0.0, low_open=True)
        check_scalar(self.validation_fraction, "validation_fraction", low=0.0, high=1.0,
                     low_open=True, high_open=True)
        if not is_classifier(self.estimator):
            if self.score_clip is None:
                raise ValueError("score_clip must be given for a regressor (it bounds the "
                                 "validation score's sensitivity)")
            check_scalar(self.score_clip, "score_clip", low=0.0, low_open=True)
        candidates = list(ParameterGrid(self.param_grid))
        if not candidates:
            raise ValueError("param_grid must contain at least one candidate")
        for c in candidates:
            if "accountant" in c or "random_state" in c:
                raise ValueError("param_grid must not set accountant or random_state")
        delta = default_delta(n) if self.delta is None else check_delta(self.delta)
        if not isinstance(self.random_state, (type(None), numbers.Integral)):
            raise ValueError(f"random_state must be None or an int, got {self.random_state!r}")
        return candidates, delta

    # -- fit ------------------------------------------------------------------------
    def fit(self, X, y):
        """Run the search; the whole search is one (epsilon_spent_, delta_spent_) release.

        Refused over budget (``BudgetExceededError``) before touching the data,
        leaving the search as it was. Data-dependent constants computed by the
        inner fits are reported once each as ``PrivacyLeakWarning`` and kept in
        ``privacy_leaks_``.
        """
        state = dict(self.__dict__)
        try:
            return self._fit(X, y)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(state)
            raise

    def _fit(self, X, y):
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=np.float64,
                             y_numeric=not is_classifier(self.estimator))
        n = X.shape[0]
        candidates, delta = self._check_params(n)
        rng = np.random.default_rng(self.random_state)
        perm = rng.permutation(n)
        m = max(1, int(round(self.validation_fraction * n)))
        if n - m < 2:
            raise ValueError(f"n_samples={n} is too small for validation_fraction="
                             f"{self.validation_fraction}")
        val, train = perm[:m], perm[m:]
        mechanisms = self._probe(candidates, len(train), X.shape[1], X)
        score_mech = Laplace(1.0 / float(self.score_epsilon))
        total = self._total_epsilon([mechs + [score_mech] for mechs in mechanisms], delta)
        budget = resolve_budget(self.accountant)
        if budget is None:
            self._search(X, y, train, val, candidates, mechanisms, rng)
        else:
            with budget.spend(total, delta, label="hyperparameter search") as slot:
                self._search(X, y, train, val, candidates, mechanisms, rng)
                slot.record(Spend("hyperparameter search", total, delta, "replace-one",
                                  f"rdp ({self.distribution} random stopping)"))
        self.candidate_mechanisms_ = mechanisms
        self.epsilon_spent_ = total
        self.delta_spent_ = delta
        for msg in self.privacy_leaks_:
            warnings.warn(msg, PrivacyLeakWarning, stacklevel=3)
        return self

    def _probe(self, candidates, n_train, p, X):
        """Each candidate's mechanisms, from a fit on public surrogate data."""
        prng = np.random.default_rng(12345)
        if sp.issparse(X) and n_train * p > 2_000_000:
            Xs = sp.random(n_train, p, density=min(1.0, 10.0 / p), format="csr", random_state=prng,
                           data_rvs=prng.standard_normal)
            Xs = Xs + sp.csr_matrix((np.ones(p), (np.arange(p) % n_train, np.arange(p))),
                                    shape=(n_train, p))
        else:
            Xs = prng.standard_normal((n_train, p))
        ys = (np.arange(n_train) % 2 if is_classifier(self.estimator)
              else prng.standard_normal(n_train))
        out = []
        for c in candidates:
            est = self._candidate(c, seed=0)
            with _unbudgeted(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(Xs, ys)
            res = est.fit_result_
            if math.isinf(res.epsilon):
                raise ValueError(f"candidate {c} is not private (epsilon=inf)")
            if res.adjacency != "replace-one":
                raise ValueError(f"candidate {c} is certified under {res.adjacency} adjacency; "
                                 f"the search supports replace-one only")
            out.append(list(res.mechanisms))
        return out

    def _candidate(self, params, seed):
        est = clone(self.estimator)
        est.set_params(**params, random_state=seed, accountant=None)
        return est

    def _total_epsilon(self, q_mechanisms, delta):
        curves = np.max([rdp_curve(ms) for ms in q_mechanisms], axis=0)
        delta_hats = None
        if self.distribution == "poisson":
            eps_hat = np.log1p(1.0 / (ORDERS - 1.0))
            delta_hats = np.max([_delta_curve(ms, eps_hat) for ms in q_mechanisms], axis=0)
        return selection_epsilon(curves, delta, distribution=self.distribution,
                                 mean_repetitions=float(self.mean_repetitions),
                                 eta=float(self.eta), delta_hats=delta_hats)

    def _search(self, X, y, train, val, candidates, mechanisms, rng):
        k = sample_repetitions(rng, self.distribution, float(self.mean_repetitions),
                               float(self.eta))
        self.n_repetitions_ = k
        self.privacy_leaks_ = []
        best = (-math.inf, None, None)
        for _ in range(k):
            i = int(rng.integers(len(candidates)))
            est = self._candidate(candidates[i], seed=int(rng.integers(2 ** 31 - 1)))
            with _unbudgeted(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(X[train], y[train])
            if list(est.fit_result_.mechanisms) != mechanisms[i]:
                raise RuntimeError(f"candidate {candidates[i]} spent mechanisms that differ from "
                                   f"its data-independent probe; the selection's accounting would "
                                   f"not hold")
            self.privacy_leaks_ += [m for m in est.privacy_leaks_ if m not in self.privacy_leaks_]
            score = self._noisy_score(est, X[val], y[val], rng)
            if score > best[0]:
                best = (score, est, candidates[i])
        self.best_score_, self.best_estimator_, self.best_params_ = best
        if k == 0:
            warnings.warn("the random number of repetitions was 0: nothing was selected",
                          UserWarning, stacklevel=3)

    def _noisy_score(self, est, X, y, rng):
        pred = est.predict(X)
        if is_classifier(est):
            s = (pred == y).astype(np.float64)
        else:
            clip = float(self.score_clip)
            s = -np.minimum(np.abs(y - pred), clip) / clip
        m = len(y)
        return float(s.mean() + rng.laplace(0.0, 1.0 / (m * float(self.score_epsilon))))

    # -- delegation ---------------------------------------------------------------------
    def _best(self):
        check_is_fitted(self, "n_repetitions_")
        if self.best_estimator_ is None:
            raise ValueError("no candidate was selected (the number of repetitions was 0)")
        return self.best_estimator_

    def predict(self, X):
        return self._best().predict(X)

    def predict_proba(self, X):
        return self._best().predict_proba(X)

    def decision_function(self, X):
        return self._best().decision_function(X)

    def score(self, X, y):
        return self._best().score(X, y)
