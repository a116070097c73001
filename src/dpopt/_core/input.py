"""Checks of in-memory ``X`` / ``y`` before scikit-learn's ``validate_data``.

``validate_data`` converts with NumPy, whose errors name neither the argument nor the
column ("could not convert string to float: 'x'", "at least one array or dtype is
required"). These checks run first on what the estimators and the private transformers
are given and raise a ``ValueError`` that names ``X`` or ``y`` (and the column of a data
frame), the offending value and what to do. They read the data only to refuse it: an
error is raised before any noise is drawn or any budget is charged, and it does not
depend on a random draw. Numeric input passes through unchanged.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import DataConversionWarning

__all__ = ["check_X_input", "check_y_input", "check_Xy_input", "numeric_target", "one_target"]

_ENCODE = ("encode it as numbers first (e.g. dpopt.preprocessing.public_one_hot_encoder "
           "with public categories)")


def check_X_input(X, *, name="X"):
    """Refuse, naming ``name``, an ``X`` that is None, not two-dimensional, without columns
    or rows, or that holds non-numeric cells; return ``X`` unchanged otherwise."""
    if X is None:
        raise ValueError(f"{name} is None; give a 2-D array (n_samples, n_features)")
    if sp.issparse(X):
        _check_shape(X.shape, name)
        return X
    columns = getattr(X, "columns", None)
    if columns is not None and hasattr(X, "dtypes"):
        _check_shape(getattr(X, "shape", (0, len(columns))), name)
        _check_frame_columns(X, name)
        return X
    try:
        arr = np.asarray(X)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} cannot be read as an array ({exc}); give a 2-D array of "
                         f"numbers") from None
    _check_shape(arr.shape, name)
    if arr.dtype.kind in "USO" and not _all_numeric(arr):
        _check_cells(arr, name)
    return X  # other dtypes (complex, ...): scikit-learn's errors name them


def check_y_input(y, *, numeric, name="y"):
    """Refuse, naming ``name``, a target that a regressor (``numeric=True``) cannot use: a
    non-numeric value. Text holding numbers is returned as floats, anything else unchanged
    (shape errors are scikit-learn's, which name y)."""
    if y is None or not numeric or sp.issparse(y) or hasattr(y, "compute"):
        return y
    try:
        arr = np.asarray(y)
    except (TypeError, ValueError):
        return y
    if arr.dtype.kind in "USO":
        if not _all_numeric(arr) and not all(_is_number(v) for v in arr.ravel()):
            # where, not what: a record's value is not the library's to print
            raise ValueError(f"{name} must be numeric for a regressor, but it holds text that "
                             f"is not a number; use DPLogisticRegression for labels, or "
                             f"convert {name} to numbers")
        return arr.astype(np.float64)  # numeric strings: scikit-learn would keep them as text
    if arr.dtype.kind in "mM":  # dates, durations: never converted (complex: scikit-learn's)
        raise ValueError(f"{name} must hold real numbers for a regressor, but its dtype is "
                         f"{arr.dtype}; convert it (e.g. a date to days since an origin)")
    return y


def one_target(y):
    """A table's target as one column: a column vector (one-column frame or array) is used
    as its column with scikit-learn's DataConversionWarning; more columns, or one value for
    all rows, are refused."""
    ndim = getattr(y, "ndim", 1 if hasattr(y, "__len__") else 0)
    if ndim == 2 and np.shape(y)[1] == 1:
        warnings.warn("a column-vector y was passed when a 1d array was expected; its one "
                      "column is used", DataConversionWarning, stacklevel=6)
        return y.iloc[:, 0] if hasattr(y, "iloc") else np.ravel(y)
    if ndim != 1:
        raise ValueError(f"y must be 1-d, one target per row; got shape {np.shape(y)}")
    return y


def numeric_target(y, who):
    """A regressor's target from a table as float64; a ValueError for values that are not
    real numbers (text, dates, durations, complex numbers: never converted) or not finite."""
    kind = getattr(getattr(y, "dtype", None), "kind", "O")
    try:
        if kind in "mMc":  # numpy would give nanoseconds, or drop the imaginary part
            raise TypeError(kind)
        values = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{who} needs a numeric target y; it holds values that are not "
                         f"real numbers") from None
    if not np.all(np.isfinite(values)):
        raise ValueError("y has missing or infinite values: drop those rows first")
    return values


def check_Xy_input(X, y, *, numeric):
    """:func:`check_X_input`, :func:`check_y_input`, and one target per row of ``X``;
    returns ``y`` (numeric text as floats for a regressor)."""
    check_X_input(X)
    y = check_y_input(y, numeric=numeric)
    n_X, n_y = _n_rows(X), _n_rows(y)
    if n_X is not None and n_y is not None and n_X != n_y:
        raise ValueError(f"X has {n_X} rows but y has {n_y} values; give one target per row")
    return y


def _n_rows(a):
    if a is None:
        return None
    shape = getattr(a, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) else None
    try:
        return len(a)
    except TypeError:
        return None


def _check_shape(shape, name):
    if len(shape) != 2:
        raise ValueError(f"{name} must be a 2D array (n_samples, n_features), got shape "
                         f"{tuple(shape)}; reshape a single feature with {name}.reshape(-1, 1)")
    shape = tuple(int(k) for k in shape)
    if shape[1] == 0:  # scikit-learn's wording, with the argument named
        raise ValueError(f"{name} has 0 feature(s) (shape={shape}) while a minimum of 1 is "
                         f"required: give {name} at least one column")
    if shape[0] == 0:
        raise ValueError(f"{name} has 0 sample(s) (shape={shape}) while a minimum of 1 is "
                         f"required: give {name} at least one row")


def _check_frame_columns(frame, name):
    # lazy: _core stays light for the CLI; pandas only for data frames
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    for column, dtype in zip(frame.columns, frame.dtypes):
        if is_numeric_dtype(dtype) or is_bool_dtype(dtype):
            continue
        values = np.asarray(frame[column], dtype=object)
        if _all_numeric(values):
            continue
        for row, value in enumerate(values):
            _check_cell(value, f"{name}: column {_plain(column)!r}, row {row}")


def _check_cells(arr, name):
    flat = arr.reshape(arr.shape[0], -1)
    for row in range(flat.shape[0]):
        for col in range(flat.shape[1]):
            _check_cell(flat[row, col], f"{name}[{row}, {col}] (column {col})")


def _check_cell(value, where):
    """A ValueError for a string that is not a number, a TypeError for any other object
    that is not one (NumPy's own split), both saying where the cell is."""
    try:
        float(value)
    except ValueError:
        raise ValueError(f"{where} is not a number; {_ENCODE}") from None  # not its value
    except TypeError as exc:
        raise TypeError(f"{where}: {exc} (a {type(value).__name__} cell); give numbers") from None


def _all_numeric(arr) -> bool:
    """Whether NumPy converts every cell to a float (the fast path; cells are scanned one
    by one only to name the first bad one)."""
    try:
        np.asarray(arr).astype(np.float64)
    except (TypeError, ValueError):
        return False
    return True


def _is_number(value) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return True
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value
