"""The practitioner benchmark (benchmarks/practitioner.py) runs, on the bundled datasets."""

import importlib.util
from pathlib import Path

import numpy as np

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "practitioner.py"


def _module():
    spec = importlib.util.spec_from_file_location("practitioner", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_quick_run_on_bundled_data_writes_table_and_figure(tmp_path, capsys):
    bench = _module()
    out, fig = tmp_path / "p.md", tmp_path / "p.png"
    code = bench.main(["--quick", "--datasets", "breast_cancer,diabetes", "--out", str(out),
                       "--figure", str(fig)])
    assert code == 0
    text = out.read_text()
    assert "| breast_cancer (426 × 30, accuracy) |" in text and "diabetes" in text
    assert "PrivacyLeakWarnings raised by default fits: 0" in text
    assert fig.stat().st_size > 10_000


def test_rows_report_the_default_path_and_the_old_default():
    bench = _module()
    rows = bench.run(["breast_cancer"], (4.0,), 1, log=lambda *a: None)
    (r,) = rows
    assert r["auto_leaks"] == 0 and r["old_leaks"] > 0  # the old default read the data
    assert 0.0 <= r["constant"] <= 1.0 and r["sklearn"] > 0.9
    assert np.isfinite(r["auto"])
