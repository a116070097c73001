"""Epsilon and delta far outside any useful range: one clear ValueError naming the parameter,
raised by the shared checks (dpopt._core.validation) before any search; delta > 1/n warns."""

import math
import warnings

import numpy as np
import pytest

import dpopt
from dpopt import privacy
from dpopt._core.validation import MAX_EPSILON, MIN_DELTA, MIN_EPSILON, check_delta, check_epsilon
from dpopt.privacy import accounting
from dpopt.solvers._base import _REGISTRY


def _problem(n=40, loss="squared"):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 3))
    y = np.sign(X[:, 0] + 0.1) if loss == "logistic" else X[:, 0]
    return dpopt.Problem(X, y, loss=loss, penalty="l2", alpha=0.1)


def test_shared_checks_name_the_parameter():
    assert check_epsilon(MIN_EPSILON) == MIN_EPSILON and check_epsilon(MAX_EPSILON) == MAX_EPSILON
    assert check_epsilon(math.inf) == math.inf and check_delta(MIN_DELTA) == MIN_DELTA
    for bad, needle in [(1e-300, "below 1e-06"), (1e-7, "below"), (101.0, "above 100"),
                        (0.0, "> 0.0"), (-1.0, "> 0.0"), (math.nan, "finite")]:
        with pytest.raises(ValueError, match="^epsilon") as exc:
            check_epsilon(bad)
        assert needle in str(exc.value)
    for bad, needle in [(1e-300, "below 1e-30"), (1.0, "< 1.0"), (0.5 + 0.5, "< 1.0"),
                        (0.0, "> 0.0")]:
        with pytest.raises(ValueError, match="^delta") as exc:
            check_delta(bad)
        assert needle in str(exc.value)
    # mechanism parameters (shares of a target) are only checked for positivity
    assert check_epsilon(1e-9, target=False) == 1e-9 and check_delta(1e-40, target=False) == 1e-40


@pytest.mark.parametrize("name", sorted(n for n, s in _REGISTRY.items() if s.private))
@pytest.mark.parametrize("budget, needle", [({"epsilon": 1e-8}, "epsilon=1e-08"),
                                            ({"epsilon": 1e-300}, "epsilon=1e-300"),
                                            ({"delta": 1e-300}, "delta=1e-300"),
                                            ({"delta": 1.0}, "delta must be < 1")])
def test_solve_refuses_at_once_naming_the_parameter(name, budget, needle, monkeypatch):
    """Refused by ``solve`` before the solver (and its calibration search) runs."""
    spec = _REGISTRY[name]

    def never(*args, **kwargs):
        raise AssertionError("the solver ran")

    monkeypatch.setitem(_REGISTRY, name, type(spec)(**{**spec.__dict__, "func": never}))
    kwargs = {"epsilon": 1.0, "delta": 1e-5, **budget}
    with pytest.raises(ValueError) as exc:
        dpopt.solve(_problem(), name, random_state=0, **kwargs)
    assert needle in str(exc.value)
    if "delta" in budget:
        assert "epsilon" not in str(exc.value)  # delta=1e-300 used to be blamed on epsilon


def test_estimators_budget_and_accountants_use_the_same_checks():
    X, y = _problem().X, _problem().y
    with pytest.raises(ValueError, match="epsilon=1e-09 is below"):
        dpopt.DPLinearRegression(epsilon=1e-9).fit(X, y)
    with pytest.raises(ValueError, match="delta=1e-300 is below"):
        dpopt.DPLinearRegression(delta=1e-300).fit(X, y)
    with pytest.raises(ValueError, match="epsilon=1e-09"):
        dpopt.BudgetAccountant(epsilon=1e-9, delta=1e-5)
    with pytest.raises(ValueError, match="delta=1e-300"):
        dpopt.BudgetAccountant(epsilon=1.0, delta=1e-300)
    with pytest.raises(ValueError, match="delta=1e-300"):
        privacy.epsilon_of([privacy.Gaussian(1.0, 10)], 1e-300)
    with pytest.raises(ValueError, match="epsilon=1e-300"):
        privacy.calibrate_gaussian(1e-300, 1e-5, 10)
    with pytest.raises(ValueError, match="epsilon=1e-08"):
        privacy.calibrate(lambda z: [privacy.SubsampledGaussian(z, 0.1, 20)], 1e-8, 1e-5)


def test_delta_above_one_over_n_warns_naming_one_over_n():
    problem = _problem(n=40)
    with pytest.warns(dpopt.WeakPrivacyWarning, match=r"1/n = 0\.025 \(n=40\)"):
        dpopt.solve(problem, "dp-gd", epsilon=1.0, delta=0.1, random_state=0, smoothness=1.0)
    with pytest.warns(dpopt.WeakPrivacyWarning, match=r"delta=0\.5 is larger than 1/n"):
        dpopt.DPLinearRegression(delta=0.5, solver="dp-gd",
                                 solver_options={"smoothness": 1.0}).fit(problem.X, problem.y)
    with warnings.catch_warnings():  # delta <= 1/n (and the default 1/n^2): no warning
        warnings.simplefilter("error", dpopt.WeakPrivacyWarning)
        dpopt.solve(problem, "dp-gd", epsilon=1.0, delta=0.025, random_state=0, smoothness=1.0)
        dpopt.solve(problem, "dp-gd", epsilon=1.0, random_state=0, smoothness=1.0)


def test_refine_on_fine_grid_survives_a_zero_epsilon():
    """A (0, delta) certificate at large multipliers made math.log(0) fail (dp-gcd, dp-sgd
    at epsilon ~ 1e-8); the refinement now bisects there and stays certified."""
    def eps_fine(z):
        return 0.0 if z > 10.0 else 2.0

    hi, achieved = accounting._refine_on_fine_grid(eps_fine, 1.0, 100.0, 0.0, 1e-3)
    assert 10.0 < hi <= 10.0 * (1 + 2e-3) and achieved == eps_fine(hi) == 0.0


def test_dp_gcd_small_epsilon_calibrates():
    """dp-gcd at epsilon = 1e-5 failed with 'math domain error'."""
    from dpopt.solvers.dp_gcd import calibrate_gcd

    cal = calibrate_gcd(1e-5, 1e-5, 10)
    assert 0 <= cal.epsilon <= 1e-5 and 0 < cal.update_multiplier < math.inf


def test_dp_cd_noise_multiplier_follows_epsilon():
    """dp-cd used one noise multiplier for every epsilon from 1e-300 to 1e-20: when
    epsilon << delta the Gaussian's guarantee is governed by delta alone (mu-GDP is
    (0, 2 Phi(mu/2) - 1)-DP), so those epsilons all asked for the same noise. In the accepted
    range the multiplier still decreases with epsilon, and each fit certifies its target."""
    problem = _problem()
    fits = [dpopt.solve(problem, "dp-cd", epsilon=e, delta=1e-5, random_state=0,
                        smoothness=np.ones(3), passes=2) for e in (1e-6, 1e-5, 1e-4, 1e-2)]
    z = [f.noise_multiplier for f in fits]
    assert z[0] > z[1] > z[2] > z[3]
    assert all(0 <= f.epsilon <= e for f, e in zip(fits, (1e-6, 1e-5, 1e-4, 1e-2)))


def test_pld_delta_below_its_resolution_blames_delta():
    """Above MIN_DELTA the PLD accountant may still not certify a tiny delta (truncated tails
    of mass ~e^-50 per step); the error names delta, not epsilon."""
    with pytest.raises(ValueError, match="delta=1e-25 is too small for the pld accountant"):
        privacy.calibrate(lambda z: [privacy.SubsampledGaussian(z, 0.1, 20)], 1.0, 1e-25,
                          accountant="pld")
