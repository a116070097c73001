"""Run a grid of independent experiments, keeping every finished run.

A run is a JSON-serializable ``config`` dict. Its key is a hash of the config,
its seed is derived from the root seed and that key (so a run gives the same
result whatever the backend, the order or the number of workers). Results
are appended to a JSONL file as they finish (one line per run, flushed and
fsynced), so an interrupted grid resumes where it stopped and never runs a
config twice; a line cut by the interruption is dropped on resume (that run
had not finished being saved, so it runs again).

Backends (``backend=``): ``"loky"`` (processes, joblib's default),
``"threading"``, ``"sequential"`` and ``"dask"`` (joblib's Dask backend,
``joblib.parallel_config(backend="dask")``): on the scheduler at
``scheduler=ADDRESS`` if given, else on the Dask client already active (see
:func:`dask_cluster`), else on a ``dask.distributed.LocalCluster`` started
for the call with ``n_jobs`` single-threaded worker processes. ``run_one``
must be importable by the workers (a top-level function of an installed
module) and must draw all its randomness from the seed it is given; then
the records are bit-identical across backends (``test_runner.py``), except
for fields that measure time, which ``run_one`` should name ``time`` or
``*_time`` / ``elapsed`` (see :func:`strip_timings`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed, parallel_config
from tqdm.auto import tqdm

BACKENDS = ("loky", "threading", "sequential", "dask")


def config_key(config: dict) -> str:
    """Stable hash of a config (sorted JSON)."""
    text = json.dumps(config, sort_keys=True, default=_json_default)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_seed(root_seed: int, key: str) -> np.random.SeedSequence:
    """The per-run seed: spawned from ``root_seed`` with the config key as spawn key."""
    return np.random.SeedSequence(int(root_seed), spawn_key=(int(key, 16),))


class ResultStore:
    """Append-only JSONL results file (one record per line)."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def records(self) -> list[dict]:
        """Every complete record, in file order (a line cut by an interruption is skipped)."""
        if not self.path.exists():
            return []
        out = []
        with self.path.open() as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut by an interruption
                    continue
        return out

    def done_keys(self) -> set[str]:
        return {r["key"] for r in self.records() if "key" in r}

    def repair(self):
        """Drop a trailing partial line (written when a run was killed mid-write),
        so that the next record starts on a line of its own."""
        if not self.path.exists():
            return
        with self.path.open("rb+") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if size == 0:
                return
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return
            fh.seek(0)
            data = fh.read()
            fh.truncate(data.rfind(b"\n") + 1)

    def append(self, record: dict):
        line = (json.dumps(record, default=_json_default) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)  # one write: a record is never interleaved with another
            os.fsync(fd)
        finally:
            os.close(fd)


def run_grid(configs: Iterable[dict], run_one: Callable[[dict, np.random.SeedSequence], dict], *,
             store: ResultStore, root_seed: int = 0, n_jobs: int = 1, backend: str = "loky",
             progress: bool = True, desc: str = "runs", scheduler: str | None = None
             ) -> list[dict]:
    """Run every config not already in ``store``; return all records of ``configs``.

    ``run_one(config, seed_sequence)`` must be a picklable top-level function
    returning a JSON-serializable dict. Each record is ``{"key", "config",
    **result}``; the records are returned in the order of ``configs`` (duplicates
    once). ``backend`` and ``scheduler``: see the module docstring.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
    if scheduler is not None and backend != "dask":
        raise ValueError(f"scheduler is only used with backend='dask', got backend={backend!r}")
    configs = list(configs)
    keyed = {config_key(c): c for c in configs}
    store.repair()
    done = store.done_keys()
    todo = [(k, c) for k, c in keyed.items() if k not in done]
    if todo:
        bar = tqdm(total=len(keyed), initial=len(keyed) - len(todo), desc=desc,
                   disable=not progress, leave=False, dynamic_ncols=True)
        jobs = (delayed(_run_keyed)(run_one, k, c, run_seed(root_seed, k)) for k, c in todo)
        with _parallel(backend, scheduler, n_jobs) as parallel:
            for record in parallel(jobs):
                store.append(record)
                bar.update()
        bar.close()
    by_key = {r["key"]: r for r in store.records()}
    return [by_key[k] for k in keyed if k in by_key]


@contextlib.contextmanager
def _parallel(backend, scheduler, n_jobs):
    if backend == "sequential":
        yield Parallel(n_jobs=1, backend="sequential", return_as="generator")
        return
    if backend != "dask":
        yield Parallel(n_jobs=n_jobs, backend=backend, return_as="generator_unordered")
        return
    with dask_cluster(scheduler, n_workers=max(1, n_jobs)), parallel_config(backend="dask"):
        yield Parallel(n_jobs=-1, return_as="generator_unordered")


@contextlib.contextmanager
def dask_cluster(scheduler: str | None = None, n_workers: int = 1):
    """Make a Dask client available for ``backend="dask"`` while the block runs.

    ``scheduler`` is the address of a running scheduler (``tcp://host:8786``);
    without it an already active client is reused, else a ``LocalCluster`` of
    ``n_workers`` single-threaded processes is started and closed at the end.
    """
    try:
        # lazy: distributed is an optional dependency (pip install dpopt[dask])
        from distributed import Client, LocalCluster, default_client
    except ImportError:  # pragma: no cover - optional dependency
        raise ValueError("backend='dask' needs dask.distributed: pip install 'dpopt[dask]'"
                         ) from None
    if scheduler is not None:
        if not isinstance(scheduler, str) or not scheduler:
            raise ValueError(f"scheduler must be an address like 'tcp://host:8786', got "
                             f"{scheduler!r}")
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError) as exc:
            raise ValueError(f"scheduler {scheduler!r}: cannot connect ({exc})") from None
        with client:
            yield client
        return
    try:
        yield default_client()
        return
    except ValueError:  # no active client: start a local cluster
        pass
    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


_TIMING_NAMES = ("time", "elapsed", "wall", "wall_time")


def strip_timings(obj):
    """``obj`` without the fields that measure wall time (names ``time``,
    ``elapsed``, ``wall``, ``wall_time``, ``*_time``, ``times``), recursively: what
    must be bit-identical across backends."""
    if isinstance(obj, dict):
        return {k: strip_timings(v) for k, v in obj.items()
                if not (k in _TIMING_NAMES or k == "times" or k.endswith("_time")
                        or k.endswith("_times"))}
    if isinstance(obj, list):
        return [strip_timings(v) for v in obj]
    return obj


#: The relative error recorded for a run whose objective overflowed: one value in every
#: reproduction (JSON "Infinity"; tables print "inf", figures leave the point out).
DIVERGED = math.inf


def relative_error(value, f_star) -> float:
    """(F(w) - F*) / |F*| (the DP-GCD paper's Table 3 caption), :data:`DIVERGED` when F(w)
    is not finite."""
    rel = (value - f_star) / abs(f_star)
    return float(rel) if math.isfinite(rel) else DIVERGED


def fit_record(problem, result, f_star) -> dict:
    """The result fields :mod:`dpopt.experiments.plotting` reads, from a solver's FitResult.

    ``rel_error`` (final), ``gap`` (F(w) - F*), ``trajectory`` (passes,
    rel_error, time at the checkpoints), and the privacy actually spent
    (``epsilon_spent``, ``delta_spent``, ``adjacency``, ``accountant``).
    The objective values are diagnostics computed on the private data.
    """
    f_star = float(f_star)
    scale = abs(f_star) if f_star != 0 else 1.0
    gaps = [float(problem.objective(w)) - f_star for w in result.checkpoints]
    final_gap = float(problem.objective(result.w)) - f_star
    return {
        "rel_error": final_gap / scale,
        "gap": final_gap,
        "trajectory": {"passes": [float(p) for p in result.checkpoint_passes],
                       "rel_error": [g / scale for g in gaps],
                       "time": [float(t) for t in result.checkpoint_times]},
        "epsilon_spent": float(result.epsilon),
        "delta_spent": float(result.delta),
        "adjacency": result.adjacency,
        "accountant": result.accountant,
    }


def _run_keyed(run_one, key, config, seed):
    result = run_one(config, seed)
    return {"key": key, "config": config, **result}


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def plot_record(solver, dataset, epsilon, run, *, rel_error=None, passes=None, trajectory=None,
                times=None, adjacency="replace-one", **extra) -> dict:
    """One record in the fields :mod:`dpopt.experiments.plotting` reads (the reproductions' adapters
    build their ``plot_records`` from this): a curve per (solver, extra config) and panel
    per (dataset, epsilon); ``trajectory`` the relative errors at ``passes``, ``times`` the
    wall times there (for the error-vs-time figure)."""
    rec = {"config": {"solver": solver, "dataset": dataset, "epsilon": epsilon, "run": run,
                      **extra},
           "adjacency": adjacency}
    if rel_error is not None:
        rec["rel_error"] = rel_error
    if trajectory is not None:
        rec["trajectory"] = {"passes": list(passes), "rel_error": list(trajectory)}
        if times is not None:
            rec["trajectory"]["time"] = list(times)
    return rec
