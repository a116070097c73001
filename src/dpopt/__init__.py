"""dpopt: differentially private empirical risk minimization.

>>> import dpopt
>>> problem = dpopt.Problem(X, y, loss="squared", penalty="l1", alpha=0.1)   # doctest: +SKIP
>>> result = dpopt.solve(problem, solver="dp-cd", epsilon=1.0, random_state=0)  # doctest: +SKIP
"""

from dpopt.exceptions import BudgetExceededError, PrivacyLeakWarning
from dpopt.problem import Problem
from dpopt.solvers import FitResult, available_solvers, get_solver, register_solver, solve
from dpopt.solvers.reference import reference_optimum

__version__ = "0.1.0"

__all__ = [
    "Problem", "FitResult", "solve", "available_solvers", "get_solver", "register_solver",
    "reference_optimum", "PrivacyLeakWarning", "BudgetExceededError", "__version__",
]
