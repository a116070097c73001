"""The default path on chunked data: what the held-out choice costs out of core.

    python benchmarks/bench_chunked_auto.py [--rows 400000] [--features 20] [--repeats 2]

Synthetic n x p data in a ``distributed.LocalCluster`` (2 worker threads), persisted as row
chunks. For ``DPLogisticRegression(epsilon=1)`` and ``DPLinearRegression(epsilon=1)`` it prints
the best of ``--repeats`` wall times of the chunked default fit with the held-out choice
(dpopt.pipeline.selection: the training rows a ``ChunkedProblem.take``, one more pass for the
held-out sums), of the same fit without it (``MIN_VALIDATION`` set out of reach, the
reference measured in the same run), and of the in-memory default fit, with the ratios.
The machine is shared and has 2 cores: timings are noisy.
"""

from __future__ import annotations

import argparse
import time
import warnings


def best_of(repeats, est, X, y):
    """The best wall time of ``repeats`` default fits of ``est`` at epsilon = 1."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        est(epsilon=1.0, random_state=0).fit(X, y)
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--chunk-rows", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)

    import dask.array as da
    import numpy as np
    from distributed import Client, LocalCluster

    import dpopt
    from dpopt.pipeline import selection

    rng = np.random.default_rng(0)
    n, p = args.rows, args.features
    X = rng.standard_normal((n, p)) * rng.uniform(0.5, 20.0, p) + rng.uniform(-5, 5, p)
    signal = X @ rng.standard_normal(p) / np.sqrt(p)
    targets = {dpopt.DPLogisticRegression: (signal + rng.standard_normal(n) > 0).astype(float),
               dpopt.DPLinearRegression: signal + rng.standard_normal(n)}
    warnings.simplefilter("ignore")
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False) as cluster, \
            Client(cluster):
        Xd = da.from_array(X, chunks=(args.chunk_rows, p)).persist()
        print(f"{n} x {p}, chunks of {args.chunk_rows} rows, best of {args.repeats}")
        print(f"{'estimator':22s} {'with choice':>12s} {'without':>9s} {'ratio':>6s} "
              f"{'in memory':>10s} {'ratio':>6s}")
        default = selection.MIN_VALIDATION
        for est, y in targets.items():
            yd = da.from_array(y, chunks=args.chunk_rows).persist()
            with_choice = best_of(args.repeats, est, Xd, yd)
            selection.MIN_VALIDATION = 10 ** 18
            try:
                without = best_of(args.repeats, est, Xd, yd)
            finally:
                selection.MIN_VALIDATION = default
            memory = best_of(args.repeats, est, X, y)
            print(f"{est.__name__:22s} {with_choice:11.2f}s {without:8.2f}s "
                  f"{with_choice / without:6.2f} {memory:9.2f}s {with_choice / memory:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
