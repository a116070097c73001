"""The ERM problem F(w) = (1/n) sum_i l(x_i^T w; y_i) + psi(w)."""

from __future__ import annotations

import copy
import functools
import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import svds

from dpopt._core.validation import MAX_MAGNITUDE, check_bool
from dpopt.data.losses import Loss, get_loss
from dpopt.data.penalties import Penalty, get_penalty
from dpopt.data.statistics import row_sq_norms, sufficient_statistics
from dpopt.data.steps import GeneratorPoissonBatches, MarginBlockSteps
from dpopt.kernels.design import (
    block_rows,
    copy_rows_to_fortran,
    magnitude_stats,
)
from dpopt.kernels.grad import full_gradient
from dpopt.kernels.sgd import sgd_steps


class Problem:
    """A regularized linear ERM problem, stored the way the kernels want it.

    Parameters
    ----------
    X : array-like or scipy.sparse matrix, shape (n, p)
        Numeric features (bool, int, float). Dense data is stored as a
        Fortran-ordered float64 array (a column is contiguous), sparse data
        as float64 CSC with sorted indices (and CSR on demand for row access).
    y : array-like, shape (n,)
    loss : str or Loss
        ``"squared"``, ``"logistic"`` (y in {-1, +1}), ``"huber"`` or ``"absolute"``.
    penalty : str, Penalty or None
        ``"none"``, ``"l1"``, ``"l2"``, ``"elastic_net"``, ``"box"``,
        ``"non_negative"`` (with ``alpha``, ``l1_ratio``, ``lower``, ``upper``
        passed as keywords) or a :class:`~dpopt.data.Penalty`.
    fit_intercept : bool
        Append a constant column of ones, left unpenalized. The solver then
        works in dimension ``p + 1`` and :meth:`unpack` splits the result.
    zero_tiny : bool
        Set the entries of X and y below 1e-150 in magnitude (whose squares underflow) to 0
        instead of refusing them. For data the library maps itself after private releases
        (the default path's scaled design, :class:`dpopt.pipeline.scaling.InMemoryData`):
        a refusal there would depend on one record after its releases, while zeroing is a
        per-record map that moves a value by less than 1e-150. User data is refused
        (default False).

    Notes
    -----
    ``X`` and ``y`` are the private data. Methods that return quantities
    computed from them (smoothness constants, norms) compute them exactly and
    without privacy; a solver that uses them must pay for them or warn
    (docs/design.md invariant 4).
    """

    is_chunked = False  # see dpopt.data.chunked.ChunkedProblem

    def __init__(self, X, y, loss="squared", penalty=None, *, alpha=None, fit_intercept=False,
                 zero_tiny=False, **penalty_kwargs):
        self.loss: Loss = get_loss(loss)
        zero_tiny = check_bool(zero_tiny, "zero_tiny")
        X = _check_X(X, zero_tiny)
        y = _check_y(y, X.shape[0], zero_tiny)
        self.loss.check_labels(y)
        self.fit_intercept = check_bool(fit_intercept, "fit_intercept")
        self.n_samples, self.n_features = X.shape
        self.is_sparse = sp.issparse(X)
        if self.is_sparse:
            if self.fit_intercept:
                X = sp.hstack([X, np.ones((X.shape[0], 1))], format="csc")
            X = sp.csc_matrix(X, dtype=np.float64)
            X.sort_indices()
            X.eliminate_zeros()
        else:
            X = _dense_design(X, self.fit_intercept, zero_tiny)
        self.X = X
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.dim = X.shape[1]
        self.penalty: Penalty = get_penalty(penalty, alpha, **penalty_kwargs).for_dimension(
            self.dim, unpenalized_last=self.fit_intercept)

    # -- data access -------------------------------------------------------
    @functools.cached_property
    def X_csr(self):
        """The features as CSR (row access), for sparse problems."""
        if not self.is_sparse:
            raise ValueError("X_csr is only available for sparse problems")
        out = self.X.tocsr()
        out.sort_indices()
        return out

    @functools.cached_property
    def X_rows(self):
        """The features with contiguous rows, for the row-wise solvers (DP-GD, DP-SGD,
        DP-SVRG): CSR for sparse data, a C-ordered copy for dense data (whose own
        Fortran order is made for the column-wise ones). Built once per problem."""
        return self.X_csr if self.is_sparse else np.ascontiguousarray(self.X)

    @functools.cached_property
    def column_sq_norms(self) -> np.ndarray:
        """||X[:, j]||^2 for every column (non-private)."""
        if self.is_sparse:
            return np.asarray(self.X.multiply(self.X).sum(axis=0)).ravel()
        return np.einsum("ij,ij->j", self.X, self.X)

    @functools.cached_property
    def row_norms(self) -> np.ndarray:
        """||x_i|| for every row (non-private)."""
        return np.sqrt(row_sq_norms(self.X))

    def unpack(self, w):
        """Split a solver vector into ``(coef, intercept)``."""
        w = np.asarray(w, dtype=np.float64)
        if self.fit_intercept:
            return w[:-1].copy(), float(w[-1])
        return w.copy(), 0.0

    def zeros(self):
        return np.zeros(self.dim)

    # -- objective ---------------------------------------------------------
    def margins(self, w):
        """X w."""
        return np.asarray(self.X @ np.asarray(w, dtype=np.float64)).ravel()

    def mean_of(self, func, w):
        """(1/n) sum_i func(x_i^T w, y_i) (``func`` vectorised; :class:`ChunkedProblem` has
        the same, one pass)."""
        return float(np.mean(func(self.margins(w), self.y)))

    def smooth_objective(self, w, margins=None):
        """f(w) = (1/n) sum_i l(x_i^T w; y_i)."""
        z = self.margins(w) if margins is None else margins
        return float(np.mean(self.loss.value(z, self.y)))

    def objective(self, w, margins=None):
        """F(w) = f(w) + psi(w) (``inf`` outside a box constraint)."""
        return self.smooth_objective(w, margins) + self.penalty.value(np.asarray(w, dtype=np.float64))

    def gradient(self, w, margins=None):
        """Gradient of f (a subgradient for the absolute loss)."""
        z = self.margins(w) if margins is None else margins
        d = self.loss.deriv(z, self.y)
        return np.asarray(self.X.T @ d).ravel() / self.n_samples

    # -- the statistics a solver reads (the protocol ChunkedProblem shares) --
    @property
    def features(self):
        """The feature block of X (the intercept column removed)."""
        return self.X[:, :-1] if self.fit_intercept else self.X

    def clipped_gradient(self, w, *, clip=None, clips=None):
        """(1/n) sum_i of the per-sample gradients at ``w``, each clipped to L2 norm ``clip``
        or coordinate-wise to ``clips`` (one pass; non-private)."""
        norms = self.row_norms if clip is not None else None  # L2 clipping only
        return full_gradient(self.X_rows, self.y, self.loss.code, self.loss.param, w,
                             row_norms=norms, clip=clip, clips=clips)

    def sufficient_statistics(self, row_bound, target_bound):
        """AdaSSP's clipped (X_c^T X_c, X_c^T y_c, n) (:func:`dpopt.data.statistics.
        sufficient_statistics`; non-private)."""
        return sufficient_statistics(self.features, self.y, row_bound, target_bound,
                                     self.fit_intercept)

    def max_row_norm(self) -> float:
        """max_i ||x_i|| of the features (non-private), each row summed in column order
        (sparse: over CSR rows, as the chunked reduction and objective perturbation's row
        clipping compute it)."""
        F = self.X_csr[:, :self.n_features] if self.is_sparse else self.features
        return math.sqrt(float(np.max(row_sq_norms(F))))

    def max_abs_target(self) -> float:
        """max_i |y_i| (non-private)."""
        return np.max(np.abs(self.y))

    def max_row_nnz(self) -> int:
        """omega: the most non-zeros in a row of X (p for dense data, public)."""
        return int(np.diff(self.X_csr.indptr).max()) if self.is_sparse else self.dim

    # -- the solvers' steps (dpopt.data.steps: the same methods on ChunkedProblem) --
    #: a block coordinate step updates the margins incrementally (no read of every row)
    block_step_reads_all_rows = False

    def poisson_sampler(self, rng, rate) -> GeneratorPoissonBatches:
        """DP-SGD's Poisson batches at ``rate``, drawn from ``rng`` a pass at a time."""
        return GeneratorPoissonBatches(rng, self.n_samples, rate)

    def proximal_sgd_steps(self, w, batches, noise, *, gammas, clip, sigma, batch_size):
        """``len(noise)`` proximal DP-SGD steps over ``batches`` (of :meth:`poisson_sampler`),
        w <- prox(w - gammas (sum_{i in B_s} clip_C(grad_i) + sigma noise_s) / batch_size),
        in place in one compiled call (:func:`dpopt.kernels.sgd.sgd_steps`); returns w."""
        rows, bounds = batches
        sgd_steps(self.X_rows, self.y, self.row_norms, self.loss.code, self.loss.param,
                  self.penalty.arrays, w, rows, bounds, noise, gammas, clip, sigma, batch_size)
        return w

    def block_steps(self, w) -> MarginBlockSteps:
        """DP-RBCD's passes of block steps from ``w``, the margins kept up to date."""
        return MarginBlockSteps(self, w)

    # -- smoothness --------------------------------------------------------
    def coordinate_smoothness(self) -> np.ndarray:
        """M_j = c ||X[:, j]||^2 / n, with c the loss's curvature bound (non-private)."""
        return self.loss.curvature * self.column_sq_norms / self.n_samples

    def global_smoothness(self) -> float:
        """beta = c ||X||_2^2 / n, the smoothness of f (non-private)."""
        return self.loss.curvature * self._spectral_norm_sq / self.n_samples

    @functools.cached_property
    def _spectral_norm_sq(self) -> float:
        return _spectral_norm_sq(self.X)

    def __repr__(self):
        kind = "sparse" if self.is_sparse else "dense"
        return (f"Problem(n={self.n_samples}, p={self.n_features}, {kind}, loss={self.loss.name}, "
                f"penalty={self.penalty.name}(alpha={self.penalty.alpha:g}), "
                f"fit_intercept={self.fit_intercept})")


def with_loss(problem, loss):
    """The same records (in memory or chunked: the design is shared, not copied) with
    another loss; the labels must suit it (a regression loss for a regression problem)."""
    out = copy.copy(problem)
    out.loss = get_loss(loss)
    return out


def _spectral_norm_sq(X) -> float:
    n, p = X.shape
    if min(n, p) <= 2000:
        # small side: exact, dense or sparse (ARPACK failed on tiny or all-zero sparse
        # matrices: "Starting vector is zero", k >= min(shape))
        gram = X.T @ X if p <= n else X @ X.T
        gram = gram.toarray() if sp.issparse(gram) else gram
        return max(float(np.linalg.eigvalsh(gram)[-1]), 0.0)
    if sp.issparse(X) and X.nnz == 0:
        return 0.0

    s = svds(sp.csc_matrix(X), k=1, return_singular_vectors=False, random_state=0, tol=1e-10)
    return float(s[0] ** 2)


_NUMERIC_KINDS = "biuf"


def _check_X(X, zero_tiny=False):
    if sp.issparse(X):
        if X.dtype.kind not in _NUMERIC_KINDS:
            raise ValueError(f"X must have a numeric dtype (bool, int, float), got {X.dtype}")
        if X.ndim != 2:
            raise ValueError("X must be 2-dimensional")
        # convert to float64 first: summing duplicate COO entries in a small integer dtype
        # would wrap around silently (two int8 entries 100 + 100 became -56)
        data = X.astype(np.float64).tocsc(copy=True)
        if not np.all(np.isfinite(data.data)):
            raise ValueError("X contains NaN or infinity")
        _check_shape(data.shape)
        if zero_tiny:
            _zero_tiny(data.data)
        _check_magnitude(data.data, "X")
        return data
    if np.ma.isMaskedArray(X):
        raise ValueError("X must not be a masked array (its mask would be ignored)")
    try:
        arr = np.asarray(X)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"X could not be read as an array: {exc}") from None
    if arr.dtype.kind not in _NUMERIC_KINDS:
        raise ValueError(f"X must have a numeric dtype (bool, int, float), got {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"X must be 2-dimensional, got shape {arr.shape}")
    _check_shape(arr.shape)
    return arr  # values checked by _dense_design, during its copy


# Tiles of the dense copy: 2048 rows x 64 columns (1 MiB of float64) stay in cache between
# the copy and the checks, and read C-ordered input 512 contiguous bytes at a time.
_TILE_ROWS, _TILE_COLS = 2048, 64


def _dense_design(arr, fit_intercept, zero_tiny=False):
    """The kernels' dense design: Fortran-ordered float64, a last column of ones with an
    intercept, finite entries within the magnitude limits (``_check_magnitude``; with
    ``zero_tiny``, entries below the lower limit are set to 0 in the design instead, by
    :func:`_tiny_zeroed` on the slow path that a failed check takes).

    One pass over X: the copy (skipped for a Fortran float64 X without intercept, which is
    used as is) goes tile by tile and each tile is checked while in cache, instead of
    separate passes for isfinite, abs, the non-zero minimum, hstack and asfortranarray.
    """
    n, p = arr.shape
    prepared = _prepared_design(arr, zero_tiny) if fit_intercept else None
    if prepared is not None:
        return prepared
    if not fit_intercept and arr.dtype == np.float64 and arr.flags.f_contiguous:
        out = arr
    elif arr.dtype == np.float64 and (arr.flags.c_contiguous or arr.flags.f_contiguous):
        return _compiled_design(arr, fit_intercept, zero_tiny)
    else:
        out = np.empty((n, p + int(bool(fit_intercept))), order="F")
        if fit_intercept:
            out[:, p] = 1.0
    buf = np.empty((min(n, _TILE_ROWS), min(p, _TILE_COLS)), order="F")
    for j0 in range(0, p, _TILE_COLS):
        j1 = min(j0 + _TILE_COLS, p)
        for i0 in range(0, n, _TILE_ROWS):
            tile = out[i0:i0 + _TILE_ROWS, j0:j1]
            if out is not arr:
                tile[...] = arr[i0:i0 + _TILE_ROWS, j0:j1]
            a = np.abs(tile, out=buf[:tile.shape[0], :tile.shape[1]])
            if not a.max() <= _MAX_ABS:  # also NaN
                _report_bad_values(out[:, :p])
            # the smallest non-zero magnitude; the mask only when the tile has zeros
            if a.min() < _MIN_ABS and np.min(a, where=a > 0, initial=np.inf) < _MIN_ABS:
                if not zero_tiny:
                    _report_bad_values(out[:, :p])
                if out is arr:  # the caller's array: zeroed in a copy
                    out = arr = np.array(arr, order="F")
                _zero_tiny(out[i0:i0 + _TILE_ROWS, j0:j1])
    return out


def _prepared_design(arr, zero_tiny=False):
    """The design of ``arr`` with an intercept, without a copy, when ``arr`` is the first p
    columns of a Fortran-ordered float64 (n, p + 1) array whose last column is all ones
    (what :meth:`dpopt.preprocessing.feature_maps.Scaling.design` returns): that array,
    after the magnitude checks of ``arr``. None otherwise."""
    base = arr.base
    n, p = arr.shape
    if not (isinstance(base, np.ndarray) and arr.dtype == np.float64
            and base.dtype == np.float64 and arr.flags.f_contiguous and base.flags.f_contiguous
            and base.shape == (n, p + 1) and base.ctypes.data == arr.ctypes.data
            and np.all(base[:, p] == 1.0)):
        return None
    big, small, nans = magnitude_stats(arr)
    if nans or not big <= _MAX_ABS or small < _MIN_ABS:
        _tiny_zeroed(arr, zero_tiny, nans, big)
    return base


def _compiled_design(arr, fit_intercept, zero_tiny=False):
    """:func:`_dense_design` of a contiguous float64 array by one compiled pass
    (:mod:`dpopt.kernels.design`: the copy and the magnitude checks together)."""
    n, p = arr.shape
    out = np.empty((n, p + int(bool(fit_intercept))), order="F")
    if arr.flags.c_contiguous:
        big, small, nans = copy_rows_to_fortran(arr, out, block_rows(p))
    else:
        big, small, nans = copy_rows_to_fortran(arr, out, max(arr.shape[0], 1))
    if fit_intercept:
        out[:, p] = 1.0
    if nans or not big <= _MAX_ABS or small < _MIN_ABS:
        _tiny_zeroed(out[:, :p], zero_tiny, nans, big)
    return out


def _tiny_zeroed(X, zero_tiny, nans, big):
    """The slow path of a failed magnitude check of the design ``X`` (a view, zeroed in
    place): entries below the lower limit set to 0 when only they failed it and
    ``zero_tiny`` is set; else the error of :func:`_report_bad_values`."""
    if not zero_tiny or nans or not big <= _MAX_ABS:
        _report_bad_values(X)
    _zero_tiny(X)


def _zero_tiny(values):
    """Set the entries of ``values`` whose magnitude is below ``_MIN_ABS`` to 0, in place."""
    values[np.abs(values) < _MIN_ABS] = 0.0


def _report_bad_values(X):
    """The error for non-finite or out-of-range entries (slow path, only on failure)."""
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinity")
    _check_magnitude(X, "X")
    raise RuntimeError("_dense_design flagged a value that _check_magnitude accepts (a dpopt bug)")


# Squares of the data (norms, smoothness constants, the squared loss) must stay finite and
# non-zero: beyond this magnitude sums of squares overflow to inf (and NaN step sizes),
# below it squares underflow to 0 (a non-zero column would look empty).
_MAX_ABS, _MIN_ABS = MAX_MAGNITUDE, 1e-150


def _check_magnitude(values, name):
    """A ValueError naming ``name`` when an entry is beyond the magnitude limits. The message
    states the limit, not the data's extreme value: an error text is read by whoever sees
    the logs, and a record's value is not the library's to print."""
    a = np.abs(values)
    if a.size and a.max() > _MAX_ABS:
        raise ValueError(f"{name} has entries beyond {_MAX_ABS:g} in magnitude: squares and "
                         f"norms would overflow; rescale {name} (|values| <= {_MAX_ABS:g})")
    nonzero = a[a > 0]
    if nonzero.size and nonzero.min() < _MIN_ABS:
        raise ValueError(f"{name} has non-zero entries below {_MIN_ABS:g} in magnitude: their "
                         f"squares underflow to 0; rescale {name} (|values| >= {_MIN_ABS:g} or 0)")


def _check_shape(shape):
    if shape[0] < 1 or shape[1] < 1:
        raise ValueError(f"X must have at least one sample and one feature, got shape {shape}")


def _check_y(y, n, zero_tiny=False):
    if sp.issparse(y):
        raise ValueError("y must be a dense 1-dimensional array, got a sparse matrix")
    if np.ma.isMaskedArray(y):
        raise ValueError("y must not be a masked array (its mask would be ignored)")
    try:
        arr = np.asarray(y)
    except Exception as exc:
        raise ValueError(f"y could not be read as an array: {exc}") from None
    if arr.dtype.kind not in _NUMERIC_KINDS:
        raise ValueError(f"y must have a numeric dtype, got {arr.dtype}")
    if arr.ndim != 1:
        raise ValueError(f"y must be 1-dimensional, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"X and y have inconsistent numbers of samples: {n} and {arr.shape[0]}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("y contains NaN or infinity")
    if zero_tiny:
        _zero_tiny(arr)
    _check_magnitude(arr, "y")
    return arr
