"""No silent loss of a column: zero-inflated and unresolved features on the default path.

private_feature_bounds keeps its documented behaviour without ``fallback`` (collapsed
features get [0, 0]); with the default path's public fallback they get [0, 1] (bulk at
exactly 0) or [-1, 1] (unresolved), and the fit warns and reports them by index; a feature
still dropped (equal bounds) is warned about and reported too.
"""

import warnings

import numpy as np
import pytest

import dpopt
from dpopt.preprocessing import private_feature_bounds
from dpopt.preprocessing._bounds import ZERO_INFLATED_FALLBACK, collapsed_to_zero


def _columns(n=1000, seed=0):
    """An ordinary column, an indicator with 97% zeros, a zero-inflated count with 96%
    zeros, and a column spread over ten decades (unresolvable at a small budget)."""
    rng = np.random.default_rng(seed)
    return np.column_stack([
        50 + 10 * rng.standard_normal(n),
        (rng.random(n) < 0.03).astype(float),
        (rng.random(n) < 0.04) * rng.poisson(4.0, n),
        rng.choice([-1, 1], n) * 10.0 ** rng.uniform(-4, 6, n),
    ])


def test_without_fallback_the_documented_collapse_is_kept():
    X = _columns()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fb = private_feature_bounds(X, 0.2, np.random.default_rng(1))
    assert fb.lower[1] == fb.upper[1] == 0.0 and fb.lower[2] == fb.upper[2] == 0.0
    assert not fb.fallback.any()


def test_fallback_is_post_processing_of_the_same_release():
    X = _columns()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        plain = private_feature_bounds(X, 0.2, np.random.default_rng(1))
    fb = private_feature_bounds(X, 0.2, np.random.default_rng(1), fallback=ZERO_INFLATED_FALLBACK)
    np.testing.assert_array_equal(fb.noisy_counts, plain.noisy_counts)  # same release
    assert fb.mechanisms == plain.mechanisms
    zero = collapsed_to_zero(plain.lower, plain.upper) & ~plain.unresolved
    assert zero[1] and zero[2]  # the indicator and the count collapse onto the zero bin
    np.testing.assert_array_equal(fb.fallback, zero | plain.unresolved)
    assert (fb.lower[zero] == 0.0).all() and (fb.upper[zero] == 1.0).all()
    assert (fb.lower[plain.unresolved] == -1.0).all() and (fb.upper[plain.unresolved] == 1.0).all()
    keep = ~fb.fallback  # resolved features: unchanged
    np.testing.assert_array_equal(fb.lower[keep], plain.lower[keep])
    np.testing.assert_array_equal(fb.upper[keep], plain.upper[keep])
    assert not fb.fallback[0]


def test_bad_fallback_is_a_clear_error():
    with pytest.raises(ValueError, match="fallback"):
        private_feature_bounds(_columns(50), 1.0, np.random.default_rng(0), fallback=(1.0, 0.0))


def test_default_fit_warns_and_reports_the_fallback_features():
    X = _columns(4000)
    y = np.where(X[:, 1] + 0.2 * X[:, 2] + np.random.default_rng(2).standard_normal(4000) > 0.8,
                 1.0, -1.0)
    with pytest.warns(UserWarning, match=r"features \[.*2.*\].*public range") as rec:
        model = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
    assert not [w for w in rec if issubclass(w.category, dpopt.PrivacyLeakWarning)]
    plan = model.fit_result_.params["auto"]
    # the rare indicator: found by the indicator test (public [0, 1], not a loss) or, when
    # its noisy count misses, by the histograms' fallback, [0, 1] too
    assert 1 in plan["indicator_features"] or 1 in plan["fallback_features"]
    assert 2 in plan["fallback_features"] and 0 not in plan["fallback_features"]
    assert plan["dropped_features"] == []
    assert "public range" in model.privacy_report()
    lower, upper = model.feature_bounds_
    assert lower[1] == 0.0 and upper[1] == 1.0  # the indicator is kept exactly
    if plan["selection"]["released"] == "model":  # the held-out choice may keep the constant
        assert model.coef_[0, 1] != 0.0


def test_a_column_still_dropped_is_warned_and_reported():
    rng = np.random.default_rng(3)
    n = 3000
    X = np.column_stack([rng.standard_normal(n), np.full(n, 5e12)])  # beyond the grid: [e_K, e_K]
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    with pytest.warns(UserWarning, match=r"features \[1\] \(1\) are dropped"):
        model = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
    assert model.fit_result_.params["auto"]["dropped_features"] == [1]
    assert "are dropped" in model.privacy_report()
    assert model.epsilon_spent_ <= 1.0 + 1e-9


def test_columns_reaching_the_grid_end_are_named_with_the_remedy():
    """Unix times in seconds (1.4e9-1.7e9) lie past the grid's 1e9: the released bounds sit
    at its end, so the column is clipped there (here, all of it: dropped). The fit names
    it with the remedy; an ordinary column is not named; the same times in millions of
    seconds are kept and learnt."""
    rng = np.random.default_rng(4)
    n = 4000
    t = rng.uniform(1.4e9, 1.7e9, n)
    x = rng.standard_normal(n)
    y = (t - 1.55e9) / 1e8 + x + rng.standard_normal(n)
    X = np.column_stack([t, x])
    with pytest.warns(UserWarning, match=r"features \[0\] \(1\): their private bounds reach \+-1e\+09"):
        model = dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(X, y)
    plan = model.fit_result_.params["auto"]
    assert plan["grid_end_features"] == [0] and plan["dropped_features"] == [0]
    assert "divide them by a public constant" in model.privacy_report()
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.pipeline.scaling.ColumnWarning)
        rescaled = dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(
            np.column_stack([t / 1e6, x]), y)
    assert rescaled.fit_result_.params["auto"]["grid_end_features"] == []
    assert rescaled.score(np.column_stack([t / 1e6, x]), y) > model.score(X, y) + 0.1
