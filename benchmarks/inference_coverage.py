"""Coverage of dpopt's private confidence intervals (issue 23; docs/inference.md).

Grid: model {linear, logistic} x noise {homo, hetero} x epsilon {0.5, 1, 4} x n {1e3, 1e4,
1e5} x p {3, 10}. Features on raw scales from 1e-2 to 1e2 (half uniform, half normal,
shifted); linear: y = 1 + sum_j b_j u_j + s(u) e (homo: s = 1; hetero: s = 0.5 + |u_0|);
logistic: y = 1{1 + sum_j b_j u_j + s(u) e > 0}, e logistic (hetero: a misspecified
model, the estimand is the pseudo-true logistic minimizer; the sandwich covers it).

The estimand of a fit (dpopt.pipeline.inference: the coefficients on the privately clipped and scaled
data, mapped to raw units) depends on the released scaling, so each replicate computes it
on a large fixed population of the cell (``pop_factor`` x n rows, between 2e5 and 2e6)
passed through that fit's own scaling and row clipping. A replicate records, per
coefficient and the intercept, whether the 95% interval covers the estimand and its width;
the first ``sm_reps`` replicates also fit statsmodels (OLS with HC1, Logit) on the same raw
sample for the width ratio.

Runs in blocks of replicates (joblib; one JSON file per block under ``--out``): a rerun
skips finished blocks, so a long run can be stopped and resumed.

    python benchmarks/inference_coverage.py --quick                 # minutes: a few cells, 50 reps
    python benchmarks/inference_coverage.py --full --jobs 2         # the whole grid, 1000 reps/cell
    python benchmarks/inference_coverage.py --summarize             # the table of what has run
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import warnings
from pathlib import Path

import numpy as np

MODELS = ("linear", "logistic")
NOISES = ("homo", "hetero")
EPSILONS = (0.5, 1.0, 4.0)
NS = (1_000, 10_000, 100_000)
PS = (3, 10)
BLOCK = 50
OUT = Path(__file__).resolve().parent / "results" / "coverage"


def cell_name(model, noise, eps, n, p):
    return f"{model}-{noise}-eps{eps:g}-n{n}-p{p}"


def design(p):
    """Public design of a cell: raw scales, shifts and the scaled-unit coefficients."""
    scales = 10.0 ** np.linspace(-2, 2, p)
    shifts = np.where(np.arange(p) % 3 == 0, 5.0, 0.0) * scales
    b = np.array([(1.0 if j % 2 == 0 else -0.5) / (1 + j // 2) for j in range(p)])
    return scales, shifts, b


def draw(model, noise, n, p, rng):
    scales, shifts, b = design(p)
    u = np.where(np.arange(p) % 2 == 0, rng.uniform(-1.7, 1.7, (n, p)), rng.standard_normal((n, p)))
    X = u * scales + shifts
    s = 1.0 if noise == "homo" else 0.5 + np.abs(u[:, 0])
    eta = 1.0 + u @ b
    if model == "linear":
        return X, eta + s * rng.standard_normal(n)
    return X, (eta + s * rng.logistic(size=n) > 0).astype(int)


def population_estimand(est, Xpop, ypop):
    """The fit's estimand on a population: its scaling, row clipping and loss, raw units."""
    from dpopt.data.losses import get_loss
    from dpopt.pipeline.default_path import InMemoryData
    from dpopt.pipeline.inference import clipped_design, raw_map
    from dpopt.solvers._op_minimize import newton
    from dpopt.solvers._op_objective import PerturbedObjective

    auto = est.auto_
    logistic = est._classifier
    yenc = np.where(ypop == est.classes_[1], 1.0, -1.0) if logistic else ypop
    problem = InMemoryData(Xpop, yenc).problem(auto.scaling, auto.target,
                                               loss="logistic" if logistic else "squared",
                                               penalty="none", fit_intercept=est.fit_intercept)
    U = clipped_design(problem, auto.plan["row_bound"])
    if logistic:
        zeros = np.zeros(U.shape[1])
        obj = PerturbedObjective(U, problem.y, get_loss("logistic"), zeros, zeros)
        theta = newton(obj, np.asarray(est.fit_result_.w, dtype=np.float64), 1e-10)[0]
    else:
        theta = np.linalg.lstsq(U.T @ U, U.T @ np.clip(problem.y, -1.0, 1.0), rcond=None)[0]
    A, c = raw_map(auto.scaling, auto.target, U.shape[1], est.fit_intercept)
    return A @ theta + c


def statsmodels_widths(model, X, y):
    import statsmodels.api as sm

    Xc = sm.add_constant(X, prepend=False)
    res = (sm.OLS(y, Xc).fit(cov_type="HC1") if model == "linear"
           else sm.Logit(y, Xc).fit(disp=0))
    ci = np.asarray(res.conf_int(0.05))
    return ci[:, 1] - ci[:, 0]


def run_block(model, noise, eps, n, p, block, reps, sm_reps, pop_factor=20):
    """Replicates [block * reps, (block + 1) * reps) of one cell."""
    import dpopt

    key = [MODELS.index(model), NOISES.index(noise), int(eps * 10), n, p]
    pop_rng = np.random.default_rng([*key, 10**6])
    n_pop = int(min(max(pop_factor * n, 200_000), 2_000_000))
    Xpop, ypop = draw(model, noise, n_pop, p, pop_rng)
    rows = []
    for r in range(block * reps, (block + 1) * reps):
        rng = np.random.default_rng([*key, r])
        X, y = draw(model, noise, n, p, rng)
        cls = dpopt.DPLinearRegression if model == "linear" else dpopt.DPLogisticRegression
        kw = {} if model == "linear" else {"penalty": "none"}
        est = cls(epsilon=eps, inference=True, random_state=int(rng.integers(2**31)), **kw)
        row = {"rep": r}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(X, y)
                table = est.summary()
        except ValueError as exc:
            row["error"] = str(exc)[:200]
            rows.append(row)
            continue
        truth = population_estimand(est, Xpop, ypop)
        lo, hi = table.iloc[:, 4].to_numpy(), table.iloc[:, 5].to_numpy()
        given = np.isfinite(lo) & np.isfinite(hi)  # no interval for a dropped feature
        row.update(covered=np.where(given, (lo <= truth) & (truth <= hi), np.nan).tolist(),
                   width=np.where(given, hi - lo, np.nan).tolist(),
                   ridge="adaptive ridge" in table.attrs["text"])
        if r < sm_reps:
            row["sm_width"] = statsmodels_widths(model, X, y).tolist()
        rows.append(row)
    return rows


def block_path(out, cell, block):
    return out / f"{cell}.b{block:03d}.json"


def run(cells, reps, jobs, out, sm_reps):
    from joblib import Parallel, delayed

    out.mkdir(parents=True, exist_ok=True)
    todo = []
    for cell in cells:
        for block in range(math.ceil(reps / BLOCK)):
            if not block_path(out, cell_name(*cell), block).exists():
                todo.append((cell, block))
    # every cell gains replicates evenly (block-major), the target cells (n >= 1e4) first
    todo.sort(key=lambda cb: (cb[1], {10_000: 0, 100_000: 1}.get(cb[0][3], 2), cb[0][0]))

    def one(cell, block):
        rows = run_block(*cell, block, BLOCK, sm_reps)
        path = block_path(out, cell_name(*cell), block)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rows))
        tmp.replace(path)
        return cell_name(*cell), block

    for name, block in Parallel(n_jobs=jobs, return_as="generator_unordered")(
            delayed(one)(c, b) for c, b in todo):
        print(f"done {name} block {block}", flush=True)


def summarize_rows(rows):
    ok = [r for r in rows if "covered" in r]
    if not ok:
        return None
    cov = np.array([r["covered"] for r in ok], float)
    width = np.array([r["width"] for r in ok], float)
    sm = np.array([r["sm_width"] for r in ok if "sm_width" in r])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a coefficient never given
        ratio = (np.nanmedian(width, axis=0) / np.median(sm, axis=0)) if sm.size else None
        coverage = np.nanmean(cov, axis=0)
    return {"reps": len(ok), "errors": len(rows) - len(ok), "coverage": coverage,
            "given": np.mean(np.isfinite(cov)), "width_ratio": ratio}


def summarize(out):
    """Markdown table of every cell with results (coefficients; the intercept separately)."""
    cells = {}
    for path in sorted(out.glob("*.json")):
        cells.setdefault(path.name.split(".b")[0], []).extend(json.loads(path.read_text()))
    lines = ["| cell | reps | no fit | intervals given | mean coverage (coef) | "
             "min coverage (coef) | intercept coverage | median width / statsmodels "
             "(coef: median, max) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, rows in cells.items():
        s = summarize_rows(rows)
        if s is None:
            lines.append(f"| {name} | 0 | {len(rows)} | | | | | |")
            continue
        cov, wr = s["coverage"][:-1], s["width_ratio"]
        ratio = "" if wr is None else f"{np.nanmedian(wr[:-1]):.2f}, {np.nanmax(wr[:-1]):.2f}"
        lines.append(f"| {name} | {s['reps']} | {s['errors']} | {s['given']:.3f} | "
                     f"{np.nanmean(cov):.3f} | {np.nanmin(cov):.3f} | {s['coverage'][-1]:.3f} | "
                     f"{ratio} |")
    return "\n".join(lines)


def all_cells():
    return list(itertools.product(MODELS, NOISES, EPSILONS, NS, PS))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="the whole grid at 1000 replications")
    ap.add_argument("--quick", action="store_true", help="n = 1e4, p = 3, eps = 1: 50 reps")
    ap.add_argument("--cells", default=None, help="substring filter on cell names")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--sm-reps", type=int, default=20)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--summarize", action="store_true")
    args = ap.parse_args(argv)
    if args.summarize:
        print(summarize(args.out))
        return 0
    cells = all_cells()
    reps = args.reps or (1000 if args.full else BLOCK)
    if args.quick:
        cells = [c for c in cells if c[2] == 1.0 and c[3] == 10_000 and c[4] == 3]
    if args.cells:
        cells = [c for c in cells if all(s in cell_name(*c) for s in args.cells.split(","))]
    if not (args.full or args.quick or args.cells):
        ap.error("choose --full, --quick, --cells or --summarize")
    run(cells, reps, args.jobs, args.out, args.sm_reps)
    print(summarize(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
