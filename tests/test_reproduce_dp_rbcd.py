"""The "dp-rbcd" experiment in --quick mode (synthetic data only, a few seconds)."""

import csv
import json

import pytest

from dpopt.experiments import dp_rbcd as exp
from dpopt.experiments import get_experiment


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("dp-rbcd")
    summary = get_experiment("dp-rbcd").run(out=out, quick=True, n_jobs=1, backend="loky",
                                            progress=False)
    return out, summary


def test_quick_run_writes_tables_and_figures(quick_run):
    out, summary = quick_run
    plan = exp.QUICK
    for name in ("table.md", "results.csv", "runs.jsonl", "error_vs_passes.png",
                 "error_vs_time.png", "plan.json"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "error_vs_passes.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader((out / "results.csv").open()))
    cells = len(plan["datasets"]) * len(plan["methods"]) * len(plan["epsilons"]) * \
        len(plan["budgets"])
    assert len(rows) == cells
    table = (out / "table.md").read_text()
    for method in plan["methods"]:
        assert method in table
    for d in plan["datasets"]:
        assert f"## {d}, ε = 1" in table
    assert "relative to uniform DP-CD" in table
    assert summary["notes"] == "none" and summary["runs"] == 2 * cells


def test_quick_run_spends_at_most_the_budget_and_uses_tuned_configs(quick_run):
    out, _ = quick_run
    records = [json.loads(line) for line in (out / "runs.jsonl").open()]
    tuned = {(r["config"]["dataset"], r["config"]["method"], r["config"]["passes"]): r
             for r in records if r["config"]["stage"] == "tune"}
    finals = [r for r in records if r["config"]["stage"] == "final"]
    assert finals
    for rec in finals:
        c = rec["config"]
        grid = tuned[(c["dataset"], c["method"], c["passes"])]["grid"]
        best = min(grid, key=lambda g: g["mean"])
        assert (c["step"], c["clip"]) == (best["step"], best["clip"])
        assert len(rec["runs"]) == exp.QUICK["final_reps"]
        for run in rec["runs"]:
            assert run["epsilon_spent"] <= c["epsilon"]
            assert len(run["trajectory"]) == c["passes"] + 1
            assert run["error"] == run["trajectory"][-1] >= -1e-9


def test_rerun_resumes_without_running_again(quick_run, monkeypatch):
    out, summary = quick_run
    before = (out / "runs.jsonl").read_text()

    def fail(*args, **kwargs):
        raise AssertionError("a finished configuration was run again")

    monkeypatch.setattr(exp, "run_one", fail)
    again = exp.run(out=out, quick=True, n_jobs=1, backend="loky", progress=False)
    assert (out / "runs.jsonl").read_text() == before
    assert again["runs"] == summary["runs"]


def test_plot_adapter_draws_the_tuned_error_of_every_budget(quick_run):
    out, _ = quick_run
    records = [json.loads(line) for line in (out / "runs.jsonl").open()]
    finals = {(r["config"]["dataset"], r["config"]["method"], r["config"]["passes"]): r["runs"]
              for r in records if r["config"]["stage"] == "final"}
    curves = exp.plot_records(records)
    assert len(curves) == len(finals) // len(exp.QUICK["budgets"]) * exp.QUICK["final_reps"]
    for rec in curves:
        c = rec["config"]
        assert rec["trajectory"]["passes"] == exp.QUICK["budgets"]
        expected = [finals[(c["dataset"], c["solver"], b)][c["run"]] for b in exp.QUICK["budgets"]]
        assert rec["trajectory"]["rel_error"] == [run["error"] for run in expected]
        assert rec["trajectory"]["time"] == [run["time"] for run in expected]
