"""The regressors' penalties are on the raw coefficients, as their docstrings and
scikit-learn state them (dpopt.pipeline.scaling.raw_unit_penalty): alpha is in the units of
the data, not of the private scaling."""

import numpy as np
import pytest
from sklearn.linear_model import ElasticNet, Lasso

import dpopt
from dpopt.data import Problem
from dpopt.pipeline.scaling import raw_unit_penalty
from dpopt.preprocessing.feature_maps import RowNormalization, Scaling, TargetScaling


def _table(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)) * np.array([1.0, 10.0, 0.1, 1.0, 1.0, 1.0])
    y = 50.0 + X @ np.array([3.0, 0.2, 20.0, 0.0, 0.0, 0.5]) + rng.normal(0.0, 1.0, n)
    return X, y


def test_weights_follow_the_scaling_and_the_target():
    X = np.ones((4, 2))
    scaling = Scaling(np.zeros(2), np.ones(2), np.zeros(2), np.array([2.0, 0.5]))
    target = TargetScaling(0.0, 10.0, 5.0, 5.0)
    p = raw_unit_penalty(Problem(X, np.zeros(4), penalty="elastic_net", alpha=0.3,
                                 l1_ratio=0.5, fit_intercept=True), scaling, target)
    np.testing.assert_allclose(p.penalty.l1, [0.15 / (5 * 2.0), 0.15 / (5 * 0.5), 0.0])
    np.testing.assert_allclose(p.penalty.l2, [0.15 / 4.0, 0.15 / 0.25, 0.0])
    for loss, maps in (("logistic", scaling), ("squared", RowNormalization())):
        y = np.ones(4) if loss == "logistic" else np.zeros(4)
        q = raw_unit_penalty(Problem(X, y, loss=loss, penalty="l1", alpha=0.3), maps, target)
        np.testing.assert_allclose(q.penalty.l1, [0.3, 0.3])  # as given


def test_lasso_alpha_is_in_the_units_of_y():
    """scikit-learn's Lasso(alpha) on (X, c y) is c times Lasso(alpha / c) on (X, y). The
    private scaling moves by whole bins of its log grid when c = 10^3, so with the same seed
    the private fit keeps that identity exactly, which a penalty on the scaled coefficients
    breaks."""
    X, y = _table()
    small = dpopt.DPLasso(epsilon=4.0, alpha=0.05, random_state=0).fit(X, y)
    large = dpopt.DPLasso(epsilon=4.0, alpha=50.0, random_state=0).fit(X, 1000.0 * y)
    np.testing.assert_allclose(large.coef_, 1000.0 * small.coef_, rtol=1e-6, atol=1e-9)
    assert np.count_nonzero(small.coef_) >= 2


@pytest.mark.parametrize("estimator, reference", [(dpopt.DPLasso, Lasso),
                                                   (dpopt.DPElasticNet, ElasticNet)])
def test_the_default_approaches_scikit_learns_as_epsilon_grows(estimator, reference):
    """The default alpha = 1 in the data's units, as scikit-learn's: at epsilon = 100 the
    private fit is within 0.02 of its R^2 (it used to penalize the scaled coefficients,
    every one of which alpha = 1 set to 0: R^2 about 0)."""
    X, y = _table()
    Xt, yt = _table(seed=1)
    target = reference().fit(X, y).score(Xt, yt)
    scores = [estimator(epsilon=100.0, random_state=s).fit(X, y).score(Xt, yt)
              for s in range(2)]
    assert target > 0.5 and np.mean(scores) > target - 0.02, (scores, target)
