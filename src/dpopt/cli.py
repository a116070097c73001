"""The ``dpopt`` command line."""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


# -- demo --------------------------------------------------------------------

def cmd_demo(args):
    """Private L2-logistic regression on scikit-learn's bundled breast-cancer data."""
    import numpy as np
    from sklearn.preprocessing import StandardScaler

    import dpopt
    from dpopt.datasets import load_bundled

    data = load_bundled("breast_cancer")
    X, y = StandardScaler().fit_transform(data.X), data.y
    problem = dpopt.Problem(X, y, loss="logistic", penalty="l2", alpha=args.alpha,
                            fit_intercept=True)
    n, p = X.shape
    delta = 1.0 / n ** 2
    print(f"dpopt demo: breast_cancer (bundled with scikit-learn), n={n}, p={p}, features "
          f"standardized without privacy (public preprocessing assumption)")
    print(f"problem: L2-regularized logistic regression, lambda={args.alpha:g}, intercept")
    _, f_star = dpopt.reference_optimum(problem)
    print(f"non-private optimum F* = {f_star:.6f}")
    print(f"target privacy: epsilon={args.epsilon:g}, delta=1/n^2={delta:.3g}, "
          f"{args.runs} runs with seeds {args.seed}..{args.seed + args.runs - 1}\n")
    header = f"{'solver':<10} {'epsilon spent':>13} {'delta':>9} {'adjacency':>12} " \
             f"{'rel. error (mean)':>18} {'accuracy':>9}"
    print(header)
    print("-" * len(header))
    for name, opts in _demo_solvers(problem, p):
        errs, accs = [], []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
            for s in range(args.seed, args.seed + args.runs):
                res = dpopt.solve(problem, name, epsilon=args.epsilon, delta=delta,
                                  random_state=s, **opts)
                errs.append((problem.objective(res.w) - f_star) / f_star)
                accs.append(np.mean(np.sign(X @ res.coef + res.intercept) == y))
        print(f"{name:<10} {res.epsilon:>13.4f} {res.delta:>9.2e} {res.adjacency:>12} "
              f"{np.mean(errs):>18.4f} {np.mean(accs):>9.3f}")
    print("\nrelative error = (F(w) - F*) / F*; the smoothness constants are computed from the "
          "data without privacy (a PrivacyLeakWarning, silenced here).")
    return 0


def _demo_solvers(problem, p):
    import dpopt

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
    from dpopt import datasets

    rows = datasets.list_datasets()
    print(f"{'name':<12} {'task':<15} {'shape':<16} available")
    for r in rows:
        shape = "x".join(str(s) for s in r["shape"]) if r.get("shape") else "?"
        print(f"{r['name']:<12} {r['task']:<15} {shape:<16} {'yes' if r['available'] else 'no'}")
    print("\nDatasets are read from $DPOPT_DATA/<name>.npz, then the cache, then downloaded.")
    return 0


def cmd_solvers(args):
    import dpopt

    for name in dpopt.available_solvers():
        spec = dpopt.get_solver(name)
        print(f"{name:<16} {spec.description}")
    return 0


def cmd_reproduce(args):
    from dpopt.experiments import get_experiment

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


def _dask_context(args):
    """With ``--backend dask``: one Dask client (``--scheduler`` or a LocalCluster) for
    the whole experiment; the experiment's ``run_grid`` calls use it."""
    import contextlib

    if args.backend != "dask":
        return contextlib.nullcontext()
    from dpopt.experiments.runner import dask_cluster

    return dask_cluster(args.scheduler, n_workers=max(1, args.n_jobs))


# -- fit -----------------------------------------------------------------------

def _option(text):
    """KEY=VALUE; VALUE parsed as JSON (numbers, true/false, lists), else a string."""
    import json

    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _unit_interval(text):
    value = _positive_float(text)
    if not value < 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text}")
    return value


def _non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def cmd_fit(args):
    """Fit a private linear model on a data file; print a report, write model JSON."""
    import numpy as np

    import dpopt
    from dpopt import modelio

    options = dict(args.option or [])
    accepted = dpopt.get_solver(args.solver).options()
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(f"--option: unknown option(s) {unknown} for solver {args.solver!r}; "
                         f"it accepts {accepted}")
    if args.target is not None and Path(args.data).suffix.lower() != ".csv":
        raise ValueError(f"--target applies to CSV files only, got {args.data!r}")
    try:
        X, y, names = modelio.read_data(args.data, target=args.target)
    except ValueError as exc:
        raise ValueError(f"DATA: {exc}") from None
    classes = None
    if args.loss == "logistic":
        y, classes = _signed_labels(y, args.positive_label)
    kwargs = {"alpha": args.alpha} if args.penalty in ("l1", "l2", "elastic_net") else {}
    if args.penalty == "elastic_net":
        kwargs["l1_ratio"] = args.l1_ratio
    loss = dpopt.problem.losses.huber(args.huber_threshold) if args.loss == "huber" else args.loss
    problem = dpopt.Problem(X, y, loss=loss, penalty=args.penalty,
                            fit_intercept=not args.no_intercept, **kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = dpopt.solve(problem, args.solver, epsilon=args.epsilon, delta=args.delta,
                                 random_state=args.seed, **options)
        except ValueError as exc:
            named = [k for k in options if str(exc).startswith(k)]
            raise ValueError(f"--option {named[0]}: {exc}" if named else str(exc)) from None
    leaks = [str(w.message) for w in caught if issubclass(w.category, dpopt.PrivacyLeakWarning)]
    for w in caught:
        if not issubclass(w.category, dpopt.PrivacyLeakWarning):
            warnings.warn(w.message, w.category, stacklevel=1)
    model = modelio.model_dict(problem, result, solver=args.solver, options=options,
                               seed=args.seed, classes=classes,
                               data={"path": str(args.data), "n_samples": problem.n_samples,
                                     "n_features": problem.n_features, "feature_names": names,
                                     "target": args.target})
    if args.out:
        modelio.save_model(args.out, model)
    nnz = int(np.count_nonzero(result.coef))
    print(f"dpopt fit: {args.data} (n={problem.n_samples}, p={problem.n_features}), "
          f"loss={args.loss}, penalty={args.penalty}"
          + (f"(alpha={args.alpha:g})" if kwargs else ""))
    print(f"privacy: {result.privacy_report()}")
    print(f"model: {nnz}/{problem.n_features} non-zero coefficients, intercept "
          f"{result.intercept:.4g}; {result.n_iter} updates, {result.passes:g} passes, "
          f"{result.time:.2f} s")
    for msg in leaks:
        print(f"PrivacyLeakWarning: {msg}")
    if args.train_metrics:
        print(f"training objective F(w) = {problem.objective(result.w):.6g} "
              f"(computed on the private data: NOT private)")
    if args.out:
        print(f"model written to {args.out}")
    return 0


def _signed_labels(y, positive):
    import numpy as np

    classes = np.unique(y)
    if classes.size != 2:
        raise ValueError(f"DATA: the logistic loss needs exactly 2 label values, got "
                         f"{classes.size}: {classes[:5].tolist()}")
    if positive is None:
        pos = classes[1]
    else:
        try:
            pos = float(positive)
        except ValueError:
            raise ValueError(f"--positive-label: not a number: {positive!r}") from None
        if pos not in classes:
            raise ValueError(f"--positive-label {positive} is not one of the labels "
                             f"{classes.tolist()}")
    neg = classes[0] if classes[1] == pos else classes[1]
    return np.where(y == pos, 1.0, -1.0), [float(neg), float(pos)]


# -- plot ------------------------------------------------------------------------

def cmd_plot(args):
    """Render the figures of a results JSONL to PNG and SVG."""
    from dpopt import plotting
    from dpopt.experiments import plot_records

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
    from dpopt import audit

    print(f"dpopt audit {args.solver}: {args.runs} runs on each of two neighbouring canary "
          f"datasets, target epsilon={args.epsilon:g}, delta={args.delta:g}, seed {args.seed}")
    res = audit.audit(args.solver, epsilon=args.epsilon, delta=args.delta, n_runs=args.runs,
                      canary=audit.AUDIT_CANARY.get(args.solver), random_state=args.seed)
    print(res.summary())
    return 0 if res.consistent else 1


# -- parser --------------------------------------------------------------------

def build_parser():
    parser = argparse.ArgumentParser(
        prog="dpopt", description="Differentially private empirical risk minimization.")
    from dpopt import __version__
    parser.add_argument("--version", action="version", version=f"dpopt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("demo", help="private fit on a bundled dataset (no download)")
    p.add_argument("--epsilon", type=_positive_float, default=1.0)
    p.add_argument("--alpha", type=_positive_float, default=1e-3, help="L2 strength lambda")
    p.add_argument("--runs", type=_positive_int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("account", help="epsilon for a noise multiplier, or the reverse")
    p.add_argument("--noise", type=_positive_float, help="noise multiplier sigma/sensitivity")
    p.add_argument("--epsilon", type=_positive_float)
    p.add_argument("--delta", type=_positive_float, required=True)
    p.add_argument("--steps", type=_positive_int, required=True)
    p.add_argument("--sampling-rate", type=_positive_float, default=None)
    p.add_argument("--adjacency", choices=["replace-one", "add-remove"], default="replace-one")
    p.add_argument("--accountant", choices=["auto", "exact", "pld", "rdp"], default="auto")
    p.set_defaults(func=cmd_account)

    p = sub.add_parser("audit", help="empirical lower bound on a solver's epsilon (canary audit)")
    p.add_argument("solver", help="a private solver (see 'dpopt solvers')")
    p.add_argument("--epsilon", type=_positive_float, default=2.0)
    p.add_argument("--delta", type=_positive_float, default=1e-3)
    p.add_argument("--runs", type=_positive_int, default=1000, help="runs per dataset")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("datasets", help="list named datasets and whether they are available")
    p.add_argument("action", nargs="?", choices=["list"], default="list")
    p.set_defaults(func=cmd_datasets)

    p = sub.add_parser("solvers", help="list the registered solvers")
    p.set_defaults(func=cmd_solvers)

    p = sub.add_parser("reproduce", help="reproduce a paper's experiments")
    p.add_argument("name", help="experiment name (see 'dpopt reproduce --list')")
    p.add_argument("--quick", action="store_true", help="reduced grid (about a minute)")
    p.add_argument("--out", help="output directory (default results/NAME)")
    p.add_argument("--n-jobs", type=int, default=1)
    p.add_argument("--backend", choices=["loky", "threading", "dask"], default="loky")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="Dask scheduler address (tcp://host:8786) for --backend dask; "
                        "default: a LocalCluster with --n-jobs workers")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_reproduce)

    from dpopt import available_solvers
    p = sub.add_parser("fit", help="fit a private model on a CSV / LIBSVM / npz file",
                       description="Fit a private linear model; print the privacy spent and "
                                   "write the model as JSON (--out).")
    p.add_argument("data", metavar="DATA", help="data file: .csv, .npz, or LIBSVM "
                   "(.svm, .libsvm, .svmlight, .txt)")
    p.add_argument("--loss", choices=["squared", "logistic", "huber", "absolute"],
                   required=True)
    p.add_argument("--penalty", choices=["none", "l1", "l2", "elastic_net"], default="none")
    p.add_argument("--alpha", type=_non_negative_float, default=0.0,
                   help="penalty strength (l1: alpha|w|_1, l2: alpha/2 |w|^2)")
    p.add_argument("--l1-ratio", type=_non_negative_float, default=0.5,
                   help="elastic-net mixing in [0, 1]")
    p.add_argument("--huber-threshold", type=_positive_float, default=1.35)
    p.add_argument("--solver", choices=available_solvers(), default="dp-cd")
    p.add_argument("--epsilon", type=_positive_float, required=True,
                   help="target epsilon ('inf': no privacy)")
    p.add_argument("--delta", type=_unit_interval, default=None,
                   help="target delta in (0, 1) (default 1/n^2)")
    p.add_argument("--option", type=_option, action="append", metavar="KEY=VALUE",
                   help="solver option, repeatable (e.g. --option passes=20 --option clip=0.5)")
    p.add_argument("--target", default=None,
                   help="CSV only: label column, name or index (default: the last column)")
    p.add_argument("--positive-label", default=None,
                   help="logistic: the label mapped to +1 (default: the larger one)")
    p.add_argument("--no-intercept", action="store_true", help="do not fit an intercept")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: fresh entropy)")
    p.add_argument("--out", metavar="MODEL.json", default=None, help="write the model here")
    p.add_argument("--train-metrics", action="store_true",
                   help="also print the training objective (NOT private)")
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser("plot", help="figures of a results JSONL (PNG and SVG)",
                       description="Relative error vs passes and vs wall time (min/mean/max "
                                   "bands, log scale) and error vs epsilon, from the records "
                                   "written by 'dpopt reproduce' (fields: see dpopt.plotting).")
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
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"dpopt {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
