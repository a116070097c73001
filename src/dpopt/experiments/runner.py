"""Run a grid of independent experiments, keeping every finished run.

A run is a JSON-serializable ``config`` dict. Its key is a hash of the config,
its seed is derived from the root seed and that key (so a run gives the same
result whatever the backend, the order or the number of workers). Results
are appended to a JSONL file as they finish (one line per run, flushed), so an
interrupted grid resumes where it stopped and never runs a config twice.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from tqdm.auto import tqdm


def config_key(config: dict) -> str:
    """Stable hash of a config (sorted JSON)."""
    text = json.dumps(config, sort_keys=True, default=_json_default)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_seed(root_seed: int, key: str) -> np.random.SeedSequence:
    """The per-run seed: spawned from ``root_seed`` with the config key as spawn key."""
    return np.random.SeedSequence(int(root_seed), spawn_key=(int(key, 16),))


class ResultStore:
    """Append-only JSONL results file."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def records(self) -> list[dict]:
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

    def append(self, record: dict):
        with self.path.open("a") as fh:
            fh.write(json.dumps(record, default=_json_default) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def run_grid(configs: Iterable[dict], run_one: Callable[[dict, np.random.SeedSequence], dict], *,
             store: ResultStore, root_seed: int = 0, n_jobs: int = 1, backend: str = "loky",
             progress: bool = True, desc: str = "runs") -> list[dict]:
    """Run every config not already in ``store``; return all records of ``configs``.

    ``run_one(config, seed_sequence)`` must be a picklable top-level function
    returning a JSON-serializable dict. Each record is ``{"key", "config",
    **result}``.
    """
    configs = list(configs)
    keyed = {config_key(c): c for c in configs}
    done = store.done_keys()
    todo = [(k, c) for k, c in keyed.items() if k not in done]
    if todo:
        jobs = (delayed(_run_keyed)(run_one, k, c, run_seed(root_seed, k)) for k, c in todo)
        parallel = Parallel(n_jobs=n_jobs, backend=backend, return_as="generator_unordered")
        bar = tqdm(total=len(todo), desc=desc, disable=not progress, leave=False)
        for record in parallel(jobs):
            store.append(record)
            bar.update()
        bar.close()
    by_key = {r["key"]: r for r in store.records()}
    return [by_key[k] for k in keyed if k in by_key]


def _run_keyed(run_one, key, config, seed):
    result = run_one(config, seed)
    return {"key": key, "config": config, **result}


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")
