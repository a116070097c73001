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

import functools
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np

import dpopt
from dpopt.exceptions import PrivacyLeakWarning
from dpopt.experiments import register_experiment
from dpopt.experiments.runner import ResultStore, plot_record, relative_error, run_grid

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
    from dpopt.datasets import make_imbalanced

    X, y, coef = make_imbalanced(n, p, ratio, "squared", 1.0, random_state=5, return_coef=True)
    if kind == "synthetic-units":
        return X, y
    s = ratio ** (np.arange(p) / (p - 1))
    b = coef * s  # coefficients of the standardized design Z = X / s
    noise = y - (X / s) @ b
    top = np.arange(p) >= p - max(1, p // 4)
    c = np.where(top, b, 0.0) * math.sqrt(p) / np.linalg.norm(s[top])
    return X, X @ c + noise


@functools.cache
def _problem(dataset, synthetic_key):
    """(problem, F*, M, beta) for a dataset name; cached per process."""
    source, loss, penalty, alpha, standardize = PROBLEMS[dataset]
    if source.startswith("synthetic"):
        X, y = _synthetic(source, **dict(synthetic_key))
    else:
        from dpopt.datasets import load_dataset

        ds = load_dataset(source)
        X, y = np.asarray(ds.X, dtype=np.float64), ds.y
    if standardize:
        X = (X - X.mean(axis=0)) / X.std(axis=0)
    pb = dpopt.Problem(X, y, loss, penalty, alpha=alpha, fit_intercept=True)
    _, fstar = dpopt.reference_optimum(pb)
    return pb, fstar, pb.coordinate_smoothness(), pb.global_smoothness()


def _fit(config, step, clip, passes, seed, checkpoint_every=None):
    pb, fstar, M, beta = _problem(config["dataset"], _synth_key(config))
    solver, options = METHODS[config["method"]]
    smoothness = beta if solver == "dp-gd" else M
    t0 = time.perf_counter()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        res = dpopt.solve(pb, solver, epsilon=config["epsilon"], delta=1.0 / pb.n_samples ** 2,
                          random_state=seed, passes=passes, step=step, clip=clip,
                          smoothness=smoothness, checkpoint_every=checkpoint_every or passes,
                          **options)
        wall = time.perf_counter() - t0
        traj = [relative_error(pb.objective(w), fstar) for w in res.checkpoints]
    assert res.epsilon <= config["epsilon"] and res.adjacency == "replace-one"
    return traj, wall, res


def _synth_key(config):
    return tuple(sorted(config["synthetic"].items()))


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


def _available(datasets, plan, notes):
    keep = []
    for d in datasets:
        try:
            _problem(d, tuple(sorted(plan["synthetic"].items())))
            keep.append(d)
        except ValueError as exc:  # DatasetNotAvailableError is a ValueError
            notes.append(f"skipped {d}: {exc}")
    return keep


def plot_records(records):
    """``runs.jsonl`` of this reproduction -> :mod:`dpopt.plotting` records: the final runs
    at the largest pass budget, one curve per method, error at every pass."""
    finals = [r for r in records if (r.get("config") or {}).get("stage") == "final"
              and "method" in r["config"]]
    largest = {}
    for rec in finals:
        c = rec["config"]
        cell = (c["dataset"], c["method"], c["epsilon"])
        largest[cell] = max(largest.get(cell, 0), c["passes"])
    out = []
    for rec in finals:
        c = rec["config"]
        if c["passes"] != largest[(c["dataset"], c["method"], c["epsilon"])]:
            continue
        for r, run in enumerate(rec.get("runs") or []):
            traj = run["trajectory"]
            out.append(plot_record(c["method"], c["dataset"], c["epsilon"], r,
                                   rel_error=run["error"], passes=range(len(traj)),
                                   trajectory=traj))
    return out


@register_experiment(NAME, plot_records=plot_records,
                     description="DP random block CD: uniform vs importance sampling vs "
                     "tau-nice blocks vs DP-GD on California, Electricity and imbalanced data")
def run(out: Path, quick: bool, n_jobs: int = 1, backend: str = "loky", progress: bool = True):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plan = QUICK if quick else FULL
    notes: list[str] = []
    datasets = _available(plan["datasets"], plan, notes)
    store = ResultStore(out / "runs.jsonl")
    base = {"synthetic": plan["synthetic"]}
    cells = [dict(base, dataset=d, method=m, epsilon=e, passes=b)
             for d in datasets for m in plan["methods"] for e in plan["epsilons"]
             for b in plan["budgets"]]
    t0 = time.perf_counter()
    tuned = run_grid([dict(c, stage="tune", steps=plan["steps"], clips=plan["clips"],
                           reps=plan["tune_reps"]) for c in cells], run_one, store=store,
                     root_seed=ROOT_SEED, n_jobs=n_jobs, backend=backend, progress=progress,
                     desc="dp-rbcd tuning")
    finals = []
    for rec in tuned:
        best = min(rec["grid"], key=lambda g: g["mean"])
        if math.isfinite(best["mean"]):
            cell = {k: rec["config"][k] for k in ("synthetic", "dataset", "method", "epsilon",
                                                 "passes")}
            finals.append(dict(cell, stage="final", step=best["step"], clip=best["clip"],
                               reps=plan["final_reps"]))
        else:
            notes.append(f"no finite configuration: {rec['config']['dataset']} "
                         f"{rec['config']['method']} eps={rec['config']['epsilon']} "
                         f"passes={rec['config']['passes']}")
    final = run_grid(finals, run_one, store=store, root_seed=ROOT_SEED, n_jobs=n_jobs,
                     backend=backend, progress=progress, desc="dp-rbcd final runs")
    rows = _rows(final, tuned, plan)
    _write_tables(out, rows, plan, datasets, notes)
    figures = _figures(out, rows, plan, datasets)
    return {"runs": len(tuned) + len(final), "table": str(out / "table.md"),
            "figures": ", ".join(str(f) for f in figures), "notes": "; ".join(notes) or "none",
            "seconds": round(time.perf_counter() - t0, 1)}


def _rows(final, tuned, plan):
    edges = {(r["config"]["dataset"], r["config"]["method"], r["config"]["epsilon"],
              r["config"]["passes"]): r for r in tuned}
    rows = []
    for rec in final:
        c = rec["config"]
        errs = np.array([r["error"] for r in rec["runs"]])
        times = np.array([r["time"] for r in rec["runs"]])
        grid = edges[(c["dataset"], c["method"], c["epsilon"], c["passes"])]["grid"]
        at_edge = (c["step"] in (plan["steps"][0], plan["steps"][-1])
                   or c["clip"] in (plan["clips"][0], plan["clips"][-1]))
        rows.append({"dataset": c["dataset"], "method": c["method"], "epsilon": c["epsilon"],
                     "passes": c["passes"], "step": c["step"], "clip": c["clip"],
                     "mean": float(errs.mean()), "std": float(errs.std()),
                     "min": float(errs.min()), "max": float(errs.max()),
                     "time": float(np.median(times)),
                     "tuning_mean": min(g["mean"] for g in grid),
                     "grid_edge": at_edge})
    return rows


def _fmt(x):
    if not math.isfinite(x):
        return "inf"
    return f"{x:.3g}" if x >= 1e-3 else f"{x:.2e}"


def _write_tables(out, rows, plan, datasets, notes):
    import csv

    with (out / "results.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["dataset"])
        writer.writeheader()
        writer.writerows(rows)
    index = {(r["dataset"], r["method"], r["epsilon"], r["passes"]): r for r in rows}
    lines = ["# DP-RBCD: relative error (F - F*) / F* after tuning (step, clip)", "",
             f"Mean ± std over {plan['final_reps']} runs of the configuration selected on "
             f"{plan['tune_reps']} other runs; (ε, 1/n²)-DP, replace-one adjacency. `*`: best "
             "pass budget of the row; **bold**: best method of the column. `†`: the selected "
             "step or clip is at the edge of the grid.", ""]
    for d in datasets:
        for e in plan["epsilons"]:
            lines += [f"## {d}, ε = {e:g}", "",
                      "| method | " + " | ".join(f"{b} passes" for b in plan["budgets"]) + " |",
                      "|---|" + "---|" * len(plan["budgets"])]
            col_best = {b: min((index[(d, m, e, b)]["mean"] for m in plan["methods"]
                                if (d, m, e, b) in index), default=math.inf)
                        for b in plan["budgets"]}
            for m in plan["methods"]:
                cells = [index.get((d, m, e, b)) for b in plan["budgets"]]
                row_best = min((c["mean"] for c in cells if c), default=math.inf)
                txt = []
                for b, c in zip(plan["budgets"], cells):
                    if c is None:
                        txt.append("—")
                        continue
                    s = f"{_fmt(c['mean'])} ± {_fmt(c['std'])}"
                    s = f"**{s}**" if c["mean"] == col_best[b] else s
                    s += "*" if c["mean"] == row_best else ""
                    s += "†" if c["grid_edge"] else ""
                    txt.append(s)
                lines.append(f"| {m} | " + " | ".join(txt) + " |")
            lines.append("")
    lines += _summary_lines(rows, plan, datasets)
    if notes:
        lines += ["", "Notes: " + "; ".join(notes)]
    (out / "table.md").write_text("\n".join(lines) + "\n")


def _summary_lines(rows, plan, datasets):
    """Best over pass budgets, as a ratio to uniform DP-CD (< 1: better than uniform)."""
    best = {}
    for r in rows:
        key = (r["dataset"], r["method"], r["epsilon"])
        best[key] = min(best.get(key, math.inf), r["mean"])
    lines = ["## Problems", "",
             "| problem | n | dim (with intercept) | max M_j / min M_j | F* |", "|---|---|---|---|---|"]
    for d in datasets:
        pb, fstar, M, _ = _problem(d, tuple(sorted(plan["synthetic"].items())))
        lines.append(f"| {d} | {pb.n_samples} | {pb.dim} | {M.max() / M.min():.3g} | "
                     f"{fstar:.6g} |")
    lines += ["", "## Best over pass budgets, relative to uniform DP-CD", "",
             "Ratio of the best mean relative error (over the pass budgets) to that of "
             "`CD uniform` (< 1: better). Column 'R² ratio': the theory's R² ratio for single "
             "coordinates, R²(p ∝ M) / R²(uniform) = (Σ M_j)(Σ w*_j²) / (p Σ M_j w*_j²) "
             "(< 1: importance sampling should help; computed non-privately from w*). "
             "κ = (Σ M_j)(Σ 1/M_j) / p²: the factor by which isotropic block noise inflates "
             "the noise term V² of the full set over single coordinates (τ-nice: "
             "1/τ + (1 - 1/τ)(pκ - 1)/(p - 1)); κ = 1 for balanced M.", "",
             "| dataset | ε | " + " | ".join(plan["methods"][1:]) + " | R² ratio | κ |",
             "|---|---|" + "---|" * (len(plan["methods"]) + 1)]
    for d in datasets:
        ratio, kappa = _r2_ratio(d, plan)
        for e in plan["epsilons"]:
            u = best.get((d, plan["methods"][0], e), math.nan)
            cells = [_fmt(best.get((d, m, e), math.nan) / u) if u > 0 else "—"
                     for m in plan["methods"][1:]]
            lines.append(f"| {d} | {e:g} | " + " | ".join(cells)
                         + f" | {ratio:.3g} | {kappa:.3g} |")
    return lines


def _r2_ratio(dataset, plan):
    """(R² ratio of importance vs uniform singletons, block-noise factor kappa)."""
    pb, _, M, _ = _problem(dataset, tuple(sorted(plan["synthetic"].items())))
    wstar, _ = dpopt.reference_optimum(pb)
    ratio = float(M.sum() * np.sum(wstar ** 2) / (pb.dim * np.sum(M * wstar ** 2)))
    return ratio, float(M.sum() * np.sum(1.0 / M) / pb.dim ** 2)


MARKERS = "osD^v<>xP*"
STYLES = ("-", "--", "-.", ":")


def _figure_epsilon(plan):
    """The epsilon the figures show (the middle of the plan's; every epsilon is in the table)."""
    eps = sorted(plan["epsilons"])
    return eps[len(eps) // 2]


def _figures(out, rows, plan, datasets):
    """error_vs_passes.png and error_vs_time.png: one panel per dataset at one epsilon
    (:func:`_figure_epsilon`), a labelled line per method (mean of the final runs); the
    min-max over runs is drawn only for a method whose band overlaps no other line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    eps = _figure_epsilon(plan)
    paths = []
    for xkey, xlabel, fname in (("passes", "passes (budget; step and clip tuned per budget)",
                                 "error_vs_passes.png"),
                                ("time", "wall time of a run (s)", "error_vs_time.png")):
        nc = min(3, len(datasets))
        nr = math.ceil(len(datasets) / nc)
        fig, axes = plt.subplots(nr, nc, figsize=(4.6 * nc, 3.4 * nr + 0.8), squeeze=False)
        for i, d in enumerate(datasets):
            ax = axes[i // nc][i % nc]
            curves = {}
            for m in plan["methods"]:
                pts = sorted((r for r in rows if (r["dataset"], r["method"], r["epsilon"])
                              == (d, m, eps)), key=lambda r: r["passes"])
                if pts:
                    curves[m] = pts
            for k, (m, pts) in enumerate(curves.items()):
                x = [r[xkey] for r in pts]
                line, = ax.plot(x, [r["mean"] for r in pts], marker=MARKERS[k % len(MARKERS)],
                                ls=STYLES[k % len(STYLES)], ms=4, lw=1.4, label=m)
                others = [r["mean"] for n, o in curves.items() if n != m for r in o]
                lo, hi = min(r["min"] for r in pts), max(r["max"] for r in pts)
                if not any(lo <= v <= hi for v in others):
                    ax.fill_between(x, [r["min"] for r in pts], [r["max"] for r in pts],
                                    color=line.get_color(), alpha=0.15)
            ax.set_xscale("log")
            ax.set_yscale("log")
            if xkey == "passes":
                ax.set_xticks(plan["budgets"], [str(b) for b in plan["budgets"]])
                ax.minorticks_off()
            else:
                ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_title(f"{d}, ε = {eps:g}, replace-one", fontsize=10)
            ax.set_xlabel(xlabel, fontsize=9)
            ax.set_ylabel("relative error (F(w) − F*) / F*", fontsize=9)
            ax.grid(True, which="major", alpha=0.3)
        for j in range(len(datasets), nr * nc):
            axes[j // nc][j % nc].set_visible(False)
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 4), fontsize=9,
                   title="mean of the final runs; other ε in table.md", title_fontsize=9)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.9 / (3.4 * nr + 0.8)))
        path = out / fname
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    (out / "plan.json").write_text(json.dumps(plan, indent=1))
    return paths
