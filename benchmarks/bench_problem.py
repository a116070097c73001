"""Cost of building a dense ``dpopt.Problem``, as a ratio to one copy of X.

    PYTHONPATH=src python benchmarks/bench_problem.py [n] [p]

Measures, in the same run (median of 3), ``np.array(X, float64, order="F")`` (one copy into the
kernels' layout) and ``dpopt.Problem(X, y, fit_intercept=...)`` for a C-ordered float64 X of
shape (n, p) (default 400,000 x 200, 640 MB), a Fortran-ordered one and an int32 one. The
Problem checks every entry (finite, magnitude limits) and adds the intercept column while it
copies, tile by tile; the target is a ratio of about 1 or less.
"""

import statistics
import sys
import time

import numpy as np

import dpopt


def _median_time(func, repeats=3):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = func()
        times.append(time.perf_counter() - start)
        del out
    return statistics.median(times)


def main(n=400_000, p=200):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, p))
    y = rng.standard_normal(n)
    dpopt.Problem(X[:10], y[:10])  # imports and kernels compiled outside the timing
    print(f"dense X of shape ({n}, {p}); times are medians of 3")
    print(f"{'input':<16} {'intercept':>9} {'copy (s)':>9} {'Problem (s)':>12} {'ratio':>6}")
    for label, data in (("C float64", X), ("F float64", np.asfortranarray(X)),
                        ("C int32", (10 * X).astype(np.int32))):
        copy = _median_time(lambda data=data: np.array(data, dtype=np.float64, order="F"))
        for intercept in (True, False):
            build = _median_time(lambda data=data, intercept=intercept:
                                 dpopt.Problem(data, y, fit_intercept=intercept))
            print(f"{label:<16} {intercept!s:>9} {copy:>9.2f} {build:>12.2f} "
                  f"{build / copy:>6.2f}")
        del data


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
