"""Read data files and write/read fitted models as JSON (used by ``dpopt fit``).

Data: :func:`read_data` reads with :func:`dpopt.datasets.load_file`:
``.npz`` (keys ``X``, ``y``, optional ``feature_names``; a sparse X as CSR
under ``X_data``, ``X_indices``, ``X_indptr``, ``X_shape``), ``.csv`` (numeric,
header inferred, ``target`` column by name or index, default the last) and
LIBSVM (``.svm``, ``.libsvm``, ``.svmlight``, ``.txt``).

Model JSON (``format: "dpopt-model/1"``)::

    {"format", "dpopt_version", "loss", "loss_param", "penalty", "alpha", "l1_ratio",
     "fit_intercept", "solver", "options", "params", "seed",
     "coef": [...], "intercept": float, "classes": [neg, pos] or null,
     (one-vs-rest, k >= 3 classes: "coef" is k lists, "intercept" k numbers, in the
     order of "classes"; one class: the default path's label selection kept one, which
     every prediction is)
     "privacy": {"epsilon", "delta", "adjacency", "accountant", "noise_multiplier",
                 "mechanisms": [{"type": "Gaussian", ...}, ...], "leaks": [...]},
     "data": {"path", "n_samples", "n_features", "feature_names", "target", "columns",
              "table", "kinds", "header", "missing", "dropped_rows"}}

``privacy`` is what the solver certified (``epsilon`` is ``"inf"`` for a
non-private fit, JSON having no infinity); ``privacy.leaks`` lists what the fit read
from the data without privacy (``FitResult.leaks``; empty for a private fit).
``dpopt fit`` on a table also records its columns and the table layer's schema
(``table``: each column's kind and privately chosen levels, ``feature_names`` then read
``column=level``), how the file was read (``kinds``: the declared ``--text`` /
``--numbers`` columns; ``header``), the missing-value mode and the number of dropped
rows; ``classes`` may be strings.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import secrets
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.special import softmax

from dpopt import __version__
from dpopt.data.losses import LOSSES
from dpopt.datasets import load_file
from dpopt.preprocessing._transformers import _clip_columns
from dpopt.preprocessing.feature_maps import normalize_rows
from dpopt.preprocessing.table_encoder import TableEncoder
from dpopt.preprocessing.tables import TableSchema, as_pandas, is_frame

FORMAT = "dpopt-model/1"


def read_data(path, target=None):
    """``(X, y, feature_names)`` from a file; ``target`` (CSV only) names or indexes
    the label column. Errors are ``ValueError`` naming the path."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a str or os.PathLike, got {path!r}")
    suffix = Path(path).suffix.lower()
    if target is not None and suffix != ".csv":
        raise ValueError(f"target applies to CSV files only, got a {suffix or 'suffix-less'} file")
    kwargs = {} if target is None else {"target": _target(target)}
    X, y, names = load_file(path, **kwargs)
    return X, y, None if names is None else list(names)


def _target(target):
    if isinstance(target, str):
        try:
            return int(target)
        except ValueError:
            return target
    return target


# -- models -----------------------------------------------------------------------


def _num(x):
    x = float(x)
    return "inf" if math.isinf(x) else x


def mechanism_dict(m) -> dict:
    return {"type": type(m).__name__,
            **{k: _num(v) if isinstance(v, float) else v
               for k, v in dataclasses.asdict(m).items()}}


def model_dict(problem, result, *, solver, options, seed, classes=None, data=None,
               model=None, target_range=None) -> dict:
    """The JSON-ready description of a fitted model (module docstring).

    ``model``: optional ``(coef, intercept, feature_map)`` of an estimator whose
    coefficients apply to mapped features (the default path: ``feature_map`` is
    ``{"type": "clip", "lower": [...], "upper": [...]}`` or ``{"type": "row-normalize"}``, with
    ``"columns"`` when only those columns were selected and normalized);
    by default the result's own coefficients, on the raw features. ``target_range``: a
    regressor's (lower, upper) that predictions are clipped to (the default path's
    ``target_range_``), or None.
    """
    coef, intercept, feature_map = model or (result.coef, result.intercept, None)

    pen = problem.penalty
    return {
        "format": FORMAT,
        "dpopt_version": __version__,
        "loss": problem.loss.name,
        "loss_param": problem.loss.param,
        "penalty": pen.name,
        "alpha": pen.alpha,
        "l1_ratio": pen.l1_ratio,
        "fit_intercept": problem.fit_intercept,
        "solver": solver,
        "options": options,
        "params": result.params,
        "seed": seed,
        "coef": _coef_list(coef),
        "intercept": (float(intercept) if np.ndim(coef) < 2
                      else [float(b) for b in np.ravel(intercept)]),
        "feature_map": feature_map,
        "target_range": None if target_range is None else [float(v) for v in target_range],
        "classes": None if classes is None else [_plain(c) for c in classes],
        "privacy": {"epsilon": _num(result.epsilon), "delta": float(result.delta),
                    "adjacency": result.adjacency, "accountant": result.accountant,
                    "noise_multiplier": float(result.noise_multiplier),
                    "mechanisms": [mechanism_dict(m) for m in result.mechanisms],
                    "leaks": list(getattr(result, "leaks", ()))},
        "data": data or {},
    }


def _coef_list(coef):
    """A binary / regression model's coefficients as a list; a one-vs-rest model's (k, p)
    matrix as k lists (one per class, in the order of ``classes``)."""
    coef = np.asarray(coef, dtype=np.float64)
    if coef.ndim == 2 and coef.shape[0] > 1:
        return [[float(c) for c in row] for row in coef]
    return [float(c) for c in np.ravel(coef)]


def _plain(v):
    return v.item() if isinstance(v, np.generic) else v


def save_model(path, model: dict):
    """Write ``model`` as JSON, atomically: the text goes to a temporary file in the target
    folder (unique, so two processes saving to one path do not collide), is flushed to disk
    (``fsync``) and renamed over ``path`` (``os.replace``). A reader sees the old file or the
    whole new one, never a partial one. On Linux the temporary file is anonymous
    (``O_TMPFILE``) until complete, so a kill leaves nothing behind; elsewhere a failure
    removes it. Errors are ``OSError`` (the folder removed, disk full, no permission)."""
    write_atomic(path, (json.dumps(model, indent=2, default=_plain) + "\n").encode("utf-8"))


def write_atomic(path, data: bytes):
    """Write ``data`` to ``path`` as :func:`save_model` does (a temporary file renamed over
    it): a reader sees the old file or the whole new one. A link is followed (the file it
    names is replaced, the link kept); a path that is no regular file (a device, a pipe:
    ``/dev/stdout``) is written in place, as no rename can replace it."""
    if os.path.exists(path) and not os.path.isfile(path):
        with open(path, "wb") as f:
            f.write(data)
        return
    path = Path(os.path.realpath(path))
    folder = path.parent if str(path.parent) else Path(".")
    tmp = _write_anonymous(folder, path.name, data) or _write_named(folder, path.name, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        _remove_quietly(tmp)
        raise
    _fsync_folder(folder)


def _write_anonymous(folder, name, data):
    """Write ``data`` to an unnamed file in ``folder`` and give it a unique temporary name
    only once it is complete and on disk; None where ``O_TMPFILE`` is not supported."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        fd = os.open(folder, flag | os.O_WRONLY, 0o644)
    except OSError as exc:
        if not folder.is_dir():
            raise
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            return None  # file system without anonymous files
        raise
    try:
        _write_all(fd, data)
        for _ in range(100):
            tmp = folder / f".{name}.{secrets.token_hex(8)}.tmp"
            try:
                os.link(f"/proc/self/fd/{fd}", tmp, follow_symlinks=True)
                return tmp
            except FileExistsError:
                continue
            except OSError:
                return None  # linking not permitted here: fall back to a named file
        raise FileExistsError(f"no free temporary name in {str(folder)!r}")
    finally:
        os.close(fd)


def _write_named(folder, name, data):
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        _write_all(fd, data)
    except BaseException:
        os.close(fd)
        _remove_quietly(tmp)
        raise
    os.close(fd)
    return tmp


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def _fsync_folder(folder):
    """Make the rename itself durable (POSIX; a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def load_model(path) -> dict:
    """Read a model JSON; ``coef`` becomes an array."""
    try:  # ValueError: not UTF-8, a number of more than 4,300 digits; RecursionError: nesting
        model = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise ValueError(f"model {str(path)!r}: cannot read ({type(exc).__name__}: "
                         f"{str(exc)[:200]})") from None
    if not isinstance(model, dict) or model.get("format") != FORMAT:
        raise ValueError(f"model {str(path)!r}: not a {FORMAT} file")
    missing = [k for k in ("loss", "coef", "intercept") if k not in model]
    if missing:
        raise ValueError(f"model {str(path)!r}: field(s) {missing} missing; not a complete "
                         f"model written by dpopt fit")
    try:
        if not (_all_numbers(model["coef"]) and _all_numbers(model["intercept"])):
            raise TypeError
        coef = np.asarray(model["coef"], dtype=np.float64)
        model["coef"] = coef if coef.ndim == 2 else coef.ravel()
        model["intercept"] = (np.asarray(model["intercept"], dtype=np.float64)
                              if coef.ndim == 2 else float(model["intercept"]))
    except (TypeError, ValueError):
        raise ValueError(f"model {str(path)!r}: coef and intercept must be numbers") from None
    if not (np.all(np.isfinite(model["coef"])) and np.all(np.isfinite(model["intercept"]))):
        raise ValueError(f"model {str(path)!r}: coef and intercept must be finite (a fit never "
                         f"writes NaN or inf: the file was changed)")
    why = _inconsistent(model)
    if why:
        raise ValueError(f"model {str(path)!r}: {why}; not a model written by dpopt fit (the "
                         f"file was changed)")
    return model


def _inconsistent(model):
    """What in a loaded model contradicts the form ``dpopt fit`` writes, or None: every
    field that prediction reads is checked for its type, shape and order (a file is
    untrusted input)."""
    coef, classes, fmap = model["coef"], model.get("classes"), model.get("feature_map")
    if not isinstance(model["loss"], str) or model["loss"] not in LOSSES:
        return f"loss {model['loss']!r} is not one of {sorted(LOSSES)}"
    k = coef.shape[0] if coef.ndim == 2 else None
    if model["loss"] == "logistic" and classes is not None and (
            not isinstance(classes, list) or len(classes) < 1
            or (k is None and len(classes) > 2) or (k is not None and len(classes) != k)):
        return f"classes {classes!r} do not match coef of shape {coef.shape}"
    if classes is not None and not _distinct_scalars(classes):
        return "classes must be distinct labels (text, numbers or True/False)"
    if k is not None and (k < 3 or np.shape(model["intercept"]) != (k,)):
        return f"a one-vs-rest coef needs >= 3 rows and one intercept each, got {coef.shape}"
    why = (_feature_map_problem(fmap, coef.shape[-1]) or _range_problem(model.get("target_range"))
           or _dicts_problem(model))
    if why:
        return why
    table = (model.get("data") or {}).get("table")
    if table:
        try:
            width = len(TableSchema.from_dict(table).feature_names_out())
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
            return "data.table is not a table schema"
        if width != coef.shape[-1]:
            return f"data.table encodes {width} features but coef has {coef.shape[-1]}"
    return None


def _all_numbers(value):
    """Whether ``value`` is a number or (nested) lists of numbers; True/False is not one."""
    if isinstance(value, list):
        return all(_all_numbers(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite_numbers(value, size):
    return (isinstance(value, list) and len(value) == size and _all_numbers(value)
            and bool(np.all(np.isfinite(np.asarray(value, dtype=np.float64)))))


def _distinct_scalars(values):
    if not isinstance(values, list) or not all(
            isinstance(v, (str, int, float, bool)) for v in values):
        return False
    return len({(type(v) is str, str(v)) for v in values}) == len(values)


def _feature_map_problem(fmap, width):
    """What is wrong with a ``feature_map`` for ``width`` features, or None."""
    if fmap is None:
        return None
    if not isinstance(fmap, dict) or fmap.get("type") not in ("clip", "row-normalize"):
        what = fmap.get("type") if isinstance(fmap, dict) else fmap
        return f"feature_map of type {what!r} is neither a clip nor a row normalization"
    if fmap["type"] == "clip":
        lower, upper = fmap.get("lower"), fmap.get("upper")
        if not (_finite_numbers(lower, width) and _finite_numbers(upper, width)):
            return f"feature_map's lower and upper need {width} finite bounds each"
        if np.any(np.asarray(lower, float) > np.asarray(upper, float)):
            return "feature_map has a lower bound above its upper bound"
        return None
    columns = fmap.get("columns")
    if columns is not None and not (
            isinstance(columns, list) and all(type(j) is int and 0 <= j < width for j in columns)
            and len(set(columns)) == len(columns)):
        return f"feature_map's columns must be distinct feature indices in [0, {width})"
    return None


def _range_problem(target_range):
    if target_range is None:
        return None
    if not _finite_numbers(target_range, 2) or target_range[0] > target_range[1]:
        return "target_range must be two finite numbers, lower first"
    return None


def _dicts_problem(model):
    """The fields that hold objects (``params``, ``data`` and its declarations)."""
    data = model.get("data")
    for name, value in (("params", model.get("params")), ("data", data)):
        if value is not None and not isinstance(value, dict):
            return f"{name} must be an object"
    auto = (model.get("params") or {}).get("auto")
    if auto is not None and not isinstance(auto, dict):
        return "params.auto must be an object"
    data = data or {}
    kinds = data.get("kinds")
    if kinds is not None and not (isinstance(kinds, dict) and all(
            isinstance(v, list) and all(isinstance(c, str) for c in v) for v in kinds.values())):
        return "data.kinds must map text / numbers to lists of column names"
    for key in ("columns", "feature_names"):
        names = data.get(key)
        if names is not None and not (isinstance(names, list)
                                      and all(isinstance(c, (str, int)) for c in names)):
            return f"data.{key} must be a list of column names"
    if not isinstance(data.get("target"), (str, int, type(None))) or \
            isinstance(data.get("target"), bool):
        return "data.target must be a column name"
    if not isinstance(data.get("header"), (bool, type(None))):
        return "data.header must be true, false or null"
    return None


def _normalize_columns(X, columns, normalize):
    """Rows of X restricted to ``columns`` normalized, every other column 0 (the feature map
    of a model fitted on selected columns, :class:`dpopt.pipeline.feature_selection.SelectedScaling`)."""
    out = sp.lil_matrix(X.shape) if sp.issparse(X) else np.zeros(X.shape)
    if columns.size:
        out[:, columns] = normalize(X[:, columns])
    return sp.csr_matrix(out) if sp.issparse(X) else out


def _check_predict_input(X, n_features):
    """X as a float CSR matrix or array of shape (n, n_features); a ValueError naming X."""
    try:
        X = sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) \
            else np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        X = None  # NumPy's message quotes the cell: raised below, outside the handler
    if X is None:
        raise ValueError("X must be numeric (an array or a scipy.sparse matrix of numbers)")
    if X.ndim != 2 or X.shape[1] != n_features:
        raise ValueError(f"X has shape {X.shape}; the model takes {n_features} feature(s) "
                         f"per row")
    if not (np.all(np.isfinite(X.data)) if sp.issparse(X) else np.all(np.isfinite(X))):
        raise ValueError("X contains NaN or infinity")
    return X


def features(model: dict, X):
    """The model's input features from ``X``: a DataFrame goes through the training table
    schema (``data.table``: columns by name, categories aligned, unseen values to
    ``<other>``), or is read by the training column names; arrays are taken as they are."""
    data = model.get("data") or {}
    if is_frame(X):
        if data.get("table"):  # (margins encodes a table block by block instead)
            return TableSchema.from_dict(data["table"]).transform(X, at_prediction=True)
        X = as_pandas(X)  # a pyarrow Table's .columns is its data, not its names
        names = data.get("columns") or data.get("feature_names")
        missing = [c for c in (names or []) if c not in X.columns]
        if names and not missing:
            X = X[names]
        elif names:
            raise ValueError(f"DATA lacks the training columns {missing}")
        try:
            X = X.to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("DATA has non-numeric columns but the model was fitted on numbers "
                             "only") from None
    return _check_predict_input(X, np.shape(model["coef"])[-1])


def margins(model: dict, X):
    """x^T coef + intercept on the model's features (its feature map applied); a table
    block of rows by block of rows (:meth:`TableEncoder.prediction_blocks`)."""
    table = (model.get("data") or {}).get("table")
    if is_frame(X) and table:
        encoder = TableEncoder(TableSchema.from_dict(table), None)
        return np.concatenate([_margins(model, block)
                               for block in encoder.prediction_blocks(X)])
    return _margins(model, features(model, X))


def _margins(model, X):
    width = np.shape(model["coef"])[-1]
    if X.shape[1] != width:
        raise ValueError(f"DATA has {X.shape[1]} features; the model has {width}")
    fmap = model.get("feature_map")
    if fmap is not None:  # the default path's map: features clipped to bounds, or rows normalized

        if fmap["type"] == "row-normalize" and fmap.get("columns") is not None:
            X = _normalize_columns(X, np.asarray(fmap["columns"], dtype=int), normalize_rows)
        elif fmap["type"] == "row-normalize":
            X = normalize_rows(X)
        else:
            lower = np.asarray(fmap["lower"], dtype=np.float64)
            upper = np.asarray(fmap["upper"], dtype=np.float64)
            X = _clip_columns(X, lower, upper)  # sparse stays sparse when 0 is in every range
    coef = np.asarray(model["coef"])
    if coef.ndim == 2:  # one-vs-rest: one margin per class, (n, k)
        return np.asarray(X @ coef.T) + model["intercept"]
    return np.asarray(X @ coef).ravel() + model["intercept"]


def is_multinomial(params):
    """Whether a fit's ``params`` (a FitResult's, or a model file's) are those of one
    multinomial model (the default path's k >= 3 classes, :mod:`dpopt.pipeline.multinomial`)
    rather than k one-vs-rest models: its margins are then softmax logits."""
    return bool(((params or {}).get("auto") or {}).get("multinomial"))


def probabilities(margins, multinomial=False):
    """Class probabilities of logistic margins: (1 - p, p) of the sigmoid for one column of
    margins; for (n, k) margins the softmax of a ``multinomial`` model, else (one-vs-rest)
    each class's sigmoid, normalized over the classes (a row whose sigmoids all underflow
    stays 0 rather than 0 / 0)."""
    margins = np.asarray(margins, dtype=np.float64)
    if multinomial and margins.ndim == 2:
        return softmax(margins, axis=1)
    p = np.exp(-np.logaddexp(0.0, -margins))
    if margins.ndim == 2:
        return p / np.maximum(p.sum(axis=1, keepdims=True), np.finfo(float).tiny)
    return np.column_stack([1.0 - p, p])


def predict(model: dict, X):
    """Predictions of a loaded model: the margin for regression (clipped to the model's
    ``target_range`` when it has one), the class for logistic."""
    return predictions(model, margins(model, X))


def predictions(model: dict, margin):
    """:func:`predict` from the model's ``margin`` (:func:`margins`)."""
    if model["loss"] == "logistic":
        classes = model.get("classes") or [-1.0, 1.0]
        if len(classes) == 1:  # the default path kept one label: it is every prediction
            return np.full(margin.shape[0], classes[0], dtype=object)
        if margin.ndim == 2:  # one-vs-rest: the class of the largest margin
            return np.asarray(classes, dtype=object)[np.argmax(margin, axis=1)]
        return np.where(margin > 0, classes[1], classes[0])
    bounds = model.get("target_range")  # the default path's prediction range
    return margin if bounds is None else np.clip(margin, *bounds)
