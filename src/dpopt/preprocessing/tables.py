"""Tables in: DataFrames with numeric, bool, categorical, string and missing columns.

The table layer turns a pandas DataFrame (or a polars / pyarrow table, converted by
narwhals) into the float matrix the models fit, with one rule per column *kind*. The
kind comes from the column's dtype and from what the user declares, never from the
values, so it is public schema:

==============  =========================================  ==================================
kind            dtype / declaration                        encoded as (bounds)
==============  =========================================  ==================================
numeric         int, float (not bool)                      the value, NaN -> 0 (private bounds,
                                                           as before, or ``feature_bounds=``)
bool            bool, pandas ``boolean``                   0/1 (public [0, 1])
declared        pandas ``category`` or ``categories=``     one 0/1 column per declared level,
                                                           plus ``<other>`` (public [0, 1])
string          object / str / Arrow dictionary            one 0/1 column per level chosen by
                (no declaration)                           private partition selection, plus
                                                           ``<other>`` (public [0, 1])
==============  =========================================  ==================================

The default path of a regressor or a binary classifier codes a string column most of whose
records fall outside its kept levels as one number instead, the private mean of y of its value
(:mod:`dpopt.preprocessing.target_coding`; ``Column.code``).

Missing values. A column whose dtype can hold a missing value (float, nullable and
categorical dtypes; string columns treat a missing cell as the level ``<missing>``) takes
part in the selection below with its count of missing cells; when that count is selected
the column gets an indicator ``<name>_missing`` (public [0, 1]). A missing numeric value is
imputed at the public constant 0 (then clipped into the column's bounds like any value), a
missing declared/bool value encodes as ``<other>`` / 0; the indicator carries the
difference. Imputing at a public constant and adding an indicator are per-record maps that
read no other record: they cost nothing.

Private partition selection (Desfontaines, Voss, Gipson & Mandayam, "Differentially
private partition selection", PoPETs 2022; Gopi, Gulhane, Kulkarni, Shen, Shokouhi &
Yekhanin, "Differentially private set union", ICML 2020; Korolova, Kenthapadi, Mishra &
Ntoulas, WWW 2009). Every selected part of the table is a vector of counts: for each
string column the count of each value present, for each column that can hold missing
values the count of its missing cells, and for a classifier whose labels are not declared
the count of each label. All counts get independent N(0, sigma^2) noise and a value is kept
when its noisy count exceeds a threshold tau; the kept values are released, and for the
labels their noisy counts too (the default path's held-out selection reads the majority
class from them). The argument below covers releasing (value, noisy count) pairs: the counts
of values present in both neighbours are the Gaussian mechanism, and a value present in one
only is released, with or without its count, in at most delta_sel of fits.

* Sensitivity (replace-one: the same n, one record's row changed). In a string column
  (and the label) a record moves one unit from its old value's count to its new one's:
  L2 change sqrt(2). A missing count changes by at most 1. One record holds one value per
  column, so over all columns the vector moves by at most
  ``Delta = sqrt(2 (p_string + labels) + p_missing)``. With ``sigma = Delta / mu_sel`` the
  counts of the values present in both neighbours are a Gaussian mechanism of multiplier
  ``1 / mu_sel`` (``Gaussian(1 / mu_sel, 1)``; it composes with the model's Gaussians).
  With reference coding (below) a declared column releases the counts of its levels,
  ``<missing>`` and ``<other>``: public keys, one unit moved between two of them, so it
  counts as a string column in Delta (sqrt(2)) and needs no threshold.
* Values present in only one neighbour: the changed record can hold up to one such value
  per data-driven column (``k = p_string + labels``), each with count 1. It is released only
  if ``1 + N(0, sigma^2) > tau``; ``tau = 1 + sigma * Phi^-1(1 - delta_sel / k)`` makes that
  happen with probability at most ``delta_sel`` over all k. The selection is then
  (epsilon, delta_gauss + delta_sel)-DP; ``delta_sel`` is ``SELECTION_DELTA_SHARE`` of the fit's
  delta, and the Gaussian mechanisms of the whole fit are accounted at the rest of delta.
  A value held by one record (an id, a rare label) appears in at most ``delta_sel`` of fits.

Reference coding (``coding="reference"``, what ``inference=True`` uses): one-hot levels sum
to the intercept's column and ``<other>`` or a declared level may be empty, so their
coefficients are not identified. Instead each categorical column leaves out its reference
level, the one with the largest released noisy count, and the levels whose noisy count is
below tau; their cells, and the values outside the levels, get no column (the intercept
carries them), so each coefficient is a contrast with that pooled group.

Rare or unselected values go to ``<other>``; ``categories=`` declares a column's levels
(no selection, only the missing count); ``classes=`` declares the labels. The share of mu^2
of the selection is ``SELECTION_SHARE`` (``SELECTION_SHARE_LABELS`` when only labels are
selected): the selection only needs to find the well-populated values, and a value below
tau (about ``tau / n`` of the rows) weighs little in a linear model.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.stats import norm

from dpopt._core.exceptions import ImputedValueWarning
from dpopt._core.validation import SELECTION_DELTA_SHARE  # the selection's share of delta
from dpopt.preprocessing._cells import (
    MISSING,
    OTHER,
    check_keys,
    check_unique_names,
    missing_count,
    number_text,
    text_codes,
    truth_values,
    value_counts,
)
from dpopt.preprocessing._plan import (  # noqa: F401 (public here)
    Column,
    column_kind,
    plan_table,
    schema_levels,
)
from dpopt.preprocessing.target_coding import TargetCode
from dpopt.privacy import Gaussian
from dpopt.privacy.releases import begin

__all__ = ["TableSchema", "Prior", "select_noisy", "selection_threshold", "is_frame",
           "as_pandas", "plan_table", "OTHER", "MISSING", "SELECTION_SHARE",
           "SELECTION_DELTA_SHARE"]

#: Share of mu^2 of the partition selection when string columns or missing counts are selected.
SELECTION_SHARE = 0.05
#: The encoded design is sparse (CSR) when a row fills at most this share of its columns
#: (:meth:`TableSchema.prefers_sparse`): CSR then stores at most 3/8 of the dense bytes
#: (12 bytes per stored entry against 8 per cell).
SPARSE_DENSITY = 0.25
#: ... and when the dense design would take at least this many bytes (256 MiB): the default
#: path holds a few copies of its design (scaled, held-out split), so a dense design above
#: this reaches gigabytes, while a smaller one keeps the dense scaling (shift + centering).
SPARSE_MIN_BYTES = 2 ** 28
#: The codings of a categorical column (:class:`TableSchema`): "one-hot", a 0/1 column per
#: level plus ``<other>`` (the default path), or "reference", one per level but a reference
#: level, whose cells and the values outside the levels get no column (the intercept
#: carries them): the coding that identifies the coefficients of ``inference=True``.
CODINGS = ("one-hot", "reference")


# --------------------------------------------------------------------------- frames


def is_frame(X) -> bool:
    """A pandas DataFrame, or a table narwhals can read (polars, pyarrow, ...)."""
    module = (type(X).__module__ or "").split(".")[0]
    if module == "pandas":
        return hasattr(X, "columns") and hasattr(X, "dtypes")
    return module in ("polars", "pyarrow", "modin", "cudf") and hasattr(X, "columns")


def as_pandas(X):
    """A pandas DataFrame from a pandas / polars / pyarrow table (narwhals converts)."""
    if isinstance(X, pd.DataFrame):
        return X
    try:
        # lazy: narwhals is an optional dependency (pip install dpopt[frames])
        import narwhals as nw
    except ImportError:  # pragma: no cover - narwhals is installed with dpopt[frames]
        raise ValueError(f"X is a {type(X).__name__}: install narwhals to fit it, or pass a "
                         f"pandas DataFrame") from None
    native = nw.from_native(X, eager_only=True)
    df = native.to_pandas().copy(deep=False)
    for c, dtype in native.schema.items():
        # the table's own types, which say what a column is whatever its cells: pandas makes
        # an integer column with a missing cell float and a bool one object (text to the
        # table layer), so one record's empty cell would change the plan; nullable types
        # keep the column's kind
        if dtype.is_integer():
            df[c] = df[c].astype("UInt64" if dtype.is_unsigned_integer() else "Int64")
        elif dtype == nw.Boolean:
            df[c] = df[c].astype("boolean")
    # an Arrow dictionary (polars categorical) column arrives as a pandas category of the
    # values the data holds: text to the table layer, as every undeclared category
    return df


# --------------------------------------------------------------------------- selection


def selection_threshold(sigma, k, delta_sel):
    """tau with P(1 + N(0, sigma^2) > tau) <= delta_sel / k (module docstring)."""
    if k == 0:
        return 1.0 + sigma * 4.0  # only fixed partitions: any threshold is post-processing
    return 1.0 + sigma * float(norm.isf(delta_sel / k))


def select_noisy(counts, sigma, tau, rng):
    """{key: noisy count} of the keys of ``counts`` whose count + N(0, sigma^2) exceeds tau
    (in sorted key order). Releasing the kept keys' noisy counts with them is the same
    mechanism (Gaussian thresholding releases (key, noisy count) pairs: Desfontaines et al.
    2022; the counts of keys present in both neighbours are the Gaussian mechanism of the
    module docstring, a key present in one only is hidden by the threshold)."""
    keys = sorted(counts)
    if not keys:
        return {}
    noisy = np.array([counts[k] for k in keys], float) + rng.standard_normal(len(keys)) * sigma
    return {k: float(v) for k, v in zip(keys, noisy) if v > tau}


# --------------------------------------------------------------------------- schema


@dataclass
class TableSchema:
    """A fitted table encoding: the columns, the released levels and what was spent."""

    columns: list
    records: list = field(default_factory=list)
    delta: float = 0.0  # delta_sel of the threshold
    sigma: float = 0.0
    threshold: float = 0.0
    coding: str = "one-hot"  # or "reference" (:data:`CODINGS`)
    #: the released noisy counts by column: a selected column's kept values, and with
    #: reference coding every key of a declared column (:func:`_declared_counts`)
    counts: dict = field(default_factory=dict)

    # ---- names and bounds of the encoded features
    def feature_names_out(self):
        """One name per encoded feature: a column's own name, or ``column_level`` for its
        levels and ``column_missing`` for its missing indicator. A made-up name that another
        column already has (a column "a" of level "b" beside a column "a_b") gets the first
        free suffix ".1", ".2", ... (as pandas names repeated columns): the names are unique
        and the table's own names are kept. Public: names and released levels only."""
        named = []  # (name, made up)
        for c in self.columns:
            levels = [] if c.one_column else [f"{c.name}_{v}" for v in self._coded_levels(c)] + (
                [] if self.coding == "reference" else [f"{c.name}_{OTHER}"])
            named += [(str(c.name), False)] if c.one_column else [(v, True) for v in levels]
            if c.has_missing and c.kind in ("numeric", "bool"):
                named.append((f"{c.name}_missing", True))
        taken, out = {n for n, made in named if not made}, []
        for name, made in named:
            base, k = name, 0
            while made and name in taken:
                k += 1
                name = f"{base}.{k}"
            taken.add(name)
            out.append(name)
        return out

    def public_bounds(self, numeric_bounds=None):
        """(lower, upper) of the encoded features: [0, 1] for every 0/1 column, NaN (to be
        estimated privately) for numeric ones unless ``numeric_bounds[name]`` is given."""
        numeric_bounds = numeric_bounds or {}
        lo, hi = [], []
        for c in self.columns:
            width = self._width(c)
            if c.kind == "numeric":
                b = numeric_bounds.get(c.name, (math.nan, math.nan))
                lo.append(float(b[0]))
                hi.append(float(b[1]))
                width -= 1
            if c.code is not None:  # released values: public
                b = c.code.bounds()
                lo.append(b[0])
                hi.append(b[1])
                continue
            lo += [0.0] * width
            hi += [1.0] * width
        return np.array(lo), np.array(hi)

    def to_dict(self):
        """The schema as JSON-ready data (for a model file): the released levels only."""
        return {"columns": [{"name": str(c.name), "kind": c.kind, "levels": list(c.levels),
                             "missing_indicator": bool(c.has_missing),
                             "reference": c.reference,
                             **({"target_code": c.code.to_dict()} if c.code is not None else {})}
                            for c in self.columns],
                "threshold": self.threshold, "delta": self.delta, "coding": self.coding}

    @classmethod
    def from_dict(cls, data):
        """The schema :meth:`to_dict` wrote; a ValueError where a field has another type,
        an unknown kind or repeated levels (a model file is untrusted input)."""
        cols = [Column(d["name"], d["kind"], d["kind"] != "string", schema_levels(d),
                       bool(d["missing_indicator"]), d.get("reference"),
                       TargetCode.from_dict(d["target_code"]) if "target_code" in d else None)
                for d in data["columns"]]
        if len({c.name for c in cols}) != len(cols):
            raise ValueError("a table schema names each column once")
        coding = data.get("coding", "one-hot")
        if coding not in CODINGS or any(
                c.reference is not None and c.reference not in c.levels + [MISSING] * c.has_missing
                for c in cols):
            raise ValueError(f"a table schema's coding is one of {CODINGS}, its reference a level")
        return cls(cols, [], float(data.get("delta", 0.0)), 0.0, float(data.get("threshold", 0)),
                   coding)

    def describe(self):
        """Lines for a report: per column, its kind and released levels (a name or level
        holding a line break or another unprintable character shown by its repr, so each
        column stays on its line)."""
        lines = []
        reference = self.coding == "reference"
        for c in self.columns:
            miss = (" (+ missing indicator)" if c.has_missing and c.reference != MISSING
                    else "")
            pooled = (f"; others -> {OTHER}" if not reference else "; no column"
                      if c.reference is None else
                      f"; reference level {c.reference!r} (no column), with the others")
            if c.code is not None:
                lines.append(f"{c.name}: target-coded: the private mean of y over its value's "
                             f"bucket ({len(c.code.values)} of {c.code.buckets} buckets "
                             f"resolved; in y's centred, scaled units)")
            elif c.kind == "string":
                shown = ", ".join(map(_printable, c.levels)) if c.levels else "no level kept"
                lines.append(f"{c.name}: chosen privately: {shown}{pooled}{miss}")
            elif c.kind == "declared":
                what = (f"declared categories (public schema), {len(c.levels)} held by records "
                        f"(noisy counts)" if reference else
                        f"{len(c.levels)} declared categories (public schema)")
                lines.append(f"{c.name}: {what}{pooled}{miss}")
            elif c.kind == "bool":
                lines.append(f"{c.name}: bool, 0/1 with public bounds [0, 1]{miss}")
            elif c.has_missing:
                lines.append(f"{c.name}: numeric, missing -> 0 + indicator")
        return [line if line.isprintable() else _printable(line) for line in lines]

    def _width(self, c):
        if c.code is not None:
            return 1
        if c.kind in ("numeric", "bool"):
            return 1 + int(c.has_missing)
        return len(self._coded_levels(c)) + int(self.coding != "reference")

    @staticmethod
    def _coded_levels(c):
        """The levels of a categorical column that get a column, in order (``<missing>`` last
        when kept; ``<other>`` not included): all of them, or all but the reference."""
        kept = c.levels + ([MISSING] if c.has_missing else [])
        return [v for v in kept if v != c.reference]

    def _warn_imputed(self, df):
        """At prediction (never on training data: the warning would tell whether a record
        has a missing cell): an :class:`ImputedValueWarning` naming the columns of ``df``
        whose missing cells the model has no indicator or level for."""
        silent = [c.name for c in self.columns  # (a target code: its missing key's bucket)
                  if not (c.has_missing if c.code is None else c.code.released(MISSING))
                  and bool(pd.isna(df[c.name]).any())]
        if silent:
            warnings.warn(f"column(s) {silent} hold missing values, but the model has no "
                          f"missing indicator for them (none or too few were missing in training "
                          f"to be released): a missing number or bool is imputed at 0, a missing "
                          f"category counts as one outside the levels (a target-coded one: as "
                          f"a value of no released mean)", ImputedValueWarning, stacklevel=5)

    @staticmethod
    def warn_unmatched(lost):
        """At prediction (never on training data, as :meth:`_warn_imputed`): an
        :class:`ImputedValueWarning` naming the categorical columns that held values but none
        of the model's levels (``lost``: :meth:`_level_codes`'s), so that every row counts as
        outside them: most likely the column is written otherwise than in training (other
        case, numbers for text, another code)."""
        lost = [name for name, unmatched in (lost or {}).items() if unmatched]
        if lost:
            warnings.warn(f"column(s) {lost} hold none of the model's levels in any row: every "
                          f"value counts as one outside the levels; is the column written as in "
                          f"training (case, numbers as text)?", ImputedValueWarning,
                          stacklevel=4)

    # ---- the encoding (a per-record map: free)
    def transform(self, df, *, at_prediction=False, lost=None):
        """The float matrix of ``df`` (columns matched by name; unseen levels -> other).
        ``at_prediction``: ``df`` is not the private data, so missing cells without an
        indicator and columns matching no level may be warned about (:meth:`_warn_imputed`,
        :meth:`warn_unmatched`); ``lost``: a dict that gathers :meth:`_level_codes`'s over
        blocks of rows instead, for the caller to warn about once."""
        df = self.checked_frame(df, at_prediction)
        n = len(df)
        out = np.zeros((n, sum(self._width(c) for c in self.columns)))
        j, gathered = 0, lost if lost is not None else ({} if at_prediction else None)
        for c in self.columns:  # filled in place: no per-column blocks to stack
            width = self._width(c)
            self._encode(c, df[c.name], out[:, j:j + width], gathered)
            j += width
        if lost is None:
            self.warn_unmatched(gathered)
        return out

    # ---- the sparse design: at most one stored entry per slot of a row
    def row_slots(self):
        """The most entries a row can have in the encoded design (public schema): one per
        numeric / bool value and per missing indicator, one per categorical column (its
        level or ``<other>``)."""
        return sum(self._width(c) if c.one_column else int(self._width(c) > 0)
                   for c in self.columns)

    def prefers_sparse(self, n):
        """Whether the default path gets the design as CSR (from public n and schema only):
        the one-hot columns dominate (a row fills at most :data:`SPARSE_DENSITY` of the
        encoded columns) and the dense design would take at least :data:`SPARSE_MIN_BYTES`.
        The sparse design changes the model's scaling (no shift, no centering: see
        docs/tables.md), which costs a little accuracy (Adult: 0.844 against 0.849 dense), so
        it is kept for designs whose dense copies would strain memory. Never with reference
        coding (``inference=True``): on the unshifted scaling the intervals' noisy Gram matrix
        lost its smallest eigenvalue where the dense design gave intervals (an independent
        fuzz: 180 levels at n = 190,000, epsilon = 50)."""
        width = sum(self._width(c) for c in self.columns)
        return (self.coding != "reference" and width > 0 and self.row_slots() <= SPARSE_DENSITY * width
                and 8 * n * width >= SPARSE_MIN_BYTES)

    def transform_sparse(self, df, *, at_prediction=False):
        """The design of :meth:`transform` as a CSR matrix, built row-slot by row-slot (each
        row has exactly :meth:`row_slots` stored entries, some may be explicit zeros): no
        dense n x width matrix is ever made."""
        df = self.checked_frame(df, at_prediction)
        n, k = len(df), self.row_slots()
        data = np.zeros((n, k))
        indices = np.zeros((n, k), dtype=np.int32)
        slot, j, lost = 0, 0, {} if at_prediction else None
        for c in self.columns:
            width = self._width(c)
            if c.one_column:
                block = np.zeros((n, width))
                self._encode(c, df[c.name], block, lost)
                data[:, slot:slot + width] = block
                indices[:, slot:slot + width] = np.arange(j, j + width)
                slot += width
            elif width:  # one slot: the cell's level (an explicit 0 for a reference cell)
                codes = self._level_codes(c, df[c.name], lost)
                indices[:, slot] = j + np.maximum(codes, 0)
                data[:, slot] = codes >= 0
                slot += 1
            j += width
        self.warn_unmatched(lost)
        indptr = np.arange(0, n * k + 1, k, dtype=np.int64)
        return sp.csr_matrix((data.ravel(), indices.ravel(), indptr), shape=(n, j))

    def checked_frame(self, df, at_prediction=False):
        """``df`` as a pandas frame holding the schema's columns (:meth:`_warn_imputed` at
        prediction)."""
        if not is_frame(df):  # the schema matches columns by name: an array has none
            raise ValueError(f"X must be a table (a DataFrame) with the columns the model was "
                             f"fitted on, {[c.name for c in self.columns]}: its columns are "
                             f"matched by name; got {type(df).__name__}")
        df = as_pandas(df)
        missing = [c.name for c in self.columns if c.name not in df.columns]
        if missing:
            raise ValueError(f"X lacks the column(s) {missing} of the training schema; "
                             f"columns given: {list(df.columns)}")
        check_unique_names(df.columns, among={c.name for c in self.columns})
        if at_prediction:
            self._warn_imputed(df)
        return df

    def key_levels(self, c, keys):
        """Index of each text key among column ``c``'s coded levels, -1 outside them (one-hot:
        its ``<other>``). A number written another way matches too ("1" and "1.0": a float
        category's whole values are keyed as integers, a float column's are not)."""
        levels = self._coded_levels(c)
        out = pd.Index(levels, dtype=object).get_indexer(keys).astype(np.int64)
        outside = np.flatnonzero(out < 0)
        if outside.size:
            known = {number_text(v): j for j, v in enumerate(levels)}
            if len(known) == len(levels):
                out[outside] = [known.get(number_text(keys[i]), -1) for i in outside]
        return out

    def _level_codes(self, c, s, lost=None):
        """Index of each cell's column among the coded levels: ``<other>`` last (one-hot), or
        -1, no column (reference coding: the reference level and the values outside the levels).
        ``lost`` (a dict, at prediction): ``c``'s name -> whether its cells so far hold values
        but none of its levels (:meth:`warn_unmatched`), from the distinct keys (no extra pass)."""
        levels = self._coded_levels(c)
        cell_codes, keys = text_codes(s, c.name)
        check_keys(c.name, keys)  # a lone surrogate at prediction: named, not pyarrow's error
        to_level = self.key_levels(c, keys)
        if lost is not None and c.levels and len(keys) > 1:  # keys: the texts, MISSING last
            held = bool((to_level[:-1] >= 0).any()) or (c.reference is not None and number_text(
                c.reference) in {number_text(k) for k in keys[:-1]})  # the reference's no column
            lost[c.name] = lost.get(c.name, True) and not held
        if self.coding != "reference":
            to_level[to_level < 0] = len(levels)  # unselected, undeclared or unseen: <other>
        return to_level[cell_codes]

    def _encode(self, c, s, out, lost=None):
        """Write column ``c`` of the values ``s`` into ``out`` (its encoded columns);
        ``lost``: :meth:`_level_codes`'s."""
        if c.code is not None:
            out[:, 0] = c.code.transform(s)
            return
        absent = pd.isna(s).to_numpy()
        if c.kind == "numeric":
            column_kind(c.name, s.dtype, ())  # dates, durations, complex: refused as at fit
            try:
                v = pd.to_numeric(s, errors="raise")
                if pd.api.types.is_complex_dtype(v.dtype):
                    raise TypeError("complex")
            except (ValueError, TypeError):
                raise ValueError(f"column {c.name!r} was numeric at fit time but holds "
                                 f"non-numbers now; fix its values") from None
            out[:, 0] = v.to_numpy(dtype=np.float64, na_value=np.nan)
            out[absent, 0] = 0.0
            if not np.all(np.isfinite(out[:, 0])):
                raise ValueError(f"column {c.name!r} holds an infinite value; replace it by a "
                                 f"finite number or a missing value")
        elif c.kind == "bool":
            out[~absent, 0] = truth_values(c.name, s[~absent])
        else:
            codes = self._level_codes(c, s, lost)
            rows = np.flatnonzero(codes >= 0)
            out[rows, codes[rows]] = 1.0
            return
        if c.has_missing:
            out[:, 1] = absent


def _printable(text):
    """``text``, or its repr when it holds a line break or another unprintable character."""
    return text if str(text).isprintable() else repr(text)


def fit_schema(df, columns, mu, delta_sel, rng, counts=None, coding="one-hot"):
    """Run the partition selection (module docstring) on ``df``'s columns planned by
    :func:`plan_table`; returns ``(TableSchema, None)``. ``mu``: its Gaussian-DP budget;
    ``delta_sel``: the threshold's delta (over all its data-driven columns). ``counts``:
    ``({column: {value: count}}, {column: missing count})`` counted elsewhere (over Dask
    partitions); by default counted on ``df``. ``coding="reference"`` (in memory only):
    each categorical column leaves out one level (:data:`CODINGS`), chosen from released
    counts, and a declared column's levels are counted too (:func:`_declared_counts`)."""
    if counts and coding == "reference":
        raise ValueError("reference coding counts the declared levels: it needs the table")
    values, missing = counts or ({}, {})
    data_driven = [c for c in columns if c.kind == "string"]
    counted = [c for c in columns if c.kind == "declared" and coding == "reference"]
    fixed = [c for c in columns if c.kind != "string" and c.missable and c not in counted]
    k = len(data_driven)
    noisy = {}
    if k == 0 and not fixed and not counted:
        return _with_references(TableSchema(columns, coding=coding), noisy), None
    begin()  # the counts below are released (a failure after them is charged whole)
    sigma = selection_sensitivity(k, len(counted), len(fixed)) / mu
    tau = selection_threshold(sigma, k, delta_sel)
    for c in data_driven:
        kept = select_noisy(values[c.name] if counts else value_counts(df[c.name]), sigma,
                            tau, rng)
        c.has_missing = MISSING in kept
        c.levels = [v for v in kept if v != MISSING]
        noisy[c.name] = kept
    for c in counted:  # public keys: every noisy count is released, tau only post-processes
        noisy[c.name] = {key: count + rng.standard_normal() * sigma
                         for key, count in _declared_counts(df[c.name], c.levels).items()}
        c.has_missing = bool(noisy[c.name][MISSING] > tau)
        c.levels = [v for v in c.levels if noisy[c.name][v] > tau]
    for c in fixed:
        count = missing[c.name] if counts else missing_count(df[c.name])
        c.has_missing = bool(count + rng.standard_normal() * sigma > tau)
    schema = TableSchema(columns, [Gaussian(1.0 / mu, 1)], float(delta_sel) if k else 0.0,
                         sigma, tau, coding, noisy)
    return _with_references(schema, noisy), None


def selection_sensitivity(selected, counted, fixed):
    """L2 sensitivity of the selection's counts under replace-one: a changed record moves
    one unit between two keys of each selected column and of each declared column counted
    for reference coding (sqrt(2) each), and changes each other missing count by at most 1."""
    return math.sqrt(2.0 * (selected + counted) + fixed)


def _declared_counts(s, levels):
    """{key: count} of a declared column over public keys: each level, ``<missing>`` and
    ``<other>`` (values outside the levels). A replaced record moves one unit between two
    keys: L2 sensitivity sqrt(2), as a selected column's counts."""
    present = value_counts(s)
    out = {v: present.get(v, 0) for v in levels}
    out[MISSING] = present.get(MISSING, 0)
    out[OTHER] = len(s) - sum(out.values())
    return out


def _with_references(schema, noisy):
    """Reference coding (``schema.coding == "reference"``): each categorical column's
    reference level is the level (``<missing>`` included, when kept) with the largest
    released noisy count: the best-populated, so that its contrasts are the most precise
    (post-processing). A level whose noisy count is below the threshold has no column
    either: it would be (nearly) empty, and an empty level's column makes the design
    singular, a declared category no record holds as much as an empty ``<other>``."""
    if schema.coding == "reference":
        for c in schema.columns:
            kept = c.levels + ([MISSING] if c.has_missing else [])
            if c.kind in ("string", "declared") and kept:
                c.reference = max(kept, key=noisy[c.name].__getitem__)
    return schema


def selection_share(columns):
    """The share of mu^2 of the columns' selection (0 when no column is selected)."""
    return SELECTION_SHARE if any(c.kind == "string" or c.missable for c in columns) else 0.0


def delta_split(delta, has_threshold):
    """(delta of the Gaussian mechanisms, delta_sel of the threshold)."""
    if not has_threshold:
        return delta, 0.0
    return delta * (1.0 - SELECTION_DELTA_SHARE), delta * SELECTION_DELTA_SHARE


@dataclass
class Prior:
    """Releases run before :func:`dpopt.pipeline.default_path.fit_default`, composed with it: a share of
    mu^2, the threshold's delta, their records and a description for the plan."""

    share: float
    delta: float
    records: list
    info: dict
