"""Scale: a DP-GD step and AdaSSP on chunked data, in memory and out-of-core (dpopt.data.chunked).

    PYTHONPATH=src python benchmarks/scale.py                       # quick: 1e5, 1e6 rows
    PYTHONPATH=src python benchmarks/scale.py --sizes 1e5,1e6,4e6,2e7 --memory-limit 1.5GB

Synthetic data n x p (p = 100 by default), written chunk by chunk as float32 ``.npy`` in
``--dir`` (deleted afterwards), so that no step ever holds the whole matrix. A
``distributed.LocalCluster`` (``--workers`` processes, one thread each, ``--memory-limit``
per worker, far below the largest data) runs the chunk tasks. For every size it prints:

* ``read``: seconds to read the file once, sequentially, from disk (page cache dropped first
  with ``posix_fadvise(DONTNEED)``), and through Dask (the same chunk tasks summing their
  chunk: the price of the task layer without the gradient);
* ``ooc step``: seconds per DP-GD step (one clipped-gradient reduction) reading the chunks
  from the file, page cache dropped before each step (``--warm`` keeps it), and its ratio to
  ``read``; ``ooc adassp``: the same for AdaSSP's one pass (X^T X, X^T y);
* where the data fits in the workers' memory (``--in-memory-share``): the in-memory NumPy step
  (:func:`dpopt.kernels.grad.full_gradient`, one process) and AdaSSP statistics, the Dask
  step on float64 chunks persisted on the workers, and the ratios Dask / NumPy;
* ``peak MB``: the largest resident set of any worker process during the out-of-core
  measurements (workers restarted before them), next to the size of one chunk.

With ``--sparse-density D`` it measures sparse data instead, in memory only: a CSR matrix with
round(D p) non-zeros per row (N(0, 1) values, uniform columns), the in-memory DP-GD step
(``full_gradient`` on a sparse Problem) against the Dask step on the same rows persisted on the
workers as CSR chunks (:mod:`dpopt.data.chunked`'s sparse path), with and without intercept.

The machine is shared and has 2 cores: timings are noisy; the best of ``--repeats`` is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import warnings

import numpy as np

from dpopt.data import Problem
from dpopt.data.chunked import ChunkedProblem


def _open_npy(path, dtype, shape):
    f = open(path, "wb")
    np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                             "fortran_order": False, "shape": shape})
    return f


def generate(path_x, path_y, n, p, chunk_rows, seed=0):
    """float32 X ~ N(0, 1/p) rows (norm ~ 1) and y = X w + noise, written chunk by chunk
    (plain writes: this process never holds more than one chunk)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(p).astype(np.float32)
    with _open_npy(path_x, np.float32, (n, p)) as fx, _open_npy(path_y, np.float64, (n,)) as fy:
        for start in range(0, n, chunk_rows):
            rows = min(n, start + chunk_rows) - start
            block = rng.standard_normal((rows, p), dtype=np.float32) / np.float32(np.sqrt(p))
            block.tofile(fx)
            (block @ w + 0.1 * rng.standard_normal(rows)).astype(np.float64).tofile(fy)
        for f in (fx, fy):
            f.flush()
            os.fsync(f.fileno())


def drop_cache(path):
    """Ask the kernel to forget the file's cached pages (clean pages only: fsync first)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_once(path, block=64 * 2 ** 20):
    """Seconds to read the file sequentially, once."""
    buf = bytearray(block)
    view = memoryview(buf)
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(view):
            pass
    return time.perf_counter() - t


def _chunk_sum(xb, yb):
    """Touches every value of the chunk, at memory speed (the read, without the gradient)."""
    return np.array([[float(np.max(xb))]])


def best_of(repeats, func, before=None):
    best = np.inf
    for _ in range(repeats):
        if before is not None:
            before()
        t = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - t)
    return best


def _peak_rss_mb():
    """This process's peak resident set (VmHWM, MB): unlike ru_maxrss, which Linux carries
    over from the parent across fork and exec, it starts afresh in a new process."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def worker_peak_mb(client):
    """Largest peak resident set (MB) over the worker processes."""
    return max(client.run(_peak_rss_mb).values())


def parse_bytes(text):
    from dask.utils import parse_bytes as parse

    return parse(text)


def measure_size(client, n, args, workdir):
    p = args.features
    px, py = os.path.join(workdir, f"X_{n}.npy"), os.path.join(workdir, f"y_{n}.npy")
    row = {"n": n, "p": p, "gb_on_disk": n * p * 4 / 1e9, "chunk_rows": args.chunk_rows}
    t = time.perf_counter()
    generate(px, py, n, p, args.chunk_rows)
    row["generate_s"] = time.perf_counter() - t
    cold = None if args.warm else (lambda: drop_cache(px))
    w = np.random.default_rng(1).standard_normal(p) * 0.1

    client.restart()  # fresh worker processes: their peak RSS is this size's
    problem = ChunkedProblem(px, py, chunk_rows=args.chunk_rows, validate=False)
    row["n_chunks"] = problem.n_chunks
    row["read_s"] = best_of(args.repeats, lambda: read_once(px), cold)
    row["dask_read_s"] = best_of(args.repeats, lambda: problem._max(_chunk_sum, 1), cold)
    row["ooc_step_s"] = best_of(args.repeats, lambda: problem.gradient_sum(w, clip=1.0), cold)
    row["ooc_adassp_s"] = best_of(args.repeats, lambda: problem.sufficient_statistics(2.0, 5.0),
                                  cold)
    row["peak_worker_mb"] = worker_peak_mb(client)
    row["chunk_mb_float64"] = args.chunk_rows * p * 8 / 2 ** 20
    if n * p * 8 <= args.in_memory_share * args.workers * parse_bytes(args.memory_limit):
        in_memory(client, row, px, py, w, args)
    os.remove(px)
    os.remove(py)
    return row


def in_memory(client, row, px, py, w, args):
    import dask.array as da

    from dpopt.kernels.grad import full_gradient
    from dpopt.solvers.adassp import sufficient_statistics

    X = np.load(px).astype(np.float64)
    y = np.load(py)
    problem = Problem(X, y)
    data = (problem.X_rows, problem.y, problem.loss.code, problem.loss.param, w)  # the row copy
    full_gradient(*data, clip=1.0, row_norms=problem.row_norms)  # compilation, once
    row["numpy_step_s"] = best_of(args.repeats, lambda: full_gradient(
        *data, clip=1.0, row_norms=problem.row_norms))
    row["numpy_adassp_s"] = best_of(args.repeats,
                                    lambda: sufficient_statistics(X, y, 2.0, 5.0, False))
    with warnings.catch_warnings():  # the data goes to the workers once, in the graph
        warnings.filterwarnings("ignore", message="Sending large graph")
        Xd = da.from_array(X, chunks=(args.chunk_rows, -1)).persist()
        yd = da.from_array(y, chunks=args.chunk_rows).persist()
    chunked = ChunkedProblem(Xd, yd, validate=False)
    chunked.gradient_sum(w, clip=1.0)
    row["dask_step_s"] = best_of(args.repeats, lambda: chunked.gradient_sum(w, clip=1.0))
    row["dask_adassp_s"] = best_of(args.repeats, lambda: chunked.sufficient_statistics(2.0, 5.0))
    row["dask_over_numpy_step"] = row["dask_step_s"] / row["numpy_step_s"]
    row["dask_over_numpy_adassp"] = row["dask_adassp_s"] / row["numpy_adassp_s"]


def sparse_rows(n, p, density, seed=0):
    """CSR n x p with round(density p) N(0, 1) values per row in uniform columns (built
    directly: scipy.sparse.random draws from all n p positions)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    k = max(1, round(density * p))
    indptr = np.arange(n + 1, dtype=np.int64) * k
    X = sp.csr_matrix((rng.standard_normal(n * k), rng.integers(0, p, n * k), indptr),
                      shape=(n, p))
    X.sum_duplicates()
    return X, np.asarray(X @ rng.standard_normal(p)).ravel() + 0.1 * rng.standard_normal(n)


def measure_sparse(client, n, args):
    """In-memory DP-GD step vs the Dask step on persisted CSR chunks (module docstring)."""
    import dask.array as da

    X, y = sparse_rows(n, args.features, args.sparse_density)
    row = {"n": n, "p": args.features, "nnz": X.nnz, "chunk_rows": args.chunk_rows}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sending large graph")
        Xd = da.from_array(X, chunks=(args.chunk_rows, -1), asarray=False).persist()
        yd = da.from_array(y, chunks=args.chunk_rows).persist()
    for intercept in (False, True):
        key = "intercept" if intercept else "plain"
        row[f"numpy_{key}_s"], row[f"dask_{key}_s"] = sparse_steps(X, y, Xd, yd, intercept,
                                                                   args.repeats)
    row["n_chunks"] = len(Xd.chunks[0])
    return row


def sparse_steps(X, y, Xd, yd, intercept, repeats):
    """(in-memory step, Dask step) in seconds, best of ``repeats``."""
    from dpopt.kernels.grad import full_gradient

    problem = Problem(X, y, fit_intercept=intercept)
    chunked = ChunkedProblem(Xd, yd, fit_intercept=intercept, validate=False)
    w = np.random.default_rng(1).standard_normal(problem.dim) * 0.1
    data = (problem.X_rows, problem.y, problem.loss.code, problem.loss.param, w)  # the row copy
    full_gradient(*data, clip=1.0, row_norms=problem.row_norms)  # compilation, once
    chunked.gradient_sum(w, clip=1.0)
    return (best_of(repeats, lambda: full_gradient(*data, clip=1.0, row_norms=problem.row_norms)),
            best_of(repeats, lambda: chunked.gradient_sum(w, clip=1.0)))


def show_sparse(row):
    print(f"n={row['n']:.3g} x {row['p']} sparse ({row['nnz']:.3g} non-zeros, {row['n_chunks']} "
          f"CSR chunks of {row['chunk_rows']} rows, persisted)", flush=True)
    for key in ("plain", "intercept"):
        numpy_s, dask_s = row[f"numpy_{key}_s"], row[f"dask_{key}_s"]
        print(f"  {key:9s}: NumPy step {numpy_s:.4f} s, Dask step {dask_s:.4f} s "
              f"(ratio {dask_s / numpy_s:.2f})", flush=True)


def show(row):
    out = [f"n={row['n']:.3g} x {row['p']}  ({row['gb_on_disk']:.2f} GB float32, "
           f"{row['n_chunks']} chunks of {row['chunk_rows']} rows; generated in "
           f"{row['generate_s']:.1f} s)",
           f"  read once from disk {row['read_s']:.3f} s; through Dask {row['dask_read_s']:.3f} s",
           f"  out-of-core DP-GD step {row['ooc_step_s']:.3f} s "
           f"({row['ooc_step_s'] / row['read_s']:.2f}x read); AdaSSP pass "
           f"{row['ooc_adassp_s']:.3f} s ({row['ooc_adassp_s'] / row['read_s']:.2f}x read)",
           f"  peak worker RSS {row['peak_worker_mb']:.0f} MB (one float64 chunk "
           f"{row['chunk_mb_float64']:.0f} MB)"]
    if "numpy_step_s" in row:
        out.append(f"  in memory: NumPy step {row['numpy_step_s']:.4f} s, Dask step "
                   f"{row['dask_step_s']:.4f} s (ratio {row['dask_over_numpy_step']:.2f}); "
                   f"AdaSSP NumPy {row['numpy_adassp_s']:.4f} s, Dask {row['dask_adassp_s']:.4f} s "
                   f"(ratio {row['dask_over_numpy_adassp']:.2f})")
    print("\n".join(out), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e5,1e6", help="comma-separated row counts")
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--chunk-rows", type=int, default=131_072)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="threads per worker (the chunk "
                    "kernels release the GIL: 2 overlap one chunk's reading with another's work)")
    ap.add_argument("--memory-limit", default="1.5GB", help="per worker")
    ap.add_argument("--in-memory-share", type=float, default=0.6,
                    help="also run in memory (NumPy, and Dask with the chunks persisted on the "
                         "workers) when the float64 data fills at most this share of the "
                         "workers' memory")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--warm", action="store_true", help="keep the page cache between steps")
    ap.add_argument("--dir", default=None, help="where the data files go (default: a temp dir)")
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    ap.add_argument("--sparse-density", type=float, default=None,
                    help="measure sparse CSR data of this density instead, in memory only")
    args = ap.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",")]

    from distributed import Client, LocalCluster

    workdir = tempfile.mkdtemp(prefix="dpopt-scale-", dir=args.dir)
    rows = []
    try:
        with LocalCluster(n_workers=args.workers, threads_per_worker=args.threads, processes=True,
                          memory_limit=args.memory_limit, dashboard_address=":0") as cluster, \
                Client(cluster) as client:
            print(f"LocalCluster: {args.workers} worker processes x {args.threads} thread(s), memory limit "
                  f"{args.memory_limit} each; files in {workdir}", flush=True)
            for n in sizes:
                if args.sparse_density is not None:
                    rows.append(measure_sparse(client, n, args))
                    show_sparse(rows[-1])
                    continue
                row = measure_size(client, n, args, workdir)
                rows.append(row)
                show(row)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
