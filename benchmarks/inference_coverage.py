"""Coverage of dpopt's private confidence intervals (issue 23; docs/inference.md).

Grid: model {linear, logistic} x noise {homo, hetero} x epsilon {0.5, 1, 4} x n {1e3, 1e4,
1e5} x p {3, 10}. Features on raw scales from 1e-2 to 1e2 (half uniform, half normal,
shifted); linear: y = 1 + sum_j b_j u_j + s(u) e (homo: s = 1; hetero: s = 0.5 + |u_0|);
logistic: y = 1{1 + sum_j b_j u_j + s(u) e > 0}, e logistic (hetero: a misspecified
model, the estimand is the pseudo-true logistic minimizer; the sandwich covers it).

The estimand of a fit (dpopt.pipeline.inference: the coefficients on the privately clipped
and scaled data, mapped to raw units) depends on the released scaling, so each replicate
computes it on a large fixed population of the cell group (20 n rows, between 2e5 and 2e6)
passed through that fit's own scaling and row clipping (:class:`Population`: the clipped
features and their moments are cached per released set of bounds, which lie on a public
grid, so a replicate only re-centres, re-clips the rows beyond R and solves).

Cost. One data set per (model, noise, n, p, replicate) is fitted at the three epsilons
(independent fit seeds; valid since the estimand is defined per fit and the replicates of
one epsilon stay independent), and statsmodels (OLS with HC1, Logit) runs once on it for
the first ``sm_reps`` replicates (the width reference). Work runs in blocks of 50
replicates; each cell group (model, noise, n, p) has one gzipped CSV under ``--out`` with a
row per (epsilon, replicate): covered flags and widths per coordinate (intercept last). A
rerun skips the blocks already in the file, so a run can be stopped (``--minutes``) and
resumed; blocks run in order of block index (n = 1e5 at a third of the pace). ``--eps``
runs a subset of the epsilons (a block counts as done per epsilon).

    python benchmarks/inference_coverage.py --quick                 # a few cells, 50 reps
    nice -n 10 python benchmarks/inference_coverage.py --full --jobs 2 --minutes 40
    python benchmarks/inference_coverage.py --groups linear,n100000-p10 --eps 4 --reps 1000
    python benchmarks/inference_coverage.py --summarize             # the table of what ran
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import itertools
import math
import sys
import time
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
FIELDS = ("eps", "rep", "error", "floored", "covered", "width", "sm_width")


def group_name(model, noise, n, p):
    return f"{model}-{noise}-n{n}-p{p}"


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


class Population:
    """A large sample of a cell group and the estimand of a fit on it.

    The estimand is the minimizer of the fit's loss on the population after the fit's maps:
    features clipped to the released bounds, shifted by the lower bound and divided by the
    map's scale (cached per bounds and scale), centred by the released means, rows whose
    feature norm exceeds R rescaled to norm R, the
    target clipped and mapped to [-1, 1] (least squares). Least squares solves the normal
    equations from cached moments, corrected on the rescaled rows only; logistic runs
    Newton's method from the fit's released w."""

    def __init__(self, model, noise, n, p, key):
        n_pop = int(min(max(20 * n, 200_000), 2_000_000))
        self.model = model
        self.X, self.y = draw(model, noise, n_pop, p, np.random.default_rng([*key, 10**6]))
        self.cache, self.last = {}, {}

    def prepared(self, scaling, target):
        key = (scaling.lower.tobytes(), scaling.upper.tobytes(), scaling.scale.tobytes(),
               None if target is None else (target.lower, target.upper))
        if key not in self.cache:
            width = scaling.scale  # the map's divisor (narrowed around the mean: not upper - lower)
            inv = np.divide(1.0, width, out=np.zeros_like(width), where=width > 0)
            Z = (np.clip(self.X, scaling.lower, scaling.upper) - scaling.lower) * inv
            y = target.transform(self.y) if target is not None else self.y
            if len(self.cache) >= 3:  # a few bounds recur; memory stays bounded
                self.cache.pop(next(iter(self.cache)))
            self.cache[key] = (Z, y, np.einsum("ij,ij->i", Z, Z), Z.T @ Z, Z.sum(0), Z.T @ y)
        return self.cache[key]

    def estimand(self, est):
        auto = est.auto_
        scaling, R = auto.scaling, auto.plan["row_bound"]
        Z, y, sq, ZtZ, zsum, Zty = self.prepared(scaling, auto.target)
        width = scaling.scale
        m = np.divide(scaling.offset - scaling.lower, width, out=np.zeros_like(width),
                      where=width > 0)
        norms2 = sq - 2.0 * (Z @ m) + m @ m
        out = np.flatnonzero(norms2 > R * R)
        factor = R / np.sqrt(norms2[out])
        if self.model == "linear":
            theta = self._least_squares(Z, y, ZtZ, zsum, Zty, m, out, factor)
        else:
            theta = self._logistic(est, Z, m, out, factor)
        from dpopt.pipeline.inference import raw_map

        A, c = raw_map(scaling, auto.target, theta.size, True)
        return A @ theta + c

    def _least_squares(self, Z, y, ZtZ, zsum, Zty, m, out, factor):
        N = Z.shape[0]
        y = np.clip(y, -1.0, 1.0)
        # moments of [Z - m, 1] on every row, then the rescaled rows' change
        F = ZtZ - np.outer(zsum, m) - np.outer(m, zsum) + N * np.outer(m, m)
        fsum, Fy = zsum - N * m, Zty - m * y.sum()
        Zc = Z[out] - m
        g = factor ** 2 - 1.0
        F = F + Zc.T @ (g[:, None] * Zc)
        fsum = fsum + (factor - 1.0) @ Zc
        Fy = Fy + Zc.T @ ((factor - 1.0) * y[out])
        M = np.block([[F, fsum[:, None]], [fsum[None, :], np.array([[float(N)]])]])
        return np.linalg.lstsq(M, np.append(Fy, y.sum()), rcond=None)[0]

    def _logistic(self, est, Z, m, out, factor):
        from scipy import special

        U = np.empty((Z.shape[0], Z.shape[1] + 1))
        np.subtract(Z, m, out=U[:, :-1])
        U[out, :-1] *= factor[:, None]
        U[:, -1] = 1.0
        yy = np.where(self.y == est.classes_[1], 1.0, -1.0)
        start = self.last.get(id(Z))  # the previous estimand on these bounds: a close start
        theta = np.asarray(est.fit_result_.w if start is None else start, float).copy()
        for _ in range(50):
            prob = special.expit(-yy * (U @ theta))  # |l'|
            root = np.sqrt(prob * (1.0 - prob))
            Uw = U * root[:, None]
            # least-norm step: a feature whose bounds collapsed is a zero column
            step = np.linalg.lstsq(Uw.T @ Uw, U.T @ (-yy * prob), rcond=None)[0]
            theta -= step
            if np.max(np.abs(step)) < 1e-8 * max(1.0, np.max(np.abs(theta))):
                break
        self.last[id(Z)] = theta
        return theta


def statsmodels_widths(model, X, y):
    import statsmodels.api as sm

    Xc = sm.add_constant(X, prepend=False)
    res = (sm.OLS(y, Xc).fit(cov_type="HC1") if model == "linear"
           else sm.Logit(y, Xc).fit(disp=0))
    ci = np.asarray(res.conf_int(0.05))
    return ci[:, 1] - ci[:, 0]


def fit_one(model, eps, X, y, seed):
    import dpopt

    cls = dpopt.DPLinearRegression if model == "linear" else dpopt.DPLogisticRegression
    kw = {} if model == "linear" else {"penalty": "none"}
    est = cls(epsilon=eps, inference=True, random_state=seed, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
        return est, est.summary()


def run_block(model, noise, n, p, block, reps=BLOCK, sm_reps=50, epsilons=EPSILONS,
              population=None):
    """Replicates [block * reps, (block + 1) * reps) of a cell group, at every epsilon:
    rows with keys FIELDS (covered, width: per coordinate, intercept last)."""
    key = [MODELS.index(model), NOISES.index(noise), n, p]
    pop = population or Population(model, noise, n, p, key)
    rows = []
    for r in range(block * reps, (block + 1) * reps):
        X, y = draw(model, noise, n, p, np.random.default_rng([*key, r]))
        sm_width = statsmodels_widths(model, X, y) if r < sm_reps else None
        for eps in epsilons:
            seed = int(np.random.default_rng([*key, r, int(eps * 10)]).integers(2**31))
            row = {"eps": eps, "rep": r, "error": "", "floored": "", "covered": None,
                   "width": None, "sm_width": sm_width}
            try:
                est, table = fit_one(model, eps, X, y, seed)
            except ValueError as exc:
                row["error"] = str(exc)[:120]
                rows.append(row)
                continue
            truth = pop.estimand(est)
            lo, hi = table.iloc[:, 4].to_numpy(), table.iloc[:, 5].to_numpy()
            given = np.isfinite(lo) & np.isfinite(hi)  # no interval for a dropped feature
            row["covered"] = np.where(given, (lo <= truth) & (truth <= hi), np.nan)
            row["width"] = np.where(given, hi - lo, np.nan)
            row["floored"] = int("within its noise" in table.attrs["text"])  # logistic Hessian
            rows.append(row)
    return rows


# --------------------------------------------------------------------------- files


def encode(row):
    def nums(v, fmt):
        return "" if v is None else " ".join("nan" if not np.isfinite(x) else fmt % x for x in v)

    cov = "" if row["covered"] is None else "".join(
        "-" if not np.isfinite(c) else str(int(c)) for c in row["covered"])
    return {"eps": f"{row['eps']:g}", "rep": row["rep"], "error": row["error"],
            "floored": row["floored"], "covered": cov,
            "width": nums(row["width"], "%.4g"), "sm_width": nums(row["sm_width"], "%.4g")}


def decode(rec):
    def nums(s):
        return None if not s else np.array([float(x) for x in s.split()])

    cov = None if not rec["covered"] else np.array(
        [np.nan if c == "-" else float(c) for c in rec["covered"]])
    return {"eps": float(rec["eps"]), "rep": int(rec["rep"]), "error": rec["error"],
            "floored": int(rec["floored"]) if rec["floored"] else "",
            "covered": cov, "width": nums(rec["width"]), "sm_width": nums(rec["sm_width"])}


def group_path(out, model, noise, n, p):
    return out / f"{group_name(model, noise, n, p)}.csv.gz"


def read_group(path):
    if not path.exists():
        return []
    with gzip.open(path, "rt", newline="") as fh:
        return [decode(rec) for rec in csv.DictReader(fh)]


def append_rows(path, rows):
    """Rewrite the group's file with ``rows`` added (atomic: a stopped run loses at most
    the block in progress)."""
    records = [encode(r) for r in read_group(path) + rows]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, FIELDS)
    writer.writeheader()
    writer.writerows(records)
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", newline="") as fh:
        fh.write(buf.getvalue())
    tmp.replace(path)


def done_blocks(path, epsilons=EPSILONS):
    """Blocks already run at every one of ``epsilons``."""
    rows = read_group(path)
    return set.intersection(*({r["rep"] // BLOCK for r in rows if r["eps"] == e}
                              for e in epsilons))


def run_group_blocks(group, blocks, out, sm_reps, deadline, epsilons=EPSILONS):
    """One worker's share: blocks of one cell group (the population built once)."""
    model, noise, n, p = group
    pop = Population(model, noise, n, p, [MODELS.index(model), NOISES.index(noise), n, p])
    finished = []
    for block in blocks:
        if time.time() > deadline:
            break
        rows = run_block(model, noise, n, p, block, BLOCK, sm_reps, epsilons, pop)
        append_rows(group_path(out, *group), rows)
        finished.append(block)
    return group_name(*group), finished


def run(groups, reps, jobs, out, sm_reps, minutes, epsilons=EPSILONS):
    """Blocks of every group up to ``reps`` replicates, block index first (every group
    gains replicates evenly), n <= 1e4 before n = 1e5; stops starting blocks after
    ``minutes``. Each task is a run of consecutive blocks of one group (one population).
    ``epsilons``: a subset of the grid's (a block is done when it ran at all of them)."""
    from joblib import Parallel, delayed

    out.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + 60.0 * minutes
    tasks = []
    for group in groups:
        done = done_blocks(group_path(out, *group), epsilons)
        todo = sorted(set(range(math.ceil(reps / BLOCK))) - done)
        per = 4 if group[2] < 100_000 else 1
        for i in range(0, len(todo), per):
            tasks.append((group, todo[i:i + per]))
    # n = 1e5 costs ~10x a smaller cell: it gets its blocks at 1/3 of the others' pace
    tasks.sort(key=lambda t: (t[1][0] * (3 if t[0][2] == 100_000 else 1), t[0]))
    for name, blocks in Parallel(n_jobs=jobs, return_as="generator_unordered")(
            delayed(run_group_blocks)(g, b, out, sm_reps, deadline, epsilons)
            for g, b in tasks):
        if blocks:
            print(f"{time.strftime('%H:%M:%S')} {name}: blocks {blocks}", flush=True)


# --------------------------------------------------------------------------- summary


def summarize_rows(rows):
    ok = [r for r in rows if r["covered"] is not None]
    if not ok:
        return None
    cov = np.array([r["covered"] for r in ok], float)
    width = np.array([r["width"] for r in ok], float)
    sm = np.array([r["sm_width"] for r in rows if r["sm_width"] is not None])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a coefficient never given
        ratio = (np.nanmedian(width, axis=0) / np.median(sm, axis=0)) if sm.size else None
        coverage = np.nanmean(cov, axis=0)
        given = np.sum(np.isfinite(cov), axis=0)
    return {"reps": len(ok), "errors": len(rows) - len(ok), "coverage": coverage,
            "given": np.mean(np.isfinite(cov)), "n_given": given, "width_ratio": ratio}


def cell_rows(out):
    """{cell name: rows} from every group file under ``out``."""
    cells = {}
    for path in out.glob("*.csv.gz"):
        model, noise, n, p = path.name[:-len(".csv.gz")].split("-")
        for row in read_group(path):
            cells.setdefault((model, noise, row["eps"], int(n[1:]), int(p[1:])), []).append(row)
    return {cell_name(*k): v for k, v in sorted(cells.items())}


def mc_se(c, reps):
    return math.sqrt(max(c * (1.0 - c), 0.0) / max(reps, 1))


def summarize(out):
    """Markdown table of every cell with results (coefficients; the intercept separately).
    MC s.e. = sqrt(c (1 - c) / k), k the fits that gave intervals (for the worst
    coefficient: the fits that gave it one). Logistic cells also give the share of fits
    whose released Hessian was floored and the mean coverage of the others."""
    lines = ["| cell | fits | no interval | mean coverage (coef) ± MC s.e. | "
             "min coverage (coef) ± MC s.e. | intercept | width / statsmodels (coef: median, "
             "max) | Hessian floored: share; coverage of the rest |",
             "|---|---|---|---|---|---|---|---|"]
    for name, rows in cell_rows(out).items():
        s = summarize_rows(rows)
        if s is None:
            lines.append(f"| {name} | {len(rows)} | {len(rows)} | | | | | |")
            continue
        cov, wr, k = s["coverage"][:-1], s["width_ratio"], s["reps"]
        worst = int(np.nanargmin(cov)) if np.isfinite(cov).any() else 0
        ratio = "" if wr is None else f"{np.nanmedian(wr[:-1]):.2f}, {np.nanmax(wr[:-1]):.2f}"
        lines.append(
            f"| {name} | {len(rows)} | {s['errors']} | "
            f"{np.nanmean(cov):.3f} ± {mc_se(np.nanmean(cov), k):.3f} | "
            f"{cov[worst]:.3f} ± {mc_se(cov[worst], s['n_given'][worst]):.3f} | "
            f"{s['coverage'][-1]:.3f} | {ratio} | {floored_split(rows)} |")
    return "\n".join(lines)


def floored_split(rows):
    ok = [r for r in rows if r["covered"] is not None]
    flags = [r["floored"] == 1 for r in ok]
    if not ok or not name_is_logistic(rows) or not any(flags):
        return ""
    rest = [np.nanmean(r["covered"][:-1]) for r, f in zip(ok, flags) if not f]
    return f"{np.mean(flags):.2f}; " + (f"{np.mean(rest):.3f}" if rest else "-")


def name_is_logistic(rows):
    return any(r["floored"] != "" for r in rows) and any(r["floored"] == 1 for r in rows)


def all_groups():
    return list(itertools.product(MODELS, NOISES, NS, PS))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="the whole grid at 1000 replications")
    ap.add_argument("--quick", action="store_true", help="n = 1e4, p = 3: 50 reps")
    ap.add_argument("--groups", default=None, help="substrings (comma: all) of group names")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=math.inf, help="stop starting blocks after")
    ap.add_argument("--sm-reps", type=int, default=50)
    ap.add_argument("--eps", default=None, help="comma-separated subset of the epsilons")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--summarize", action="store_true")
    args = ap.parse_args(argv)
    if args.summarize:
        print(summarize(args.out))
        return 0
    groups = all_groups()
    reps = args.reps or (1000 if args.full else BLOCK)
    if args.quick:
        groups = [g for g in groups if g[2] == 10_000 and g[3] == 3]
    if args.groups:
        groups = [g for g in groups if all(s in group_name(*g) for s in args.groups.split(","))]
    if not (args.full or args.quick or args.groups):
        ap.error("choose --full, --quick, --groups or --summarize")
    epsilons = EPSILONS if args.eps is None else tuple(float(e) for e in args.eps.split(","))
    if not set(epsilons) <= set(EPSILONS):
        ap.error(f"--eps must be a subset of {EPSILONS}")
    run(groups, reps, args.jobs, args.out, args.sm_reps, args.minutes, epsilons)
    print(summarize(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
