"""The heavy-tailed reproduction's report: its method families, the aggregation of the
runs into (mean excess risk, standard error, best method) per family, the markdown and CSV
tables and the excess-risk figures against n and epsilon (the drawing
:mod:`dpopt.experiments.plotting` does not express: x axis n, best-of-grid lines with
standard errors, an axis clipped at the risk of w = 0). The runs themselves (data,
protocol, grid) are in :mod:`dpopt.experiments.heavy_tailed`, which re-exports these names.
"""

from __future__ import annotations

import math

import numpy as np

from dpopt.experiments.protocol import best_rows, fmt_value, markdown_table, summarize, write_csv

DELTA = 1e-6  # the reproduction's delta (every run and every table)

FAMILIES = {  # figure/table line -> method-name prefixes (best of the prefix group)
    "ht-acsa (theory r_k)": ["ht-acsa/theory"],
    "ht-acsa (private quantile)": ["ht-acsa/quantile"],
    "ht-acsa (private 0.9-quantile)": ["ht-acsa/quantile,q=0.9"],
    "ht-acsa (theory r_k, shuffle simulation)": ["ht-acsa/theory,shuffle"],
    "ht-sgd (theory r_k)": ["ht-sgd/theory"],
    "ht-sgd (quantile, best T)": ["ht-sgd/quantile"],
    "ht-proxsgd (theory r_k)": ["ht-proxsgd/theory"],
    "ht-proxsgd (quantile, best T)": ["ht-proxsgd/quantile"],
    "DP-SGD (L_f clip, tuned)": ["dp-sgd/"],
    "DP-GD (L_f clip, tuned)": ["dp-gd/"],
    "DP-GD (quantile clip, tuned)": ["dp-gd+quantile/"],
    "ht-subgradient (theory, T_i<=1000)": ["ht-subgradient/theory"],
    "ht-subgradient (quantile, T_i<=1000)": ["ht-subgradient/quantile"],
    "ht-subgradient (theory, theorem T_i)": ["ht-subgradient/theory,T_i=theorem"],
}


def _family_of(method):
    """The family of the longest prefix of ``method`` in :data:`FAMILIES` (a prefix ending
    in '/' takes every method below it, another one the method alone or followed by ',')."""
    matches = [(len(p), fam) for fam, prefixes in FAMILIES.items() for p in prefixes
               if method.startswith(p) and (p.endswith("/") or method[len(p):len(p) + 1] in ("", ","))]
    return max(matches)[1] if matches else method


# ---------------------------------------------------------------------------
# summaries


POINT = ("dataset", "n", "epsilon")


def _aggregate(records):
    """(dataset, n, eps, family) -> (mean excess, standard error, best method): a tuned
    family takes the method of its grid with the lowest mean over the repetitions; the
    trivial predictor w = 0 is the reference family :data:`ZERO`."""
    ran = [r for r in records if "excess" in r]
    fams = {(*(r["config"][k] for k in POINT), ZERO): (r["zero_excess"], 0.0, "w = 0")
            for r in ran}
    rows = summarize(ran, (*POINT, "method"), "excess")
    for row in rows:
        row["family"] = _family_of(row["method"])
    for key, row in best_rows(rows, (*POINT, "family")).items():
        se = _standard_error(row["values"]) if math.isfinite(row["mean"]) else 0.0
        fams[key] = (row["mean"], se, row["method"])
    return fams


def _standard_error(values):
    return float(np.std(values, ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0


def _reference_n(dataset, quick):
    """The n of a dataset's vs-epsilon panel and of its row in the main table."""
    if dataset.startswith("absolute"):
        return 1024 if quick else 4096
    if dataset == "california":
        return 3000 if quick else 14000
    return 3000 if quick else 8000


ZERO = "w = 0 (reference)"
FIG_FAMILIES = ["ht-acsa (theory r_k)", "ht-acsa (private quantile)",
                "ht-acsa (private 0.9-quantile)", "ht-sgd (quantile, best T)",
                "ht-proxsgd (quantile, best T)", "DP-SGD (L_f clip, tuned)",
                "DP-GD (L_f clip, tuned)", "DP-GD (quantile clip, tuned)", ZERO]
NS_FAMILIES = ["ht-subgradient (theory, T_i<=1000)", "ht-subgradient (quantile, T_i<=1000)",
               "ht-subgradient (theory, theorem T_i)", "DP-SGD (L_f clip, tuned)",
               "DP-GD (L_f clip, tuned)", ZERO]


def _plot_panels(fams, panels, families, path, title, clip_factor=None):
    """One log-log panel per (dataset, x key, fixed value); lines = families. With
    ``clip_factor`` the y axis stops at that multiple of the trivial predictor's risk
    (w = 0): a curve above it is drawn at the edge with upward markers and named in a note
    in the panel, so one diverging baseline does not squash the others.

    Bespoke: :mod:`dpopt.experiments.plotting` has no x axis n, no best-of-grid lines with standard
    errors, no excess-risk axis clipped at the w = 0 reference (``dpopt plot`` draws the raw
    runs through :func:`plot_records`)."""
    # lazy: matplotlib only when a figure is drawn (~0.5 s to import)
    import matplotlib

    matplotlib.use("Agg")
    # lazy: matplotlib only when a figure is drawn (~0.5 s to import)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * max(cols, 2.5), 3.3 * rows + 0.9),
                             squeeze=False)
    for ax, (ds, xkey, fixed) in zip(axes.ravel(), panels):
        xi = 1 if xkey == "n" else 2
        zero = [v[0] for k, v in fams.items() if k[0] == ds and k[3] == ZERO
                and k[3 - xi] == fixed]
        top = clip_factor * max(zero) if clip_factor and zero else None
        clipped = []
        for idx, fam in enumerate(families):
            pts = sorted((k[xi], v[0], v[1]) for k, v in fams.items()
                         if k[0] == ds and k[3] == fam and k[3 - xi] == fixed)
            pts = [p for p in pts if np.isfinite(p[1])]
            if not pts:
                continue
            x, y, e = (np.array(a) for a in zip(*pts))
            y = np.maximum(y, 1e-6)
            if top is not None and np.any(y > top):
                clipped.append(f"{fam.split(' (')[0]} up to {y.max():.2g}")
                ax.plot(x, np.minimum(y, top), ls="--" if "DP-" in fam else "-",
                        marker="^", ms=5, color=f"C{idx}", label=fam)
                continue
            style = {"ls": ":", "color": "black", "marker": None} if fam == ZERO else \
                {"ls": "--" if "DP-" in fam else "-", "marker": "o", "color": f"C{idx}"}
            ax.errorbar(x, y, yerr=e, ms=3, capsize=2, label=fam, **style)
        ax.set_xscale("log")
        ax.set_yscale("log")
        xs = sorted({k[xi] for k in fams if k[0] == ds and k[3 - xi] == fixed})
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{x:g}" for x in xs], fontsize=8)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
        other = f"epsilon = {fixed:g}" if xkey == "n" else f"n = {fixed}"
        ax.set_title(f"{ds} ({other})", fontsize=9)
        ax.set_xlabel("n" if xkey == "n" else "epsilon")
        if clipped:
            ax.set_ylim(top=top * 1.5)
            ax.set_title(f"{ds} ({other})\naxis clipped at {clip_factor:g} × the risk of w = 0; "
                         f"▲ on the edge:\n" + "; ".join(clipped), fontsize=8)
        ax.set_ylabel("excess test risk")
        ax.grid(alpha=0.3, which="both")
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    seen = {}
    for ax in axes.ravel():  # every family that appears in some panel, in a fixed order
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    labels = [f for f in families if f in seen]
    handles = [seen[f] for f in labels]
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.9 / (3.3 * rows + 0.9) + 0.04, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_tables(records, fams, out, quick):
    write_csv(out / "summary.csv", (
        {"dataset": ds, "n": n, "epsilon": eps, "family": fam, "mean_excess": mean, "se": se,
         "best_method": method}
        for (ds, n, eps, fam), (mean, se, method) in sorted(fams.items(), key=lambda kv: str(kv[0]))))

    def mean_of(*key):
        return fmt_value(fams.get(key, (None,))[0])

    datasets = sorted({k[0] for k in fams})
    nonsmooth = [ds for ds in datasets if ds.startswith("absolute")]
    main = [[f"{ds} (n={_reference_n(ds, quick)})",
             *(mean_of(ds, _reference_n(ds, quick), 1.0, f) for f in FIG_FAMILIES)]
            for ds in datasets if ds not in nonsmooth]
    ns = [[ds, n, eps, *(mean_of(ds, n, eps, f) for f in NS_FAMILIES)] for ds in nonsmooth
          for (n, eps) in sorted({(k[1], k[2]) for k in fams if k[0] == ds})]
    shuffle = []
    for (ds, n, eps, fam), (mean, _, _) in sorted(fams.items()):
        if fam == "ht-acsa (theory r_k, shuffle simulation)":
            central = fams.get((ds, n, eps, "ht-acsa (theory r_k)"), (None,))[0]
            ratio = mean / central if central and np.isfinite(mean) and central > 0 else None
            shuffle.append([ds, n, eps, fmt_value(central), fmt_value(mean), fmt_value(ratio)])
    text = ["# heavy-tailed: excess test risk (mean over repetitions)", "",
            f"epsilon = 1, delta = {DELTA:g}, replace-one adjacency; tuned = best grid point "
            "on the test risk.", "", markdown_table(["dataset", *FIG_FAMILIES], main), "",
            "## Non-smooth (absolute loss)", "",
            markdown_table(["dataset", "n", "epsilon", *NS_FAMILIES], ns), "",
            "## Central vs shuffle model (simulated protocol; (epsilon, delta)-DP "
            "in the shuffle model by advanced composition over coordinates)", "",
            markdown_table(["dataset", "n", "epsilon", "ht-acsa (theory r_k), central",
                            "ht-acsa (theory r_k), shuffle simulation", "ratio"], shuffle), "",
            "## Parameters chosen by the rules (epsilon = 1, first repetition)", "",
            markdown_table(["dataset", "method", "n", "T", "batch s", "clip C", "passes"],
                           _parameter_rows(records, quick)), ""]
    (out / "results.md").write_text("\n".join(text))


def _parameter_rows(records, quick):
    rows = []
    for r in sorted(records, key=lambda r: (r["config"]["dataset"], r["config"]["method"])):
        c = r["config"]
        if c["rep"] != 0 or c["epsilon"] != 1.0 or "excess" not in r:
            continue
        if not c["method"].startswith("ht-") or "T=" in c["method"]:
            continue
        if not c["dataset"].startswith(("absolute", "california")) and \
                c["n"] != _reference_n(c["dataset"], quick):
            continue
        rows.append([c["dataset"], c["method"], c["n"],
                     *(fmt_value(r.get(k)) for k in ("n_iter", "batch_size", "clip", "passes"))])
    return rows


def write_figures(fams, out, quick):
    """Excess test risk vs n (epsilon = 1) and vs epsilon (at the dataset's reference n) for
    the linear and logistic tasks, California (axis clipped at 100 x the risk of w = 0) and
    the non-smooth task; returns the file names."""
    datasets = sorted({k[0] for k in fams})
    figures = []  # (file, panels, families, title, clip factor)
    for task in ("linear", "logistic"):
        dsets = [d for d in datasets if d.startswith(task)]
        for xkey, short in (("n", "n"), ("epsilon", "eps")) if dsets else ():
            panels = [(d, xkey, 1.0 if xkey == "n" else _reference_n(d, quick)) for d in dsets]
            figures.append((f"fig_{task}_vs_{short}.png", panels, FIG_FAMILIES,
                            f"{task}: excess test risk vs {xkey} (delta = 1e-6, replace-one)", None))
    if "california" in datasets:
        figures.append(("fig_california.png", [("california", "n", 1.0), (
            "california", "epsilon", _reference_n("california", quick))], FIG_FAMILIES,
            "California housing, raw features (robust-scaled on a public split): excess test "
            "risk (delta = 1e-6, replace-one)", 100.0))
    nonsmooth = [d for d in datasets if d.startswith("absolute")]
    if nonsmooth:
        panels = [(d, "n", 1.0) for d in nonsmooth]
        if not quick:
            panels += [(d, "epsilon", _reference_n(d, quick)) for d in nonsmooth]
        figures.append(("fig_absolute.png", panels, NS_FAMILIES, "absolute loss (non-smooth), "
                        "heavy-tailed features: excess test risk", None))
    for name, panels, families, title, clip in figures:
        _plot_panels(fams, panels, families, out / name, title, clip_factor=clip)
    return [f[0] for f in figures]
