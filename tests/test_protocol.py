"""The reproductions' shared protocol (experiments/protocol.py): bundles, summaries, tables,
figures."""

import csv
import math

import numpy as np
import pytest

import dpopt
from dpopt.experiments import protocol
from dpopt.experiments.protocol import (
    DIVERGED,
    ProblemBundle,
    best_rows,
    budget_curves,
    bundle,
    fmt,
    fmt_value,
    local_dataset,
    markdown_table,
    plot_record,
    save_figure,
    summarize,
    write_csv,
)

BUILDS = []


def small_problem(name, quick):
    """A module-level build function (counts its calls)."""
    BUILDS.append((name, quick))
    if name == "missing":
        return None
    rng = np.random.default_rng(3)
    n = 30 if quick else 40
    X = rng.standard_normal((n, 4))
    problem = dpopt.Problem(X, X @ np.arange(1.0, 5.0), loss="squared", penalty="l2", alpha=0.1)
    return problem, {"n": n}


def bare_problem(name, quick):
    return small_problem(name, quick)[0]


def test_bundle_solves_once_per_process_and_matches_the_reference():
    bundle.cache_clear()
    BUILDS.clear()
    b = bundle("toy", True, small_problem)
    assert isinstance(b, ProblemBundle) and b.name == "toy" and b.info["n"] == 30
    w_star, f_star = dpopt.reference_optimum(b.problem)
    assert b.f_star == f_star and np.array_equal(b.w_star, w_star)  # same tolerance
    assert bundle("toy", True, small_problem) is b and BUILDS == [("toy", True)]
    assert bundle("toy", False, small_problem).info["n"] == 40  # quick is part of the key
    assert bundle("toy", True, bare_problem).info == {}  # a bare Problem: empty info
    with pytest.raises(TypeError):
        b.info["n"] = 1  # read-only
    assert b.relative_error(b.w_star) == pytest.approx(0.0, abs=1e-9)
    assert b.relative_error(b.problem.zeros()) > 0


def test_local_dataset_is_the_registry_copy_or_none(tmp_path, monkeypatch):
    monkeypatch.setenv("DPOPT_DATA", str(tmp_path))  # nothing there
    monkeypatch.setenv("DPOPT_CACHE", str(tmp_path))
    assert local_dataset("california") is None
    with pytest.raises(ValueError):
        local_dataset("no-such-dataset")


def test_bundle_of_missing_data_and_bad_arguments():
    assert bundle("missing", False, small_problem) is None
    with pytest.raises(ValueError, match="build"):
        bundle("toy", True, "not a function")
    with pytest.raises(ValueError, match="name"):
        bundle(3, True, small_problem)


RECORDS = [{"config": {"problem": "a", "algo": "x", "step": 1}, "rel_error": [0.1, 0.3]},
           {"config": {"problem": "a", "algo": "x", "step": 2}, "rel_error": [0.2]},
           {"config": {"problem": "a", "algo": "y", "step": 1}, "rel_error": [DIVERGED, 1.0]},
           {"config": {"problem": "b", "algo": "x", "step": 1}, "rel_error": [0.5, 0.5]}]


def test_summarize_groups_in_first_appearance_order_with_population_std():
    rows = summarize(RECORDS, by=("problem", "algo"), value="rel_error")
    assert [(r["problem"], r["algo"]) for r in rows] == [("a", "x"), ("a", "y"), ("b", "x")]
    ax = rows[0]
    assert ax["values"] == [0.1, 0.3, 0.2] and ax["count"] == 3
    assert ax["mean"] == float(np.mean([0.1, 0.3, 0.2]))
    assert ax["std"] == float(np.std([0.1, 0.3, 0.2]))
    assert (ax["min"], ax["max"]) == (0.1, 0.3)
    assert ax["records"] == RECORDS[:2] and rows[2]["records"] == RECORDS[3:]
    assert rows[1]["mean"] == DIVERGED and math.isnan(rows[1]["std"]) and rows[2]["std"] == 0.0


def test_summarize_with_callables_and_best_rows():
    rows = summarize(RECORDS, by=lambda r: {"algo": r["config"]["algo"],
                                            "step": r["config"]["step"]},
                     value=lambda r: r["rel_error"][0])
    assert [(r["algo"], r["step"], r["count"]) for r in rows] == [("x", 1, 2), ("x", 2, 1),
                                                                  ("y", 1, 1)]
    best = best_rows(rows, by=("algo",))
    assert list(best) == [("x",), ("y",)]
    assert best[("x",)]["step"] == 2 and best[("y",)]["mean"] == DIVERGED
    tie = best_rows([{"k": 1, "mean": 0.5, "i": 0}, {"k": 1, "mean": 0.5, "i": 1}], by=("k",))
    assert tie[(1,)]["i"] == 0  # the first one on ties
    with pytest.raises(ValueError, match="by"):
        summarize(RECORDS, by="problem", value="rel_error")


def test_one_number_format():
    assert fmt_value(0.123456) == "0.123" and fmt_value(0.123456, 4) == "0.1235"
    assert fmt_value(DIVERGED) == "inf" and fmt_value(-math.inf) == "-inf"
    assert fmt_value(math.nan) == "nan" and fmt_value(None) == "–"
    assert fmt_value(np.float64(2.5e-7)) == "2.5e-07"
    assert fmt(0.14581, 6e-4, digits=4) == "0.1458 ± 0.0006"
    assert fmt(DIVERGED, 0.0) == "inf ± 0"


def test_markdown_table_formats_cells_and_checks_widths():
    text = markdown_table(["problem", "error", "runs", "note"],
                          [["a", 0.123456, 5, None], ["b", DIVERGED, 2, "x"]])
    assert text.splitlines() == ["| problem | error | runs | note |", "|---|---|---|---|",
                                 "| a | 0.123 | 5 |  |", "| b | inf | 2 | x |"]
    with pytest.raises(ValueError, match="rows must have 2 cells"):
        markdown_table(["a", "b"], [[1]])


def test_write_csv_keeps_full_precision(tmp_path):
    rows = [{"a": 0.1234567891234, "b": [1, 2]}, {"a": np.float64(DIVERGED), "c": "z"}]
    path = write_csv(tmp_path / "t.csv", rows)
    with path.open() as fh:
        got = list(csv.DictReader(fh))
    assert list(got[0]) == ["a", "b", "c"]
    assert float(got[0]["a"]) == 0.1234567891234 and got[0]["b"] == "[1, 2]"
    assert got[0]["c"] == "" and got[1]["a"] == "inf" and got[1]["c"] == "z"
    write_csv(tmp_path / "u.csv", rows, columns=["c"])
    assert (tmp_path / "u.csv").read_text().splitlines() == ["c", '""', "z"]


def test_save_figure_draws_through_plotting(tmp_path):
    recs = [plot_record("dp-cd", "toy", 1.0, r, rel_error=0.1 + r, passes=[0, 1, 2],
                        trajectory=[1.0, 0.5, 0.1 + r]) for r in range(2)]
    path = save_figure(recs, tmp_path / "f.png", title="toy, ε = 1")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert save_figure([], tmp_path / "g.png") is None and not (tmp_path / "g.png").exists()
    with pytest.raises(ValueError, match="kind"):
        save_figure(recs, tmp_path / "h.png", kind="bars")
    with pytest.raises(ValueError, match="xscale"):
        save_figure(recs, tmp_path / "h.png", xscale="symlog")
    assert protocol.relative_error is dpopt.experiments.runner.relative_error


def test_save_figure_log_x_axis(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    closed = []
    monkeypatch.setattr(plt, "close", closed.append)
    recs = [plot_record("dp-cd", "toy", 1.0, 0, passes=[1, 10, 100], trajectory=[1.0, 0.5, 0.1])]
    save_figure(recs, tmp_path / "log.png", xscale="log")
    save_figure(recs, tmp_path / "lin.png")
    assert [ax.get_xscale() for ax in closed[0].axes if ax.get_visible()] == ["log"]
    assert closed[1].axes[0].get_xscale() == "linear"
    monkeypatch.undo()
    for fig in closed:
        plt.close(fig)


def test_plot_record_times_feed_the_time_figure(tmp_path):
    rec = plot_record("dp-cd", "toy", 1.0, 0, passes=[1], trajectory=[0.5], times=[0.01])
    assert rec["trajectory"] == {"passes": [1], "rel_error": [0.5], "time": [0.01]}
    assert save_figure([rec], tmp_path / "t.png", kind="time").exists()  # one point is drawn
    assert "time" not in plot_record("a", "b", 1.0, 0, passes=[1], trajectory=[1.0])["trajectory"]


def test_budget_curves_follow_each_run_index_across_budgets():
    runs = {b: [{"rel_error": 1.0 / b + r, "time": 0.1 * b, "adjacency": "add-remove"}
                for r in range(3 if b == 2 else 2)] for b in (5, 2)}
    cells = {("dp-cd", "toy", 1.0, b): v for b, v in runs.items()}
    cells[("dp-sgd", "toy", 1.0, 2)] = [{"rel_error": 0.3}]
    curves = budget_curves(cells)
    assert [(c["config"]["solver"], c["config"]["run"]) for c in curves] == \
        [("dp-cd", 0), ("dp-cd", 1), ("dp-sgd", 0)]  # runs beyond the fewest are left out
    cd = curves[1]
    assert cd["trajectory"] == {"passes": [2, 5], "rel_error": [1.5, 1.2], "time": [0.2, 0.5]}
    assert cd["rel_error"] == 1.2 and cd["adjacency"] == "add-remove"
    assert "time" not in curves[2]["trajectory"] and curves[2]["adjacency"] == "replace-one"
