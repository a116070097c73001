"""The dp-gcd reproduction in its --quick variant: outputs, resumption, privacy columns."""

from __future__ import annotations

import csv
import json

import pytest

from dpopt.experiments import dp_gcd, get_experiment


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("dpgcd")
    summary = get_experiment("dp-gcd").run(out=out, quick=True, n_jobs=1, backend="loky",
                                           progress=False)
    return out, summary


def test_quick_writes_table_figures_and_meta(quick_run):
    out, summary = quick_run
    assert summary["datasets_run"] == ["log1", "square"]
    table = (out / "table.md").read_text()
    assert "quick" in table and "Problems run: log1, square" in table
    assert "2 / 0 (0.35)" in table  # the paper's Table 3 value beside ours (square, DP-GCD)
    for name in ("figure1.png", "figure3.png"):
        assert (out / name).stat().st_size > 10_000
    meta = json.loads((out / "meta.json").read_text())
    assert meta["n_fits"] == summary["fits"] > 0
    assert meta["choices"] == dp_gcd.CHOICES


def test_quick_rows_cover_every_algorithm_and_spend_at_most_epsilon(quick_run):
    out, _ = quick_run
    with open(out / "best_by_passes.csv") as fh:
        rows = list(csv.DictReader(fh))
    algos = {(r["dataset"], r["algo"]) for r in rows}
    for ds in ("log1", "square"):
        for algo in ("dp-gcd", "dp-gcd-paper", "dp-cd", "dp-sgd"):
            assert (ds, algo) in algos
    assert ("square", "dp-gcd-gs-q") in algos and ("log1", "dp-gcd-gs-q") not in algos
    for r in rows:
        assert r["adjacency"] == "replace-one"
        assert float(r["min"]) <= float(r["mean"]) <= float(r["max"])
        if r["algo"] != "dp-gcd-paper":  # the paper's calibration reports its honest epsilon
            assert float(r["epsilon"]) <= dp_gcd.EPSILON


def test_quick_resumes_without_rerunning(quick_run):
    out, summary = quick_run
    lines = (out / "runs.jsonl").read_text().count("\n")
    again = get_experiment("dp-gcd").run(out=out, quick=True, n_jobs=1, backend="loky",
                                         progress=False)
    assert (out / "runs.jsonl").read_text().count("\n") == lines
    assert again["fits"] == summary["fits"]


def test_lambda_conversion_and_missing_datasets(tmp_path, monkeypatch):
    # least squares: the paper's (x^T w - y)^2 is twice dpopt's loss, so alpha = lambda / 2
    for name, (loss, _, lam, alpha, _) in dp_gcd.PROBLEMS.items():
        assert alpha == (lam / 2 if loss == "squared" else lam), name
    monkeypatch.setenv("DPOPT_DATA", str(tmp_path))  # nothing there
    run_ds, missing = dp_gcd.available(["log1", "california", "mtp", "dorothea"], quick=True)
    assert run_ds == ["log1"] and missing == ["california", "mtp", "dorothea"]


def test_plot_adapter_draws_the_best_configuration_of_every_budget(quick_run):
    out, _ = quick_run
    records = [json.loads(line) for line in (out / "runs.jsonl").open()]
    with open(out / "best_by_passes.csv") as fh:
        rows = {(r["dataset"], dp_gcd.LABELS[r["algo"]], int(r["passes"])): float(r["mean"])
                for r in csv.DictReader(fh)}
    curves = dp_gcd.plot_records(records)
    assert {(r["config"]["dataset"], r["config"]["solver"]) for r in curves} == \
        {k[:2] for k in rows}
    for ds, solver in {k[:2] for k in rows}:
        runs = [r["trajectory"] for r in curves if r["config"]["dataset"] == ds
                and r["config"]["solver"] == solver]
        for i, p in enumerate(runs[0]["passes"]):  # the figure's mean is the table's
            assert sum(t["rel_error"][i] for t in runs) / len(runs) == \
                pytest.approx(rows[(ds, solver, p)], rel=1e-12)
