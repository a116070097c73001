"""Load a script of ``benchmarks/`` as a module (the benchmarks are scripts, not a package)."""

import importlib.util
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name):
    """The module ``benchmarks/<name>.py``, executed once per call."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
