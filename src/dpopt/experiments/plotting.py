"""Figures of experiment results: error vs passes, vs wall time, vs epsilon.

Input: the records of a results JSONL written by
:func:`dpopt.experiments.runner.run_grid` (one JSON object per line). The
fields read are (everything else is ignored):

``config.solver`` (str, required)
    The algorithm; one curve per distinct config once the replicate and
    panel keys below are set aside (labelled by the solver and every other
    config key whose value varies, e.g. ``solver=dp-cd, step=0.5``).
``config.dataset`` (str, optional)
    One panel per dataset.
``config.epsilon`` (number, optional; ``null``, ``"inf"`` or absent: non-private)
    Trajectory figures get one panel per (dataset, epsilon); the
    privacy-utility figure puts it on the x axis.
``config.seed`` / ``rep`` / ``repeat`` / ``run`` (optional)
    Replicates: a curve shows their mean with a min-max band.
``rel_error`` (number)
    Final relative error (F(w) - F*) / F*; if absent, the last value of the
    trajectory is used.
``trajectory`` (object, optional): ``passes`` (list), ``rel_error`` (list,
    same length), ``time`` (list of seconds since the start, optional)
    The error at the solver's checkpoints (``FitResult.checkpoint_passes`` /
    ``checkpoint_times``), for the passes and wall-time figures.
``adjacency`` (str, optional)
    Shown in the panel titles; panels mixing adjacencies say so
    (docs/design.md invariant 1).

The same fields may instead sit in a ``result`` sub-object of the record.
Errors are plotted on a log scale, floored at 1e-16 (a run at the optimum).
"""

from __future__ import annotations

import json
import math
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

__all__ = ["load_records", "plot_error_vs_passes", "plot_error_vs_time",
           "plot_privacy_utility", "render", "KINDS"]

REPLICATE_KEYS = ("seed", "rep", "repeat", "run")
PANEL_KEYS = ("dataset", "epsilon")
FLOOR = 1e-16
KINDS = ("passes", "time", "epsilon")
MARKED = 12  # curves with at most this many points get a marker at each point


def load_records(path) -> list[dict]:
    """The records of a results JSONL file (cut lines skipped)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"RESULTS {str(path)!r}: no such file")
    out = []
    with path.open() as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    if not out:
        raise ValueError(f"RESULTS {str(path)!r}: no JSON records")
    return out


# -- reading records -------------------------------------------------------------


def _field(rec, name):
    if name in rec:
        return rec[name]
    return (rec.get("result") or {}).get(name)


def _epsilon(config):
    eps = config.get("epsilon")
    if eps is None or (isinstance(eps, str) and eps.lower() in ("inf", "infinity")):
        return math.inf
    return float(eps)


def _final_error(rec):
    err = _field(rec, "rel_error")
    if err is None:
        traj = _field(rec, "trajectory") or {}
        errs = traj.get("rel_error") or []
        err = errs[-1] if errs else None
    return None if err is None else float(err)


def _usable(records):
    out = [r for r in records if isinstance(r.get("config"), dict) and "solver" in r["config"]]
    if not out:
        raise ValueError("no record has config.solver (see dpopt.experiments.plotting for the fields read)")
    return out


def _series_key(config, exclude):
    return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in config.items()
                        if k not in exclude and k not in REPLICATE_KEYS))


def _labels(keys):
    """Label each series by the solver and the keys whose value varies."""
    varying = set()
    for name in {k for key in keys for k, _ in key}:
        values = {dict(key).get(name) for key in keys}
        if len(values) > 1:
            varying.add(name)
    out = {}
    for key in keys:
        d = dict(key)
        parts = [json.loads(d["solver"])]
        parts += [f"{k}={json.loads(v)}" for k, v in sorted(d.items())
                  if k in varying and k != "solver"]
        out[key] = ", ".join(str(p) for p in parts)
    return out


def _panels(records, keys):
    panels = defaultdict(list)
    for r in records:
        c = r["config"]
        panel = tuple((k, c.get(k)) if k != "epsilon" else (k, _epsilon(c)) for k in keys)
        panels[panel].append(r)
    return dict(sorted(panels.items(), key=lambda kv: json.dumps(kv[0], default=str)))


def _panel_title(panel, recs):
    parts = []
    for k, v in panel:
        if k == "dataset" and v is not None:
            parts.append(str(v))
        elif k == "epsilon":
            parts.append("non-private" if math.isinf(v) else f"ε = {v:g}")
    adj = sorted({str(_field(r, "adjacency")) for r in recs if _field(r, "adjacency")})
    if len(adj) == 1:
        parts.append(adj[0])
    elif len(adj) > 1:
        parts.append("MIXED adjacency: " + " / ".join(adj))
    return ", ".join(parts)


def _figure(n_panels):
    # lazy: matplotlib only when a figure is drawn (~0.5 s to import)
    import matplotlib

    matplotlib.use("Agg", force=False)
    # lazy: matplotlib only when a figure is drawn (~0.5 s to import)
    import matplotlib.pyplot as plt

    ncols = min(3, max(1, n_panels))
    nrows = math.ceil(n_panels / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.6 * nrows), squeeze=False)
    for ax in axes.ravel()[n_panels:]:
        ax.set_visible(False)
    return fig, axes.ravel()


def _band(ax, x, ys, label, color):
    ys = np.maximum(np.asarray(ys, dtype=np.float64), FLOOR)
    few = len(x) <= MARKED  # a few checkpoints (e.g. pass budgets): mark them, one is visible
    ax.plot(x, ys.mean(axis=0), label=label, color=color, lw=1.6, marker="o" if few else None,
            ms=3)
    if ys.shape[0] > 1:
        ax.fill_between(x, ys.min(axis=0), ys.max(axis=0), color=color, alpha=0.2, lw=0)


# -- figures -------------------------------------------------------------------------


def _trajectory_figure(records, xfield):
    records = [r for r in _usable(records) if (_field(r, "trajectory") or {}).get("rel_error")
               and (xfield == "passes" or (_field(r, "trajectory") or {}).get("time"))]
    if not records:
        need = "trajectory.rel_error" + (" and trajectory.time" if xfield == "time" else "")
        raise ValueError(f"no record has {need}")
    panels = _panels(records, PANEL_KEYS)
    fig, axes = _figure(len(panels))
    colors = _colors()
    all_keys = sorted({_series_key(r["config"], PANEL_KEYS) for r in records})
    labels = _labels(all_keys)
    color_of = {k: colors[i % len(colors)] for i, k in enumerate(all_keys)}
    for ax, (panel, recs) in zip(axes, panels.items()):
        groups = defaultdict(list)
        for r in recs:
            groups[_series_key(r["config"], PANEL_KEYS)].append(_field(r, "trajectory"))
        for key, trajs in sorted(groups.items()):
            x, ys = _align(trajs, xfield)
            _band(ax, x, ys, labels[key], color_of[key])
        ax.set_yscale("log")
        ax.set_xlabel("passes on the data" if xfield == "passes" else "wall time (s)")
        ax.set_ylabel("relative error (F(w) − F*) / F*")
        ax.set_title(_panel_title(panel, recs), fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _align(trajs, xfield):
    """Replicates on a common x: the passes of the first one (others interpolated);
    for time, the mean time at each checkpoint."""
    first = trajs[0]
    passes = np.asarray(first["passes"], dtype=np.float64)
    ys = []
    for t in trajs:
        p, e = np.asarray(t["passes"], dtype=np.float64), np.asarray(t["rel_error"], dtype=float)
        ys.append(e if p.shape == passes.shape and np.array_equal(p, passes)
                  else np.interp(passes, p, e))
    if xfield == "passes":
        return passes, np.array(ys)
    times = []
    for t in trajs:
        p, s = np.asarray(t["passes"], dtype=np.float64), np.asarray(t["time"], dtype=float)
        times.append(s if p.shape == passes.shape and np.array_equal(p, passes)
                     else np.interp(passes, p, s))
    x = np.maximum(np.mean(times, axis=0), 1e-6)
    return x, np.array(ys)


def plot_error_vs_passes(records):
    """Relative error vs passes: one panel per (dataset, epsilon), one curve per
    config (mean, min-max band over replicates), log scale."""
    return _trajectory_figure(records, "passes")


def plot_error_vs_time(records):
    """Relative error (log scale) vs wall time (mean time at each checkpoint)."""
    return _trajectory_figure(records, "time")


def plot_privacy_utility(records):
    """Final relative error vs epsilon (log-log), one panel per dataset; a
    non-private series is drawn as a dashed horizontal line."""
    records = [r for r in _usable(records) if _final_error(r) is not None]
    if not records:
        raise ValueError("no record has rel_error or trajectory.rel_error")
    panels = _panels(records, ("dataset",))
    fig, axes = _figure(len(panels))
    colors = _colors()
    exclude = ("dataset", "epsilon")
    all_keys = sorted({_series_key(r["config"], exclude) for r in records})
    labels = _labels(all_keys)
    color_of = {k: colors[i % len(colors)] for i, k in enumerate(all_keys)}
    for ax, (panel, recs) in zip(axes, panels.items()):
        groups = defaultdict(lambda: defaultdict(list))
        for r in recs:
            groups[_series_key(r["config"], exclude)][_epsilon(r["config"])].append(
                _final_error(r))
        for key, by_eps in sorted(groups.items()):
            eps = sorted(e for e in by_eps if math.isfinite(e))
            if eps:
                errs = [np.maximum(np.asarray(by_eps[e], dtype=float), FLOOR) for e in eps]
                mean = [e.mean() for e in errs]
                ax.plot(eps, mean, marker="o", ms=3, label=labels[key], color=color_of[key])
                ax.fill_between(eps, [e.min() for e in errs], [e.max() for e in errs],
                                color=color_of[key], alpha=0.2, lw=0)
            if math.inf in by_eps:
                ax.axhline(max(float(np.mean(by_eps[math.inf])), FLOOR), ls="--",
                           color=color_of[key], label=f"{labels[key]} (non-private)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _epsilon_ticks(ax, sorted({_epsilon(r["config"]) for r in recs} - {math.inf}))
        ax.set_xlabel("ε")
        ax.set_ylabel("final relative error")
        ax.set_title(_panel_title(panel, recs) or "privacy-utility", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _epsilon_ticks(ax, eps):
    # lazy: matplotlib only when a figure is drawn (~0.5 s to import)
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    if eps and len(eps) <= 8:
        ax.xaxis.set_major_locator(FixedLocator(eps))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())


def _colors():
    # lazy: matplotlib only when a figure is drawn (~0.5 s to import)
    import matplotlib.pyplot as plt

    return plt.rcParams["axes.prop_cycle"].by_key()["color"]


_FIGURES = {"passes": ("error_vs_passes", plot_error_vs_passes),
            "time": ("error_vs_time", plot_error_vs_time),
            "epsilon": ("privacy_utility", plot_privacy_utility)}


def render(results, out_dir=None, *, kinds=KINDS, formats=("png", "svg"),
           adapt=None) -> list[Path]:
    """Write the figures of ``results`` (a JSONL path) to ``out_dir`` (default:
    beside the file) as ``<stem>_<figure>.<format>``; returns the paths written.
    ``adapt`` maps the loaded records to the fields above first (the command line
    passes :func:`dpopt.experiments.plot_records`, which reads every reproduction's file).

    A kind whose fields are absent from every record is skipped; if none can
    be drawn, ``ValueError``.
    """
    results = Path(results)
    records = load_records(results)
    if adapt is not None:
        records = adapt(records)
    # lazy: matplotlib only when a figure is drawn (~0.5 s to import)
    import matplotlib.pyplot as plt

    bad = [k for k in kinds if k not in _FIGURES]
    if bad or not kinds:
        raise ValueError(f"kinds must be a non-empty subset of {list(KINDS)}, got {list(kinds)}")
    bad = [f for f in formats if f not in ("png", "svg", "pdf")]
    if bad or not formats:
        raise ValueError(f"formats must be a non-empty subset of ['png', 'svg', 'pdf'], "
                         f"got {list(formats)}")
    out_dir = results.parent if out_dir is None else Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written, reasons = [], []
    for kind in kinds:
        name, func = _FIGURES[kind]
        try:
            fig = func(records)
        except ValueError as exc:
            reasons.append(f"{kind}: {exc}")
            continue
        for fmt in formats:
            path = out_dir / f"{results.stem}_{name}.{fmt}"
            fig.savefig(path, dpi=150)
            written.append(path)
        plt.close(fig)
    if not written:
        raise ValueError(f"RESULTS {str(results)!r}: nothing to plot ({'; '.join(reasons)})")
    for reason in reasons:
        warnings.warn(f"skipped figure {reason}", UserWarning, stacklevel=2)
    return written
