"""The practitioner benchmark (benchmarks/practitioner.py) runs, on the bundled datasets."""

import numpy as np
import pandas as pd
import pytest

from _benchmarks import load_benchmark


def _module():
    return load_benchmark("practitioner")


def test_quick_run_on_bundled_data_writes_table_and_figure(tmp_path, capsys):
    bench = _module()
    out, fig = tmp_path / "p.md", tmp_path / "p.png"
    code = bench.main(["--quick", "--datasets", "breast_cancer,diabetes,small-n", "--out",
                       str(out), "--figure", str(fig)])
    assert code == 0
    text = out.read_text()
    assert "## Protocol" in text and text.index("## Protocol") < text.index("## Results")
    assert "| breast_cancer (426 × 30, accuracy) |" in text and "small-n (225 × 8, R²)" in text
    assert "PrivacyLeakWarnings raised by default fits: 0" in text
    assert "do no harm" in text and "median share" in text
    assert fig.stat().st_size > 10_000


def test_rows_report_scores_constant_and_share():
    bench = _module()
    (r,) = bench.run(["breast_cancer"], (4.0,), 1, log=lambda *a: None)
    assert r["auto_leaks"] == 0
    assert 0.0 <= r["constant"] <= 1.0 and r["sklearn"] > 0.9
    assert r["share"] == pytest.approx((r["auto"] - r["constant"]) / (r["sklearn"] - r["constant"]))
    assert 0.0 <= r["released_constant"] <= 1.0


def test_the_protocol_lists_enough_tables():
    bench = _module()
    assert len(bench.REAL) >= 15 and len(bench.GENERATED) >= 5
    assert bench.EPSILONS == (0.25, 0.5, 1.0, 2.0, 4.0, 100.0)


def test_generated_tables_have_their_pathologies():
    bench = _module()
    X, y, task = bench.generated("sparse-wide")
    assert X.shape[1] > 10 * X.shape[0] and X.nnz < 0.01 * X.shape[0] * X.shape[1]
    assert task == "classification" and max(np.mean(y > 0), np.mean(y < 0)) > 0.85
    X, y, task = bench.generated("majority-97")
    assert np.mean(y < 0) > 0.96
    X, y, task = bench.generated("small-n")
    assert X.shape[0] == 300 and task == "regression"


def test_raw_table_encoding_is_public_one_hot_with_missing_indicators():
    bench = _module()
    df = pd.DataFrame({"t": [1.0, 2.0, 3.0, 4.0], "c": ["a", "b", None, "a"],
                       "b": [True, False, True, True], "x": [1.0, None, 3.0, 4.0]})
    X, y = bench.encode_table(df, "t", ["c"])
    assert X.shape == (4, 3 + 2 + 2)  # c: a, b, NaN; b: False, True; x and x_missing
    assert np.all(np.isfinite(X)) and list(y) == [1.0, 2.0, 3.0, 4.0]


def test_frames_over_epsilon_report_the_protocols_targets(tmp_path, capsys):
    """`--frames --epsilons`: the raw tables of $DPOPT_DATA/tables at each epsilon, as rows of
    the protocol's table (here one small generated table in a temporary folder)."""
    import json

    rng = np.random.default_rng(0)
    n = 1200
    city = rng.choice(["a", "b", "c"], n)
    x = rng.normal(size=n)
    df = pd.DataFrame({"city": np.where(rng.random(n) < 0.05, None, city), "x": x,
                       "y": 2.0 * (city == "b") + x + rng.normal(size=n)})
    folder = tmp_path / "tables"
    folder.mkdir()
    df.to_csv(folder / "t.csv.gz", index=False)
    (folder / "tables.json").write_text(json.dumps(
        [{"name": "toy", "file": "t.csv.gz", "target": "y", "task": "regression"}]))
    bench = _module()
    rows = bench.run_frames_grid(str(tmp_path), 2, (1.0, 4.0), log=lambda *a: None)
    assert [(r["dataset"], r["epsilon"]) for r in rows] == [("toy", 1.0), ("toy", 4.0)]
    assert all(r["auto_leaks"] == 0 and r["sklearn"] > 0.5 for r in rows)
    assert rows[1]["auto"] > 0.3
    text = bench.verdicts(rows)
    assert "do no harm" in text and "never lowers" in text
    assert "| toy (900 × 2, R²) |" in bench.table(rows)
