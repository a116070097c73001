"""Proximal coordinate-descent steps with per-sample coordinate clipping.

One step on coordinate j (DP-CD paper, Algorithm 1 line 7 with the clipped
gradient of Section 5.1):

    g_j   = (1/n) sum_i clip(l'(z_i; y_i) x_ij, c_j) + sigma_j * noise_k
    w_j  <- prox_{step_j psi_j}(w_j - step_j g_j)
    z    <- z + (w_j_new - w_j_old) X[:, j]          (margins kept up to date)

The coordinates and standard-normal draws are passed in (drawn by the solver
from its Generator), so the kernel is deterministic. With clip = inf and
sigma = 0 this is plain (non-private) proximal coordinate descent.
Cost: O(n) per dense step, O(nnz of column j) per sparse step.

Speed (see ``benchmarks/bench_dpcd.py``). The dense kernel fuses the margin
update of step k into the gradient loop of step k + 1 (one sweep over z per
step instead of two), the squared and logistic losses have branch-free inner
loops that LLVM vectorizes (the logistic one with the arithmetic ``vexp`` of
:mod:`dpopt.kernels.vecmath`), and the sums are re-associated (fast-math
``reassoc``, never ``nnan``/``ninf``): each term is clipped exactly as
written, only the rounding of the sum of clipped terms depends on the
vectorization. Results are deterministic for a given machine and input, but
are not bit-identical to a naive sequential loop.

Set-up between calls. The kernels keep the margins in a working form (residuals for least
squares, (margin, label) pairs for sparse logistic, one deferred dense update); a
:class:`CDWork` carries that form from one call of :func:`cd_steps` to the next, so a solver
that runs one call per pass pays for the set-up once, not once per pass (3 extra sweeps over
n per pass for least squares, 1 for dense logistic: 27% and 11% of a pass when p = 8).

Averaging. :func:`cd_steps_accumulate` also adds ``weights[k] * (w_j_new -
w_j_old)`` to ``acc[j]`` at step k; with weights[k] = K - m + 1 for the m-th
step of an inner loop of K steps, ``w_start + acc / K`` is the average of the
K iterates of that loop (Algorithm 1, line 9) at O(1) extra cost per step.

Numba's on-disk cache does not notice edits of inlined helpers from other files
(``prox_scalar``, ``loss_deriv``): clear ``__pycache__`` after changing them.
Last such change: vexp (kernels/vecmath.py) uses degree 12 and add-and-subtract rounding.
"""

import numpy as np
from numba import njit

from dpopt.kernels.grad import csc_arrays, is_sparse
from dpopt.kernels.losses import LOGISTIC, SQUARED, loss_deriv
from dpopt.kernels.prox import prox_scalar
from dpopt.kernels.vecmath import FASTMATH, logistic_deriv, prefetch1d, prefetch2d

_OPTS = dict(cache=True, nogil=True, fastmath=FASTMATH, error_model="numpy")


_LINE = 8  # float64 per 64-byte cache line
_PREFETCH_ABOVE = 1 << 19  # prefetch columns when X has more entries (4 MB) than this


@njit(inline="always", **_OPTS)
def _fused_dense(X, y, z, code, param, jp, dp, j, cj):
    """z += dp * X[:, jp], then return sum_i clip(l'(z_i; y_i) X[i, j], cj)."""
    n = X.shape[0]
    g = 0.0
    if code == SQUARED:  # z holds the residuals z - y here (see _cd_dense)
        for i in range(n):
            ri = z[i] + dp * X[i, jp]
            z[i] = ri
            g += min(max(ri * X[i, j], -cj), cj)
    elif code == LOGISTIC:
        for i in range(n):
            zi = z[i] + dp * X[i, jp]
            z[i] = zi
            g += min(max(logistic_deriv(zi, y[i]) * X[i, j], -cj), cj)
    else:
        for i in range(n):
            zi = z[i] + dp * X[i, jp]
            z[i] = zi
            g += min(max(loss_deriv(code, zi, y[i], param) * X[i, j], -cj), cj)
    return g


@njit(**_OPTS)
def _cd_dense(X, y, z, w, code, param, coords, noise, step, clip, sigma, l1, l2, lo, up, acc,
              weights, pending):
    """Dense steps on the working margins ``z`` (residuals z - y for least squares).

    ``pending = [j, d]`` is a margin update z += d X[:, j] not applied yet: it is fused
    into the first sweep of this call, and this call's own last update is left in
    ``pending`` (:func:`_flush_dense` applies it).
    """
    n = X.shape[0]
    prefetch = X.shape[0] * X.shape[1] > _PREFETCH_ABOVE
    accumulate = acc.shape[0] > 0
    jp = np.int64(pending[0])
    dp = pending[1]
    last = coords.shape[0] - 1
    for k in range(coords.shape[0]):
        j = coords[k]
        if dp == 0.0:
            jp = j  # nothing pending: read only column j
        g = _fused_dense(X, y, z, code, param, jp, dp, j, clip[j])
        if prefetch and k < last:
            # the coordinates are random, so the hardware cannot guess the next column
            for i in range(0, n, _LINE):
                prefetch2d(X, i, coords[k + 1])
        g = g / n + sigma[j] * noise[k]
        old = w[j]
        new = prox_scalar(old - step[j] * g, step[j], l1[j], l2[j], lo[j], up[j])
        dp = new - old
        jp = j
        if dp != 0.0:
            w[j] = new
            if accumulate:
                acc[j] += weights[k] * dp
    pending[0] = jp
    pending[1] = dp


@njit(**_OPTS)
def _flush_dense(X, z, pending):
    """Apply the deferred margin update ``z += pending[1] * X[:, pending[0]]``."""
    jp, dp = np.int64(pending[0]), pending[1]
    if dp != 0.0:
        for i in range(X.shape[0]):
            z[i] += dp * X[i, jp]
    pending[1] = 0.0


@njit(inline="always", **_OPTS)
def _sparse_prefetch(data, indices, indptr, coords, k):
    # the next column is random: fetch its entries while this step computes
    if k + 1 < coords.shape[0]:
        jn = coords[k + 1]
        for t in range(indptr[jn], indptr[jn + 1], _LINE):
            prefetch1d(data, t)
            prefetch1d(indices, t)


@njit(inline="always", **_OPTS)
def _sparse_update(j, k, g, n, w, noise, step, sigma, l1, l2, lo, up, acc, weights):
    """Noise, prox and bookkeeping of a sparse step; returns the change of w_j."""
    g = g / n + sigma[j] * noise[k]
    old = w[j]
    new = prox_scalar(old - step[j] * g, step[j], l1[j], l2[j], lo[j], up[j])
    delta = new - old
    if delta != 0.0:
        w[j] = new
        if acc.shape[0] > 0:
            acc[j] += weights[k] * delta
    return delta


@njit(**_OPTS)
def _cd_sparse(data, indices, indptr, n, y, z, zy, zbuf, ybuf, w, code, param, coords, noise,
               step, clip, sigma, l1, l2, lo, up, acc, weights):
    """CSC steps on the working margins. Random rows are the cost here, so each loss reads
    one array per entry: the residuals z - y in ``z`` (squared), the interleaved (margin,
    label) pairs ``zy`` (logistic, whose column is gathered into the buffers ``zbuf``,
    ``ybuf`` for a vectorized loop), or z and y (others)."""
    if code == SQUARED:
        for k in range(coords.shape[0]):
            j = coords[k]
            cj = clip[j]
            start, stop = indptr[j], indptr[j + 1]
            _sparse_prefetch(data, indices, indptr, coords, k)
            g = 0.0
            for t in range(start, stop):
                g += min(max(z[indices[t]] * data[t], -cj), cj)
            delta = _sparse_update(j, k, g, n, w, noise, step, sigma, l1, l2, lo, up, acc,
                                   weights)
            if delta != 0.0:
                for t in range(start, stop):
                    z[indices[t]] += delta * data[t]
    elif code == LOGISTIC:
        for k in range(coords.shape[0]):
            j = coords[k]
            cj = clip[j]
            start, stop = indptr[j], indptr[j + 1]
            _sparse_prefetch(data, indices, indptr, coords, k)
            m = stop - start
            for t in range(m):
                i = indices[start + t]
                zbuf[t] = zy[i, 0]
                ybuf[t] = zy[i, 1]
            g = 0.0
            for t in range(m):
                g += min(max(logistic_deriv(zbuf[t], ybuf[t]) * data[start + t], -cj), cj)
            delta = _sparse_update(j, k, g, n, w, noise, step, sigma, l1, l2, lo, up, acc,
                                   weights)
            if delta != 0.0:
                for t in range(start, stop):
                    zy[indices[t], 0] += delta * data[t]
    else:
        for k in range(coords.shape[0]):
            j = coords[k]
            cj = clip[j]
            start, stop = indptr[j], indptr[j + 1]
            g = 0.0
            for t in range(start, stop):
                i = indices[t]
                g += min(max(loss_deriv(code, z[i], y[i], param) * data[t], -cj), cj)
            delta = _sparse_update(j, k, g, n, w, noise, step, sigma, l1, l2, lo, up, acc,
                                   weights)
            if delta != 0.0:
                for t in range(start, stop):
                    z[indices[t]] += delta * data[t]


_EMPTY = np.zeros(0)
_NO_PAIRS = _EMPTY.reshape(0, 2)


def _enter(code, y, z, indptr=None):
    """Put the margins ``z`` in the kernels' working form (in place); returns the sparse
    logistic (margin, label) pairs and gather buffers (empty otherwise)."""
    if code == SQUARED:
        z -= y
    elif code == LOGISTIC and indptr is not None:
        longest = int(np.diff(indptr).max(initial=0))
        return np.column_stack([z, y]), np.empty(longest), np.empty(longest)
    return _NO_PAIRS, _EMPTY, _EMPTY


def _leave(code, y, z, zy):
    """Undo :func:`_enter`: the exact margins back in ``z``."""
    if code == SQUARED:
        z += y
    elif zy.shape[0]:
        z[:] = zy[:, 0]


class CDWork:
    """The data of DP-CD steps and the working form of their margins, carried from call to call.

    ``X`` (dense Fortran-ordered or CSC), ``y``, the loss (``loss_code``, ``loss_param``) and
    the penalty (``prox``, a :class:`~dpopt.kernels.prox.ProxArrays`) are those of the
    problem; ``z`` = X w, the margins, is the caller's array, modified in place.

    The kernels do not work on the margins themselves: least squares keeps the residuals
    z - y (one array less per step), sparse logistic keeps interleaved (margin, label) pairs
    (one random cache line per non-zero), and the dense kernel defers each margin update into
    the next step's sweep. Setting up and undoing this costs one to three sweeps over n per
    call, which is a large part of a pass when p is small (3 of 11 sweeps for a least-squares
    pass with p = 8). A ``CDWork`` keeps the working form between the calls of
    :func:`cd_steps`; ``finish()`` brings ``z`` back to the exact margins X w. Until then
    ``z`` must not be read.
    """

    def __init__(self, X, y, loss_code, loss_param, prox, z):
        self.sparse = is_sparse(X)
        self.X = csc_arrays(X) if self.sparse else X
        self.n = X.shape[0]
        self.y, self.code, self.param, self.prox, self.z = y, loss_code, loss_param, prox, z
        self.pending = np.zeros(2)  # dense: deferred update z += pending[1] * X[:, pending[0]]
        self.zy, self.zbuf, self.ybuf = _enter(loss_code, y, z, self.X[2] if self.sparse else None)
        self.open = True

    def run(self, w, coords, noise, step, clip, sigma, acc=_EMPTY, weights=_EMPTY):
        if not self.open:
            raise RuntimeError("this CDWork has been finished; make a new one")
        coords = np.ascontiguousarray(coords, dtype=np.int64)
        noise = np.ascontiguousarray(noise, dtype=np.float64)
        if self.sparse:
            _cd_sparse(*self.X, self.n, self.y, self.z, self.zy, self.zbuf, self.ybuf, w,
                       self.code, self.param, coords, noise, step, clip, sigma, *self.prox, acc,
                       weights)
        else:
            _cd_dense(self.X, self.y, self.z, w, self.code, self.param, coords, noise, step,
                      clip, sigma, *self.prox, acc, weights, self.pending)

    def finish(self):
        """Apply what is pending and restore the margins in ``z``; returns ``z``."""
        if self.open:
            if not self.sparse:
                _flush_dense(self.X, self.z, self.pending)
            _leave(self.code, self.y, self.z, self.zy)
            self.open = False
        return self.z


def cd_steps(work, w, coords, noise, step, clip, sigma):
    """Run the steps ``coords`` in place on ``w`` and on the margins held by ``work`` (a
    :class:`CDWork`), which stay in the kernels' working form: consecutive calls cost no
    set-up; call ``work.finish()`` before reading the margins."""
    work.run(w, coords, noise, step, clip, sigma)


def cd_steps_accumulate(work, w, coords, noise, step, clip, sigma, acc, weights):
    """:func:`cd_steps`, also adding ``weights[k] * (change of w at step k)`` to ``acc``
    (the lazy running sum behind Algorithm 1's iterate averaging; module docstring)."""
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    if weights.shape != (len(coords),) or acc.shape != w.shape:
        raise ValueError("weights must have one entry per step and acc the shape of w")
    work.run(w, coords, noise, step, clip, sigma, acc, weights)


def cd_steps_once(X, y, loss_code, loss_param, prox, z, w, coords, noise, step, clip, sigma):
    """:func:`cd_steps` on a :class:`CDWork` of its own, finished at once: ``w`` and the
    margins ``z`` (exact again on return) are updated in place."""
    work = CDWork(X, y, loss_code, loss_param, prox, z)
    work.run(w, coords, noise, step, clip, sigma)
    work.finish()
