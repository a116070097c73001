"""Separable penalties psi(w) = sum_j psi_j(w_j) and their scalar prox.

Every penalty here is a special case of

    psi_j(u) = l1_j |u| + (l2_j / 2) u^2 + indicator(lower_j <= u <= upper_j),

whose prox with step t is the projection onto [lower_j, upper_j] of
soft_threshold(v, t l1_j) / (1 + t l2_j) (in one dimension the constrained
minimizer of a convex function is the projection of the unconstrained one).
Scaling follows scikit-learn: ``ElasticNet(alpha, l1_ratio)`` is
alpha * l1_ratio * ||w||_1 + alpha * (1 - l1_ratio) / 2 * ||w||^2.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from dpopt._core.validation import check_scalar
from dpopt.kernels.prox import ProxArrays, prox_scalar, prox_vector  # noqa: F401  (prox_scalar re-exported)


@dataclass(frozen=True, eq=False)
class Penalty:
    """A separable penalty given by per-coordinate arrays (length p).

    Build one with :func:`none`, :func:`l1`, :func:`l2`, :func:`elastic_net`,
    :func:`box` or :func:`non_negative`; :meth:`for_dimension` expands scalars
    to arrays (and leaves an intercept coordinate unpenalized).
    """

    name: str
    alpha: float = 0.0
    l1_ratio: float = 0.0
    lower: float | np.ndarray = -np.inf
    upper: float | np.ndarray = np.inf
    # per-coordinate arrays, filled by for_dimension
    l1: np.ndarray | None = None
    l2: np.ndarray | None = None
    lo: np.ndarray | None = None
    up: np.ndarray | None = None

    def for_dimension(self, p: int, unpenalized_last: bool = False) -> Penalty:
        lo = np.broadcast_to(np.asarray(self.lower, dtype=np.float64), (p,)).copy()
        up = np.broadcast_to(np.asarray(self.upper, dtype=np.float64), (p,)).copy()
        l1 = np.full(p, self.alpha * self.l1_ratio)
        l2 = np.full(p, self.alpha * (1.0 - self.l1_ratio))
        if unpenalized_last:
            l1[-1] = l2[-1] = 0.0
            lo[-1], up[-1] = -np.inf, np.inf
        return replace(self, l1=l1, l2=l2, lo=lo, up=up)

    def weighted(self, l1_weights, l2_weights) -> Penalty:
        """The penalty with its per-coordinate L1 and L2 parts multiplied by the given
        factors (after :meth:`for_dimension`): a penalty stated on other units."""
        self._check_ready()
        return replace(self, l1=self.l1 * l1_weights, l2=self.l2 * l2_weights)

    @functools.cached_property
    def arrays(self) -> ProxArrays:
        """The per-coordinate arrays as the kernels take them (no copy; built once)."""
        self._check_ready()
        return ProxArrays(self.l1, self.l2, self.lo, self.up)

    @property
    def smooth(self) -> bool:
        """True when psi is differentiable everywhere (no L1 part, no box)."""
        self._check_ready()
        return not (np.any(self.l1 > 0) or np.any(np.isfinite(self.lo)) or np.any(np.isfinite(self.up)))

    def value(self, w) -> float:
        self._check_ready()
        if np.any(w < self.lo) or np.any(w > self.up):
            return np.inf
        return float(np.dot(self.l1, np.abs(w)) + 0.5 * np.dot(self.l2, w * w))

    def prox(self, v, step):
        """Coordinate-wise prox of ``step * psi`` (``step`` scalar or per coordinate)."""
        self._check_ready()
        step = np.broadcast_to(np.asarray(step, dtype=np.float64), v.shape).copy()
        return prox_vector(np.asarray(v, dtype=np.float64), step, self.l1, self.l2, self.lo, self.up)

    def smooth_grad(self, w):
        """Gradient of the L2 part (used by optimality checks)."""
        self._check_ready()
        return self.l2 * w

    def _check_ready(self):
        if self.l1 is None:
            raise ValueError("penalty has no dimension yet: use Penalty.for_dimension(p)")


def none() -> Penalty:
    return Penalty("none")


def l1(alpha: float) -> Penalty:
    """alpha * ||w||_1."""
    return Penalty("l1", _alpha(alpha), 1.0)


def l2(alpha: float) -> Penalty:
    """alpha / 2 * ||w||^2."""
    return Penalty("l2", _alpha(alpha), 0.0)


def elastic_net(alpha: float, l1_ratio: float = 0.5) -> Penalty:
    """alpha * l1_ratio * ||w||_1 + alpha * (1 - l1_ratio) / 2 * ||w||^2."""
    l1_ratio = check_scalar(l1_ratio, "l1_ratio", low=0.0, high=1.0)
    return Penalty("elastic_net", _alpha(alpha), l1_ratio)


def box(lower=-np.inf, upper=np.inf) -> Penalty:
    """Indicator of lower <= w <= upper (scalars or arrays)."""
    lo, up = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    if np.any(np.isnan(lo)) or np.any(np.isnan(up)):
        raise ValueError("box bounds lower and upper must not be NaN")
    if np.any(lo > up):
        raise ValueError("box bounds must satisfy lower <= upper")
    if np.any(lo == np.inf) or np.any(up == -np.inf):
        raise ValueError("box bounds give an empty set (lower=+inf or upper=-inf)")
    if np.any(lo > 0) or np.any(up < 0):
        raise ValueError("box must contain 0 (solvers start at w = 0): need lower <= 0 <= upper")
    return Penalty("box", 0.0, 0.0, lower, upper)


def non_negative() -> Penalty:
    """Indicator of w >= 0."""
    return Penalty("non_negative", 0.0, 0.0, 0.0, np.inf)


#: The largest penalty strength accepted. On the default path's scaled domain a loss's
#: curvature is at most a few times the squared row bound, so an alpha many orders of
#: magnitude above it sets every coefficient to 0 within float64's precision already;
#: beyond about 1e15 objective perturbation's certified solver would need on the order of
#: sqrt(alpha) accelerated steps (its stage 2, :mod:`dpopt.solvers._op_minimize`) and
#: never return.
MAX_ALPHA = 1e12


def _alpha(alpha):
    value = check_scalar(alpha, "alpha", low=0.0)
    if value > MAX_ALPHA:
        raise ValueError(f"alpha={value:g} is above {MAX_ALPHA:g}: beyond any useful strength "
                         f"on features of ordinary magnitude (rescale raw features in the "
                         f"millions rather than raise alpha), and where objective "
                         f"perturbation's certified solver cannot reach its tolerance")
    return value


PENALTIES = {"none": none, "l1": l1, "l2": l2, "elastic_net": elastic_net, "box": box,
             "non_negative": non_negative}


def check_penalty(name, kwargs):
    """An estimator's ``(penalty name, its parameters)``, checked before any data is read
    (``alpha="auto"`` stands for a number the fit derives from n)."""
    get_penalty(name, **{k: 0.0 if isinstance(v, str) and v == "auto" else v
                         for k, v in kwargs.items()})


def get_penalty(penalty, alpha=None, **kwargs) -> Penalty:
    """A :class:`Penalty` from a name (with ``alpha``) or an instance."""
    if penalty is None:
        return none()
    if isinstance(penalty, Penalty):
        return penalty
    if isinstance(penalty, str) and penalty in PENALTIES:
        if penalty in ("l1", "l2", "elastic_net"):
            return PENALTIES[penalty](0.0 if alpha is None else alpha, **kwargs)
        return PENALTIES[penalty](**kwargs)
    raise ValueError(f"penalty must be one of {sorted(PENALTIES)} or a Penalty, got {penalty!r}")
