"""The levers of docs/default_path.md, "Levers measured in session 34": one internal rule of
the default path changed by a patch, the practitioner benchmark's regression tables scored
before and after (test R², mean and standard error over seeds).

    python benchmarks/issue24_columns_highdim/levers.py holdout 10
    python benchmarks/issue24_columns_highdim/levers.py mechanism 5
    python benchmarks/issue24_columns_highdim/levers.py curvature 10
    python benchmarks/issue24_columns_highdim/levers.py shares 10
    python benchmarks/issue24_columns_highdim/levers.py spectra
    python benchmarks/issue24_columns_highdim/levers.py constant 8
    python benchmarks/issue24_columns_highdim/levers.py steps 5
"""
import math
import sys
import warnings
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import practitioner as P  # noqa: E402

import dpopt  # noqa: E402
import dpopt.pipeline.constant as constant  # noqa: E402
import dpopt.pipeline.curvature as curvature  # noqa: E402
import dpopt.pipeline.selection as selection  # noqa: E402
import dpopt.solvers._common as solvers_common  # noqa: E402
from dpopt.pipeline.held_out import GAP_SHARE  # noqa: E402
from dpopt.preprocessing import DEFAULT_BIN_CONFIDENCE  # noqa: E402
from dpopt.preprocessing.feature_maps import TargetScaling  # noqa: E402
from dpopt.preprocessing.shares import SHARES  # noqa: E402
from dpopt.solvers import get_solver  # noqa: E402

REGRESSION = ("california", "nlswork", "loans_full_schema", "movies", "slid", "txhousing",
              "doctor_contacts", "diabetes", "heavy-tails", "small-n")


@contextmanager
def patched(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def held_out(fraction):
    """validation_rows at ``fraction`` of n, never below the rows the score gaps' histogram
    needs to resolve (a decade of its grid, 4 bins, each above DEFAULT_BIN_CONFIDENCE sigma,
    sigma = sqrt(2) / mu_q, mu_q = mu sqrt(GAP_SHARE)), never above the rule."""
    rule = selection.validation_rows

    def rows(n, mu=None, spread=2.0):
        m = rule(n, mu, spread)
        if mu is None or not mu > 0:
            return m
        low = min(m, int(fraction * n))
        if abs(spread - 2.0 / math.sqrt(1.0 - GAP_SHARE)) < 1e-9:  # a regressor
            need = 4 * DEFAULT_BIN_CONFIDENCE * math.sqrt(2.0) / (mu * math.sqrt(GAP_SHARE))
            low = max(low, min(m, math.ceil(need)))
        return low
    return patched(selection, "validation_rows", rows)


def mechanism(which):
    """AdaSSP's ``declines`` forced: 'adassp' never declines, 'dp-gd' always does."""
    spec = get_solver("adassp").default_path
    rule = (lambda n, dim, mu: None) if which == "adassp" else (lambda n, dim, mu: "forced")

    @contextmanager
    def both():
        old = spec.declines
        object.__setattr__(spec, "declines", rule)
        try:
            yield
        finally:
            object.__setattr__(spec, "declines", old)
    return both()


def public_curvature():
    """No budget on the curvature: its release at a vanishing share, so beta = R^2 + 1."""
    return patched(curvature, "curvature_share", lambda *a, **k: 1e-14)


@contextmanager
def shares(factor):
    old = dict(SHARES)
    SHARES.update({k: v * factor for k, v in SHARES.items()})
    try:
        yield
    finally:
        SHARES.update(old)


def step_cap(cap):
    """DP-GD's run length clamped to [5, ``cap``] instead of [5, 200]: the single run's and
    the second half's of rescaled_huber_fit (both read ``MAX_RUN_LENGTH``)."""
    return patched(solvers_common, "MAX_RUN_LENGTH", cap)


@contextmanager
def forced_gd(cap):
    with mechanism("dp-gd"), step_cap(cap):
        yield


def scores(data, eps, seeds):
    s = P.dp_scores(*data, eps, seeds)[0]
    return f"{s.mean():.4f} ± {s.std() / math.sqrt(seeds):.4f}"


def compare(variants, epsilons, seeds, tables=REGRESSION):
    for name in tables:
        data = P.load(name)  # once per table: (X_train, X_test, y_train, y_test, task)
        for eps in epsilons:
            cells = []
            for label, context in variants:
                with context():
                    cells.append(f"{label} {scores(data, eps, seeds)}")
            print(f"{name:18s} eps={eps:<4g} " + " | ".join(cells), flush=True)


def spectra():
    """Share of the least-squares solution's energy below h/d and h/(3d) on the scaled,
    row-clipped Gram matrix with the intercept (h its average eigenvalue)."""
    for name in REGRESSION:
        Xtr, _, ytr, _, _ = P.load(name)
        m = dpopt.DPLinearRegression(epsilon=4, random_state=0).fit(Xtr, ytr)
        Z = np.asarray(m.auto_.scaling.transform(Xtr))
        R = m.auto_.plan["row_bound"] or 1.0
        Z *= np.minimum(1.0, R / np.maximum(np.linalg.norm(Z, axis=1), 1e-12))[:, None]
        Z = np.hstack([Z, np.ones((len(Z), 1))])
        ev, V = np.linalg.eigh(Z.T @ Z / len(Z))
        y = m.auto_.target.transform(ytr) if m.auto_.target is not None else ytr
        w = np.linalg.lstsq(Z, y, rcond=None)[0]
        energy = (V.T @ w) ** 2 * ev
        energy /= energy.sum()
        x = ev / ev.mean()  # eigenvalue in units of h; times d: in units of h / d
        d = len(ev)
        print(f"{name:18s} d={d:3d} below h/d {energy[x * d < 1].sum():.3f} "
              f"below h/(3d) {energy[x * d < 1 / 3].sum():.3f}")


def constant_range(seeds):
    """No-signal targets: the constant with the training range's one-signed end extended to 0
    where it is within half a decade of it."""
    release = constant.release_constant

    def extended(target, data, mu_c, rng):
        lo, hi = target.lower, target.upper
        if 0 < lo <= hi * 10 ** -0.5 * (1 + 1e-9):
            lo = 0.0
        elif hi < 0 and -hi <= -lo * 10 ** -0.5 * (1 + 1e-9):
            hi = 0.0
        if (lo, hi) == (target.lower, target.upper):
            return release(target, data, mu_c, rng)
        wide = TargetScaling.from_bounds(lo, hi, shift=True)
        mean, sd, records = release(wide, data, mu_c, rng)
        c, sd = target.scaled_estimate(mean * wide.half_width + wide.center, sd * wide.half_width)
        return float(np.clip(c, -1, 1)), sd, records

    targets = {"U(0,100)": lambda g, n: g.uniform(0, 100, n),
               "N(-500,100)": lambda g, n: g.normal(-500, 100, n),
               "N(70,15) in [0,100]": lambda g, n: np.clip(g.normal(70, 15, n), 0, 100)}
    for label, context in (("rule", lambda: patched(constant, "release_constant", release)),
                           ("extended", lambda: patched(constant, "release_constant", extended))):
        for tname, draw in targets.items():
            row = []
            for n in (300, 1000):
                for eps in (0.25, 0.5, 1.0):
                    g, sc = np.random.default_rng(0), []
                    for s in range(seeds):
                        y = draw(g, int(n / 0.75))
                        X = g.normal(size=(len(y), 5))
                        with context():
                            m = dpopt.DPLinearRegression(epsilon=eps, random_state=s).fit(X[:n], y[:n])
                        sc.append(m.score(X[n:], y[n:]))
                    row.append(f"{np.mean(sc):8.3f}")
            print(f"{label:8s} {tname:20s} n=300/1000 eps=.25/.5/1:", " ".join(row), flush=True)


def main(what, seeds=5):
    warnings.simplefilter("ignore")
    seeds = int(seeds)
    if what == "holdout":
        compare([("20%", nullcontext), ("10%", lambda: held_out(0.10))], (0.5, 1, 2, 4), seeds)
    elif what == "mechanism":
        compare([("adassp", lambda: mechanism("adassp")), ("dp-gd", lambda: mechanism("dp-gd"))],
                (1, 2, 4, 8), seeds)
    elif what == "curvature":
        compare([("released", nullcontext), ("public", public_curvature)], (0.5, 1, 2, 4), seeds)
    elif what == "shares":
        compare([(f"x{f:g}", lambda f=f: shares(f)) for f in (0.5, 1.0, 1.5)], (1,), seeds)
    elif what == "spectra":
        spectra()
    elif what == "constant":
        constant_range(seeds)
    elif what == "steps":
        compare([("adassp", lambda: mechanism("adassp")), ("dp-gd T<=200", lambda: forced_gd(200)),
                 ("dp-gd T<=2000", lambda: forced_gd(2000))], (0.5, 1, 2, 4, 8, 100), seeds)
        compare([("default", nullcontext), ("T<=2000", lambda: step_cap(2000))], (0.5, 1, 2, 4),
                seeds)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(*sys.argv[1:])
