"""The target column's labels as ``dpopt fit`` / ``dpopt predict`` read and write them:
``--classes`` and ``--positive-label`` in the kind of the column's labels, whole-number
labels written as integers, a text target as a compact array. Heavy modules are imported
when a command runs."""

from __future__ import annotations

import numpy as np


def compact_labels(y):
    """A text target as a fixed-width numpy string array (no Python object per row; the
    labels' selection and encoding work on it directly); numbers stay numbers."""
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    if pd.api.types.is_numeric_dtype(y.dtype) or pd.api.types.is_bool_dtype(y.dtype) \
            or y.isna().any():
        return y.to_numpy()
    codes, uniques = pd.factorize(y)
    return np.asarray([str(u) for u in uniques], dtype=str)[codes]


def declared_classes(text, y):
    """--classes A,B: the declared labels in the kind of the target column's labels, so that
    the model file's ``classes`` and the written predictions read as its cells do: integers
    for an integer column (``1`` or ``1.0`` is 1; ``0.5`` is refused), floats for a float
    column, True/False for a bool column (``true``, ``1``), the text as typed (stripped)
    otherwise."""
    return _each_once(_in_kind(text.split(","), text, y, "--classes"), text)


def positive_label(text, y):
    """--positive-label: one label read as :func:`declared_classes` reads ``--classes`` (a
    True/False column's ``true`` is True, an integer column's ``1.0`` is 1); a text that no
    label of the column's kind can be is refused (before the fit)."""
    return _in_kind([text], text, y, "--positive-label")[0]


def _in_kind(labels, text, y, what):
    """``labels`` (texts) in the kind of the target column ``y``'s labels; ValueErrors name
    ``what`` and quote ``text`` as typed."""
    labels = [t.strip() for t in labels]
    kind = np.asarray(y).dtype.kind
    if kind == "b":
        return [_truth(t, text, what) for t in labels]
    if kind not in "iuf":
        return labels
    try:
        values = [float(t) for t in labels]
    except ValueError:
        raise ValueError(f"{what}: the labels are numbers, got {text!r}") from None
    if kind == "f":
        return values
    if not all(v.is_integer() for v in values):
        raise ValueError(f"{what}: the target column holds integers, got {text!r}")
    # digits are read exactly (a float rounds integers beyond 2**53)
    return [int(t) if t.lstrip("+-").isdigit() else int(v) for t, v in zip(labels, values)]


def whole_labels(classes):
    """The released labels as the model file writes them: floats that are all whole numbers
    as integers. pandas reads a column of integer labels as floats when one cell is written
    ``0.0``, so the labels' type would otherwise follow one record (post-processing of the
    released labels: nothing is read)."""
    out = [c.item() if hasattr(c, "item") else c for c in classes]
    if all(isinstance(c, float) and c.is_integer() for c in out):
        return [int(c) for c in out]
    return out


def _truth(label, text, what):
    """A label of a True/False target column: true/false or 1/0, in any case."""
    # lazy: the light CLI commands load no heavy module
    from dpopt.preprocessing._cells import TRUTH  # the cells a True/False column may hold

    key = label.lower()
    try:
        key = float(key)  # 1, 1.0, 0: TRUTH's keys True and False equal 1 and 0
    except ValueError:
        pass
    try:
        return bool(TRUTH[key])
    except KeyError:
        give = "True,False (or 1,0)" if what == "--classes" else "True or False (or 1 or 0)"
        raise ValueError(f"{what}: the target column holds True/False, got {text!r}; "
                         f"give {give}") from None


def _each_once(labels, text):
    """``labels``, after a ValueError naming --classes when one is given twice (as the
    target column reads them: 1 and 1.0 are one integer label)."""
    if len(set(labels)) != len(labels):
        raise ValueError(f"--classes {text!r} gives a label twice (read as the target column "
                         f"reads its labels: {labels})")
    return labels
