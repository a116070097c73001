"""DP-GCD speed: one iteration (one pass) against one X^T v product, measured in the same run.

    PYTHONPATH=src python benchmarks/bench_dpgcd.py [--repeat 7] [--loss logistic squared]

Figures (issue 4 targets in brackets):

* DP-GCD iteration / ``X.T @ v``, dense 10000 x 1000 Fortran-ordered X     [<= 1.5]
* DP-GCD iteration / scipy ``X.T @ v``, sparse CSR 100000 x 10000, 1e6 nnz [<= 1.5]

An iteration is the solver's whole loop body (clipped gradient, greedy scores,
noisy max, noisy update, margin update, checkpoint copy), read from the
solver's checkpoint clock (one checkpoint per iteration), so the one-off setup
(smoothness constants, calibration, margins) is excluded. Every figure is the
minimum over many measurements (robust to other load on the machine). The
DP-GCD kernels are single-threaded; the BLAS reference is timed both with one
thread and with the library default.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

import dpopt


def best_time(fn, repeat):
    fn()
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def gcd_iteration_time(problem, M, repeat, iterations=20):
    """Fastest single iteration over ``repeat`` runs, from the solver's own checkpoint clock."""
    best = np.inf
    for _ in range(repeat + 1):  # the first run compiles and caches the calibration
        res = dpopt.solve(problem, "dp-gcd", epsilon=1.0, passes=iterations, step=0.5, clip=1.0,
                          smoothness=M, checkpoint_every=1, random_state=0)
        best = min(best, float(np.min(np.diff(res.checkpoint_times))))
    return best


def dense_case(loss, repeat, rng):
    n, p = 10_000, 1_000
    X = np.asfortranarray(rng.standard_normal((n, p)))
    y = np.sign(rng.standard_normal(n)) if loss == "logistic" else rng.standard_normal(n)
    problem = dpopt.Problem(X, y, loss=loss)
    v = rng.standard_normal(n)
    Xf = problem.X
    with threadpool_limits(1, "blas"):
        ref1 = best_time(lambda: Xf.T @ v, 20 * repeat)
    ref = best_time(lambda: Xf.T @ v, 20 * repeat)
    it = gcd_iteration_time(problem, problem.coordinate_smoothness(), repeat)
    return it, ref1, ref


def sparse_case(loss, repeat, rng):
    n, p, nnz = 100_000, 10_000, 1_000_000
    X = sp.random(n, p, density=nnz / (n * p), format="csr", random_state=rng,
                  data_rvs=rng.standard_normal)
    y = np.sign(rng.standard_normal(n)) if loss == "logistic" else rng.standard_normal(n)
    problem = dpopt.Problem(X, y, loss=loss)
    v = rng.standard_normal(n)
    ref = best_time(lambda: X.T @ v, 20 * repeat)
    it = gcd_iteration_time(problem, problem.coordinate_smoothness(), repeat)
    return it, ref


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--loss", nargs="+", default=["logistic", "squared"],
                        choices=["logistic", "squared"])
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
    print(f"{'case':<44} {'iteration':>10} {'X.T@v':>9} {'ratio':>6} target")
    for loss in args.loss:
        it, ref1, ref = dense_case(loss, args.repeat, rng)
        print(f"{'dense 10000x1000 ' + loss + ' / BLAS 1 thread':<44} {it * 1e3:>8.2f}ms "
              f"{ref1 * 1e3:>7.2f}ms {it / ref1:>6.2f} <= 1.5")
        print(f"{'dense 10000x1000 ' + loss + ' / BLAS default threads':<44} {it * 1e3:>8.2f}ms "
              f"{ref * 1e3:>7.2f}ms {it / ref:>6.2f}")
        it, ref = sparse_case(loss, args.repeat, rng)
        print(f"{'sparse CSR 1e5x1e4 1e6 nnz ' + loss + ' / scipy':<44} {it * 1e3:>8.2f}ms "
              f"{ref * 1e3:>7.2f}ms {it / ref:>6.2f} <= 1.5")


if __name__ == "__main__":
    main()
