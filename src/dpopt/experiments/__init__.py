"""Paper reproductions: each module registers a ``dpopt reproduce NAME`` experiment.

An experiment is ``run(out: Path, quick: bool, n_jobs: int, backend: str, progress: bool)
-> dict`` writing its results (JSONL/CSV), a markdown table and figures under ``out``.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from dpopt.experiments.runner import (
    ResultStore,
    config_key,
    dask_cluster,
    fit_record,
    run_grid,
    run_seed,
    strip_timings,
)


@dataclass(frozen=True)
class Experiment:
    name: str
    run: Callable
    description: str


_EXPERIMENTS: dict[str, Experiment] = {}


def register_experiment(name, *, description):
    def decorator(func):
        if name in _EXPERIMENTS:
            raise ValueError(f"experiment {name!r} is already registered")
        _EXPERIMENTS[name] = Experiment(name, func, description)
        return func

    return decorator


def _discover():
    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_") and mod.name != "runner":
            importlib.import_module(f"{__name__}.{mod.name}")


def available_experiments() -> dict[str, Experiment]:
    _discover()
    return dict(sorted(_EXPERIMENTS.items()))


def get_experiment(name) -> Experiment:
    exps = available_experiments()
    if name not in exps:
        raise ValueError(f"experiment must be one of {sorted(exps)}, got {name!r}")
    return exps[name]


__all__ = ["Experiment", "ResultStore", "available_experiments", "config_key", "dask_cluster",
           "fit_record", "get_experiment", "register_experiment", "run_grid", "run_seed",
           "strip_timings"]
