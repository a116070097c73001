"""Numba kernels: the loops every solver shares.

All kernels are ``nogil`` and ``cache=True``. Dense matrices are Fortran ordered for the
column kernels (a column is contiguous) and C ordered for the row kernels; sparse ones reach
the compiled loops as the three CSC (or CSR) arrays ``data, indices, indptr``. Losses are
selected by an integer code (see :mod:`dpopt.kernels.losses`) so a single compiled kernel
serves them all.

Raw arrays only. Nothing here knows :class:`dpopt.Problem`, its loss and penalty objects
or its caches; nothing here imports from the rest of dpopt. Every entry point takes the
data as arrays and numbers, in this order where they apply:

* ``X``: a dense float64 array or a scipy CSC / CSR matrix. Column kernels (``cd``,
  ``gcd``, ``block``, ``grad.coordclip_gradient``) want Fortran order or CSC (a solver
  passes ``Problem.X``), row kernels (``sgd``, ``svrg``, ``grad.rows_gradient`` /
  ``full_gradient``) C order or CSR (``Problem.X_rows``, the one row-major copy, built and
  cached by the problem); a sparse matrix in the other format raises ``ValueError``. n is
  ``X.shape[0]``.
* ``y``, then ``row_norms`` (||x_i||, where L2 clipping needs them), then the loss as
  ``loss_code, loss_param`` (``Loss.code`` and ``Loss.param``).
* ``prox``: the penalty as a :class:`~dpopt.kernels.prox.ProxArrays` (``Penalty.arrays``),
  the one container: its four per-coordinate arrays (l1, l2, lower, upper) always travel
  together, to every prox-applying kernel. A :class:`~dpopt.kernels.cd.CDWork` holds the
  data of a run of DP-CD steps and the kernels' working form of its margins.
"""

from dpopt.kernels.losses import (
    ABSOLUTE,
    HUBER,
    LOGISTIC,
    SQUARED,
    loss_deriv,
    loss_derivs,
    loss_value,
    loss_values,
)

__all__ = [
    "SQUARED", "LOGISTIC", "HUBER", "ABSOLUTE",
    "loss_value", "loss_deriv", "loss_values", "loss_derivs",
]
