"""``dpopt reproduce heavy-tailed --quick`` end to end (reduced grid, a few seconds)."""

import json
import math

import pytest

from dpopt.cli import main
from dpopt.experiments import get_experiment
from dpopt.experiments import heavy_tailed as exp


def test_quick_reproduction_writes_tables_and_figures(tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    out = tmp_path / "ht"
    assert main(["reproduce", "heavy-tailed", "--quick", "--out", str(out), "--no-progress"]) == 0
    for name in ("runs.jsonl", "results.md", "summary.csv", "fig_linear_vs_n.png",
                 "fig_logistic_vs_eps.png", "fig_absolute.png"):
        assert (out / name).exists() and (out / name).stat().st_size > 0, name
    records = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert len(records) == len(exp.configs(quick=True))
    for r in records:
        if "excess" in r:
            assert r["excess"] >= -1e-9  # the test optimum is a minimum
            assert math.isinf(r["epsilon_spent"]) or r["epsilon_spent"] <= r["config"]["epsilon"] \
                + 1e-9
    table = (out / "results.md").read_text()
    assert "ht-acsa (private quantile)" in table and "replace-one" in table
    # resuming reruns nothing and gives the same table
    get_experiment("heavy-tailed").run(out=out, quick=True, n_jobs=1, backend="loky",
                                       progress=False)
    assert (out / "results.md").read_text() == table


def test_train_and_test_share_the_population():
    """Train and test sets come from one draw (same coefficients): the non-private
    training optimum has a small excess test risk compared with w = 0."""
    import dpopt

    bundle = exp.dataset_bundle("linear-t-a5", quick=True)
    pb = exp.train_problem("linear-t-a5", 3000, 0, quick=True)
    w, _ = dpopt.reference_optimum(pb)
    zero = bundle.problem.objective(bundle.problem.zeros()) - bundle.f_star
    assert bundle.problem.objective(w) - bundle.f_star < 0.05 * zero
    assert set(exp.moment_bounds("linear-t-a5", quick=True)) == {2, 4, 8}
    assert bundle.info["beta"] > 0


def test_family_names_resolve():
    assert exp._family_of("ht-sgd/quantile,T=16") == "ht-sgd (quantile, best T)"
    assert exp._family_of("ht-sgd/quantile") == "ht-sgd (quantile, best T)"
    assert exp._family_of("ht-acsa/theory") == "ht-acsa (theory r_k)"
    assert exp._family_of("dp-gd+quantile/passes=5") == "DP-GD (quantile clip, tuned)"
    assert exp._family_of("dp-gd/passes=5") == "DP-GD (L_f clip, tuned)"
    assert exp._family_of("ht-subgradient/theory,T_i=theorem") == \
        "ht-subgradient (theory, theorem T_i)"
    assert exp._family_of("ht-subgradient/theory") == "ht-subgradient (theory, T_i<=1000)"


def _heavy_record(method, rep, excess, n=3000, eps=1.0):
    return {"config": {"dataset": "linear-t-a3", "n": n, "epsilon": eps, "rep": rep, "k": 2,
                       "method": method}, "excess": excess, "zero_excess": 5.0}


def test_families_take_the_best_method_of_their_grid(tmp_path):
    records = [_heavy_record("dp-gd/passes=5", 0, 1.0), _heavy_record("dp-gd/passes=5", 1, 3.0),
               _heavy_record("dp-gd/passes=20", 0, 0.5), _heavy_record("dp-gd/passes=20", 1, 0.7),
               _heavy_record("ht-acsa/theory", 0, 0.1), _heavy_record("ht-acsa/theory", 1, math.inf),
               {"config": {"dataset": "linear-t-a3", "n": 3000, "epsilon": 1.0, "rep": 0, "k": 2,
                           "method": "ht-acsa/quantile"}, "skipped": "moment not available"}]
    fams = exp._aggregate(records)
    mean, se, method = fams[("linear-t-a3", 3000, 1.0, "DP-GD (L_f clip, tuned)")]
    assert method == "dp-gd/passes=20" and mean == pytest.approx(0.6)
    assert se == pytest.approx(0.1)  # sample sd / sqrt(2) = 0.1414... / 1.414...
    assert fams[("linear-t-a3", 3000, 1.0, "ht-acsa (theory r_k)")] == (math.inf, 0.0,
                                                                         "ht-acsa/theory")
    assert fams[("linear-t-a3", 3000, 1.0, exp.ZERO)] == (5.0, 0.0, "w = 0")
    assert ("linear-t-a3", 3000, 1.0, "ht-acsa (private quantile)") not in fams
    exp.write_tables(records, fams, tmp_path, quick=True)
    row = next(line for line in (tmp_path / "results.md").read_text().splitlines()
               if line.startswith("| linear-t-a3 (n=3000)"))
    assert row.split(" | ")[1:3] == ["inf", "–"]  # diverged mean; family not run
