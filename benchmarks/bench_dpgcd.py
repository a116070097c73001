"""DP-GCD speed: one iteration (one pass) against one X^T v product, measured in the same run.

    PYTHONPATH=src python benchmarks/bench_dpgcd.py [--repeat 7] [--loss logistic squared]

Figures (issue 4 targets in brackets):

* DP-GCD iteration / ``X.T @ v``, dense 10000 x 1000 Fortran-ordered X     [<= 1.5]
* DP-GCD iteration / scipy ``X.T @ v``, sparse CSR 100000 x 10000, 1e6 nnz [<= 1.5]

An iteration is the solver's whole loop body (clipped gradient, greedy scores,
noisy max, noisy update, margin update, checkpoint copy), read from the
solver's checkpoint clock (one checkpoint per iteration), so the one-off setup
(smoothness constants, calibration, margins) is excluded. The reference and
the solver are timed in alternating blocks (best of 20 products, best
iteration of a 20-iteration run); the ratio printed is the median over blocks
of the per-block ratio, which is robust to other load on the machine. The
dense kernel uses Numba's threads for n p >= 2^21 (as BLAS does), so the dense
case is timed twice: everything on one thread, and both with their default
thread counts. The sparse kernel and scipy's product are single-threaded.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numba
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


def gcd_iteration_time(problem, M, iterations=20):
    """Fastest single iteration of one run, from the solver's own checkpoint clock."""
    res = dpopt.solve(problem, "dp-gcd", epsilon=1.0, passes=iterations, step=0.5, clip=1.0,
                      smoothness=M, checkpoint_every=1, random_state=0)
    return float(np.min(np.diff(res.checkpoint_times)))


def compare(problem, reference, repeat, blas_threads=None):
    """Alternate blocks of (20 reference products, one 20-iteration run); return the
    best times and the median over blocks of (best iteration / best product)."""
    M = problem.coordinate_smoothness()
    gcd_iteration_time(problem, M)  # compile, cache the calibration
    its, refs = [], []
    for _ in range(repeat):
        if blas_threads is None:
            refs.append(best_time(reference, 20))
        else:
            with threadpool_limits(blas_threads, "blas"):
                refs.append(best_time(reference, 20))
        its.append(gcd_iteration_time(problem, M))
    ratios = np.array(its) / np.array(refs)
    return min(its), min(refs), float(np.median(ratios))


def dense_problem(loss, rng):
    n, p = 10_000, 1_000
    X = np.asfortranarray(rng.standard_normal((n, p)))
    y = np.sign(rng.standard_normal(n)) if loss == "logistic" else rng.standard_normal(n)
    return dpopt.Problem(X, y, loss=loss), rng.standard_normal(n)


def sparse_problem(loss, rng):
    n, p, nnz = 100_000, 10_000, 1_000_000
    X = sp.random(n, p, density=nnz / (n * p), format="csr", random_state=rng,
                  data_rvs=rng.standard_normal)
    y = np.sign(rng.standard_normal(n)) if loss == "logistic" else rng.standard_normal(n)
    return dpopt.Problem(X, y, loss=loss), X, rng.standard_normal(n)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--loss", nargs="+", default=["logistic", "squared"],
                        choices=["logistic", "squared"])
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    threads = numba.get_num_threads()
    warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
    print(f"{'case':<46} {'iteration':>10} {'X.T@v':>9} {'best/best':>9} {'ratio':>6} target")

    def row(name, it, ref, ratio, target=""):
        print(f"{name:<46} {it * 1e3:>8.2f}ms {ref * 1e3:>7.2f}ms {it / ref:>9.2f} {ratio:>6.2f} "
              f"{target}")

    for loss in args.loss:
        problem, v = dense_problem(loss, rng)
        Xf = problem.X
        numba.set_num_threads(1)
        row(f"dense 10000x1000 {loss}, 1 thread each",
            *compare(problem, lambda Xf=Xf, v=v: Xf.T @ v, args.repeat, blas_threads=1), "<= 1.5")
        numba.set_num_threads(threads)
        row(f"dense 10000x1000 {loss}, default threads ({threads})",
            *compare(problem, lambda Xf=Xf, v=v: Xf.T @ v, args.repeat), "<= 1.5")
        problem, X, v = sparse_problem(loss, rng)
        row(f"sparse CSR 1e5x1e4 1e6 nnz {loss} / scipy",
            *compare(problem, lambda X=X, v=v: X.T @ v, args.repeat), "<= 1.5")
    print("iteration, X.T@v: best times over all blocks; ratio: median over blocks of the "
          "per-block ratio (the figure compared with the target)")


if __name__ == "__main__":
    main()
