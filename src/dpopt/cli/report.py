"""The report of ``dpopt fit`` and its model file: what was fitted and released, how each
column and label was chosen, the privacy spent, and the model JSON written atomically
(``dpopt predict`` reads it). Heavy modules are imported when a command runs."""

from __future__ import annotations

import json
import math
import types

import dpopt
from dpopt.cli._args import flag_words


def report(args, data, fitted, classes, caught):
    """Print what ``dpopt fit`` did and released (the privacy report, the columns and labels
    and how they were chosen, the model's size, the warnings caught), then save the model
    file (``--out``) after the report, so that a failed save loses neither."""
    # lazy: the light CLI commands load no heavy module
    import numpy as np

    # lazy: the light CLI commands load no heavy module
    from dpopt.api import modelio
    from dpopt.api.modelio import _plain
    from dpopt.data.losses import get_loss
    from dpopt.data.penalties import get_penalty

    result = fitted["result"]
    leaks = [str(w.message) for w in caught if issubclass(w.category, dpopt.PrivacyLeakWarning)]
    others = [w for w in caught if not issubclass(w.category, dpopt.PrivacyLeakWarning)]
    n = data["X"].shape[0]
    table = fitted.get("table")
    feature_names = (table.feature_names_out() if table is not None
                     else data["feature_names"])
    p = np.shape((fitted.get("model") or (result.coef,))[0])[-1]
    name, penalty_kwargs = fitted["penalty"]
    info = types.SimpleNamespace(loss=get_loss(fitted["loss"]),
                                 penalty=get_penalty(name, **penalty_kwargs),
                                 fit_intercept=fitted["fit_intercept"])
    model = modelio.model_dict(info, result, solver=result.solver, options=fitted["options"],
                               seed=args.seed, classes=classes, model=fitted.get("model"),
                               target_range=fitted.get("target_range"),
                               data={"path": str(args.data), "n_samples": n, "n_features": p,
                                     "feature_names": feature_names,
                                     "columns": data["feature_names"],
                                     "target": data["target"],
                                     "table": table.to_dict() if table is not None else None,
                                     "kinds": data.get("kinds"),
                                     "header": data.get("header"),
                                     "empty_columns": data.get("empty_columns"),
                                     "missing": args.missing,
                                     "dropped_rows": len(data["dropped_rows"])})
    # everything the fit read without privacy, as the report prints it: the solver's own
    # leaks and the warnings of the estimator and of the reading (--missing drop)
    model["privacy"]["leaks"] = list(dict.fromkeys([*model["privacy"]["leaks"], *leaks]))
    coef = model["coef"]
    nnz = int(np.count_nonzero(coef))
    multiclass = classes is not None and len(classes) > 2
    print(f"dpopt fit: {args.data} (n={n}, p={p}), loss={info.loss.name}, "
          f"penalty={info.penalty.name}"
          + (f"(alpha={info.penalty.alpha:g})" if info.penalty.name != "none" else ""))
    print(f"fit: {fitted['how']}")
    for kind, what in (("numbers", "a cell that is not a number read as missing"),
                       ("text", "every cell a text level")):
        if (data.get("kinds") or {}).get(kind):
            print(f"declared --{kind} (public): {', '.join(data['kinds'][kind])} ({what})")
    if data.get("empty_columns"):
        print(f"left out: column(s) {', '.join(map(repr, data['empty_columns']))} hold no value "
              f"in any row (declare --numbers or --text to keep one)")
    if table is not None:
        how = ("chosen privately by partition selection (noisy counts above a threshold of "
               f"{table.threshold:.4g}; a value held by few records is never released)"
               if any(c.kind == "string" for c in table.columns) else "public schema")
        if any(c.code is not None for c in table.columns):
            how += "; a target-coded column is one number, its value's private mean of y"
        print(f"columns ({how}):")
        for line in table.describe():
            print(f"  {line}")
    if classes is not None:
        how = fitted.get("labels") or "chosen privately"
        if multiclass:
            kind = ("one multinomial model" if modelio.is_multinomial(model["params"])
                    else "one-vs-rest")
            print(f"labels ({how}): {', '.join(repr(_plain(c)) for c in classes)} "
                  f"({len(classes)} classes, {kind})")
            if args.positive_label is not None:
                print(f"warning: --positive-label {args.positive_label} ignored: it applies to "
                      f"two classes, the fit kept {len(classes)}")
        elif len(classes) == 1:
            print(f"labels ({how}): only {_plain(classes[0])!r} was kept; the model predicts it "
                  f"for every row")
        else:
            print(f"labels ({how}): {_plain(classes[0])!r} -> -1, {_plain(classes[1])!r} "
                  f"-> +1")
        if fitted.get("positive_note"):
            print(f"warning: {fitted['positive_note']}")
    if data["dropped_rows"]:  # their count only: which records have a missing cell is private
        print(f"missing values: dropped {len(data['dropped_rows'])} row(s) (--missing drop)")
    print(f"privacy: {flag_words(fitted.get('report') or result.privacy_report())}")
    summary = fitted.get("summary")
    if summary is not None:
        print(summary.attrs["text"])
        model["inference"] = _inference_dict(summary)
    elif fitted.get("no_intervals"):
        print(f"warning: --inference: {fitted['no_intervals']}")
    shown = (", ".join(f"{b:.4g}" for b in model["intercept"]) if multiclass
             else f"{model['intercept']:.4g}")
    print(f"model: {nnz}/{np.size(coef)} non-zero coefficients, intercept {shown}; "
          f"{result.n_iter} updates, {result.passes:g} passes, {result.time:.2f} s")
    for w in others:
        print(f"warning: {flag_words(str(w.message))}")
    for msg in leaks:
        print(f"PrivacyLeakWarning: {msg}")
    if args.train_metrics and multiclass:
        print("training objective: not computed for a multiclass model")
    elif args.train_metrics:
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
        _save(args.out, model)  # after the report: a failed save loses neither


def _inference_dict(summary):
    """The coefficient table of ``--inference`` as JSON-ready lists (95% intervals; a
    standard error that could not be given, a feature fixed at 0, is null)."""
    lo, hi = summary.columns[-2:]
    column = {"coef": "coef", "std_err": "std err", "z": "z", "p_value": "P>|z|",
              "lower": lo, "upper": hi}
    return {"level": 0.95, "names": [str(v) for v in summary.index],
            **{key: [float(v) if math.isfinite(v) else None for v in summary[name]]
               for key, name in column.items()}}


def _save(out, model):
    """Write the model; if that fails (the privacy is already spent), print the model JSON so
    that nothing is lost, and say what failed."""
    # lazy: the light CLI commands load no heavy module
    from dpopt.api import modelio

    try:
        modelio.save_model(out, model)
    except OSError as exc:
        print("model (JSON, not saved: see the error below):")
        print(json.dumps(model, indent=2, default=modelio._plain))
        raise ValueError(f"--out: the fit succeeded and its privacy was spent (report above), "
                         f"but writing the model to {str(out)!r} failed: {exc.strerror or exc} "
                         f"({type(exc).__name__}); the model was printed above: save it by "
                         f"hand rather than fit again") from None
    print(f"model written to {out}")


def _train_target(data, classes, args):
    # lazy: the light CLI commands load no heavy module
    import numpy as np

    if classes is None:
        return data["y"]
    y = data["y"]
    # lazy: the light CLI commands load no heavy module
    from dpopt.preprocessing.labels import encode_labels

    return np.where(encode_labels(y, classes) == 1, 1.0, -1.0)
