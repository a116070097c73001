"""The public schema of a table (:mod:`dpopt.preprocessing.tables`): one :class:`Column` per
column, from its dtype and the declared ``categories`` only. No value is read, so every
refusal here comes before any release."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dpopt.preprocessing._cells import check_reserved, check_unique_names, level_text

__all__ = ["Column", "column_kind", "plan_table", "declared_categories"]


@dataclass
class Column:
    """One raw column and how it is encoded (see the module table)."""

    name: object
    kind: str  # "numeric", "bool", "declared", "string"
    missable: bool  # its dtype can hold a missing value: its missing count is selected
    levels: list = field(default_factory=list)  # declared or selected levels (not OTHER)
    has_missing: bool = False  # the missing count was selected: an indicator / level
    reference: str | None = None  # reference coding: the level without a column
    code: object = None  # target coding: a TargetCode (the column is one number per cell)

    @property
    def one_column(self):
        """Whether the column is encoded as one number (numeric, bool, target-coded)."""
        return self.kind in ("numeric", "bool") or self.code is not None


def column_kind(name, dtype, declared):
    """``(kind, missable)`` of column ``name`` from its dtype (or its name among the
    ``declared`` categories); a ValueError naming it for a dtype no kind encodes (dates,
    durations, complex numbers, ...), at fit and at prediction alike. A pandas ``category``
    column is text, its levels chosen privately, unless ``categories=`` names it: its
    categories are most often made from the data (``astype("category")`` lists every value,
    one record's included), and the dtype cannot say whether they were. So are True/False
    categories: pandas calls such a dtype bool, and one record's other value made it text."""
    if name in declared:
        return "declared", True
    if isinstance(dtype, pd.CategoricalDtype):  # its categories may be data: text (docstring)
        return "string", True
    if pd.api.types.is_bool_dtype(dtype):
        return "bool", str(dtype) == "boolean"
    if pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_complex_dtype(dtype):
        return "numeric", (pd.api.types.is_float_dtype(dtype)
                           or pd.api.types.is_extension_array_dtype(dtype))
    if (pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype)
            or _arrow_dictionary(dtype)):
        return "string", True
    raise ValueError(f"column {name!r} has dtype {dtype}, which dpopt cannot encode: convert "
                     f"it to numbers (e.g. a date to days since an origin) or to strings (and "
                     f"declare its levels with categories= if they are public), or drop it")


def _arrow_dictionary(dtype):
    """An Arrow dictionary column (pyarrow-backed pandas dtype): a storage encoding whose
    values come from the data (a Parquet or CSV reader makes them), so it is a string
    column for the table layer, not a declaration (a pandas ``category`` is one)."""
    if not isinstance(dtype, getattr(pd, "ArrowDtype", ())):
        return False
    import pyarrow as pa  # lazy: optional dependency, only for Arrow-backed columns

    return pa.types.is_dictionary(dtype.pyarrow_dtype)


def plan_table(df, categories=None):
    """The public schema of ``df``: one :class:`Column` per column, from the dtypes and the
    declared ``categories`` ({column: levels}) only (no value is read)."""
    check_unique_names(df.columns)
    declared = declared_categories(categories)
    unknown = [c for c in declared if c not in df.columns]
    if unknown:
        raise ValueError(f"categories: {unknown} are not columns of X; columns: "
                         f"{list(df.columns)}")
    cols = []
    for name in df.columns:
        kind, missable = column_kind(name, df[name].dtype, declared)
        levels = []
        if kind == "declared":
            dtype = df[name].dtype
            if name in declared:
                check_declared_levels(name, declared[name], dtype)
            levels = [level_text(v, dtype) for v in declared[name]]
            twice = sorted(v for v, k in Counter(levels).items() if k > 1)
            if twice:
                raise ValueError(f"categories of column {name!r}: {twice} appear twice (levels "
                                 f"are matched by their text); give each level once")
            check_reserved(name, levels, "has a category")
        cols.append(Column(name, kind, missable, levels))
    return cols


def check_declared_levels(name, levels, dtype):
    """Declared levels that no cell of a column of ``dtype`` could hold (public: the dtype
    and the declaration): text for a column of numbers or True/False. Every record would
    count as outside them and the column would carry nothing. (An empty list is a
    declaration of its own: a column, such as an id, whose values are all outside.)"""
    typed = pd.api.types.is_bool_dtype(dtype) or (
        pd.api.types.is_numeric_dtype(dtype) and not isinstance(dtype, pd.CategoricalDtype))
    if typed and any(isinstance(v, (str, bytes)) for v in levels):
        raise ValueError(f"categories[{name!r}] lists text levels, but column {name!r} holds "
                         f"{dtype} values: no cell could be one of them; declare its values "
                         f"as they are (numbers, True/False)")


def declared_categories(categories):
    """``categories=`` as {column: [levels]}, checked before anything is read: a mapping of
    columns to ordered collections of present (not missing) levels. A string would be read
    as its characters and a set in hash order, so both are refused."""
    if categories is None:
        return {}
    if not isinstance(categories, Mapping):
        raise ValueError(f"categories must be a dict {{column: [levels]}}, got "
                         f"{type(categories).__name__}")
    out = {}
    for name, levels in categories.items():
        if (isinstance(levels, (str, bytes, set, frozenset, Mapping, Iterator))
                or not isinstance(levels, Iterable)):  # an iterator: a refit would see none
            raise ValueError(f"categories[{name!r}] must list the column's levels in order "
                             f"(a list or a tuple), got {levels!r}")
        out[name] = list(levels)
        if any(np.ndim(v) or pd.isna(v) for v in out[name]):
            raise ValueError(f"categories[{name!r}] holds a missing or non-scalar level: a "
                             f"level is one value, and missing cells get their own indicator")
    return out


def no_reference_without_intercept(df, categories):
    """inference=True on a table codes each categorical column against a reference level,
    which the intercept carries; without an intercept that coding would force the reference
    level's mean to 0, and the one-hot coding's levels may be empty (``<other>``), so such a
    fit is refused before any release (public schema). ``df``: a pandas DataFrame."""
    coded = [c.name for c in plan_table(df, categories)
             if c.kind not in ("numeric", "bool")]
    if coded:
        raise ValueError(f"inference=True with categorical column(s) {coded} needs an "
                         f"intercept (fit_intercept=True; dpopt fit without --no-intercept): "
                         f"each is coded against a reference level, which the intercept "
                         f"carries; without one the coefficients are not identified")


def schema_levels(d):
    """The levels of one column of a schema dict, checked: a column of a known kind named
    by text, numbers and bools with no level, categories of distinct scalar levels."""
    kinds = ("numeric", "bool", "declared", "string")
    levels = d["levels"]
    if d["kind"] not in kinds or not isinstance(d["name"], str) or not isinstance(levels, list):
        raise ValueError(f"a table schema's column is named by text, of a kind in {kinds}")
    if any(not isinstance(v, (str, int, float, bool)) for v in levels) or \
            len(set(map(str, levels))) != len(levels) or \
            (levels and d["kind"] in ("numeric", "bool")):
        raise ValueError("a table schema's levels are distinct texts or numbers")
    return list(levels)
