"""Speed of the DP-SVRG inner loop against a BLAS full gradient measured in the same run.

    PYTHONPATH=src python benchmarks/bench_dp_svrg.py [--n 200000] [--p 54]

Prints seconds per epoch and the ratio to one full gradient X^T l'(Xw) / n
(numpy/BLAS). One minibatch epoch (m = n / b steps of b = sqrt(n) records)
evaluates about 2n per-sample gradients, so a ratio near 2-3 means the
Numba inner loop runs at the speed of the BLAS reference per gradient.
"""

import argparse
import math
import time
import warnings

import numpy as np

import dpopt
from dpopt.solvers.dp_svrg import TheoryConditionWarning


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--p", type=int, default=54)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.n, args.p))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(X @ rng.standard_normal(args.p) > 0, 1.0, -1.0)
    pb = dpopt.Problem(X, y, "logistic", "l2", alpha=0.01)
    w = rng.standard_normal(pb.dim) * 0.1

    ref = best_of(lambda: pb.gradient(w))
    b = round(math.sqrt(args.n))

    def epoch(batch, m):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TheoryConditionWarning)
            # epsilon = inf: no calibration in the timing, the noise is still drawn when finite
            dpopt.solve(pb, "dp-svrg", epsilon=math.inf, clip=1.0, smoothness=0.25,
                        batch_size=batch, epoch_length=m, epochs=1, random_state=0)

    epoch(b, 10)  # compile
    mini = best_of(lambda: epoch(b, round(args.n / b)))
    single = best_of(lambda: epoch(1, 5000))
    print(f"n={args.n} p={args.p}; reference: one full gradient (BLAS) {ref * 1e3:.1f} ms")
    print(f"DP-SVRG epoch, b={b}, m=n/b (full gradient + ~2n sampled gradients): "
          f"{mini * 1e3:.1f} ms = {mini / ref:.2f} x reference")
    print(f"DP-SVRG epoch, b=1, m=5000 (paper): {single * 1e3:.1f} ms = {single / ref:.2f} x "
          f"reference")


if __name__ == "__main__":
    main()
