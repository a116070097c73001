"""``dpopt fit``: read a table (pandas: CSV, TSV, Parquet) or a numeric file, fit through the
estimators (:mod:`dpopt.api`) or :func:`dpopt.solve`, print the privacy report before saving,
write the model file atomically (``dpopt predict`` scores with it: :mod:`dpopt.cli.predict`).
Heavy modules are imported when a command runs, so ``dpopt --help`` stays light."""

from __future__ import annotations

import contextlib
import math
import warnings

import dpopt
from dpopt._core.validation import check_random_state, default_delta
from dpopt.cli._args import check_output_path, flag_words
from dpopt.cli.report import report


def _dask_context(args):
    """With ``--backend dask``: one Dask client (``--scheduler`` or a LocalCluster) for
    the whole experiment; the experiment's ``run_grid`` calls use it."""
    if args.backend != "dask":
        return contextlib.nullcontext()
    # lazy: the light CLI commands load no heavy module
    from dpopt.experiments.runner import dask_cluster

    return dask_cluster(args.scheduler, n_workers=max(1, args.n_jobs))


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
    categories = _categories(args, X) if data["frame"] else None
    if args.solver is not None and data["frame"]:
        _check_public_schema(X, categories)
    classes = None
    if args.loss == "logistic" and _numeric_target(y):
        # lazy: the light CLI commands load no heavy module
        from sklearn.utils.multiclass import type_of_target

        if type_of_target(y).startswith("continuous"):
            raise ValueError(f"DATA: the logistic loss needs class labels; the target "
                             f"{data['target'] or '(y)'} has continuous values")
    if args.loss != "logistic" and not _numeric_target(y):
        raise ValueError(f"DATA: the {args.loss} loss needs a numeric target; column "
                         f"{data['target']!r} holds values that are not numbers; use "
                         f"--loss logistic for a label column")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if data["dropped_rows"]:
            warnings.warn(f"--missing drop removed {len(data['dropped_rows'])} row(s) with a "
                          f"missing value: the number of records depends on the private data, "
                          f"which the guarantee does not cover", dpopt.PrivacyLeakWarning,
                          stacklevel=1)
        bounds = _feature_bounds(args, None if data["frame"] else data["feature_names"],
                                 list(getattr(X, "columns", range(X.shape[1]))),
                                 data["target"])
        with _naming_the_flags():
            fitted = _fit(args, options, X, y, bounds, categories)
    if fitted.get("classes") is not None:
        classes = fitted["classes"]
    report(args, data, fitted, classes, caught)
    return 0


def _check_public_schema(X, categories=None):
    """An explicit ``--solver`` takes the table's public schema only (numbers, True/False,
    ``--categories``): an undeclared text column's levels would be read from the records,
    so it is refused before anything is spent."""
    # lazy: the light CLI commands load no heavy module
    from dpopt.preprocessing._plan import plan_table

    text = [c.name for c in plan_table(X, categories) if c.kind == "string"]
    if text:
        raise ValueError(f"--solver: column(s) {text} hold text, whose levels only the default "
                         f"path chooses (privately); declare them (--categories "
                         f"{text[0]}=A,B,...), leave out --solver, or give the file without "
                         f"them")


def _numeric_target(y):
    # lazy: the light CLI commands load no heavy module
    import numpy as np

    return np.asarray(y).dtype.kind in "fiu"


def _check_fit_arguments(args, options):
    """Everything that can be checked before reading the data or fitting."""
    # lazy: the light CLI commands load no heavy module
    from dpopt.cli.tables import check_header_option, is_table_path

    if args.target is not None and not is_table_path(args.data):
        raise ValueError(f"--target applies to tables (CSV, Parquet) only, got {args.data!r}")
    if args.missing != "auto" and not is_table_path(args.data):
        raise ValueError(f"--missing applies to tables (CSV, Parquet) only, got {args.data!r}")
    if (args.text or args.numbers or args.categories) and not is_table_path(args.data):
        raise ValueError(f"--text, --numbers and --categories apply to tables (CSV, Parquet) "
                         f"only, got {args.data!r}")
    check_header_option(args.no_header, args.data)
    if getattr(args, "feature_bounds", None) and args.solver is not None:
        raise ValueError("--feature-bounds applies to the default path (no --solver): an "
                         "explicit solver takes its own clipping options (--option)")
    _feature_bounds(args)  # a column given twice, before the data are read
    _categories(args)
    if getattr(args, "target_bounds", None) is not None:
        if args.solver is not None:
            raise ValueError("--target-bounds applies to the default path (no --solver): an "
                             "explicit solver takes its own clipping options (--option)")
        if args.loss == "logistic":
            raise ValueError("--target-bounds applies to a regression target (a numeric "
                             "loss), not to --loss logistic")
    for given, name in ((args.classes, "--classes"), (args.positive_label, "--positive-label")):
        if given is not None and args.loss != "logistic":  # they were ignored
            raise ValueError(f"{name} applies to --loss logistic (class labels), not to "
                             f"--loss {args.loss}")
    if getattr(args, "inference", False) and (
            args.loss not in ("squared", "logistic") or args.solver is not None
            or args.penalty not in (None, "none", "l2")):
        raise ValueError("--inference needs the default path (no --solver) with --loss squared "
                         "or logistic and --penalty none or l2: the intervals come from its "
                         "releases (docs/inference.md)")
    if getattr(args, "inference", False) and args.classes and len(args.classes.split(",")) > 2:
        raise ValueError("--inference gives intervals for two classes (a binary model); "
                         "--classes declares more")
    if options and args.solver is None:
        raise ValueError("--option needs --solver: the default (the estimators' solver='auto') "
                         "sets every knob itself")
    if args.solver is None and args.epsilon == float("inf"):  # before the data are read
        raise ValueError("--epsilon inf: the default path's scaling is private; pass --solver "
                         "for a non-private fit")
    if options and args.solver is not None:
        dpopt.get_solver(args.solver).check_options(options, what="--option")
    if (args.loss, args.penalty) == ("squared", "l2") and not args.alpha:
        raise ValueError("--alpha: --penalty l2 with the squared loss needs --alpha > 0")
    if args.out is not None:
        check_output_path(args.out, [("DATA", args.data)])


def _feature_bounds(args, names=None, columns=None, target=None):
    """``--feature-bounds``: {column: (lo, hi)} for the estimator's ``feature_bounds=``.
    With ``names`` (the feature names of a numeric file, whose estimator takes column
    indices), each name becomes its index; a name that is not a column is refused. With a
    table's ``columns``, a name is the column it spells (an npz file's are numbered);
    ``target``: the target column's name as read (``--target``, or the last column)."""
    given = getattr(args, "feature_bounds", None) or []
    out = {}
    for name, pair in given:
        if name in out:
            raise ValueError(f"--feature-bounds: column {name!r} is given twice")
        out[name] = pair
    target = getattr(args, "target", None) if target is None else target
    if target is not None and str(target) in out:
        raise ValueError(f"--feature-bounds: {str(target)!r} is the target; --target-bounds "
                         f"LO:HI gives its public range")
    if columns is not None:
        spelled = {str(c): c for c in columns}
        out = {spelled.get(k, k): v for k, v in out.items()}
    if names is None or not out:
        return out or None
    text = [str(n) for n in names]  # an npz file's columns are numbered 0, 1, ...
    unknown = [k for k in out if str(k) not in text]
    if unknown:
        raise ValueError(f"--feature-bounds: {unknown} are not columns of DATA; columns: "
                         f"{list(names)}")
    return {text.index(str(k)): v for k, v in out.items()}


def _categories(args, X=None):
    """``--categories``: {column: levels} for the estimator's ``categories=``, each level in
    its column's kind once the table ``X`` is read (numbers for a column of numbers, as
    ``categories=`` takes them); a column given twice, not a feature of DATA, or a True/False
    one (its levels are known) is refused before anything is spent."""
    out = {}
    for name, levels in getattr(args, "categories", None) or []:
        if name in out:
            raise ValueError(f"--categories: column {name!r} is given twice")
        out[name] = levels
    if X is None or not out:
        return out or None
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    unknown = [k for k in out if k not in X.columns]
    if unknown:
        raise ValueError(f"--categories: {unknown} are not feature columns of DATA; columns: "
                         f"{list(X.columns)}")
    for name, levels in out.items():
        dtype = X[name].dtype
        if pd.api.types.is_bool_dtype(dtype):
            raise ValueError(f"--categories: column {name!r} holds True/False, whose levels "
                             f"are public already; leave it out")
        if pd.api.types.is_numeric_dtype(dtype) and not isinstance(dtype, pd.CategoricalDtype):
            try:
                out[name] = [float(v) for v in levels]
            except ValueError:
                raise ValueError(f"--categories: column {name!r} holds numbers; its levels "
                                 f"must be numbers, got {levels}") from None
    return out


def _read_fit_data(args):
    """X, y and a description of the columns, from a table (CSV, Parquet: a DataFrame for
    the table layer :mod:`dpopt.preprocessing.tables`) or a numeric file (npz, LIBSVM)."""
    # lazy: the light CLI commands load no heavy module
    from dpopt.cli.tables import is_table_path

    if is_table_path(args.data):
        # lazy: the light CLI commands load no heavy module
        from dpopt.cli.tables import Reading, read_table

        reading = Reading(header=not args.no_header, text=tuple(args.text),
                          numbers=tuple(args.numbers))
        try:
            X, y, name, empty = read_table(args.data, reading,
                                    target=-1 if args.target is None else args.target)
        except ValueError as exc:
            raise ValueError(f"DATA: {exc}") from None
        X, y, dropped = _missing_rows(X, y, name, args.missing)
        # lazy: the light CLI commands load no heavy module
        from dpopt.cli.labels import compact_labels

        return {"X": X, "y": compact_labels(y), "feature_names": list(X.columns), "target": name,
                "dropped_rows": dropped, "frame": True, "empty_columns": empty,
                **reading.to_model()}
    # lazy: the light CLI commands load no heavy module
    from dpopt.api import modelio
    from dpopt.cli.tables import check_numeric_file

    check_numeric_file(args.data)
    try:
        X, y, names = modelio.read_data(args.data)
    except ValueError as exc:
        raise ValueError(f"DATA: {exc}") from None
    return {"X": X, "y": y, "feature_names": names, "target": None, "dropped_rows": [],
            "frame": False}


def _missing_rows(X, y, name, mode):
    """--missing: ``auto`` keeps every row (the table layer's private rule for features; a
    missing target is an error), ``error`` refuses any missing value (naming the columns),
    ``drop`` drops rows with one (reported; not covered by the guarantee)."""
    # lazy: the light CLI commands load no heavy module
    import numpy as np

    gone_y = y.isna().to_numpy()
    gone = X.isna().any(axis=1).to_numpy() | gone_y
    if mode == "drop":
        dropped = (np.flatnonzero(gone) + 1).tolist()
        if gone.all():
            raise ValueError("DATA: every row has a missing value (--missing drop left no rows)")
        return X[~gone], y[~gone], dropped
    if mode == "error" and gone.any():
        cols = [c for c in X.columns if X[c].isna().any()] + ([name] if gone_y.any() else [])
        raise ValueError(f"DATA: {int(gone.sum())} row(s) have missing values, in columns "
                         f"{cols}; use --missing auto (private missing-value rule) or --missing "
                         f"drop (not covered by the privacy guarantee)")
    if gone_y.any():
        raise ValueError(f"DATA: the target column {name!r} has {int(gone_y.sum())} missing "
                         f"value(s): a target cannot be imputed; drop those rows first or use "
                         f"--missing drop (not covered by the privacy guarantee)")
    return X, y, []


def _fit(args, options, X, y, bounds=None, categories=None):
    """(FitResult, loss, penalty, fit_intercept, how) of the estimator (or solve) fit."""
    # lazy: the light CLI commands load no heavy module
    import numpy as np

    kind = _ESTIMATORS.get((args.loss, args.penalty))
    if kind is None:
        return _fit_with_solve(args, options, X, y, bounds, categories)
    params = {"epsilon": args.epsilon, "random_state": args.seed,
              "fit_intercept": not args.no_intercept}
    if getattr(args, "inference", False):
        params["inference"] = True
    given = {"delta": args.delta, "alpha": args.alpha, "l1_ratio": args.l1_ratio,
             "threshold": args.huber_threshold, "solver": args.solver,
             "solver_options": options or None, "feature_bounds": bounds,
             "categories": categories,
             "target_bounds": getattr(args, "target_bounds", None)}
    if kind == "DPLogisticRegression" and args.penalty is not None:
        given["penalty"] = args.penalty
    # lazy: the light CLI commands load no heavy module
    from dpopt.cli.labels import declared_classes, positive_label, whole_labels

    positive = (positive_label(args.positive_label, y)  # in the column's kind, as --classes
                if kind == "DPLogisticRegression" and args.positive_label is not None else None)
    if kind == "DPLogisticRegression" and args.classes is not None:
        given["classes"] = declared_classes(args.classes, y)
        if positive is not None and len(given["classes"]) == 2 and \
                _label_named(given["classes"], positive) is None:
            typed = [t.strip() for t in args.classes.split(",")]
            raise ValueError(f"--positive-label {args.positive_label} is not one of the labels "
                             f"--classes declares, {typed}")
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
    if penalty_kwargs.get("alpha") == "auto":  # the strength the fit resolved it to
        penalty_kwargs = {**penalty_kwargs, "alpha": estimator.alpha_}
    auto = getattr(estimator, "auto_", None)
    coef, intercept = estimator.coef_.ravel(), float(np.ravel(estimator.intercept_)[0])
    classes, positive_note = None, None
    if kind == "DPLogisticRegression" and hasattr(estimator, "classes_"):
        classes = whole_labels(estimator.classes_)
        if len(classes) > 2:  # one-vs-rest: a (k, p) matrix, one row per class
            coef, intercept = np.asarray(estimator.coef_), np.ravel(estimator.intercept_)
        else:
            coef, intercept, classes, positive_note = _positive_first(
                coef, intercept, classes, positive, args.positive_label)
    summary, no_intervals = None, None
    if params.get("inference"):
        try:  # the fit is paid for: without intervals its model and report are still given
            summary = estimator.summary()
        except dpopt.NoIntervalsError as exc:
            no_intervals = str(exc)
    if summary is not None and classes is not None and list(classes) != list(estimator.classes_):
        # lazy: the light CLI commands load no heavy module
        from dpopt.pipeline.inference import negated

        summary = negated(summary)  # --positive-label made the other class +1
    table = getattr(estimator, "table_", None)
    model = (coef, intercept, auto.scaling.to_dict() if auto is not None else None)
    return {"result": estimator.fit_result_, "loss": loss, "penalty": (penalty, penalty_kwargs),
            "model": model, "report": estimator.privacy_report(), "classes": classes,
            "positive_note": positive_note, "summary": summary, "no_intervals": no_intervals,
            "labels": _labels_how(args, estimator, y) if classes is not None else None,
            "target_range": getattr(estimator, "target_range_", None),
            "table": table.schema if table is not None else None,
            "prepare": _prepare_of(auto, table),
            "fit_intercept": estimator.fit_intercept, "solver": estimator.solver,
            "how": f"{kind}({_format_params(estimator.get_params(), params)})",
            "options": options}


def _prepare_of(auto, table):
    """The map from the data as read to the features ``coef_`` applies to."""
    steps = [f for f in ((table.transform if table is not None else None),
                         (auto.scaling.prepare if auto is not None else None)) if f is not None]

    def prepare(X):
        for f in steps:
            X = f(X)
        return X
    return prepare


def _positive_first(coef, intercept, classes, positive, typed):
    """``--positive-label`` (``typed``, read in the target column's kind as ``positive``):
    the model with that label mapped to +1 (negating the margin is post-processing), and a
    note when it cannot be: the label is not among the classes the fit released (chosen
    privately, the outcome is known only after the budget is spent, so the model and its
    report are still written). Returns (coef, intercept, classes, note or None)."""
    if positive is None:
        return coef, intercept, classes, None
    label = _label_named(classes, positive)
    if label is None:
        return coef, intercept, classes, (
            f"--positive-label {typed} is not one of the labels the fit released "
            f"{[str(c) for c in classes]}: the model keeps {str(classes[-1])!r} as "
            f"{'+1' if len(classes) > 1 else 'its only label'}")
    if len(classes) < 2 or label == classes[1]:
        return coef, intercept, classes, None
    return -coef, -intercept, classes[::-1], None


def _label_named(classes, label):
    """The class equal to ``label`` (read in the target column's kind: True is a True/False
    column's label, never the text "True"), or None."""
    return next((c for c in classes if c == label), None)


def _labels_how(args, estimator, y):
    """How the fit treated the labels, as its releases say: chosen privately when the
    default path released a label selection, declared when --classes gave them or the
    column's kind does (a True/False column's labels are False, True: nothing is chosen),
    else read from the data by an explicit solver (not private)."""
    # lazy: the light CLI commands load no heavy module
    from dpopt.preprocessing.labels import LABELS_SELECTED
    from dpopt.preprocessing.labels import declared_classes as kind_declares

    plan = getattr(getattr(estimator, "auto_", None), "plan", None) or {}
    if (plan.get("table") or {}).get("labels") == LABELS_SELECTED:
        return "chosen privately"
    if args.classes is not None:
        return "declared (public)"
    if kind_declares(y) is not None:
        return "declared by the True/False column, public"
    return "chosen privately" if plan else "read from the data by the solver: NOT private"


@contextlib.contextmanager
def _naming_the_option(options):
    """A ValueError about one of the ``--option`` values a solver checks itself (those
    whose validity depends on another, e.g. clip with epsilon) names ``--option KEY``."""
    try:
        yield
    except ValueError as exc:
        named = [k for k in options if str(exc).startswith(k)]
        if not named or len(exc.args) != 1:
            raise
        exc.args = (f"--option {named[0]}: {exc}",)  # the same error, its type and records
        raise


@contextlib.contextmanager
def _naming_the_flags():
    """A fit's ValueError that recommends an estimator argument names its flag instead."""
    try:
        yield
    except ValueError as exc:
        text = flag_words(str(exc))
        if len(exc.args) != 1 or text == str(exc):
            raise
        exc.args = (text,)  # the same error: a ChargedFitError keeps its records
        raise


def _format_params(all_params, given):
    shown = {k: v for k, v in all_params.items()
             if k in given or k in ("alpha", "penalty", "l1_ratio", "threshold", "solver")}
    if "l1_ratio" in shown and all_params.get("penalty", "elastic_net") != "elastic_net":
        del shown["l1_ratio"]  # meaningless for an l1 / l2 / no penalty
    return ", ".join(f"{k}={v!r}" for k, v in sorted(shown.items()) if k != "random_state")


def _fit_with_solve(args, options, X, y, bounds=None, categories=None):
    loss = dpopt.data.losses.huber(args.huber_threshold or 1.35) if args.loss == "huber" \
        else args.loss
    penalty = args.penalty or "none"
    kwargs = {}
    if penalty in ("l1", "l2", "elastic_net"):
        kwargs["alpha"] = args.alpha if args.alpha is not None else 0.0
    if penalty == "elastic_net":
        kwargs["l1_ratio"] = 0.5 if args.l1_ratio is None else args.l1_ratio
    if args.solver is None:
        return _fit_default(args, X, y, loss, penalty, kwargs, bounds, categories)
    # lazy: the light CLI commands load no heavy module
    from dpopt.preprocessing.tables import is_frame

    table = None
    if is_frame(X):
        # lazy: the light CLI commands load no heavy module
        from dpopt.preprocessing.table_encoder import public_table

        table, X = public_table(X, categories)
    problem = dpopt.Problem(X, y, loss=loss, penalty=penalty, fit_intercept=not args.no_intercept,
                            **kwargs)
    solver = args.solver
    with _naming_the_option(options):
        result = dpopt.solve(problem, solver, epsilon=args.epsilon, delta=args.delta,
                             random_state=args.seed, **options)
    return {"result": result, "loss": loss, "penalty": (penalty, kwargs), "table": table,
            "prepare": table.transform if table is not None else None,
            "fit_intercept": problem.fit_intercept, "solver": solver,
            "how": f"dpopt.solve(solver={solver!r}) (no estimator for loss={args.loss}, "
                   f"penalty={penalty})", "options": options}


def _fit_default(args, X, y, loss, penalty, kwargs, bounds=None, categories=None):
    """The estimators' default path (:func:`dpopt.pipeline.default_path.fit_default`) for a loss and penalty
    without an estimator: private scaling, then the mechanism of ``auto.choose_solver``."""

    # lazy: the light CLI commands load no heavy module
    from dpopt.pipeline.default_path import fit_default

    if math.isinf(args.epsilon):
        raise ValueError("--epsilon inf: the default path's scaling is private; pass --solver "
                         "for a non-private fit")
    # lazy: the light CLI commands load no heavy module
    from dpopt._core.input import numeric_target
    from dpopt._core.validation import check_fit_delta, check_target_range
    from dpopt.data.penalties import check_penalty
    from dpopt.pipeline.default_path import NoModelShare
    from dpopt.pipeline.releasable import check_releasable
    from dpopt.preprocessing.table_encoder import prepare_default

    y = numeric_target(y, f"--loss {args.loss}")  # before the table's selection
    # what the estimators check before any release (an independent review: this path
    # checked them after the table layer's, charged)
    check_penalty(penalty, kwargs)
    if getattr(args, "target_bounds", None) is not None:
        check_target_range(args.target_bounds, "--target-bounds")
    check_fit_delta(args.delta, "--delta")
    delta = default_delta(X.shape[0]) if args.delta is None else args.delta
    check_releasable(X.shape[0], y, args.epsilon, delta, classifier=False,
                     fit_intercept=not args.no_intercept,
                     target_bounds=getattr(args, "target_bounds", None))
    rng = check_random_state(args.seed)
    X, y, _, encoder, bounds, prior = prepare_default(  # --feature-bounds checked, resolved
        X, y, epsilon=args.epsilon, delta=delta, categories=categories,
        feature_bounds=bounds, classes=None, classifier=False, rng=rng)
    options = dict(loss=loss, penalty=penalty, penalty_kwargs=kwargs,
                   fit_intercept=not args.no_intercept, epsilon=args.epsilon, delta=delta,
                   rng=rng, regression=True, feature_bounds=bounds, prior=prior,
                   target_bounds=getattr(args, "target_bounds", None))
    try:
        auto = fit_default(X, y, **options)
    except NoModelShare as reason:  # after the table's releases: its constant, not a refusal
        auto = fit_default(X, y, **options, constant_only=str(reason))
    coef, intercept = auto.raw_model()
    return {"result": auto.result, "loss": loss, "penalty": (penalty, kwargs),
            "model": (coef, float(intercept), auto.scaling.to_dict()),
            "table": encoder.schema if encoder is not None else None,
            "prepare": _prepare_of(auto, encoder), "report":
            auto.report("default path"), "fit_intercept": not args.no_intercept,
            "solver": "auto", "options": {},
            "how": (f"dpopt.pipeline.default_path.fit_default (no estimator for "
                    f"loss={args.loss}, penalty={penalty})")}
