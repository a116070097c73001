"""Solvers, one module per algorithm family; each registers itself on import.

Every public module of this package is imported here, so adding a solver is
adding a module that calls :func:`register_solver`.
"""

import importlib
import pkgutil

from dpopt._core.validation import default_delta
from dpopt.solvers._base import (
    Checkpoints,
    DefaultUse,
    FitResult,
    SolverSpec,
    available_solvers,
    check_distributed,
    distributed_solvers,
    get_solver,
    make_result,
    prepare_solve,
    register_solver,
    solve_uncharged,
)

for _mod in pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod.name}")

__all__ = ["Checkpoints", "DefaultUse", "FitResult", "SolverSpec", "available_solvers", "check_distributed",
           "default_delta", "distributed_solvers",
           "get_solver", "make_result", "prepare_solve", "register_solver", "solve_uncharged"]
