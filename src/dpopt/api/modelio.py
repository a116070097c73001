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
     "privacy": {"epsilon", "delta", "adjacency", "accountant", "noise_multiplier",
                 "mechanisms": [{"type": "Gaussian", ...}, ...]},
     "data": {"path", "n_samples", "n_features", "feature_names", "target",
              "categories", "missing", "dropped_rows"}}

``privacy`` is what the solver certified (``epsilon`` is ``"inf"`` for a
non-private fit, JSON having no infinity). ``dpopt fit`` on a CSV table also
records the one-hot encoded columns (``categories``: column -> its categories,
public schema; ``feature_names`` then read ``column=category``), the missing-value
mode and the number of dropped rows; ``classes`` may be strings.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from dpopt.datasets import load_file

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
               model=None) -> dict:
    """The JSON-ready description of a fitted model (module docstring).

    ``model``: optional ``(coef, intercept, feature_map)`` of an estimator whose
    coefficients apply to mapped features (the default path: ``feature_map`` is
    ``{"type": "clip", "lower": [...], "upper": [...]}`` or ``{"type": "row-normalize"}``);
    by default the result's own coefficients, on the raw features.
    """
    from dpopt import __version__

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
        "coef": [float(c) for c in np.ravel(coef)],
        "intercept": float(intercept),
        "feature_map": feature_map,
        "classes": None if classes is None else [_plain(c) for c in classes],
        "privacy": {"epsilon": _num(result.epsilon), "delta": float(result.delta),
                    "adjacency": result.adjacency, "accountant": result.accountant,
                    "noise_multiplier": float(result.noise_multiplier),
                    "mechanisms": [mechanism_dict(m) for m in result.mechanisms]},
        "data": data or {},
    }


def _plain(v):
    return v.item() if isinstance(v, np.generic) else v


def save_model(path, model: dict):
    """Write ``model`` as JSON (atomically: a temporary file renamed)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(model, indent=2, default=_plain) + "\n")
    os.replace(tmp, path)


def load_model(path) -> dict:
    """Read a model JSON; ``coef`` becomes an array."""
    try:
        model = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"model {str(path)!r}: cannot read ({exc})") from None
    if not isinstance(model, dict) or model.get("format") != FORMAT:
        raise ValueError(f"model {str(path)!r}: not a {FORMAT} file")
    model["coef"] = np.asarray(model["coef"], dtype=np.float64)
    return model


def predict(model: dict, X):
    """Predictions of a loaded model: the margin for regression, the class for logistic."""
    X = sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    fmap = model.get("feature_map")
    if fmap is not None:  # the default path's map: features clipped to bounds, or rows normalized
        from sklearn.preprocessing import normalize

        if fmap["type"] == "row-normalize":
            X = normalize(X)
        else:
            lower, upper = np.asarray(fmap["lower"]), np.asarray(fmap["upper"])
            X = X.minimum(upper).maximum(lower) if sp.issparse(X) else np.clip(X, lower, upper)
    margin = np.asarray(X @ model["coef"]).ravel() + model["intercept"]
    if model["loss"] == "logistic":
        classes = model.get("classes") or [-1.0, 1.0]
        return np.where(margin > 0, classes[1], classes[0])
    return margin
