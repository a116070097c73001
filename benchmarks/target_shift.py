"""Does the default regressor care where its target sits? The same table with y centred at 0
and with y shifted by a constant.

    python benchmarks/target_shift.py                 # n = 300, 1000, 3000; eps = 1, 2, 4
    python benchmarks/target_shift.py --quick         # one n, one epsilon, 2 draws

R^2 is invariant to a shift of y, and so is scikit-learn's least squares; a private fit's
range of y is read on a public signed log grid, where a target centred at 0 splits its
records between the two signs and spreads over more bins than the same target around 40
(docs/default_path.md, "A target centred near 0"). Each cell fits `DPLinearRegression(epsilon)`
(every other setting at its default) on ``--draws`` generated tables (4 standard normal
features, y = x (1, 2, 3, 0) + N(0, 1): R^2 about 0.93 without privacy) and scores it on 4,000
other rows; the columns are the mean R^2 with y centred at 0, with y + ``--shift``, their
difference, and how many centred fits released a model (not the constant).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np


def draw(seed, n, shift):
    """(X, y, X_test, y_test) of one generated table, y shifted by ``shift``."""
    rng = np.random.default_rng(1000 + seed)
    X = rng.standard_normal((n + 4000, 4))
    y = X @ [1.0, 2.0, 3.0, 0.0] + rng.standard_normal(n + 4000) + shift
    return X[:n], y[:n], X[n:], y[n:]


def cell(n, epsilon, draws, shift):
    """(mean R^2 centred, mean R^2 shifted, fits of the centred table that released a model)."""
    import dpopt

    scores, models = {0.0: [], shift: []}, 0
    for seed in range(draws):
        for s in scores:
            X, y, Xt, yt = draw(seed, n, s)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                warnings.simplefilter("error", dpopt.PrivacyLeakWarning)
                fit = dpopt.DPLinearRegression(epsilon=epsilon, random_state=seed).fit(X, y)
            scores[s].append(fit.score(Xt, yt))
            if s == 0.0:
                models += fit.auto_.plan.get("selection", {}).get("released") == "model" and \
                    bool(np.any(fit.coef_ != 0))
    return float(np.mean(scores[0.0])), float(np.mean(scores[shift])), models


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="300,1000,3000", help="training rows (comma-separated)")
    ap.add_argument("--epsilons", default="1,2,4", help="comma-separated epsilons")
    ap.add_argument("--draws", type=int, default=8, help="generated tables per cell")
    ap.add_argument("--shift", type=float, default=40.0, help="the shifted target's mean")
    ap.add_argument("--quick", action="store_true", help="n = 300, epsilon = 4, 2 draws")
    args = ap.parse_args(argv)
    sizes, epsilons, draws = ([300], [4.0], 2) if args.quick else (
        [int(v) for v in args.n.split(",")], [float(v) for v in args.epsilons.split(",")],
        args.draws)
    print(f"| n | epsilon | R^2, y centred at 0 | R^2, y + {args.shift:g} | difference | "
          f"models released (centred) |")
    print("|---|---|---|---|---|---|")
    for n in sizes:
        for eps in epsilons:
            centred, shifted, models = cell(n, eps, draws, args.shift)
            print(f"| {n} | {eps:g} | {centred:.3f} | {shifted:.3f} | {centred - shifted:+.3f} | "
                  f"{models}/{draws} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
