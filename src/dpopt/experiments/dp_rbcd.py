"""Experiment "dp-rbcd": when do coordinate blocks and importance sampling pay off?

The DP-RBCD paper (seed 000) has no experiments; this one is ours. It compares,
on the same problems and with the same tuning protocol:

* DP-CD with uniform coordinates (``dp-rbcd``, ``sampling="uniform"``, identical
  to ``dp-cd``), with importance sampling p_j proportional to M_j (the paper's
  suggestion) and to sqrt(M_j);
* tau-nice blocks, tau in {2, 4}, with the safe steps gamma / (tau M_j);
* DP-GD: the full set with coordinate clipping and ESO steps gamma / (p M_j)
  (``sampling="full"``), and the usual DP-GD (L2 clipping, step gamma / beta);

on California (LASSO) and Electricity (L2-regularized logistic regression), raw
("imbalanced") and standardized ("balanced"), and on two synthetic problems with
strongly imbalanced columns (scales 1..100, M_j over four orders of magnitude):
``imbalanced-units``, where the imbalance is only a change of units (the true
coefficients are b_j / s_j, so M_j w*_j^2 is balanced), and ``imbalanced-signal``,
where only the quarter of the columns with the largest scales carry signal. The
two are built to sit on either side of the single-coordinate theory's criterion:
importance sampling p_j ~ M_j improves the convex rate iff
R^2(p ~ M) / R^2(uniform) = (sum_j M_j)(sum_j w*_j^2) / (p sum_j M_j w*_j^2) < 1
(notes, section 4), reported in the summary table for every problem.

Protocol (as in the DP-CD paper's reproduction, with a smaller grid): for every
(problem, method, epsilon in {0.5, 1, 4}, pass budget in {3, 10, 30}) the step
scale gamma and the clipping threshold C are tuned on a grid (7 x 6), by the mean
relative error (F(w) - F*) / F* of the last iterate over 2 runs; the selected
configuration is re-run 5 times with fresh seeds, which gives the reported numbers
(no winner's curse). delta = 1 / n^2, replace-one adjacency, Gaussian-DP
accountant. As in that paper, neither the tuning, the standardization nor the
smoothness constants M_j / beta (passed to the solvers as public arrays) are
charged to the budget: they are computed from the data without privacy.

Model choices (the papers do not report them): intercept fitted (unpenalized),
California LASSO with alpha = 0.05 (lambda = 0.1 of the DP-GCD paper under its
(x^T w - y)^2 scaling, halved for the 1/2 (x^T w - y)^2 used here), Electricity
logistic with alpha = 1e-3, synthetic LASSO with alpha = 0.1 (n = 10000, p = 20).
"""

from __future__ import annotations

import json
import math
import time
import warnings
from pathlib import Path

import numpy as np

import dpopt
from dpopt._core.exceptions import PrivacyLeakWarning
from dpopt.datasets import load_dataset, make_imbalanced
from dpopt.experiments import register_experiment
from dpopt.experiments.protocol import (
    best_rows,
    budget_curves,
    bundle,
    fmt,
    fmt_value,
    markdown_table,
    save_figure,
    summarize,
    write_csv,
)
from dpopt.experiments.runner import ResultStore, run_grid

NAME = "dp-rbcd"
ROOT_SEED = 20250005

METHODS = {  # label -> (solver, options)
    "CD uniform": ("dp-rbcd", {"sampling": "uniform"}),
    "CD importance M": ("dp-rbcd", {"sampling": "importance"}),
    "CD importance sqrtM": ("dp-rbcd", {"sampling": "importance-sqrt"}),
    "2-nice": ("dp-rbcd", {"sampling": "nice", "block_size": 2}),
    "4-nice": ("dp-rbcd", {"sampling": "nice", "block_size": 4}),
    "GD coord-clip ESO": ("dp-rbcd", {"sampling": "full"}),
    "GD L2-clip 1/beta": ("dp-gd", {"clipping": "l2", "step_rule": "global"}),
}

# dataset -> (source, loss, penalty, alpha, standardize)
PROBLEMS = {
    "california-raw": ("california", "squared", "l1", 0.05, False),
    "california-std": ("california", "squared", "l1", 0.05, True),
    "electricity-raw": ("electricity", "logistic", "l2", 1e-3, False),
    "electricity-std": ("electricity", "logistic", "l2", 1e-3, True),
    "imbalanced-units": ("synthetic-units", "squared", "l1", 0.1, False),
    "imbalanced-signal": ("synthetic-signal", "squared", "l1", 0.1, False),
}

FULL = {"datasets": list(PROBLEMS), "methods": list(METHODS), "epsilons": [0.5, 1.0, 4.0],
        "budgets": [3, 10, 30], "steps": [0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0],
        "clips": [1.0, 10.0, 100.0, 1e3, 1e4, 1e5], "tune_reps": 2, "final_reps": 5,
        "synthetic": {"n": 10_000, "p": 20, "ratio": 100.0}}
QUICK = {"datasets": ["imbalanced-units", "imbalanced-signal"], "methods": list(METHODS),
         "epsilons": [1.0], "budgets": [2, 5], "steps": [0.3, 1.0], "clips": [1.0, 100.0],
         "tune_reps": 1, "final_reps": 2, "synthetic": {"n": 1000, "p": 8, "ratio": 100.0}}


# ---------------------------------------------------------------------------
# data and problems


def _synthetic(kind, n, p, ratio):
    """make_imbalanced's design (columns X_j = s_j Z_j, s_j from 1 to ``ratio``).

    ``units``: its response, coefficients b_j / s_j (the imbalance is a change of units).
    ``signal``: only the quarter of the columns with the largest scales carry signal,
    with N(0, 1) coefficients in the units of X (rescaled so that the response has
    variance about p, as in ``units``); same noise.
    """
    X, y, coef = make_imbalanced(n, p, ratio, "squared", 1.0, random_state=5, return_coef=True)
    if kind == "synthetic-units":
        return X, y
    s = ratio ** (np.arange(p) / (p - 1))
    b = coef * s  # coefficients of the standardized design Z = X / s
    noise = y - (X / s) @ b
    top = np.arange(p) >= p - max(1, p // 4)
    c = np.where(top, b, 0.0) * math.sqrt(p) / np.linalg.norm(s[top])
    return X, X @ c + noise


def build_problem(dataset, quick):
    """A problem with its (non-private) smoothness constants ``M`` and ``beta``. A real
    dataset comes from :func:`dpopt.datasets.load_dataset` (downloaded if need be; a
    ``ValueError`` when it cannot be had)."""
    source, loss, penalty, alpha, standardize = PROBLEMS[dataset]
    if source.startswith("synthetic"):
        X, y = _synthetic(source, **(QUICK if quick else FULL)["synthetic"])
    else:
        ds = load_dataset(source)
        X, y = np.asarray(ds.X, dtype=np.float64), ds.y
    if standardize:
        X = (X - X.mean(axis=0)) / X.std(axis=0)
    pb = dpopt.Problem(X, y, loss, penalty, alpha=alpha, fit_intercept=True)
    return pb, {"M": pb.coordinate_smoothness(), "beta": pb.global_smoothness()}


def get_problem(dataset, quick):
    """The cached :class:`~dpopt.experiments.protocol.ProblemBundle` of a dataset."""
    return bundle(dataset, quick, build_problem)


def _quick(config):
    """Whether a configuration belongs to the quick plan (its synthetic sizes say so)."""
    for quick, plan in ((True, QUICK), (False, FULL)):
        if config["synthetic"] == plan["synthetic"]:
            return quick
    raise ValueError(f"config['synthetic'] must be the quick or the full plan's, got "
                     f"{config['synthetic']!r}")


def _fit(config, step, clip, passes, seed, checkpoint_every=None):
    b = get_problem(config["dataset"], _quick(config))
    solver, options = METHODS[config["method"]]
    smoothness = b.info["beta"] if solver == "dp-gd" else b.info["M"]
    t0 = time.perf_counter()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        res = dpopt.solve(b.problem, solver, epsilon=config["epsilon"],
                          delta=1.0 / b.problem.n_samples ** 2, random_state=seed,
                          passes=passes, step=step, clip=clip, smoothness=smoothness,
                          checkpoint_every=checkpoint_every or passes, **options)
        wall = time.perf_counter() - t0
        traj = [b.relative_error(w) for w in res.checkpoints]
    if not (res.epsilon <= config["epsilon"] and res.adjacency == "replace-one"):
        raise RuntimeError(f"{solver}: spent ({res.epsilon}, {res.adjacency}) instead of at most "
                           f"epsilon={config['epsilon']} under replace-one (a dpopt bug)")
    return traj, wall, res


def run_one(config, seed):
    """One tuning cell (the whole step x clip grid) or one final configuration."""
    if config["stage"] == "tune":
        seeds = seed.spawn(len(config["steps"]) * len(config["clips"]) * config["reps"])
        grid, it = [], iter(seeds)
        for step in config["steps"]:
            for clip in config["clips"]:
                errs = [_fit(config, step, clip, config["passes"], next(it))[0][-1]
                        for _ in range(config["reps"])]
                grid.append({"step": step, "clip": clip, "errors": errs,
                             "mean": float(np.mean(errs))})
        return {"grid": grid}
    runs = []
    for s in seed.spawn(config["reps"]):
        traj, wall, res = _fit(config, config["step"], config["clip"], config["passes"], s,
                               checkpoint_every=1)
        runs.append({"error": traj[-1], "trajectory": traj, "time": wall,
                     "epsilon_spent": res.epsilon, "noise_multiplier": res.noise_multiplier,
                     "steps": res.n_iter})
    return {"runs": runs}


# ---------------------------------------------------------------------------
# driver


def _available(datasets, quick, notes):
    keep = []
    for d in datasets:
        try:
            get_problem(d, quick)
            keep.append(d)
        except ValueError as exc:  # DatasetNotAvailableError is a ValueError
            notes.append(f"skipped {d}: {exc}")
    return keep


CELL = ("dataset", "method", "epsilon")  # a curve: the tuned error at every pass budget


def plot_records(records):
    """``runs.jsonl`` of this reproduction -> :mod:`dpopt.experiments.plotting` records: per (dataset,
    method, epsilon) and final run, the error (and wall time) at every pass budget, each
    budget with its own tuned (step, clip)."""
    return budget_curves({
        (c["method"], c["dataset"], c["epsilon"], c["passes"]):
            [{"rel_error": run["error"], "time": run.get("time")} for run in rec.get("runs") or []]
        for rec in records for c in [rec.get("config") or {}]
        if c.get("stage") == "final" and "method" in c})


@register_experiment(NAME, plot_records=plot_records,
                     description="DP random block CD: uniform vs importance sampling vs "
                     "tau-nice blocks vs DP-GD on California, Electricity and imbalanced data")
def run(out: Path, quick: bool, n_jobs: int = 1, backend: str = "loky", progress: bool = True):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plan = QUICK if quick else FULL
    notes: list[str] = []
    datasets = _available(plan["datasets"], quick, notes)
    store = ResultStore(out / "runs.jsonl")
    kw = dict(store=store, root_seed=ROOT_SEED, n_jobs=n_jobs, backend=backend,
              progress=progress)
    base = {"synthetic": plan["synthetic"]}
    cells = [dict(base, dataset=d, method=m, epsilon=e, passes=b)
             for d in datasets for m in plan["methods"] for e in plan["epsilons"]
             for b in plan["budgets"]]
    t0 = time.perf_counter()
    tuned = run_grid([dict(c, stage="tune", steps=plan["steps"], clips=plan["clips"],
                           reps=plan["tune_reps"]) for c in cells], run_one,
                     desc="dp-rbcd tuning", **kw)
    finals = []
    for rec in tuned:
        best = min(rec["grid"], key=lambda g: g["mean"])
        cell = {k: rec["config"][k] for k in ("synthetic", "dataset", "method", "epsilon",
                                             "passes")}
        if math.isfinite(best["mean"]):
            finals.append(dict(cell, stage="final", step=best["step"], clip=best["clip"],
                               reps=plan["final_reps"]))
        else:
            notes.append(f"no finite configuration: {cell['dataset']} {cell['method']} "
                         f"eps={cell['epsilon']} passes={cell['passes']}")
    final = run_grid(finals, run_one, desc="dp-rbcd final runs", **kw)
    rows = _rows(final, tuned, plan)
    _write_tables(out, rows, plan, datasets, notes, quick)
    figures = _figures(out, final, plan, quick)
    (out / "plan.json").write_text(json.dumps(plan, indent=1))
    return {"runs": len(tuned) + len(final), "table": str(out / "table.md"),
            "figures": ", ".join(str(f) for f in figures), "notes": "; ".join(notes) or "none",
            "seconds": round(time.perf_counter() - t0, 1)}


COLUMNS = ["dataset", "method", "epsilon", "passes", "step", "clip", "mean", "std", "min",
           "max", "time", "tuning_mean", "grid_edge"]


def _rows(final, tuned, plan):
    """One row per final configuration: its error over the final runs, the median wall
    time, the best tuning mean and whether (step, clip) sits at the edge of the grid."""
    tuning = {tuple(r["config"][k] for k in (*CELL, "passes")): r["grid"] for r in tuned}
    rows = summarize(final, by=(*CELL, "passes", "step", "clip"),
                     value=lambda rec: [run["error"] for run in rec["runs"]])
    for row in rows:
        runs = row["records"][0]["runs"]
        row["time"] = float(np.median([run["time"] for run in runs]))
        row["tuning_mean"] = min(g["mean"] for g in tuning[tuple(row[k] for k in
                                                                 (*CELL, "passes"))])
        row["grid_edge"] = (row["step"] in (plan["steps"][0], plan["steps"][-1])
                            or row["clip"] in (plan["clips"][0], plan["clips"][-1]))
    return rows


def _write_tables(out, rows, plan, datasets, notes, quick):
    write_csv(out / "results.csv", rows, COLUMNS)
    lines = ["# DP-RBCD: relative error (F - F*) / F* after tuning (step, clip)", "",
             f"Mean ± std over {plan['final_reps']} runs of the configuration selected on "
             f"{plan['tune_reps']} other runs; (ε, 1/n²)-DP, replace-one adjacency. `*`: best "
             "pass budget of the row; **bold**: best method of the column. `†`: the selected "
             "step or clip is at the edge of the grid.", ""]
    index = {tuple(r[k] for k in (*CELL, "passes")): r for r in rows}
    for d in datasets:
        for e in plan["epsilons"]:
            lines += [f"## {d}, ε = {e:g}", "",
                      markdown_table(["method", *(f"{b} passes" for b in plan["budgets"])],
                                     _method_rows(index, plan, d, e)), ""]
    lines += _summary_lines(rows, plan, datasets, quick)
    if notes:
        lines += ["", "Notes: " + "; ".join(notes)]
    (out / "table.md").write_text("\n".join(lines) + "\n")


def _method_rows(index, plan, d, e):
    """The cells of one (dataset, epsilon) table: mean ± std, marked."""
    col_best = {b: min((index[(d, m, e, b)]["mean"] for m in plan["methods"]
                        if (d, m, e, b) in index), default=math.inf) for b in plan["budgets"]}
    out = []
    for m in plan["methods"]:
        cells = [index.get((d, m, e, b)) for b in plan["budgets"]]
        row_best = min((c["mean"] for c in cells if c), default=math.inf)
        out.append([m] + [_cell(c, c is not None and c["mean"] == col_best[b], row_best)
                          for b, c in zip(plan["budgets"], cells)])
    return out


def _cell(c, column_best, row_best):
    if c is None:
        return "—"
    s = fmt(c["mean"], c["std"])
    s = f"**{s}**" if column_best else s
    return s + ("*" if c["mean"] == row_best else "") + ("†" if c["grid_edge"] else "")


def _summary_lines(rows, plan, datasets, quick):
    """Best over pass budgets, as a ratio to uniform DP-CD (< 1: better than uniform)."""
    best = {k: r["mean"] for k, r in best_rows(rows, by=CELL).items()}
    problems = []
    for d in datasets:
        b = get_problem(d, quick)
        M = b.info["M"]
        problems.append([d, b.problem.n_samples, b.problem.dim, M.max() / M.min(),
                         fmt_value(b.f_star, 6)])
    lines = ["## Problems", "",
             markdown_table(["problem", "n", "dim (with intercept)", "max M_j / min M_j", "F*"],
                            problems),
             "", "## Best over pass budgets, relative to uniform DP-CD", "",
             "Ratio of the best mean relative error (over the pass budgets) to that of "
             "`CD uniform` (< 1: better). Column 'R² ratio': the theory's R² ratio for single "
             "coordinates, R²(p ∝ M) / R²(uniform) = (Σ M_j)(Σ w*_j²) / (p Σ M_j w*_j²) "
             "(< 1: importance sampling should help; computed non-privately from w*). "
             "κ = (Σ M_j)(Σ 1/M_j) / p²: the factor by which isotropic block noise inflates "
             "the noise term V² of the full set over single coordinates (τ-nice: "
             "1/τ + (1 - 1/τ)(pκ - 1)/(p - 1)); κ = 1 for balanced M.", ""]
    ratios = []
    for d in datasets:
        ratio, kappa = _r2_ratio(get_problem(d, quick))
        for e in plan["epsilons"]:
            u = best.get((d, plan["methods"][0], e), math.nan)
            ratios.append([d, fmt_value(e), *(fmt_value(best.get((d, m, e), math.nan) / u)
                                              if u > 0 else "—" for m in plan["methods"][1:]),
                           ratio, kappa])
    lines.append(markdown_table(["dataset", "ε", *plan["methods"][1:], "R² ratio", "κ"],
                                ratios))
    return lines


def _r2_ratio(b):
    """(R² ratio of importance vs uniform singletons, block-noise factor kappa)."""
    M, wstar, dim = b.info["M"], b.w_star, b.problem.dim
    ratio = float(M.sum() * np.sum(wstar ** 2) / (dim * np.sum(M * wstar ** 2)))
    return ratio, float(M.sum() * np.sum(1.0 / M) / dim ** 2)


def _figure_epsilon(plan):
    """The epsilon the figures show (the middle of the plan's; every epsilon is in the table)."""
    eps = sorted(plan["epsilons"])
    return eps[len(eps) // 2]


def _figures(out, final, plan, quick):
    """error_vs_passes.png and error_vs_time.png through :mod:`dpopt.experiments.plotting`: one panel
    per dataset at one epsilon (:func:`_figure_epsilon`), a line per method (mean and
    min-max over the final runs, at every pass budget), log-log as the budgets span decades."""
    eps = _figure_epsilon(plan)
    records = [r for r in plot_records(final) if r["config"]["epsilon"] == eps]
    title = (f"DP-RBCD{' (quick)' if quick else ''}: step and clip tuned per pass budget, "
             f"mean and min-max over {plan['final_reps']} final runs; other ε in table.md")
    return [save_figure(records, out / f"error_vs_{kind}.png", kind, title=title, xscale="log")
            for kind in ("passes", "time")]
