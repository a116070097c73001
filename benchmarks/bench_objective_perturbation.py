"""Objective perturbation's speed against scikit-learn, measured in the same run
(docs/objective_perturbation.md, "Speed").

    PYTHONPATH=src DPOPT_DATA=/path/to/data python benchmarks/bench_objective_perturbation.py \
        [--n 1000000] [--p 100] [--repeats 3] [--skip-adult]

1. Adult (dpopt.datasets.load_adult, one-hot, 32,561 x 108): the default fit
   ``DPLogisticRegression(epsilon=1)`` (private scaling, row bound and objective
   perturbation: the whole pipeline) against scikit-learn's ``LogisticRegression()`` on the
   same one-hot features standardized (non-private, max_iter=1000).
2. Synthetic n x p (default 10^6 x 100): standard normal features (standardized data),
   labels from a logistic model. scikit-learn's ``LogisticRegression()`` (lbfgs, C = 1)
   against (a) the objective-perturbation solver alone on a prepared ``dpopt.Problem``
   (public ``row_bound = sqrt(p)``, epsilon = 1, delta = 1/n^2) and (b) the default fit
   ``DPLogisticRegression(epsilon=1)``.

The breakdown of the whole default fit (scaling, held-out selection, solver) is printed by
``benchmarks/bench_default_fit.py`` (docs/default_path.md, "Speed").

Times are the best of ``--repeats`` runs after one warm-up fit (imports, Numba compilation
and the cached calibration are not timed; the cold first fit is printed too). The machine
may be shared: ratios measured in the same run are the comparable numbers.
"""

import argparse
import math
import time
import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

import dpopt


def best_time(fit, repeats):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fit()
        times.append(time.perf_counter() - start)
    return min(times), out


def adult(repeats):
    from dpopt.datasets import load_adult

    data = load_adult()
    X, X_test, _ = data.one_hot()
    y, y_test = data.y, data.y_test
    start = time.perf_counter()
    dpopt.DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
    cold = time.perf_counter() - start
    t_dp, model = best_time(lambda: dpopt.DPLogisticRegression(epsilon=1.0, random_state=0)
                            .fit(X, y), repeats)
    scaler = StandardScaler().fit(X)
    Xs, Xs_test = scaler.transform(X), scaler.transform(X_test)
    t_sk, sk = best_time(lambda: LogisticRegression(max_iter=1000).fit(Xs, y), repeats)
    print(f"Adult {X.shape[0]} x {X.shape[1]} (one-hot)")
    print(f"  DPLogisticRegression(epsilon=1) default fit: {t_dp:.3f} s (cold first fit "
          f"{cold:.3f} s), test accuracy {model.score(X_test, y_test):.4f}")
    print(f"  scikit-learn LogisticRegression (standardized): {t_sk:.3f} s, test accuracy "
          f"{sk.score(Xs_test, y_test):.4f}")
    print(f"  ratio default fit / scikit-learn: {t_dp / t_sk:.2f}")


def synthetic(n, p, repeats):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, p))
    w = rng.standard_normal(p) / math.sqrt(p)
    y = np.where(X @ w + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    t_sk, sk = best_time(lambda: LogisticRegression().fit(X, y), repeats)
    print(f"Synthetic {n} x {p} (standard normal features)")
    print(f"  scikit-learn LogisticRegression(): {t_sk:.3f} s ({int(sk.n_iter_[0])} lbfgs "
          f"iterations)")

    start = time.perf_counter()
    problem = dpopt.Problem(X, y, "logistic", fit_intercept=True)
    t_problem = time.perf_counter() - start
    opts = dict(epsilon=1.0, delta=1.0 / n ** 2, row_bound=math.sqrt(p), random_state=0)
    dpopt.solve(problem, "objective-perturbation", **opts)  # warm-up: the calibration cache
    t_op, res = best_time(lambda: dpopt.solve(problem, "objective-perturbation", **opts),
                          repeats)
    agree = np.mean(np.sign(X @ res.coef + res.intercept) == sk.predict(X))
    print(f"  objective perturbation solver (Problem prepared in {t_problem:.3f} s): "
          f"{t_op:.3f} s, {res.n_iter} iterations; ratio to scikit-learn {t_op / t_sk:.2f} "
          f"(with the Problem {(t_op + t_problem) / t_sk:.2f}); predictions agree with "
          f"scikit-learn on {agree:.4f}")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. WeakPrivacyWarning on tiny samples
        dpopt.DPLogisticRegression(epsilon=1.0, random_state=0).fit(X[:5000], y[:5000])
        t_dp, model = best_time(lambda: dpopt.DPLogisticRegression(epsilon=1.0, random_state=0)
                                .fit(X, y), repeats)
    print(f"  DPLogisticRegression(epsilon=1) default fit: {t_dp:.3f} s; ratio to "
          f"scikit-learn {t_dp / t_sk:.2f}; training accuracy {model.score(X, y):.4f} "
          f"(scikit-learn {sk.score(X, y):.4f})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, default=1e6)
    parser.add_argument("--p", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-adult", action="store_true")
    args = parser.parse_args()
    if not args.skip_adult:
        adult(args.repeats)
    synthetic(int(args.n), args.p, args.repeats)


if __name__ == "__main__":
    main()
