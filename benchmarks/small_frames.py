"""Does the default ever do harm on a small raw table? The raw tables of the practitioner
benchmark, subsampled to a few hundred rows.

    python benchmarks/small_frames.py                   # n = 300, 1000; eps = 0.5, 1, 4; 3 draws
    python benchmarks/small_frames.py --quick           # one table, one cell, 1 draw (tested)
    python benchmarks/small_frames.py --tables doctor_contacts --draws 5
    python benchmarks/small_frames.py --other-targets 3  # other columns as targets (below)

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

Other targets (``--other-targets K``, session 48, written before its first run): tables the
defaults were never looked at on. Each table's other columns become targets, the rows where
that column is missing dropped: a numeric column with at least 20 distinct values a
regression, a column of 2 to 4 values whose most frequent holds under 90% of the rows a
classification (its values as text); at most K of them per table, in the order of
``numpy.random.default_rng(len(name)).permutation`` (public schema facts, no score). Same
cells, draws and rule as above.
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


def other_targets(meta, df, k):
    """Up to ``k`` (meta, frame) pairs of ``meta``'s table with another column as the target
    (module docstring)."""
    chosen = []
    for c in df.columns:
        values = df[c].dropna()
        if c == meta["target"] or len(values) < 0.9 * len(df):
            continue
        distinct = values.nunique()
        if P.pd_is_numeric(values) and distinct >= 20:
            chosen.append((c, "regression"))
        elif 2 <= distinct <= 4 and values.value_counts(normalize=True).iloc[0] < 0.9:
            chosen.append((c, "classification"))
    order = np.random.default_rng(len(meta["name"])).permutation(len(chosen))
    for i in order[:k]:
        c, task = chosen[i]
        frame = df.drop(columns=[meta["target"]]).dropna(subset=[c])
        if task == "classification":
            frame[c] = frame[c].astype(str)
        yield {**meta, "name": f"{meta['name']}:{c}", "target": c, "task": task}, frame


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
    ap.add_argument("--other-targets", type=int, default=0, metavar="K",
                    help="up to K other columns of each table as targets (module docstring)")
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
    for meta, df in tables(args.data, names, args.other_targets):
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


def tables(data, names, k):
    """The (meta, frame) pairs to run: the named tables (all when None), each with its own
    target, or with up to ``k`` other columns as targets."""
    for meta, df in P.frame_tables(data):
        if names is not None and meta["name"] not in names:
            continue
        if k:
            yield from other_targets(meta, df, k)
        else:
            yield meta, df


if __name__ == "__main__":
    raise SystemExit(main())
