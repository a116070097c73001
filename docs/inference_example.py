"""The worked example of docs/inference.md: California housing, private summary beside
statsmodels' non-private one. Run: DPOPT_DATA=/work/shared/data python docs/inference_example.py

All eight features at epsilon = 1: the intervals are refused (Latitude and Longitude are
collinear and fill a small part of their private ranges, so the noisy Gram matrix does not
determine them). Without Longitude, at epsilon = 2 (the first random_state whose intervals are not refused):
the private summary, statsmodels' OLS
on the same columns and, to separate the estimand from the noise, OLS on X and y clipped to
the private bounds.
"""

import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import statsmodels.api as sm

import dpopt


def private_fit(X, y, epsilon, seed=0):
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)
        return dpopt.DPLinearRegression(epsilon=epsilon, inference=True,
                                        random_state=seed).fit(X, y)


def main():
    data = np.load(Path(os.environ["DPOPT_DATA"]) / "california.npz")
    X = pd.DataFrame(data["X"], columns=[str(c) for c in data["feature_names"]])
    y = data["y"]
    try:
        private_fit(X, y, 1.0).summary()
    except ValueError as exc:
        print(f"All features, epsilon = 1: {exc}\n")
    X = X.drop(columns="Longitude")
    for seed in range(3):  # the refusal rests on noisy releases too: it varies by seed
        est = private_fit(X, y, 2.0, seed)
        try:
            est.summary()
            break
        except ValueError as exc:
            print(f"Without Longitude, epsilon = 2, random_state={seed}: {exc}\n")
    print(est.privacy_report())
    print()
    print(est.summary_text())
    print()
    ols = sm.OLS(y, sm.add_constant(X, prepend=False)).fit(cov_type="HC1")
    print("statsmodels OLS (non-private, HC1 standard errors):")
    print(ols.summary().tables[1])
    print()
    lo, hi = est.feature_bounds_
    t = est.auto_.target
    clipped = np.clip(X.to_numpy(), lo, hi)
    ols_c = sm.OLS(np.clip(y, t.lower, t.upper), sm.add_constant(clipped, prepend=False)).fit(
        cov_type="HC1")
    table = pd.DataFrame({"private coef": np.ravel(est.summary()["coef"])[:-1],
                          "OLS coef": np.asarray(ols.params)[:-1],
                          "OLS coef, X and y clipped": np.asarray(ols_c.params)[:-1],
                          "private bounds": [f"[{a:.4g}, {b:.4g}]" for a, b in zip(lo, hi)],
                          "width ratio": est.bse_ / np.asarray(ols.bse)[:-1]}, index=X.columns)
    print(f"OLS on X and y clipped to the private bounds (y to [{t.lower:.4g}, {t.upper:.4g}]):")
    with pd.option_context("display.width", 200, "display.max_columns", None,
                           "display.float_format", "{:.4g}".format):
        print(table)


if __name__ == "__main__":
    main()
