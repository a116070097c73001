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
