"""Read a data table (CSV, compressed CSV, Parquet) into a DataFrame (``dpopt fit`` / ``predict``).

The reading is pandas' (``pandas.read_csv``, ``pandas.read_parquet``); nothing is parsed
by hand. Text columns are parsed into integer codes and handed on as Arrow dictionary
columns, whose values the table layer still selects privately (:func:`read_frame`). The
columns are then encoded by the table layer :mod:`dpopt.preprocessing.tables` (column kinds,
private selection of categories, missing values), the same code as a DataFrame passed to an
estimator.

* **Header.** A CSV's first row is its header unless ``--no-header`` says the file has
  none (the columns are then ``col1``, ``col2``, ...): a declaration, not a guess from the
  first row, which in a file without a header is a record. A header naming a column with
  a number, or one name twice, is refused (:func:`check_header`): a file without a header
  read as if it had one.
* **Rows and cells**: a table (CSV or Parquet) with a header and no row is refused; so is
  a CSV row with more fields than the header, and a CSV cell that spans lines
  (:func:`check_line_breaks`: a stray quote would merge records into one cell). Column
  names are text without surrounding spaces, one name per column.
* **Missing values** are empty cells and pandas' tokens (``NA``, ``N/A``, ``NaN``,
  ``null``, ``None``, ...) plus ``?``.
* **Column kinds** are numbers, True/False or text. A column whose present cells are all of
  one kind has that kind; a column mixing kinds (numbers and a text cell, say) is refused
  before anything is fitted (:func:`check_one_kind`), unless ``--numbers`` or ``--text``
  declares it: pandas would otherwise decide from the cells, and one record could then turn a
  numeric column into a text one, a change of the model that no noise pays for (a Parquet
  file's schema types each column: its kinds are public and not checked). A declared
  kind is public: ``text`` reads every cell as a text level (``01`` stays ``01``),
  ``numbers`` reads a cell that is not a number as missing. A column with one present
  cell is refused undeclared too; a column with none is left out (reported). Integer feature columns are made
  float, so that whether a column can hold a missing value does not depend on the data.
* **Target**: a column name, or its number counted from 1 (negative numbers count from the
  end; default the last column). Names come first: a number is a position only where no
  column carries it as its name (``--target 3`` is the column named ``3`` if there is one).
"""

from __future__ import annotations

import lzma
import os
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

#: Extra missing-value tokens (pandas' defaults are kept).
EXTRA_MISSING = ("?",)
CSV_SUFFIXES = (".csv", ".tsv", ".txt.gz", ".csv.gz", ".csv.bz2", ".csv.xz", ".csv.zst",
                ".tsv.gz")
PARQUET_SUFFIXES = (".parquet", ".pq")


def separator(path):
    """The field separator a table file's suffix names: tabs for .tsv (.tsv.gz), else commas."""
    return "\t" if os.fspath(path).lower().endswith((".tsv", ".tsv.gz")) else ","


def is_parquet(path) -> bool:
    """Whether ``path`` names a Parquet file (or dataset), whose schema types its columns."""
    return os.fspath(path).lower().endswith(PARQUET_SUFFIXES)


def is_table_path(path) -> bool:
    """A file :func:`read_table` reads (CSV, compressed CSV, TSV, Parquet)."""
    name = os.fspath(path).lower()
    return name.endswith(CSV_SUFFIXES + PARQUET_SUFFIXES)


def check_numeric_file(path):
    """A DATA that is no table must be a numeric file (npz, LIBSVM); otherwise a
    ValueError listing every type the commands read."""
    # lazy: the light CLI commands load no heavy module
    from dpopt.datasets.loaders import FILE_SUFFIXES

    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix not in FILE_SUFFIXES:
        raise ValueError(f"DATA: {os.fspath(path)!r} is of no type dpopt reads: tables "
                         f"({', '.join(CSV_SUFFIXES + PARQUET_SUFFIXES)}) or numeric files "
                         f"({', '.join(s for s in FILE_SUFFIXES if s != '.csv')})")


#: Rows read first to tell text columns from numbers (the whole file is then read once).
SNIFF_ROWS = 2000


@dataclass(frozen=True)
class Reading:
    """How a table file is read: public declarations, never guessed from the cells.

    ``header``: whether a CSV's first row is its header (``--no-header``: it is data, the
    columns ``col1``, ``col2``, ...); ``text`` / ``numbers``: the columns declared text or
    numbers (module docstring). ``from_model``: the declarations of a model file's fit
    (``dpopt predict``): errors call them the fit's, and a declared column the file lacks
    is left to the model's schema to name (the target need not be there).
    """

    header: bool = True
    text: tuple = ()
    numbers: tuple = ()
    from_model: bool = False

    @classmethod
    def of_model(cls, data, header=None):
        """The reading a model file's ``data`` records (``header`` given: it overrides)."""
        kinds = data.get("kinds") or {}
        return cls(header=data.get("header", True) is not False if header is None else header,
                   text=tuple(kinds.get("text", ())), numbers=tuple(kinds.get("numbers", ())),
                   from_model=True)

    def to_model(self):
        """What the model file records, for :meth:`of_model`."""
        return {"kinds": {"text": list(self.text), "numbers": list(self.numbers)},
                "header": self.header}

    def option(self, name):
        """How an error names a declaration."""
        return f"{name} (of the model's fit)" if self.from_model else name


def read_frame(path, reading=Reading(), *, one_kind=False, target=None):
    """The whole table as a DataFrame, read as ``reading`` declares (:class:`Reading`); a
    ValueError naming the path when it is unreadable. Column names are text, stripped, and
    each names one column (every format).

    ``one_kind``: refuse a column that is not declared and whose kind the cells would decide
    (:func:`check_one_kind`; ``dpopt fit``, whose ``target`` is checked first; ``dpopt
    predict`` reads through the model's schema, which says what each column is). A Parquet
    file's schema types every column (a text column of digits such as ZIP codes stays
    text): its kinds are the file's, not the cells', and are not checked.

    Memory: a text column is parsed straight into integer codes (pandas' C parser with
    ``dtype="category"`` for the columns whose first :data:`SNIFF_ROWS` rows hold text), a
    text column to the table layer (an undeclared ``category``: its values are data, chosen
    privately like any string column). The peak is about 2.3x the
    file (``benchmarks/table_memory.py``) where Python string objects made it 4x.
    """
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    typed = is_parquet(path)
    if typed:
        names, nested, truths = _reading(path, _parquet_columns, path)
        check_unique_columns(_names_as_read(names))
        if nested:
            raise ValueError(f"column(s) {nested} hold lists, maps or records: a table "
                             f"column holds one number, True/False or text per row")
        df = _reading(path, pd.read_parquet, path)
        df.columns = _names_as_read(df.columns)
        for c in _names_as_read(truths):  # the schema's True/False, whatever the cells: pandas
            df[c] = df[c].astype("boolean")  # reads one without a value as objects (text)
        given = _declared(df.columns, reading)
    else:
        df, given = _read_csv(path, reading)
    if df.shape[0] == 0:  # one check for every format (pandas reads a 0-row Parquet file)
        raise ValueError(f"{os.fspath(path)!r} has no data rows")
    df = declared_kinds(df, given)
    if one_kind:
        if target is not None:  # an argument is named before the cells
            target_column(target, list(df.columns))
        if not typed:  # a Parquet column's kind is its schema's: public, one per column
            check_one_kind(df, given)
    return df


def _read_csv(path, reading):
    """``(frame, declared kinds)`` of a CSV file: one pass over its first rows to tell text
    columns (parsed as categories), then the whole file."""
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    sep = separator(path)
    if reading.header:  # pandas renames a repeated name ("a", "a.1"): checked as written
        check_header(_reading(path, pd.read_csv, path, sep=sep, header=None, nrows=1,
                              dtype=str, skipinitialspace=True).iloc[0].tolist())
    # index_col=False: a record with one field more than the header is refused (pandas
    # would otherwise make the first column an index and shift the names by one)
    options = {"sep": sep, "header": 0 if reading.header else None, "index_col": False,
               "na_values": list(EXTRA_MISSING), "skipinitialspace": True}
    head = _reading(path, pd.read_csv, path, nrows=SNIFF_ROWS, **options)
    names = (_names_as_read(head.columns) if reading.header
             else [f"col{j + 1}" for j in range(head.shape[1])])
    given = _declared(names, reading)
    dtype = {c: "category" for c, name in zip(head.columns, names) if name not in given
             and _is_text(head[c].dtype) and not _true_false(head[c])}
    dtype.update({c: str for c, name in zip(head.columns, names) if name in given})
    df = _reading(path, pd.read_csv, path, dtype=dtype or None, **options)
    df.columns = names
    check_line_breaks(df)
    return df, given


def check_line_breaks(df):
    """Refuse a CSV whose parsed cells (or names) hold a line break. Such a cell is a quoted
    field spanning lines, and one record's stray opening quote (a cell ``"a``) makes one
    such field of every line up to the next quote anywhere in the file: the records in
    between vanish into one cell, the merged row has its count of fields (no parser error), and n
    follows that one record (400 rows read as 110). Only text columns can hold the
    merged cell (a number column holding it is mixed, refused)."""
    broken = [c for c in df.columns if _has_line_break(df[c])
              or "\n" in str(c) or "\r" in str(c)]
    if broken:
        raise ValueError(
            f"column(s) {broken} hold a cell (or a name) that spans lines, a quoted field "
            f"with a line break: a stray quote in one record would merge the records after "
            f"it into one cell, so such files are refused; remove the line breaks from those "
            f"cells (or write the table as Parquet)")


def _has_line_break(s):
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    if isinstance(s.dtype, pd.CategoricalDtype):
        s = pd.Series(s.cat.categories.astype(str))
    elif pd.api.types.is_numeric_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype):
        return False
    return bool(s.astype("string").str.contains("[\r\n]", regex=True).any())


def _reading(path, read, *args, **kwargs):
    """``read(*args, **kwargs)``, a pandas or pyarrow reader; its failure is a ValueError
    naming ``path`` (:func:`_read_error`), raised outside the handler so that the reader's
    error, which can quote a cell, is not kept as its ``__context__``. A row with more
    fields than the header (pandas' ParserWarning) is a failure."""
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)
            return read(*args, **kwargs)
    except (OSError, ValueError, UnicodeDecodeError, EOFError, ImportError, lzma.LZMAError,
            pd.errors.ParserWarning) as exc:  # EOFError, LZMAError: a broken compressed file
        failed = _read_error(exc)
    raise ValueError(f"cannot read {os.fspath(path)!r}: {failed}")


def _names_as_read(columns):
    """Column names as the CLI reads them: text, stripped of surrounding spaces."""
    return [str(c).strip() for c in columns]


def _declared(names, reading):
    """``{column name: "text" or "numbers"}`` of the declared names; a ValueError naming the
    option for a name that is not a column (left out when ``reading.from_model``) or a
    column declared twice."""
    text, numbers = _split(reading.text, names), _split(reading.numbers, names)
    both = sorted(set(text) & set(numbers))
    if both:
        raise ValueError(f"column(s) {both} declared both --text and --numbers")
    given = {}
    for option, declared, kind in (("--text", text, "text"), ("--numbers", numbers, "numbers")):
        unknown = [name for name in declared if name not in names]
        if unknown and not reading.from_model:
            raise ValueError(f"{reading.option(option)}: {unknown} not a column of the "
                             f"table; columns: {list(names)}")
        given.update({name: kind for name in declared if name in names})
    return given


def _split(entries, names):
    """The column names of ``--text`` / ``--numbers`` entries: an entry that names a column
    is that column (a name may hold a comma: ``size, cm``), any other is split at its
    commas."""
    return [part for entry in entries
            for part in ([entry] if entry in names else [p.strip() for p in entry.split(",")])]


def declared_kinds(df, given):
    """The declared columns in their kind: a text column as categories of its cells' text
    (a missing cell stays missing), a numbers column as float, a cell that is not a number
    missing. Column by column (no copy of the whole frame)."""
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    if given:
        df = df.copy(deep=False)
    for c, kind in given.items():
        s = df[c]
        if kind == "numbers":
            s = pd.to_numeric(s.astype("string").str.strip(), errors="coerce")
            df[c] = s.astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            df[c] = _as_text(s).astype("category")
    return df


def _as_text(s):
    """The cells of a declared text column as text; a typed float column (Parquet) writes a
    whole number as an integer, "10" as a CSV would, not "10.0", so that one table stored
    either way gives the model the same levels."""
    if s.dtype.kind != "f" and str(s.dtype) not in ("Float32", "Float64"):
        return s.astype("string")
    values = s.astype("Float64")
    whole = (values.notna() & (values % 1 == 0) & (values.abs() < 2.0 ** 53)).fillna(False)
    text = values.astype("string")
    text[whole] = values[whole].astype("Int64").astype("string")
    return text


def check_one_kind(df, declared=()):
    """Refuse a column not ``declared`` whose kind its cells would decide, and so one
    record: its present cells are of more than one kind (numbers, True/False, text), or of
    one kind that is not the kind pandas read it as (a number pandas' parser does not take,
    such as ``99999999999999999999`` or ``1_000``, makes a column text), or just one (its
    kind would be that record's; with two or more of one kind, changing one record leaves
    that kind or a mixed column). A column with no present cell has no kind to check
    (:func:`read_table` leaves it out). The refusal comes before any release and names the
    column, not its cells."""
    sparse = [c for c in df.columns if c not in declared and df[c].count() == 1]
    if sparse:
        raise ValueError(
            f"column(s) {sparse} have one cell that is not missing: what kind they are "
            f"(numbers, True/False, text) would be read from that record; declare each one "
            f"(--numbers NAME or --text NAME) or drop it from the file")
    mixed = [c for c in df.columns if c not in declared and df[c].dtype.kind not in "mM"
             and not cell_kinds(df[c]) <= {read_kind(df[c])}]  # mM: the table layer names
    # a column of dates or durations (its typed dtype is the file's, not the cells')
    if mixed:
        raise ValueError(
            f"column(s) {mixed} hold cells of more than one kind (numbers, True/False, text), "
            f"or numbers the reader takes for text: a kind read from the cells would depend "
            f"on the private records; declare each "
            f"one: --numbers NAME (a cell that is not a number is read as missing) or --text "
            f"NAME (every cell is a text level)")


def cell_kinds(s):
    """The kinds of a column's present cells: a subset of {"number", "truth", "text"}."""
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    if not s.notna().any():
        return set()
    if pd.api.types.is_bool_dtype(s.dtype):
        return {"truth"}
    if pd.api.types.is_numeric_dtype(s.dtype):
        return {"number"}
    values = (s.cat.categories if isinstance(s.dtype, pd.CategoricalDtype)
              else pd.unique(s.dropna().to_numpy()))
    return {_kind_of(v) for v in values}


def read_kind(s):
    """The kind pandas read column ``s`` as: "number", "truth" or "text"."""
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    if pd.api.types.is_bool_dtype(s.dtype) or _true_false(s):
        return "truth"
    return "number" if pd.api.types.is_numeric_dtype(s.dtype) else "text"


def _kind_of(value):
    if isinstance(value, (bool, np.bool_)):
        return "truth"
    if isinstance(value, (int, float, np.number)):
        return "number"
    text = str(value).strip()
    if text.lower() in ("true", "false"):
        return "truth"
    return "number" if _is_number(text) else "text"


def _parquet_columns(path):
    """``(names, names of nested columns, names of True/False columns)`` from a Parquet
    file's schema, or a directory of Parquet files' (a dataset, as the estimators read a
    path; its index columns left out); nested: lists, maps, records."""
    # lazy: the light CLI commands load no heavy module (pyarrow: optional)
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.ParquetDataset(path).schema if os.path.isdir(path) else pq.read_schema(path)
    index = {c for c in (schema.pandas_metadata or {}).get("index_columns", [])
             if isinstance(c, str)}  # a RangeIndex is a dict of metadata, not a column
    fields = [f for f in schema if f.name not in index]
    return ([f.name for f in fields], [f.name for f in fields if pa.types.is_nested(f.type)],
            [f.name for f in fields if pa.types.is_boolean(f.type)])


def check_header_option(no_header, path):
    """``--no-header`` is a CSV's declaration: refused for a Parquet file (its schema names
    the columns) and for a numeric file."""
    name = os.fspath(path).lower()
    if no_header and not name.endswith(CSV_SUFFIXES):
        raise ValueError(f"--no-header applies to CSV files only (a Parquet file's schema "
                         f"names its columns), got {os.fspath(path)!r}")


def check_header(cells):
    """The header as written: refused when a name is a number (a file without a header,
    read as if it had one: its first record would be taken for names) or repeats another."""
    numbers = [j + 1 for j, c in enumerate(cells) if _is_number(c)]
    if numbers:
        raise ValueError(
            f"the first row is read as the header, and its column(s) {numbers} (numbered "
            f"from 1) are named by numbers: pass --no-header if the file has no header "
            f"(its first row is then data), or name those columns with a text that is not a "
            f"number (e.g. 'x3' for '3')")
    check_unique_columns([f"Unnamed: {j}" if not isinstance(c, str) else c.strip()
                          for j, c in enumerate(cells)])  # pandas' name of an empty cell


def _read_error(exc):
    """What a failed read says: the tokenizer's and the file system's messages name places
    (a line, a field count, a path); any other message (a decoding or conversion error)
    may quote a cell, so only its kind is told."""
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, pd.errors.ParserWarning):
        return "a row has more fields than the header"
    if isinstance(exc, OSError) and exc.errno is None:  # gzip's error quotes the file's bytes
        return f"not a readable compressed file ({type(exc).__name__})"
    if isinstance(exc, EOFError):
        return "the compressed file ends early"
    if isinstance(exc, (pd.errors.ParserError, pd.errors.EmptyDataError, OSError, ImportError)):
        return str(exc)  # places, a path, or the optional package a compression needs
    return f"not a readable table ({type(exc).__name__})"


def _is_text(dtype):
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    return not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype))


def _true_false(s):
    """A column of True / False cells with some missing (pandas reads it as object)."""
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    return s.dtype == object and pd.api.types.infer_dtype(s, skipna=True) == "boolean"


def kinds_without_missing_cells(X):
    """pandas reads an integer column as int64 and a True/False column as bool only when no
    cell is missing (one empty cell makes them float and object, the latter then a text
    column to the table layer): those dtypes would tell, through the table layer's plan and
    model, whether some record has a missing value. So every integer feature is made float
    and every True/False feature pandas' nullable boolean, whether or not a cell is missing
    (whether values are missing is then part of the table layer's private release)."""
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    ints = [c for c in X.columns if pd.api.types.is_integer_dtype(X[c].dtype)]
    bools = [c for c in X.columns if X[c].dtype == bool or _true_false(X[c])]
    if ints or bools:
        X = X.copy(deep=False)
        for c in ints:  # one column at a time: no copy of the whole frame
            X[c] = X[c].astype(np.float64)
        for c in bools:
            X[c] = X[c].astype("boolean")
    return X


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


class Table(NamedTuple):
    """A table file as ``dpopt fit`` reads it (:func:`read_table`)."""

    X: object  #: the features, a DataFrame
    y: object  #: the target, a Series
    target: str  #: the target column's name
    empty: list  #: the feature columns left out: no cell of theirs holds a value


def read_table(path, reading=Reading(), *, target=-1):
    """The :class:`Table` of a table file (module docstring); a column whose kind the cells
    would decide is refused unless ``reading`` declares it. A feature column that is not
    declared and holds no value in any row is left out (``Table.empty``): it carries
    nothing, and its kind could only be guessed (a neighbour's one cell is refused); a
    Parquet file's columns are typed by its schema and all kept. A
    True/False target is pandas' nullable boolean (a missing label leaves it one, not Python
    objects); an infinite number in a numeric target is refused."""
    if not Path(path).exists():
        raise ValueError(f"{os.fspath(path)!r} does not exist")
    X, y, name = split_target(read_frame(path, reading, one_kind=True, target=target), target)
    declared = _declared([*X.columns, name], reading)
    if _true_false(y):
        y = y.astype("boolean")
    elif _is_numeric(y) and np.isinf(y.to_numpy(dtype=np.float64, na_value=np.nan)).any():
        raise ValueError(f"the target column {name!r} holds an infinite number")
    # a Parquet column's kind is its schema's: kept however many values it holds (the
    # table layer reads its emptiness privately), where leaving it out at none told that
    empty = [] if is_parquet(path) else [c for c in X.columns if c not in declared and X[c].count() == 0]
    if empty and len(empty) == X.shape[1]:
        raise ValueError(f"no feature column holds a value: {empty}")
    return Table(kinds_without_missing_cells(X.drop(columns=empty)), y, name, empty)


def _is_numeric(s):
    """Whether pandas holds column ``s`` as numbers (not True/False)."""
    # lazy: the light CLI commands load no heavy module
    import pandas as pd

    return pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)


def target_column(target, names, what="target"):
    """The 0-based index of ``target`` (a name, or a number counted from 1, negative from
    the end); errors name the argument ``what``. A text that a column carries as its name is
    that column, digits included (``"3"`` of columns ``3, a, b`` is the first); a number is a
    position only where no column carries it (as ``feature_bounds=`` reads its keys)."""
    if isinstance(target, str):
        if names.count(target) == 1:  # a name a column carries is that column, even digits
            return names.index(target)
        try:
            if names.count(target) > 1:
                raise ValueError
            target = int(target)  # a position only where no column carries that name
        except ValueError:
            why = "is not a column" if target not in names else "names several columns"
            raise ValueError(f"{what} {target!r} {why}; columns: {names}"
                             + delimiter_hint(names)) from None
    if isinstance(target, bool) or not isinstance(target, int):
        raise ValueError(f"{what} must be a column name or number, got {target!r}")
    if target == 0 or not -len(names) <= target <= len(names):
        raise ValueError(f"{what} column number {target} is out of range: columns are numbered "
                         f"1..{len(names)} (or -1 for the last)")
    return target - 1 if target > 0 else len(names) + target


def delimiter_hint(names):
    """A hint when the header read as one column holding another delimiter (a CSV written
    with semicolons or tabs, read with commas)."""
    seps = [s for s in (";", "\t", "|") if len(names) == 1 and s in str(names[0])]
    return (f" (the header is one column holding {seps[0]!r}: write the file with commas, "
            f"or as .tsv for tabs)" if seps else "")


def check_unique_columns(names):
    """Two columns with one name make the target choice and the model's feature names
    ambiguous: refused, naming them."""
    twice = [f"{name!r} ({k} times)" for name, k in Counter(map(str, names)).items() if k > 1]
    if twice:
        raise ValueError(f"duplicate column name(s) {', '.join(twice)} (names are read "
                         f"without surrounding spaces); give every column a unique name")
