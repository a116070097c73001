"""Arrow dictionary text columns: the form in which the table layer receives a text column
whose values are data (read from a file, or a pyarrow / polars table's dictionary column),
kept as integer codes. Light (pandas; pyarrow when called), for the command line's reader
and the table layer alike."""

from __future__ import annotations

import pandas as pd

__all__ = ["data_dictionary"]


def data_dictionary(s):
    """A pandas categorical Series as an Arrow ``dictionary<string>`` Series (same codes,
    values as text; a missing cell stays missing): a text column to the table layer."""
    import pyarrow as pa  # lazy: optional dependency (dpopt[frames]), with Arrow tables

    codes = s.cat.codes.to_numpy()
    values = pa.array([str(v) for v in s.cat.categories], pa.string())
    array = pa.DictionaryArray.from_arrays(pa.array(codes, mask=codes < 0), values)
    return pd.Series(pd.arrays.ArrowExtensionArray(array), index=s.index, name=s.name)
