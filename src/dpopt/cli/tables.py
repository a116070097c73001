"""Read a CSV table with numeric, string and categorical columns (used by ``dpopt fit``).

Needs only the standard ``csv`` module and numpy (pandas is not a dependency).

* **Header.** The first row is a header when none of its cells is a number;
  otherwise the columns are named ``col1``, ``col2``, ...
* **Numbering.** Rows and columns in messages are counted from 1: row 1 is the
  first data row (after the header), column 1 the first column; the file line
  is given too.
* **Missing values** are empty cells and the tokens ``NA``, ``N/A``, ``NaN``,
  ``null``, ``None`` and ``?`` (any case). ``missing="error"`` (default) raises
  a ``ValueError`` listing where they are; ``"zero"`` replaces a missing numeric
  feature by 0 and a missing categorical feature by no category (an all-zero
  one-hot block); ``"drop"`` drops every row with a missing feature or target.
  Filling with a constant changes each record on its own, so a guarantee under
  replace-one adjacency still holds; dropping rows makes the number of records
  depend on the private data (neighbouring tables can differ in size), which the
  guarantee does not cover: :func:`read_csv_table` reports the dropped rows and
  ``dpopt fit`` warns with a :class:`dpopt.PrivacyLeakWarning`.
* **Categorical columns** (any non-numeric feature column) are one-hot encoded,
  one column ``name=category`` per category, in sorted order. The categories are
  read from the file and treated as *public schema*: which categories exist is
  not protected by the privacy guarantee, so they are returned (and ``dpopt fit``
  prints them) for the user to check.
* **Target**: a column name, or its number counted from 1 (negative numbers
  count from the end; default the last column). A numeric target is returned as
  float64, a non-numeric one as an array of stripped strings.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field

import numpy as np

MISSING_TOKENS = frozenset({"", "na", "n/a", "nan", "null", "none", "?"})
MISSING_MODES = ("error", "zero", "drop")


@dataclass
class Table:
    """A table read by :func:`read_csv_table`."""

    X: np.ndarray  # (n, p) float64 after one-hot encoding
    y: np.ndarray  # (n,) float64, or str for a non-numeric target
    feature_names: list
    target_name: str
    categories: dict = field(default_factory=dict)  # categorical column -> its categories
    dropped_rows: list = field(default_factory=list)  # data rows (from 1) dropped (missing)
    filled: int = 0  # missing feature values replaced (missing="zero")

    @property
    def target_is_numeric(self) -> bool:
        return self.y.dtype.kind == "f"


def read_csv_table(path, *, target=-1, missing="error", delimiter=None) -> Table:
    """Read ``path`` (see the module docstring); errors are ``ValueError``."""
    if missing not in MISSING_MODES:
        raise ValueError(f"missing must be one of {list(MISSING_MODES)}, got {missing!r}")
    lines, rows = _read_rows(path, delimiter)
    header = not any(_is_number(c) for c in rows[0])
    names = [c.strip() for c in rows[0]] if header else [f"col{j + 1}" for j in range(len(rows[0]))]
    if header:
        lines, rows = lines[1:], rows[1:]
    if not rows:
        raise ValueError(f"{os.fspath(path)!r} has a header but no data rows")
    width = len(names)
    for r, (line, row) in enumerate(zip(lines, rows), start=1):
        if len(row) != width:
            raise ValueError(f"row {r} (line {line}) has {len(row)} fields, expected {width} "
                             f"like the {'header' if header else 'first row'}")
    t = _target_column(target, names)
    cells = [[c.strip() for c in col] for col in zip(*rows)]
    absent = [np.array([c.lower() in MISSING_TOKENS for c in col]) for col in cells]
    numeric = [_numeric_column(col, gone, names[j], j, lines)
               for j, (col, gone) in enumerate(zip(cells, absent))]
    keep = np.ones(len(rows), dtype=bool)
    feature_cols = [j for j in range(width) if j != t]
    missing_at = sorted((int(r), j) for j in range(width) for r in np.flatnonzero(absent[j]))
    if missing_at:
        target_missing = [(r, j) for r, j in missing_at if j == t]
        if missing == "error" or (missing == "zero" and target_missing):
            raise ValueError(_missing_message(target_missing if missing == "zero" else missing_at,
                                              names, lines, missing))
        if missing == "drop":
            for r, _ in missing_at:
                keep[r] = False
            if not keep.any():
                raise ValueError("every row has a missing value (missing='drop' left no rows)")
    blocks, feature_names, categories = [], [], {}
    for j in feature_cols:
        gone = absent[j][keep]
        if numeric[j] is not None:
            blocks.append(np.where(gone, 0.0, numeric[j][keep])[:, None])
            feature_names.append(names[j])
        else:
            values = np.array(cells[j], dtype=object)[keep]
            cats = sorted({v for v, g in zip(values, gone) if not g})
            categories[names[j]] = cats
            onehot = np.zeros((values.size, len(cats)))
            index = {c: k for k, c in enumerate(cats)}
            for i, (v, g) in enumerate(zip(values, gone)):
                if not g:
                    onehot[i, index[v]] = 1.0
            blocks.append(onehot)
            feature_names += [f"{names[j]}={c}" for c in cats]
    n = int(keep.sum())
    X = np.hstack(blocks) if blocks else np.zeros((n, 0))
    y = numeric[t][keep] if numeric[t] is not None else np.array(cells[t], dtype=str)[keep]
    filled = 0 if missing != "zero" else sum(int(absent[j].sum()) for j in feature_cols)
    return Table(X=X, y=y, feature_names=feature_names, target_name=names[t],
                 categories=categories, dropped_rows=[int(r) + 1 for r in np.flatnonzero(~keep)],
                 filled=filled)


def _read_rows(path, delimiter):
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {os.fspath(path)!r}: {exc}") from None
    if delimiter is None:
        try:
            delimiter = csv.Sniffer().sniff(text[:20000], delimiters=",;\t").delimiter
        except csv.Error:
            delimiter = ","
    reader = csv.reader(text.splitlines(), delimiter=delimiter)
    lines, rows = [], []
    try:
        for row in reader:
            if row and any(c.strip() for c in row):  # blank lines are skipped
                lines.append(reader.line_num)
                rows.append(row)
    except csv.Error as exc:
        raise ValueError(f"{os.fspath(path)!r} line {reader.line_num}: {exc}") from None
    if not rows:
        raise ValueError(f"{os.fspath(path)!r} is empty")
    return lines, rows


def _is_number(text) -> bool:
    text = text.strip()
    if text.lower() in MISSING_TOKENS:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def _numeric_column(col, gone, name, j, lines):
    """float64 values (0 where missing), or None for a categorical column."""
    values = np.zeros(len(col))
    words = [r for r, (text, g) in enumerate(zip(col, gone)) if not g and not _is_number(text)]
    present = int((~gone).sum())
    if words and len(words) < 0.5 * present:  # a number column with a few words: a typo?
        r = words[0]
        raise ValueError(f"column {j + 1} ({name!r}) is numeric except {len(words)} cell(s), "
                         f"first row {r + 1} (line {lines[r]}): {col[r]!r}; fix the value or "
                         f"write it as a missing value (empty or NA)")
    if words:
        return None
    for r, (text, g) in enumerate(zip(col, gone)):
        if g:
            continue
        values[r] = float(text)
        if not math.isfinite(values[r]):
            raise ValueError(f"row {r + 1} (line {lines[r]}), column {j + 1} ({name!r}) is "
                             f"{text!r}: not a finite number")
    return values


def _target_column(target, names):
    if isinstance(target, str):
        try:
            target = int(target)
        except ValueError:
            if names.count(target) != 1:
                what = "is not a column" if target not in names else "names several columns"
                raise ValueError(f"target {target!r} {what}; columns: {names}") from None
            return names.index(target)
    if isinstance(target, bool) or not isinstance(target, (int, np.integer)):
        raise ValueError(f"target must be a column name or number, got {target!r}")
    if target == 0 or not -len(names) <= target <= len(names):
        raise ValueError(f"target column number {target} is out of range: columns are numbered "
                         f"1..{len(names)} (or -1 for the last)")
    return target - 1 if target > 0 else len(names) + target


def _missing_message(where, names, lines, missing):
    shown = "; ".join(f"row {r + 1} (line {lines[r]}), column {j + 1} ({names[j]!r})"
                      for r, j in where[:5])
    more = f" and {len(where) - 5} more" if len(where) > 5 else ""
    what = "missing target values" if missing == "zero" else "missing values"
    hint = ("rows with a missing target can only be dropped (--missing drop)" if missing == "zero"
            else "use --missing zero (fill features with 0 / no category) or --missing drop "
                 "(drop those rows; not covered by the privacy guarantee)")
    return (f"{len(where)} {what} (empty cell or NA, N/A, NaN, null, None, ?): {shown}{more}; "
            f"rows are numbered from 1 after the header, columns from 1; {hint}")
