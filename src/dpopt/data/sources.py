"""Where chunked data comes from: a Dask array or data frame, a ``.npy`` file read through a
memory map, a Zarr array or a Parquet dataset, turned into one row-chunked Dask array of
features and one of targets (:func:`as_dask_arrays`). Dask is imported only when such data
is given (:func:`is_chunked_input` does not import it).
"""

from __future__ import annotations

import math
import os

import numpy as np
import scipy.sparse as sp

DEFAULT_CHUNK_BYTES = 64 * 2 ** 20  # target size of a float64 chunk when the rows are chunked here


def _dask():
    """``(dask, dask.array)``, or a clear error when the optional extra is missing."""
    try:
        # lazy: dask is an optional dependency (pip install dpopt[dask])
        import dask
        import dask.array as da
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError("chunked and out-of-core data need Dask: pip install 'dpopt[dask]'") \
            from None
    return dask, da


def is_chunked_input(X) -> bool:
    """True for the inputs the estimators send to a :class:`ChunkedProblem`: Dask
    collections and paths (Dask itself is not imported for other types). A ``np.memmap`` is
    an array to scikit-learn and stays one; pass its path to read it chunk by chunk."""
    if isinstance(X, (str, os.PathLike)):
        return True
    module = type(X).__module__ or ""
    return module.split(".")[0] == "dask"


def _read_npy_block(path, block_info=None):
    """The rows of this block of a .npy file, as a view of a memory map: the pages are read
    when the chunk task touches them, and the map goes when the task ends."""
    start, stop = block_info[None]["array-location"][0]
    return np.load(path, mmap_mode="r")[start:stop]


def _rows_per_chunk(p, chunk_rows):
    if chunk_rows is not None:
        return chunk_rows
    return max(1, int(DEFAULT_CHUNK_BYTES // (8 * max(p, 1))))


def _npy_array(path, chunk_rows):
    """A lazily read Dask array over a .npy file. Each block is a task that maps its own rows
    (no data in the graph: it works with worker processes and files larger than memory), and
    being a blockwise task it fuses with the chunk work that follows: one task per chunk
    reads and reduces it, so a worker holds the pages of the chunks it is working on only."""
    _, da = _dask()
    head = np.load(path, mmap_mode="r")
    if head.ndim not in (1, 2):
        raise ValueError(f"{path}: expected a 1- or 2-dimensional array, got shape {head.shape}")
    n = head.shape[0]
    step = _rows_per_chunk(head.shape[1] if head.ndim == 2 else 1, chunk_rows)
    rows = tuple(min(step, n - start) for start in range(0, n, step))
    chunks = (rows,) + tuple((s,) for s in head.shape[1:])
    return da.map_blocks(_read_npy_block, os.fspath(path), chunks=chunks, dtype=head.dtype,
                         meta=np.empty((0,) * head.ndim, dtype=head.dtype))


def _path_kind(path):
    name = os.fspath(path).rstrip("/\\").lower()
    for ext in (".npy", ".zarr", ".parquet", ".pq"):
        if name.endswith(ext):
            return ext
    if os.path.isdir(path) and os.path.exists(os.path.join(path, ".zarray")):
        return ".zarr"
    raise ValueError(f"X: cannot tell the format of {os.fspath(path)!r}; give a path ending in "
                     f".npy, .zarr or .parquet, or a Dask array / data frame")


def _frame_features(frame, y):
    """(features as a Dask array, target) from a Dask data frame; ``y`` may name a column.
    Row counts per partition are computed from the arrays themselves (one pass each):
    the optimiser may merge a frame's partitions differently in two expressions."""
    if isinstance(y, str):
        if y not in frame.columns:
            raise ValueError(f"y={y!r} is not a column of the data frame "
                             f"(columns: {list(frame.columns)[:10]})")
        return _sized(frame.drop(columns=[y]).to_dask_array()), _sized(frame[y].to_dask_array())
    return _sized(frame.to_dask_array()), y


def _sized(array):
    return array.compute_chunk_sizes() if any(math.isnan(c) for c in array.chunks[0]) else array


def _as_dask(X, y, chunk_rows):
    """(X, y) as Dask arrays (y possibly still a non-Dask array)."""
    dask, da = _dask()
    if isinstance(X, (str, os.PathLike)):
        kind = _path_kind(X)
        if kind == ".npy":
            X = _npy_array(X, chunk_rows)
        elif kind == ".zarr":
            X = da.from_zarr(os.fspath(X))
        else:
            X = open_table(X)
    elif isinstance(X, np.memmap):
        if X.filename is not None and os.fspath(X.filename).endswith(".npy"):
            X = _npy_array(X.filename, chunk_rows)  # each task maps its own rows
        else:
            X = da.from_array(np.asarray(X), chunks=(_rows_per_chunk(X.shape[-1], chunk_rows), -1))
    elif sp.issparse(X):
        per_row = -(-X.nnz // max(X.shape[0], 1)) * 12 / 8  # CSR: 12 bytes per stored value
        X = da.from_array(sp.csr_matrix(X), chunks=(_rows_per_chunk(per_row, chunk_rows), -1),
                          asarray=False)
    if _is_frame(X):
        X, y = _frame_features(X, y)
    if isinstance(y, (str, os.PathLike)):
        y = open_target(y, chunk_rows)
    elif isinstance(y, np.memmap) or _is_frame(y) or _is_series(y):
        y = _sized(y.to_dask_array()) if _is_series(y) else _as_dask(y, None, chunk_rows)[0]
    if not isinstance(X, da.Array):
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
        X = da.from_array(X, chunks=(_rows_per_chunk(X.shape[1], chunk_rows), -1))
    return X, y


def as_dask_arrays(X, y, chunk_rows=None):
    """``(X, y)`` of any input :class:`ChunkedProblem` takes, as Dask arrays where they are
    chunked (a data frame's target column split off, files opened lazily)."""
    return _as_dask(X, y, chunk_rows)


def open_table(X):
    """A Parquet path opened as a lazy Dask DataFrame (its metadata only is read), so that it
    takes the same table layer as the frame it holds; any other input as given."""
    if isinstance(X, (str, os.PathLike)) and _path_kind(X) in (".parquet", ".pq"):
        # lazy: dask is an optional dependency (pip install dpopt[dask])
        import dask.dataframe as dd
        return dd.read_parquet(os.fspath(X))
    return X


def open_target(y, chunk_rows=None):
    """A target given as a path (.npy, .zarr) opened as a lazy Dask array; any other as
    given."""
    if not isinstance(y, (str, os.PathLike)):
        return y
    return _npy_array(y, chunk_rows) if _path_kind(y) == ".npy" else _as_dask(y, None, None)[0]


def _is_frame(obj):
    return type(obj).__name__ == "DataFrame" and (type(obj).__module__ or "").startswith("dask")


def _is_series(obj):
    return type(obj).__name__ == "Series" and (type(obj).__module__ or "").startswith("dask")
