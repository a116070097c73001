"""Read (and write) datasets stored in files: NumPy ``.npz``, LIBSVM/svmlight and CSV.

Every reader returns a :class:`LoadedData` named tuple ``(X, y, feature_names)``:
``X`` is a float64 array (or a float64 CSR matrix for LIBSVM files and sparse
``.npz`` files), ``y`` a float64 vector, ``feature_names`` a tuple of str or
None. Labels are returned as stored; :func:`to_signed_labels` maps a two-class
vector to {-1.0, +1.0} when the caller says which class is positive.

A missing file, an unreadable file, a malformed table, NaN or inf values all
raise ``ValueError`` naming the path (docs/design.md invariant 7). A parse error
names where the file is malformed (line, column, entry), found by the readers' own
scan (:mod:`dpopt.datasets._where`), never the cell or label it could not read: the
parser's message, which quotes it, is neither repeated nor chained.

The ``.npz`` layout is the one of the shared data directory (see
``MANIFEST.md``): keys ``X`` (2-D), ``y`` (1-D) and optionally
``feature_names`` (1-D str), no pickled objects. A sparse ``X`` is stored as
CSR under the keys ``X_data``, ``X_indices``, ``X_indptr`` and ``X_shape``
instead of ``X`` (:func:`save_npz` writes both layouts).
"""

from __future__ import annotations

import csv
import os
import warnings
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp

from dpopt._core.validation import check_positive_int
from dpopt.datasets._where import csv_problem, first_non_utf8_line, is_number, libsvm_problem

__all__ = [
    "LoadedData",
    "load_npz",
    "save_npz",
    "load_libsvm",
    "load_csv",
    "load_file",
    "to_signed_labels",
]

_SPARSE_KEYS = ("X_data", "X_indices", "X_indptr", "X_shape")
_LIBSVM_SUFFIXES = (".svm", ".libsvm", ".svmlight", ".txt")


class LoadedData(NamedTuple):
    """What the file readers return."""

    X: np.ndarray | sp.csr_matrix
    y: np.ndarray
    feature_names: tuple[str, ...] | None


# --------------------------------------------------------------------------- checks


def _check_path(path, name="path"):
    """A ``Path`` to an existing regular file, or ``ValueError``."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"{name} must be a str or os.PathLike, got {path!r}")
    path = Path(path).expanduser()
    if not path.exists():
        raise ValueError(f"{name}: file {str(path)!r} does not exist")
    if not path.is_file():
        raise ValueError(f"{name}: {str(path)!r} is not a regular file")
    return path


def _as_float(a, what, path):
    a = np.asarray(a)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{path}: {what} must be numeric, got dtype {a.dtype}")
    return a.astype(np.float64, copy=False)


def _check_finite(values, what, path):
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{path}: {what} contains NaN or inf values")


def _finish(X, y, feature_names, path):
    """Check shapes and values, and build the :class:`LoadedData`."""
    # lazy: listing datasets (the light `dpopt datasets`) does not load scipy
    import scipy.sparse as sp

    data = X.data if sp.issparse(X) else X
    _check_finite(data, "X", path)
    if y.ndim != 1:
        raise ValueError(f"{path}: y must be 1-D, got shape {y.shape}")
    _check_finite(y, "y", path)
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"{path}: X has {X.shape[0]} rows but y has {y.shape[0]} entries")
    if X.shape[0] == 0:
        raise ValueError(f"{path}: the dataset has no rows")
    if feature_names is not None:
        feature_names = tuple(str(s) for s in feature_names)
        if len(feature_names) != X.shape[1]:
            raise ValueError(f"{path}: {len(feature_names)} feature_names for "
                             f"{X.shape[1]} columns of X")
    return LoadedData(X, y, feature_names)


# --------------------------------------------------------------------------- npz


def _sparse_from_npz(f, path):
    # lazy: listing datasets (the light `dpopt datasets`) does not load scipy
    import scipy.sparse as sp

    missing = [k for k in _SPARSE_KEYS if k not in f.files]
    if missing:
        raise ValueError(f"{path}: sparse X needs keys {list(_SPARSE_KEYS)}, missing {missing}")
    shape = tuple(int(s) for s in f["X_shape"])
    if len(shape) != 2:
        raise ValueError(f"{path}: X_shape must have 2 entries, got {shape}")
    try:
        X = sp.csr_matrix((_as_float(f["X_data"], "X_data", path), f["X_indices"],
                           f["X_indptr"]), shape=shape)
        X.check_format(full_check=True)
    except ValueError as exc:
        raise ValueError(f"{path}: invalid sparse X: {exc}") from exc
    return X


def _read_npz(path):
    loaded = np.load(path, allow_pickle=False)
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: holds a single array, not an npz archive with 'X' and 'y'")
    with loaded as f:
        if "y" not in f.files or ("X" not in f.files and "X_data" not in f.files):
            raise ValueError(f"{path}: an npz dataset needs keys 'X' (or sparse 'X_data', ...) "
                             f"and 'y', found {sorted(f.files)}")
        if "X" in f.files:
            X = _as_float(f["X"], "X", path)
            if X.ndim != 2:
                raise ValueError(f"{path}: X must be 2-D, got shape {X.shape}")
        else:
            X = _sparse_from_npz(f, path)
        y = _as_float(f["y"], "y", path)
        names = f["feature_names"] if "feature_names" in f.files else None
    if names is not None and (names.ndim != 1 or names.dtype.kind != "U"):
        raise ValueError(f"{path}: feature_names must be a 1-D str array")
    return X, y, names


def load_npz(path) -> LoadedData:
    """Read a dataset saved as ``.npz`` (keys ``X``, ``y``, optional ``feature_names``).

    The file is opened with ``allow_pickle=False``, so an object array is an
    error. ``X`` may also be stored sparse (CSR keys ``X_data``, ``X_indices``,
    ``X_indptr``, ``X_shape``); it is then returned as ``scipy.sparse.csr_matrix``.
    Integer or boolean arrays are converted to float64.
    """
    path = _check_path(path)
    try:
        X, y, names = _read_npz(path)
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: not a readable .npz file ({exc})") from exc
    except ValueError as exc:
        if str(path) in str(exc):
            raise
        raise ValueError(f"{path}: cannot read ({exc})") from exc
    return _finish(X, y, names, path)


def save_npz(path, X, y, feature_names=None, *, compress=True):
    """Write ``X``, ``y`` (and ``feature_names``) in the layout :func:`load_npz` reads.

    A sparse ``X`` is stored as CSR under ``X_data``, ``X_indices``, ``X_indptr``
    and ``X_shape``. Returns the path written. ``path`` should end in ``.npz``
    (NumPy appends the suffix otherwise).
    """
    # lazy: listing datasets (the light `dpopt datasets`) does not load scipy
    import scipy.sparse as sp

    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a str or os.PathLike, got {path!r}")
    arrays = {"y": np.asarray(y)}
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        arrays.update(X_data=X.data, X_indices=X.indices, X_indptr=X.indptr,
                      X_shape=np.asarray(X.shape, dtype=np.int64))
    else:
        arrays["X"] = np.asarray(X)
    if feature_names is not None:
        arrays["feature_names"] = np.asarray([str(s) for s in feature_names], dtype=str)
    (np.savez_compressed if compress else np.savez)(path, **arrays)
    return Path(path)


# --------------------------------------------------------------------------- LIBSVM


def load_libsvm(path, n_features=None) -> LoadedData:
    """Read a LIBSVM / svmlight text file with ``sklearn.datasets.load_svmlight_file``.

    ``X`` is returned as a float64 ``scipy.sparse.csr_matrix``. ``n_features``
    fixes the number of columns (useful when the last columns are all zero in
    this file); by default it is the largest index found. Whether indices are
    zero- or one-based is detected by scikit-learn (``zero_based="auto"``).
    The file has no feature names, so ``feature_names`` is None.
    """
    # lazy: listing datasets (the light `dpopt datasets`) does not load scipy
    import scipy.sparse as sp

    # lazy: the light `dpopt datasets` does not load scikit-learn
    from sklearn.datasets import load_svmlight_file

    path = _check_path(path)
    if n_features is not None:
        n_features = check_positive_int(n_features, "n_features")
    try:
        X, y = load_svmlight_file(str(path), n_features=n_features, dtype=np.float64)
    except (ValueError, RuntimeError, UnicodeDecodeError):
        X = None  # raised below, outside the handler: the parser's error (it quotes the
    if X is None:  # cell) is then not kept as the new one's __context__ either
        where = libsvm_problem(path, n_features) or "a line is not 'label index:value ...'"
        raise ValueError(f"{path}: not a valid LIBSVM/svmlight file: {where}")
    return _finish(sp.csr_matrix(X), _as_float(y, "y", path), None, path)


# --------------------------------------------------------------------------- CSV


def _read_first_row(path, delimiter):
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            first = next(csv.reader(fh, delimiter=delimiter), None)
        text = True
    except UnicodeDecodeError:  # its message holds the file's bytes: raised outside the
        text = False  # handler, so that it is not kept as the new error's __context__
    if not text:
        line = first_non_utf8_line(path)
        where = f" (line {line})" if line is not None else ""
        raise ValueError(f"{path}: not a UTF-8 text file{where}")
    if not first:
        raise ValueError(f"{path}: the CSV file is empty")
    return [cell.strip() for cell in first]


def _has_header(first, header, path):
    if header == "infer":  # a header of names only: a row with a number is data
        return not any(is_number(cell) for cell in first if cell)
    if isinstance(header, (bool, np.bool_)):
        return bool(header)
    raise ValueError(f"header must be 'infer', True or False, got {header!r}")


def _target_index(target, names, n_columns, declared=False):
    if isinstance(target, str):
        if names is None:
            raise ValueError(f"target={target!r} is a column name but the file has no header")
        if names.count(target) != 1:  # an inferred header is listed only if declared
            what = "is not a column" if target not in names else "names several columns"
            listed = f"columns: {names}" if declared else f"{len(names)} columns"
            raise ValueError(f"target={target!r} {what}; {listed}")
        return names.index(target)
    if isinstance(target, bool) or not isinstance(target, (int, np.integer)):
        raise ValueError(f"target must be a column index or name, got {target!r}")
    if not -n_columns <= target < n_columns:
        raise ValueError(f"target={target} is out of range for {n_columns} columns")
    return int(target) % n_columns


def load_csv(path, target=-1, *, header="infer", delimiter=",") -> LoadedData:
    """Read a numeric CSV table; one column is the target, the others are features.

    Parameters
    ----------
    path : str or PathLike
    target : int or str
        Column index (negative counts from the end; default: the last column)
        or column name (needs a header).
    header : "infer", True or False
        ``"infer"``: the first row is a header if one of its non-empty cells is
        not a number.
    delimiter : str

    Every cell must be a number: empty cells, text and NaN are errors (no
    imputation). Uses only NumPy (``numpy.loadtxt``) and the csv module.
    """
    path = _check_path(path)
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ValueError(f"delimiter must be a single character, got {delimiter!r}")
    first = _read_first_row(path, delimiter)
    has_header = _has_header(first, header, path)
    names = first if has_header else None
    col = _target_index(target, names, len(first), declared=header is True)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "loadtxt: input contained no data")
            table = np.loadtxt(path, delimiter=delimiter, skiprows=int(has_header), ndmin=2,
                               dtype=np.float64, quotechar='"', encoding="utf-8")
    except ValueError:
        table = None  # NumPy's message quotes the cell: raised below, outside the handler
    if table is None:  # (not kept as __context__), where our own scan finds the problem
        where = (csv_problem(path, delimiter, int(has_header), len(first), names)
                 or "a cell is empty or not a number, or a row has another number of fields")
        raise ValueError(f"{path}: not a numeric CSV table: {where}")
    if table.shape[0] == 0:
        raise ValueError(f"{path}: the CSV file has no data rows")
    if table.shape[1] != len(first):
        raise ValueError(f"{path}: the header has {len(first)} columns, the data "
                         f"{table.shape[1]}")
    keep = [j for j in range(table.shape[1]) if j != col]
    feature_names = [names[j] for j in keep] if names is not None else None
    return _finish(np.ascontiguousarray(table[:, keep]), table[:, col].copy(), feature_names,
                   path)


# --------------------------------------------------------------------------- dispatch


_READERS = {".npz": (load_npz, ()), ".csv": (load_csv, ("target", "header", "delimiter"))}
_READERS.update({s: (load_libsvm, ("n_features",)) for s in _LIBSVM_SUFFIXES})
#: The suffixes :func:`load_file` reads.
FILE_SUFFIXES = tuple(sorted(_READERS))


def load_file(path, **kwargs) -> LoadedData:
    """Read a dataset file, choosing the reader from the suffix.

    ``.npz`` -> :func:`load_npz`; ``.svm``, ``.libsvm``, ``.svmlight``, ``.txt``
    -> :func:`load_libsvm` (keyword ``n_features``); ``.csv`` -> :func:`load_csv`
    (keywords ``target``, ``header``, ``delimiter``). The suffix is matched
    case-insensitively.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a str or os.PathLike, got {path!r}")
    suffix = Path(path).suffix.lower()
    if suffix not in _READERS:
        raise ValueError(f"path {str(path)!r}: unknown dataset suffix {suffix!r}; "
                         f"supported: {sorted(_READERS)}")
    reader, allowed = _READERS[suffix]
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise ValueError(f"{reader.__name__} does not take {unknown} (a {suffix} file); "
                         f"allowed keywords: {list(allowed)}")
    return reader(path, **kwargs)


# --------------------------------------------------------------------------- labels


def to_signed_labels(y, positive):
    """Map a two-class label vector to float64 {-1.0, +1.0}: ``positive`` -> +1.

    Raises ``ValueError`` if ``y`` has more than two distinct values or if
    ``positive`` is not one of them (a one-class ``y`` equal to ``positive`` is
    allowed). Nothing is guessed: the caller names the positive class.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D, got shape {y.shape}")
    classes = np.unique(y)
    if classes.size > 2:  # how many, not which: the labels are the records' values
        raise ValueError(f"y must have at most two classes, got {classes.size}")
    if positive not in classes.tolist():
        raise ValueError(f"positive={positive!r} is not one of the {classes.size} labels of y")
    return np.where(y == positive, 1.0, -1.0)
