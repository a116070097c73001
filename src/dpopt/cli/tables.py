"""Read a data table (CSV, compressed CSV, Parquet) into a DataFrame (``dpopt fit`` / ``predict``).

The reading is pandas' (``pandas.read_csv`` with the pyarrow-backed string dtype of pandas
>= 3, ``pandas.read_parquet``); nothing is parsed by hand. The columns are then encoded by
the table layer :mod:`dpopt.preprocessing.tables` (column kinds, private selection of categories,
missing values), the same code as a DataFrame passed to an estimator.

* **Header.** A CSV's first row is a header when none of its cells is a number; otherwise
  the columns are named ``col1``, ``col2``, ...
* **Missing values** are empty cells and pandas' tokens (``NA``, ``N/A``, ``NaN``,
  ``null``, ``None``, ...) plus ``?``.
* **Column kinds** come from the dtypes pandas infers; integer feature columns are made float, so
  that whether a column can hold a missing value does not depend on the data (the inference
  of number against text does: one non-number cell makes a column text).
* **Target**: a column name, or its number counted from 1 (negative numbers count from the
  end; default the last column).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np

#: Extra missing-value tokens (pandas' defaults are kept).
EXTRA_MISSING = ("?",)
CSV_SUFFIXES = (".csv", ".tsv", ".txt.gz", ".csv.gz", ".csv.bz2", ".csv.xz", ".csv.zst",
                ".tsv.gz")
PARQUET_SUFFIXES = (".parquet", ".pq")


def is_table_path(path) -> bool:
    """A file :func:`read_table` reads (CSV, compressed CSV, TSV, Parquet)."""
    name = os.fspath(path).lower()
    return name.endswith(CSV_SUFFIXES + PARQUET_SUFFIXES)


def read_frame(path):
    """The whole table as a DataFrame (ValueError naming the path when unreadable)."""
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    name = os.fspath(path).lower()
    try:
        if name.endswith(PARQUET_SUFFIXES):
            return pd.read_parquet(path)
        sep = "\t" if ".tsv" in name else None
        header = "infer" if _has_header(path, sep) else None
        df = pd.read_csv(path, sep=sep or ",", header=header, na_values=list(EXTRA_MISSING),
                         skipinitialspace=True)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {os.fspath(path)!r}: {exc}") from None
    if header is None:
        df.columns = [f"col{j + 1}" for j in range(df.shape[1])]
    else:  # pandas renames a repeated name ("a", "a.1"): check the header as written
        raw = pd.read_csv(path, sep=sep or ",", header=None, nrows=1, dtype=str,
                          skipinitialspace=True).iloc[0]
        check_unique_columns([str(c).strip() for c in raw])
    if df.shape[0] == 0:
        raise ValueError(f"{os.fspath(path)!r} has no data rows")
    df.columns = [str(c).strip() for c in df.columns]
    return df


def integer_features_as_float(X):
    """pandas reads an integer column as int64 only when no cell is missing: that dtype would
    tell (through the table layer's plan) whether some record has a missing value, so every
    integer feature is made float (its missing count is then always part of the release)."""
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    ints = [c for c in X.columns if pd.api.types.is_integer_dtype(X[c].dtype)]
    if ints:
        X = X.copy()
        X[ints] = X[ints].astype(np.float64)
    return X


def _has_header(path, sep):
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    first = pd.read_csv(path, sep=sep or ",", header=None, nrows=1, dtype=str,
                        skipinitialspace=True)
    return not any(_is_number(c) for c in first.iloc[0].tolist())


def _is_number(text) -> bool:
    if not isinstance(text, str):
        return False
    try:
        float(text)
    except ValueError:
        return False
    return text.strip().lower() not in ("nan", "inf", "-inf", "")


def split_target(df, target=-1):
    """``(X, y, target_name)``: the target column (name or number from 1) split off."""
    t = target_column(target, list(df.columns))
    name = df.columns[t]
    return df.drop(columns=[name]), df[name], name


def read_table(path, *, target=-1):
    """``(X DataFrame, y Series, target name)`` of a table file (module docstring)."""
    if not Path(path).exists():
        raise ValueError(f"{os.fspath(path)!r} does not exist")
    X, y, name = split_target(read_frame(path), target)
    return integer_features_as_float(X), y, name


def target_column(target, names):
    """The 0-based index of ``target`` (a name, or a number counted from 1, negative from
    the end)."""
    if isinstance(target, str):
        try:
            target = int(target)
        except ValueError:
            if names.count(target) != 1:
                what = "is not a column" if target not in names else "names several columns"
                raise ValueError(f"target {target!r} {what}; columns: {names}") from None
            return names.index(target)
    if isinstance(target, bool) or not isinstance(target, int):
        raise ValueError(f"target must be a column name or number, got {target!r}")
    if target == 0 or not -len(names) <= target <= len(names):
        raise ValueError(f"target column number {target} is out of range: columns are numbered "
                         f"1..{len(names)} (or -1 for the last)")
    return target - 1 if target > 0 else len(names) + target


def check_unique_columns(names):
    """Two columns with one name make the target choice and the model's feature names
    ambiguous: refused, naming them."""
    twice = [f"{name!r} ({k} times)" for name, k in Counter(map(str, names)).items() if k > 1]
    if twice:
        raise ValueError(f"duplicate column name(s) {', '.join(twice)}; give every column a "
                         f"unique name in the header")
