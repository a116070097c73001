"""Private feature bounds on the shared real datasets (docs/preprocessing.md, Measurements).

Run: DPOPT_DATA=/path/to/data python docs/preprocessing_measure.py
"""
import os
import time
import warnings

import numpy as np

from dpopt.preprocessing import private_feature_bounds

D = os.environ.get("DPOPT_DATA", "data")


def load():
    c = np.load(f"{D}/california.npz")
    e = np.load(f"{D}/electricity.npz")
    a = np.load(f"{D}/adult.npz")
    cats = [np.unique(np.concatenate([a["X_cat"][:, j], a["X_cat_test"][:, j]]))
            for j in range(a["X_cat"].shape[1])]
    onehot = np.column_stack([(a["X_cat"][:, j][:, None] == c_[None, :]).astype(float)
                              for j, c_ in enumerate(cats)])
    adult = np.column_stack([a["X_num"], onehot])
    return {"california": (c["X"], list(c["feature_names"])),
            "electricity": (e["X"], list(e["feature_names"])),
            "adult": (adult, list(a["num_names"]) + [f"onehot{j}" for j in range(onehot.shape[1])])}


def fmt(v):
    return f"{v:.3g}"


data = load()
rows = []
for name, (X, names) in data.items():
    n, p = X.shape
    q = np.quantile(X, [0.01, 0.99], axis=0)
    modes = [("all private", None)]
    if name == "adult":
        lo = np.r_[np.full(6, np.nan), np.zeros(p - 6)]
        hi = np.r_[np.full(6, np.nan), np.ones(p - 6)]
        modes.append(("one-hot public", (lo, hi)))
    for mode, bounds in modes:
        for mu in (0.05, 0.1, 0.2):
            reps = []
            t0 = time.perf_counter()
            for seed in range(5):
                with warnings.catch_warnings(record=True) as w:
                    warnings.simplefilter("always")
                    fb = private_feature_bounds(X, mu, np.random.default_rng(seed), bounds=bounds)
                reps.append(fb)
            dt = (time.perf_counter() - t0) / 5
            fb = reps[0]
            shown = range(min(p, 9)) if name != "adult" else range(6)
            print(f"\n### {name} ({mode}), n={n}, p={p}, mu={mu}: sigma/count={fb.sigma:.1f}, "
                  f"time {dt*1000:.0f} ms/release")
            print("| feature | true q01 | true q99 | private lower (seed 0..4) | private upper (seed 0..4) |")
            print("|---|---|---|---|---|")
            for j in shown:
                los = " ".join(fmt(r.lower[j]) for r in reps)
                his = " ".join(fmt(r.upper[j]) for r in reps)
                print(f"| {names[j]} | {fmt(q[0, j])} | {fmt(q[1, j])} | {los} | {his} |")
            if name == "adult" and mode == "all private":
                oh = np.array([(r.upper[6:] == 1).mean() for r in reps])
                freq = X[:, 6:].mean(0)
                print(f"one-hot columns kept (upper = 1): {oh.round(2)}; columns with frequency "
                      f">= 1%: {(freq >= 0.01).mean():.2f}; unresolved: "
                      f"{[int(r.unresolved.sum()) for r in reps]}")
            # effective levels reached
            eff_lo = np.mean([[np.mean(X[:, j] < r.lower[j]) for j in shown] for r in reps])
            eff_hi = np.mean([[np.mean(X[:, j] > r.upper[j]) for j in shown] for r in reps])
            print(f"mean fraction clipped below / above (shown features): {eff_lo:.3f} / {eff_hi:.3f}")
