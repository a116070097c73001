"""Statistics of the rows that several layers need, in one copy: squared row norms, the
per-row scales that clip rows to an L2 bound, and the clipped sufficient statistics
(X_cᵀX_c, X_cᵀy_c, n) that AdaSSP releases and the chunked path sums over chunks.

Exact (non-private) quantities: what is released from them, and with which noise, is the
business of the mechanism that calls them (:mod:`dpopt.solvers.adassp`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def row_scales(sq_norms, row_bound):
    """Factors min(1, B / ||x_i||) that clip every row to norm ``row_bound`` (1 for zero rows)."""
    sq_norms = np.asarray(sq_norms, dtype=np.float64)
    scales = np.ones_like(sq_norms)
    over = sq_norms > row_bound * row_bound
    scales[over] = row_bound / np.sqrt(sq_norms[over])
    return scales


def row_sq_norms(X):
    if sp.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()
    return np.einsum("ij,ij->i", X, X)


def sufficient_statistics(X, y, row_bound, target_bound, fit_intercept):
    """Clipped sufficient statistics (X_c^T X_c, X_c^T y_c, n) of a block of rows.

    ``X`` is the (n, p) block of features, dense or scipy sparse, without the intercept
    column; every row is rescaled to L2 norm at most ``row_bound`` and every target
    clipped to [-target_bound, target_bound] (``inf`` disables either). With
    ``fit_intercept`` the statistics are those of the augmented rows (x_c, 1): shape
    (p + 1, p + 1) and (p + 1,), the last coordinate being the intercept's. Sums of the
    outputs over a partition of the rows are the outputs for all rows. One pass over X:
    a row scaling (skipped when no row is clipped) and one X^T X product (BLAS syrk for
    dense data).
    """
    y = np.asarray(y, dtype=np.float64)
    n = X.shape[0]
    scales = row_scales(row_sq_norms(X), row_bound)
    yc = np.clip(y, -target_bound, target_bound)
    clipped = bool(np.any(scales < 1.0))
    if sp.issparse(X):
        Xc = sp.csr_matrix(sp.diags(scales) @ X) if clipped else sp.csr_matrix(X)
        xtx = np.asarray((Xc.T @ Xc).toarray(), dtype=np.float64)
        xty = np.asarray(Xc.T @ yc, dtype=np.float64).ravel()
        col_sums = np.asarray(Xc.sum(axis=0), dtype=np.float64).ravel()
    else:
        Xc = np.asarray(X, dtype=np.float64)
        if clipped:
            Xc = Xc * scales[:, None]
        xtx = Xc.T @ Xc
        xty = Xc.T @ yc
        col_sums = Xc.sum(axis=0)
    if not fit_intercept:
        return xtx, xty, n
    p = xtx.shape[0]
    full = np.empty((p + 1, p + 1))
    full[:p, :p] = xtx
    full[:p, p] = full[p, :p] = col_sums
    full[p, p] = n
    return full, np.append(xty, yc.sum()), n
