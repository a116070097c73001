"""``dpopt predict``: score a table (pandas: CSV, TSV, Parquet) or a numeric file with a model
written by ``dpopt fit --out``, through the training schema. Heavy modules are imported when
the command runs, so ``dpopt --help`` stays light."""

from __future__ import annotations

import sys
import warnings

from dpopt.cli._args import check_output_path


def same_labels(pred, y):
    """Which predicted labels equal the file's: as numbers when the model's labels are
    numbers and the file's column reads as numbers (a float training column and an integer
    test file agree on 1.0 and 1), else by their text."""
    if pred.dtype.kind in "iufb":
        try:
            return pred.astype(float) == y.astype(float)
        except (TypeError, ValueError):
            pass
    return pred.astype(str) == y.astype(str)


def cmd_predict(args):
    """Score a table (or npz / LIBSVM file) with a model written by ``dpopt fit --out``: the
    training schema is applied (columns by name, categories aligned, unseen values to
    ``<other>``); predictions are written as CSV; accuracy or R^2 is printed when the target
    column is present."""
    # lazy: the light CLI commands load no heavy module
    import numpy as np

    # lazy: the light CLI commands load no heavy module
    from dpopt.api import modelio
    from dpopt.cli.labels import compact_labels
    from dpopt.cli.tables import (
        Reading,
        check_header_option,
        is_table_path,
        read_frame,
        target_column,
    )

    check_output_path(args.out)  # before anything is read: a bad path fails first
    check_header_option(args.header is False, args.data)
    model = modelio.load_model(args.model)
    target = args.target or (model.get("data") or {}).get("target")
    y = None
    if is_table_path(args.data):
        # read as the fit read its file, unless --header / --no-header says otherwise
        X = read_frame(args.data, Reading.of_model(model.get("data") or {}, args.header))
        if args.target is not None:  # a name, or a number as for dpopt fit
            target = X.columns[target_column(args.target, list(X.columns), "--target")]
        if target is not None and target in X.columns:
            y, X = compact_labels(X[target]), X.drop(columns=[target])
    else:
        X, y, _ = modelio.read_data(args.data)
    if y is not None and model["loss"] != "logistic":
        try:  # checked before the predictions are written
            y = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"target {target!r}: a regression model is scored on numbers; "
                             f"the column holds text that is not a number") from None
    with warnings.catch_warnings(record=True) as caught:  # the encoding's, as notes
        warnings.simplefilter("always")
        try:
            margin = modelio.margins(model, X)
        except ValueError as exc:
            raise ValueError(f"DATA: {exc}") from None
    pred = modelio.predictions(model, margin)
    for message, category in dict.fromkeys((str(w.message), w.category) for w in caught):
        print(f"note ({category.__name__}): {message}", file=sys.stderr)
    out = {"prediction": pred}
    if model["loss"] == "logistic":  # the estimators' probabilities (modelio.probabilities)
        classes = model.get("classes") or [-1.0, 1.0]
        prob = (np.ones((len(pred), 1)) if len(classes) == 1  # one released label: certain
                else modelio.probabilities(
                    margin, modelio.is_multinomial(model.get("params"))))
        for j, c in enumerate(classes):  # one column per class, as predict_proba
            out[f"probability_{c}"] = prob[:, j]
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    pd.DataFrame(out).to_csv(args.out, index=False)
    print(f"dpopt predict: {args.data} (n={len(pred)}) with {args.model}; predictions written "
          f"to {args.out}")
    if y is not None:
        known = (np.ones(len(y), dtype=bool) if y.dtype.kind == "U"
                 else ~pd.isna(pd.Series(y)).to_numpy())
        if model["loss"] == "logistic":
            acc = float(np.mean(same_labels(np.asarray(pred[known]), np.asarray(y[known]))))
            print(f"accuracy on the {int(known.sum())} rows with a target: {acc:.4f}")
        else:
            # lazy: the light CLI commands load no heavy module
            from sklearn.metrics import r2_score

            r2 = r2_score(np.asarray(y[known], float), pred[known])
            print(f"R^2 on the {int(known.sum())} rows with a target: {r2:.4f}")
    return 0
