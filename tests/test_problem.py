import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import dpopt
from dpopt.data import Penalty, box, elastic_net, get_loss, l1, l2, non_negative


@pytest.mark.parametrize("loss", ["squared", "logistic", "huber", "absolute"])
def test_loss_derivative_matches_finite_differences(loss):
    f = get_loss(loss)
    z = np.linspace(-5, 5, 41) + 0.0123
    y = np.where(np.arange(41) % 2 == 0, 1.0, -1.0)
    h = 1e-6
    num = (f.value(z + h, y) - f.value(z - h, y)) / (2 * h)
    np.testing.assert_allclose(f.deriv(z, y), num, atol=1e-6)


def test_loss_values_stable_for_extreme_margins():
    f = get_loss("logistic")
    z = np.array([-1e300, -1e4, 0.0, 1e4, 1e300])
    y = np.ones(5)
    with np.errstate(all="raise"):
        v, d = f.value(z, y), f.deriv(z, y)
    assert np.all(np.isfinite(v)) and np.all(np.isfinite(d))
    assert v[-1] == 0.0 and v[0] == pytest.approx(1e300)
    assert d[0] == -1.0 and d[-1] == 0.0


def test_objective_and_gradient(regression_data):
    X, y = regression_data
    pb = dpopt.Problem(X, y, "squared", "l2", alpha=0.3)
    w = np.linspace(-1, 1, 6)
    expected = 0.5 * np.mean((X @ w - y) ** 2) + 0.15 * w @ w
    assert pb.objective(w) == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(pb.gradient(w), X.T @ (X @ w - y) / len(y), rtol=1e-12)


def test_smoothness_constants(classification_data):
    X, y = classification_data
    pb = dpopt.Problem(X, y, "logistic")
    np.testing.assert_allclose(pb.coordinate_smoothness(), 0.25 * (X ** 2).sum(0) / len(y))
    assert pb.global_smoothness() == pytest.approx(0.25 * np.linalg.norm(X, 2) ** 2 / len(y))
    assert pb.X.flags.f_contiguous


def test_sparse_matches_dense(regression_data):
    X, y = regression_data
    X = X.copy()
    X[np.abs(X) < 1] = 0
    dense = dpopt.Problem(X, y, "huber", "l1", alpha=0.1, fit_intercept=True)
    for fmt in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix):
        sparse = dpopt.Problem(fmt(X), y, "huber", "l1", alpha=0.1, fit_intercept=True)
        assert sparse.is_sparse and sparse.X.format == "csc"
        w = np.arange(7) / 7.0
        assert sparse.objective(w) == pytest.approx(dense.objective(w), rel=1e-13)
        np.testing.assert_allclose(sparse.gradient(w), dense.gradient(w), rtol=1e-12)
        np.testing.assert_allclose(sparse.coordinate_smoothness(), dense.coordinate_smoothness())
        np.testing.assert_allclose(sparse.row_norms, dense.row_norms)
    assert sparse.X_csr.format == "csr"


def test_intercept_is_unpenalized(regression_data):
    X, y = regression_data
    pb = dpopt.Problem(X, y, "squared", "l1", alpha=1.0, fit_intercept=True)
    assert pb.dim == 7 and pb.penalty.l1[-1] == 0 and pb.penalty.l1[0] == 1.0
    coef, b = pb.unpack(np.arange(7.0))
    assert b == 6.0 and coef.shape == (6,)


@pytest.mark.parametrize("bad, match", [
    ({"X": [[1.0, np.nan]]}, "X contains NaN"),
    ({"X": [[1.0, np.inf]]}, "X contains NaN"),
    ({"y": [np.nan]}, "y contains NaN"),
    ({"y": [1.0, 2.0]}, "inconsistent numbers of samples"),
    ({"X": [1.0, 2.0]}, "X must be 2-dimensional"),
    ({"X": np.array([["a", "b"]])}, "X must have a numeric dtype"),
    ({"X": np.array([[object(), 1]], dtype=object)}, "X must have a numeric dtype"),
    ({"X": np.zeros((0, 2)), "y": np.zeros(0)}, "at least one sample"),
    ({"y": [[1.0]]}, "y must be 1-dimensional"),
    ({"loss": "hinge"}, "loss must be one of"),
    ({"penalty": "l3"}, "penalty must be one of"),
    ({"penalty": "l1", "alpha": -1.0}, "alpha must be >= 0"),
    ({"loss": "logistic", "y": [0.0]}, r"y must be in \{-1, \+1\}"),
    ({"fit_intercept": "yes"}, "fit_intercept must be a bool"),
])
def test_bad_input_raises_value_error(bad, match):
    kwargs = {"X": [[1.0, 2.0]], "y": [1.0], "loss": "squared"}
    kwargs.update(bad)
    X, y = kwargs.pop("X"), kwargs.pop("y")
    with pytest.raises(ValueError, match=match):
        dpopt.Problem(X, y, **kwargs)


def test_box_validation():
    with pytest.raises(ValueError, match="lower <= upper"):
        box(1.0, -1.0)
    with pytest.raises(ValueError, match="contain 0"):
        box(1.0, 2.0)


@settings(max_examples=200, deadline=None)
@given(v=st.floats(-1e6, 1e6), step=st.floats(1e-6, 1e3), alpha=st.floats(0, 1e3),
       ratio=st.floats(0, 1), lo=st.floats(-1e3, 0), up=st.floats(0, 1e3))
def test_prox_is_the_minimizer(v, step, alpha, ratio, lo, up):
    """prox_{t psi}(v) minimizes 1/2 (u - v)^2 + t psi(u): check against a fine grid and
    against the first-order optimality of the unconstrained part."""
    pen = elastic_net(alpha, ratio)
    pen = type(pen)("test", alpha, ratio, lo, up).for_dimension(1)
    u = pen.prox(np.array([v]), step)[0]
    assert lo <= u <= up

    def h(x):
        return 0.5 * (x - v) ** 2 + step * pen.value(np.array([x]))

    for cand in (lo, up, 0.0, u + 1e-3 * (1 + abs(u)), u - 1e-3 * (1 + abs(u))):
        if lo <= cand <= up:
            assert h(u) <= h(cand) + 1e-9 * (1 + abs(h(cand)))


def test_penalty_hands_its_arrays_to_the_kernels_without_copies():
    pen = Penalty("test", 0.5, 0.3, -1.0, 2.0).for_dimension(3, unpenalized_last=True)
    arrays = pen.arrays
    assert arrays.l1 is pen.l1 and arrays.l2 is pen.l2
    assert arrays.lo is pen.lo and arrays.up is pen.up
    assert arrays.l1[-1] == 0.0 and np.isinf(arrays.up[-1])
    with pytest.raises(ValueError, match="no dimension"):
        _ = elastic_net(0.5, 0.3).arrays


@settings(max_examples=100, deadline=None)
@given(v=st.floats(-1e3, 1e3), w=st.floats(-1e3, 1e3), step=st.floats(1e-3, 1e2))
def test_prox_is_nonexpansive(v, w, step):
    for pen in (l1(0.7), l2(2.0), non_negative(), box(-1.0, 2.0)):
        pen = pen.for_dimension(1)
        pv, pw = pen.prox(np.array([v]), step)[0], pen.prox(np.array([w]), step)[0]
        assert abs(pv - pw) <= abs(v - w) * (1 + 1e-12) + 1e-12
