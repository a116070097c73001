"""The one protocol of the reproductions (design.md, "Reproductions"): problem bundle
(:func:`bundle`, :func:`local_dataset`), grid and runs (:mod:`.runner`), summary
(:func:`summarize`, :func:`best_rows`), tables (:func:`fmt_value`, :func:`fmt`,
:func:`markdown_table`, :func:`write_csv`) and figures through :mod:`dpopt.experiments.plotting`
(:func:`save_figure`). A reproduction keeps only its data and its special stages.

The objective values and the reference optimum are non-private diagnostics computed on the
private data, not private outputs (design.md, invariant 4).
"""

from __future__ import annotations

import csv
import functools
import json
import math
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import numpy as np

import dpopt
from dpopt.datasets import DatasetNotAvailableError, load_dataset
from dpopt.experiments import plotting
from dpopt.experiments.runner import DIVERGED, fit_record, plot_record, relative_error

__all__ = ["DIVERGED", "ProblemBundle", "best_rows", "budget_curves", "bundle", "fit_record", "fmt",
           "fmt_value", "local_dataset", "markdown_table", "plot_record", "relative_error",
           "save_figure", "summarize", "write_csv"]


# -- problem bundle -----------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ProblemBundle:
    """A reproduction's problem with its non-private optimum.

    ``info`` holds whatever else the reproduction needs beside the problem (n, p, a test
    split, public constants, ...); it is read-only. Bundles compare by identity (the cache
    hands out one per problem).
    """

    name: str
    problem: object  # dpopt.Problem (not imported here: experiments import solvers lazily)
    f_star: float
    w_star: np.ndarray
    info: Mapping = field(default_factory=dict)

    def relative_error(self, w) -> float:
        """(F(w) - F*) / |F*| of ``w`` on this problem (:func:`.runner.relative_error`)."""
        return relative_error(self.problem.objective(w), self.f_star)


def bundle(name: str, quick: bool, build: Callable) -> ProblemBundle | None:
    """The cached :class:`ProblemBundle` of problem ``name``.

    ``build(name, quick)`` returns a ``dpopt.Problem``, a ``(problem, info)`` pair, or
    ``None`` when the problem's data are not available (then ``bundle`` returns ``None``).
    It must be a module-level function (it is part of the cache key and the workers
    import it). (w*, F*) come from ``dpopt.reference_optimum(problem)`` at its default
    tolerance, once per process and (name, quick, build).
    """
    if not isinstance(name, str):
        raise ValueError(f"name must be a str, got {type(name).__name__}")
    if not callable(build):
        raise ValueError(f"build must be callable, got {type(build).__name__}")
    return _cached_bundle(name, bool(quick), build)


@functools.lru_cache(maxsize=16)
def _cached_bundle(name, quick, build):
    built = build(name, quick)
    if built is None:
        return None
    problem, info = built if isinstance(built, tuple) else (built, {})
    w_star, f_star = dpopt.reference_optimum(problem)
    return ProblemBundle(name, problem, f_star, w_star, MappingProxyType(dict(info)))


bundle.cache_clear = _cached_bundle.cache_clear


def local_dataset(name: str):
    """``(X, y)`` (float64) of the named dataset of :mod:`dpopt.datasets` if a local copy
    exists (``$DPOPT_DATA`` or the cache; nothing is downloaded), else ``None``: the
    reproductions skip a problem whose data are not here."""
    try:
        data = load_dataset(name, download=False)
    except DatasetNotAvailableError:
        return None
    return np.asarray(data.X, dtype=np.float64), np.asarray(data.y, dtype=np.float64)


# -- summaries ----------------------------------------------------------------------


def _getter(spec):
    """A record -> value function from a field name (looked up in the record, then in its
    ``config``) or a callable."""
    if callable(spec):
        return spec

    def get(record):
        if spec in record:
            return record[spec]
        return record["config"][spec]

    return get


def summarize(records: Iterable[Mapping], by: Sequence[str] | Callable,
              value: str | Callable) -> list[dict]:
    """One row per group of ``records``: the group's ``by`` fields, then ``mean``, ``std``
    (population, ddof = 0), ``min``, ``max``, ``count``, ``values`` and ``records`` (the
    group's records, for any other statistic), all in record order.

    ``by``: field names (each looked up in the record, then in ``record["config"]``), or a
    callable returning a dict of the group's fields. ``value``: a field name or a callable;
    a list value contributes all its items (e.g. the runs of one configuration). Groups come
    in the order of their first record. A group with a non-finite value has mean
    :data:`.runner.DIVERGED` (``inf``) and std NaN.
    """
    if isinstance(by, str):
        raise ValueError(f"by must be a sequence of field names or a callable, got {by!r}")
    key_of = by if callable(by) else (lambda r: {k: _getter(k)(r) for k in by})
    get_value = _getter(value)
    groups: dict = {}
    for record in records:
        fields = key_of(record)
        key = json.dumps(fields, sort_keys=True, default=str)
        _, values, members = groups.setdefault(key, (fields, [], []))
        v = get_value(record)
        values.extend(v if isinstance(v, (list, tuple)) else [v])
        members.append(record)
    return [dict(fields, **_stats(values), records=members)
            for fields, values, members in groups.values()]


def _stats(values):
    arr = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):  # a diverged run: std is NaN, as numpy says
        std = float(np.std(arr))
    return {"mean": float(np.mean(arr)), "std": std, "min": float(arr.min()),
            "max": float(arr.max()), "count": int(arr.size), "values": list(values)}


def best_rows(rows: Iterable[Mapping], by: Sequence[str], score: str = "mean") -> dict:
    """For every value of the ``by`` fields, the row with the lowest ``score`` (the first
    one on ties): ``{(values of by): row}`` in the order of first appearance."""
    best: dict = {}
    for row in rows:
        key = tuple(row[k] for k in by)
        if key not in best or row[score] < best[key][score]:
            best[key] = row
    return best


# -- tables -------------------------------------------------------------------------


def fmt_value(value, digits: int = 3) -> str:
    """The one number format of the reproductions' tables: ``digits`` significant digits
    (``g``), ``inf`` for a diverged value, ``–`` for a missing one (``None``)."""
    if value is None:
        return "–"
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}g}"


def fmt(mean, std, digits: int = 3) -> str:
    """``mean ± std``: the mean to ``digits`` significant digits, the std to one."""
    return f"{fmt_value(mean, digits)} ± {fmt_value(std, 1)}"


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        return fmt_value(value)
    return str(value)


def markdown_table(header: Sequence, rows: Iterable[Sequence]) -> str:
    """A markdown table (no trailing newline). Float cells go through :func:`fmt_value`,
    ``None`` is an empty cell, anything else is ``str``."""
    header = [str(h) for h in header]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        row = list(row)
        if len(row) != len(header):
            raise ValueError(f"rows must have {len(header)} cells like the header, got "
                             f"{len(row)}: {row!r}")
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines)


def write_csv(path, rows: Iterable[Mapping], columns: Sequence[str] | None = None) -> Path:
    """Write dict ``rows`` to a CSV file at full precision; ``columns`` default to every
    key in order of first appearance (a missing key is an empty cell). Lists and dicts are
    written as JSON."""
    rows = list(rows)
    if columns is None:
        columns = list(dict.fromkeys(k for row in rows for k in row))
    path = Path(path)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_csv_cell(row.get(c)) for c in columns])
    return path


def _csv_cell(value):
    if value is None:
        return ""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=float)
    if isinstance(value, np.generic):
        return value.item()
    return value


# -- figures ------------------------------------------------------------------------


def budget_curves(cells: Mapping) -> list[dict]:
    """Plot records of results tuned per pass budget (the DP-CD and DP-GCD papers' figures).

    ``cells`` maps (solver, dataset, epsilon, budget) to the runs of the configuration
    chosen at that budget, each a dict with ``rel_error`` and optionally ``time`` (seconds)
    and ``adjacency`` (default replace-one). One record per curve (solver, dataset,
    epsilon) and run index, up to the fewest runs of its budgets: the error at every budget,
    with the seconds when every run has them."""
    curves: dict = {}
    for (solver, dataset, eps, budget), runs in cells.items():
        curves.setdefault((solver, dataset, eps), {})[budget] = runs
    out = []
    for (solver, dataset, eps), by_budget in curves.items():
        budgets = sorted(by_budget)
        for r in range(min(len(runs) for runs in by_budget.values())):
            runs = [by_budget[b][r] for b in budgets]
            times = [run.get("time") for run in runs]
            out.append(plot_record(solver, dataset, eps, r, rel_error=runs[-1]["rel_error"],
                                   passes=budgets, trajectory=[x["rel_error"] for x in runs],
                                   times=None if None in times else times,
                                   adjacency=runs[0].get("adjacency", "replace-one")))
    return out


def save_figure(records: Sequence[Mapping], path, kind: str = "passes",
                title: str | None = None, xscale: str | None = None) -> Path | None:
    """Draw ``records`` (the :mod:`dpopt.experiments.plotting` schema, see :func:`.runner.plot_record`)
    with ``dpopt.experiments.plotting``'s figure of ``kind`` (``passes``, ``time`` or ``epsilon``) and
    save it to ``path``; ``title`` goes above the panels, ``xscale`` (``"log"``) replaces
    the x scale of every panel (points at x <= 0 then fall off). Nothing to draw (no
    records): ``None``, no file."""
    draw = {"passes": plotting.plot_error_vs_passes, "time": plotting.plot_error_vs_time,
            "epsilon": plotting.plot_privacy_utility}
    if kind not in draw:
        raise ValueError(f"kind must be one of {sorted(draw)}, got {kind!r}")
    if xscale not in (None, "linear", "log"):
        raise ValueError(f"xscale must be None, 'linear' or 'log', got {xscale!r}")
    if not records:
        return None
    # lazy: matplotlib only when a figure is drawn (~0.5 s to import)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    fig = draw[kind](list(records))
    for ax in fig.axes if xscale else ():
        if ax.get_visible():
            ax.set_xscale(xscale)
            ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels would overlap
    if title:  # wrapped to the figure's width, above the panels
        lines = textwrap.wrap(title, width=max(30, int(fig.get_figwidth() * 13)))
        fig.suptitle("\n".join(lines), fontsize=10)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.2 * len(lines) / fig.get_figheight()))
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
