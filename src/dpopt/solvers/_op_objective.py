"""Objective perturbation's perturbed objective F_b(w) = F(w) + b^T w / n + reg/2 ||w||^2 on
the clipped design, in memory (:class:`PerturbedObjective`: exact or sub-sampled Hessians,
products on one BLAS thread) and on chunks (:class:`ChunkedPerturbedObjective`: one
reduction of the Newton terms per point), and the clipped design it is defined on. What it
releases and why it is private: :mod:`dpopt.solvers.objective_perturbation`.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, cg
from threadpoolctl import ThreadpoolController

from dpopt.data.chunked import _design

DENSE_NEWTON_MAX_DIM = 500  # above: Newton-CG with Hessian-vector products


HESSIAN_ROWS = 1 << 16  # above: Newton directions from a sub-sampled Hessian (_op_minimize)


LOCAL_CONTRACTION = 0.25  # a full Newton step contracting ||grad|| less refines that Hessian


def feature_row_norms(problem):
    X = problem.X_csr if problem.is_sparse else problem.X
    F = X[:, :problem.n_features]
    if sp.issparse(F):
        return np.sqrt(np.asarray(F.multiply(F).sum(axis=1)).ravel())
    return np.sqrt(np.einsum("ij,ij->i", F, F))


def clip_feature_rows(problem, bound):
    """The design with every feature part rescaled to norm <= ``bound`` (the intercept
    column untouched): dense C-ordered or CSR; above ``HESSIAN_ROWS`` dense rows, X itself
    or a :class:`ClippedRows` view (no copy)."""
    norms = feature_row_norms(problem)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(norms > bound, bound / norms, 1.0)
    if problem.is_sparse:
        F = sp.diags(scale) @ problem.X_csr[:, :problem.n_features]
        if problem.fit_intercept:
            F = sp.hstack([F, np.ones((problem.n_samples, 1))])
        return sp.csr_matrix(F)
    if problem.n_samples > HESSIAN_ROWS:  # large: no copy of X (the problem's own layout)
        return problem.X if np.all(scale == 1.0) else \
            ClippedRows(problem.X, problem.n_features, scale)
    X = np.array(problem.X, order="C", dtype=np.float64)
    X[:, :problem.n_features] *= scale[:, None]
    return X


class ClippedRows:
    """The dense design X with every row's feature part multiplied by ``scale`` (the
    intercept column, if any, untouched), without a copy of X: what
    :class:`PerturbedObjective` needs of it, X_c @ w = scale * (F @ w_f) [+ w_b],
    X_c.T @ d = [F.T @ (scale * d) [, sum(d)]], and rows X_c[rows]."""

    def __init__(self, X, n_features, scale):
        self.X, self.p, self.scale = X, n_features, scale
        self.shape = X.shape
        self.T = _TransposedClippedRows(self)

    def toarray(self):
        """The clipped design as a dense C-ordered array (a copy)."""
        out = np.array(self.X, dtype=np.float64, order="C")
        out[:, :self.p] *= self.scale[:, None]
        return out

    def __matmul__(self, w):
        z = self.X[:, :self.p] @ w[:self.p]
        z *= self.scale
        if self.shape[1] > self.p:
            z += w[self.p]
        return z

    def __getitem__(self, rows):
        A = np.array(self.X[rows], dtype=np.float64)
        A[:, :self.p] *= self.scale[rows][:, None]
        return A


class _TransposedClippedRows:
    def __init__(self, design):
        self.design = design

    def __matmul__(self, d):
        design = self.design
        out = np.empty(design.shape[1])
        out[:design.p] = design.X[:, :design.p].T @ (design.scale * d)
        if design.shape[1] > design.p:
            out[design.p] = np.sum(d)
        return out


def clip_design_rows(X, n_features, bound):
    """Rescale, in place, the feature part of every row of the dense design ``X`` to
    norm <= ``bound`` (the chunk version of :func:`clip_feature_rows`: the same arithmetic
    row by row)."""
    F = X[:, :n_features]
    norms = np.sqrt(np.einsum("ij,ij->i", F, F))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(norms > bound, bound / norms, 1.0)
    F *= scale[:, None]
    return X


def hessian_sample_rows(dim) -> int:
    """The first sub-sampled Hessian's rows, m = max(4096, 32 d ln d): a sample of
    O(d log d / eps^2) rows gives a (1 +- eps) spectral approximation of a sum of
    bounded-leverage rank-one terms (matrix Chernoff; Tropp, Found. Comput. Math. 2012), here
    eps ~ 1/2; refined by doubling when Newton's local contraction says it is too coarse."""
    return max(4096, math.ceil(32 * dim * math.log(max(dim, 2))))


class PerturbedObjective:
    """F_b(w) = mean_i l(x_i^T w; y_i) + (1/2) sum_j reg_j w_j^2 + lin^T w.

    Newton directions: the exact dense Hessian up to ``HESSIAN_ROWS`` rows (and
    ``DENSE_NEWTON_MAX_DIM`` columns); on more rows, the Hessian of every ``stride``-th row
    (about :func:`hessian_sample_rows` rows at first; public positions), halving ``stride`` on
    :meth:`refine_hessian`; above ``DENSE_NEWTON_MAX_DIM`` columns, conjugate gradients on
    Hessian-vector products X^T (D (X v))."""

    def __init__(self, X, y, loss, reg, lin):
        self.X, self.y, self.loss, self.reg, self.lin = X, y, loss, reg, lin
        self.n = X.shape[0]
        self.stride = 1 if self.n <= HESSIAN_ROWS else max(1, self.n // hessian_sample_rows(
            X.shape[1]))
        self._rows = None  # (stride, the rows X[::stride]) of the last sampled Hessian
        self._hessian, self._keep = None, False  # the last sampled Hessian; reuse it next?

    def margins(self, w):
        return np.asarray(self.X @ w).ravel()

    def value(self, w, z=None):
        z = self.margins(w) if z is None else z
        return float(np.mean(self.loss.value(z, self.y)) + 0.5 * np.dot(self.reg * w, w)
                     + np.dot(self.lin, w))

    def gradient(self, w, z=None):
        z = self.margins(w) if z is None else z
        d = self.loss.deriv(z, self.y)
        return np.asarray(self.X.T @ d).ravel() / self.n + self.reg * w + self.lin

    evaluate = margins  # what newton() computes once per point: here the margins X w

    def contraction(self, ratio):
        """After a full Newton step that multiplied ||grad|| by ``ratio`` (sampled Hessians
        only): below LOCAL_CONTRACTION keep the Hessian for the next step (a chord step: near
        the minimiser it hardly changes), else refine it (twice the rows)."""
        if self.n <= HESSIAN_ROWS:  # the exact Hessian: nothing to refine or keep
            return
        self._keep = ratio <= LOCAL_CONTRACTION
        if not self._keep:
            self.refine_hessian()

    def refine_hessian(self):
        self.stride = max(1, self.stride // 2)

    def newton_direction(self, w, g, z):
        dim = w.shape[0]
        if dim > DENSE_NEWTON_MAX_DIM:
            h = loss_curvature(self.loss, z, self.y) / self.n
            op = LinearOperator((dim, dim), dtype=np.float64, matvec=lambda v: np.asarray(
                self.X.T @ (h * np.asarray(self.X @ v).ravel())).ravel() + self.reg * v)
            return cg(op, g, rtol=1e-10, maxiter=10 * dim)[0]
        with single_threaded_blas():
            if self.n <= HESSIAN_ROWS:
                h = loss_curvature(self.loss, z, self.y) / self.n
                H = self.X.T @ (sp.diags(h) @ self.X) if sp.issparse(self.X) else \
                    self.X.T @ (h[:, None] * self.X)
                H = np.asarray(H.toarray() if sp.issparse(H) else H)
            elif self._keep and self._hessian is not None:
                H = self._hessian
            else:
                H = self._hessian = self.sampled_hessian(z)
        return solve_newton_system(H, self.reg, g)

    def sampled_hessian(self, z):
        """(1/m) sum over the rows i = 0, stride, 2 stride, ... of l''(z_i) x_i x_i^T (m rows),
        as one symmetric rank-m product (BLAS syrk); the exact data Hessian at stride 1."""
        step = self.stride
        root = np.sqrt(loss_curvature(self.loss, z[::step], self.y[::step]) / len(z[::step]))
        if sp.issparse(self.X):
            A = sp.diags(root) @ self.X[::step]
            return np.asarray((A.T @ A).toarray())
        if self._rows is None or self._rows[0] != step:  # gathered once per stride
            self._rows = (step, np.asfortranarray(self.X[::step]))
        A = self._rows[1] * root[:, None]
        return A.T @ A


@functools.cache
def _blas_controller():
    return ThreadpoolController()


def single_threaded_blas():
    """A context with BLAS on one thread: the d x d Hessian products are small (at most
    HESSIAN_ROWS d^2 flops), and threaded level-3 BLAS busy-waits when the cores are shared
    (measured 8x slower on a loaded 2-core machine); one thread also makes the product
    independent of the machine's thread count (bit for bit)."""
    return _blas_controller().limit(limits=1, user_api="blas")


def solve_newton_system(hessian_loss, reg, g):
    """The Newton direction H^{-1} g with H = ``hessian_loss`` + diag(reg) (a tiny relative
    jitter on the diagonal; least squares if H is numerically singular)."""
    H = hessian_loss + np.diag(reg)
    H[np.diag_indices(len(reg))] += 1e-14 * max(float(np.max(np.diag(H))), 1e-300)
    try:
        return scipy.linalg.solve(H, g, assume_a="pos")
    except (np.linalg.LinAlgError, ValueError):
        return np.linalg.lstsq(H, g, rcond=None)[0]


def chunk_newton_terms(xb, yb, *, w, loss, fit_intercept, bound):
    """One chunk's share of F_b's data term at w (a task on a worker): its rows clipped
    as in memory (feature part to norm <= ``bound``), then [sum_i l(z_i), sum_i l'(z_i) x_i,
    sum_i l''(z_i) x_i x_i^T (flattened)] with z = X w; a (1, 1 + d + d^2) row."""
    X = clip_design_rows(_design(xb, fit_intercept), xb.shape[1], bound)
    y = np.asarray(yb[:, 0], dtype=np.float64)
    z = X @ w
    hess = X.T @ (loss_curvature(loss, z, y)[:, None] * X)
    return np.concatenate([[np.sum(loss.value(z, y))], X.T @ loss.deriv(z, y),
                           hess.ravel()])[None, :]


def chunk_gradient_terms(xb, yb, *, w, loss, fit_intercept, bound):
    """:func:`chunk_newton_terms` without the Hessian: [sum_i l(z_i), sum_i l'(z_i) x_i], a
    (1, 1 + d) row (the first-order points of the fallback, _op_minimize)."""
    X = clip_design_rows(_design(xb, fit_intercept), xb.shape[1], bound)
    y = np.asarray(yb[:, 0], dtype=np.float64)
    z = X @ w
    return np.concatenate([[np.sum(loss.value(z, y))], X.T @ loss.deriv(z, y)])[None, :]


class ChunkedPoint:
    """F_b's data term at one w, summed over the chunks: (1/n) sum of losses, gradient and
    Hessian (what :func:`newton` needs at a point)."""

    def __init__(self, totals, dim, n):
        self.loss = float(totals[0]) / n
        self.gradient = totals[1:1 + dim] / n
        self.hessian = totals[1 + dim:].reshape(dim, dim) / n if len(totals) > 1 + dim else None


class ChunkedPerturbedObjective:
    """F_b(w) on a :class:`dpopt.data.chunked.ChunkedProblem`: the same function as
    :class:`PerturbedObjective`, each point costing one cluster-wide reduction of a
    (1 + d + d^2)-vector (:func:`chunk_newton_terms`, summed by Dask's tree); the Newton
    system (d x d) is solved on the client."""

    def __init__(self, problem, bound, reg, lin):
        self.problem, self.bound, self.reg, self.lin = problem, bound, reg, lin

    def evaluate(self, w, terms=chunk_newton_terms):
        d = self.problem.dim
        width = 1 + d + (d * d if terms is chunk_newton_terms else 0)
        totals = self.problem._reduce(terms, width, w=np.ascontiguousarray(w, dtype=np.float64),
                                      loss=self.problem.loss,
                                      fit_intercept=self.problem.fit_intercept, bound=self.bound)
        return ChunkedPoint(totals, d, self.problem.n_samples)

    def evaluate_first_order(self, w):
        """Loss and gradient only: a (1 + d)-vector reduction (the fallback's points)."""
        return self.evaluate(w, chunk_gradient_terms)

    def value(self, w, point):
        return float(point.loss + 0.5 * np.dot(self.reg * w, w) + np.dot(self.lin, w))

    def gradient(self, w, point):
        return point.gradient + self.reg * w + self.lin

    def newton_direction(self, w, g, point):
        return solve_newton_system(point.hessian, self.reg, g)


def loss_curvature(loss, z, y):
    """l''(z; y) (Huber: 1 inside the quadratic zone, 0 outside)."""
    if loss.name == "logistic":
        s = -y * loss.deriv(z, y)  # 1 / (1 + e^{yz})
        return s * (1.0 - s)
    return (np.abs(z - y) <= loss.param).astype(np.float64)
