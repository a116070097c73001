"""The default path's multinomial model for k >= 3 classes (dpopt.pipeline.multinomial):
DP-GD on the softmax loss, its noise, its clip and what it learns (its audit:
tests/test_audit.py)."""

import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

import dpopt
from dpopt.pipeline.multinomial import MAX_PASSES, multinomial_run_length
from dpopt.solvers.dp_gd import (
    fit_multinomial_gd,
    multinomial_clipped_gradient,
    multinomial_gradient,
)


def _rows(n=200, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(-1, 1, (n, d - 1)), np.ones(n)])  # intercept last
    return X, rng.integers(3, size=n)


def test_noise_is_calibrated_to_the_stated_sensitivity():
    # one step from W = 0: W_1 = -step (g + sigma N), so (W_1 + step g) / step is the noise;
    # its standard deviation must be 2 C sqrt(T) / (n mu), C = sqrt(2) r, written out here
    X, labels = _rows()
    n, r, mu, T = X.shape[0], math.sqrt(3.0), 0.5, 1
    P = np.full((n, 3), 1 / 3)
    P[np.arange(n), labels] -= 1.0
    g = X.T @ P / n  # the exact mean gradient at W = 0 (the clip does not bind)
    rng = np.random.default_rng(1)
    draws = np.stack([fit_multinomial_gd(X, labels, 3, mu=mu, passes=T, step=1.0,
                                         row_bound=r, rng=rng)[0] + g for _ in range(400)])
    expected = 2 * math.sqrt(2) * r * math.sqrt(T) / (n * mu)
    assert np.std(draws) == pytest.approx(expected, rel=0.05)
    W, (record,), params = fit_multinomial_gd(X, labels, 3, mu=mu, passes=4, step=1.0,
                                              row_bound=r, rng=rng)
    assert record.count == 4 and 1 / record.noise_multiplier * 2 == pytest.approx(mu)
    assert params["sigma"] == pytest.approx(expected * 2)


def test_the_run_returns_the_mean_of_its_second_half():
    """T = 3 steps with negligible noise: the output is (W_2 + W_3) / 2 of plain gradient
    descent (suffix averaging, post-processing of the same steps)."""
    X, labels = _rows(n=50)
    r = math.sqrt(3.0)
    W, _, params = fit_multinomial_gd(X, labels, 3, mu=1e12, passes=3, step=0.5, row_bound=r,
                                      rng=np.random.default_rng(0))
    iterates, V = [], np.zeros((3, 3))
    for _ in range(3):
        V = V - 0.5 * multinomial_gradient(X, labels, V, params["clip"])
        iterates.append(V)
    np.testing.assert_allclose(W, (iterates[1] + iterates[2]) / 2, atol=1e-9)
    assert not np.allclose(W, iterates[2], atol=1e-6)


def test_run_length_balances_the_average_iterates_bound():
    """T = beta n mu / (2 sqrt(2) C) (beta D n mu / (2 sqrt(2) C sqrt(dim)), D = sqrt(dim)),
    clamped."""
    assert multinomial_run_length(10_000, 0.1, 0.8, 2.0) == round(800 / (4 * math.sqrt(2)))
    assert multinomial_run_length(100, 0.1, 0.8, 2.0) == 5
    assert multinomial_run_length(10 ** 7, 1.0, 0.8, 2.0) == MAX_PASSES


def test_clip_bounds_every_record_whatever_its_norm():
    X = np.array([[1e6, 1.0]])  # far beyond the row bound
    for label in range(3):
        g = multinomial_clipped_gradient(X, np.array([label]), np.zeros((2, 3)), clip=1.5)
        assert np.linalg.norm(g) <= 1.5 * (1 + 1e-12)


def test_bad_mu_is_refused():
    X, labels = _rows(n=10)
    with pytest.raises(ValueError, match="mu"):
        fit_multinomial_gd(X, labels, 3, mu=0.0, passes=1, step=1.0, row_bound=2.0,
                           rng=np.random.default_rng(0))


def _blobs(n, k, p, seed, sep=1.0):
    rng = np.random.default_rng(seed)
    centres = sep * rng.standard_normal((k, p))
    y = rng.integers(k, size=n)
    return centres[y] + rng.standard_normal((n, p)), y


def test_large_epsilon_approaches_scikit_learns_multinomial_model():
    # overlapping classes, where one-vs-rest and the multinomial model differ: at
    # epsilon = 100 the default path is within 0.01 accuracy of LogisticRegression()
    Xall, yall = _blobs(16000, 4, 5, seed=3)
    X, Xte, y, yte = Xall[:12000], Xall[12000:], yall[:12000], yall[12000:]
    scaler = StandardScaler().fit(X)
    ref = LogisticRegression().fit(scaler.transform(X), y).score(scaler.transform(Xte), yte)
    clf = dpopt.DPLogisticRegression(epsilon=100.0, random_state=0).fit(X, y)
    assert clf.fit_result_.params["auto"]["multinomial"]
    assert clf.score(Xte, yte) >= ref - 0.01


def test_row_normalized_fit_keeps_one_vs_rest():
    # too few rows for per-feature bounds: rows normalized, no multinomial steps
    X, y = _blobs(150, 3, 4, seed=1, sep=3.0)
    clf = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0, classes=[0, 1, 2]).fit(X, y)
    plan = clf.fit_result_.params["auto"]
    assert plan["scaling"] == "row-normalized" and not plan.get("multinomial")


def test_a_record_of_no_class_contributes_nothing():
    # a label the private selection did not keep is encoded -1: no softmax term (it used
    # to index the last class)
    X = np.array([[0.5, 1.0], [0.2, 1.0]])
    g = multinomial_clipped_gradient(X, np.array([-1, -1]), np.zeros((2, 3)), clip=10.0)
    assert np.all(g == 0.0)
    one = multinomial_clipped_gradient(X, np.array([2, -1]), np.zeros((2, 3)), clip=10.0)
    alone = multinomial_clipped_gradient(X[:1], np.array([2]), np.zeros((2, 3)), clip=10.0)
    np.testing.assert_allclose(one, alone / 2)


def test_released_constant_has_the_rates_as_probabilities():
    # no signal: the held-out choice releases a class; under the multinomial model's
    # softmax its intercepts are the rates' logarithms, so predict_proba is the rates
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((5000, 3)), rng.integers(3, size=5000)
    clf = dpopt.DPLogisticRegression(epsilon=2.0, random_state=0, classes=[0, 1, 2]).fit(X, y)
    sel = clf.fit_result_.params["auto"]["selection"]
    assert sel["released"].startswith("constant") and clf.fit_result_.params["auto"]["multinomial"]
    rates = np.asarray(sel["noisy_scores"][1:])
    np.testing.assert_allclose(clf.predict_proba(X[:3]), np.tile(rates / rates.sum(), (3, 1)),
                               rtol=1e-5)  # the chosen class nudged 1e-6 above ties
