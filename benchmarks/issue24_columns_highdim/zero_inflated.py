"""Generated zero-inflated columns at small n: dropped columns and score, fallback on/off."""
import sys
import warnings

import numpy as np
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import r2_score

import dpopt
import dpopt.preprocessing._bounds as B


def make(n, rng):
    Z = rng.standard_normal((n, 3)) * [1, 10, 100] + [0, 50, 1000]         # 3 ordinary columns
    ind = (rng.random((n, 2)) < [0.15, 0.10]).astype(float)                 # indicators 85/90% zeros
    cnt = (rng.random((n, 2)) < [0.2, 0.12]) * rng.poisson(3.0, (n, 2))     # zero-inflated counts
    skew = rng.lognormal(0, 1.5, (n, 1))                                    # skewed
    X = np.hstack([Z, ind, cnt, skew])
    s = X.std(0)
    beta = np.array([1, 1, 1, 2, 2, 1, 1, 0.5]) / np.maximum(s, 1e-12)
    lin = (X - X.mean(0)) @ beta
    return X, lin

def run(n, eps, seeds, fallback):
    B.ZERO_INFLATED_FALLBACK = fallback
    out = {"reg": [], "clf": [], "drop": [], "sk_reg": [], "sk_clf": [], "maj": []}
    for s in range(seeds):
        rng = np.random.default_rng(100 + s)
        X, lin = make(2 * n, rng)
        yr = lin + rng.standard_normal(2 * n) * lin.std()
        yc = np.where(lin + rng.logistic(size=2 * n) * 1.0 > np.quantile(lin, 0.75), 1.0, -1.0)
        tr, te = slice(0, n), slice(n, None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = dpopt.DPLinearRegression(epsilon=eps, random_state=s).fit(X[tr], yr[tr])
            c = dpopt.DPLogisticRegression(epsilon=eps, random_state=s).fit(X[tr], yc[tr])
        out["reg"].append(r2_score(yr[te], r.predict(X[te])))
        out["clf"].append(np.mean(c.predict(X[te]) == yc[te]))
        sc = c.auto_.scaling
        out["drop"].append(int(np.sum(sc.scale == 0)) if hasattr(sc, "scale") else -1)
        out["sk_reg"].append(r2_score(yr[te], LinearRegression().fit(X[tr], yr[tr]).predict(X[te])))
        sk = LogisticRegression(max_iter=5000).fit(X[tr], yc[tr])
        out["sk_clf"].append(np.mean(sk.predict(X[te]) == yc[te]))
        out["maj"].append(max(np.mean(yc[te] > 0), np.mean(yc[te] < 0)))
    return {k: (np.round(np.mean(v), 3) if k != "drop" else v) for k, v in out.items()}

seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
for n in (300, 1000, 3000):
    for eps in (1.0, 4.0):
        for fb in (None, (0.0, 1.0)):
            print(n, eps, "fallback" if fb else "before", run(n, eps, seeds, fb), flush=True)
