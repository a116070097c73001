"""Numba kernels: the loops every solver shares.

All kernels are ``nogil`` and ``cache=True``. Dense matrices are Fortran
ordered (a column is contiguous); sparse ones are given as the three CSC (or
CSR) arrays ``data, indices, indptr``. Losses are selected by an integer code
(see :mod:`dpopt.kernels.losses`) so a single compiled kernel serves them all.
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
