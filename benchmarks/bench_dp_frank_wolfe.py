"""Accuracy of dp-frank-wolfe on real data scaled into the unit box (docs/dp_frank_wolfe.md).

California (squared loss, R^2) and Electricity (logistic loss, accuracy): features min-max
scaled to [0, 1] with the true minima and maxima (treated as public for this measurement),
75/25 split (seed 0), delta = 1/n^2, 5 seeds per epsilon, against the non-private
scikit-learn fit on the same scaled data. Also a sparse high-dimensional synthetic problem.

Run: DPOPT_DATA=<directory of the real .npz files> python benchmarks/bench_dp_frank_wolfe.py
"""

import time

import numpy as np
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import train_test_split

import dpopt

EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0)
SEEDS = range(5)


def r2(y, pred):
    return 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)


def load(name):
    from dpopt.datasets import load_dataset

    d = load_dataset(name, download=False)  # $DPOPT_DATA or the cache
    X = np.asarray(d.X, dtype=float)
    X = (X - X.min(0)) / (X.max(0) - X.min(0))
    return train_test_split(X, d.y.astype(float), test_size=0.25, random_state=0)


def run(name, loss, radius, extra, score, baseline):
    Xtr, Xte, ytr, yte = load(name)
    base = baseline(Xtr, ytr, Xte, yte)
    pb = dpopt.Problem(Xtr, ytr, loss, fit_intercept=True)
    n = pb.n_samples
    print(f"\n{name}: n_train={n}, p={pb.n_features}, radius={radius}, {extra}; "
          f"non-private sklearn: {base:.3f}")
    print("| epsilon | T (auto) | mean | std | time/fit (s) |")
    print("|---|---|---|---|---|")
    for eps in EPSILONS + (np.inf,):
        vals, t0 = [], time.perf_counter()
        for seed in SEEDS if np.isfinite(eps) else [0]:
            res = dpopt.solve(pb, "dp-frank-wolfe", epsilon=eps, delta=1 / n ** 2,
                              random_state=seed, radius=radius, coordinate_bound=1.0, **extra)
            vals.append(score(yte, Xte @ res.coef + res.intercept))
        dt = (time.perf_counter() - t0) / len(vals)
        print(f"| {eps} | {res.n_iter} | {np.mean(vals):.3f} | {np.std(vals):.3f} | {dt:.2f} |")


def synthetic(n=1000, p=5000, k=5):
    rng = np.random.default_rng(0)
    X = rng.choice([-1.0, 1.0], size=(2 * n, p))
    w = np.zeros(p)
    w[:k] = rng.choice([-1, 1], k) * np.array([0.6, 0.5, 0.4, 0.3, 0.2])
    y = X @ w + 0.5 * rng.standard_normal(2 * n)
    pb = dpopt.Problem(X[:n], y[:n], "squared")
    print(f"\nsynthetic: n={n}, p={p}, {k}-sparse truth (L1 norm 2), X in {{-1,1}}, noise 0.5; "
          f"oracle R^2 {r2(y[n:], X[n:] @ w):.3f}")
    print("| epsilon | T (auto) | test R^2 | true features in top 5 |")
    print("|---|---|---|---|")
    for eps in EPSILONS + (np.inf,):
        res = [dpopt.solve(pb, "dp-frank-wolfe", epsilon=eps, delta=1 / n ** 2, random_state=s,
                           radius=2.0, coordinate_bound=1.0, target_bound=4.0)
               for s in (SEEDS if np.isfinite(eps) else [0])]
        sc = np.mean([r2(y[n:], X[n:] @ r.coef) for r in res])
        found = np.mean([len(set(np.argsort(-np.abs(r.coef))[:k]) & set(range(k))) for r in res])
        print(f"| {eps} | {res[0].n_iter} | {sc:.3f} | {found:.1f} |")


def main():
    run("california", "squared", 20.0, {"target_bound": 5.0, "clip": 1.0}, r2,
        lambda Xtr, ytr, Xte, yte: r2(yte, LinearRegression().fit(Xtr, ytr).predict(Xte)))

    def acc(y, margin):
        return float(np.mean(np.where(margin > 0, 1.0, -1.0) == y))

    run("electricity", "logistic", 40.0, {}, acc,
        lambda Xtr, ytr, Xte, yte: LogisticRegression(C=1e4, max_iter=5000).fit(Xtr, ytr)
        .score(Xte, yte))
    synthetic()


if __name__ == "__main__":
    main()
