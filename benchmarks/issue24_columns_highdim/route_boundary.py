"""Routed vs forced full-dimensional default fit near the rule's boundary."""
import warnings

import numpy as np

import dpopt
import dpopt.pipeline.feature_selection as fs
from dpopt.datasets.high_dim import make_dense_high_dim, make_sparse_text
from dpopt.privacy import gdp_mu

cases = [("dense 2000x2000", lambda s: make_dense_high_dim(4000, 2000, signal=3.0, random_state=s)),
         ("text 2000x20000", lambda s: make_sparse_text(4000, 20000, words_per_row=20,
                                                        n_informative=20, lift=10, random_state=s))]
orig = fs.high_dimensional
for name, make in cases:
    for eps in (1.0, 4.0):
        acc = {"routed": [], "full": []}
        for s in range(2):
            X, y = make(s)
            n = X.shape[0] // 2
            for mode in acc:
                fs.high_dimensional = orig if mode == "routed" else (lambda n, p, mu: False)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = dpopt.DPLogisticRegression(epsilon=eps, random_state=s).fit(X[:n], y[:n])
                acc[mode].append(np.mean(m.predict(X[n:]) == y[n:]))
        maj = max(np.mean(y[n:] > 0), np.mean(y[n:] < 0))
        print(name, eps, "limit", round(fs.dimension_limit(n, gdp_mu(eps, 1 / n**2))), "maj", round(maj, 3),
              {k: round(np.mean(v), 4) for k, v in acc.items()}, flush=True)
