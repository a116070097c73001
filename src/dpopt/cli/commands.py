"""The ``dpopt`` command line.

Start-up: ``dpopt --help``, ``dpopt solvers`` and ``dpopt datasets`` load neither numba,
dp-accounting, scikit-learn, matplotlib nor scipy's optimizers (``import dpopt`` is lazy, the
solver names come from :func:`solver_catalog`, and every command imports what it needs when
it runs). ``--epsilon`` and ``--delta`` are checked by the same functions as the library's
(:func:`dpopt._core.validation.check_epsilon`, :func:`~dpopt._core.validation.check_delta`), and
``--option`` by the solver's :meth:`~dpopt.solvers.SolverSpec.check_options` before the data
is read.
"""

from __future__ import annotations

import argparse
import ast
import functools
import os
import sys
import textwrap
import time
import warnings
from pathlib import Path

import dpopt
from dpopt import __version__
from dpopt._core.validation import (
    MAX_EPSILON,
    MIN_DELTA,
    MIN_EPSILON,
    MIN_FIT_DELTA,
    check_delta,
    check_epsilon,
    default_delta,
)
from dpopt.cli._args import (
    _category_levels,
    _checked_number,
    _feature_bound,
    _HelpFormatter,
    _names,
    _non_negative_float,
    _option,
    _positive_float,
    _positive_int,
    _target_bound,
)
from dpopt.cli.fit import _dask_context, cmd_fit
from dpopt.cli.predict import cmd_predict

#: --epsilon: a number in the range of :func:`dpopt._core.validation.check_epsilon`, or inf.
_epsilon = _checked_number(check_epsilon)
#: --delta: a number in the range of :func:`dpopt._core.validation.check_delta`.
_delta = _checked_number(check_delta)


@functools.lru_cache(maxsize=1)
def solver_catalog():
    """``[(name, description, private)]`` of the built-in solvers, sorted by name.

    Read from the ``@register_solver(...)`` decorators in the source of
    ``dpopt/solvers/`` (its packages included) without importing them (importing compiles numba kernels and
    loads dp-accounting). Falls back to the registry when a decorator is not literal.
    """
    found = []
    try:
        for path in sorted((Path(__file__).parents[1] / "solvers").rglob("[!_]*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (isinstance(node, ast.Call) and getattr(node.func, "id", None)
                        == "register_solver"):
                    continue
                kw = {k.arg: k.value for k in node.keywords}
                name = node.args[0] if node.args else None
                private = kw.get("private", ast.Constant(True))
                if not all(isinstance(v, ast.Constant) for v in (name, kw.get("description"),
                                                                   private)):
                    raise LookupError(path)
                found.append((name.value, kw["description"].value, bool(private.value)))
    except (OSError, SyntaxError, LookupError):
        found = []
    if not found:
        found = [(n, dpopt.get_solver(n).description, dpopt.get_solver(n).private)
                 for n in dpopt.available_solvers()]
    return sorted(found)


# -- demo --------------------------------------------------------------------

def cmd_demo(args):
    """Private L2-logistic regression on scikit-learn's bundled breast-cancer data."""
    # lazy: the light CLI commands load no heavy module
    import numpy as np
    from sklearn.preprocessing import StandardScaler

    # lazy: the light CLI commands load no heavy module
    from dpopt.datasets import load_bundled

    data = load_bundled("breast_cancer")
    X, y = StandardScaler().fit_transform(data.X), data.y
    problem = dpopt.Problem(X, y, loss="logistic", penalty="l2", alpha=args.alpha,
                            fit_intercept=True)
    n, p = X.shape
    delta = default_delta(n)
    print(f"dpopt demo: breast_cancer (bundled with scikit-learn), n={n}, p={p}, features "
          f"standardized without privacy (public preprocessing assumption)")
    print(f"problem: L2-regularized logistic regression, lambda={args.alpha:g}, intercept")
    _, f_star = dpopt.reference_optimum(problem)
    print(f"non-private optimum F* = {f_star:.6f}")
    print(f"target privacy: epsilon={args.epsilon:g}, delta=1/n^2={delta:.3g}, "
          f"{args.runs} runs with seeds {args.seed}..{args.seed + args.runs - 1}\n")
    header = (f"{'fit':<18} {'solver':<22} {'epsilon spent':>13} {'delta':>9} {'adjacency':>12} "
              f"{'time (ms)':>9} {'rel. error':>10} {'accuracy':>9}")
    print(header)
    print("-" * len(header))
    rows = [(f"{name} (tuned)", functools.partial(_fit_solver, problem, name, opts, X, y, f_star))
            for name, opts in _demo_solvers(problem, p)]
    estimator = dpopt.DPLogisticRegression(epsilon=args.epsilon, delta=delta, alpha=args.alpha)
    rows.insert(0, ("estimator default", functools.partial(_fit_estimator, estimator, data.X, y)))
    for label, fit in rows:
        errs, accs, times = [], [], []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
            fit(epsilon=args.epsilon, delta=delta, random_state=args.seed)  # compiles; untimed
            for s in range(args.seed, args.seed + args.runs):
                res, err, acc, ms = fit(epsilon=args.epsilon, delta=delta, random_state=s)
                errs.append(err)
                accs.append(acc)
                times.append(ms)
        err = "n/a" if np.isnan(errs[0]) else f"{np.mean(errs):.4f}"
        print(f"{label:<18} {res.solver:<22} {res.epsilon:>13.4f} {res.delta:>9.2e} "
              f"{res.adjacency:>12} {np.mean(times):>9.1f} {err:>10} {np.mean(accs):>9.3f}")
    legend = ("estimator default: dpopt.DPLogisticRegression(epsilon, delta, alpha) with its "
              "default solver='auto', fitted on the RAW features: private end to end (its "
              "scaling is paid from the same epsilon, no PrivacyLeakWarning); its relative "
              "error is n/a because it minimises the objective on its privately scaled "
              "features. (tuned): explicit solvers on the standardized features, with options "
              "picked on this data at epsilon=1 (a non-private search, as in the papers) and "
              "smoothness constants computed from the data without privacy (a "
              "PrivacyLeakWarning, silenced here). Cost: the (epsilon, delta) each fit "
              "certifies and its mean wall time; result: the mean relative error "
              "(F(w) - F*) / F* and the training accuracy (not private).")
    print("\n" + textwrap.fill(legend, width=len(header)))
    return 0


_SAID: set[str] = set()  # the demo's notes already printed


def _fit_estimator(estimator, X, y, *, epsilon, delta, random_state):
    """(FitResult, nan, training accuracy, ms) of ``estimator`` (for the demo table)."""
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.set_params(random_state=random_state).fit(X, y)
    ms = 1e3 * (time.perf_counter() - t0)
    for w in caught:  # the same note comes with every seed: say each one once
        if str(w.message) not in _SAID:
            _SAID.add(str(w.message))
            print(f"note ({w.category.__name__}): {w.message}", file=sys.stderr)
    return estimator.fit_result_, float("nan"), estimator.score(X, y), ms


def _fit_solver(problem, name, opts, X, y, f_star, *, epsilon, delta, random_state):
    """(FitResult, relative error, training accuracy, ms) of one explicit solver run."""
    # lazy: the light CLI commands load no heavy module
    import numpy as np

    t0 = time.perf_counter()
    res = dpopt.solve(problem, name, epsilon=epsilon, delta=delta, random_state=random_state,
                      **opts)
    ms = 1e3 * (time.perf_counter() - t0)
    acc = float(np.mean(np.sign(X @ res.coef + res.intercept) == y))
    return res, (problem.objective(res.w) - f_star) / f_star, acc, ms


def _demo_solvers(problem, p):
    names = dpopt.available_solvers(private_only=True)
    # Hyperparameters picked on this data set at epsilon = 1 (a small non-private search,
    # as in the papers; the search itself is not private).
    defaults = {"dp-cd": {"passes": 30, "step": 1.0, "clip": 0.3},
                "dp-sgd": {"passes": 10, "step": 0.3, "clip": 1.0},
                "dp-gd": {"passes": 50, "step": 2.0, "clip": 1.0}}
    order = ["dp-cd", "dp-sgd", "dp-gd"]
    return [(n, defaults[n]) for n in order if n in names]


# -- account -----------------------------------------------------------------

def cmd_account(args):
    # lazy: the light CLI commands load no heavy module
    from dpopt import privacy

    if (args.noise is None) == (args.epsilon is None):
        raise ValueError("give exactly one of --noise (to get epsilon) or --epsilon (to get noise)")
    accountant = args.accountant

    def mechanisms(z):
        if args.sampling_rate is None or args.sampling_rate == 1.0:
            return [privacy.Gaussian(z, args.steps)]
        return [privacy.SubsampledGaussian(z, args.sampling_rate, args.steps)]

    if args.noise is not None:
        eps = privacy.epsilon_of(mechanisms(args.noise), args.delta, adjacency=args.adjacency,
                                 accountant=accountant)
        acc = privacy.resolve_accountant(mechanisms(args.noise), accountant)
        print(f"epsilon = {eps:.6g}  (delta={args.delta:g}, noise multiplier={args.noise:g}, "
              f"steps={args.steps}, sampling rate={args.sampling_rate or 1:g}, "
              f"adjacency={args.adjacency}, accountant={acc})")
    else:
        cal = privacy.calibrate(mechanisms, args.epsilon, args.delta, adjacency=args.adjacency,
                                accountant=accountant)
        print(f"noise multiplier = {cal.noise_multiplier:.6g}  (achieved epsilon="
              f"{cal.epsilon:.6g} <= {args.epsilon:g}, delta={args.delta:g}, steps={args.steps}, "
              f"sampling rate={args.sampling_rate or 1:g}, adjacency={args.adjacency}, "
              f"accountant={cal.accountant})")
    print("noise multiplier = sigma / sensitivity under the stated adjacency "
          "(replace-one: 2C for a sum of records clipped to norm C)")
    return 0


# -- datasets, solvers, reproduce ------------------------------------------------

def cmd_datasets(args):
    # lazy: the light CLI commands load no heavy module
    from dpopt import datasets

    rows = datasets.list_datasets()
    print(f"{'name':<12} {'task':<15} {'shape':<16} available")
    for r in rows:
        shape = "x".join(str(s) for s in r["shape"]) if r.get("shape") else "?"
        print(f"{r['name']:<12} {r['task']:<15} {shape:<16} {'yes' if r['available'] else 'no'}")
    print("\nDatasets are read from $DPOPT_DATA/<name>.npz, then the cache, then downloaded.")
    return 0


def cmd_solvers(args):
    catalog = solver_catalog()
    width = max((len(name) for name, _, _ in catalog), default=0) + 2
    for name, description, _ in catalog:
        print(f"{name:<{width}}{description}")
    return 0


def cmd_reproduce(args):
    # lazy: the light CLI commands load no heavy module
    from dpopt.experiments import available_experiments, get_experiment

    if args.list:
        for name, exp in available_experiments().items():
            print(f"{name:<14} {exp.description}")
        return 0
    if args.name is None:
        raise ValueError("NAME: give an experiment name (see 'dpopt reproduce --list')")
    if args.scheduler is not None and args.backend != "dask":
        raise ValueError("--scheduler needs --backend dask")
    exp = get_experiment(args.name)
    out = Path(args.out) if args.out else Path("results") / (args.name + ("-quick" if args.quick
                                                                          else ""))
    print(f"dpopt reproduce {args.name}{' --quick' if args.quick else ''}: writing to {out}")
    with _dask_context(args):
        summary = exp.run(out=out, quick=args.quick, n_jobs=args.n_jobs, backend=args.backend,
                          progress=not args.no_progress)
    for key, value in (summary or {}).items():
        print(f"{key}: {value}")
    return 0


# -- fit -----------------------------------------------------------------------

# (loss, penalty) -> estimator class name; None: the estimator's default penalty


# -- plot ------------------------------------------------------------------------

def cmd_plot(args):
    """Render the figures of a results JSONL to PNG and SVG."""
    # lazy: the light CLI commands load no heavy module
    from dpopt.experiments import plot_records, plotting

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        paths = plotting.render(args.results, args.out, kinds=args.kind or plotting.KINDS,
                                formats=args.format or ("png", "svg"), adapt=plot_records)
    for w in caught:
        print(f"dpopt plot: {w.message}", file=sys.stderr)
    for path in paths:
        print(path)
    return 0


# -- audit -------------------------------------------------------------------------

def cmd_audit(args):
    private = [name for name, _, is_private in solver_catalog() if is_private]
    if args.solver not in private:
        raise ValueError(f"SOLVER must be one of the private solvers {private}, "
                         f"got {args.solver!r}")
    # lazy: the light CLI commands load no heavy module
    from dpopt.api import audit

    pair = {"canary": audit.AUDIT_CANARY.get(args.solver)}
    if args.canary == "curvature":  # the Jacobian term (dpopt.api.audit, "The curvature canary")
        losses = dpopt.get_solver(args.solver).losses
        if losses is not None and "huber" not in losses:
            raise ValueError(f"--canary curvature needs a solver of the Huber loss; "
                             f"{args.solver!r} takes {list(losses)}")
        pair = {"problem_factory": audit.curvature_canary_problems, "statistic": audit.near_zero}
    print(f"dpopt audit {args.solver}: {args.runs} runs on each of two neighbouring canary "
          f"datasets ({args.canary}), target epsilon={args.epsilon:g}, delta={args.delta:g}, "
          f"seed {args.seed}")
    res = audit.audit(args.solver, epsilon=args.epsilon, delta=args.delta, n_runs=args.runs,
                      random_state=args.seed, **pair)
    print(res.summary())
    return 0 if res.consistent else 1


# -- parser --------------------------------------------------------------------

def build_parser():
    eps_range = f"in [{MIN_EPSILON:g}, {MAX_EPSILON:g}]"
    delta_range = f"in [{MIN_DELTA:g}, 1); a warning when above 1/n"
    parser = argparse.ArgumentParser(
        prog="dpopt", description="Differentially private empirical risk minimization.",
        formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"dpopt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, **kwargs):
        return sub.add_parser(name, formatter_class=_HelpFormatter, **kwargs)

    p = command("demo", help="private fit on a bundled dataset (no download)",
                description="Private L2-logistic regression on scikit-learn's bundled "
                            "breast-cancer data: the estimator's default path beside tuned "
                            "explicit solvers, with what each costs and gets.")
    p.add_argument("--epsilon", type=_epsilon, default=1.0, help=f"target epsilon {eps_range}")
    p.add_argument("--alpha", type=_positive_float, default=1e-3, help="L2 strength lambda")
    p.add_argument("--runs", type=_positive_int, default=5, help="runs (seeds) per row")
    p.add_argument("--seed", type=int, default=0, help="first seed")
    p.set_defaults(func=cmd_demo)

    p = command("account", help="epsilon for a noise multiplier, or the reverse",
                description="Give --noise to get epsilon, or --epsilon to get the smallest "
                            "noise multiplier.")
    p.add_argument("--noise", type=_positive_float,
                   help="noise multiplier sigma/sensitivity (give this or --epsilon)")
    p.add_argument("--epsilon", type=_epsilon,
                   help=f"target epsilon {eps_range} (give this or --noise)")
    p.add_argument("--delta", type=_delta, required=True, help=f"delta {delta_range}")
    p.add_argument("--steps", type=_positive_int, required=True,
                   help="number of composed mechanisms")
    p.add_argument("--sampling-rate", type=_positive_float, default=None,
                   help="Poisson sampling rate of each step (default: no sampling)")
    p.add_argument("--adjacency", choices=["replace-one", "add-remove"], default="replace-one",
                   help="neighbouring datasets")
    p.add_argument("--accountant", choices=["auto", "exact", "pld", "rdp"], default="auto",
                   help="accountant (auto: exact Gaussian DP when it applies, else PLD)")
    p.set_defaults(func=cmd_account)

    p = command("audit", help="empirical lower bound on a solver's epsilon (canary audit)")
    p.add_argument("solver", metavar="SOLVER", help="a private solver (see 'dpopt solvers')")
    p.add_argument("--epsilon", type=_epsilon, default=2.0, help=f"target epsilon {eps_range}")
    p.add_argument("--delta", type=_delta, default=1e-3, help=f"target delta {delta_range}")
    p.add_argument("--runs", type=_positive_int, default=1000, help="runs per dataset")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--canary", choices=("gradient", "curvature"), default="gradient",
                   help="gradient: the solver's declared canary (worst-case clipped gradients); "
                        "curvature: records of different curvature, for objective "
                        "perturbation's Jacobian term")
    p.set_defaults(func=cmd_audit)

    p = command("datasets", help="list named datasets and whether they are available")
    p.add_argument("action", nargs="?", choices=["list"], default="list", help="what to do")
    p.set_defaults(func=cmd_datasets)

    p = command("solvers", help="list the registered solvers")
    p.set_defaults(func=cmd_solvers)

    p = command("reproduce", help="reproduce a paper's experiments")
    p.add_argument("name", metavar="NAME", nargs="?", default=None,
                   help="experiment name (see 'dpopt reproduce --list')")
    p.add_argument("--list", action="store_true", help="list the experiments and exit")
    p.add_argument("--quick", action="store_true", help="reduced grid (about a minute)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output directory (default: results/NAME, or results/NAME-quick)")
    p.add_argument("--n-jobs", type=int, default=1, help="parallel jobs")
    p.add_argument("--backend", choices=["loky", "threading", "dask"], default="loky",
                   help="parallel backend")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="Dask scheduler address (tcp://host:8786) for --backend dask "
                        "(default: a LocalCluster with --n-jobs workers)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_reproduce)

    solvers = [name for name, _, _ in solver_catalog()]
    p = command("fit", help="fit a private model on a CSV / LIBSVM / npz file",
                description="Fit a private linear model with the scikit-learn estimator of "
                            "--loss/--penalty (DPLogisticRegression, DPLinearRegression, "
                            "DPLasso, DPElasticNet, DPHuberRegressor) and its default settings, "
                            "unless options are given; print the privacy spent and write the "
                            "model as JSON (--out, checked before the fit). Tables (CSV, Parquet) "
                            "may have string, bool and missing values and a string target: "
                            "the table layer dpopt.preprocessing.tables chooses categories and labels "
                            "privately; see docs/tables.md.")
    p.add_argument("data", metavar="DATA", help="data file: a table (.csv, .csv.gz, .tsv, "
                   ".parquet), .npz, or LIBSVM (.svm, .libsvm, .svmlight, .txt)")
    p.add_argument("--loss", choices=["squared", "logistic", "huber", "absolute"],
                   required=True, help="loss on the margin")
    p.add_argument("--penalty", choices=["none", "l1", "l2", "elastic_net"], default=None,
                   help="penalty (default: the estimator's: l2 for logistic and huber, none for "
                        "squared)")
    p.add_argument("--alpha", type=_non_negative_float, default=None,
                   help="penalty strength, l1: alpha|w|_1, l2: alpha/2 |w|^2 (default: the "
                        "estimator's)")
    p.add_argument("--l1-ratio", type=_non_negative_float, default=None,
                   help="elastic-net mixing in [0, 1] (default: the estimator's, 0.5)")
    p.add_argument("--huber-threshold", type=_positive_float, default=None,
                   help="Huber threshold (default: the estimator's, 1.35)")
    p.add_argument("--solver", choices=solvers, default=None, metavar="SOLVER",
                   help="solver (default: the estimator's; see 'dpopt solvers')")
    p.add_argument("--epsilon", type=_epsilon, required=True,
                   help=f"target epsilon {eps_range} ('inf': no privacy)")
    p.add_argument("--delta", type=_delta, default=None,
                   help=f"target delta in [{MIN_FIT_DELTA:.3g}, 1); a warning when above 1/n "
                        f"(default: 1/n^2)")
    p.add_argument("--option", type=_option, action="append", metavar="KEY=VALUE",
                   help="solver option, repeatable (e.g. --option passes=20 --option clip=0.5; "
                        "default: the solver's defaults)")
    p.add_argument("--target", default=None,
                   help="tables only: label column, its name or number counted from 1 "
                        "(a name first: a number is a position where no column has it as "
                        "its name; default: the last column)")
    p.add_argument("--classes", default=None, metavar="A,B[,C...]",
                   help="logistic: declare the labels, two or more (three or more: a "
                        "multiclass model; public; default: chosen privately from the data by "
                        "the table layer), read as the target column holds them: integers "
                        "for an integer column, floats for a float one, text otherwise")
    p.add_argument("--positive-label", default=None,
                   help="logistic: the label mapped to +1, read as --classes reads a label "
                        "(default: the larger label)")
    p.add_argument("--feature-bounds", type=_feature_bound, action="append",
                   metavar="NAME=LO:HI",
                   help="public bounds of a numeric column, repeatable (e.g. --feature-bounds "
                        "age=17:90): values are clipped to them and no budget is spent on that "
                        "column's bounds (default: bounds estimated privately; 0/1 columns "
                        "always have public bounds [0, 1])")
    p.add_argument("--categories", type=_category_levels, action="append",
                   metavar="NAME=A,B,...",
                   help="tables only: the public levels of a column, repeatable (e.g. "
                        "--categories size=S,M,L): each gets a 0/1 column, others go to "
                        "<other>, and nothing is spent choosing them (default: a column's "
                        "levels are chosen privately; numbers for a column of numbers)")
    p.add_argument("--target-bounds", type=_target_bound, default=None, metavar="LO:HI",
                   help="regression: a public range of the target (e.g. 0:100): the target "
                        "is clipped to it and no budget is spent on its range (default: "
                        "estimated privately)")
    p.add_argument("--no-header", action="store_true",
                   help="CSV only: the file has no header; its first row is data and the "
                        "columns are col1, col2, ... (default: the first row is the header)")
    p.add_argument("--numbers", type=_names, action="extend", default=[],
                   metavar="NAME[,NAME...]",
                   help="tables only: read these columns as numbers, a cell that is not a "
                        "number as missing (public; repeatable; default: a column's cells "
                        "decide, and a column mixing numbers and text is refused)")
    p.add_argument("--text", type=_names, action="extend", default=[],
                   metavar="NAME[,NAME...]",
                   help="tables only: read these columns as text, every cell a level whose "
                        "values are chosen privately ('01' stays '01'; public; repeatable)")
    p.add_argument("--missing", choices=["auto", "error", "drop"], default="auto",
                   help="tables only, missing values (empty, NA, NaN, ?): auto (the private "
                        "rule of dpopt.preprocessing.tables: imputed at 0 / '<other>' plus a privately "
                        "selected indicator), error (report the columns), drop (drop those "
                        "rows; not covered by the guarantee: PrivacyLeakWarning)")
    p.add_argument("--no-intercept", action="store_true",
                   help="do not fit an intercept (default: fit one)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: fresh entropy)")
    p.add_argument("--out", metavar="MODEL.json", default=None,
                   help="write the model here (default: not written)")
    p.add_argument("--train-metrics", action="store_true",
                   help="also print the training objective (NOT private; default: not printed)")
    p.add_argument("--inference", action="store_true",
                   help="also give standard errors, 95%% confidence intervals and p-values of "
                        "the coefficients, paid for in the same budget (the default path with "
                        "--loss squared or logistic, two classes; docs/inference.md; default: "
                        "not given)")
    p.set_defaults(func=cmd_fit)

    p = command("predict", help="score a table with a model written by 'dpopt fit --out'",
                description="Apply a model written by 'dpopt fit --out' to a table (CSV, "
                            "Parquet) with the training schema (columns by name, categories "
                            "aligned, unseen values to '<other>'); write the predictions as CSV "
                            "and print accuracy or R^2 when the target column is present.")
    p.add_argument("model", metavar="MODEL", help="model JSON written by 'dpopt fit --out'")
    p.add_argument("data", metavar="DATA", help="data file: a table (.csv, .csv.gz, .parquet), "
                   ".npz or LIBSVM")
    p.add_argument("--target", default=None,
                   help="target column to score against, a name or a number counted from 1 "
                        "as for 'dpopt fit' (default: the training target, if present)")
    p.add_argument("--out", metavar="PRED.csv", default="predictions.csv",
                   help="where to write the predictions: CSV, or as the suffix says (.parquet, "
                        ".tsv; .gz, .bz2, .xz, .zst compress); never the model or DATA")
    p.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                   help="CSV only: whether the file's first row is its header (--no-header: "
                        "it is data; default: as the model's training file was read)")
    p.set_defaults(func=cmd_predict)

    p = command("plot", help="figures of a results JSONL (PNG and SVG)",
                description="Relative error vs passes and vs wall time (min/mean/max "
                            "bands, log scale) and error vs epsilon, from the records "
                            "written by 'dpopt reproduce' (fields: see dpopt.experiments.plotting).")
    p.add_argument("results", metavar="RESULTS",
                   help="results JSONL (e.g. results/NAME/runs.jsonl)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="output directory (default: beside RESULTS)")
    p.add_argument("--kind", choices=["passes", "time", "epsilon"], action="append",
                   help="figure(s) to draw, repeatable (default: all that the records allow)")
    p.add_argument("--format", choices=["png", "svg", "pdf"], action="append",
                   help="file format(s), repeatable (default: png and svg)")
    p.set_defaults(func=cmd_plot)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(_negative_ranges(sys.argv[1:] if argv is None else argv))
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"dpopt {args.command}: error: {exc}", file=sys.stderr)
        return 2


def _negative_ranges(argv):
    """``--target-bounds -10:10`` as ``--target-bounds=-10:10``: argparse takes a value that
    starts with "-" and is not a plain number for an option, and refused the common range
    with a negative lower end ("expected one argument")."""
    out, argv = [], [str(a) if isinstance(a, os.PathLike) else a for a in argv]
    for i, token in enumerate(argv):
        flag = argv[i - 1] if i and isinstance(argv[i - 1], str) else ""
        if (flag.startswith("--ta") and "--target-bounds".startswith(flag)  # abbreviated too
                and isinstance(token, str) and token.startswith("-") and ":" in token):
            out[-1] = f"--target-bounds={token}"
        else:
            out.append(token)
    return out


if __name__ == "__main__":
    sys.exit(main())
