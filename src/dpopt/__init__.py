"""dpopt: differentially private empirical risk minimization.

>>> import dpopt
>>> problem = dpopt.Problem(X, y, loss="squared", penalty="l1", alpha=0.1)   # doctest: +SKIP
>>> result = dpopt.solve(problem, solver="dp-cd", epsilon=1.0, random_state=0)  # doctest: +SKIP

Every public name is imported on first use (``dpopt.Problem`` loads the problem module and
its numba kernels, ``dpopt.BudgetAccountant`` loads dp-accounting, ``dpopt.DPLasso``
loads scikit-learn), so that ``import dpopt`` and the light CLI commands (``dpopt --help``,
``dpopt solvers``, ``dpopt datasets``) start fast.
"""

import importlib

__version__ = "0.1.0"

_LAZY = {
    "BudgetAccountant": "dpopt.privacy.budget",
    "BudgetExceededError": "dpopt._core.exceptions",
    "PrivacyLeakWarning": "dpopt._core.exceptions",
    "WeakPrivacyWarning": "dpopt._core.exceptions",
    "UnchargedFitWarning": "dpopt._core.exceptions",
    "NoIntervalsError": "dpopt._core.exceptions",
    "ImputedValueWarning": "dpopt._core.exceptions",
    "ChargedFitError": "dpopt._core.exceptions",
    "NotReleasableError": "dpopt._core.exceptions",
    "Problem": "dpopt.data",
    "FitResult": "dpopt.solvers",
    "available_solvers": "dpopt.solvers",
    "get_solver": "dpopt.solvers",
    "register_solver": "dpopt.solvers",
    "solve": "dpopt.api.charge",
    "reference_optimum": "dpopt.solvers.reference",
    "PrivateHyperparameterSearch": "dpopt.api.tuning",
    "ChunkedProblem": "dpopt.data.chunked",
    "PrivateTableEncoder": "dpopt.api.transformers",
}
_LAZY.update({name: "dpopt.api.estimators" for name in (
    "DPLogisticRegression", "DPLinearRegression", "DPLasso", "DPElasticNet", "DPHuberRegressor")})
_LAZY.update({name: "dpopt.api.transformers" for name in (
    "PrivateClipper", "PrivateMinMaxScaler", "PrivateStandardScaler", "PrivateRobustScaler")})
_LAZY.update({name: "dpopt.preprocessing" for name in (
    "private_feature_bounds", "private_target_bounds", "FeatureBounds",
    "public_one_hot_encoder")})


#: Submodules that lived at the top level before the layered layout (docs/design.md),
#: still reachable as attributes: ``dpopt.audit.run_audit`` keeps working.
_MOVED = {"audit": "dpopt.api.audit", "budget": "dpopt.privacy.budget",
          "estimators": "dpopt.api.estimators", "tuning": "dpopt.api.tuning",
          "modelio": "dpopt.api.modelio", "plotting": "dpopt.experiments.plotting",
          "distributed": "dpopt.data.chunked", "exceptions": "dpopt._core.exceptions"}


def __getattr__(name):
    if name in _MOVED:
        return importlib.import_module(_MOVED[name])
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if not name.startswith("_"):
        try:  # a submodule not imported yet (``dpopt.privacy`` after ``import dpopt``)
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module 'dpopt' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))


__all__ = ["__version__", *_LAZY]
