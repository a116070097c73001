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
import contextlib
import functools
import math
import os
import sys
import textwrap
import time
import warnings
from pathlib import Path

from dpopt._core.validation import check_delta, check_epsilon, default_delta


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: X)`` after every option whose default is a value; options whose
    default is None or a flag say in their help what happens when they are absent."""

    def _get_help_string(self, action):
        if action.default in (None, False) or action.required:
            return action.help
        return super()._get_help_string(action)


def _checked_number(check):
    """An argparse type: float(text) checked by ``check``; its ValueError becomes the
    argument's error message."""
    def convert(text):
        try:
            return check(float(text))
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc) if "could not convert" not in str(exc)
                                             else f"not a number: {text!r}") from None
    return convert


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
    import ast

    found = []
    try:
        for path in sorted((Path(__file__).parent / "solvers").rglob("[!_]*.py")):
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
        import dpopt

        found = [(n, dpopt.get_solver(n).description, dpopt.get_solver(n).private)
                 for n in dpopt.available_solvers()]
    return sorted(found)


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


def _fit_estimator(estimator, X, y, *, epsilon, delta, random_state):
    """(FitResult, nan, training accuracy, ms) of ``estimator`` (for the demo table)."""
    t0 = time.perf_counter()
    estimator.set_params(random_state=random_state).fit(X, y)
    ms = 1e3 * (time.perf_counter() - t0)
    return estimator.fit_result_, float("nan"), estimator.score(X, y), ms


def _fit_solver(problem, name, opts, X, y, f_star, *, epsilon, delta, random_state):
    """(FitResult, relative error, training accuracy, ms) of one explicit solver run."""
    import numpy as np

    import dpopt

    t0 = time.perf_counter()
    res = dpopt.solve(problem, name, epsilon=epsilon, delta=delta, random_state=random_state,
                      **opts)
    ms = 1e3 * (time.perf_counter() - t0)
    acc = float(np.mean(np.sign(X @ res.coef + res.intercept) == y))
    return res, (problem.objective(res.w) - f_star) / f_star, acc, ms


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
    for name, description, _ in solver_catalog():
        print(f"{name:<16} {description}")
    return 0


def cmd_reproduce(args):
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


def _dask_context(args):
    """With ``--backend dask``: one Dask client (``--scheduler`` or a LocalCluster) for
    the whole experiment; the experiment's ``run_grid`` calls use it."""
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


def _non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


# (loss, penalty) -> estimator class name; None: the estimator's default penalty
_ESTIMATORS = {
    ("logistic", None): "DPLogisticRegression", ("logistic", "l2"): "DPLogisticRegression",
    ("logistic", "l1"): "DPLogisticRegression", ("logistic", "elastic_net"): "DPLogisticRegression",
    ("logistic", "none"): "DPLogisticRegression",
    ("squared", None): "DPLinearRegression", ("squared", "none"): "DPLinearRegression",
    ("squared", "l2"): "DPLinearRegression", ("squared", "l1"): "DPLasso",
    ("squared", "elastic_net"): "DPElasticNet",
    ("huber", None): "DPHuberRegressor", ("huber", "l2"): "DPHuberRegressor",
}


def cmd_fit(args):
    """Fit a private linear model on a data file; print a report, write model JSON.

    The fit goes through the scikit-learn estimator of ``--loss`` / ``--penalty``
    (``_ESTIMATORS``) with its default settings; only the options given on the command line
    are passed (``--solver``, ``--option``, ``--alpha``, ...). Combinations without an
    estimator (the absolute loss, Huber with l1 / elastic net) take the same default path
    (:func:`dpopt.pipeline.default_path.fit_default`), or :func:`dpopt.solve` with ``--solver``.
    """
    options = dict(args.option or [])
    _check_fit_arguments(args, options)
    data = _read_fit_data(args)
    X, y = data["X"], data["y"]
    classes = None
    if args.loss == "logistic":
        y, classes = _signed_labels(y, args.positive_label)
    elif y.dtype.kind != "f":
        raise ValueError(f"DATA: the {args.loss} loss needs a numeric target; column "
                         f"{data['target']!r} has values like {y[0]!r}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if data["dropped_rows"]:
            import dpopt

            warnings.warn(f"--missing drop removed {len(data['dropped_rows'])} row(s) with a "
                          f"missing value: the number of records depends on the private data, "
                          f"which the guarantee does not cover", dpopt.PrivacyLeakWarning,
                          stacklevel=1)
        fitted = _fit(args, options, X, y)
    _report(args, data, fitted, classes, caught)
    return 0


def _check_fit_arguments(args, options):
    """Everything that can be checked before reading the data or fitting."""
    if args.target is not None and Path(args.data).suffix.lower() != ".csv":
        raise ValueError(f"--target applies to CSV files only, got {args.data!r}")
    if args.missing != "error" and Path(args.data).suffix.lower() != ".csv":
        raise ValueError(f"--missing applies to CSV files only, got {args.data!r}")
    if options and args.solver is None:
        raise ValueError("--option needs --solver: the default (the estimators' solver='auto') "
                         "sets every knob itself")
    if options and args.solver is not None:
        import dpopt

        dpopt.get_solver(args.solver).check_options(options, what="--option")
    if (args.loss, args.penalty) == ("squared", "l2") and not args.alpha:
        raise ValueError("--alpha: --penalty l2 with the squared loss needs --alpha > 0")
    if args.out is not None:
        _check_output_path(args.out)


def _check_output_path(path):
    """--out must be a writable file in an existing directory (checked before the fit)."""
    out = Path(path)
    parent = out.parent if str(out.parent) else Path(".")
    if out.is_dir():
        raise ValueError(f"--out: {path!r} is a directory; give a file name (MODEL.json)")
    if not parent.is_dir():
        raise ValueError(f"--out: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise ValueError(f"--out: {path!r} is not writable")


def _read_fit_data(args):
    """X, y and a description of the columns, from a CSV table or a numeric file."""
    suffix = Path(args.data).suffix.lower()
    if suffix == ".csv":
        from dpopt.cli.tables import read_csv_table

        try:
            table = read_csv_table(args.data, target=-1 if args.target is None else args.target,
                                   missing=args.missing)
        except ValueError as exc:
            raise ValueError(f"DATA: {exc}") from None
        return {"X": table.X, "y": table.y, "feature_names": table.feature_names,
                "target": table.target_name, "categories": table.categories,
                "dropped_rows": table.dropped_rows, "filled": table.filled}
    from dpopt.api import modelio

    try:
        X, y, names = modelio.read_data(args.data)
    except ValueError as exc:
        raise ValueError(f"DATA: {exc}") from None
    return {"X": X, "y": y, "feature_names": names, "target": None, "categories": {},
            "dropped_rows": [], "filled": 0}


def _fit(args, options, X, y):
    """(FitResult, loss, penalty, fit_intercept, how) of the estimator (or solve) fit."""
    import numpy as np

    import dpopt

    kind = _ESTIMATORS.get((args.loss, args.penalty))
    if kind is None:
        return _fit_with_solve(args, options, X, y)
    params = {"epsilon": args.epsilon, "random_state": args.seed,
              "fit_intercept": not args.no_intercept}
    given = {"delta": args.delta, "alpha": args.alpha, "l1_ratio": args.l1_ratio,
             "threshold": args.huber_threshold, "solver": args.solver,
             "solver_options": options or None}
    if kind == "DPLogisticRegression" and args.penalty is not None:
        given["penalty"] = args.penalty
    if kind == "DPLinearRegression" and args.penalty == "none":
        given["alpha"] = 0.0
    estimator = getattr(dpopt, kind)()
    accepted = estimator.get_params()
    params.update({k: v for k, v in given.items() if v is not None and k in accepted})
    estimator.set_params(**params)
    with _naming_the_option(options):
        estimator.fit(X, y)
    loss = estimator._loss()
    penalty, penalty_kwargs = estimator._penalty()
    auto = getattr(estimator, "auto_", None)
    model = (estimator.coef_.ravel(), float(np.ravel(estimator.intercept_)[0]),
             auto.scaling.to_dict() if auto is not None else None)
    return {"result": estimator.fit_result_, "loss": loss, "penalty": (penalty, penalty_kwargs),
            "model": model, "report": estimator.privacy_report(),
            "prepare": auto.scaling.prepare if auto is not None else None,
            "fit_intercept": estimator.fit_intercept, "solver": estimator.solver,
            "how": f"{kind}({_format_params(estimator.get_params(), params)})",
            "options": options}


@contextlib.contextmanager
def _naming_the_option(options):
    """A ValueError about one of the ``--option`` values a solver checks itself (those
    whose validity depends on another, e.g. clip with epsilon) names ``--option KEY``."""
    try:
        yield
    except ValueError as exc:
        named = [k for k in options if str(exc).startswith(k)]
        raise ValueError(f"--option {named[0]}: {exc}" if named else str(exc)) from None


def _format_params(all_params, given):
    shown = {k: v for k, v in all_params.items()
             if k in given or k in ("alpha", "penalty", "l1_ratio", "threshold", "solver")}
    return ", ".join(f"{k}={v!r}" for k, v in sorted(shown.items()) if k != "random_state")


def _fit_with_solve(args, options, X, y):
    import dpopt

    loss = dpopt.data.losses.huber(args.huber_threshold or 1.35) if args.loss == "huber" \
        else args.loss
    penalty = args.penalty or "none"
    kwargs = {}
    if penalty in ("l1", "l2", "elastic_net"):
        kwargs["alpha"] = args.alpha if args.alpha is not None else 0.0
    if penalty == "elastic_net":
        kwargs["l1_ratio"] = 0.5 if args.l1_ratio is None else args.l1_ratio
    if args.solver is None:
        return _fit_default(args, X, y, loss, penalty, kwargs)
    problem = dpopt.Problem(X, y, loss=loss, penalty=penalty, fit_intercept=not args.no_intercept,
                            **kwargs)
    solver = args.solver
    with _naming_the_option(options):
        result = dpopt.solve(problem, solver, epsilon=args.epsilon, delta=args.delta,
                             random_state=args.seed, **options)
    return {"result": result, "loss": loss, "penalty": (penalty, kwargs),
            "fit_intercept": problem.fit_intercept, "solver": solver,
            "how": f"dpopt.solve(solver={solver!r}) (no estimator for loss={args.loss}, "
                   f"penalty={penalty})", "options": options}


def _fit_default(args, X, y, loss, penalty, kwargs):
    """The estimators' default path (:func:`dpopt.pipeline.default_path.fit_default`) for a loss and penalty
    without an estimator: private scaling, then the mechanism of ``auto.choose_solver``."""
    import math

    from dpopt._core.validation import check_random_state, default_delta
    from dpopt.pipeline.default_path import fit_default

    if math.isinf(args.epsilon):
        raise ValueError("--epsilon inf: the default path's scaling is private; pass --solver "
                         "for a non-private fit")
    delta = default_delta(X.shape[0]) if args.delta is None else args.delta
    auto = fit_default(X, y, loss=loss, penalty=penalty, penalty_kwargs=kwargs,
                       fit_intercept=not args.no_intercept, epsilon=args.epsilon, delta=delta,
                       rng=check_random_state(args.seed), regression=True)
    coef, intercept = auto.raw_model()
    return {"result": auto.result, "loss": loss, "penalty": (penalty, kwargs),
            "model": (coef, float(intercept), auto.scaling.to_dict()),
            "prepare": auto.scaling.prepare, "report":
            auto.report("default path"), "fit_intercept": not args.no_intercept,
            "solver": "auto", "options": {},
            "how": f"dpopt.pipeline.default_path.fit_default (no estimator for loss={args.loss}, penalty={penalty})"}


def _report(args, data, fitted, classes, caught):
    import types

    import numpy as np

    import dpopt
    from dpopt.api import modelio
    from dpopt.data.losses import get_loss
    from dpopt.data.penalties import get_penalty

    result = fitted["result"]
    leaks = [str(w.message) for w in caught if issubclass(w.category, dpopt.PrivacyLeakWarning)]
    others = [w for w in caught if not issubclass(w.category, dpopt.PrivacyLeakWarning)]
    n, p = data["X"].shape
    name, penalty_kwargs = fitted["penalty"]
    info = types.SimpleNamespace(loss=get_loss(fitted["loss"]),
                                 penalty=get_penalty(name, **penalty_kwargs),
                                 fit_intercept=fitted["fit_intercept"])
    model = modelio.model_dict(info, result, solver=result.solver, options=fitted["options"],
                               seed=args.seed, classes=classes, model=fitted.get("model"),
                               data={"path": str(args.data), "n_samples": n, "n_features": p,
                                     "feature_names": data["feature_names"],
                                     "target": data["target"],
                                     "categories": data["categories"],
                                     "missing": args.missing,
                                     "dropped_rows": len(data["dropped_rows"])})
    if args.out:
        modelio.save_model(args.out, model)
    coef = model["coef"]
    nnz = int(np.count_nonzero(coef))
    print(f"dpopt fit: {args.data} (n={n}, p={p}), loss={info.loss.name}, "
          f"penalty={info.penalty.name}"
          + (f"(alpha={info.penalty.alpha:g})" if info.penalty.name != "none" else ""))
    print(f"fit: {fitted['how']}")
    if data["categories"]:
        print("categorical columns, one-hot encoded; their categories were read from the file "
              "and are treated as PUBLIC schema (not covered by the privacy guarantee):")
        for column, cats in data["categories"].items():
            print(f"  {column}: {', '.join(cats)}")
    if classes is not None:
        print(f"labels (public schema): {classes[0]!r} -> -1, {classes[1]!r} -> +1")
    if data["filled"]:
        print(f"missing values: {data['filled']} feature value(s) filled with 0 / no category "
              f"(--missing zero)")
    if data["dropped_rows"]:
        shown = ", ".join(str(r) for r in data["dropped_rows"][:10])
        print(f"missing values: dropped {len(data['dropped_rows'])} row(s) (--missing drop; rows "
              f"numbered from 1 after the header): {shown}"
              + (" ..." if len(data["dropped_rows"]) > 10 else ""))
    print(f"privacy: {fitted.get('report') or result.privacy_report()}")
    print(f"model: {nnz}/{p} non-zero coefficients, intercept {model['intercept']:.4g}; "
          f"{result.n_iter} updates, {result.passes:g} passes, {result.time:.2f} s")
    for w in others:
        print(f"warning: {w.message}")
    for msg in leaks:
        print(f"PrivacyLeakWarning: {msg}")
    if args.train_metrics:
        # the released model in raw units, on the features as predict sees them (the default
        # path's feature map clips them to the private bounds)
        prepare = fitted.get("prepare") or (lambda X: X)
        problem = dpopt.Problem(prepare(data["X"]), _train_target(data, classes, args),
                                loss=info.loss, penalty=info.penalty,
                                fit_intercept=info.fit_intercept)
        w = np.append(coef, model["intercept"]) if info.fit_intercept else np.asarray(coef)
        print(f"training objective F(w) = {problem.objective(w):.6g} "
              f"(computed on the private data: NOT private)")
    if args.out:
        print(f"model written to {args.out}")


def _train_target(data, classes, args):
    import numpy as np

    if classes is None:
        return data["y"]
    pos = classes[1]
    y = data["y"]
    return np.where(y == (pos if y.dtype.kind != "f" else float(pos)), 1.0, -1.0)


def _signed_labels(y, positive):
    """(+1/-1 labels, [negative, positive]) for the logistic loss; string or numeric labels."""
    import numpy as np

    classes = np.unique(y)
    if classes.size != 2:
        raise ValueError(f"DATA: the logistic loss needs exactly 2 label values, got "
                         f"{classes.size}: {classes[:5].tolist()}")
    numeric = y.dtype.kind == "f"
    if positive is None:
        pos = classes[1]
    else:
        try:
            pos = float(positive) if numeric else str(positive).strip()
        except ValueError:
            raise ValueError(f"--positive-label: the labels are numbers, got {positive!r}") from None
        if pos not in classes:
            raise ValueError(f"--positive-label {positive} is not one of the labels "
                             f"{classes.tolist()}")
    neg = classes[0] if classes[1] == pos else classes[1]
    convert = float if numeric else str
    return np.where(y == pos, 1.0, -1.0), [convert(neg), convert(pos)]


# -- plot ------------------------------------------------------------------------

def cmd_plot(args):
    """Render the figures of a results JSONL to PNG and SVG."""
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
    from dpopt.api import audit

    print(f"dpopt audit {args.solver}: {args.runs} runs on each of two neighbouring canary "
          f"datasets, target epsilon={args.epsilon:g}, delta={args.delta:g}, seed {args.seed}")
    res = audit.audit(args.solver, epsilon=args.epsilon, delta=args.delta, n_runs=args.runs,
                      canary=audit.AUDIT_CANARY.get(args.solver), random_state=args.seed)
    print(res.summary())
    return 0 if res.consistent else 1


# -- parser --------------------------------------------------------------------

def build_parser():
    from dpopt import __version__
    from dpopt._core.validation import MAX_EPSILON, MIN_DELTA, MIN_EPSILON

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
                            "model as JSON (--out, checked before the fit). CSV tables may have "
                            "string and categorical columns (one-hot encoded; categories are "
                            "public schema) and a string target; see docs/usage.md.")
    p.add_argument("data", metavar="DATA", help="data file: .csv, .npz, or LIBSVM "
                   "(.svm, .libsvm, .svmlight, .txt)")
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
                   help=f"target delta {delta_range} (default: 1/n^2)")
    p.add_argument("--option", type=_option, action="append", metavar="KEY=VALUE",
                   help="solver option, repeatable (e.g. --option passes=20 --option clip=0.5; "
                        "default: the solver's defaults)")
    p.add_argument("--target", default=None,
                   help="CSV only: label column, its name or number counted from 1 (default: "
                        "the last column)")
    p.add_argument("--positive-label", default=None,
                   help="logistic: the label mapped to +1, a string or a number (default: the "
                        "larger label)")
    p.add_argument("--missing", choices=["error", "zero", "drop"], default="error",
                   help="CSV only, missing values (empty, NA, NaN, ?): error (report where), "
                        "zero (features filled with 0 / no category), drop (drop those rows; "
                        "not covered by the guarantee: PrivacyLeakWarning)")
    p.add_argument("--no-intercept", action="store_true",
                   help="do not fit an intercept (default: fit one)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: fresh entropy)")
    p.add_argument("--out", metavar="MODEL.json", default=None,
                   help="write the model here (default: not written)")
    p.add_argument("--train-metrics", action="store_true",
                   help="also print the training objective (NOT private; default: not printed)")
    p.set_defaults(func=cmd_fit)

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
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"dpopt {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
