"""Speed of the DP-RBCD block kernel, as ratios to references measured in the same run.

    PYTHONPATH=src python benchmarks/bench_dp_rbcd.py [--n 20000] [--p 50] [--passes 20]

Dense and sparse (CSC, 10% non-zeros) least squares and logistic problems. For each,
seconds per pass of:

* dp-rbcd uniform vs dp-cd (same computation; ratio ~ 1 expected),
* dp-rbcd full vs dp-gd with coordinate clipping and ESO steps (same computation),
* dp-rbcd tau-nice (tau = 4, 16) vs uniform (a block shares one loss derivative
  per sample, so blocks are cheaper per coordinate update for the logistic loss),
* one pass of uniform DP-CD vs a BLAS product X^T v (the cost of one gradient).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import scipy.sparse as sp

import dpopt
from dpopt._core.exceptions import PrivacyLeakWarning


def per_pass(pb, solver, passes, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        dpopt.solve(pb, solver, epsilon=1.0, passes=1, random_state=0, **kw)  # compile
        best = np.inf
        for rep in range(5):
            t = time.perf_counter()
            dpopt.solve(pb, solver, epsilon=1.0, passes=passes, random_state=rep,
                        checkpoint_every=passes, **kw)
            best = min(best, (time.perf_counter() - t) / passes)
    return best


def blas_product(pb):
    v = np.random.default_rng(0).standard_normal(pb.n_samples)
    best = np.inf
    for _ in range(20):
        t = time.perf_counter()
        pb.X.T @ v
        best = min(best, time.perf_counter() - t)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--p", type=int, default=50)
    ap.add_argument("--passes", type=int, default=10)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    Xd = rng.standard_normal((args.n, args.p))
    Xs = sp.random(args.n, args.p, density=0.1, random_state=1, format="csc")
    y = Xd @ rng.standard_normal(args.p) + rng.standard_normal(args.n)
    print(f"n = {args.n}, p = {args.p}; seconds per pass (best of 5) and ratios")
    for kind, X in (("dense", Xd), ("sparse", Xs)):
        for loss, yy in (("squared", y), ("logistic", np.where(y > 0, 1.0, -1.0))):
            pb = dpopt.Problem(X, yy, loss, "l2", alpha=1e-3)
            omega = {"omega": args.p} if kind == "sparse" else {}
            cd = per_pass(pb, "dp-cd", args.passes)
            uni = per_pass(pb, "dp-rbcd", args.passes)
            gd = per_pass(pb, "dp-gd", args.passes, clipping="coordinate", step_rule="eso")
            full = per_pass(pb, "dp-rbcd", args.passes, sampling="full")
            nice = {t: per_pass(pb, "dp-rbcd", args.passes, sampling="nice", block_size=t,
                                **omega) for t in (4, 16)}
            blas = blas_product(pb)
            print(f"{kind:6s} {loss:8s}  uniform/dp-cd {uni / cd:5.2f}   full/dp-gd {full / gd:5.2f}"
                  f"   4-nice/uniform {nice[4] / uni:5.2f}   16-nice/uniform {nice[16] / uni:5.2f}"
                  f"   uniform pass / X^T v {uni / blas:6.1f}   (uniform {uni * 1e3:.2f} ms)")


if __name__ == "__main__":
    main()
