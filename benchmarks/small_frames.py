"""Does the default ever do harm on a small raw table? The raw tables of the practitioner
benchmark, subsampled to a few hundred rows.

    python benchmarks/small_frames.py                   # n = 300, 1000; eps = 0.5, 1, 4; 3 draws
    python benchmarks/small_frames.py --quick           # one table, one cell, 1 draw (tested)
    python benchmarks/small_frames.py --tables doctor_contacts --draws 5

Protocol (written before the first run, session 44). For each table of
``$DPOPT_DATA/tables/tables.json`` with at least 1.5 n rows, each n and each epsilon, draw
``--draws`` subsamples of n / 0.75 rows (``DataFrame.sample(random_state=100 + draw)``); the
first n are the training rows, and the score is measured on 5,000 rows drawn from the rest of
the table (``random_state=7``; all of the rest where fewer): a larger test set than the
subsample's own quarter, so a cell's mean is not dominated by the test rows' noise. Each draw
fits `DPLinearRegression(epsilon)` or `DPLogisticRegression(epsilon)` (every other setting at
its default) on the raw frame, and scikit-learn's default model and the constant (the training
mean, or the majority class) on the same rows (`practitioner.frame_references`). A cell is
marked below the do-no-harm target of issue 24 when its mean score is below the constant's by
more than 0.005 (accuracy) or below -0.01 (R^2). Columns: the mean score, the constant's,
scikit-learn's, and the share of fits that released the constant.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import practitioner as P  # noqa: E402 (the benchmark's own helpers)


def draws_of(df, target, n, draws):
    """(X_train, y_train, X_test, y_test) of each draw (module docstring)."""
    for d in range(draws):
        sub = df.sample(n=int(n / 0.75), random_state=100 + d)
        rest = df.drop(index=sub.index)
        rest = rest.sample(n=min(5000, len(rest)), random_state=7)
        train = sub.iloc[:n]
        yield (train.drop(columns=[target]), train[target], rest.drop(columns=[target]),
               rest[target])


def cell(meta, df, n, epsilon, draws):
    """(mean score, mean constant, mean scikit-learn, share of fits releasing the constant,
    errors) of one table at (n, epsilon)."""
    rows, errors = [], []
    for seed, (X, y, Xt, yt) in enumerate(draws_of(df, meta["target"], n, draws)):
        with warnings.catch_warnings():  # the tables' column warnings, on every draw
            warnings.simplefilter("ignore")
            try:
                sk, const = P.frame_references(X, y, Xt, yt, meta["task"])
            except ValueError:  # a draw scikit-learn cannot fit (one class): no reference
                sk, const = np.nan, np.nan
            score, _, error, _, constant = P.frame_fit(X, y, Xt, yt, meta["task"], seed,
                                                       epsilon)
        rows.append((score, const, sk, float(constant)))
        if error:
            errors.append(error[:60])
    return (*np.nanmean(np.array(rows, dtype=float), axis=0), errors)


def below(task, score, constant):
    """Whether a cell misses the do-no-harm target of issue 24."""
    return score < (-0.01 if task == "regression" else constant - 0.005)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="300,1000", help="training rows (comma-separated)")
    ap.add_argument("--epsilons", default="0.5,1,4", help="comma-separated epsilons")
    ap.add_argument("--draws", type=int, default=3, help="subsamples per cell")
    ap.add_argument("--tables", default=None, help="comma-separated table names (default all)")
    ap.add_argument("--data", default=os.environ.get("DPOPT_DATA"),
                    help="the data directory (default $DPOPT_DATA)")
    ap.add_argument("--quick", action="store_true",
                    help="doctor_contacts, n = 300, epsilon = 4, 1 draw")
    args = ap.parse_args(argv)
    if not args.data or not os.path.isdir(os.path.join(args.data, "tables")):
        print("no tables: set DPOPT_DATA to a directory with tables/tables.json")
        return 1
    sizes, epsilons, draws = ([300], [4.0], 1) if args.quick else (
        [int(v) for v in args.n.split(",")], [float(v) for v in args.epsilons.split(",")],
        args.draws)
    names = {"doctor_contacts"} if args.quick else (
        set(args.tables.split(",")) if args.tables else None)
    print("| table | n | epsilon | score | constant | scikit-learn | constant released | |")
    print("|---|---|---|---|---|---|---|---|")
    missed = total = 0
    for meta, df in P.frame_tables(args.data):
        if names is not None and meta["name"] not in names:
            continue
        for n in sizes:
            if len(df) < 1.5 * n:
                continue
            for eps in epsilons:
                score, const, sk, share, errors = cell(meta, df, n, eps, draws)
                miss = below(meta["task"], score, const)
                missed, total = missed + miss, total + 1
                print(f"| {meta['name']} | {n} | {eps:g} | {score:.3f} | {const:.3f} | "
                      f"{sk:.3f} | {share:.0%} | {'below' if miss else ''}"
                      f"{' ' + '; '.join(errors) if errors else ''} |", flush=True)
    print(f"\ncells below the do-no-harm target: {missed} of {total}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
