"""Multiclass DPLogisticRegression (the default path's multinomial model,
:mod:`dpopt.pipeline.multinomial`; one-vs-rest for ``penalty="l1"``) against
non-private scikit-learn and the majority rate.

    python benchmarks/multiclass.py                  # tuna + synthetic, eps 0.5 / 1 / 4, 5 seeds
    python benchmarks/multiclass.py --seeds 2 --datasets synthetic

Protocol (fixed before any result): one 75/25 split (``train_test_split(random_state=0,
stratify=y)``), features raw; rows: ``sklearn`` (StandardScaler + LogisticRegression, the
ceiling), ``majority`` (the most frequent training class), ``auto`` (the default
``DPLogisticRegression(epsilon=e)``: one multinomial model by DP-GD; before session 24,
objective perturbation per class) and ``auto l1``
(``penalty="l1"``: the Gaussian dp-cd row). Test accuracy, mean (std) over fit seeds.
The tuna table needs ``$DPOPT_DATA`` (``tables/tuna.csv.gz``: five brands, the five shelf
prices; purchases of the same household repeat, so the split is by row, not by household).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

EPSILONS = (0.5, 1.0, 4.0)


def tuna():
    import pandas as pd

    path = os.path.join(os.environ.get("DPOPT_DATA", ""), "tables", "tuna.csv.gz")
    if not os.path.exists(path):
        return None
    frame = pd.read_csv(path)
    return frame.drop(columns="Tuna.choice").to_numpy(np.float64), frame["Tuna.choice"].to_numpy()


def synthetic():
    from sklearn.datasets import make_classification

    return make_classification(n_samples=20000, n_features=10, n_informative=6, n_classes=5,
                               n_clusters_per_class=1, class_sep=1.0, random_state=0)


def run(name, X, y, seeds):
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    import dpopt

    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    values, counts = np.unique(ytr, return_counts=True)
    majority = float(np.mean(yte == values[np.argmax(counts)]))
    sk = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(Xtr, ytr)
    print(f"{name}: n_train={len(ytr)}, p={X.shape[1]}, k={len(values)}; "
          f"sklearn {sk.score(Xte, yte):.3f}, majority {majority:.3f}")
    for eps in EPSILONS:
        for label, kw in (("auto", {}), ("auto l1", {"penalty": "l1"})):
            scores, t0 = [], time.perf_counter()
            for seed in range(seeds):
                with warnings.catch_warnings():
                    warnings.simplefilter("error", dpopt.PrivacyLeakWarning)
                    clf = dpopt.DPLogisticRegression(epsilon=eps, random_state=seed, **kw)
                    clf.fit(Xtr, ytr)
                assert clf.epsilon_spent_ <= eps
                scores.append(clf.score(Xte, yte))
            secs = (time.perf_counter() - t0) / seeds
            print(f"  eps={eps:<4g} {label:8s} {np.mean(scores):.3f} ({np.std(scores):.3f})  "
                  f"{secs:.1f} s/fit")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--datasets", nargs="+", default=["tuna", "synthetic"])
    args = parser.parse_args(argv)
    for name in args.datasets:
        data = {"tuna": tuna, "synthetic": synthetic}[name]()
        if data is None:
            print(f"{name}: not available (set $DPOPT_DATA)")
            continue
        run(name, *data, args.seeds)


if __name__ == "__main__":
    main()
