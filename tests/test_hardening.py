"""Fixes of issue 21 (hardening): each test fails without its fix."""

import warnings

import numpy as np
import pytest

import dpopt


def _regression(n=300, p=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, p))
    y = np.clip(X @ np.linspace(1, -1, p) + 0.1 * rng.standard_normal(n), -3, 3)
    return X, y


# -- item 2: an explicit fit that read constants from the data says so first ---------------

@pytest.mark.parametrize("solver, public", [
    ("adassp", {"row_bound": 2.0, "target_bound": 3.0}),
    ("dp-frank-wolfe", {"radius": 5.0, "coordinate_bound": 1.0, "target_bound": 3.0,
                        "clip": 1.0}),
])
def test_result_that_read_constants_from_the_data_is_reported_not_private(solver, public):
    X, y = _regression()
    problem = dpopt.Problem(X, y, loss="squared", penalty="none")
    with pytest.warns(dpopt.PrivacyLeakWarning):
        leaky = dpopt.solve(problem, solver, epsilon=1.0, delta=1e-6, random_state=0)
    assert leaky.leaks and not leaky.is_private
    assert leaky.privacy_report().startswith("NOT private")
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)
        clean = dpopt.solve(problem, solver, epsilon=1.0, delta=1e-6, random_state=0, **public)
    assert clean.leaks == () and clean.is_private
    assert clean.privacy_report().startswith(f"{solver}: (")


def test_leak_warning_turned_into_an_error_charges_nothing():
    X, y = _regression()
    problem = dpopt.Problem(X, y, loss="squared", penalty="none")
    acc = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)
        with pytest.raises(dpopt.PrivacyLeakWarning):
            dpopt.solve(problem, "adassp", epsilon=1.0, delta=1e-6, budget=acc)
    assert acc.ledger == []


# -- items 3 and 4: private transformers ---------------------------------------------------

TRANSFORMERS = ["PrivateClipper", "PrivateMinMaxScaler", "PrivateStandardScaler",
                "PrivateRobustScaler"]


def _transformer(name, **kw):
    import dpopt.preprocessing as pre

    return getattr(pre, name)(random_state=0, **kw)


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_transformer_at_tiny_epsilon_succeeds_within_its_target(name):
    X = np.random.default_rng(0).standard_normal((500, 3))
    acc = dpopt.BudgetAccountant(epsilon=1.0, delta=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the bounds cannot be located
        t = _transformer(name, epsilon=1e-6, delta=1e-6, accountant=acc).fit(X)
    assert t.epsilon_spent_ <= 1e-6 and len(acc.ledger) == 1
    assert acc.ledger[0].epsilon <= 1e-6


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_failed_transformer_fit_charges_nothing_and_is_not_an_assert(name, monkeypatch):
    from dpopt.budget import Spend
    from dpopt.preprocessing import _transformers

    X = np.random.default_rng(0).standard_normal((300, 2))
    acc = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-3)
    over = Spend("x", 0.75, 1e-6, "replace-one", "exact", ())  # more than the target 0.5
    monkeypatch.setattr(_transformers._PrivateTransformer, "_spend",
                        lambda self, mechanisms, delta: over)
    t = _transformer(name, epsilon=0.5, delta=1e-6, accountant=acc)
    with pytest.raises(RuntimeError, match="nothing was released or charged"):
        t.fit(X)
    assert acc.ledger == [] and not hasattr(t, "lower_")


@pytest.mark.parametrize("name", TRANSFORMERS)
def test_transformer_warns_when_delta_exceeds_one_over_n(name):
    X = np.random.default_rng(0).standard_normal((5000, 2))
    with pytest.warns(dpopt.WeakPrivacyWarning, match="1/n"):
        _transformer(name, epsilon=1.0, delta=0.5).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.WeakPrivacyWarning)
        _transformer(name, epsilon=1.0, delta=1e-6).fit(X)


def test_no_runtime_assert_statements_in_the_library():
    import ast
    import pathlib

    root = pathlib.Path(dpopt.__file__).parent
    found = [f"{path.relative_to(root)}:{node.lineno}" for path in root.rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Assert)
             or (isinstance(node, ast.Raise) and node.exc is not None
                 and "AssertionError" in ast.dump(node.exc))]
    assert found == []


# -- item 6: a budget too small for the default path's plan names epsilon and delta ----------

@pytest.mark.parametrize("cls", ["DPLinearRegression", "DPLasso", "DPElasticNet"])
@pytest.mark.parametrize("epsilon, delta", [(0.01, 0.5), (1e-3, 0.1), (1e-6, 0.5)])
def test_default_path_budget_too_small_names_epsilon_and_delta(cls, epsilon, delta):
    X, y = _regression()
    acc = dpopt.BudgetAccountant(epsilon=5.0, delta=0.9)
    est = getattr(dpopt, cls)(epsilon=epsilon, delta=delta, accountant=acc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpopt.WeakPrivacyWarning)
        with pytest.raises(ValueError) as info:
            est.fit(X, y)
    message = str(info.value)
    assert f"epsilon={epsilon:g}" in message and f"delta={delta:g}" in message
    assert "got 0.0" not in message and acc.ledger == [] and not hasattr(est, "coef_")


# -- item 12: the row-normalization fall-back is warned and reported --------------------------

def test_row_normalization_fallback_is_warned_and_reported():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 30)), rng.integers(0, 2, 40)
    with pytest.warns(UserWarning, match="rows are normalized"):
        clf = dpopt.DPLogisticRegression(epsilon=0.5, random_state=0).fit(X, y)
    assert clf.fit_result_.params["auto"]["scaling"] == "row-normalized"
    assert "rows normalized" in clf.privacy_report()
