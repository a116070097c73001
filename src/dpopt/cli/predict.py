"""``dpopt predict``: score a table (pandas: CSV, TSV, Parquet) or a numeric file with a model
written by ``dpopt fit --out``, through the training schema. Heavy modules are imported when
the command runs, so ``dpopt --help`` stays light."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

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
    ``<other>``); predictions are written as the suffix of ``--out`` says (CSV by default);
    accuracy or R^2 is printed when the target column is present. Nothing is written when
    any step fails, and never over the model or the data."""
    # lazy: the light CLI commands load no heavy module
    import numpy as np

    # lazy: the light CLI commands load no heavy module
    from dpopt.api import modelio

    check_output_path(args.out, [("MODEL", args.model), ("DATA", args.data)])
    model = modelio.load_model(args.model)
    X, y, target = _read(args, model)
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
    scored = None if y is None else _score(model, pred, y)
    _write(_output(model, pred, margin), args.out)
    for message, category in dict.fromkeys((str(w.message), w.category) for w in caught):
        print(f"note ({category.__name__}): {message}", file=sys.stderr)
    # the report beside a stream of predictions (--out /dev/stdout, a pipe) goes to stderr
    report = sys.stderr if os.path.exists(args.out) and not os.path.isfile(args.out) else sys.stdout
    print(f"dpopt predict: {args.data} (n={len(pred)}) with {args.model}; predictions written "
          f"to {args.out}", file=report)
    for line in scored or ():
        print(line, file=report)
    return 0


def _read(args, model):
    """``(X, y or None, the target's name)`` of DATA, read as the model's fit read its file
    (``--header`` / ``--no-header`` may say otherwise); the target column is taken out when
    present."""
    # lazy: the light CLI commands load no heavy module
    from dpopt.api import modelio
    from dpopt.cli.labels import compact_labels
    from dpopt.cli.tables import (
        Reading,
        check_header_option,
        check_numeric_file,
        delimiter_hint,
        is_table_path,
        read_frame,
        target_column,
    )

    check_header_option(args.header is False, args.data)
    data = model.get("data") or {}
    target = args.target or data.get("target")
    if not is_table_path(args.data):
        check_numeric_file(args.data)
        if data.get("table"):
            raise ValueError(f"DATA: the model was fitted on a table, whose columns it matches "
                             f"by name; {os.fspath(args.data)!r} is a numeric file: give the "
                             f"table (CSV, TSV or Parquet)")
        return (*modelio.read_data(args.data)[:2], target)
    X = read_frame(args.data, Reading.of_model(data, args.header))
    hint = delimiter_hint(list(X.columns))
    if hint and len(data.get("columns") or ()) > 1:
        raise ValueError(f"DATA: the file reads as one column{hint}")
    if args.target is not None:  # a name, or a number as for dpopt fit
        target = X.columns[target_column(args.target, list(X.columns), "--target")]
        if target in (data.get("columns") or ()):
            raise ValueError(f"--target {target!r} is one of the model's features; the model's "
                             f"target was {data.get('target')!r}")
    if target is None or target not in X.columns:
        return X, None, target
    return X.drop(columns=[target]), compact_labels(X[target]), target


def _score(model, pred, y):
    """The lines that score ``pred`` against the file's target ``y`` on the rows that have
    one: accuracy (with a note when no row's label is one of the model's classes) or R^2
    (from two rows on)."""
    # lazy: the light CLI commands load no heavy module
    import numpy as np
    import pandas as pd

    known = (np.ones(len(y), dtype=bool) if y.dtype.kind == "U"
             else ~pd.isna(pd.Series(y)).to_numpy())
    rows = int(known.sum())
    if model["loss"] == "logistic":
        if rows == 0:
            return ["accuracy: no row has a target"]
        y_known = np.asarray(y[known])
        acc = float(np.mean(same_labels(np.asarray(pred[known]), y_known)))
        lines = [f"accuracy on the {rows} rows with a target: {acc:.4f}"]
        classes = model.get("classes") or [-1.0, 1.0]
        if not any(same_labels(np.full(rows, c), y_known).any() for c in classes):
            lines.append(f"note: no row's target is one of the model's labels "
                         f"{[str(c) for c in classes]}: is the column written as in training?")
        return lines
    if rows < 2:
        return [f"R^2: needs two rows with a target, the file has {rows}"]
    # lazy: the light CLI commands load no heavy module
    from sklearn.metrics import r2_score

    return [f"R^2 on the {rows} rows with a target: "
            f"{r2_score(np.asarray(y[known], float), pred[known]):.4f}"]


def _output(model, pred, margin):
    """The predictions as a DataFrame: ``prediction``, and a classifier's probability of
    each class (one column per class, as ``predict_proba``)."""
    # lazy: the light CLI commands load no heavy module
    import numpy as np
    import pandas as pd

    from dpopt.api import modelio

    out = {"prediction": pred}
    if model["loss"] == "logistic":  # the estimators' probabilities (modelio.probabilities)
        classes = model.get("classes") or [-1.0, 1.0]
        prob = (np.ones((len(pred), 1)) if len(classes) == 1  # one released label: certain
                else modelio.probabilities(
                    margin, modelio.is_multinomial(model.get("params"))))
        for j, c in enumerate(classes):
            out[f"probability_{c}"] = prob[:, j]
    return pd.DataFrame(out)


#: Compression of a CSV / TSV output, from the last suffix (as pandas reads them).
COMPRESSION = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}
#: Suffixes of other table formats, refused for ``--out`` (everything else is CSV).
OTHER_FORMATS = {".xlsx", ".xls", ".ods", ".json", ".feather", ".arrow", ".orc", ".h5",
                 ".hdf5", ".pkl", ".pickle", ".npz", ".npy", ".sav", ".dta", ".zip"}


def _write(frame, path):
    """Write ``frame`` as the suffix of ``path`` says (``.parquet`` / ``.pq``: Parquet;
    ``.tsv``: tab-separated; otherwise CSV; ``.gz``, ``.bz2``, ``.xz``, ``.zst``
    compressed), atomically (:func:`dpopt.api.modelio.write_atomic`): a failure leaves no
    partial file and is a ValueError naming ``--out``."""
    # lazy: the light CLI commands load no heavy module
    import io

    from dpopt.api.modelio import write_atomic
    from dpopt.cli.tables import PARQUET_SUFFIXES, separator

    if Path(path).suffix.lower() in OTHER_FORMATS:  # CSV text under its name misleads
        raise ValueError(f"--out: {Path(path).suffix} is not a format dpopt writes; name the "
                         f"file .csv, .tsv or .parquet (a CSV or TSV may end in .gz, .bz2, "
                         f".xz or .zst)")
    buffer = io.BytesIO()
    try:
        if Path(path).suffix.lower() in PARQUET_SUFFIXES:
            frame.to_parquet(buffer, index=False)
        else:
            frame.to_csv(buffer, index=False, sep=separator(path),
                         compression=COMPRESSION.get(Path(path).suffix.lower()))
    except ImportError as exc:  # pyarrow (Parquet) or zstandard (.zst) not installed
        raise ValueError(f"--out: writing {str(path)!r} needs a package that is not "
                         f"installed ({exc})") from None
    try:
        write_atomic(path, buffer.getvalue())
    except OSError as exc:
        raise ValueError(f"--out: writing the predictions to {str(path)!r} failed: "
                         f"{exc.strerror or exc} ({type(exc).__name__}); nothing was "
                         f"written") from None
