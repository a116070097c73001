"""Fits on row-chunked data: Dask arrays and data frames, and data on disk (out-of-core).

A :class:`ChunkedProblem` is the :class:`~dpopt.Problem` of data that is not one array in
this process's memory: a row-chunked ``dask.array.Array``, a ``dask.dataframe.DataFrame``,
a NumPy ``.npy`` file read through a memory map, a Zarr array or a Parquet dataset (the last
two need ``zarr`` / ``pyarrow``). ``dpopt.solve`` takes it like a Problem, for the solvers
declared distributed (``register_solver(..., distributed=True)``, stored on
``SolverSpec.distributed``; :func:`dpopt.solvers.distributed_solvers` lists them), on the
active Dask scheduler: a ``distributed.Client``'s cluster, or Dask's threads on one machine,
where a file larger than memory is read chunk by chunk (out-of-core).

What runs where. Every pass over the data is one Dask graph: a task per row chunk computes
the chunk's share of an additive statistic (a p-vector or a p x p matrix), and Dask's tree
``sum`` adds the shares (``split_every`` at a time). Only the sum reaches the client, which
draws the noise from the fit's own Generator and updates the model:

* dp-gd: sum over the chunk's rows of the clipped per-sample gradients at w (margins, row
  norms, clipping and gradient fused in one sweep over the chunk as stored, float32 or
  float64, no copy: :func:`dpopt.kernels.grad.chunk_gradient_sum`); one pass and one
  reduction of a dim-vector per step.
* dp-sgd: the same sum over the chunk's Poisson-sampled rows (:func:`poisson_rows`); one
  reduction per step, each task touching only its sampled rows.
* adassp: the clipped sufficient statistics (X^T X, X^T y, n) of the chunk
  (:func:`dpopt.data.statistics.sufficient_statistics`); one pass, one reduction.
* dp-rbcd: per block step S, the |S| entries on S of the coordinate-clipped gradient sum at
  w (``coordinates=S``); one pass and one reduction of an |S|-vector per block step, so it
  suits large blocks only (singleton samplings are refused: that is DP-CD, p passes per pass).

Why the result equals the in-memory fit. The released quantities are the same functions of
the data: the sum of the per-chunk sums is the sum over all rows (up to the rounding of a
different order of additions, ~1e-16 relative), and the noise is drawn on the client, once,
in the in-memory solver's order, from the same Generator. So at a fixed seed a chunked dp-gd
adassp or dp-rbcd fit equals the in-memory one to rounding, whatever the chunking, the number
of workers or the retries of failed tasks (tasks are pure functions of their chunk).

Chunk types. Dense chunks (float32 or float64) go to the fused kernel as they are, no copy.
Chunks that are ``scipy.sparse`` matrices (any format; a Dask array whose ``_meta`` is sparse,
e.g. ``da.from_array(X_csr, chunks=(rows, -1), asarray=False)``, or an in-memory sparse
matrix given to :class:`ChunkedProblem`) are made canonical float64 CSR in the task (a copy,
with the intercept's column, unless the chunk is already canonical float64 CSR without
intercept) and go to the CSR row kernel of the in-memory solvers
(:func:`dpopt.kernels.grad._rows_gradient_csr`), with the same row norms as the in-memory
sparse :class:`~dpopt.Problem`: the chunked sparse fit equals the in-memory sparse fit. The
work of a sparse task is proportional to the chunk's non-zeros. ``is_sparse`` is True for
them, and omega (the most non-zeros in a row, for ESO steps) is read chunk by chunk with the
in-memory solvers' warning. Other chunk types raise a ValueError.

The dp-sgd sampler. The in-memory dp-sgd draws the batches of a pass from the fit's
Generator as one Bernoulli process over (record, step) slots, which needs the row count
and one sequential stream. On chunks each task samples its own rows instead: rows are
grouped in fixed sampling blocks of :data:`SAMPLING_BLOCK` consecutive global rows
(independent of the chunking), block k at step s draws its members from its own stream
``SeedSequence(entropy, spawn_key=(s, k))``, with ``entropy`` (128 bits) drawn once from
the fit's Generator before any noise; every row is in every batch independently with the
global rate q = b / n, exactly as in memory. A chunk regenerates the blocks that overlap it
and keeps its rows. The batches therefore depend on the seed and the row index only: a
chunked dp-sgd fit is the same for every chunking and number of workers (the in-memory
dp-sgd, with its own sampler, gives a different draw of the same distribution).

Privacy. Nothing changes: the same mechanisms (Gaussian on a clipped gradient sum with
sensitivity 2C under replace-one adjacency, the Poisson-subsampled Gaussian at the global
rate, AdaSSP's three Gaussian releases) are released the same number of times, so the
single-machine accounting holds unchanged; the FitResult says so in ``params["data"]``
and in :meth:`~dpopt.FitResult.privacy_report`. The workers see the data but release
nothing except to the client, which releases only the noised result (the usual trust model
of a cluster one controls).

Data-dependent constants (``smoothness="exact"``, AdaSSP's bounds left to None) are computed
by one extra pass, with the same :class:`~dpopt.PrivacyLeakWarning` as in memory.

Validation. Construction checks shapes and dtypes at once and, with ``validate=True``
(default), makes one pass to check that X and y are finite, of a sane magnitude, and that
the labels fit the loss (the same checks as :class:`~dpopt.Problem`, raising ``ValueError``
before anything is spent); the default path's raw records skip the magnitude check, which
the scaled data pass, as in memory (``check_magnitude=False``: the scaling clips them).
"""

from __future__ import annotations

import copy
import functools
import math

import numpy as np
import scipy.sparse as sp

from dpopt._core.validation import check_bool, check_positive_int
from dpopt.data.losses import get_loss
from dpopt.data.penalties import get_penalty
from dpopt.data.problem import _NUMERIC_KINDS, Problem, _check_magnitude
from dpopt.data.sources import (  # noqa: F401 (public here: the estimators' entry points)
    _as_dask,
    _dask,
    as_dask_arrays,
    is_chunked_input,
)
from dpopt.data.statistics import row_sq_norms, sufficient_statistics
from dpopt.data.steps import (  # noqa: F401 (sampling_entropy: public here)
    KeyedPoissonBatches,
    ReducedBlockSteps,
    sampling_entropy,
)
from dpopt.kernels.grad import _rows_gradient_csr, chunk_gradient_sum
from dpopt.kernels.sampling import poisson_batches

SAMPLING_BLOCK = 4096  # rows per dp-sgd sampling stream (fixed: the batches never depend on chunks)
SPLIT_EVERY = 8  # fan-in of the reduction tree


# ---------------------------------------------------------------------------
# per-chunk work (module-level pure functions: they run on the workers)


def _design(xb, fit_intercept):
    """The chunk as a C-ordered float64 array, with the intercept's column of ones (a sparse
    chunk densified: :func:`_native_design` keeps it sparse)."""
    m, p = xb.shape
    out = np.empty((m, p + int(fit_intercept)))
    out[:, :p] = xb.toarray() if sp.issparse(xb) else xb
    if fit_intercept:
        out[:, p] = 1.0
    return out


def _native_design(xb, fit_intercept):
    """The chunk's design rows in the chunk's kind: :func:`_csr_design` for a sparse chunk,
    else :func:`_design`."""
    return _csr_design(xb, fit_intercept) if sp.issparse(xb) else _design(xb, fit_intercept)


def _csr_design(xb, fit_intercept):
    """A sparse chunk as canonical float64 CSR (duplicates summed, indices sorted), with the
    intercept's column of ones: these rows of the in-memory sparse Problem's design. Read
    only: a chunk already in that form without intercept is returned as it is, else the copy
    is the task's own (tasks are pure functions of their chunk and never modify it)."""
    if (sp.isspmatrix_csr(xb) and xb.dtype == np.float64 and xb.has_canonical_format
            and not fit_intercept):
        return xb
    Xc = sp.csr_matrix(xb, dtype=np.float64, copy=True)
    Xc.sum_duplicates()
    return _with_ones_column(Xc) if fit_intercept else Xc


def _with_ones_column(Xc):
    """Canonical CSR ``[Xc, 1]``: each row gets one last entry, 1 in column p (a few vector
    operations; ``scipy.sparse.hstack`` takes ~4x longer than the whole gradient)."""
    m, p = Xc.shape
    index = Xc.indptr.dtype if Xc.nnz + m < np.iinfo(np.int32).max else np.int64  # scipy's
    indptr = Xc.indptr.astype(index) + np.arange(m + 1, dtype=index)
    last = indptr[1:] - 1
    kept = np.ones(indptr[-1], dtype=bool)
    kept[last] = False
    data = np.empty(indptr[-1])
    indices = np.empty(indptr[-1], dtype=index)
    data[kept], indices[kept] = Xc.data, Xc.indices
    data[last], indices[last] = 1.0, p
    return sp.csr_matrix((data, indices, indptr), shape=(m, p + 1))


def _features(xb):
    """The chunk's features in float64 (canonical CSR for a sparse chunk), no intercept."""
    return _csr_design(xb, False) if sp.issparse(xb) else np.asarray(xb, dtype=np.float64)


def _gradient_sum(xb, y, w, loss, rows, *, clip, clips, fit_intercept):
    """Sum over ``rows`` (default all) of the chunk's clipped per-sample gradients at ``w``.
    Dense chunks: :func:`~dpopt.kernels.grad.chunk_gradient_sum` on the chunk as stored. Sparse
    chunks: the CSR row kernel of the in-memory solvers on the chunk's design rows, with the
    same row norms (intercept included) as :attr:`dpopt.Problem.row_norms`."""
    if not sp.issparse(xb):
        return chunk_gradient_sum(xb, y, w, loss.code, loss.param, rows, clip=clip, clips=clips,
                                  fit_intercept=fit_intercept)
    if rows is not None:  # a sampled batch: only its rows are copied and normed
        xb, y = sp.csr_matrix(xb)[rows], np.asarray(y)[rows]
    Xc = _csr_design(xb, fit_intercept)
    rows = np.arange(Xc.shape[0], dtype=np.int64)
    l2mode = clip is not None
    norms = np.sqrt(row_sq_norms(Xc)) if l2mode else np.zeros(0)
    g = np.zeros(Xc.shape[1])
    _rows_gradient_csr(Xc.data, Xc.indices, Xc.indptr, np.ascontiguousarray(y, dtype=np.float64),
                       w, loss.code, loss.param, rows, l2mode, float(clip) if l2mode else 0.0,
                       np.zeros(0) if l2mode else clips, norms, g)
    return g


def _chunk_gradient(xb, yb, *, w, loss, fit_intercept, clip, clips, coordinates=None):
    g = _gradient_sum(xb, yb[:, 0], w, loss, None, clip=clip, clips=clips,
                      fit_intercept=fit_intercept)
    return (g if coordinates is None else g[coordinates])[None, :]


def poisson_rows(entropy, step, rate, start, stop, n):
    """Global rows in [start, stop) of the Poisson batch of ``step`` (sorted): sampling block
    k (rows k B .. (k+1) B - 1, B = :data:`SAMPLING_BLOCK`, the last one cut at n) draws its
    members from ``SeedSequence(entropy, spawn_key=(step, k))``, each row independently
    with probability ``rate`` (module docstring)."""
    out = []
    for k in range(start // SAMPLING_BLOCK, -(-stop // SAMPLING_BLOCK)):
        lo = k * SAMPLING_BLOCK
        size = min(SAMPLING_BLOCK, n - lo)
        seq = np.random.SeedSequence(entropy, spawn_key=(int(step), int(k)))
        rows, _ = poisson_batches(np.random.Generator(np.random.PCG64(seq)), size, rate, 1)
        rows = rows + lo
        out.append(rows[(rows >= start) & (rows < stop)])
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def _chunk_sampled_gradient(xb, yb, *, w, loss, fit_intercept, clip, entropy, step, rate, n,
                            block_info=None):
    start, stop = block_info[0]["array-location"][0]
    local = poisson_rows(entropy, step, rate, start, stop, n) - start
    return _gradient_sum(xb, yb[:, 0], w, loss, local, clip=clip, clips=None,
                         fit_intercept=fit_intercept)[None, :]


def _chunk_statistics(xb, yb, *, row_bound, target_bound, fit_intercept):
    xtx, xty, m = sufficient_statistics(_features(xb), yb[:, 0], row_bound, target_bound,
                                        fit_intercept)
    return np.concatenate([xtx.ravel(), xty, [m]])[None, :]


def _chunk_gram(xb, yb, *, fit_intercept):
    """Gram matrix of the chunk's rows, intercept column included (flattened)."""
    Xd = _native_design(xb, fit_intercept)
    gram = Xd.T @ Xd
    return (gram.toarray() if sp.issparse(gram) else gram).ravel()[None, :]


def _chunk_column_sq_norms(xb, yb, *, fit_intercept):
    """||X[:, j]||^2 over the chunk's rows, intercept column included."""
    Xd = _native_design(xb, fit_intercept)
    if sp.issparse(Xd):
        return np.asarray(Xd.multiply(Xd).sum(axis=0), dtype=np.float64).reshape(1, -1)
    return np.einsum("ij,ij->j", Xd, Xd)[None, :]


def _chunk_maxima(xb, yb):
    """(max squared row norm of the features, max |y|) of the chunk."""
    sq = row_sq_norms(_features(xb))
    return np.array([[sq.max(initial=0.0), np.abs(yb).max(initial=0.0)]])


def _chunk_max_row_nnz(xb, yb, *, fit_intercept):
    """The largest number of non-zeros in a design row of the (sparse) chunk."""
    Xc = _csr_design(xb, fit_intercept)
    m = Xc.shape[0]
    stored_zeros = np.repeat(np.arange(m), np.diff(Xc.indptr))[Xc.data == 0.0]
    counts = np.diff(Xc.indptr) - np.bincount(stored_zeros, minlength=m)
    return np.array([[counts.max(initial=0)]], dtype=np.float64)


def _chunk_sum_of(xb, yb, *, w, per_record, fit_intercept):
    z = np.asarray(_native_design(xb, fit_intercept) @ w).ravel()
    return np.array([[float(np.sum(per_record(z, yb[:, 0])))]])


def _chunk_check(xb, yb, *, loss, magnitude=True):
    """Problem's checks on one chunk (raises ValueError in the task, re-raised by compute);
    a sparse chunk's stored values are checked; the magnitude's only with ``magnitude``."""
    x = _features(xb).data if sp.issparse(xb) else np.asarray(xb, dtype=np.float64)
    y = np.asarray(yb[:, 0], dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("X contains NaN or infinity")
    if not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinity")
    if magnitude:
        _check_magnitude(x, "X")
        _check_magnitude(y, "y")
    loss.check_labels(y)
    return np.zeros((1, 1))


# ---------------------------------------------------------------------------
# the problem


def _kept_rows(block, bits):
    """The rows of a chunk (dense or sparse, 1-d or 2-d) whose bit is set (``bits``: the
    chunk's mask, :func:`numpy.packbits`, padded to whole bytes)."""
    keep = np.unpackbits(np.asarray(bits, dtype=np.uint8).reshape(-1), count=block.shape[0])
    return block[keep.astype(bool)]


def _row_of_chunk(func, xb, yb, kwargs):
    return func(xb, yb[:, None], **kwargs)


def _add_rows(*rows):
    return np.sum(np.concatenate(rows, axis=0), axis=0, keepdims=True)


class ChunkedProblem:
    """A linear ERM problem over row-chunked data (module docstring).

    Parameters
    ----------
    X : dask.array.Array, dask.dataframe.DataFrame, numpy.memmap, numpy array, or a path
        (``.npy``, ``.zarr``, ``.parquet``). Rows are the records; column chunks are merged.
    y : array-like, Dask array / Series, path to a ``.npy``, or (with a data frame, or a
        Parquet path) the name of the target column.
    loss, penalty, alpha, fit_intercept, **penalty_kwargs : as for :class:`~dpopt.Problem`.
    chunk_rows : int, optional
        Rows per chunk (rechunks a Dask array; chunks a file or NumPy array). Default:
        the Dask array's own row chunks, else about 64 MiB of float64 per chunk.
    validate : bool
        One pass checking finiteness, magnitude and labels (default True).
    check_magnitude : bool
        Whether ``validate`` checks the magnitude too (default True; module docstring).
    retries : int
        Times the scheduler reruns a failed task (a lost worker, a transient error) before
        giving up; safe because every task is a pure function of its chunk.
    """

    is_chunked = True
    is_sparse = False

    def __init__(self, X, y, loss="squared", penalty=None, *, alpha=None, fit_intercept=False,
                 chunk_rows=None, validate=True, check_magnitude=True, retries=2, **penalty_kwargs):
        self.loss = get_loss(loss)
        if chunk_rows is not None:
            chunk_rows = check_positive_int(chunk_rows, "chunk_rows")
        check_magnitude = check_bool(check_magnitude, "check_magnitude")
        if isinstance(retries, bool) or not isinstance(retries, (int, np.integer)) or retries < 0:
            raise ValueError(f"retries must be a non-negative integer, got {retries!r}")
        self.retries = int(retries)
        self.fit_intercept = check_bool(fit_intercept, "fit_intercept")
        self.X, self.y = self._align(*_as_dask(X, y, chunk_rows), chunk_rows)
        self.n_samples, self.n_features = (int(s) for s in self.X.shape)
        self.is_sparse = sp.issparse(self.X._meta)
        self.dim = self.n_features + int(self.fit_intercept)
        self.penalty = get_penalty(penalty, alpha, **penalty_kwargs).for_dimension(
            self.dim, unpenalized_last=self.fit_intercept)
        if validate:
            self._reduce(_chunk_check, 1, loss=self.loss, magnitude=check_magnitude)

    def _align(self, X, y, chunk_rows):
        _, da = _dask()
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
        if any(math.isnan(s) for s in X.shape):
            raise ValueError("X has unknown chunk sizes; compute them first "
                             "(e.g. DataFrame.to_dask_array(lengths=True))")
        if X.dtype.kind not in _NUMERIC_KINDS:
            raise ValueError(f"X must have a numeric dtype (bool, int, float), got {X.dtype}")
        meta = getattr(X, "_meta", np.empty(0))
        if type(meta) is not np.ndarray and not sp.issparse(meta):
            raise ValueError(f"X must have NumPy or scipy.sparse chunks, got "
                             f"{type(meta).__name__} chunks (convert them, e.g. "
                             f"X.map_blocks(scipy.sparse.csr_matrix))")
        if X.shape[0] < 1 or X.shape[1] < 1:
            raise ValueError(f"X must have at least one sample and one feature, got shape "
                             f"{X.shape}")
        if not isinstance(y, da.Array):
            y = np.asarray(y)
            if y.dtype.kind not in _NUMERIC_KINDS:
                raise ValueError(f"y must have a numeric dtype, got {y.dtype}")
        if y.ndim != 1:
            raise ValueError(f"y must be 1-dimensional, got shape {y.shape}")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"X and y have inconsistent numbers of samples: {X.shape[0]} and "
                             f"{y.shape[0]}")
        rows = X.chunks[0] if chunk_rows is None else chunk_rows
        X = X.rechunk({0: rows, 1: -1})
        y = da.from_array(y, chunks=X.chunks[0]) if isinstance(y, np.ndarray) else \
            y.rechunk((X.chunks[0],))
        return X, y

    def take(self, index) -> ChunkedProblem:
        """The same problem on the records ``index`` (sorted distinct row numbers; the
        held-out split of :mod:`dpopt.pipeline.selection`): each chunk keeps its own rows,
        lazily, by a mask of one bit per row (n / 8 bytes in the graph; a chunk may keep
        none), validated with the whole data. No pass over the data."""
        index = np.asarray(index, dtype=np.intp).ravel()
        if index.size and (index[0] < 0 or index[-1] >= self.n_samples
                           or np.any(np.diff(index) <= 0)):
            raise ValueError(f"index must be sorted distinct row numbers in [0, "
                             f"{self.n_samples})")
        _, da = _dask()
        keep = np.zeros(self.n_samples, dtype=bool)
        keep[index] = True
        # one bit per row, each chunk's bits padded to whole bytes, so that block i of the
        # mask is chunk i's (the graph holds n / 8 bytes, not n)
        masks = np.split(keep, np.cumsum(self.X.chunks[0])[:-1])
        packed = [np.packbits(k) for k in masks]
        bits = da.from_array(np.concatenate(packed), chunks=(tuple(b.size for b in packed),))
        sizes = tuple(int(k.sum()) for k in masks)
        part = copy.copy(self)  # each chunk keeps its own rows: no rechunking across chunks
        part.X = da.map_blocks(_kept_rows, self.X, bits[:, None], dtype=self.X.dtype,
                               chunks=(sizes, self.X.chunks[1]), meta=self.X._meta)
        part.y = da.map_blocks(_kept_rows, self.y, bits, dtype=self.y.dtype, chunks=(sizes,),
                               meta=self.y._meta)
        part.n_samples = int(index.size)
        return part

    def with_target(self, y) -> ChunkedProblem:
        """The same records with the target ``y`` (a Dask array, one value per record),
        unvalidated: labels the loss does not take, read only by per-record sums (the
        held-out scores of :mod:`dpopt.pipeline.selection`)."""
        if getattr(y, "shape", None) != self.y.shape or not hasattr(y, "rechunk"):
            raise ValueError(f"y must be a Dask array of shape {self.y.shape}")
        part = copy.copy(self)
        part.y = y.astype(np.float64).rechunk((self.X.chunks[0],))
        return part

    # -- the reduction -------------------------------------------------------------
    @property
    def n_chunks(self) -> int:
        return len(self.X.chunks[0])

    def persist(self) -> ChunkedProblem:
        """Hold the chunks in the workers' memory (``dask.persist`` on the active
        ``distributed.Client``), for data that fit there: later passes reuse them, and each
        reduction is then submitted chunk by chunk on the held chunks (a few ms per pass)
        instead of through a new Dask graph (~20-30 ms of graph handling per pass, which
        dominates the steps of small data). Same sums, same results. Returns ``self``."""
        dask, _ = _dask()
        self.X, self.y = dask.persist(self.X, self.y)
        return self

    def _held_chunks(self):
        """``(client, [(x_future, y_future), ...])`` in row order when every chunk of X and y
        is held by the active distributed client (:meth:`persist`), else ``None``."""
        try:
            from distributed import default_client, futures_of  # lazy: optional (dpopt[dask])

            client = default_client()
        except (ImportError, ValueError):  # no distributed, or no client: the graph path
            return None
        held = {f.key: f for f in futures_of(self.X) + futures_of(self.y)}
        x_keys = [row[0] for row in self.X.__dask_keys__()]
        y_keys = list(self.y.__dask_keys__())
        if not held or any(k not in held for k in x_keys + y_keys):
            return None
        return client, [(held[a], held[b]) for a, b in zip(x_keys, y_keys)]

    def _reduce(self, func, width, **kwargs):
        """Sum over chunks of ``func(x_chunk, y_chunk[:, None], **kwargs)`` (a (1, width)
        row per chunk), as a tree, computed on the active scheduler."""
        held = self._held_chunks()
        if held is not None:
            return self._reduce_held(*held, func, kwargs)
        total = self._parts(func, width, kwargs).sum(axis=0, split_every=SPLIT_EVERY)
        return np.asarray(total.compute(retries=self.retries), dtype=np.float64)

    def _reduce_held(self, client, chunks, func, kwargs):
        """:meth:`_reduce` on held chunks: one task per chunk, then sums of ``SPLIT_EVERY``
        partial rows at a time up to the root, submitted directly to the scheduler. A
        function that takes ``block_info`` gets its chunk's rows as ``map_blocks`` gives them."""
        # lazy: dask is an optional dependency (pip install dpopt[dask])
        from dask.utils import has_keyword

        def submit(*args):
            return client.submit(*args, pure=False, retries=self.retries)

        located = has_keyword(func, "block_info")

        def arguments(start, stop):
            if not located:
                return kwargs
            return {**kwargs, "block_info": {0: {"array-location": [(start, stop),
                                                                    (0, self.n_features)]}}}

        stops = np.cumsum(self.X.chunks[0]).tolist()
        starts = [0, *stops[:-1]]
        parts = [submit(_row_of_chunk, func, xf, yf, arguments(start, stop))
                 for (xf, yf), start, stop in zip(chunks, starts, stops)]
        while len(parts) > 1:
            parts = [submit(_add_rows, *parts[i:i + SPLIT_EVERY])
                     for i in range(0, len(parts), SPLIT_EVERY)]
        return np.asarray(parts[0].result(), dtype=np.float64)[0]

    def _parts(self, func, width, kwargs):  # func(x_chunk, y_chunk[:, None]) per chunk
        _, da = _dask()
        return da.map_blocks(func, self.X, self.y[:, None], dtype=np.float64,
                             meta=np.empty((0, 0)), chunks=((1,) * self.n_chunks, (width,)),
                             **kwargs)

    def _max(self, func, width, **kwargs):
        parts = self._parts(func, width, kwargs)
        return np.asarray(parts.max(axis=0, split_every=SPLIT_EVERY).compute(retries=self.retries))

    # -- what the solvers use --------------------------------------------------------
    def gradient_sum(self, w, *, clip=None, clips=None, coordinates=None):
        """Sum over all rows of the clipped per-sample gradients at ``w`` (one pass); only
        its entries ``coordinates`` (int64 indices) when given, the size of the reduction."""
        if (clip is None) == (clips is None):
            raise ValueError("give exactly one of clip (L2) or clips (coordinate-wise)")
        clips = None if clips is None else np.ascontiguousarray(clips, dtype=np.float64)
        width = self.dim if coordinates is None else len(coordinates)
        return self._reduce(_chunk_gradient, width, w=np.ascontiguousarray(w, dtype=np.float64),
                            loss=self.loss, fit_intercept=self.fit_intercept, clip=clip,
                            clips=clips, coordinates=coordinates)

    def sampled_gradient_sum(self, w, *, clip, entropy, step, rate):
        """Sum of the L2-clipped per-sample gradients over the Poisson batch of ``step``
        (:func:`poisson_rows`)."""
        return self._reduce(_chunk_sampled_gradient, self.dim,
                            w=np.ascontiguousarray(w, dtype=np.float64), loss=self.loss,
                            fit_intercept=self.fit_intercept, clip=float(clip), entropy=entropy,
                            step=int(step), rate=float(rate), n=self.n_samples)

    def clipped_gradient(self, w, *, clip=None, clips=None):
        """(1/n) :meth:`gradient_sum`: the in-memory :meth:`dpopt.Problem.clipped_gradient`
        (to rounding)."""
        return self.gradient_sum(w, clip=clip, clips=clips) / self.n_samples

    def sufficient_statistics(self, row_bound, target_bound):
        """AdaSSP's clipped (X^T X, X^T y, n), summed over chunks (one pass)."""
        d = self.dim
        flat = self._reduce(_chunk_statistics, d * d + d + 1, row_bound=row_bound,
                            target_bound=target_bound, fit_intercept=self.fit_intercept)
        return flat[:d * d].reshape(d, d), flat[d * d:-1], int(round(flat[-1]))

    def max_row_norm(self) -> float:
        """max_i ||x_i|| of the features (non-private; one pass)."""
        return math.sqrt(float(self._maxima[0]))

    def max_abs_target(self) -> float:
        """max_i |y_i| (non-private; one pass)."""
        return float(self._maxima[1])

    @functools.cached_property
    def _maxima(self):
        return self._max(_chunk_maxima, 2)

    @functools.cached_property
    def _gram(self):
        d = self.dim
        return self._reduce(_chunk_gram, d * d, fit_intercept=self.fit_intercept).reshape(d, d)

    def coordinate_smoothness(self) -> np.ndarray:
        """M_j = c ||X[:, j]||^2 / n (non-private; one pass)."""
        norms = self._reduce(_chunk_column_sq_norms, self.dim, fit_intercept=self.fit_intercept)
        return self.loss.curvature * norms / self.n_samples

    def max_row_nnz(self) -> int:
        """omega: the most non-zeros in a design row (non-private; one pass when sparse)."""
        if not self.is_sparse:
            return self.dim
        return int(self._max(_chunk_max_row_nnz, 1, fit_intercept=self.fit_intercept)[0])

    def global_smoothness(self) -> float:
        """beta = c ||X||_2^2 / n (non-private; one pass, from the d x d Gram matrix, which
        every chunk task forms: for a large d give ``smoothness`` instead)."""
        top = max(float(np.linalg.eigvalsh(self._gram)[-1]), 0.0)
        return self.loss.curvature * top / self.n_samples

    def mean_of(self, func, w):
        """(1/n) sum_i func(x_i^T w, y_i), one pass (``func`` vectorised and picklable)."""
        return float(self._reduce(_chunk_sum_of, 1, w=np.ascontiguousarray(w, dtype=np.float64),
                                  per_record=func, fit_intercept=self.fit_intercept)[0]) / self.n_samples

    def smooth_objective(self, w):
        return self.mean_of(self.loss.value, w)

    def objective(self, w):
        """F(w) (a diagnostic computed on the private data; one pass)."""
        return self.smooth_objective(w) + self.penalty.value(np.asarray(w, dtype=np.float64))

    # -- the solvers' steps (dpopt.data.steps: the same methods on Problem) ------------
    #: a block coordinate step is one reduction over every chunk
    block_step_reads_all_rows = True

    def poisson_sampler(self, rng, rate) -> KeyedPoissonBatches:
        """DP-SGD's Poisson batches at ``rate``: 128 bits drawn from ``rng`` now, each
        chunk then regenerating the batches of its rows (module docstring)."""
        return KeyedPoissonBatches(rng, rate)

    def proximal_sgd_steps(self, w, batches, noise, *, gammas, clip, sigma, batch_size):
        """``len(noise)`` proximal DP-SGD steps (:meth:`dpopt.Problem.proximal_sgd_steps`),
        one reduction of the batch's clipped gradient sum per step; returns w."""
        entropy, first_step, rate = batches
        for s in range(noise.shape[0]):
            g = self.sampled_gradient_sum(w, clip=clip, entropy=entropy, step=first_step + s,
                                          rate=rate)
            w = self.penalty.prox(w - gammas * (g + sigma * noise[s]) / batch_size, gammas)
        return w

    def block_steps(self, w) -> ReducedBlockSteps:
        """DP-RBCD's passes of block steps: one reduction per non-empty block."""
        return ReducedBlockSteps(self)

    # the same as a Problem's (they read only fit_intercept and dim)
    unpack = Problem.unpack
    zeros = Problem.zeros

    def describe(self) -> dict:
        """What a FitResult records about the data layout (public: shapes and chunking)."""
        return {"layout": "chunked", "n_chunks": self.n_chunks, "sparse": self.is_sparse,
                "chunk_rows": [int(c) for c in sorted(set(self.X.chunks[0]))][:8],
                "accounting": "single-machine, unchanged: the same noisy quantities are "
                              "released as by the in-memory solver"}

    def __repr__(self):
        return (f"ChunkedProblem(n={self.n_samples}, p={self.n_features}, chunks={self.n_chunks}, "
                f"loss={self.loss.name}, penalty={self.penalty.name}"
                f"(alpha={self.penalty.alpha:g}), fit_intercept={self.fit_intercept})")



