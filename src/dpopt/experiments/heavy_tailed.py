"""``dpopt reproduce heavy-tailed``: private optimization with heavy-tailed gradients.

The heavy-tailed DP-SO paper (Lowy & Razaviyayn, seed 004) has no experiments;
this module designs them. Excess population risk (test objective minus its
minimum, L2 penalty included) as a function of n and of epsilon for

* the paper's solvers ``ht-acsa``, ``ht-sgd``, ``ht-proxsgd`` with (a) the theorems'
  parameters from a moment bound r_k computed on a *public* sample of the same
  distribution ("theory"), (b) the private-quantile clipping threshold and the
  theorems' T ("quantile"), (c) for ht-sgd / ht-proxsgd also T in {16, 64}
  (best of the three reported as "quantile, best T");
* DP-SGD and DP-GD with the clipping threshold set to the uniform Lipschitz
  constant L_f = max over the training sample and the domain of the gradient
  norm (the classical choice), tuned over step and passes; and DP-GD with the
  same private-quantile threshold as ours (quantile paid from the budget by
  exact Gaussian-DP composition), to separate the clipping level from the
  algorithm;
* on non-smooth absolute-loss regression: ``ht-subgradient`` (theorem's phase
  lengths T_i at small n, capped at 1000 otherwise) against DP-SGD/DP-GD.

Data (``dpopt.datasets.make_heavy_tailed`` and ``load_dataset("california")``):
synthetic linear regression (squared loss, heavy-tailed noise) and
logistic regression (heavy-tailed features), Student-t or symmetrized Pareto
(Lomax) with tail index alpha in {3, 5, 9} paired with moment order
k = alpha - 1 in {2, 4, 8} (the k-th moment of the gradient norm is finite
exactly when k < alpha), plus 1% injected outliers; and California housing with
its raw (un-winsorized) features, robust-scaled with the median/IQR of a
disjoint public split. Baseline tuning picks the best grid point on the test
risk (optimistic for the baselines). All privacy is replace-one adjacency,
(epsilon, delta = 1e-6); every solver is calibrated to the same (epsilon,
delta) with the exact Gaussian-DP conversion (``accountant="exact"`` for ours,
the Gaussian-DP / PLD accountants of DP-GD / DP-SGD).

The report (method families, aggregation, tables, figures) is in
:mod:`dpopt.experiments._heavy_tailed_report`; its public names are importable from here.
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
from dpopt.datasets import make_heavy_tailed
from dpopt.experiments import register_experiment
from dpopt.experiments._heavy_tailed_report import (  # noqa: F401 (re-exported)
    DELTA,
    FAMILIES,
    FIG_FAMILIES,
    NS_FAMILIES,
    POINT,
    ZERO,
    _aggregate,
    _family_of,
    _reference_n,
    write_figures,
    write_tables,
)
from dpopt.experiments.protocol import bundle, local_dataset
from dpopt.experiments.runner import DIVERGED, ResultStore, plot_record, run_grid
from dpopt.privacy import gdp_epsilon, gdp_mu, private_quantile

DIM = 10
REG = 0.05  # L2 strength on the synthetic tasks (strong convexity for ht-sgd)
RADIUS = 2.0  # domain radius on the synthetic tasks (true coefficients are unit vectors)
N_TEST = 50_000
N_PUBLIC = 100_000
N_POOL = 100_000
TAILS = {3.0: 2, 5.0: 4, 9.0: 8}  # tail index alpha -> moment order k
QUANTILE_SHARE = 0.1

# ---------------------------------------------------------------------------
# data


def synthetic_spec(name):
    """Parse ``task-dist-aALPHA[-out]`` into generator options."""
    parts = name.split("-")
    task, dist, alpha = parts[0], parts[1], float(parts[2][1:])
    dist = {"t": "student-t", "pareto": "pareto"}[dist]
    opts = dict(distribution=dist, tail_index=alpha,
                target="linear" if task == "linear" else "logistic",
                heavy="noise" if task == "linear" else "features",
                outlier_fraction=0.01 if name.endswith("-out") else 0.0)
    loss = {"linear": "squared", "logistic": "logistic", "absolute": "absolute"}[task]
    if task == "absolute":
        opts.update(target="linear", heavy="features")
    return loss, opts, alpha


def _seed(*parts):
    text = json.dumps(parts)
    return int.from_bytes(text.encode(), "little") % (2 ** 63)


@functools.cache
def california_split():
    """(public, test, pool) arrays of the raw California data, robust-scaled with the
    public split's median and IQR (so the public split pays for the scaling); ``None``
    without a local copy ($DPOPT_DATA or the cache)."""
    data = local_dataset("california")
    if data is None:
        return None
    X, y = data
    perm = np.random.default_rng(20240607).permutation(X.shape[0])
    pub, test, pool = perm[:2000], perm[2000:6000], perm[6000:]
    med = np.median(X[pub], axis=0)
    iqr = np.subtract(*np.percentile(X[pub], [75, 25], axis=0))
    Xs = (X - med) / iqr
    return (Xs[pub], y[pub]), (Xs[test], y[test]), (Xs[pool], y[pool])


def _problem(X, y, loss, dataset):
    if dataset == "california":
        return dpopt.Problem(X, y, "squared", "l2", alpha=REG, fit_intercept=True)
    if loss == "absolute":  # the LP reference optimum takes L1, not L2
        return dpopt.Problem(X, y, loss, "l1", alpha=1e-3)
    return dpopt.Problem(X, y, loss, "l2", alpha=REG)


def _samples(dataset, quick):
    """(public, test, pool) samples, each an (X, y) pair. A synthetic dataset is one draw
    of the generator cut in three, so that all share the true coefficients; the pool is
    copied out of the draw, so a bundle that keeps it does not keep the whole draw."""
    if dataset == "california":
        return california_split()
    loss, opts, _ = synthetic_spec(dataset)
    n_pub, n_test, n_pool = (N_PUBLIC, N_TEST, N_POOL) if not quick else (20_000, 10_000, 10_000)
    if loss == "absolute":
        n_test //= 5  # the LP reference optimum grows with the test size
    X, y = make_heavy_tailed(n_pub + n_test + n_pool, DIM, random_state=_seed(dataset, quick),
                             **opts)
    cut = n_pub + n_test
    return (X[:n_pub], y[:n_pub]), (X[n_pub:cut], y[n_pub:cut]), (X[cut:].copy(), y[cut:].copy())


def build_dataset(dataset, quick):
    """The test problem (its optimum is the population-risk reference) and, in ``info``, the
    public constants (smoothness beta, domain radius: twice the norm of the public optimum on
    California), the loss and the pool the training sets are drawn from."""
    (Xp, yp), (Xt, yt), pool = _samples(dataset, quick)
    loss = "squared" if dataset == "california" else synthetic_spec(dataset)[0]
    pub = _problem(Xp, yp, loss, dataset)
    radius = RADIUS
    if dataset == "california":
        radius = 2.0 * float(np.linalg.norm(dpopt.reference_optimum(pub)[0]))
    beta = max(pub.global_smoothness(), 1e-12) if loss != "absolute" else 1.0
    return _problem(Xt, yt, loss, dataset), {"beta": beta, "radius": radius, "loss": loss,
                                             "pool": pool}


def dataset_bundle(dataset, quick=False):
    """The test problem, its optimum and ``info`` of :func:`build_dataset`, cached."""
    return bundle(dataset, quick, build_dataset)


@functools.lru_cache(maxsize=16)
def moment_bounds(dataset, quick=False):
    """The public moment bounds r_k of a dataset: :func:`public_moments` on the public
    sample (drawn again: the bundle does not keep it) at the test optimum."""
    b = dataset_bundle(dataset, quick)
    (Xp, yp), _, _ = _samples(dataset, quick)
    return public_moments(_problem(Xp, yp, b.info["loss"], dataset), b.info["radius"], b.w_star)


def public_moments(pub, radius, w_star, orders=(2, 4, 8)):
    """r_k = max over a few points w of the domain of (mean ||grad f(w, x)||^k)^(1/k) on the
    public sample (w = 0, w*, and 8 random points of the sphere of radius ``radius``)."""
    rng = np.random.default_rng(0)
    pts = [pub.zeros(), np.asarray(w_star)]
    for _ in range(8):
        u = rng.standard_normal(pub.dim)
        pts.append(radius * u / np.linalg.norm(u))
    out = {}
    for k in orders:
        vals = []
        for w in pts:
            d = pub.loss.deriv(pub.margins(w), pub.y)
            g = np.abs(d) * pub.row_norms
            vals.append(float(np.mean(g ** k)) ** (1.0 / k))
        out[k] = max(vals)
    return out


@functools.lru_cache(maxsize=8)
def train_problem(dataset, n, rep, quick=False):
    """A training set: n records drawn without replacement from the dataset's pool."""
    info = dataset_bundle(dataset, quick).info
    Xpool, ypool = info["pool"]
    idx = np.random.default_rng(_seed(dataset, n, rep)).choice(Xpool.shape[0], n, replace=False)
    return _problem(Xpool[idx], ypool[idx], info["loss"], dataset)


def uniform_lipschitz(problem, radius):
    """max over the training sample and the ball of the per-sample gradient norm (not
    private: the a-priori Lipschitz bound a classical DP-SGD user must supply)."""
    norms = problem.row_norms
    if problem.loss.name == "squared":
        return float(np.max((np.abs(problem.y) + radius * norms) * norms))
    return float(np.max(norms))


# ---------------------------------------------------------------------------
# methods


def method_grid(nonsmooth=False, faithful=False):
    """Method name -> (solver, options). Names are stable config keys."""
    if nonsmooth:
        out = {"ht-subgradient/quantile": ("ht-subgradient", {"clip": "quantile"}),
               "ht-subgradient/theory": ("ht-subgradient", {"clip": "theory"})}
        if faithful:
            out["ht-subgradient/theory,T_i=theorem"] = ("ht-subgradient", {
                "clip": "theory", "max_phase_iter": None})
        for st in (0.01, 0.03, 0.1):
            out[f"dp-sgd/step={st},passes=4"] = ("dp-sgd", {"step": st, "passes": 4})
            out[f"dp-gd/step={st},passes=50"] = ("dp-gd", {"step": st, "passes": 50})
        return out
    out = {}
    for s in ("ht-acsa", "ht-sgd", "ht-proxsgd"):
        out[f"{s}/theory"] = (s, {"clip": "theory"})
        out[f"{s}/quantile"] = (s, {"clip": "quantile"})
        if s == "ht-acsa":  # the theorem's level vs a fixed 90% quantile (as DP-GD+quantile)
            out[f"{s}/quantile,q=0.9"] = (s, {"clip": "quantile", "clip_quantile": 0.9})
            # the price of the shuffle model (simulated protocol), same theory parameters
            out[f"{s}/theory,shuffle"] = (s, {"clip": "theory", "model": "shuffle-simulation"})
        if s != "ht-acsa":
            for T in (16, 64):
                out[f"{s}/quantile,T={T}"] = (s, {"clip": "quantile", "n_iter": T})
    for st in (0.03, 0.3, 1.0):
        for ps in (1, 4):
            out[f"dp-sgd/step={st},passes={ps}"] = ("dp-sgd", {"step": st, "passes": ps})
    for ps in (5, 20, 50):
        out[f"dp-gd/passes={ps}"] = ("dp-gd", {"passes": ps})
        for st in (0.01, 0.1):  # small steps: a tuned baseline can at least stay near w = 0
            out[f"dp-gd/step={st},passes={ps}"] = ("dp-gd", {"passes": ps, "step": st})
    for ps in (5, 20):
        out[f"dp-gd+quantile/passes={ps}"] = ("dp-gd+quantile", {"passes": ps})
    return out


def run_one(config, seed):
    """One fit; returns the excess test risk and the parameters actually used."""
    ds, n, eps, rep, method = (config["dataset"], config["n"], config["epsilon"],
                               config["rep"], config["method"])
    quick = config.get("quick", False)
    b = dataset_bundle(ds, quick)
    public = b.info  # beta, radius: public constants
    pb = train_problem(ds, n, rep, quick)
    solver, opts = method_grid(public["loss"] == "absolute", faithful=True)[method]
    opts = dict(opts)
    k = config["k"]
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    info = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # clamped-T warnings are recorded in params
        if solver.startswith("ht-"):
            # ht-subgradient needs the (2k)-th moment (Assumption 1 of order 2k)
            moment = moment_bounds(ds, quick).get(2 * k if solver == "ht-subgradient" else k)
            if opts.get("clip") == "theory":
                if moment is None:
                    return {"skipped": "moment not available"}
                opts["moment_bound"] = moment
            opts.update(moment_order=k, radius=public["radius"])
            if opts.get("model") != "shuffle-simulation":
                opts["accountant"] = "exact"
            if solver != "ht-subgradient":
                opts["smoothness"] = public["beta"]
            res = dpopt.solve(pb, solver, epsilon=eps, delta=DELTA, random_state=rng, **opts)
            info = {"clip": res.params.get("clip"), "n_iter": res.params.get("n_iter"),
                    "batch_size": res.params.get("batch_size"), "rho": res.params.get("rho"),
                    "passes": res.passes, "steps": res.n_iter}
        elif solver == "dp-gd+quantile":
            res, info = _dp_gd_quantile(pb, public["beta"], eps, rng, opts["passes"])
        else:
            lf = uniform_lipschitz(pb, public["radius"])
            res = dpopt.solve(pb, solver, epsilon=eps, delta=DELTA, random_state=rng,
                              clip=lf, smoothness=public["beta"], **opts)
            info = {"clip": lf, "passes": res.passes, "steps": res.n_iter}
    elapsed = time.perf_counter() - t0
    w = res.w
    excess = b.problem.objective(w) - b.f_star
    if not np.all(np.isfinite(w)) or not np.isfinite(excess):
        excess = DIVERGED
    zero = b.problem.objective(b.problem.zeros()) - b.f_star
    return {"excess": float(excess), "epsilon_spent": float(res.epsilon), "time": elapsed,
            "zero_excess": float(zero),
            **{key: (None if v is None else float(v)) for key, v in info.items()}}


def _dp_gd_quantile(pb, beta, eps, rng, passes):
    """DP-GD whose clip is the private 0.9-quantile of the gradient norms at 0 (10% of the
    budget; both are Gaussian mechanisms, composed exactly in Gaussian DP)."""
    mu = math.inf if math.isinf(eps) else gdp_mu(eps, DELTA)
    rho_q = QUANTILE_SHARE * mu * mu / 2
    eps_gd = math.inf if math.isinf(mu) else gdp_epsilon(math.sqrt(1 - QUANTILE_SHARE) * mu,
                                                           DELTA)
    norms = np.abs(pb.loss.deriv(pb.margins(pb.zeros()), pb.y)) * pb.row_norms
    clip, _ = private_quantile(rng, norms, 0.9, rho_q)
    res = dpopt.solve(pb, "dp-gd", epsilon=eps_gd, delta=DELTA, random_state=rng, clip=clip,
                      passes=passes, smoothness=beta)
    total = math.inf if math.isinf(mu) else gdp_epsilon(
        math.sqrt(2 * rho_q + (1 - QUANTILE_SHARE) * mu * mu), DELTA)
    res.epsilon = total
    return res, {"clip": clip, "passes": res.passes, "steps": res.n_iter}


# ---------------------------------------------------------------------------
# grid


def synthetic_datasets(quick):
    if quick:
        return ["linear-t-a3", "logistic-pareto-a5"]
    out = [f"{task}-{dist}-a{int(a)}" for task in ("linear", "logistic") for dist in ("t", "pareto")
           for a in TAILS]
    return out + ["linear-t-a5-out", "logistic-t-a5-out"]


def configs(quick):
    reps = 1 if quick else 3
    out = []
    datasets = synthetic_datasets(quick)
    if california_split() is not None:
        datasets = datasets + ["california"]
    methods = list(method_grid())
    if quick:
        methods = ["ht-acsa/theory", "ht-acsa/quantile", "ht-sgd/quantile,T=16",
                   "ht-proxsgd/quantile,T=16", "dp-gd/passes=20", "dp-gd+quantile/passes=20"]
    for ds in datasets:
        k = TAILS[synthetic_spec(ds)[2]] if ds != "california" else 2
        ns = (1000, 3000) if quick else (2000, 6000, 14000) if ds == "california" else \
            (2000, 8000, 32000)  # at epsilon = 1; other epsilons at the reference n
        eps_list = () if quick else (0.25, 4.0)
        for (n, eps) in [(n, 1.0) for n in ns] + [(_reference_n(ds, quick), e) for e in eps_list]:
            for rep in range(reps):
                for m in methods:
                    out.append({"dataset": ds, "n": n, "epsilon": eps, "rep": rep, "k": k,
                                "method": m, **({"quick": True} if quick else {})})
    # non-smooth task: absolute loss, heavy-tailed features (2k-th moment for ht-subgradient)
    ns_datasets = ["absolute-t-a5"] if quick else ["absolute-t-a5", "absolute-t-a9"]
    ns_points = [(1024, 1.0)] if quick else [(1024, 1.0), (4096, 1.0), (4096, 4.0)]
    for ds in ns_datasets:
        k = {5.0: 2, 9.0: 4}[synthetic_spec(ds)[2]]
        for (n, eps) in ns_points:
            for rep in range(reps):
                for m in method_grid(nonsmooth=True, faithful=n <= 1024):
                    if quick and m not in ("ht-subgradient/quantile",
                                           "dp-gd/step=0.03,passes=50"):
                        continue
                    out.append({"dataset": ds, "n": n, "epsilon": eps, "rep": rep, "k": k,
                                "method": m, **({"quick": True} if quick else {})})
    return out


def plot_records(records):
    """``runs.jsonl`` of this reproduction -> :mod:`dpopt.experiments.plotting` records. The error
    plotted is the excess test risk F_test(w) - F_test* (this paper's measure, in place
    of the relative error), one panel per (dataset, n, epsilon); ``inf`` marks a
    diverged run."""
    out = []
    for rec in records:
        c = rec.get("config") or {}
        if "excess" not in rec or "method" not in c:
            continue
        out.append(plot_record(c["method"], f"{c['dataset']}, n={c['n']}", c["epsilon"],
                               c["rep"], rel_error=rec["excess"]))
    return out


@register_experiment("heavy-tailed", plot_records=plot_records,
                     description="heavy-tailed DP-SO (Lowy & Razaviyayn): "
                     "noisy clipped AC-SA/SGD/prox-SGD/subgradient vs DP-SGD/DP-GD, excess "
                     "risk vs n and epsilon on heavy-tailed synthetic data and raw California")
def run(out: Path, quick: bool, n_jobs: int, backend: str, progress: bool) -> dict:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfgs = configs(quick)
    records = run_grid(cfgs, run_one, store=ResultStore(out / "runs.jsonl"), root_seed=7,
                       n_jobs=n_jobs, backend=backend, progress=progress, desc="heavy-tailed")
    fams = _aggregate(records)
    write_tables(records, fams, out, quick)
    figs = write_figures(fams, out, quick)
    n_runs = sum(1 for r in records if "excess" in r)
    return {"runs": n_runs, "tables": "results.md, summary.csv", "figures": ", ".join(figs)}
