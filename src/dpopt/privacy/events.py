"""The records of what a fit released (privacy events): one frozen dataclass per kind of
mechanism, each with a ``count`` of adaptive repetitions, and the :class:`Calibration` a
calibration returns. A list of records is a composition; :mod:`dpopt.privacy.accounting`
says which accountant holds which records and what the list costs. Each record has a
``kind`` (``"gaussian"``, ``"poisson-gaussian"``, ``"wor-gaussian"``, ``"laplace"``,
``"pure"``, ``"zcdp"``, ``"objective-perturbation"``): the key of the accountants'
declarations (which kinds each one holds) and of their per-kind rules.

Noise multipliers are relative to the L2 (Laplace: L1) sensitivity under the stated
adjacency (``"replace-one"``, the default, or ``"add-remove"``): docs/design.md invariant 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

#: The neighbouring relations a guarantee can be stated under.
ADJACENCIES = ("replace-one", "add-remove")


@dataclass(frozen=True)
class Gaussian:
    """``count`` Gaussian mechanisms with noise multiplier sigma / Delta."""

    kind: ClassVar[str] = "gaussian"  # the key of the accountants' tables

    noise_multiplier: float
    count: int = 1


@dataclass(frozen=True)
class SubsampledGaussian:
    """``count`` steps of a noisy sum over a random batch.

    ``sampling="poisson"`` includes each record independently with probability
    ``sampling_rate``; ``"without-replacement"`` draws a batch of fixed size
    ``sampling_rate * n`` (replace-one only; give ``dataset_size``).
    """

    noise_multiplier: float
    sampling_rate: float
    count: int = 1
    sampling: str = "poisson"
    dataset_size: int | None = None

    @property
    def kind(self) -> str:
        """The key of the accountants' tables: the sampler decides which analyses apply."""
        return "poisson-gaussian" if self.sampling == "poisson" else "wor-gaussian"


@dataclass(frozen=True)
class Laplace:
    """``count`` Laplace mechanisms with scale / L1-sensitivity = noise_multiplier."""

    kind: ClassVar[str] = "laplace"  # the key of the accountants' tables

    noise_multiplier: float
    count: int = 1


@dataclass(frozen=True)
class PureDP:
    """``count`` mechanisms that are each ``epsilon``-DP (delta = 0)."""

    kind: ClassVar[str] = "pure"  # the key of the accountants' tables

    epsilon: float
    count: int = 1


@dataclass(frozen=True)
class ZCDP:
    """``count`` mechanisms that are each ``rho``-zCDP."""

    kind: ClassVar[str] = "zcdp"  # the key of the accountants' tables

    rho: float
    count: int = 1


@dataclass(frozen=True)
class ObjectivePerturbation:
    """``count`` runs of objective perturbation, through their privacy-loss bound.

    With m = 1 / noise_multiplier, every ordering (D, D') of neighbours has a
    privacy loss log(p_D / p_D')(theta), theta ~ M(D), that is stochastically
    dominated (first order) by

        Y = shift + m^2 / 2 + m R,     R ~ chi_dof   (dof = 1: |N(0, 1)|, dof = 2: Rayleigh)

    (:mod:`dpopt.solvers.objective_perturbation` derives it: ``shift`` bounds the
    log-determinant of the Jacobian, m R + m^2 / 2 the Gaussian part; dof = 1
    under add-remove, as in Redberg, Koskela & Wang, NeurIPS 2023, dof = 2 under
    replace-one).

    Why this composes. Y >= 0, so E[e^{-Y}] <= 1 and there is a pair (P*, Q*)
    whose privacy loss under P* is exactly Y: P* the law of Y, Q* with density
    e^{-y} dP* plus an atom of mass 1 - E[e^{-Y}] where P* has none. Since
    v -> (1 - alpha e^{-v})_+ is non-decreasing for every alpha >= 0, first-order
    dominance of the loss gives H_alpha(M(D) || M(D')) <= H_alpha(P* || Q*) for
    all alpha >= 0 and both orderings: (P*, Q*) is a dominating pair (Zhu, Dong,
    Wang, AISTATS 2022, Def. 7), and dominating pairs compose adaptively by
    taking products (their Thm. 10). So the composition with Gaussian records of
    total mu is dominated by the loss Y + G, G ~ N(mu^2/2, mu^2) independent:

        delta(eps) = E_R[ delta_mu(eps - shift - m^2/2 - m R) ],
        delta_mu(x) = Phi(-x/mu + mu/2) - e^x Phi(-x/mu - mu/2)   (any real x; mu = 0: (1 - e^x)_+).

    ``shift`` is a deterministic constant of the dominating pair, so it may be
    moved out only here (eps(delta) = shift + ... would be wrong in general: with
    the Gaussian part it is not, because the folded term is not Gaussian). The
    PLD accountant discretises Y (rounded up), the RDP accountant uses
    eps(a) = shift + m^2/2 + log E[e^{(a-1) m R}] / (a - 1) (first-order
    dominance bounds every E[e^{(a-1) loss}]).
    """

    kind: ClassVar[str] = "objective-perturbation"  # the key of the accountants' tables

    noise_multiplier: float
    shift: float = 0.0
    dof: int = 1
    count: int = 1


MECHANISMS = (Gaussian, SubsampledGaussian, Laplace, PureDP, ZCDP, ObjectivePerturbation)


@dataclass(frozen=True)
class Calibration:
    """Result of a calibration: the noise and the privacy it actually gives."""

    noise_multiplier: float
    epsilon: float
    delta: float
    accountant: str
    adjacency: str
