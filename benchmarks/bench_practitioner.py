"""Practitioner layer: how tight the budget is, what private selection costs, and the
estimator's overhead over a raw ``dpopt.solve``.

    PYTHONPATH=src python benchmarks/bench_practitioner.py

Prints ratios measured in this run: total epsilon of k fits under the BudgetAccountant vs
basic composition; the private hyperparameter search's epsilon vs composing E[K] runs; and the
wall time of DPLasso.fit vs dpopt.solve on the same problem (median of repeats).
"""

import time
import warnings

import numpy as np

import dpopt
from dpopt.api.tuning import rdp_curve, selection_epsilon
from dpopt.privacy import Gaussian, Laplace, calibrate_gaussian, epsilon_of
from dpopt.privacy.budget import Spend


def budget_table():
    print("k fits of (eps_i, 1e-7); total at delta = 1e-5")
    print(f"{'k':>4} {'eps_i':>6} {'basic':>8} {'dpopt (Gaussian, exact)':>24} "
          f"{'dpopt (black-box PLD)':>22} {'ratio to basic':>15}")
    for k, eps in ((2, 0.5), (5, 0.2), (10, 0.1), (50, 0.05)):
        cal = calibrate_gaussian(eps, 1e-7, 100)
        gauss = dpopt.BudgetAccountant(epsilon=100.0, delta=1e-5)
        box = dpopt.BudgetAccountant(epsilon=100.0, delta=1e-5)
        for _ in range(k):
            gauss.record(Spend("fit", cal.epsilon, 1e-7, "replace-one", "exact",
                               (Gaussian(cal.noise_multiplier, 100),)))
            box.record(Spend("fit", eps, 1e-7, "replace-one"))
        basic = gauss.basic_composition()[0]
        print(f"{k:>4} {eps:>6g} {basic:>8.3f} {gauss.spent():>24.3f} {box.spent():>22.3f} "
              f"{gauss.spent() / basic:>15.3f}")


def selection_table():
    print("\nprivate selection: one run = fit at (1, 1e-7) + score Laplace(eps 0.1); delta 1e-6")
    cal = calibrate_gaussian(1.0, 1e-7, 100)
    q = [Gaussian(cal.noise_multiplier, 100), Laplace(10.0)]
    single = epsilon_of(q, 1e-6, accountant="pld")
    curve = rdp_curve(q)
    print(f"{'E[K]':>5} {'one run':>8} {'TNB eta=1':>10} {'E[K] runs composed (PLD)':>25} "
          f"{'ratio':>6}")
    for mean in (2, 5, 10, 20):
        tnb = selection_epsilon(curve, 1e-6, distribution="truncated-negative-binomial",
                                mean_repetitions=mean)
        composed = epsilon_of(q * mean, 1e-6, accountant="pld")
        print(f"{mean:>5} {single:>8.3f} {tnb:>10.3f} {composed:>25.3f} {tnb / composed:>6.3f}")


def overhead():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20000, 50))
    y = X @ rng.standard_normal(50) + rng.standard_normal(20000)
    opts = {"passes": 10, "smoothness": np.ones(51)}
    est = dpopt.DPLasso(alpha=0.01, epsilon=1.0, random_state=0, solver="dp-cd",
                        solver_options=opts)
    problem = dpopt.Problem(X, y, "squared", "l1", alpha=0.01, fit_intercept=True)
    est.fit(X, y)  # compile
    t_est, t_raw = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(5):
            t = time.perf_counter()
            est.fit(X, y)
            t_est.append(time.perf_counter() - t)
            t = time.perf_counter()
            dpopt.Problem(X, y, "squared", "l1", alpha=0.01, fit_intercept=True)
            dpopt.solve(problem, "dp-cd", epsilon=1.0, delta=1 / 20000 ** 2, random_state=0,
                        **opts)
            t_raw.append(time.perf_counter() - t)
    print(f"\nDPLasso.fit vs Problem + dpopt.solve (n=20000, p=50, 10 passes): "
          f"{np.median(t_est):.4f} s vs {np.median(t_raw):.4f} s, "
          f"ratio {np.median(t_est) / np.median(t_raw):.2f}")


if __name__ == "__main__":
    budget_table()
    selection_table()
    overhead()
