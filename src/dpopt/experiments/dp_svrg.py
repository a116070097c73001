"""``dpopt reproduce dp-svrg``: Appendix A of Wang, Ye, Xu (NIPS 2017), with tight accounting.

Protocol (paper: Covertype, 200,000 training rows, 54 features, logistic
regression with lambda = 0.01 (Fig. 1, DP-SVRG vs DP-GD) and without (Fig. 2,
DP-SVRG++ vs DP-GD), epsilon in {0.2, 0.5, 1}, delta = 1e-3):

* data: Covertype through :func:`dpopt.datasets.load_dataset` when it can be
  had (downloaded for users with internet; skipped offline, as here), the
  Electricity data from ``$DPOPT_DATA`` and a synthetic stand-in with
  Covertype's shape (10 numeric features in [0, 1], a one-hot group of 4 and
  one of 40, 50/50 labels from a logistic model; 200,000 training rows).
  Every row is scaled to ||x|| <= 1 with public bounds, so G = 1 and the
  logistic loss is L = 1/4 smooth per sample: all solvers use these public
  constants (no PrivacyLeakWarning, every run is exactly (eps, delta)-DP).
* solvers, all at the same (eps, delta) under replace-one adjacency:
  DP-SVRG and DP-SVRG++ with the library defaults (minibatch b = sqrt(n)),
  DP-GD, DP-SGD and DP-CD with settings chosen once on the synthetic
  stand-in at eps = 1 (public synthetic data, so no privacy cost), and the
  paper's own configurations: DP-SVRG with b = 1, T = 15, m = 5000,
  eta = 1/(48 L) (the paper's SVRG-BB step is data dependent and would leak:
  notes 6.5), DP-SVRG++ with b = 1, T = 15, m = 10, eta = 0.01, and DP-GD with
  T = 1000 (eta = 1/L, resp. 0.1 as in Fig. 2).
* metrics: objective gap F(w) - F* on the training data and test accuracy
  against the number of per-sample gradient evaluations.

The noise of every run comes from the numerical accountants; the paper's
closed forms are only compared in ``noise_comparison.md``.
"""

from __future__ import annotations

import functools
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import expit, ndtr

import dpopt
import dpopt.datasets
from dpopt.experiments import ResultStore, register_experiment, run_grid
from dpopt.experiments.protocol import (
    bundle,
    fmt,
    fmt_value,
    markdown_table,
    save_figure,
    summarize,
    write_csv,
)
from dpopt.experiments.runner import plot_record
from dpopt.privacy import calibrate_gaussian
from dpopt.solvers.dp_svrg import TheoryConditionWarning, calibrate_svrg, paper_noise_variance

DELTA = 1e-3
LAMBDA = 0.01
EPSILONS = (0.2, 0.5, 1.0)
L_SAMPLE = 0.25  # logistic loss, ||x_i|| <= 1
ROOT_SEED = 20170
MAIN = ("dp-svrg", "dp-svrg++", "dp-gd", "dp-sgd", "dp-cd")
PAPER = ("dp-svrg (paper)", "dp-svrg++ (paper)", "dp-gd (paper)")
PAPER_CONFIG_DATA = ("covtype", "covtype-standin")  # 200,000 rows, as in the paper

# sizes: (train, test) rows; the paper trains on 200,000 Covertype rows
FULL_SIZES = {"covtype": (200_000, 50_000), "covtype-standin": (200_000, 50_000),
              "electricity": (None, None)}
QUICK_SIZES = {"covtype": (8_000, 2_000), "covtype-standin": (8_000, 2_000),
               "electricity": (8_000, 2_000)}
DATA_NOTES = {
    "covtype": "UCI Covertype (class 2 vs rest), via dpopt.datasets.load_dataset('covtype')",
    "covtype-standin": "synthetic stand-in with Covertype's shape (54 features: 10 numeric in "
                       "[0, 1], one-hot 4 + one-hot 40; logistic labels), NOT Covertype",
    "electricity": "Electricity (OpenML 151) from $DPOPT_DATA, 80/20 random train/test split",
}


# ---------------------------------------------------------------------------- data

def make_covtype_standin(n_samples, random_state=0):
    """Synthetic data shaped like Covertype, scaled to ||x|| <= 1 (public bound sqrt(12)).

    10 correlated numeric features with uniform [0, 1] marginals (Gaussian
    copula), a one-hot "wilderness area" of 4 levels and a one-hot "soil type"
    of 40 levels with Zipf frequencies; y = +-1 from a logistic model in these
    features, centred to balanced classes (a linear model reaches ~73% test
    accuracy, about what it reaches on Covertype's binary task).
    """
    rng = np.random.default_rng(random_state)
    A = rng.standard_normal((10, 10)) * 0.4 + np.eye(10)
    z = rng.standard_normal((n_samples, 10)) @ A.T / np.sqrt((A * A).sum(axis=1))
    u = ndtr(z)
    p_wild = np.array([0.45, 0.05, 0.44, 0.06])
    p_soil = 1.0 / np.arange(1, 41) ** 1.1
    wild = rng.choice(4, size=n_samples, p=p_wild)
    soil = rng.choice(40, size=n_samples, p=p_soil / p_soil.sum())
    X = np.zeros((n_samples, 54))
    X[:, :10] = u
    X[np.arange(n_samples), 10 + wild] = 1.0
    X[np.arange(n_samples), 14 + soil] = 1.0
    coef = 0.5 * np.concatenate([2.0 * rng.standard_normal(10), rng.standard_normal(4),
                                 1.5 * rng.standard_normal(40)])
    logit = (u - 0.5) @ coef[:10] + coef[10 + wild] + coef[14 + soil]
    logit -= np.median(logit)
    y = np.where(rng.random(n_samples) < expit(logit), 1.0, -1.0)
    return X / np.sqrt(12.0), y


def _split(X, y, n_train, n_test, seed):
    perm = np.random.default_rng(seed).permutation(X.shape[0])
    n_train = n_train or int(round(0.8 * X.shape[0]))
    n_test = n_test or X.shape[0] - n_train
    tr, te = perm[:n_train], perm[n_train:n_train + n_test]
    return X[tr], y[tr], X[te], y[te]


def _load_electricity(download):
    ds = dpopt.datasets.load_dataset("electricity", download=download)
    X = np.array(ds.X, dtype=np.float64)
    X[:, 1] = (X[:, 1] - 1.0) / 6.0  # day of week 1..7 -> [0, 1]; the rest is in [0, 1]
    X = np.hstack([X, np.ones((X.shape[0], 1))])  # constant feature (intercept, penalized)
    return X / 3.0, ds.y  # 9 features in [0, 1]: ||x|| <= 3


def _load_covtype(download):
    ds = dpopt.datasets.load_dataset("covtype", download=download)
    X = np.array(ds.X, dtype=np.float64)
    num = X[:, :10]
    # min-max scaling of the 10 numeric columns (computed on the data: non-private preprocessing,
    # as in the paper, which does not say how it normalized)
    X[:, :10] = (num - num.min(axis=0)) / np.maximum(num.max(axis=0) - num.min(axis=0), 1e-12)
    return X / np.sqrt(12.0), ds.y


@functools.lru_cache(maxsize=8)
def load_data(name, quick):
    """(X_train, y_train, X_test, y_test, coordinate bound) for one dataset; cached."""
    n_train, n_test = (QUICK_SIZES if quick else FULL_SIZES)[name]
    if name == "covtype-standin":
        X, y = make_covtype_standin(n_train + n_test, random_state=2017)
        return X[:n_train], y[:n_train], X[n_train:], y[n_train:], 1.0 / 12.0
    if name == "electricity":
        X, y = _load_electricity(download=not quick)
        return (*_split(X, y, n_train, n_test, seed=151), 1.0 / 9.0)
    X, y = _load_covtype(download=not quick)
    return (*_split(X, y, n_train, n_test, seed=54), 1.0 / 12.0)


def available_datasets(quick):
    """The datasets this run can use, and a note for each one that is missing."""
    names, missing = [], {}
    for name in ("covtype", "electricity", "covtype-standin"):
        try:
            load_data(name, quick)
            names.append(name)
        except (ValueError, OSError) as exc:  # DatasetNotAvailableError is a ValueError
            missing[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return names, missing


def build_problem(name, quick):
    """``dataset/penalty`` -> (training :class:`dpopt.Problem`, info: test split and the
    public coordinate bound), for :func:`.protocol.bundle`."""
    dataset, penalty = name.split("/")
    Xtr, ytr, Xte, yte, coord_bound = load_data(dataset, quick)
    pb = dpopt.Problem(Xtr, ytr, "logistic", penalty, alpha=LAMBDA if penalty == "l2" else None)
    return pb, {"X_test": Xte, "y_test": yte, "coord_bound": coord_bound}


def problem_bundle(dataset, quick, penalty):
    """The training problem with its non-private optimum (F*, w*) and the test split."""
    return bundle(f"{dataset}/{penalty}", quick, build_problem)


def _accuracy(X, y, w):
    return float(np.mean(np.where(X @ w >= 0, 1.0, -1.0) == y))


# ---------------------------------------------------------------------------- solvers

# the paper's configurations (Appendix A) and their reduced versions for --quick
PAPER_SVRG = {"full": (15, 5000), "quick": (5, 200)}  # (T, m), batch size 1
PAPER_SVRGPP = {"full": (15, 10), "quick": (6, 10)}  # (T, m), batch size 1
PAPER_GD = {"full": 1000, "quick": 100}  # T


def solver_options(label, penalty, coord_bound, quick):
    """(registered solver, options) for a row label; public constants only."""
    mode = "quick" if quick else "full"
    if label in ("dp-svrg", "dp-svrg++"):
        return label, {"smoothness": L_SAMPLE}
    if label == "dp-gd":
        return "dp-gd", {"passes": 45, "step": 2.0, "smoothness": L_SAMPLE, "checkpoint_every": 3}
    if label == "dp-sgd":
        return "dp-sgd", {"passes": 20, "step": 0.25, "smoothness": L_SAMPLE}
    if label == "dp-cd":
        return "dp-cd", {"passes": 20, "step": 1.0, "clip": 2.0,
                         "smoothness": "uniform:%r" % (L_SAMPLE * coord_bound)}
    # --quick fixes the noise split of the batch-of-one runs (any split is valid) to skip the
    # slow numerical choice in that regime
    split = {"noise_split": 0.03} if quick else {}
    if label == "dp-svrg (paper)":
        T, m = PAPER_SVRG[mode]
        return "dp-svrg", {"batch_size": 1, "epochs": T, "epoch_length": m, "step": 1 / 48,
                           "smoothness": L_SAMPLE, "condition": "ignore", **split}
    if label == "dp-svrg++ (paper)":
        T, m = PAPER_SVRGPP[mode]
        return "dp-svrg++", {"batch_size": 1, "epochs": T, "epoch_length": m,
                             "step": 0.01 * L_SAMPLE, "smoothness": L_SAMPLE, **split}
    if label == "dp-gd (paper)":
        T = PAPER_GD[mode]
        return "dp-gd", {"passes": T, "step": 1.0 if penalty == "l2" else 0.1 * L_SAMPLE,
                         "smoothness": L_SAMPLE, "checkpoint_every": max(1, T // 20)}
    raise ValueError(f"unknown solver label {label!r}")


def _resolve(options, dim):
    opts = dict(options)
    sm = opts.get("smoothness")
    if isinstance(sm, str) and sm.startswith("uniform:"):
        opts["smoothness"] = np.full(dim, float(sm.split(":", 1)[1]))
    return opts


def run_one(config, seed):
    """One fit: objective gap and test accuracy at every checkpoint."""
    b = problem_bundle(config["dataset"], config["quick"], config["penalty"])
    pb, f_star, Xte, yte = b.problem, b.f_star, b.info["X_test"], b.info["y_test"]
    t0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TheoryConditionWarning)
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)  # public constants only
        res = dpopt.solve(pb, config["solver"], epsilon=config["epsilon"], delta=DELTA,
                          random_state=seed, **_resolve(config["options"], pb.dim))
    cpu = time.process_time() - t0
    gaps = [pb.objective(w) - f_star for w in res.checkpoints]
    accs = [_accuracy(Xte, yte, w) for w in res.checkpoints]
    return {"gap": gaps, "accuracy": accs,
            "grad_evals": [float(p) * pb.n_samples for p in res.checkpoint_passes],
            "final_gap": pb.objective(res.w) - f_star,
            "final_accuracy": _accuracy(Xte, yte, res.w),
            "epsilon_spent": res.epsilon, "delta": res.delta, "adjacency": res.adjacency,
            "accountant": res.accountant, "noise_multiplier": res.noise_multiplier,
            "f_star": f_star, "n_train": pb.n_samples, "cpu_time": cpu,
            "noise_split": res.params.get("noise_split"), "sigma": res.params.get("sigma")}


def make_configs(datasets, quick):
    eps_list = (0.5,) if quick else EPSILONS
    seeds = 1 if quick else 2
    configs = []
    for name in datasets:
        coord_bound = load_data(name, quick)[4]
        for penalty in ("l2", "none"):
            labels = list(MAIN)
            if name in PAPER_CONFIG_DATA:  # the paper's configurations on data of its size
                labels += ["dp-gd (paper)",
                           "dp-svrg (paper)" if penalty == "l2" else "dp-svrg++ (paper)"]
            for eps in eps_list:
                for label in labels:
                    solver, opts = solver_options(label, penalty, coord_bound, quick)
                    for k in range(1 if "paper" in label else seeds):
                        configs.append({"dataset": name, "quick": quick, "penalty": penalty,
                                        "epsilon": eps, "label": label, "solver": solver,
                                        "options": opts, "repeat": k})
    return configs


# ---------------------------------------------------------------------------- outputs

GROUP = ("dataset", "penalty", "epsilon", "label")


def summary_rows(records):
    """One row per (dataset, penalty, epsilon, solver label): mean and sd of the final gap,
    mean test accuracy, the largest epsilon spent, and the privacy fields of the first run."""
    gaps, accs, spent = (summarize(records, GROUP, value) for value in
                         ("final_gap", "final_accuracy", "epsilon_spent"))
    rows = []
    for gap, acc, eps_spent in zip(gaps, accs, spent):
        r = gap["records"][0]
        rows.append({"dataset": gap["dataset"], "problem": PROBLEM_NAMES[gap["penalty"]],
                     "epsilon": gap["epsilon"], "solver": gap["label"], "runs": gap["count"],
                     "gap_mean": gap["mean"], "gap_sd": gap["std"], "accuracy_mean": acc["mean"],
                     "grad_evals": r["grad_evals"][-1], "epsilon_spent": eps_spent["max"],
                     "delta": r["delta"], "adjacency": r["adjacency"],
                     "accountant": r["accountant"], "noise_multiplier": r["noise_multiplier"]})
    return sorted(rows, key=lambda row: (row["dataset"], row["problem"], row["epsilon"],
                                         _order(row["solver"])))


PROBLEM_NAMES = {"l2": "L2 (lambda=0.01)", "none": "no penalty"}


def _order(label):
    names = list(MAIN) + list(PAPER)
    return names.index(label) if label in names else len(names)


def write_tables(rows, out: Path, missing, quick):
    write_csv(out / "summary.csv", rows)
    lines = ["# DP-SVRG reproduction: final objective gap and test accuracy", "",
             f"Mode: {'quick (reduced sizes and grid)' if quick else 'full'}. delta = {DELTA}, "
             "replace-one adjacency for every row; gap = F(w) - F* on the training data "
             "(mean over runs), accuracy on held-out rows, gradient evaluations = per-sample "
             "gradients computed.", ""]
    for name, why in missing.items():
        lines += [f"* **{name}: not run** ({why}).", ""]
    header = ("epsilon", "solver", "runs", "gap (mean ± sd)", "test acc.", "grad. evals",
              "eps spent", "accountant", "noise mult.")
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        lines += [f"## Data: {ds} — {DATA_NOTES[ds]}", "",
                  f"n_train = {load_data(ds, quick)[0].shape[0]}", ""]
        for pen, prob in PROBLEM_NAMES.items():
            sub = [r for r in rows if r["dataset"] == ds and r["problem"] == prob]
            if not sub:
                continue
            b = problem_bundle(ds, quick, pen)
            optimum = ("-", "non-private optimum w*", "-", "0",
                       fmt_value(_accuracy(b.info["X_test"], b.info["y_test"], b.w_star), 4),
                       "-", "inf", "-", "-")
            cells = [optimum] + [(fmt_value(r["epsilon"]), r["solver"], r["runs"],
                                  fmt(r["gap_mean"], r["gap_sd"]),
                                  fmt_value(r["accuracy_mean"], 4), fmt_value(r["grad_evals"]),
                                  fmt_value(r["epsilon_spent"], 4), r["accountant"],
                                  fmt_value(r["noise_multiplier"], 4)) for r in sub]
            lines += [f"### {ds}, logistic regression, {prob}", "",
                      markdown_table(header, cells), ""]
    (out / "summary.md").write_text("\n".join(lines) + "\n")


def write_figures(records, out: Path):
    """One figure per (dataset, penalty): relative error (F(w) - F*) / |F*| against passes
    (per-sample gradient evaluations / n), one panel per epsilon, through
    :mod:`dpopt.experiments.plotting` on log-log axes (the paper's DP-GD runs 1000 passes, the others
    tens). Test accuracy barely moves on these problems: it is in summary.md."""
    written = []
    for ds in dict.fromkeys(r["config"]["dataset"] for r in records):
        for pen, prob in PROBLEM_NAMES.items():
            recs = plot_records([r for r in records
                                 if (r["config"]["dataset"], r["config"]["penalty"]) == (ds, pen)])
            if recs:
                path = out / f"{ds}_{pen}.png"
                save_figure(recs, path, "passes", f"DP logistic regression, {prob}, δ = {DELTA:g}",
                            xscale="log")
                written.append(path.name)
    return written


def noise_comparison(n, out: Path, quick=False, records=()):
    """Paper closed form (c = 1) against the numerically calibrated noise, G = C = 1.

    Full mode: the paper's experiment (n = 200,000; DP-SVRG T = 15, m = 5000;
    DP-SVRG++ T = 15, m = 10; DP-GD T = 1000). Quick mode: the reduced paper
    configurations of the quick runs. The SVRG multipliers are read from the
    runs of these configurations on the stand-in (same n, K, q) when present,
    else calibrated here.
    """
    mode = "quick" if quick else "full"
    algs = (("dp-svrg", *PAPER_SVRG[mode]), ("dp-svrg++", *PAPER_SVRGPP[mode]),
            ("dp-gd", PAPER_GD[mode], None))
    done = {(r["config"]["label"], r["config"]["epsilon"]): r for r in records
            if r["config"]["dataset"] == "covtype-standin" and r["n_train"] == n}
    rows = []
    for eps in ((0.5,) if quick else EPSILONS):
        for alg, T, m in algs:
            paper = math.sqrt(paper_noise_variance(alg, n_samples=n, epsilon=eps, delta=DELTA,
                                                   epochs=T, epoch_length=m))
            if alg == "dp-gd":
                cal = calibrate_gaussian(eps, DELTA, T)
                ours = cal.noise_multiplier * 2.0 / n
                detail = f"Gaussian DP, z = {cal.noise_multiplier:.4g}"
                rows.append((eps, alg, T, m, paper, ours, ours / paper, detail))
                continue
            K = T * m if alg == "dp-svrg" else (2 ** (T + 1) - 2) * m
            run = done.get((f"{alg} (paper)", eps))
            if run is not None:
                z, rho = run["noise_multiplier"], run["noise_split"]
            else:
                cal, rho = calibrate_svrg(eps, DELTA, 1 / n, K, 0.03 if quick else "auto")
                z = cal.noise_multiplier
            ours = 4.0 * z  # b = 1: the noise on v_t has std sigma = z 4C
            detail = f"PLD, K = {K}, z = {z:.4g}, rho = {rho:.3g}"
            rows.append((eps, alg, T, m, paper, ours, ours / paper, detail))
    lines = ["# Noise: the paper's closed forms against the numerical accountant", "",
             f"n = {n}, delta = {DELTA}, G = C = 1, batch size 1 (the paper's algorithms), "
             "replace-one. 'paper' is the std per coordinate of eqs. (3), (6), (11) with the "
             "unspecified constant c = 1; 'ours' is the std per coordinate of the noise on the "
             "gradient estimate v_t (SVRG: sigma = 4 z C on a batch of one; DP-GD: 2 z C / n) "
             "that the accountant certifies. The paper's forms are never used to run.", "",
             markdown_table(("epsilon", "algorithm", "T", "m", "sigma paper (c=1)", "sigma ours",
                             "ratio", "accounting"),
                            [(fmt_value(eps), alg, T, m or "-", fmt_value(paper), fmt_value(ours),
                              fmt_value(ratio), detail)
                             for eps, alg, T, m, paper, ours, ratio, detail in rows])]
    (out / "noise_comparison.md").write_text("\n".join(lines) + "\n")
    return rows


def plot_records(records):
    """``runs.jsonl`` of this reproduction -> :mod:`dpopt.experiments.plotting` records: relative error
    gap / |F*| at every checkpoint, against gradient evaluations / n; one panel per
    (dataset, penalty, epsilon)."""
    out = []
    for rec in records:
        c = rec.get("config") or {}
        if "gap" not in rec or "label" not in c:
            continue
        scale = abs(rec["f_star"])
        passes = [g / rec["n_train"] for g in rec["grad_evals"]]
        out.append(plot_record(c["label"], f"{c['dataset']} ({c['penalty']})", c["epsilon"],
                               c["repeat"], rel_error=rec["final_gap"] / scale, passes=passes,
                               trajectory=[g / scale for g in rec["gap"]],
                               adjacency=rec["adjacency"]))
    return out


@register_experiment("dp-svrg", plot_records=plot_records,
                     description="DP-SVRG / DP-SVRG++ vs DP-GD, DP-SGD, DP-CD on "
                     "logistic regression (Wang, Ye, Xu 2017, App. A): Covertype if available, "
                     "Electricity and a Covertype-shaped synthetic stand-in")
def run(out: Path, quick: bool, n_jobs: int = 1, backend: str = "loky", progress: bool = True):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0, c0 = time.time(), time.process_time()
    datasets, missing = available_datasets(quick)
    configs = make_configs(datasets, quick)
    records = run_grid(configs, run_one, store=ResultStore(out / "runs.jsonl"),
                       root_seed=ROOT_SEED, n_jobs=n_jobs, backend=backend, progress=progress,
                       desc="dp-svrg")
    rows = summary_rows(records)
    write_tables(rows, out, missing, quick)
    figures = write_figures(records, out)
    n_noise = (QUICK_SIZES if quick else FULL_SIZES)["covtype-standin"][0]
    noise_comparison(n_noise, out, quick, records)
    summary = {"runs": len(records), "datasets": datasets, "missing": missing,
               "figures": figures, "wall_seconds_this_invocation": round(time.time() - t0, 1),
               "cpu_seconds_this_invocation": round(time.process_time() - c0, 1),
               "cpu_seconds_in_fits": round(sum(r["cpu_time"] for r in records), 1)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
