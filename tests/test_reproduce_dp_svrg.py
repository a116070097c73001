"""``dpopt reproduce dp-svrg --quick``: the whole pipeline on reduced sizes."""

import csv
import json
import math

import numpy as np
import pytest

from dpopt.experiments import dp_svrg as exp
from dpopt.experiments import get_experiment


def test_covtype_standin_has_covertypes_shape():
    X, y = exp.make_covtype_standin(3000, random_state=0)
    assert X.shape == (3000, 54) and set(np.unique(y)) == {-1.0, 1.0}
    assert np.linalg.norm(X, axis=1).max() <= 1.0 + 1e-12
    np.testing.assert_array_equal(X[:, 10:14].sum(axis=1) * np.sqrt(12), 1.0)  # one-hot of 4
    np.testing.assert_array_equal(X[:, 14:].sum(axis=1) * np.sqrt(12), 1.0)  # one-hot of 40
    assert 0.4 < np.mean(y == 1) < 0.6
    X2, y2 = exp.make_covtype_standin(3000, random_state=0)
    np.testing.assert_array_equal(X, X2)


def test_quick_reproduction_writes_tables_and_figures(tmp_path):
    summary = get_experiment("dp-svrg").run(out=tmp_path, quick=True, n_jobs=1, backend="loky",
                                            progress=False)
    assert "covtype-standin" in summary["datasets"]
    assert "covtype" in summary["missing"] or "covtype" in summary["datasets"]
    for name in ["summary.md", "summary.csv", "noise_comparison.md", "runs.jsonl",
                 "summary.json"]:
        assert (tmp_path / name).exists(), name
    assert set(summary["figures"]) >= {"covtype-standin_l2.png", "covtype-standin_none.png"}
    rows = list(csv.DictReader((tmp_path / "summary.csv").open()))
    solvers = {r["solver"] for r in rows}
    assert set(exp.MAIN) <= solvers and "dp-svrg (paper)" in solvers
    for r in rows:  # every row at the same privacy, replace-one, and a sensible result
        assert float(r["epsilon_spent"]) <= float(r["epsilon"]) + 1e-12
        assert r["adjacency"] == "replace-one" and float(r["delta"]) == exp.DELTA
        assert float(r["gap_mean"]) >= -1e-9 and math.isfinite(float(r["gap_mean"]))
        assert 0.3 < float(r["accuracy_mean"]) <= 1.0
    md = (tmp_path / "summary.md").read_text()
    assert "NOT Covertype" in md and "Data: covtype-standin" in md
    # the tables say which data they come from, and a missing Covertype is reported
    if "covtype" in summary["missing"]:
        assert "covtype: not run" in md
    # a second call resumes from runs.jsonl without running anything again
    n_lines = len((tmp_path / "runs.jsonl").read_text().splitlines())
    again = get_experiment("dp-svrg").run(out=tmp_path, quick=True, n_jobs=1, backend="loky",
                                          progress=False)
    assert again["runs"] == summary["runs"]
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == n_lines
    assert json.loads((tmp_path / "summary.json").read_text())["runs"] == summary["runs"]


@pytest.mark.slow
def test_full_reproduction_is_registered():
    assert get_experiment("dp-svrg").description


def _svrg_record(label, repeat, gap, acc, spent, dataset="electricity", penalty="l2"):
    return {"config": {"dataset": dataset, "penalty": penalty, "epsilon": 0.5, "label": label,
                       "repeat": repeat},
            "final_gap": gap, "final_accuracy": acc, "epsilon_spent": spent,
            "grad_evals": [0.0, 10.0 + repeat], "delta": exp.DELTA, "adjacency": "replace-one",
            "accountant": "pld", "noise_multiplier": 2.0}


def test_summary_rows_pool_the_repeats_of_a_configuration():
    records = [_svrg_record("dp-gd", 0, 0.1, 0.7, 0.49), _svrg_record("dp-svrg", 0, 0.4, 0.6, 0.5),
               _svrg_record("dp-gd", 1, 0.3, 0.8, 0.5), _svrg_record("dp-svrg", 1, 0.2, 0.6, 0.48),
               _svrg_record("dp-gd", 0, 0.9, 0.5, 0.5, penalty="none")]
    rows = exp.summary_rows(records)
    # sorted by dataset, problem, epsilon, then the solvers' order in the paper's figures
    assert [(r["problem"], r["solver"]) for r in rows] == [
        ("L2 (lambda=0.01)", "dp-svrg"), ("L2 (lambda=0.01)", "dp-gd"), ("no penalty", "dp-gd")]
    svrg, gd = rows[0], rows[1]
    assert gd["runs"] == 2 and gd["gap_mean"] == pytest.approx(0.2)
    assert gd["gap_sd"] == pytest.approx(0.1)  # population sd of the two runs
    assert gd["accuracy_mean"] == pytest.approx(0.75) and gd["epsilon_spent"] == 0.5
    assert gd["grad_evals"] == 10.0  # the first run's
    assert svrg["epsilon_spent"] == 0.5 and svrg["gap_mean"] == pytest.approx(0.3)
