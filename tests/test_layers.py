"""The package's folders are its layers (docs/design.md): imports only go down, and no
module imports one that imports it back."""

import ast
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


# --------------------------------------------------------------------------- source rules

PACKAGE = ROOT / "src" / "dpopt"


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path.read_text()


def _trees():
    for rel, text in _modules():
        yield rel, text, ast.parse(text)


def test_the_ledger_is_charged_only_in_the_api_layer():
    """``.spend(`` (the reservation of a charge) is called only by the api layer
    (``dpopt.api.charge``) and by the ledger itself; the helpers that read the ledger
    (``resolve_budget``, ``_unbudgeted``, ``current_budget``) are imported only by api."""
    spenders, readers = [], []
    for rel, _, tree in _trees():
        owner = rel.startswith("api/") or rel == "privacy/budget.py"
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "spend" and not owner):
                spenders.append(f"{rel}:{node.lineno}")
            if (isinstance(node, ast.ImportFrom) and node.module == "dpopt.privacy.budget"
                    and not owner and any(a.name in ("resolve_budget", "_unbudgeted",
                                                     "current_budget") for a in node.names)):
                readers.append(f"{rel}:{node.lineno}")
    assert spenders == [] and readers == []
    assert any(rel == "api/charge.py" and ".spend(" in text for rel, text in _modules())


def _reasoned(lines, lineno):
    """A ``# lazy: why`` comment on the import's line or on a comment line just above it
    (a run of function-level imports shares the comment above its first one)."""
    i = lineno - 1
    if "# lazy:" in lines[i]:
        return True
    while i > 0:
        i -= 1
        stripped = lines[i].strip()
        if stripped.startswith("#"):
            if "lazy:" in stripped:
                return True
            continue
        if stripped.startswith(("import ", "from ")) or stripped == "":
            continue  # the run of imports (and blank lines) under one comment
        return False
    return False


def test_function_level_imports_state_why_they_are_lazy():
    """An import inside a function is lazy for a stated reason only (a heavy optional
    dependency, the CLI's light start, a layer the module must not import at load time):
    ``# lazy: why`` on its line or just above."""
    unreasoned = []
    for rel, text, tree in _trees():
        lines = text.splitlines()
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and \
                        not _reasoned(lines, node.lineno):
                    unreasoned.append(f"{rel}:{node.lineno}")
    assert sorted(set(unreasoned)) == []


def test_no_module_over_600_lines():
    assert [rel for rel, text in _modules() if text.count("\n") > 600] == []


def test_no_solver_asks_whether_its_data_is_chunked():
    """In-memory and chunked data implement one protocol (docs/design.md): a solver family
    never reads ``is_chunked`` (the dispatcher ``solvers/_base.py`` checks the declaration)."""
    asking = [f"{rel}:{node.lineno}" for rel, _, tree in _trees()
              if rel.startswith("solvers/") and rel != "solvers/_base.py"
              for node in ast.walk(tree)
              if isinstance(node, ast.Attribute) and node.attr == "is_chunked"]
    assert asking == []


def test_in_memory_and_chunked_problems_share_the_step_protocol():
    """The methods the solvers call instead of asking ``is_chunked`` exist on both layouts
    with the same signature (dpopt.data.steps)."""
    import inspect

    from dpopt.data import Problem
    from dpopt.data.chunked import ChunkedProblem

    for name in ("poisson_sampler", "proximal_sgd_steps", "block_steps", "max_row_norm",
                 "clipped_gradient", "sufficient_statistics", "coordinate_smoothness",
                 "global_smoothness", "max_row_nnz", "mean_of"):
        assert (inspect.signature(getattr(Problem, name)).parameters
                == inspect.signature(getattr(ChunkedProblem, name)).parameters), name
    assert Problem.block_step_reads_all_rows is False
    assert ChunkedProblem.block_step_reads_all_rows is True
