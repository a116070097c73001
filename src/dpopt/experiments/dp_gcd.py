"""Reproduction of the DP-GCD paper's experiments (Mangold et al., AISTATS 2023, Section 5).

``dpopt reproduce dp-gcd [--quick]``: DP-GCD against DP-CD and DP-SGD at
(epsilon, delta) = (1, 1/n^2), relative error (F(w) - F*) / F* against passes on
the data (1 pass = 1 DP-GCD iteration = p DP-CD steps = n DP-SGD steps),
min / mean / max over runs of the best (step, clip) for every number of passes
(chosen by the mean), a table beside the paper's Table 3 and a figure in the
layout of its Figure 1. Every choice the paper leaves open is listed in
``CHOICES`` and copied into the written report.

Loss scaling. The paper's least squares is (1/n) sum (x^T w - y)^2 + lambda psi;
dpopt's is (1/n) sum (x^T w - y)^2 / 2 + alpha psi. Halving the paper's
objective gives dpopt's with alpha = lambda / 2 (same minimiser, F halved, so
relative errors are unchanged): LASSO lambda = 30 -> alpha = 15, lambda = 0.1 ->
alpha = 0.05. The paper's logistic loss and (lambda / 2) ||w||^2 are dpopt's
``l2`` penalty as they are: alpha = lambda.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

import dpopt
from dpopt.datasets import make_quasi_sparse_logistic, make_square
from dpopt.experiments import register_experiment
from dpopt.experiments.protocol import (
    best_rows,
    budget_curves,
    bundle,
    fmt_value,
    local_dataset,
    markdown_table,
    save_figure,
    summarize,
    write_csv,
)
from dpopt.experiments.runner import ResultStore, config_key, run_grid

EPSILON = 1.0
ROOT_SEED = 2023
PAPER_STEPS_GCD = [float(v) for v in np.logspace(-2, 1, 10)]
PAPER_STEPS_SGD = [float(v) for v in np.logspace(-6, 0, 10)]
PAPER_CLIPS = [float(v) for v in np.logspace(-4, 6, 50)]
PAPER_PASSES_GCD = [1, 2, 4, 7, 10, 15, 20]
PAPER_PASSES_CD_SGD = [0.001, 0.01, 0.1, 1, 2, 3, 5, 10, 20]

# The paper's problems: (loss, penalty, paper lambda, dpopt alpha, n x p).
PROBLEMS = {
    "log1": ("logistic", "l2", 1e-3, 1e-3, "1000 x 100"),
    "log2": ("logistic", "l2", 1e-3, 1e-3, "1000 x 100"),
    "square": ("squared", "l1", 30.0, 15.0, "1000 x 1000"),
    "california": ("squared", "l1", 0.1, 0.05, "20640 x 8"),
    "mtp": ("squared", "l2", 5e-8, 2.5e-8, "4450 x 202"),
    "madelon": ("logistic", "l2", 1.0, 1.0, "2600 x 501"),
    "madelon-l1": ("logistic", "l1", 0.05, 0.05, "2600 x 501"),
    "dorothea": ("logistic", "l1", 0.01, 0.01, "800 x 88119"),
    # sensitivity check, not in the paper: log1 / log2 with label noise of standard
    # deviation ||w_true||_2 (signal-to-noise ratio 1) instead of 1
    "log1-snr1": ("logistic", "l2", 1e-3, 1e-3, "1000 x 100"),
    "log2-snr1": ("logistic", "l2", 1e-3, 1e-3, "1000 x 100"),
}
SENSITIVITY = ("log1-snr1", "log2-snr1")

# Paper Table 3: correct / incorrect non-zeros and (relative error), means over 5 runs.
PAPER_TABLE3 = {
    "square": {"nnz_star": 7, "dp-cd": (0, 0, 0.75), "dp-sgd": (0, 3, 0.75),
               "dp-gcd": (2, 0, 0.35)},
    "california": {"nnz_star": 3, "dp-cd": (3, 2, 0.0024), "dp-sgd": (3, 5, 0.020),
                   "dp-gcd": (2, 0, 0.00056)},
    "dorothea": {"nnz_star": 72, "dp-cd": (1, 1, 0.77), "dp-sgd": (0, 0, 0.78),
                 "dp-gcd": (1, 0, 0.64)},
    "madelon-l1": {"nnz_star": 3, "dp-cd": (0, 0, 0.0085), "dp-sgd": (0, 0, 0.012),
                   "dp-gcd": (1, 0, 0.0015)},
}

CHOICES = [
    "lambda converted to dpopt's scaling: least squares alpha = lambda / 2 (the paper's loss is "
    "(x^T w - y)^2, dpopt's is half of it); logistic + (lambda/2)||w||^2 unchanged (alpha = "
    "lambda). Relative errors are invariant to this rescaling.",
    "log1 / log2: X 1000 x 100 i.i.d. N(0, 1), w_true ~ LogNormal(0, sigma = 1 / 2), "
    "y = sign(X w_true + N(0, 1)); square: X 1000 x 1000 i.i.d. N(0, 1), 10 non-zeros "
    "100 * U(0, 1) at random positions, y = X w_true + N(0, 1) (the design of the datasets "
    "branch's make_log1 / make_log2 / make_square); one fixed draw (seed 0) per dataset.",
    "california: features divided by their maximum absolute value (computed without privacy, "
    "as public preprocessing for every algorithm), target unchanged, no intercept. The paper "
    "states no preprocessing; this is the one of raw / standardised / max-abs scaled that "
    "gives the paper's ||w*||_0 = 3 at alpha = 0.05 (raw gives 7, standardised 4).",
    "No intercept anywhere; w^0 = 0; the last iterate is evaluated for every algorithm.",
    "Smoothness constants M_j (and beta for DP-SGD) computed from the data without privacy, as "
    "in the paper (PrivacyLeakWarning silenced); C_j = C sqrt(M_j / sum M) for DP-GCD and DP-CD.",
    "Replace-one adjacency for all three algorithms. DP-GCD (dpopt default): exponential-"
    "mechanism selection (Gumbel, 2 Delta / eps'), Gaussian updates, PLD/RDP calibration "
    "(accountant='auto'), selection_share = 0.5. 'DP-GCD paper calib.': the paper's "
    "Laplace(Delta / eps') selection and Laplace updates with eps' from advanced composition "
    "(selection='paper-laplace', accountant='paper'); its honestly accounted epsilon is "
    "reported (the selection is only 2 eps'-DP). DP-CD: Gaussian-DP (exact) accountant, "
    "uniform coordinates, last iterate. DP-SGD: batch size 1 in expectation (Poisson rate "
    "1/n), PLD accountant, step gamma / beta.",
    "Not in the paper (sensitivity check): log1-snr1 / log2-snr1 are log1 / log2 with label "
    "noise of standard deviation ||w_true||_2 instead of 1 (the paper does not give the noise "
    "level; with noise 1 the labels are almost separable, F* is small and every method stays "
    "far from it in relative error).",
    "Rules: GS-L for the L2 problems, GS-r for the L1 problems (the paper's Figure 1).",
    "Hyperparameters tuned non-privately (as in the paper): for every algorithm and number of "
    "passes, the (step, clip) pair with the lowest mean relative error over the runs.",
]


# --------------------------------------------------------------------------- data


def load_data(name, quick=False):
    """(X, y) for a paper problem, or None when it is not available offline."""
    if name.startswith("log"):
        return make_quasi_sparse_logistic(*((300, 30) if quick else ()),
                                          sigma=1.0 if name.startswith("log1") else 2.0,
                                          noise="coef-norm" if name.endswith("snr1") else 1.0,
                                          random_state=0)
    if name == "square":
        return make_square(*((300, 300) if quick else ()), random_state=0)
    data = local_dataset(name.removesuffix("-l1"))
    if data is None:
        return None
    X, y = data
    if name == "california":
        X = X / np.abs(X).max(axis=0)
        if quick:
            X, y = X[:2000], y[:2000]
    return X, y


def build_problem(name, quick):
    """A paper problem with its (non-private) smoothness constants ``M`` and ``beta``, or
    None when its data are not available offline."""
    data = load_data(name, quick)
    if data is None:
        return None
    loss, penalty, _, alpha, _ = PROBLEMS[name]
    problem = dpopt.Problem(*data, loss=loss, penalty=penalty, alpha=alpha)
    return problem, {"M": problem.coordinate_smoothness(), "beta": problem.global_smoothness()}


def get_problem(name, quick=False):
    """The :class:`~dpopt.experiments.protocol.ProblemBundle` of a paper problem (cached
    per process), or None."""
    return bundle(name, quick, build_problem)


def support_of(b):
    """The support of w* (coordinates above 1e-10 of its largest, at least 1e-10)."""
    return np.abs(b.w_star) > 1e-10 * max(1.0, np.abs(b.w_star).max())


# --------------------------------------------------------------------------- runs


ALGOS = {
    "dp-gcd": ("dp-gcd", {}),
    "dp-gcd-paper": ("dp-gcd", {"selection": "paper-laplace", "accountant": "paper"}),
    "dp-gcd-gs-s": ("dp-gcd", {"rule": "gs-s"}),
    "dp-gcd-gs-q": ("dp-gcd", {"rule": "gs-q"}),
    "dp-cd": ("dp-cd", {}),
    "dp-sgd": ("dp-sgd", {"batch_size": 1}),
}
LABELS = {"dp-gcd": "DP-GCD", "dp-gcd-coarse": "DP-GCD on DP-CD's grid",
          "dp-gcd-paper": "DP-GCD (paper calib.)",
          "dp-gcd-gs-s": "DP-GCD GS-s", "dp-gcd-gs-q": "DP-GCD GS-q", "dp-cd": "DP-CD",
          "dp-sgd": "DP-SGD"}
L1_ONLY = ("dp-gcd-gs-s", "dp-gcd-gs-q")


def run_one(config, seed):
    """Private fits of one (dataset, algorithm, passes, step) for every clip and run."""
    b = get_problem(config["dataset"], config["quick"])
    support = support_of(b)
    solver, extra = ALGOS[config["algo"]]
    seeds = seed.spawn(len(config["clips"]) * config["runs"])
    out = []
    for k, clip in enumerate(config["clips"]):
        for r in range(config["runs"]):
            opts = dict(extra, passes=config["passes"], step=config["step"], clip=clip,
                        smoothness=b.info["beta"] if solver == "dp-sgd" else b.info["M"])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # paper-laplace's warning: see the report
                res = dpopt.solve(b.problem, solver, epsilon=EPSILON,
                                  random_state=seeds[k * config["runs"] + r], **opts)
            nz = res.w != 0
            out.append({"clip": clip, "run": r,
                        "rel_error": b.relative_error(res.w),
                        "correct_nnz": int(np.sum(nz & support)),
                        "wrong_nnz": int(np.sum(nz & ~support)), "epsilon": res.epsilon,
                        "delta": res.delta, "accountant": res.accountant,
                        "adjacency": res.adjacency, "time": res.time})
    return {"results": out}


def grids(quick):
    """Per-algorithm (passes, steps, clips) and the number of runs per configuration."""
    if quick:
        clips, steps = PAPER_CLIPS[25:36:5], PAPER_STEPS_GCD[3::3]
        gcd = ([1, 2], steps, clips)
        return {"dp-gcd": gcd, "dp-gcd-paper": gcd, "dp-gcd-gs-s": gcd, "dp-gcd-gs-q": gcd,
                "dp-cd": ([1, 2], steps, clips),
                "dp-sgd": ([1, 2], PAPER_STEPS_SGD[5::3], clips)}, 2
    return {"dp-gcd": (PAPER_PASSES_GCD, PAPER_STEPS_GCD, PAPER_CLIPS[::2]),
            "dp-gcd-paper": (PAPER_PASSES_GCD, PAPER_STEPS_GCD[::2], PAPER_CLIPS[::2]),
            "dp-gcd-gs-s": (PAPER_PASSES_GCD, PAPER_STEPS_GCD[::2], PAPER_CLIPS[::4]),
            "dp-gcd-gs-q": (PAPER_PASSES_GCD, PAPER_STEPS_GCD[::2], PAPER_CLIPS[::4]),
            "dp-cd": ([1, 2, 3, 5, 10, 20], PAPER_STEPS_GCD[::2], PAPER_CLIPS[::4]),
            "dp-sgd": ([1, 2, 5], PAPER_STEPS_SGD[1::2], PAPER_CLIPS[::5])}, 5


SGD_TOP = 3  # DP-SGD (stage 2): the best (step, clip) pairs of stage 1 rerun at every pass count


def sgd_passes(dataset, passes):
    """DP-SGD passes run (batch size 1 costs n Python-level steps per pass)."""
    return [p for p in passes if dataset != "california" or p <= 1]


def _config(ds, algo, passes, step, clips, runs, quick, stage=0):
    return {"dataset": ds, "algo": algo, "passes": passes, "step": step, "clips": list(clips),
            "runs": runs, "quick": quick, "stage": stage}


def make_configs(datasets, quick):
    """All configurations except DP-SGD's second stage (see :func:`sgd_stage2`)."""
    grid, runs = grids(quick)
    configs = []
    for ds in datasets:
        for algo, (passes, steps, clips) in grid.items():
            if algo in L1_ONLY and PROBLEMS[ds][1] != "l1":
                continue
            if algo == "dp-sgd":  # stage 1: one run of every (step, clip) at one pass
                configs += [_config(ds, algo, 1, st, clips, 1, quick, 1) for st in steps]
                continue
            configs += [_config(ds, algo, P, st, clips, runs, quick) for P in passes
                        for st in steps]
    return configs


def sgd_stage2(records, datasets, quick):
    """DP-SGD stage 2: the SGD_TOP best stage-1 pairs, every pass count, all runs."""
    grid, runs = grids(quick)
    configs = []
    for ds in datasets:
        stage1 = [(x["rel_error"], r["config"]["step"], x["clip"]) for r in records
                  for x in r["results"]
                  if r["config"]["dataset"] == ds and r["config"]["algo"] == "dp-sgd"
                  and r["config"]["stage"] == 1]
        for _, step, clip in sorted(stage1)[:SGD_TOP if not quick else 1]:
            configs += [_config(ds, "dp-sgd", P, step, [clip], runs, quick, 2)
                        for P in sgd_passes(ds, grid["dp-sgd"][0])]
    return configs


# --------------------------------------------------------------------------- analysis


COARSE = "dp-gcd-coarse"  # DP-GCD restricted to DP-CD's (step, clip) grid (a subset of its own)
CELL = ("dataset", "algo", "passes")  # (step, clip) is tuned per cell


def _cd_grid(quick):
    _, steps, clips = grids(quick)[0]["dp-cd"]
    return set(steps), set(clips)


def tuning_fits(records):
    """The fits of the tuning stages as flat rows (the fit's fields with its dataset, algo,
    passes and step); DP-GCD's fits on DP-CD's (step, clip) grid once more as ``COARSE``.
    Stage 1 (DP-SGD screening) and 3 (fresh-seed evaluation) are left out."""
    grids_cd = {quick: _cd_grid(quick) for quick in (False, True)}
    out = []
    for rec in records:
        c = rec.get("config") or {}
        if "algo" not in c or "results" not in rec or c.get("stage", 0) not in (0, 2):
            continue
        cd_steps, cd_clips = grids_cd[bool(c.get("quick", False))]
        for x in rec["results"]:
            fit = dict(x, dataset=c["dataset"], algo=c["algo"], passes=c["passes"],
                       step=c["step"])
            out.append(fit)
            if c["algo"] == "dp-gcd" and c["step"] in cd_steps and x["clip"] in cd_clips:
                out.append(dict(fit, algo=COARSE))
    return out


def best_configs(records):
    """{(dataset, algo, passes): summary row of its best (step, clip)}: lowest mean relative
    error over the runs (DP-SGD: its stage-2 runs only; also ``COARSE``)."""
    rows = summarize(tuning_fits(records), by=(*CELL, "step", "clip"), value="rel_error")
    return best_rows(rows, by=CELL)


def best_by_passes(records):
    """One row per (dataset, algo, passes): its best (step, clip) with the error's mean /
    min / max, the non-zeros and the privacy spent, sorted."""
    rows = [_table_row(r) for r in best_configs(records).values()]
    return sorted(rows, key=lambda b: (b["dataset"], b["algo"], b["passes"]))


def _table_row(row):
    fits = row["records"]
    return {**{k: row[k] for k in (*CELL, "step", "clip")}, "runs": row["count"],
            **{k: row[k] for k in ("mean", "min", "max")},
            "correct_nnz": float(np.mean([x["correct_nnz"] for x in fits])),
            "wrong_nnz": float(np.mean([x["wrong_nnz"] for x in fits])),
            "epsilon": float(max(x["epsilon"] for x in fits)),
            "delta": fits[0]["delta"], "adjacency": fits[0]["adjacency"],
            "accountant": fits[0]["accountant"]}


def fresh_configs(rows, quick):
    """Stage 3: the overall best configuration of every (dataset, algorithm) rerun with
    new seeds (the stage is part of the config hash), for an estimate free of the
    selection bias of picking the best mean among many noisy ones."""
    _, runs = grids(quick)
    out = {}
    for (ds, algo), b in best_rows(rows, by=("dataset", "algo")).items():
        real = "dp-gcd" if algo == COARSE else algo
        out[(ds, algo)] = _config(ds, real, b["passes"], b["step"], [b["clip"]], runs, quick, 3)
    return out


CSV_COLUMNS = ["dataset", "algo", "passes", "step", "clip", "runs", "mean", "min", "max",
               "correct_nnz", "wrong_nnz", "epsilon", "delta", "adjacency", "accountant"]


def table_markdown(rows, datasets_run, missing, quick, fresh=None):
    best = best_rows(rows, by=("dataset", "algo"))
    fresh = fresh or {}
    title = "# DP-GCD reproduction" + (" (quick: small problems and grids, not paper numbers)"
                                       if quick else "")
    lines = [title, "",
             f"epsilon = {EPSILON:g}, delta = 1/n^2, replace-one adjacency for every row. "
             "Relative error (F(w) - F*) / F* of the best configuration (lowest mean over the "
             "runs, over every pass count): mean [min, max]. L1 problems: `c / w` = coordinates "
             "correctly / wrongly non-zero (means over the runs), as in the paper's Table 3, "
             "whose values (c / w (relative error)) are in the last column. `fresh seeds`: the "
             "same configuration rerun with new seeds (no selection bias).",
             "",
             f"Problems run: {', '.join(datasets_run)}. Not run (data not available offline): "
             f"{', '.join(missing) if missing else 'none'}.",
             ""]
    table = []
    for ds in datasets_run:
        paper = PAPER_TABLE3.get(ds, {})
        l1 = PROBLEMS[ds][1] == "l1"
        for algo in ("dp-gcd", COARSE) + tuple(ALGOS)[1:]:
            if (ds, algo) in best:
                table.append(_table_line(ds, algo, best[(ds, algo)], paper, l1,
                                         fresh.get((ds, algo))))
        if l1:
            table.append([ds, f"(||w*||_0 = {problem_support_size(ds, quick)}; paper "
                              f"{paper.get('nnz_star', '?')})"] + [None] * 8)
    lines.append(markdown_table(["problem", "algorithm", "rel. error: mean [min, max]",
                                 "fresh seeds", "passes", "step", "clip", "c / w",
                                 "epsilon spent", "paper Table 3"], table))
    return "\n".join(lines) + "\n"


def _spread(mean, lo, hi):
    return f"{fmt_value(mean)} [{fmt_value(lo)}, {fmt_value(hi)}]"


def _table_line(ds, algo, b, paper, l1, fresh):
    ref = ""
    if algo in paper:
        c, w, e = paper[algo]
        ref = f"{c} / {w} ({e:g})"
    elif algo in ("dp-gcd", "dp-cd", "dp-sgd") and not paper:
        ref = "figure only"
    return [f"{ds} (not in paper)" if ds in SENSITIVITY else ds, LABELS[algo],
            _spread(b["mean"], b["min"], b["max"]),
            _spread(np.mean(fresh), np.min(fresh), np.max(fresh)) if fresh else "",
            b["passes"], b["step"], b["clip"],
            f"{b['correct_nnz']:.1f} / {b['wrong_nnz']:.1f}" if l1 else "",
            b["epsilon"], ref]


def problem_support_size(ds, quick):
    b = get_problem(ds, quick)
    return int(support_of(b).sum()) if b else 0


FIG1_ALGOS = ("dp-gcd", "dp-gcd-paper", "dp-cd", "dp-sgd")
FIG3_ALGOS = (COARSE, "dp-gcd-gs-s", "dp-gcd-gs-q", "dp-cd", "dp-sgd")


def plot(records, datasets, algos, path, title):
    """Relative error vs pass budget, mean and min-max band over the runs of the best
    (step, clip) of each budget (the paper's Figure 1 / 3 layout), through dpopt.experiments.plotting."""
    labels = {LABELS[a] for a in algos}
    chosen = [r for r in plot_records(records)
              if r["config"]["dataset"] in datasets and r["config"]["solver"] in labels]
    save_figure(chosen, path, "passes", title=title)


# --------------------------------------------------------------------------- entry point


def available(datasets, quick):
    run, missing = [], []
    for ds in datasets:
        (run if load_data(ds, quick) is not None else missing).append(ds)
    return run, missing


def plot_records(records):
    """``runs.jsonl`` of this reproduction -> :mod:`dpopt.experiments.plotting` records: per problem and
    algorithm, the error (and solver time) of every run of the best (step, clip) at each
    pass budget (the paper's Figure 1 protocol), as a trajectory over the budgets."""
    return budget_curves({(LABELS.get(algo, algo), ds, EPSILON, passes): row["records"]
                          for (ds, algo, passes), row in best_configs(records).items()})


@register_experiment("dp-gcd", plot_records=plot_records,
                     description="DP-GCD paper (Mangold et al. 2023): DP-GCD vs DP-CD "
                     "vs DP-SGD, relative error vs passes, Table 3 and Figure 1")
def run(out: Path, quick: bool = False, n_jobs: int = 1, backend: str = "loky",
        progress: bool = True, datasets=None) -> dict:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    wanted = datasets or (["log1", "square"] if quick else list(PROBLEMS))
    run_ds, missing = available(wanted, quick)
    store = ResultStore(out / "runs.jsonl")
    kw = {"store": store, "root_seed": ROOT_SEED, "n_jobs": n_jobs, "backend": backend,
          "progress": progress}
    records = run_grid(make_configs(run_ds, quick), run_one, desc="dp-gcd grid", **kw)
    records += run_grid(sgd_stage2(records, run_ds, quick), run_one, desc="dp-sgd stage 2", **kw)
    rows = best_by_passes(records)
    stage3 = fresh_configs(rows, quick)
    done = run_grid(list(stage3.values()), run_one, desc="fresh seeds", **kw)
    by_key = {config_key(r["config"]): r for r in done}
    fresh = {k: [x["rel_error"] for x in by_key[config_key(c)]["results"]]
             for k, c in stage3.items()}
    write_csv(out / "best_by_passes.csv", rows, CSV_COLUMNS)
    (out / "table.md").write_text(table_markdown(rows, run_ds, missing, quick, fresh))
    _figures(out, records, run_ds, quick)
    grid, runs = grids(quick)
    meta = {"datasets_run": run_ds, "datasets_missing": missing, "runs_per_config": runs,
            "grids": {a: {"passes": g[0], "steps": g[1], "clips": g[2]} for a, g in grid.items()},
            "dp_sgd_passes_california": sgd_passes("california", grid["dp-sgd"][0]),
            "dp_sgd_stage2_pairs": SGD_TOP, "choices": CHOICES,
            "n_fits": sum(len(r["results"]) for r in records + done),
            "seconds_in_solvers": float(sum(x["time"] for r in records + done
                                            for x in r["results"]))}
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    return {"table": str(out / "table.md"), "figure": str(out / "figure1.png"),
            "fits": meta["n_fits"], "datasets_run": run_ds, "datasets_missing": missing}


def _figures(out, records, run_ds, quick):
    q = " (quick)" if quick else ""
    main = [ds for ds in run_ds if ds not in SENSITIVITY]
    plot(records, main, FIG1_ALGOS, out / "figure1.png",
         f"DP-GCD vs DP-CD vs DP-SGD, ε = 1, δ = 1/n², replace-one, min/mean/max over runs{q}")
    plot(records, [ds for ds in run_ds if ds in SENSITIVITY], FIG1_ALGOS,
         out / "figure_sensitivity.png",
         f"Not in the paper: log1 / log2 with label noise std ||w_true|| (SNR 1), ε = 1, "
         f"replace-one{q}")
    l1 = [ds for ds in run_ds if PROBLEMS[ds][1] == "l1"]
    plot(records, l1, FIG3_ALGOS, out / "figure3.png",
         f"Proximal DP-GCD rules GS-r / GS-s / GS-q (same step/clip grid), ε = 1, δ = 1/n², "
         f"replace-one{q}")
