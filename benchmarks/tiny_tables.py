"""The default path on tables of a few dozen rows: real tables subsampled to n rows.

    python benchmarks/tiny_tables.py                   # n = 30, 60, 90; eps = 0.5, 1, 4, 100
    python benchmarks/tiny_tables.py --min-validation 2   # the held-out choice below n = 100
    python benchmarks/tiny_tables.py --undeclared         # labels selected privately

Each cell draws ``--draws`` subsamples of n rows from a table of the practitioner benchmark
(``benchmarks/practitioner.py``: the same loaders, labels -1/+1 declared), fits the default
estimator with only epsilon set and scores it on up to 2,000 other rows of the table, beside
the constant (training mean / majority class) and scikit-learn's default model on the same
rows. A fit refused before any release (``dpopt.pipeline.releasable``: too few rows at this
epsilon) is counted as refused, not scored. ``--min-validation`` sets the held-out choice's
floor (``dpopt.pipeline.selection.MIN_VALIDATION``, 20 rows) for the experiment of
docs/default_path.md ("Too few rows to release anything reliable"); below it (n < 100 by
default) the model is checked on its own rows (``dpopt.pipeline.in_sample``, "Tables of a
few dozen rows").
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import practitioner as P  # noqa: E402

TABLES = ("california", "diabetes", "slid", "breast_cancer", "fair", "anes96", "flchain",
          "k401ksubs")


def cell(X, y, task, n, epsilon, draws, declared=True):
    """(mean score of the fits, of the constant, of scikit-learn, share refused);
    ``declared``: a classifier's labels given as ``classes=`` (else selected privately, as
    a plain fit does; a fit whose selection kept no label fails, charged, and is counted
    with the refused)."""
    import dpopt

    cls = dpopt.DPLogisticRegression if task == "classification" else dpopt.DPLinearRegression
    kw = {"classes": [-1.0, 1.0]} if task == "classification" and declared else {}
    dp, const, sk, refused = [], [], [], 0
    for draw in range(draws):
        rows = np.random.default_rng(draw).choice(len(y), min(len(y), n + 2000), replace=False)
        Xtr, ytr, Xte, yte = X[rows[:n]], y[rows[:n]], X[rows[n:]], y[rows[n:]]
        if task == "classification" and len(set(ytr)) < 2:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                model = cls(epsilon=epsilon, random_state=draw, **kw).fit(Xtr, ytr)
                dp.append(model.score(Xte, yte))
            except (dpopt.NotReleasableError, dpopt.ChargedFitError):
                refused += 1
            const.append(P.constant_score(ytr, yte, task))
            sk.append(P.sklearn_score(Xtr, Xte, ytr, yte, task))
    mean = float(np.mean(dp)) if dp else float("nan")
    return mean, float(np.mean(const)), float(np.mean(sk)), refused / max(len(const), 1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="30,60,90")
    ap.add_argument("--epsilons", default="0.5,1,4,100")
    ap.add_argument("--draws", type=int, default=12)
    ap.add_argument("--tables", default=",".join(TABLES))
    ap.add_argument("--min-validation", type=int, default=None)
    ap.add_argument("--undeclared", action="store_true",
                    help="classifiers' labels selected privately (a plain fit), not declared")
    args = ap.parse_args(argv)
    if args.min_validation is not None:
        from dpopt.pipeline import selection

        selection.MIN_VALIDATION = args.min_validation
    print("| table | n | ε | default fit | constant | scikit-learn | refused |")
    print("|---|---|---|---|---|---|---|")
    for name in args.tables.split(","):
        data = P.load(name)
        if data is None:
            print(f"| {name} | not available (DPOPT_DATA, statsmodels) | | | | | |")
            continue
        X, y = np.vstack([data[0], data[1]]), np.concatenate([data[2], data[3]])
        for n in (int(v) for v in args.n.split(",")):
            for eps in (float(v) for v in args.epsilons.split(",")):
                dp, const, sk, refused = cell(X, y, data[4], n, eps, args.draws,
                                              declared=not args.undeclared)
                print(f"| {name} | {n} | {eps:g} | {dp:.3f} | {const:.3f} | {sk:.3f} | "
                      f"{refused:.0%} |", flush=True)


if __name__ == "__main__":
    main()
