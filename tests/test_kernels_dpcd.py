"""Kernels behind DP-CD, DP-GD and DP-SGD: vectorized exp, dense == sparse, fused == plain."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import dpopt
from dpopt.kernels.cd import CDWork, cd_steps, cd_steps_accumulate, cd_steps_once
from dpopt.kernels.grad import (
    coordclip_gradient,
    full_gradient,
    l2clip_gradient,
    l2clip_weights,
    rows_gradient,
)
from dpopt.kernels.losses import LOGISTIC, SQUARED
from dpopt.kernels.prox import ProxArrays
from dpopt.kernels.sgd import sgd_steps
from dpopt.kernels.vecmath import vexp_array

LOSSES = [("squared", "l1"), ("logistic", "l2"), ("huber", "elastic_net"), ("absolute", "none"),
          ("squared", "box")]


def _pair(loss, penalty, n=80, p=7, seed=0, density=0.4):
    """The same problem stored dense and sparse."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * rng.uniform(0.1, 10, size=p)
    X[rng.random((n, p)) > density] = 0.0
    y = rng.standard_normal(n) * 3
    if loss == "logistic":
        y = np.where(y > 0, 1.0, -1.0)
    kw = dict(lower=-0.2, upper=0.3) if penalty == "box" else dict(alpha=0.05)
    dense = dpopt.Problem(X, y, loss=loss, penalty=penalty, **kw)
    sparse = dpopt.Problem(sp.csc_matrix(X), y, loss=loss, penalty=penalty, **kw)
    return dense, sparse


def _columns(prob):
    """The column kernels' data arguments: X (Fortran / CSC), y, loss code and parameter."""
    return prob.X, prob.y, prob.loss.code, prob.loss.param


def _rows(prob):
    """The row kernels' data arguments: X (C order / CSR), y, loss code and parameter."""
    return prob.X_rows, prob.y, prob.loss.code, prob.loss.param


def _work(prob, z):
    return CDWork(*_columns(prob), prob.penalty.arrays, z)


def test_vexp_accuracy():
    t = np.concatenate([np.linspace(-50, 50, 200001), np.linspace(-708, 708, 20001)])
    ref = np.exp(t)
    rel = np.abs(vexp_array(t) - ref) / ref
    assert rel[:200001].max() < 4e-16
    assert rel.max() < 3e-14
    assert np.all(np.isfinite(vexp_array(np.array([-1e308, 1e308, -np.inf, np.inf]))))


@pytest.mark.parametrize("loss,penalty", LOSSES)
def test_dense_and_sparse_cd_agree(loss, penalty):
    dense, sparse = _pair(loss, penalty)
    p = dense.dim
    rng = np.random.default_rng(1)
    M = dense.coordinate_smoothness()
    step = 0.9 / M
    clip = np.sqrt(M) * 2.0
    sigma = np.full(p, 0.01)
    wd, ws = dense.zeros(), sparse.zeros()
    zd, zs = dense.margins(wd), sparse.margins(ws)
    for _ in range(20):
        coords, noise = rng.integers(0, p, p), rng.standard_normal(p)
        cd_steps_once(*_columns(dense), dense.penalty.arrays, zd, wd, coords, noise, step, clip,
                      sigma)
        cd_steps_once(*_columns(sparse), sparse.penalty.arrays, zs, ws, coords, noise, step,
                      clip, sigma)
    scale = max(1.0, np.abs(wd).max())
    assert np.abs(wd - ws).max() <= 1e-12 * scale
    assert np.abs(zd - zs).max() <= 1e-12 * max(1.0, np.abs(zd).max())
    # the margins kept up to date match X w
    assert np.abs(zd - dense.margins(wd)).max() <= 1e-11 * max(1.0, np.abs(zd).max())


@pytest.mark.parametrize("loss,penalty", LOSSES)
@pytest.mark.parametrize("kind", [0, 1])
def test_work_carried_across_calls_is_one_long_call(loss, penalty, kind):
    """A CDWork carried over 3 calls gives the very iterate of one call with all the steps,
    and finish() restores the exact margins X w in the caller's array."""
    prob = _pair(loss, penalty, seed=6)[kind]
    p = prob.dim
    rng = np.random.default_rng(7)
    coords, noise = rng.integers(0, p, 3 * p), rng.standard_normal(3 * p)
    M = prob.coordinate_smoothness()
    args = (0.9 / M, np.sqrt(M), np.full(p, 0.01))
    w1 = prob.zeros()
    cd_steps_once(*_columns(prob), prob.penalty.arrays, prob.margins(w1), w1, coords, noise,
                  *args)
    w2, z2 = prob.zeros(), prob.margins(prob.zeros())
    work = _work(prob, z2)
    for k in range(3):
        cd_steps(work, w2, coords[k * p:(k + 1) * p], noise[k * p:(k + 1) * p], *args)
    assert np.array_equal(w1, w2)
    assert work.finish() is z2
    np.testing.assert_allclose(z2, prob.margins(w2), rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError, match="finished"):
        cd_steps(work, w2, coords, noise, *args)


@pytest.mark.parametrize("loss,penalty", LOSSES[:2])
def test_dense_and_sparse_accumulate_agree(loss, penalty):
    dense, sparse = _pair(loss, penalty, seed=2)
    p = dense.dim
    rng = np.random.default_rng(3)
    M = dense.coordinate_smoothness()
    coords, noise = rng.integers(0, p, 3 * p), rng.standard_normal(3 * p)
    weights = np.arange(3 * p, 0, -1).astype(float)
    out = []
    for prob in (dense, sparse):
        w, acc = prob.zeros(), np.zeros(p)
        work = _work(prob, prob.margins(w))
        cd_steps_accumulate(work, w, coords, noise, 1 / M, np.full(p, 1.0), np.full(p, 0.01), acc,
                            weights)
        work.finish()
        out.append((w, acc))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-12, atol=1e-13)
    with pytest.raises(ValueError, match="weights"):
        cd_steps_accumulate(_work(dense, dense.margins(w)), w, coords, noise, 1 / M, np.ones(p),
                            np.zeros(p), np.zeros(p), weights[:-1])


def test_large_dense_path_with_prefetch_matches_plain_loop():
    """Matrices above the prefetch threshold take the same arithmetic."""
    rng = np.random.default_rng(4)
    n, p = 1100, 500  # 550000 entries > 2**19
    X = rng.standard_normal((n, p))
    y = np.where(rng.standard_normal(n) > 0, 1.0, -1.0)
    prob = dpopt.Problem(X, y, loss="logistic", penalty="l1", alpha=0.001)
    coords = rng.integers(0, p, 40)
    noise = rng.standard_normal(40)
    M = prob.coordinate_smoothness()
    w, z = prob.zeros(), prob.margins(prob.zeros())
    cd_steps_once(*_columns(prob), prob.penalty.arrays, z, w, coords, noise, 1 / M,
                  np.full(p, 0.05), np.full(p, 1e-3))
    w2 = prob.zeros()
    for k, j in enumerate(coords):
        d = np.clip(prob.loss.deriv(X @ w2, y) * X[:, j], -0.05, 0.05).mean() + 1e-3 * noise[k]
        v = w2[j] - d / M[j]
        w2[j] = np.sign(v) * max(abs(v) - 0.001 / M[j], 0)
    np.testing.assert_allclose(w, w2, rtol=1e-10, atol=1e-14)


def test_kernels_take_raw_arrays_without_a_problem():
    """The entry points run on plain arrays (no Problem): a non-private cyclic pass from raw
    dense and CSC data, and the prox arrays as a plain tuple."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((40, 5))
    X[rng.random(X.shape) > 0.5] = 0.0
    y = rng.standard_normal(40)
    p = X.shape[1]
    prox = ProxArrays(np.full(p, 0.001), np.zeros(p), np.full(p, -np.inf), np.full(p, np.inf))
    args = (np.arange(p), np.zeros(p), np.full(p, 0.5), np.full(p, np.inf), np.zeros(p))
    wd, ws = np.zeros(p), np.zeros(p)
    zd, zs = np.zeros(40), np.zeros(40)
    cd_steps_once(np.asfortranarray(X), y, SQUARED, 0.0, prox, zd, wd, *args)
    cd_steps_once(sp.csc_matrix(X), y, SQUARED, 0.0, tuple(prox), zs, ws, *args)
    np.testing.assert_allclose(wd, ws, rtol=1e-12)
    np.testing.assert_allclose(zd, X @ wd, rtol=1e-12, atol=1e-14)
    assert np.any(wd != 0)


def test_l2_weights_of_tiny_gradients_are_unclipped_without_warnings():
    """A per-sample gradient of norm 1e-310 is left as is, with no overflow warning from the
    unused clip / scale (it failed the fresh-entropy tests of dp-svrg++ now and then)."""
    y, norms = np.array([0.0, 0.0, 1.0]), np.array([1e-300, 0.0, 2.0])
    z = np.array([1e-10, 0.5, 5.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        weights = l2clip_weights(y, norms, SQUARED, 0.0, z, 1.0)
    np.testing.assert_array_equal(weights, [1e-10, 0.5, 0.5])  # the last one 4 clipped to 1 / 2


def test_a_sparse_matrix_in_the_wrong_format_is_refused():
    dense, sparse = _pair("logistic", "l2", seed=5)
    z, clips = np.zeros(80), np.ones(dense.dim)
    with pytest.raises(ValueError, match="CSC"):
        coordclip_gradient(sparse.X_rows, sparse.y, LOGISTIC, 0.0, z, clips)
    with pytest.raises(ValueError, match="CSR"):
        full_gradient(sparse.X, sparse.y, LOGISTIC, 0.0, np.zeros(dense.dim), clips=clips)


@pytest.mark.parametrize("loss,penalty", LOSSES[:4])
@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_fused_gradient_matches_two_pass_gradient(loss, penalty, kind):
    dense, sparse = _pair(loss, penalty, seed=6)
    prob = dense if kind == "dense" else sparse
    rng = np.random.default_rng(7)
    w = rng.standard_normal(prob.dim) * 0.1
    z = prob.margins(w)
    for clip in (0.5, 5.0, np.inf):
        fused = full_gradient(*_rows(prob), w, clip=clip, row_norms=prob.row_norms)
        two_pass = l2clip_gradient(prob.X, prob.y, prob.row_norms, prob.loss.code,
                                   prob.loss.param, z, clip)
        np.testing.assert_allclose(fused, two_pass, rtol=1e-12, atol=1e-14)
    clips = rng.uniform(0.01, 2.0, prob.dim)
    np.testing.assert_allclose(full_gradient(*_rows(prob), w, clips=clips),
                               coordclip_gradient(*_columns(prob), z, clips), rtol=1e-12, atol=1e-14)
    # subsets of rows (DP-SGD batches), in any order and with repeats
    rows = np.array([5, 0, 3, 3, 79, 40, 41])
    Xd = np.asarray(dense.X)
    d = dense.loss.deriv(Xd[rows] @ w, dense.y[rows])
    per = d[:, None] * Xd[rows]
    norms = np.linalg.norm(per, axis=1)
    clipped = per * np.minimum(1.0, 0.5 / np.maximum(norms, 1e-300))[:, None]
    np.testing.assert_allclose(rows_gradient(*_rows(prob), w, rows, clip=0.5,
                                             row_norms=prob.row_norms), clipped.sum(axis=0),
                               rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="clip"):
        rows_gradient(*_rows(prob), w, rows)
    with pytest.raises(ValueError, match="row_norms"):
        rows_gradient(*_rows(prob), w, rows, clip=0.5)


def test_problem_keeps_one_row_major_copy():
    dense, sparse = _pair("squared", "l1", seed=8)
    a = dense.X_rows
    assert a is dense.X_rows and a.flags.c_contiguous
    np.testing.assert_array_equal(a, dense.X)
    assert sparse.X_rows.format == "csr"


def _sgd_data(prob):
    return prob.X_rows, prob.y, prob.row_norms, prob.loss.code, prob.loss.param, prob.penalty.arrays


@pytest.mark.parametrize("loss,penalty", LOSSES[:3])
def test_sgd_kernel_dense_and_sparse_agree(loss, penalty):
    dense, sparse = _pair(loss, penalty, seed=9)
    rng = np.random.default_rng(10)
    rows = np.sort(rng.choice(80, 30, replace=False))
    bounds = np.array([0, 10, 10, 22, 30])
    noise = rng.standard_normal((4, dense.dim))
    gamma = np.full(dense.dim, 0.05)
    out = []
    for prob in (dense, sparse):
        w = prob.zeros()
        sgd_steps(*_sgd_data(prob), w, rows, bounds, noise, gamma, 1.0, 0.1, 8)
        out.append(w)
    np.testing.assert_allclose(out[0], out[1], rtol=1e-12, atol=1e-14)
    # one step by hand
    w = dense.zeros()
    sgd_steps(*_sgd_data(dense), w, rows[:10], bounds[:2], noise[:1], gamma, 1.0, 0.1, 8)
    g = rows_gradient(*_rows(dense), dense.zeros(), rows[:10], clip=1.0, row_norms=dense.row_norms)
    v = -0.05 * (g + 0.1 * noise[0]) / 8
    np.testing.assert_allclose(w, dense.penalty.prox(v, 0.05), rtol=1e-12, atol=1e-15)
