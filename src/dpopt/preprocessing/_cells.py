"""How the table layer reads a cell (:mod:`dpopt.preprocessing.tables`): the text key of
each value (categories are matched by text; a missing cell is ``<missing>``), a declared
level as the text its column's cells have, a True/False cell at prediction. Per-cell maps:
they read no other record."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

__all__ = ["MISSING", "OTHER", "RESERVED", "reserved_text", "text_codes", "value_counts",
           "cell_text", "number_text", "level_text", "truth_values", "missing_count",
           "check_cells", "check_finite", "check_keys", "check_reserved", "not_unicode", "check_unique_names"]

#: The key of a missing cell.
MISSING = "<missing>"
#: The level of the values outside a column's kept levels (its one-hot column's name).
OTHER = "<other>"
#: Texts a value or a declared level cannot have: dpopt's own keys.
RESERVED = (MISSING, OTHER)


def value_counts(values):
    """{value: count} of a column (values keyed by their text, missing cells as MISSING).
    Counted on the codes of ``pandas.factorize`` (no Python object per row)."""
    codes, keys = text_codes(values)
    counts = np.bincount(codes, minlength=len(keys)) if len(codes) else np.zeros(len(keys))
    out = {}
    for key, count in zip(keys, counts.tolist()):
        if count:
            out[key] = out.get(key, 0) + int(count)
    return out


def text_codes(values, name=None):
    """``(codes, keys)``: each cell's index into ``keys``, the texts of the distinct values
    (``MISSING`` last when a cell is missing; two values with one text share it). A cell
    with no text key (a list, a dict, a set: unhashable) or several values (a tuple, a
    frozenset: hashable, and once read as one level each) is a ValueError naming the
    column ``name``."""
    try:
        codes, uniques = pd.factorize(values if isinstance(values, pd.Series)
                                      else pd.Series(np.asarray(values, dtype=object)))
        uniques = np.asarray(uniques, dtype=object)
        several = next((u for u in uniques if isinstance(u, (tuple, frozenset))), None)
        if several is not None:  # hashable, but several values in one cell as a list is
            raise TypeError(f"a {type(several).__name__} cell")
    except TypeError as exc:  # an unhashable cell
        raise ValueError(f"column {name!r} holds values that are neither text nor numbers "
                         f"({exc}); give one value per cell, e.g. join a list into a string, "
                         f"or drop the column") from None
    dtype = getattr(values, "dtype", None)
    keys = [cell_text(u, dtype) for u in uniques] + [MISSING]
    check_reserved(getattr(values, "name", None) if name is None else name, keys[:-1])
    codes = np.asarray(codes, dtype=np.int64)
    codes[codes < 0] = len(keys) - 1
    return codes, keys


def check_reserved(name, texts, what="holds the text"):
    """Refuse column ``name`` when its distinct value ``texts`` hold one of :data:`RESERVED`:
    :data:`MISSING` would be counted, coded and predicted as a missing cell, :data:`OTHER`
    would name two one-hot columns alike (the value's and the values outside the kept
    levels). In memory and on Dask, before any release."""
    for text in RESERVED:
        if text in texts:
            raise reserved_text(name, what, text)


def reserved_text(name, what="holds the text", text=MISSING):
    """The ValueError of a value (or a declared level) of column ``name`` whose text is one
    of :data:`RESERVED`: :data:`MISSING`, the key of a missing cell, or :data:`OTHER`, the
    level of the values outside the kept ones."""
    role = "a missing cell" if text == MISSING else "the values outside the kept levels"
    return ValueError(f"column {name!r} {what} {text!r}, the key dpopt gives {role}; "
                      f"rename that value" + (" (or make those cells missing)"
                                              if text == MISSING else ""))


def level_text(v, dtype):
    """A declared level as the text its cells have in a column of ``dtype`` (cells are
    matched by text): 1 declared for a float column is "1.0", 2.0 for an integer one "2"."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number)):
        return str(v)
    if _whole_floats(dtype):  # a category of floats: keyed as its cells are
        return cell_text(float(v), dtype)
    if isinstance(dtype, pd.CategoricalDtype):  # its cells have its categories' type
        dtype = dtype.categories.dtype
    if pd.api.types.is_integer_dtype(dtype) and float(v).is_integer():
        return str(int(v))
    if pd.api.types.is_float_dtype(dtype):
        return str(float(v))
    return str(v)


def cell_text(v, dtype):
    """The text key of a value ``v`` of a column of ``dtype``: ``str(v)``, except that in a
    ``category`` of float categories a whole number is keyed as an integer. pandas makes a
    category's numbers floats when one of them is not whole (or a cell was missing when the
    column became a category), so one record's value would otherwise rename every level
    ("1" -> "1.0"), in a name of the model."""
    if _whole_floats(dtype) and isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def number_text(text):
    """``text`` with a whole float written as an integer ("1.0" -> "1", "-2.00" -> "-2"),
    any other text as it is ("01", "1e3" and "1.5" too: texts that only look like numbers,
    such as codes with leading zeros, stay apart): the form in which the keys of one number
    written two ways are compared."""
    text = str(text)
    whole = _WHOLE_FLOAT.match(text)
    return whole.group(1) if whole else text


_WHOLE_FLOAT = re.compile(r"^(-?\d+)\.0+$")


def _whole_floats(dtype):
    return isinstance(dtype, pd.CategoricalDtype) and pd.api.types.is_float_dtype(
        dtype.categories.dtype)


#: The cells a True/False column may hold at prediction (a file read back as text; 1 == True
#: and 0 == False as keys, so 1/0 and 1.0/0.0 are read too).
TRUTH = {True: 1.0, False: 0.0, "True": 1.0, "False": 0.0, "true": 1.0, "false": 0.0,
         "TRUE": 1.0, "FALSE": 0.0}


def truth_values(name, s):
    """0/1 of a True/False column's present cells (a pandas Series); a ValueError naming the
    column for any other value (strings are not read by their truthiness: "False" is not
    True)."""
    if pd.api.types.is_bool_dtype(s.dtype):
        return s.to_numpy(dtype=np.float64)
    values = s.map(lambda v: TRUTH.get(v, np.nan) if isinstance(v, (bool, str, int, float,
                                                                      np.generic)) else np.nan)
    bad = values.isna().to_numpy()
    if bad.any():
        raise ValueError(f"column {name!r} was True/False at fit time but holds "
                         f"{int(bad.sum())} other value(s) now; give True/False (or 1/0)")
    return values.to_numpy(dtype=np.float64)


def check_unique_names(columns, among=None):
    """A ValueError naming the repeated column names of a table (pandas or Dask: its
    ``columns``, public schema): each column is matched by its name. ``among``: only these
    names must be unique (at prediction, the training schema's; other columns are unread)."""
    twice = sorted({str(c) for c in columns[columns.duplicated()]
                    if among is None or c in among})
    if twice:
        raise ValueError(f"X has columns with the same name: {twice}; give each a unique name")


def split_target(frame, y):
    """``(features, target)`` of a table (pandas or Dask); ``y`` may name one of its
    columns, as a str. Repeated column names are refused first, then a ``y`` that is one
    value (``fit(X, 2)``, ``fit(X, True)``) or a tuple that labels a column (MultiIndex
    columns): a ValueError saying that y names a column only as a str (the public schema and
    y's type: nothing is read)."""
    check_unique_names(frame.columns)
    if isinstance(y, str):
        if y not in frame.columns:
            raise ValueError(f"y={y!r} is not a column of X (columns: "
                             f"{list(frame.columns)[:10]})")
        return frame.drop(columns=[y]), frame[y]
    if is_label(y) and _holds(frame.columns, y):
        raise ValueError(f"y={y!r} labels a column of X, but y names a column only as a str; "
                         f"pass the column itself: fit(X.drop(columns=[label]), X[label])")
    if is_label(y) and not isinstance(y, tuple):
        raise ValueError(f"y={y!r} is one value: give one target per row, or the name of a "
                         f"column of X as a str")
    return frame, y


def is_label(y):
    """Whether ``y`` is given as one label (a str, a scalar, a tuple) rather than as the
    targets' values: :func:`split_target` reads it."""
    return isinstance(y, (str, tuple)) or (y is not None and np.ndim(y) == 0)


def _holds(columns, label):
    try:
        return bool(label in columns)
    except (TypeError, ValueError):  # unhashable, or a tuple a flat index cannot hold
        return False


def missing_count(s):
    return int(pd.isna(s).sum())


def check_cells(df, columns):
    """A ValueError naming the column, before anything is released, when a text cell of a
    string or declared column is not valid Unicode (a lone surrogate, e.g. a file decoded
    with errors="surrogateescape"): the releases after the selection read text as UTF-8,
    and a failure there would depend on one record after a release. Likewise for a cell with
    no text key at all (:func:`text_codes`), and for an infinite number in a numeric column
    (the encoding refused it after the selection's release, a charged failure)."""
    for c in columns:
        if c.kind in ("string", "declared"):
            check_keys(c.name, text_codes(df[c.name], c.name)[1])
    numeric = [c.name for c in columns if c.kind == "numeric"]
    check_finite([name for name in numeric if _has_infinity(df[name])])


def _has_infinity(s):
    values = pd.to_numeric(s, errors="coerce")  # a non-number is refused where it was
    return bool(np.isinf(values.to_numpy(dtype=np.float64, na_value=np.nan)).any())


def check_finite(columns):
    """Refuse the numeric ``columns`` found to hold an infinite value (before any release)."""
    if columns:
        raise ValueError(f"column(s) {columns} hold an infinite value; replace it by a finite "
                         f"number or a missing value")


def check_keys(name, keys):
    """:func:`check_cells` of column ``name`` from its distinct texts ``keys``."""
    try:  # one encode of the distinct texts joined: no Python step per value
        "".join(keys).encode("utf-8")
    except UnicodeEncodeError:
        raise not_unicode(name) from None


def not_unicode(name):
    """The ValueError of :func:`check_cells` for column ``name``."""
    return ValueError(f"column {name!r} holds text that is not valid Unicode (a lone "
                      f"surrogate character): read the file with its encoding, or replace "
                      f"the character")

