"""dpopt: differentially private empirical risk minimization.

>>> import dpopt
>>> problem = dpopt.Problem(X, y, loss="squared", penalty="l1", alpha=0.1)   # doctest: +SKIP
>>> result = dpopt.solve(problem, solver="dp-cd", epsilon=1.0, random_state=0)  # doctest: +SKIP
"""

from dpopt.budget import BudgetAccountant
from dpopt.exceptions import BudgetExceededError, PrivacyLeakWarning
from dpopt.problem import Problem
from dpopt.solvers import FitResult, available_solvers, get_solver, register_solver, solve
from dpopt.solvers.reference import reference_optimum

__version__ = "0.1.0"

# The scikit-learn estimators and the private hyperparameter search are imported on first
# use (``dpopt.DPLasso``), so that ``import dpopt`` (and the CLI) does not load scikit-learn.
_LAZY = {name: "dpopt.estimators" for name in (
    "DPLogisticRegression", "DPLinearRegression", "DPLasso", "DPElasticNet", "DPHuberRegressor")}
_LAZY.update({"PrivateHyperparameterSearch": "dpopt.tuning"})
_LAZY.update({name: "dpopt.preprocessing" for name in (
    "PrivateClipper", "PrivateMinMaxScaler", "PrivateStandardScaler", "PrivateRobustScaler",
    "private_feature_bounds", "private_target_bounds", "FeatureBounds",
    "public_one_hot_encoder")})


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dpopt' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))


__all__ = [
    "Problem", "FitResult", "solve", "available_solvers", "get_solver", "register_solver",
    "reference_optimum", "PrivacyLeakWarning", "BudgetExceededError", "BudgetAccountant",
    "__version__", *_LAZY,
]
