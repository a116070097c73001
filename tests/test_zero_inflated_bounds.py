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
