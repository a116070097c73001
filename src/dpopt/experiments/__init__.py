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
    """A reproduction: ``run(out, quick, n_jobs, backend, progress)`` writes its results
    under ``out`` (``runs.jsonl`` first); ``plot_records`` maps the raw records of its
    ``runs.jsonl`` to the fields :mod:`dpopt.experiments.plotting` reads (``None`` when they already are,
    or when it has nothing to draw)."""

    name: str
    run: Callable
    description: str
    plot_records: Callable | None = None


_EXPERIMENTS: dict[str, Experiment] = {}


def register_experiment(name, *, description, plot_records=None):
    def decorator(func):
        if name in _EXPERIMENTS:
            raise ValueError(f"experiment {name!r} is already registered")
        _EXPERIMENTS[name] = Experiment(name, func, description, plot_records)
        return func

    return decorator


def _plottable(records):
    return any(isinstance(r.get("config"), dict) and "solver" in r["config"]
               and (r.get("rel_error") is not None or r.get("trajectory")) for r in records)


def plot_records(records) -> list[dict]:
    """The records of any reproduction's ``runs.jsonl`` in the fields :mod:`dpopt.experiments.plotting`
    reads (``dpopt plot results/NAME/runs.jsonl``): records already in that form are
    returned as they are, others go through the first reproduction adapter that
    recognises them (each adapter returns ``[]`` for records that are not its own)."""
    if _plottable(records):
        return records
    for exp in available_experiments().values():
        if exp.plot_records is not None:
            out = exp.plot_records(records)
            if out:
                return out
    return records


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
           "fit_record", "get_experiment", "plot_records", "register_experiment", "run_grid",
           "run_seed", "strip_timings"]
