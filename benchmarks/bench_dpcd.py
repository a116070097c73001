"""Speed of DP-CD, DP-GD and DP-SGD against references measured in the same run.

    python benchmarks/bench_dpcd.py            # issue 3's sizes (a few minutes)
    python benchmarks/bench_dpcd.py --small    # 10x smaller problems (seconds)

Prints the ratios of issue 3's table:

* DP-CD least-squares epoch / scikit-learn Lasso coordinate-descent epoch (dense)  target <= 1
* DP-CD logistic epoch / (one X.T @ v + np.exp over n*p values) (dense)           target <= 1.5
* DP-CD logistic epoch / scikit-learn Lasso epoch (sparse CSC)                     target <= 2
* DP-GD step / X.T @ v (dense)                                                     target <= 1.3
* DP-SGD pass / DP-CD pass on California and Electricity ($DPOPT_DATA)             target >= 4

Method. Every time is the CPU time of the calling thread (``time.thread_time``;
the machine may be shared, and wall time would count other processes), minimum
over ``--repeats`` repetitions, with BLAS limited to one thread (all the
solvers are single threaded). A solver's per-pass time is measured as
(t(k2 passes) - t(k1 passes)) / (k2 - k1) on full ``dpopt.solve`` calls, so
set-up (validation, calibration, the margins, scikit-learn's input checks and
final duality gap) cancels out; scikit-learn's Lasso is timed the same way
with ``max_iter=k, tol=0``. All solvers get their smoothness constants as
arrays (no data-dependent set-up in the timed region).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import dpopt  # noqa: E402


def cpu_min(func, repeats):
    """Minimum thread CPU time of ``func()`` over ``repeats`` calls (after one warm-up)."""
    func()
    best = math.inf
    for _ in range(repeats):
        t0 = time.thread_time()
        func()
        best = min(best, time.thread_time() - t0)
    return best


def per_pass(run, k1, k2, repeats):
    """(t(k2) - t(k1)) / (k2 - k1) with t the minimum CPU time of ``run(k)`` (the two
    lengths are timed alternately, so a change of machine load hits both)."""
    run(k1)
    run(k2)
    t1 = t2 = math.inf
    for _ in range(repeats):
        t0 = time.thread_time()
        run(k1)
        t1 = min(t1, time.thread_time() - t0)
        t0 = time.thread_time()
        run(k2)
        t2 = min(t2, time.thread_time() - t0)
    return max(t2 - t1, 1e-12) / (k2 - k1)


def sklearn_lasso_epoch(X, y, alpha, repeats, k1=2, k2=12, selection="cyclic"):
    """Per-epoch time of scikit-learn's Lasso; ``alpha`` should be small enough that
    its gap-safe screening keeps (almost) every feature active (checked by the caller)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import Lasso

    def run(k):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return Lasso(alpha=alpha, fit_intercept=False, tol=0.0, max_iter=k,
                         selection=selection, random_state=0).fit(X, y)

    return per_pass(run, k1, k2, repeats), float(np.mean(run(k2).coef_ != 0))


def solver_pass(problem, solver, repeats, k1=2, k2=12, **opts):
    def run(k):
        dpopt.solve(problem, solver, epsilon=1.0, random_state=0, passes=k, **opts)

    return per_pass(run, k1, k2, repeats)


def dense_data(n, p, seed=0):
    rng = np.random.default_rng(seed)
    X = np.asfortranarray(rng.standard_normal((n, p)))
    w = rng.standard_normal(p) * (rng.random(p) < 0.5)
    y = X @ w / math.sqrt(p) + rng.standard_normal(n)
    return X, y


def sparse_data(n, p, nnz, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, p, density=nnz / (n * p), format="csc", random_state=rng,
                  data_rvs=rng.standard_normal)
    w = rng.standard_normal(p) * (rng.random(p) < 0.1)
    y = X @ w + 0.5 * rng.standard_normal(n)
    return X, y


def dense_rows(n, p, repeats):
    X, y = dense_data(n, p)
    ylog = np.where(y > 0, 1.0, -1.0)
    sq = dpopt.Problem(X, y, loss="squared", penalty="l1", alpha=1e-3)
    lg = dpopt.Problem(X, ylog, loss="logistic", penalty="l2", alpha=1e-3)
    v = np.random.default_rng(1).standard_normal(n)
    A = np.random.default_rng(2).standard_normal((n, p))
    B = np.empty_like(A)
    t_xtv = cpu_min(lambda: X.T @ v, repeats)
    t_exp = cpu_min(lambda: np.exp(A, out=B), repeats)
    t_sk, active = sklearn_lasso_epoch(X, y, 1e-3, repeats)
    cd = dict(step=0.5, clip=1.0)
    t_cd_sq = solver_pass(sq, "dp-cd", repeats, smoothness=sq.coordinate_smoothness(), **cd)
    t_cd_lg = solver_pass(lg, "dp-cd", repeats, smoothness=lg.coordinate_smoothness(), **cd)
    t_gd = solver_pass(sq, "dp-gd", repeats, k1=3, k2=13, step=0.5, clip=1.0,
                       smoothness=sq.global_smoothness())
    # DP-GD reads a row-major copy of X: time X.T @ v on that copy too (same memory, same
    # cache state) and keep the faster of the two references
    Xr = sq.X_rows
    t_xtv = min(t_xtv, cpu_min(lambda: Xr.T @ v, repeats), cpu_min(lambda: X.T @ v, repeats))
    name = f"dense {n}x{p}"
    print(f"\n{name}: X.T@v {t_xtv * 1e3:.2f} ms (fastest layout), np.exp over n*p "
          f"{t_exp * 1e3:.2f} ms, "
          f"sklearn Lasso epoch {t_sk * 1e3:.2f} ms ({active:.0%} of coefficients non-zero)")
    print(f"  DP-CD epoch: least squares {t_cd_sq * 1e3:.2f} ms, logistic {t_cd_lg * 1e3:.2f} ms; "
          f"DP-GD step {t_gd * 1e3:.2f} ms")
    return [
        (f"DP-CD least-squares epoch / sklearn Lasso epoch ({name})", t_cd_sq / t_sk, "<= 1.0"),
        (f"DP-CD logistic epoch / (X.T@v + np.exp over n*p) ({name})",
         t_cd_lg / (t_xtv + t_exp), "<= 1.5"),
        (f"DP-GD step / X.T@v ({name})", t_gd / t_xtv, "<= 1.3"),
    ]


def sparse_rows(n, p, nnz, repeats):
    X, y = sparse_data(n, p, nnz)
    ylog = np.where(y > 0, 1.0, -1.0)
    lg = dpopt.Problem(X, ylog, loss="logistic", penalty="l2", alpha=1e-4)
    sq = dpopt.Problem(X, y, loss="squared", penalty="l1", alpha=1e-6)
    t_sk, active = sklearn_lasso_epoch(X, y, 1e-6, repeats)
    t_skr, _ = sklearn_lasso_epoch(X, y, 1e-6, repeats, selection="random")
    M = lg.coordinate_smoothness()
    t_cd = solver_pass(lg, "dp-cd", repeats, smoothness=M, step=0.5, clip=1.0)
    t_cd_sq = solver_pass(sq, "dp-cd", repeats, smoothness=sq.coordinate_smoothness(), step=0.5,
                          clip=1.0)
    name = f"sparse CSC {n}x{p}, {X.nnz} non-zeros"
    print(f"\n{name}: sklearn Lasso epoch {t_sk * 1e3:.2f} ms ({active:.0%} of coefficients "
          f"non-zero; {t_skr * 1e3:.2f} ms with selection='random'), DP-CD epoch: logistic "
          f"{t_cd * 1e3:.2f} ms, least squares {t_cd_sq * 1e3:.2f} ms")
    return [(f"DP-CD logistic epoch / sklearn Lasso epoch ({name})", t_cd / t_sk, "<= 2.0"),
            ("  same, vs sklearn Lasso with selection='random' (informative)", t_cd / t_skr, ""),
            ("  DP-CD least-squares epoch / sklearn Lasso epoch (informative)", t_cd_sq / t_sk,
             "")]


def real_rows(repeats):
    root = os.environ.get("DPOPT_DATA")
    rows = []
    for name, loss, penalty, alpha in (("california", "squared", "l1", 0.05),
                                       ("electricity", "logistic", "l2", 1e-3)):
        path = Path(root or ".") / f"{name}.npz"
        if not root or not path.exists():
            print(f"\n{name}: skipped ($DPOPT_DATA/{name}.npz not found)")
            continue
        data = np.load(path)
        X = data["X"].astype(np.float64)
        X = (X - X.mean(axis=0)) / X.std(axis=0)
        prob = dpopt.Problem(X, data["y"].astype(np.float64), loss=loss, penalty=penalty,
                             alpha=alpha)
        M, beta = prob.coordinate_smoothness(), prob.global_smoothness()
        t_cd = solver_pass(prob, "dp-cd", repeats, k1=5, k2=25, step=0.5, clip=1.0, smoothness=M)
        t_sgd = solver_pass(prob, "dp-sgd", repeats, k1=2, k2=6, step=0.5, clip=1.0,
                            smoothness=beta)
        b = round(math.sqrt(prob.n_samples))
        print(f"\n{name} (standardized, {prob.n_samples}x{prob.dim}, {loss}): DP-CD pass "
              f"{t_cd * 1e3:.3f} ms, DP-SGD pass {t_sgd * 1e3:.3f} ms (batch {b}, "
              f"{round(prob.n_samples / b)} steps)")
        rows.append((f"DP-SGD pass / DP-CD pass ({name})", t_sgd / t_cd, ">= 4"))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="10x smaller synthetic problems")
    parser.add_argument("--repeats", type=int, default=5, help="repetitions (minimum is kept)")
    parser.add_argument("--skip-sparse", action="store_true")
    parser.add_argument("--skip-real", action="store_true")
    args = parser.parse_args(argv)
    scale = 10 if args.small else 1
    print(f"dpopt {dpopt.__version__}, numpy {np.__version__}; CPU time of one thread, BLAS "
          f"limited to 1 thread, min over {args.repeats} repeats")
    rows = []
    with threadpool_limits(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
        rows += dense_rows(10000 // scale, 1000 // scale, args.repeats)
        if not args.skip_sparse:
            rows += sparse_rows(100000 // scale, 10000 // scale, 1_000_000 // scale ** 2,
                                args.repeats)
        if not args.skip_real:
            rows += real_rows(args.repeats)
    width = max(len(r[0]) for r in rows)
    print(f"\n{'figure':<{width}}  {'ratio':>7}  target")
    for label, ratio, target in rows:
        print(f"{label:<{width}}  {ratio:7.2f}  {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
