"""Losses on the margin x^T w (scikit-learn's scaling, docs/design.md conventions)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpopt import kernels
from dpopt._core.validation import check_scalar


@dataclass(frozen=True)
class Loss:
    """A per-sample loss l(z; y) of the margin z = x^T w.

    Attributes
    ----------
    name : str
    code : int
        The integer the Numba kernels dispatch on.
    param : float
        Huber's threshold (unused by the others).
    curvature : float
        Upper bound c on l''(z; y), so the coordinate smoothness of the average
        loss is M_j = c ||X[:, j]||^2 / n and the global one is
        c ||X||_2^2 / n. ``inf`` for the non-smooth absolute loss.
    classification : bool
        Labels must be in {-1, +1}.
    """

    name: str
    code: int
    param: float = 0.0
    curvature: float = 1.0
    classification: bool = False

    @property
    def smooth(self) -> bool:
        return np.isfinite(self.curvature)

    def value(self, z, y):
        """Per-sample loss values."""
        return kernels.loss_values(self.code, _f64(z), _f64(y), self.param)

    def deriv(self, z, y):
        """Per-sample derivatives dl/dz (a subgradient for the absolute loss)."""
        return kernels.loss_derivs(self.code, _f64(z), _f64(y), self.param)

    def check_labels(self, y):
        """Raise ``ValueError`` if the labels do not fit the loss."""
        # the message names no value: a record's label is not the library's to print
        if self.classification and not np.all((y == 1.0) | (y == -1.0)):
            raise ValueError(f"y must be in {{-1, +1}} for the {self.name} loss; it holds other "
                             "values (the estimators encode labels; a Problem takes them as "
                             "-1/+1)")


def _f64(a):
    return np.ascontiguousarray(a, dtype=np.float64)


def squared() -> Loss:
    """Squared loss (z - y)^2 / 2 (scikit-learn's Lasso scaling)."""
    return Loss("squared", kernels.SQUARED, 0.0, 1.0, False)


def logistic() -> Loss:
    """Logistic loss log(1 + exp(-y z)) with y in {-1, +1}; l'' <= 1/4."""
    return Loss("logistic", kernels.LOGISTIC, 0.0, 0.25, True)


def huber(delta: float = 1.0) -> Loss:
    """Huber loss with threshold ``delta`` (quadratic inside, linear outside)."""
    delta = check_scalar(delta, "delta", low=0.0, low_open=True)
    return Loss("huber", kernels.HUBER, delta, 1.0, False)


def absolute() -> Loss:
    """Absolute loss |z - y| (convex, 1-Lipschitz, not smooth)."""
    return Loss("absolute", kernels.ABSOLUTE, 0.0, np.inf, False)


LOSSES = {"squared": squared, "logistic": logistic, "huber": huber, "absolute": absolute}


def get_loss(loss) -> Loss:
    """A :class:`Loss` from a name or an instance."""
    if isinstance(loss, Loss):
        return loss
    if isinstance(loss, str) and loss in LOSSES:
        return LOSSES[loss]()
    raise ValueError(f"loss must be one of {sorted(LOSSES)} or a Loss, got {loss!r}")
