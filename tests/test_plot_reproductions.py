"""``dpopt plot results/NAME/runs.jsonl`` draws every reproduction's results file.

Each reproduction's raw records go through its ``plot_records`` adapter
(:func:`dpopt.experiments.plot_records`); the quick variants' files are built from a few
hand-written records of the exact shape each ``run_one`` writes, so this stays fast (the
end-to-end quick runs in ``test_reproduce_*`` also plot their own file).
"""

import json
import math

import pytest

from dpopt.cli import main
from dpopt.experiments import plot_records

RBCD = {"config": {"dataset": "imbalanced-units", "method": "CD uniform", "epsilon": 1.0,
                   "passes": 2, "stage": "final", "step": 1.0, "clip": 1.0, "reps": 2},
        "runs": [{"error": 0.5, "trajectory": [2.0, 1.0, 0.5]},
                 {"error": 0.6, "trajectory": [2.0, 1.1, 0.6]}]}
GCD = [{"config": {"dataset": "log1", "algo": "dp-gcd", "passes": p, "step": s,
                   "clips": [1.0], "runs": 2},
        "results": [{"clip": 1.0, "run": r, "rel_error": 1.0 / p + s + r / 10,
                     "adjacency": "replace-one"} for r in range(2)]}
       for p in (1, 2) for s in (0.1, 0.5)]
SVRG = {"config": {"dataset": "electricity", "penalty": "l2", "epsilon": 0.5, "label": "dp-svrg",
                   "solver": "dp-svrg", "repeat": 0},
        "gap": [0.5, 0.1], "grad_evals": [0.0, 100.0], "final_gap": 0.1, "n_train": 50,
        "f_star": 0.5, "adjacency": "replace-one"}
HEAVY = [{"config": {"dataset": "linear-t-a3", "n": 1000, "epsilon": e, "rep": 0, "k": 2,
                     "method": "ht-sgd"}, "excess": 1.0 / e} for e in (0.5, 1.0, 2.0)]
DPCD = {"config": {"problem": "sparse-lasso", "algo": "dp-cd", "stage": "final", "passes": 2,
                   "curves": True},
        "rel_error": [0.3], "curves": [[1.0, 0.5, 0.3]], "checkpoint_passes": [0, 1, 2],
        "epsilon": 0.99999999999999, "adjacency": "replace-one"}
FILES = {"dp-rbcd": [RBCD], "dp-gcd": GCD, "dp-svrg": [SVRG], "heavy-tailed": HEAVY,
         "dp-cd": [DPCD]}


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_reproduction_file_is_plotted(name, tmp_path, capsys):
    path = tmp_path / name / "runs.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in FILES[name]))
    assert main(["plot", str(path), "--format", "png"]) == 0
    written = [line for line in capsys.readouterr().out.splitlines() if line.endswith(".png")]
    assert written and all((tmp_path / name / p.rsplit("/", 1)[-1]).exists() for p in written)


def test_adapters_keep_the_numbers():
    (rec,) = plot_records([SVRG])
    assert rec["config"]["solver"] == "dp-svrg" and rec["rel_error"] == pytest.approx(0.2)
    assert rec["trajectory"] == {"passes": [0.0, 2.0], "rel_error": [1.0, 0.2]}
    gcd = plot_records(GCD)  # best step per budget: 0.1 at both budgets
    assert [r["trajectory"]["passes"] for r in gcd] == [[1, 2], [1, 2]]
    for r, expected in zip(gcd, ([1.1, 0.6], [1.2, 0.7])):
        assert r["trajectory"]["rel_error"] == pytest.approx(expected)
    (cd,) = plot_records([DPCD])
    assert cd["config"]["epsilon"] == 1.0 and cd["trajectory"]["passes"] == [0, 1, 2]
    assert all(math.isfinite(r["rel_error"]) for r in plot_records(HEAVY))
