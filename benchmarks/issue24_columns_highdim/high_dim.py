"""p >> n measurements: accuracy vs majority and sklearn at eps in {0.25,1,4}."""
import sys
import time
import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression

import dpopt
from dpopt.datasets.high_dim import make_dense_high_dim, make_sparse_text

case = sys.argv[1]
seeds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
epss = [float(e) for e in (sys.argv[3].split(",") if len(sys.argv) > 3 else ["0.25", "1", "4"])]
res = {e: [] for e in epss}
sk, maj = [], []
for s in range(seeds):
    if case == "sparse":
        X, y = make_sparse_text(1600, 100_000, random_state=s)
    else:
        X, y = make_dense_high_dim(1000, 2000, random_state=s)
    n = X.shape[0] // 2
    Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
    maj.append(max(np.mean(yte == 1), np.mean(yte == -1)))
    sk.append(np.mean(LogisticRegression(max_iter=2000).fit(Xtr, ytr).predict(Xte) == yte))
    for e in epss:
        t = time.time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf = dpopt.DPLogisticRegression(epsilon=e, random_state=s).fit(Xtr, ytr)
        acc = np.mean(clf.predict(Xte) == yte)
        res[e].append(acc)
        a = clf.fit_result_.params["auto"]
        print(case, s, e, round(acc, 4), a.get("solver"), a.get("selection", {}).get("n_selected"),
              round(time.time() - t, 1), flush=True)
print(case, "majority", round(np.mean(maj), 4), "sklearn", round(np.mean(sk), 4),
      {e: round(np.mean(v), 4) for e, v in res.items()})
