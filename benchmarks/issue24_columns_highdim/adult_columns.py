import sys
import time
import warnings

import numpy as np

import dpopt
from dpopt.datasets import load_adult

a = load_adult(download=False)
Xtr, Xte, names = a.one_hot()
eps = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
seeds = range(int(sys.argv[2]) if len(sys.argv) > 2 else 5)
accs, drops = [], []
for s in seeds:
    t = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = dpopt.DPLogisticRegression(epsilon=eps, random_state=s).fit(Xtr, a.y)
    sc = clf.auto_.scaling
    dropped = int(np.sum(sc.scale == 0)) if getattr(sc, "scale", None) is not None else -1
    acc = np.mean(clf.predict(Xte) == a.y_test)
    accs.append(acc)
    drops.append(dropped)
    print(s, round(acc, 4), dropped, round(time.time() - t, 1), flush=True)
majority = max(np.mean(a.y_test == 1), np.mean(a.y_test == -1))
print("eps", eps, "mean acc", np.mean(accs), "dropped", drops, "majority", majority)
print(clf.privacy_report())
