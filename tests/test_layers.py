"""The package's folders are its layers (docs/design.md): imports only go down, and no
module imports one that imports it back."""

import shutil
import subprocess
from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the test extra)")

ROOT = Path(__file__).resolve().parents[1]


def test_layers_contract_is_kept():
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.skip("lint-imports is not on PATH (pip install import-linter)")
    run = subprocess.run([exe, "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_no_import_cycles():
    graph = grimp.build_graph("dpopt", cache_dir=None)
    cycles = sorted((m, i) for m in graph.modules for i in graph.find_modules_directly_imported_by(m)
                    if graph.chain_exists(i, m))
    assert cycles == []


def test_no_top_level_modules_but_entry_points():
    top = sorted(p.name for p in (ROOT / "src" / "dpopt").glob("*.py"))
    assert top == ["__init__.py", "__main__.py"]


def test_moved_submodules_stay_reachable():
    import dpopt

    assert dpopt.audit.__name__ == "dpopt.api.audit"
    assert dpopt.plotting.__name__ == "dpopt.experiments.plotting"
