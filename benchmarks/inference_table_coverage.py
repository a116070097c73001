"""Coverage of inference=True on a table with categorical columns (reference coding).

    python benchmarks/inference_table_coverage.py                  # n=20000 eps=4, n=5000 eps=2
    python benchmarks/inference_table_coverage.py --n 5000 --epsilon 2 --reps 100

A string column (levels a 40%, b 30%, c 20%, d 10%), a declared category whose first level
no record holds, a uniform number, y linear in the three with N(0, 1) noise. Each replicate
draws a new table and fits ``DPLinearRegression(inference=True)``; the table is the share of
replicates whose 95% interval covers the true contrast with the reference level (the
best-populated: 'a' and 'x') and slope, and the mean width.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd

NAMES = ["city_b", "city_c", "city_d", "kind_y", "kind_z", "age"]
TRUTH = np.array([0.5, -0.3, 1.0, 0.2, -0.4, 0.02])
KINDS = ["empty", "x", "y", "z"]  # public levels, declared (a level no record holds first)


def table(n, rng):
    city = rng.choice(["a", "b", "c", "d"], n, p=[0.4, 0.3, 0.2, 0.1])
    kind = rng.choice(["x", "y", "z"], n, p=[0.5, 0.3, 0.2])
    age = rng.uniform(20.0, 60.0, n)
    codes = np.searchsorted(["a", "b", "c", "d"], city)
    y = (1.0 + np.array([0.0, 0.5, -0.3, 1.0])[codes]
         + np.array([0.0, 0.2, -0.4])[np.searchsorted(["x", "y", "z"], kind)]
         + 0.02 * age + rng.standard_normal(n))
    frame = pd.DataFrame({"city": city, "kind": pd.Categorical(kind, KINDS), "age": age})
    return frame, y


def coverage(n, epsilon, reps, seed=0):
    """(coverage per coefficient, mean width, replicates that gave no intervals)."""
    import dpopt

    covered, width, failed = np.zeros(len(NAMES)), np.zeros(len(NAMES)), 0
    for r in range(reps):
        frame, y = table(n, np.random.default_rng([seed, r]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                est = dpopt.DPLinearRegression(epsilon=epsilon, inference=True, random_state=r,
                                               categories={"kind": KINDS}).fit(frame, y)
                ci = est.conf_int(alpha=0.05)
            except dpopt.NoIntervalsError:
                failed += 1
                continue
        assert list(est.summary().index[:-1]) == NAMES
        covered += (ci[:, 0] <= TRUTH) & (TRUTH <= ci[:, 1])
        width += ci[:, 1] - ci[:, 0]
    ok = max(reps - failed, 1)
    return covered / ok, width / ok, failed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="*", default=[20000, 5000])
    parser.add_argument("--epsilon", type=float, nargs="*", default=[4.0, 2.0])
    parser.add_argument("--reps", type=int, default=100)
    args = parser.parse_args(argv)
    print("| n | ε | " + " | ".join(NAMES) + " | no intervals |")
    print("|---|---|" + "---|" * (len(NAMES) + 1))
    for n, epsilon in zip(args.n, args.epsilon):
        cov, wid, failed = coverage(n, epsilon, args.reps)
        cells = " | ".join(f"{c:.2f} ({w:.3g})" for c, w in zip(cov, wid))
        print(f"| {n} | {epsilon:g} | {cells} | {failed}/{args.reps} |", flush=True)


if __name__ == "__main__":
    main()
