"""reference_optimum against scikit-learn and against an independent method."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.linear_model import ElasticNet, Lasso, LogisticRegression
from sklearn.preprocessing import StandardScaler

import dpopt
from dpopt.solvers.reference import prox_grad_residual


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)
    return X, y


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), np.where(y == 1, 1.0, -1.0)


def fista(problem, iters=200_000, tol=1e-13):
    """Independent check: accelerated proximal gradient with restarts (numpy only)."""
    L = problem.global_smoothness() + problem.penalty.l2.max()
    w = v = problem.zeros()
    t = 1.0
    f_old = np.inf
    for _ in range(iters):
        w_new = problem.penalty.prox(v - problem.gradient(v) / L, 1.0 / L)
        f_new = problem.objective(w_new)
        if f_new > f_old:  # restart
            t, v = 1.0, w
            continue
        t_new = (1 + np.sqrt(1 + 4 * t * t)) / 2
        v = w_new + (t - 1) / t_new * (w_new - w)
        if abs(f_old - f_new) <= tol * abs(f_new):
            return w_new
        w, t, f_old = w_new, t_new, f_new
    return w


@pytest.mark.parametrize("alpha", [0.1, 1.0])
def test_lasso_matches_sklearn(diabetes, alpha):
    X, y = diabetes
    pb = dpopt.Problem(X, y, "squared", "l1", alpha=alpha)
    _, f = dpopt.reference_optimum(pb)
    sk = Lasso(alpha=alpha, fit_intercept=False, tol=1e-14, max_iter=1_000_000).fit(X, y)
    assert f == pytest.approx(pb.objective(sk.coef_), rel=1e-8)
    assert f <= pb.objective(sk.coef_) * (1 + 1e-12)


def test_elastic_net_matches_sklearn(diabetes):
    X, y = diabetes
    pb = dpopt.Problem(X, y, "squared", "elastic_net", alpha=0.05, l1_ratio=0.3)
    _, f = dpopt.reference_optimum(pb)
    sk = ElasticNet(alpha=0.05, l1_ratio=0.3, fit_intercept=False, tol=1e-14,
                    max_iter=1_000_000).fit(X, y)
    assert f == pytest.approx(pb.objective(sk.coef_), rel=1e-8)


@pytest.mark.parametrize("penalty, solver", [("l2", "newton-cholesky"), ("l1", "liblinear")])
def test_logistic_matches_sklearn(cancer, penalty, solver):
    X, y = cancer
    lam = 1e-2
    pb = dpopt.Problem(X, y, "logistic", penalty, alpha=lam)
    w, f = dpopt.reference_optimum(pb)
    kwargs = {"l1_ratio": 1.0} if penalty == "l1" else {}
    sk = LogisticRegression(C=1 / (lam * len(y)), fit_intercept=False, solver=solver, tol=1e-12,
                            max_iter=100_000, **kwargs).fit(X, y)
    f_sk = pb.objective(sk.coef_.ravel())
    assert f == pytest.approx(f_sk, rel=1e-8)
    assert f <= f_sk * (1 + 1e-10)


@pytest.mark.parametrize("loss, penalty, kw", [
    ("squared", "l1", {"alpha": 0.05}), ("logistic", "l2", {"alpha": 1e-3}),
    ("huber", "elastic_net", {"alpha": 0.02, "l1_ratio": 0.5}), ("squared", "none", {}),
    ("logistic", "box", {"lower": -0.2, "upper": 0.3}), ("squared", "non_negative", {}),
])
def test_every_pair_reaches_kkt_and_agrees_with_fista(loss, penalty, kw):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 8)) * np.linspace(0.5, 3, 8)
    y = X @ rng.standard_normal(8) + 0.2 * rng.standard_normal(60)
    if loss == "logistic":
        y = np.where(y > 0, 1.0, -1.0)
    pb = dpopt.Problem(X, y, loss, penalty, fit_intercept=(loss != "logistic"), **kw)
    w, f, info = dpopt.reference_optimum(pb, return_info=True)
    assert info["converged"] and prox_grad_residual(pb, w) <= 1e-10 * max(1, abs(f))
    f_fista = pb.objective(fista(pb))
    assert f <= f_fista + 1e-12 * max(1.0, abs(f))
    assert f == pytest.approx(f_fista, rel=1e-8, abs=1e-12)


def test_sparse_problem_and_absolute_loss():
    rng = np.random.default_rng(4)
    X = sp.random(100, 20, density=0.2, random_state=4, format="csr")
    y = np.asarray(X @ rng.standard_normal(20)).ravel() + 0.1 * rng.standard_normal(100)
    dense = dpopt.Problem(X.toarray(), y, "squared", "l1", alpha=0.01)
    sparse = dpopt.Problem(X, y, "squared", "l1", alpha=0.01)
    assert dpopt.reference_optimum(sparse)[1] == pytest.approx(dpopt.reference_optimum(dense)[1],
                                                               rel=1e-10)
    pb = dpopt.Problem(X, y, "absolute", "l1", alpha=0.01)
    w, f = dpopt.reference_optimum(pb)
    # LP optimum: no perturbation decreases F
    for j in range(5):
        for h in (1e-4, -1e-4):
            e = np.zeros(20)
            e[j] = h
            assert pb.objective(w + e) >= f - 1e-12


def test_reference_solver_is_registered_and_not_private(diabetes):
    X, y = diabetes
    pb = dpopt.Problem(X, y, "squared", "l1", alpha=1.0)
    res = dpopt.solve(pb, "reference")
    assert res.epsilon == np.inf and res.accountant == "none"
    assert "reference" not in dpopt.available_solvers(private_only=True)
