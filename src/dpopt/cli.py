"""The ``dpopt`` command line."""

from __future__ import annotations

import argparse
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
    defaults = {"dp-cd": {"passes": 5, "step": 1.0, "clip": 2.0}}
    return [(n, defaults[n]) for n in names if n in defaults]


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

    exp = get_experiment(args.name)
    out = Path(args.out) if args.out else Path("results") / (args.name + ("-quick" if args.quick
                                                                          else ""))
    print(f"dpopt reproduce {args.name}{' --quick' if args.quick else ''}: writing to {out}")
    summary = exp.run(out=out, quick=args.quick, n_jobs=args.n_jobs, backend=args.backend,
                      progress=not args.no_progress)
    for key, value in (summary or {}).items():
        print(f"{key}: {value}")
    return 0


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
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_reproduce)
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
