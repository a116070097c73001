"""AdaSSP (dpopt.solvers.adassp): exactness without noise, the noise it adds, its
sensitivity claims, clipping, input checks, and accuracy on California."""

import math
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import special

import dpopt
from _broken_variants import unclipping
from _declarations import clip_off, crosscheck, custom_noise_test
from _independent_accounting import gaussian_epsilon
from dpopt.privacy import epsilon_of, gdp_epsilon
from dpopt.solvers import adassp as A


def clip_rows(X, B):
    """Reference clipping, row by row."""
    out = np.array(X, dtype=float)
    for i, row in enumerate(out):
        norm = np.linalg.norm(row)
        if norm > B:
            out[i] = row * (B / norm)
    return out


def regression(n=60, p=4, seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * scale
    y = X @ rng.standard_normal(p) + rng.standard_normal(n)
    return X, y


def fit(problem, **kw):
    kw = {"epsilon": 1.0, "delta": 1e-5, "random_state": 0, "row_bound": 2.0,
          "target_bound": 5.0, **kw}
    return dpopt.solve(problem, "adassp", **kw)


# ---------------------------------------------------------------------------
# exactness at epsilon = inf


@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("alpha", [0.0, 0.3])
@pytest.mark.parametrize("sparse", [False, True])
def test_infinite_epsilon_is_the_exact_solution_on_clipped_data(fit_intercept, alpha, sparse):
    X, y = regression()
    B, By = 4.0, 3.0
    Xc, yc = clip_rows(X, B), np.clip(y, -By, By)
    assert np.any(np.linalg.norm(X, axis=1) > B) and np.any(np.abs(y) > By)  # clipping matters
    penalty = {"penalty": "l2", "alpha": alpha} if alpha else {}
    pb = dpopt.Problem(sp.csr_matrix(X) if sparse else X, y, fit_intercept=fit_intercept,
                       **penalty)
    res = fit(pb, epsilon=math.inf, row_bound=B, target_bound=By)
    Xa = np.hstack([Xc, np.ones((len(y), 1))]) if fit_intercept else Xc
    P = np.eye(Xa.shape[1])
    if fit_intercept:
        P[-1, -1] = 0.0
    expected = np.linalg.solve(Xa.T @ Xa + len(y) * alpha * P, Xa.T @ yc)
    np.testing.assert_allclose(res.w, expected, rtol=1e-8, atol=1e-10)
    assert res.epsilon == math.inf and res.params["ridge"] == 0.0


def test_infinite_epsilon_on_singular_data_is_the_minimum_norm_solution():
    X, y = regression(n=5, p=8)  # n < p: X^T X singular, no ridge
    pb = dpopt.Problem(X, y)
    res = fit(pb, epsilon=math.inf, row_bound=100.0, target_bound=100.0)
    np.testing.assert_allclose(res.w, np.linalg.lstsq(X, y, rcond=None)[0], rtol=1e-8, atol=1e-10)
    assert res.params["dropped_directions"] == 3


def test_matches_sklearn_ridge_at_infinite_epsilon():
    from sklearn.linear_model import Ridge

    X, y = regression(n=80, p=3, scale=0.3)
    pb = dpopt.Problem(X, y, "squared", "l2", alpha=0.05, fit_intercept=True)
    res = fit(pb, epsilon=math.inf, row_bound=100.0, target_bound=100.0)  # nothing clipped
    sk = Ridge(alpha=0.05 * len(y)).fit(X, y)  # sklearn's Ridge: ||y - Xw||^2 + alpha ||w||^2
    np.testing.assert_allclose(res.coef, sk.coef_, rtol=1e-8)
    assert res.intercept == pytest.approx(sk.intercept_, rel=1e-8)


# ---------------------------------------------------------------------------
# the data pass


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_sufficient_statistics_sum_over_row_blocks_dense_and_sparse(fit_intercept):
    X, y = regression(n=50, p=5)
    X[3] = 0.0
    B, By = 3.0, 2.0
    full = A.sufficient_statistics(X, y, B, By, fit_intercept)
    parts = [A.sufficient_statistics(X[s], y[s], B, By, fit_intercept)
             for s in (slice(0, 7), slice(7, 31), slice(31, 50))]
    for k in range(3):
        np.testing.assert_allclose(sum(p[k] for p in parts), full[k], rtol=1e-12, atol=1e-12)
    for fmt in ("csr", "csc", "coo"):
        sparse = A.sufficient_statistics(sp.csr_matrix(X).asformat(fmt), y, B, By, fit_intercept)
        for k in range(3):
            np.testing.assert_allclose(sparse[k], full[k], rtol=1e-12, atol=1e-12)
    Xc, yc = clip_rows(X, B), np.clip(y, -By, By)
    Xa = np.hstack([Xc, np.ones((50, 1))]) if fit_intercept else Xc
    np.testing.assert_allclose(full[0], Xa.T @ Xa, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(full[1], Xa.T @ yc, rtol=1e-12, atol=1e-12)
    assert full[2] == 50


def test_no_clipping_when_bounds_hold_and_infinite_bounds():
    X, y = regression(n=30, p=3)
    big = A.sufficient_statistics(X, y, 1e6, 1e6, False)
    inf = A.sufficient_statistics(X, y, math.inf, math.inf, False)
    np.testing.assert_allclose(big[0], X.T @ X, rtol=1e-13)
    np.testing.assert_array_equal(big[0], inf[0])
    np.testing.assert_array_equal(big[1], inf[1])


def test_fit_clips_rows_and_targets():
    """A fit on raw data equals the fit on data clipped beforehand (same seed)."""
    X, y = regression(n=40, p=3)
    B, By = 1.5, 0.7
    raw = fit(dpopt.Problem(X, y, fit_intercept=True), row_bound=B, target_bound=By)
    pre = fit(dpopt.Problem(clip_rows(X, B), np.clip(y, -By, By), fit_intercept=True),
              row_bound=B, target_bound=By)
    np.testing.assert_allclose(raw.w, pre.w, rtol=1e-10, atol=1e-12)
    scaled = fit(dpopt.Problem(X * 10, y * 10, fit_intercept=True), row_bound=B, target_bound=By)
    assert not np.allclose(scaled.w, raw.w)  # (some rows are short enough to stay unclipped)


def test_bounds_from_data_warn_and_use_the_maxima():
    X, y = regression(n=20, p=3)
    pb = dpopt.Problem(X, y, fit_intercept=True)
    with pytest.warns(dpopt.PrivacyLeakWarning, match="row_bound"):
        res = dpopt.solve(pb, "adassp", epsilon=1.0, delta=1e-5, random_state=0,
                          target_bound=1.0)
    assert res.params["row_bound"] == pytest.approx(np.linalg.norm(X, axis=1).max(), rel=1e-12)
    with pytest.warns(dpopt.PrivacyLeakWarning, match="target_bound"):
        res = dpopt.solve(pb, "adassp", epsilon=1.0, delta=1e-5, random_state=0, row_bound=1.0)
    assert res.params["target_bound"] == np.abs(y).max()


# ---------------------------------------------------------------------------
# sensitivities (replace-one adjacency)


def _upper(M):
    return M[np.triu_indices(M.shape[0])]


def _released(X, y, B, By, fit_intercept):
    xtx, xty, _ = A.sufficient_statistics(X, y, B, By, fit_intercept)
    return np.linalg.eigvalsh(xtx)[0], _upper(xtx), xty


def _on_sphere(rng, p, B):
    v = rng.standard_normal(p)
    return v * (B * rng.uniform(0.0, 1.2) / np.linalg.norm(v))  # some beyond B: clipped


@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.parametrize("B", [0.5, 1.0, 3.0])
def test_sensitivities_hold_on_random_adjacent_datasets(fit_intercept, B):
    rng = np.random.default_rng(int(B * 10) + fit_intercept)
    By = 2.0
    bounds = A.sensitivities(B, By, fit_intercept)
    worst = np.zeros(3)
    for trial in range(300):
        n, p = int(rng.integers(1, 6)), int(rng.integers(1, 4))
        X = np.array([_on_sphere(rng, p, B) for _ in range(n)])
        y = rng.uniform(-1.5 * By, 1.5 * By, n)
        X2, y2 = X.copy(), y.copy()
        i = int(rng.integers(n))
        X2[i], y2[i] = _on_sphere(rng, p, B), rng.uniform(-1.5 * By, 1.5 * By)
        if trial % 3 == 0:  # adversarial: opposite or orthogonal rows, opposite labels
            X2[i] = -X[i] if trial % 2 else np.roll(X[i], 1)
            y[i], y2[i] = By, -By
        a, b = _released(X, y, B, By, fit_intercept), _released(X2, y2, B, By, fit_intercept)
        gaps = [abs(a[0] - b[0]), np.linalg.norm(a[1] - b[1]), np.linalg.norm(a[2] - b[2])]
        worst = np.maximum(worst, gaps)
    assert np.all(worst <= np.array(bounds) * (1 + 1e-12)), (worst, bounds)


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_sensitivities_are_nearly_attained(fit_intercept):
    B, By = 1.0, 2.0
    d1, d2, d3 = A.sensitivities(B, By, fit_intercept)
    e1, e2 = np.array([[B, 0.0]]), np.array([[0.0, B]])
    if fit_intercept:  # x' at angle 120 degrees: x^T x' = -1/2
        e2 = np.array([[-0.5, math.sqrt(3) / 2]])
    y = np.array([By])
    up = np.linalg.norm(_released(e1, y, B, By, fit_intercept)[1]
                        - _released(e2, y, B, By, fit_intercept)[1])
    assert up >= 0.97 * d2
    g = np.linalg.norm(_released(e1, y, B, By, fit_intercept)[2]
                       - _released(e1, -y, B, By, fit_intercept)[2])
    assert g == pytest.approx(d3, rel=1e-12)
    if not fit_intercept:  # eigenvalue: one row B against one zero row (p = 1)
        gap = _released(np.array([[B]]), y, B, By, False)[0] - _released(np.zeros((1, 1)), y, B,
                                                                           By, False)[0]
        assert gap == pytest.approx(d1, rel=1e-12)


# ---------------------------------------------------------------------------
# noise


def test_released_noise_has_the_calibrated_scales():
    rng = np.random.default_rng(0)
    d, runs = 3, 3000
    xtx = np.diag([500.0, 400.0, 300.0]) + 10.0
    xty = np.array([1.0, -2.0, 3.0])
    sigmas, rho = (2.0, 1.5, 0.7), 0.05
    lam, mats, vecs, ridges = [], [], [], []
    for _ in range(runs):
        rel = A.release_statistics(xtx, xty, sigmas, rho, rng)
        lam.append(rel.lambda_min)
        mats.append(rel.xtx - xtx)
        vecs.append(rel.xty - xty)
        ridges.append(rel.ridge)
        np.testing.assert_array_equal(rel.xtx, rel.xtx.T)
    lam, mats, vecs = np.array(lam), np.array(mats), np.array(vecs)
    tol = 5 / math.sqrt(2 * runs)  # five standard errors of a standard deviation
    true_min = np.linalg.eigvalsh(xtx)[0]
    assert lam.mean() == pytest.approx(true_min - 2.0 * special.ndtri(0.95), abs=5 * 2.0 / 55)
    assert lam.std() == pytest.approx(2.0, rel=tol)
    assert np.mean(lam > true_min) == pytest.approx(0.05, abs=0.015)  # a lower bound w.p. 1 - rho
    for i in range(d):
        for j in range(i, d):
            assert mats[:, i, j].std() == pytest.approx(1.5, rel=tol)
    offdiag = np.corrcoef(mats[:, 0, 1], mats[:, 0, 2])[0, 1]
    assert abs(offdiag) < 0.08  # independent entries
    assert np.all(np.abs(vecs.std(axis=0) / 0.7 - 1) < tol)
    t = 1.5 * A.eigen_tail(d, rho)
    np.testing.assert_allclose(ridges, np.maximum(0.0, t - lam))


@pytest.mark.parametrize("d", [3, 12, 40])
def test_eigen_tail_is_a_quantile_bound_of_the_matrix_noise(d):
    """t_rho / sigma_2 bounds lambda_max(E) with probability >= 1 - rho (Monte-Carlo, with
    E symmetric, N(0, 1) on and above the diagonal as released), and it is never above
    the matrix Gaussian series bound it refines (which it is below for d >= 10)."""
    rho, runs = 0.05, 1500
    rng = np.random.default_rng(d)
    t = A.eigen_tail(d, rho)
    tropp = math.sqrt(2 * d * math.log(d / rho))
    assert t <= tropp
    if d >= 10:
        assert t == pytest.approx(2 * math.sqrt(d) + 2 * math.sqrt(math.log(1 / rho)))
        assert t < tropp
    top = []
    for _ in range(runs):
        g = np.triu(rng.standard_normal((d, d)))
        top.append(np.linalg.eigvalsh(g + np.triu(g, 1).T)[-1])
    assert np.mean(np.array(top) >= t) <= rho  # far below rho in practice
    # and the bound is not vacuous: the noise's own scale, 2 sqrt(d), is within it
    assert np.median(top) <= 2 * math.sqrt(d) < t


def test_fit_follows_the_documented_draws_and_formulas():
    """An independent re-implementation of steps 1-4 with the documented random draws."""
    X, y = regression(n=30, p=2)
    B, By, rho, eps, delta = 2.5, 4.0, 0.1, 1.5, 1e-6
    pb = dpopt.Problem(X, y, "squared", "l2", alpha=0.2, fit_intercept=True)
    res = fit(pb, epsilon=eps, delta=delta, row_bound=B, target_bound=By, rho=rho,
              budget_split=(1, 2, 3), random_state=7)
    mu = 1 / res.noise_multiplier
    assert gdp_epsilon(mu, delta) == pytest.approx(eps, rel=1e-9)
    shares = np.array([1, 2, 3]) / 6
    sens = (B * B + 1, math.sqrt(2 * B ** 4 + 2 * B ** 2 + 0.5), 2 * math.sqrt(B * B + 1) * By)
    sig = [D / (mu * math.sqrt(s)) for s, D in zip(shares, sens)]
    Xa = np.hstack([clip_rows(X, B), np.ones((30, 1))])
    yc = np.clip(y, -By, By)
    G, b, d = Xa.T @ Xa, Xa.T @ np.clip(yc, -By, By), 3
    rng = np.random.default_rng(7)
    lam = max(0.0, np.linalg.eigvalsh(G)[0] + sig[0] * rng.standard_normal()
              - sig[0] * special.ndtri(1 - rho))
    E = np.zeros((d, d))
    E[np.triu_indices(d)] = rng.standard_normal(d * (d + 1) // 2)
    E = E + np.triu(E, 1).T
    noisy_b = b + sig[2] * rng.standard_normal(d)
    ridge = max(0.0, sig[1] * math.sqrt(2 * d * math.log(d / rho)) - lam)
    M = G + sig[1] * E + ridge * np.eye(d) + 30 * 0.2 * np.diag([1.0, 1.0, 0.0])
    np.testing.assert_allclose(res.w, np.linalg.solve(M, noisy_b), rtol=1e-9)
    assert res.params["ridge"] == pytest.approx(ridge, rel=1e-12)


def test_privacy_report_and_records():
    X, y = regression()
    pb = dpopt.Problem(X, y, fit_intercept=True)
    res = fit(pb, epsilon=0.7, delta=1e-6)
    assert res.epsilon <= 0.7 * (1 + 1e-12) and res.epsilon == pytest.approx(0.7, rel=1e-9)
    assert len(res.mechanisms) == 3 and res.adjacency == "replace-one"
    assert epsilon_of(res.mechanisms, 1e-6) == pytest.approx(res.epsilon, rel=1e-12)
    no_eig = fit(pb, epsilon=0.7, delta=1e-6, budget_split=(0, 1, 1))
    assert len(no_eig.mechanisms) == 2 and no_eig.params["lambda_min_estimate"] == 0.0


def test_indefinite_noisy_matrix_uses_its_positive_part():
    M = np.diag([4.0, -1.0, 2.0])
    w, dropped = A.solve_psd(M, np.array([1.0, 1.0, 1.0]))
    np.testing.assert_allclose(w, [0.25, 0.0, 0.5])
    assert dropped == 1
    # a large rho makes the ridge small: the noisy matrix is then often indefinite
    X, y = regression(n=6, p=5)
    pb = dpopt.Problem(X, y)
    drops = [fit(pb, epsilon=0.2, rho=0.999, random_state=s).params["dropped_directions"]
             for s in range(20)]
    assert max(drops) >= 1


# ---------------------------------------------------------------------------
# input checks, reproducibility, sparse


@pytest.mark.parametrize("option, values", [
    ("rho", [0.0, 1.0, -0.1, math.nan, "0.1"]),
    ("row_bound", [0.0, -1.0, math.inf, math.nan, "1"]),
    ("target_bound", [0.0, -2.0, math.inf, math.nan]),
    ("budget_split", [(1, 1), (1, 1, 1, 1), (1, -1, 1), (1, 0, 1), (1, 1, 0), "abc",
                      (1, math.nan, 1), 3.0]),
])
def test_bad_options_raise_value_errors_naming_them(option, values):
    X, y = regression(n=10, p=2)
    pb = dpopt.Problem(X, y)
    for v in values:
        with pytest.raises(ValueError, match=option):
            fit(pb, **{option: v})


def test_unsupported_losses_and_penalties_are_refused():
    X, y = regression(n=10, p=2)
    with pytest.raises(ValueError, match="loss"):
        fit(dpopt.Problem(X, np.sign(y), "logistic"))
    with pytest.raises(ValueError, match="penalt"):
        fit(dpopt.Problem(X, y, "squared", "l1", alpha=0.1))


def test_reproducible_and_seed_dependent():
    X, y = regression()
    pb = dpopt.Problem(X, y, fit_intercept=True)
    a, b, c = fit(pb, random_state=3), fit(pb, random_state=3), fit(pb, random_state=4)
    np.testing.assert_array_equal(a.w, b.w)
    assert not np.array_equal(a.w, c.w)


def test_sparse_input_gives_the_dense_result():
    X, y = regression(n=50, p=6)
    X[np.abs(X) < 2.0] = 0.0
    dense = fit(dpopt.Problem(X, y, fit_intercept=True))
    sparse = fit(dpopt.Problem(sp.csc_matrix(X), y, fit_intercept=True))
    np.testing.assert_allclose(sparse.w, dense.w, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------
# real data

DATA = Path(os.environ.get("DPOPT_DATA", "")) / "california.npz"


def california(shift):
    """Features min-max scaled to [0, 1] with the data's own min / max (a measurement
    convenience, not private), minus ``shift``; y mapped from the documented target range
    [0.15, 5.00001] to [-1, 1]; 75/25 split."""
    d = np.load(DATA)
    X, y = d["X"], d["y"]
    X = (X - X.min(0)) / (X.max(0) - X.min(0)) - shift
    y = (y - 2.575) / 2.425
    perm = np.random.default_rng(0).permutation(len(y))
    tr, te = perm[: int(0.75 * len(y))], perm[int(0.75 * len(y)):]
    return X[tr], y[tr], X[te], y[te]


def r2(y, pred):
    return 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)


@pytest.mark.skipif(not DATA.is_file(), reason="california.npz not found in $DPOPT_DATA")
@pytest.mark.parametrize("shift, low", [(0.0, 0.18), (0.5, 0.38)])
def test_california_r2_at_epsilon_1(shift, low):
    """Measured (docs/adassp.md, 20 seeds): median R^2 0.24 on [0, 1] features and 0.44 on
    [-1/2, 1/2] features against 0.572 non-private: AdaSSP's ridge (about 900 and 270)
    dominates the error, so the private model is close to the ridge fit with that lambda."""
    Xtr, ytr, Xte, yte = california(shift)
    pb = dpopt.Problem(Xtr, ytr, fit_intercept=True)
    B = math.sqrt(Xtr.shape[1]) * (1 - shift)
    scores, ridge_scores = [], []
    for seed in range(5):
        res = dpopt.solve(pb, "adassp", epsilon=1.0, delta=1 / len(ytr) ** 2, random_state=seed,
                          row_bound=B, target_bound=1.0)
        scores.append(r2(yte, Xte @ res.coef + res.intercept))
        Xa = np.hstack([Xtr, np.ones((len(ytr), 1))])
        w = np.linalg.solve(Xa.T @ Xa + res.params["ridge"] * np.eye(Xa.shape[1]), Xa.T @ ytr)
        ridge_scores.append(r2(yte, Xte @ w[:-1] + w[-1]))
    Xa = np.hstack([Xtr, np.ones((len(ytr), 1))])
    w = np.linalg.lstsq(Xa, ytr, rcond=None)[0]
    nonprivate = r2(yte, Xte @ w[:-1] + w[-1])
    assert nonprivate == pytest.approx(0.572, abs=0.005)
    assert low <= np.median(scores) < nonprivate
    assert abs(np.median(scores) - np.median(ridge_scores)) < 0.05
    assert res.epsilon <= 1.0


def test_statistics_of_row_blocks_reproduce_the_fit():
    """The distributed path: per-block statistics, summed, then adassp_from_statistics."""
    X, y = regression(n=45, p=3)
    pb = dpopt.Problem(X, y, "squared", "l2", alpha=0.1, fit_intercept=True)
    res = fit(pb, random_state=11)
    blocks = [A.sufficient_statistics(X[s], y[s], 2.0, 5.0, True)
              for s in (slice(0, 20), slice(20, 45))]
    xtx, xty, n = (sum(b[k] for b in blocks) for k in range(3))
    w, cal, records, params = A.adassp_from_statistics(
        xtx, xty, n, epsilon=1.0, delta=1e-5, rng=np.random.default_rng(11), row_bound=2.0,
        target_bound=5.0, fit_intercept=True, l2=pb.penalty.l2)
    np.testing.assert_allclose(w, res.w, rtol=1e-10, atol=1e-12)
    assert records == res.mechanisms and cal.epsilon == res.epsilon


def test_huge_rows_give_a_result_or_a_value_error_not_an_overflow():
    import warnings

    import dpopt

    pb = dpopt.Problem(np.array([[1e100]]), np.array([1e100]), "squared", fit_intercept=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
        try:
            res = dpopt.solve(pb, "adassp", epsilon=1.0, delta=1e-5, random_state=0)
        except ValueError as exc:
            assert "overflow" in str(exc) or "rescale" in str(exc)
        else:
            assert np.all(np.isfinite(res.w))


# ---------------------------------------------------------------------------
# declarations for the registry-wide contract tests (tests/_declarations.py)


@crosscheck("adassp", [
    (1.0, 1e-5, {"row_bound": 2.0, "target_bound": 3.0}),
    (0.3, 1e-8, {"row_bound": 1.0, "target_bound": 1.0, "budget_split": (0.2, 0.3, 0.5)}),
    (4.0, 1e-3, {"row_bound": 5.0, "target_bound": 0.5, "budget_split": (0, 1, 1)}),
])
def expected_epsilon(problem, o, res, eps_target):
    """Three Gaussian releases (eigenvalue, upper triangle of X^T X, X^T y) with replace-one
    sensitivities B^2, sqrt(2) B^2, 2 B B_y (no intercept; with one: B^2 + 1,
    sqrt(2 B^4 + 2 B^2 + 1/2), 2 sqrt(B^2 + 1) B_y) and multipliers z_k = z / sqrt(s_k),
    s the normalised budget_split (the eigenvalue release absent when s_1 = 0): exactly
    mu-GDP with mu^2 = sum_k 1 / z_k^2."""
    B, By = o["row_bound"], o["target_bound"]
    split = np.asarray(o.get("budget_split", (0.1, 0.45, 0.45)), dtype=float)
    split = split / split.sum()
    if problem.fit_intercept:
        sens = (B * B + 1, math.sqrt(2 * B ** 4 + 2 * B * B + 0.5), 2 * math.sqrt(B * B + 1) * By)
    else:
        sens = (B * B, math.sqrt(2) * B * B, 2 * B * By)
    z = res.noise_multiplier
    inv_sq = 0.0
    for s, D, zk, sigma in zip(split, sens, res.params["noise_multipliers"], res.params["sigmas"]):
        if s == 0:
            assert math.isinf(zk) and math.isinf(sigma)
            continue
        assert zk == pytest.approx(z / math.sqrt(s), rel=1e-12)
        assert sigma == pytest.approx(zk * D, rel=1e-12)
        inv_sq += 1 / zk ** 2
    assert len(res.mechanisms) == int(np.count_nonzero(split))
    v = gaussian_epsilon(1 / math.sqrt(inv_sq), 1, res.delta)
    return v - 1e-8 * max(1, v), v + 1e-8 * max(1, v)


# the three releases (eigenvalue, X^T X, X^T y) against their calibrated scales
custom_noise_test("adassp")(test_released_noise_has_the_calibrated_scales)
# sufficient_statistics(X, y, row_bound, target_bound, fit_intercept), as Problem calls it:
# rows and targets unclipped, the noise still calibrated to row_bound and target_bound
clip_off("adassp")(unclipping(dpopt.data.problem,
                              sufficient_statistics=(2, 3, "row_bound", "target_bound")))


# ---------------------------------------------------------------------------
# ridge="sure": the ridge chosen from the release (post-processing)


def _noisy_release(G, b, ridge, s2, s3, rng):
    d = b.size
    E = A.symmetric_noise(d, rng)
    return A.Release(0.0, ridge, G + s2 * E, b + s3 * rng.standard_normal(d))


def test_stein_estimate_is_unbiased_for_the_in_sample_loss():
    """Over the release's noise, the criterion without its Cp term (target_bound = 0) has the
    mean of the true in-sample loss w^T X^T X w - 2 w^T X^T y at every factor; dropping the
    Stein corrections (the naive plug-in) is biased by many standard errors."""
    rng = np.random.default_rng(3)
    X, y = regression(n=200, p=3, scale=1.0)
    Xa = np.hstack([X, np.ones((200, 1))])
    G, b = Xa.T @ Xa, Xa.T @ y
    s2, s3, ridge = 15.0, 10.0, 60.0
    ridged = np.array([1.0, 1.0, 1.0, 0.0])  # as the default path: the intercept not shrunk
    est, true, naive = [], [], []
    for _ in range(3000):
        rel = _noisy_release(G, b, ridge, s2, s3, rng)
        _, _, estimates = A.sure_ridge(rel, np.zeros(4), s2, s3, 0.0, intercept=True)
        ws = [np.linalg.solve(rel.xtx + f * ridge * np.diag(ridged), rel.xty)
              for f in A.SURE_FACTORS]
        est.append(estimates)
        true.append([w @ G @ w - 2 * w @ b for w in ws])
        naive.append([w @ rel.xtx @ w - 2 * w @ rel.xty for w in ws])
    est, true, naive = map(np.array, (est, true, naive))
    se = (est - true).std(axis=0) / math.sqrt(len(est))
    assert np.all(np.abs((est - true).mean(axis=0)) < 4 * se)
    assert np.all(np.abs((naive - true).mean(axis=0)) > 10 * se)


def test_sure_ridge_is_post_processing_of_the_same_release():
    """ridge="sure" draws and releases exactly what "adaptive" does (same records, noise
    scales, statistics); its model is the ridge solution at the reported factor, the one of
    smallest criterion."""
    X, y = regression(n=400, p=4, scale=1.0)
    pb = dpopt.Problem(X, y, fit_intercept=True)
    for seed in range(5):
        ada = fit(pb, epsilon=1.0, random_state=seed)
        sure = fit(pb, epsilon=1.0, random_state=seed, ridge="sure")
        assert sure.mechanisms == ada.mechanisms and sure.params["sigmas"] == ada.params["sigmas"]
        np.testing.assert_array_equal(sure.release.xtx, ada.release.xtx)
        np.testing.assert_array_equal(sure.release.xty, ada.release.xty)
        assert ada.params["ridge_factor"] == 1.0 and ada.params["sure_estimates"] is None
        f, crit = sure.params["ridge_factor"], np.array(sure.params["sure_estimates"])
        assert f in A.SURE_FACTORS and crit[A.SURE_FACTORS.index(f)] == np.nanmin(crit)
        rel = sure.release
        features_only = np.diag([1.0, 1.0, 1.0, 1.0, 0.0])  # the intercept is not shrunk
        expected = np.linalg.solve(rel.xtx + f * rel.ridge * features_only, rel.xty)
        np.testing.assert_allclose(sure.w, expected, rtol=1e-8, atol=1e-10)


def test_sure_ridge_leaves_the_intercept_unshrunk():
    """With no signal and a mean far from 0, the paper's ridge pulls the intercept towards
    0 by about lambda / (n + lambda); the "sure" fit keeps it at the mean (up to its noise)."""
    rng = np.random.default_rng(4)
    n = 20000
    X = 0.05 * rng.standard_normal((n, 6))  # a small lambda_min: the ridge is not 0
    y = 0.8 + 0.05 * rng.standard_normal(n)
    pb = dpopt.Problem(X, y, fit_intercept=True)
    kw = {"epsilon": 0.1, "row_bound": 3.0, "target_bound": 1.0}
    for seed in range(3):
        ada = fit(pb, random_state=seed, **kw)
        sure = fit(pb, random_state=seed, ridge="sure", **kw)
        shrink = ada.params["ridge"] / (n + ada.params["ridge"])
        assert shrink > 0.1  # the setting where the bias matters: 0.8 * shrink > 0.08
        bias = 0.8 * shrink
        assert abs(sure.intercept - y.mean()) < bias / 2 < abs(ada.intercept - y.mean())


def test_sure_ridge_skips_factors_that_leave_the_matrix_indefinite():
    rel = A.Release(0.0, 4.0, np.diag([10.0, -3.0, 5.0]), np.ones(3))
    f, w, estimates = A.sure_ridge(rel, np.zeros(3), 1.0, 1.0, 1.0)
    # -3 + 4 f > 0 only for f = 1 (the next factor gives -1)
    assert f == 1.0 and np.isfinite(estimates[0]) and np.all(np.isnan(estimates[1:]))
    assert A.sure_ridge(A.Release(0.0, 0.0, -np.eye(2), np.ones(2)), np.zeros(2), 1.0, 1.0,
                        1.0) is None


def test_ridge_option_is_checked():
    X, y = regression(n=10, p=2)
    with pytest.raises(ValueError, match="ridge"):
        fit(dpopt.Problem(X, y), ridge="smallest")


def test_default_path_chooses_the_ridge_by_sure():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 4))
    y = X @ np.array([1.0, -1.0, 0.5, 0.0]) + rng.standard_normal(3000)
    model = dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(X, y)
    params = model.fit_result_.params
    assert model.auto_.plan["solver"] == "adassp" and params["ridge_rule"] == "sure"
    assert params["ridge_factor"] in A.SURE_FACTORS
    assert model.privacy_leaks_ == [] and model.epsilon_spent_ <= 1.0 * (1 + 1e-9)
    # no eigenvalue release under "sure": two records, step 2's ridge is t_rho itself
    assert params["budget_split"] == A.SURE_SPLIT and math.isinf(params["sigmas"][0])
    z = params["noise_multipliers"]
    records = model.fit_result_.mechanisms
    assert A.Gaussian(z[1]) in records and A.Gaussian(z[2]) in records
    assert params["ridge"] == pytest.approx(params["sigmas"][1] * A.eigen_tail(5, 0.05))
    # with intervals the release is kept: their validity check reads its lower bound
    kept = dpopt.DPLinearRegression(epsilon=1.0, inference=True, random_state=0).fit(X, y)
    params = kept.fit_result_.params
    assert params["budget_split"] == A.DEFAULT_SPLIT
    assert A.Gaussian(params["noise_multipliers"][0]) in kept.fit_result_.mechanisms


def test_without_the_eigenvalue_release_the_sure_grid_starts_at_t_rho():
    """Shares (0, 1/2, 1/2): sigma_1 = inf, lambda_min~ = 0, step 2's ridge = t_rho; the
    two statistics get mu^2 / 2 each (multipliers sqrt(2) / mu), and the release draws no
    eigenvalue noise (the first draw is the matrix's)."""
    X, y = regression(n=500, p=4, scale=1.0)
    pb = dpopt.Problem(X, y, fit_intercept=True)
    res = fit(pb, epsilon=1.0, row_bound=3.0, target_bound=4.0, ridge="sure",
              budget_split=A.SURE_SPLIT, random_state=3)
    p = res.params
    mu = 1.0 / res.noise_multiplier
    assert p["noise_multipliers"][0] == math.inf
    assert p["noise_multipliers"][1] == pytest.approx(math.sqrt(2.0) / mu)
    assert p["lambda_min_estimate"] == 0.0
    assert p["ridge"] == pytest.approx(p["sigmas"][1] * A.eigen_tail(5, 0.05))
    xtx, xty, _ = pb.sufficient_statistics(3.0, 4.0)
    noise = A.symmetric_noise(5, np.random.default_rng(3)) * p["sigmas"][1]
    np.testing.assert_allclose(res.release.xtx, xtx + noise, rtol=0, atol=1e-9)


def test_residual_sd_scales_the_mallows_term_and_is_post_processing():
    """``residual_sd`` (a public bound on the target's noise sd) replaces target_bound in
    the Mallows term only: same records and release; a smaller scale never picks a larger
    ridge factor (df falls with the ridge), and the criterion moves by 2 (s_B^2 - s^2) df."""
    X, y = regression(n=400, p=6, scale=1.0)
    pb = dpopt.Problem(X, y, fit_intercept=True)
    kw = {"epsilon": 2.0, "row_bound": 3.0, "target_bound": 4.0, "ridge": "sure"}
    smaller = 0
    for seed in range(6):
        wide = fit(pb, random_state=seed, **kw)
        tight = fit(pb, random_state=seed, residual_sd=0.5, **kw)
        assert tight.mechanisms == wide.mechanisms
        np.testing.assert_array_equal(tight.release.xty, wide.release.xty)
        assert tight.params["ridge_factor"] <= wide.params["ridge_factor"]
        smaller += tight.params["ridge_factor"] < wide.params["ridge_factor"]
        assert fit(pb, random_state=seed, residual_sd=9.0, **kw).params["ridge_factor"] == \
            wide.params["ridge_factor"]  # above target_bound: target_bound is the bound
    assert smaller >= 1
    with pytest.raises(ValueError, match="residual_sd"):
        fit(pb, random_state=0, residual_sd=-1.0, **kw)


def test_default_path_passes_the_released_target_spread():
    """The default path's second look at the target's range also bounds its spread
    (post-processing); AdaSSP takes it as residual_sd, and the plan records both."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((3000, 4))
    y = 50 + 10 * (X @ np.array([1.0, -1.0, 0.5, 0.0])) + 5 * rng.standard_normal(3000)
    model = dpopt.DPLinearRegression(epsilon=4.0, random_state=0).fit(X, y)
    plan = model.auto_.plan
    assert plan["solver"] == "adassp" and 0 < plan["target_spread"] <= 1
    assert plan["model_options"]["residual_sd"] == plan["target_spread"]
    t = model.auto_.target
    assert np.std(np.clip(t.transform(y), -1, 1)) <= plan["target_spread"]
