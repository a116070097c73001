"""Prediction on a Dask DataFrame read from Parquet: lazy (the current ``predict``) against
the eager reference it replaced, measured in the same run.

    python benchmarks/bench_dask_predict.py [--rows 1000000] [--features 20] [--repeats 3]

``predict`` used to learn the encoded partitions' row counts (``compute_chunk_sizes``) when
it was called, reading and encoding every partition once more before the user's compute.
The reference does exactly that extra pass (``compute_chunk_sizes`` on the lazy result, then
``compute``); the current path computes once. Prints the best of ``--repeats`` wall times
and their ratio. The machine is shared and has 2 cores: timings are noisy.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path


def best_of(repeats, run):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import dask
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd

    import dpopt

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.standard_normal((args.rows, args.features)),
                     columns=[f"x{j}" for j in range(args.features)])
    X["city"] = rng.choice(["a", "b", "c", "d"], args.rows)
    y = (X["x0"] + rng.standard_normal(args.rows) > 0).astype(int)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = Path(tmp) / "table.parquet"
        X.to_parquet(path, row_group_size=100_000)
        model = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0).fit(X.head(20_000),
                                                                            y.head(20_000))
        frame = dd.read_parquet(path, split_row_groups=True)
        with dask.config.set(scheduler="threads"):
            lazy = best_of(args.repeats, lambda: model.predict(frame).compute())
            eager = best_of(args.repeats,
                            lambda: model.predict(frame).compute_chunk_sizes().compute())
    print(f"Dask predict, {args.rows} x {args.features + 1} from Parquet "
          f"({frame.npartitions} partitions), best of {args.repeats}:")
    print(f"  lazy (one pass)            {lazy:7.3f} s")
    print(f"  eager reference (two)      {eager:7.3f} s")
    print(f"  ratio lazy / eager         {lazy / eager:7.3f}")


if __name__ == "__main__":
    main()
