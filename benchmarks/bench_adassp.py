"""AdaSSP on California housing: test R^2 against the non-private fit (docs/adassp.md).

    PYTHONPATH=src DPOPT_DATA=/path/to/data python benchmarks/bench_adassp.py [--seeds 20]

Features min-max scaled to [0, 1] with the data's own min / max (a measurement convenience:
a deployment would use public ranges or dpopt.preprocessing), optionally shifted to
[-1/2, 1/2]; the target mapped from its documented range [0.15, 5.00001] to [-1, 1];
75/25 split (seed 0); intercept fitted; row_bound = sqrt(8) (or sqrt(8) / 2 after the
shift), target_bound = 1, delta = 1 / n_train^2. Prints, per epsilon, the median R^2 (25% and
75% quantiles) over seeds, the median adaptive ridge lambda, the R^2 of the non-private ridge
with that lambda, and the median R^2 with the paper's equal split (thirds of mu^2).
"""

import argparse
import os
from pathlib import Path

import numpy as np

import dpopt
from dpopt.solvers.adassp import DEFAULT_SPLIT

EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0)


def california(shift):
    d = np.load(Path(os.environ.get("DPOPT_DATA", "data")) / "california.npz")
    X, y = d["X"], d["y"]
    X = (X - X.min(0)) / (X.max(0) - X.min(0)) - shift
    y = (y - 2.575) / 2.425
    perm = np.random.default_rng(0).permutation(len(y))
    cut = int(0.75 * len(y))
    return X[perm[:cut]], y[perm[:cut]], X[perm[cut:]], y[perm[cut:]]


def r2(y, pred):
    return 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)


def ridge_r2(Xtr, ytr, Xte, yte, lam):
    Xa = np.hstack([Xtr, np.ones((len(ytr), 1))])
    w = np.linalg.lstsq(Xa.T @ Xa + lam * np.eye(Xa.shape[1]), Xa.T @ ytr, rcond=None)[0]
    return r2(yte, Xte @ w[:-1] + w[-1])


def private_r2(pb, Xte, yte, eps, seeds, bound, split):
    scores, ridges = [], []
    for seed in range(seeds):
        res = dpopt.solve(pb, "adassp", epsilon=eps, delta=1 / pb.n_samples ** 2,
                          random_state=seed, row_bound=bound, target_bound=1.0,
                          budget_split=split)
        scores.append(r2(yte, Xte @ res.coef + res.intercept))
        ridges.append(res.params["ridge"])
    return np.array(scores), float(np.median(ridges))


def table(shift, seeds):
    Xtr, ytr, Xte, yte = california(shift)
    bound = np.sqrt(Xtr.shape[1]) * (1 - shift)
    pb = dpopt.Problem(Xtr, ytr, fit_intercept=True)
    print(f"\nfeatures in [{0.0 - shift:g}, {1 - shift:g}], row_bound {bound:.3f}, n_train {len(ytr)}; "
          f"non-private R^2 {ridge_r2(Xtr, ytr, Xte, yte, 0.0):.3f}")
    print(f"{'epsilon':>8} {'R^2 median':>11} {'[q25, q75]':>16} {'ridge':>8} "
          f"{'ridge fit R^2':>14} {'thirds R^2':>11}")
    for eps in EPSILONS:
        s, lam = private_r2(pb, Xte, yte, eps, seeds, bound, DEFAULT_SPLIT)
        thirds = private_r2(pb, Xte, yte, eps, seeds, bound, (1, 1, 1))[0]
        print(f"{eps:>8g} {np.median(s):>11.3f} [{np.quantile(s, .25):.3f}, "
              f"{np.quantile(s, .75):.3f}] {lam:>8.1f} {ridge_r2(Xtr, ytr, Xte, yte, lam):>14.3f} "
              f"{np.median(thirds):>11.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    for shift in (0.0, 0.5):
        table(shift, args.seeds)
