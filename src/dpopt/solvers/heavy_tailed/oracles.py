"""Mean oracles of the heavy-tailed family (Lowy & Razaviyayn), beside their solvers.

MeanOracle1 (clipped mean + Gaussian noise), MeanOracle2 (coordinate-wise median of
means + Gaussian noise) and the simulated shuffle-model oracles. Each states its
sensitivity under replace-one adjacency; the noise is drawn through the Generator given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpopt._core.validation import (
    check_delta,
    check_epsilon,
    check_positive_int,
    check_scalar,
)
from dpopt.privacy.accounting import ZCDP, Gaussian
from dpopt.privacy.mechanisms import advanced_composition_split, gaussian_noise
from dpopt.solvers._common import mean_sensitivity

# ---------------------------------------------------------------------------
# Mean oracles for heavy-tailed private stochastic optimization
#
# Lowy & Razaviyayn, "Private Stochastic Optimization with Large Worst-Case
# Lipschitz Parameter" (seed 004; notes shared/papers/004_heavy_tailed_dp_so.md).
# Adjacency: replace-one everywhere (the paper's and the library's default):
# neighbouring batches of the same public size s differ in one record's value.


def _check_rho(rho, name="rho"):
    return check_scalar(rho, name, low=0.0, low_open=True, allow_inf=True)


def _check_vectors(vectors, name="vectors"):
    v = np.asarray(vectors, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] < 1 or v.shape[1] < 1:
        raise ValueError(f"{name} must be a non-empty 2-d array (one row per record), "
                         f"got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} contains NaN or infinity")
    return v


def clip_rows_l2(vectors, clip):
    """Pi_C(z) = z min(1, C / ||z||) applied to every row (projection onto the ball)."""
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", v, v))
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(norms > clip, clip / norms, 1.0)
    return v * factor[:, None]


class _RhoGaussianOracle:
    """Gaussian noise calibrated to a rho-zCDP budget on a quantity whose L2
    sensitivity (replace-one) is ``self.sensitivity``: sigma = Delta / sqrt(2 rho)
    gives rho-zCDP (Bun & Steinke 2016, Prop. 1.6). Shared by the mean oracles."""

    @property
    def noise_multiplier(self) -> float:
        """sigma / sensitivity = 1 / sqrt(2 rho) (0 without privacy)."""
        return 0.0 if math.isinf(self.rho) else 1.0 / math.sqrt(2.0 * self.rho)

    @property
    def sigma(self) -> float:
        """Per-coordinate standard deviation of the added noise."""
        return 0.0 if math.isinf(self.rho) else self.sensitivity * self.noise_multiplier

    def record(self) -> ZCDP:
        """The zCDP cost of one call."""
        return ZCDP(self.rho, 1)

    def gaussian_record(self) -> Gaussian:
        """The same call as a Gaussian-mechanism record (for the exact GDP accountant)."""
        return Gaussian(math.inf if math.isinf(self.rho) else self.noise_multiplier, 1)


@dataclass(frozen=True)
class MeanOracle1(_RhoGaussianOracle):
    """Clipped Gaussian mean (paper Algorithm 1, after Barber & Duchi 2014).

    ``nu~ = (1/s) sum_i Pi_C(z_i) + N(0, sigma^2 I_d)`` for a batch of ``s``
    vectors, with ``Pi_C`` the projection onto the L2 ball of radius ``C``.

    Privacy. Adjacency is replace-one on a batch of public size ``s``: the
    clipped mean moves by at most ``Delta = 2C/s`` in L2 (the other ``s - 1``
    terms cancel). ``sigma = Delta / sqrt(2 rho)`` makes one call exactly
    ``rho``-zCDP (Gaussian mechanism, Bun & Steinke 2016 Prop. 1.6), i.e. a
    Gaussian mechanism with noise multiplier ``z = 1/sqrt(2 rho)``
    (``mu = sqrt(2 rho)``-GDP). ``rho = inf`` adds no noise.

    Bias and variance (paper Lemma 6): if the ``z_i`` are i.i.d. with mean
    ``nu`` and ``E||z||^k <= r_k^k`` (k >= 2), then

        ||E nu~ - nu|| <= r_k^k / ((k - 1) C^(k-1))          (bias B)
        E||nu~ - E nu~||^2 <= d sigma^2 + r_2^2 / s          (variance)

    (the variance term uses E||Pi_C(z) - E Pi_C(z)||^2 <= E||z - E z||^2).
    """

    clip: float
    batch_size: int
    rho: float

    def __post_init__(self):
        clip = check_scalar(self.clip, "clip", low=0.0, low_open=True, allow_inf=True)
        check_positive_int(self.batch_size, "batch_size")
        rho = _check_rho(self.rho)
        if math.isinf(clip) and not math.isinf(rho):
            raise ValueError("clip must be finite when rho is finite (unbounded sensitivity)")

    @property
    def sensitivity(self) -> float:
        """L2 sensitivity 2C/s of the clipped mean under replace-one adjacency."""
        return mean_sensitivity(self.clip, self.batch_size)

    def bias_bound(self, moment_bound, moment_order) -> float:
        """Lemma 6: r_k^k / ((k-1) C^(k-1)) with ``moment_bound`` = r_k = (E||z||^k)^(1/k)."""
        r = check_scalar(moment_bound, "moment_bound", low=0.0)
        k = check_scalar(moment_order, "moment_order", low=2.0)
        return r ** k / ((k - 1.0) * self.clip ** (k - 1.0))

    def variance_bound(self, dim, second_moment) -> float:
        """Lemma 6: d sigma^2 + r_2^2 / s with ``second_moment`` = r_2 = (E||z||^2)^(1/2)."""
        dim = check_positive_int(dim, "dim")
        r2 = check_scalar(second_moment, "second_moment", low=0.0)
        return dim * self.sigma ** 2 + r2 ** 2 / self.batch_size

    def release(self, rng, clipped_mean):
        """Add the oracle's Gaussian noise to an already clipped mean (one call)."""
        m = np.asarray(clipped_mean, dtype=np.float64)
        return m + gaussian_noise(rng, self.sigma, m.shape)

    def __call__(self, rng, vectors):
        """The oracle on explicit vectors (an ``(s, d)`` array, ``s == batch_size``)."""
        v = _check_vectors(vectors)
        if v.shape[0] != self.batch_size:
            raise ValueError(f"vectors must have batch_size={self.batch_size} rows, "
                             f"got {v.shape[0]}")
        return self.release(rng, clip_rows_l2(v, self.clip).mean(axis=0))


def median_of_means(values, clip, groups):
    """Coordinate-wise: clip every entry to [-clip, clip], average within ``groups``
    consecutive groups of rows of equal size, and take the median over groups."""
    v = np.asarray(values, dtype=np.float64)
    s = v.shape[0]
    if s % groups:
        raise ValueError(f"groups={groups} must divide the batch size {s}")
    c = np.clip(v, -clip, clip).reshape(groups, s // groups, -1)
    return np.median(c.mean(axis=1), axis=0)


@dataclass(frozen=True)
class MeanOracle2(_RhoGaussianOracle):
    """Coordinate-wise clipped median-of-means with Gaussian noise (paper
    Algorithm 12, after Kamath, Singhal, Ullman 2020 and Kamath, Liu, Zhang 2022).

    For every coordinate j the batch of ``s`` values is split into ``m`` groups
    of ``s/m``, each value clipped to ``[-tau, tau]``, the group means computed
    and their median taken; then ``N(0, sigma^2 I_d)`` is added.

    Privacy. Replace-one on a batch of public size ``s``: the replaced record
    sits in one group per coordinate and moves that group's mean by at most
    ``2 tau m / s``; a median moves no more than the value that changed, so the
    L2 sensitivity is ``Delta = 2 tau m sqrt(d) / s``. ``sigma = Delta /
    sqrt(2 rho)`` gives ``rho``-zCDP. (The paper's pseudocode uses this sigma;
    its Lemma 52 states a constant 72 instead of 4 -- not needed by this
    sensitivity argument.)

    Bias and variance (paper Lemmas 52, 57, 58), for i.i.d. ``x`` with mean
    ``nu``, ``||nu|| <= L``, ``tau >= 2L`` and coordinate central moments
    ``E|x_j - nu_j|^k <= gamma_k``:

        |E Pi_tau(x_j) - nu_j| <= 10 gamma_k (2/tau)^(k-1)          (per coordinate)
        ||nu_hat - nu|| <= 10 sqrt(d) (sqrt(m/s) gamma_k^(1/k) + gamma_k (2/tau)^(k-1))
                              with probability >= 1 - zeta if m >= 20 ln(4d/zeta)
        E||nu~ - E nu~||^2 = O~(B^2 + d sigma^2)
    """

    clip: float
    batch_size: int
    groups: int
    dim: int
    rho: float

    def __post_init__(self):
        rho = _check_rho(self.rho)
        clip = check_scalar(self.clip, "clip", low=0.0, low_open=True, allow_inf=True)
        if math.isinf(clip) and not math.isinf(rho):
            raise ValueError("clip must be finite when rho is finite (unbounded sensitivity)")
        s = check_positive_int(self.batch_size, "batch_size")
        m = check_positive_int(self.groups, "groups")
        check_positive_int(self.dim, "dim")
        if s % m:
            raise ValueError(f"groups={m} must divide batch_size={s}")

    @staticmethod
    def default_groups(dim, failure_probability=0.1) -> int:
        """m = ceil(20 ln(4 d / zeta)) (Lemma 57)."""
        zeta = check_scalar(failure_probability, "failure_probability", low=0.0, high=1.0,
                            low_open=True, high_open=True)
        return int(math.ceil(20.0 * math.log(4.0 * check_positive_int(dim, "dim") / zeta)))

    @property
    def sensitivity(self) -> float:
        """L2 sensitivity 2 tau m sqrt(d) / s under replace-one adjacency."""
        return mean_sensitivity(self.clip * self.groups * math.sqrt(self.dim), self.batch_size)

    def coordinate_bias_bound(self, central_moment, moment_order) -> float:
        """Lemma 58: |E Pi_tau(x_j) - nu_j| <= 10 gamma_k (2/tau)^(k-1) (needs tau >= 2|nu_j|)."""
        g = check_scalar(central_moment, "central_moment", low=0.0)
        k = check_scalar(moment_order, "moment_order", low=2.0)
        return 10.0 * g * (2.0 / self.clip) ** (k - 1.0)

    def error_bound(self, central_moment, moment_order) -> float:
        """Lemma 57: 10 sqrt(d) (sqrt(m/s) gamma_k^(1/k) + gamma_k (2/tau)^(k-1)), a bound
        on ||nu_hat - nu|| (no noise) holding w.p. >= 1 - zeta when m >= 20 ln(4d/zeta)."""
        g = check_scalar(central_moment, "central_moment", low=0.0)
        k = check_scalar(moment_order, "moment_order", low=2.0)
        return 10.0 * math.sqrt(self.dim) * (math.sqrt(self.groups / self.batch_size)
                                             * g ** (1.0 / k) + g * (2.0 / self.clip) ** (k - 1.0))

    def release(self, rng, estimate):
        m = np.asarray(estimate, dtype=np.float64)
        return m + gaussian_noise(rng, self.sigma, m.shape)

    def __call__(self, rng, vectors):
        v = _check_vectors(vectors)
        if v.shape != (self.batch_size, self.dim):
            raise ValueError(f"vectors must have shape ({self.batch_size}, {self.dim}), "
                             f"got {v.shape}")
        return self.release(rng, median_of_means(v, self.clip, self.groups))




@dataclass(frozen=True)
class ScalarSumProtocol:
    """Parameters of the shuffle protocol P_1D for summing scalars in [0, 1]
    (Cheu, Joseph, Mao, Peng 2021, Lemma 3.1; paper Algorithm 14 / Lemma 56).

    Each user sends g + b bits: ``z_hat = floor(z g) + Ber(z g - floor(z g))``
    ones from its (randomly rounded) value plus ``Bin(b, p)`` noise ones. The
    shuffler permutes all bits; the analyzer outputs ``(1/g)(sum of bits - p b s)``,
    an unbiased estimate of ``sum_i z_i`` with variance
    ``(1/g^2)(sum_i f_i (1 - f_i) + s b p (1 - p)) <= (1/g^2)(s/4 + s b p (1 - p))``
    (f_i the rounding fractions).

    Parameters from Lemma 56 with values normalized to [0, 1] (tau = 1):
    ``g = max(2, ceil(sqrt(s)))``, ``b = floor(180 g^2 ln(2/delta) / (eps_L^2 s)) + 1``,
    ``p = 90 g^2 ln(2/delta) / (b eps_L^2 s)`` (< 1/2). The lemma bounds the
    delta-approximate max divergence of the shuffled messages for datasets
    differing in one user by ``eps_L (2/g + |z_u - z'_u|) <= eps_L (1 + 2/g)``;
    ``eps_L = epsilon / (1 + 2/g)`` so one run is (epsilon, delta)-DP in the
    shuffle model (requires eps_L <= 15).
    """

    epsilon: float
    delta: float
    batch_size: int

    def __post_init__(self):
        e = check_epsilon(self.epsilon, target=False)
        check_delta(self.delta, target=False)
        check_positive_int(self.batch_size, "batch_size")
        if math.isinf(e):
            raise ValueError("the shuffle protocol needs a finite epsilon")

    @property
    def g(self) -> int:
        return max(2, int(math.ceil(math.sqrt(self.batch_size))))

    @property
    def eps_lemma(self) -> float:
        e = self.epsilon / (1.0 + 2.0 / self.g)
        if e > 15:
            raise ValueError(f"the shuffle protocol's per-coordinate epsilon must be <= 15 "
                             f"(Lemma 56), got {e:.3g}")
        return e

    @property
    def b(self) -> int:
        s, g = self.batch_size, self.g
        return int(math.floor(180.0 * g * g * math.log(2.0 / self.delta)
                              / (self.eps_lemma ** 2 * s))) + 1

    @property
    def p(self) -> float:
        s, g = self.batch_size, self.g
        return 90.0 * g * g * math.log(2.0 / self.delta) / (self.b * self.eps_lemma ** 2 * s)

    def variance_bound(self) -> float:
        """Upper bound on the variance of the estimated sum (values in [0, 1])."""
        s, g, b, p = self.batch_size, self.g, self.b, self.p
        return (s / 4.0 + s * b * p * (1.0 - p)) / g ** 2

    def simulate(self, rng, values):
        """Simulated protocol output for every column of ``values`` (shape (s, c),
        entries in [0, 1]): the analyzer's estimate of each column sum.

        The analyzer only uses the number of ones among the shuffled bits, so
        the shuffle itself need not be materialised: the count is the sum of the
        users' rounded values plus one Binomial(s b, p) draw per column, which
        has exactly the distribution of the protocol's output."""
        v = np.asarray(values, dtype=np.float64)
        if v.ndim != 2 or v.shape[0] != self.batch_size:
            raise ValueError(f"values must have shape ({self.batch_size}, c), got {v.shape}")
        if np.any(v < 0) or np.any(v > 1):
            raise ValueError("values must lie in [0, 1]")
        scaled = v * self.g
        base = np.floor(scaled)
        rounded = base + (rng.random(v.shape) < (scaled - base))
        noise = rng.binomial(self.batch_size * self.b, self.p, size=v.shape[1])
        return (rounded.sum(axis=0) + noise - self.p * self.b * self.batch_size) / self.g


@dataclass(frozen=True)
class ShuffleMeanOracle1:
    """SIMULATION of the shuffle-model clipped mean (paper Algorithm 10 with the
    vector-sum protocol P_vec of Algorithm 11, Cheu, Joseph, Mao, Peng 2021).

    Every user clips its vector to L2 norm C, shifts each coordinate into
    [0, 2C] and runs the local randomizer of :class:`ScalarSumProtocol` on every
    coordinate (messages labelled by coordinate); a trusted shuffler permutes
    the messages of each coordinate; the analyzer estimates each coordinate
    sum, removes the shift ``s C`` and divides by ``s`` (the paper's
    Algorithm 11 prints ``- L`` and estimates a sum: we re-centre by ``s C`` and
    output the mean). Everything is simulated here in one process.

    Privacy claim (paper Lemma 49/50 via CJMP21, stated with our constants):
    with a trusted shuffler and honest users, the shuffled messages of one
    call are (epsilon, delta)-DP with respect to replacing one user's vector
    (the analyzer sees only the shuffled bits). Each coordinate is a P_1D
    run on values in [0, 2C] (replacing a user moves a value by at most the
    full range), so per coordinate it is (eps0, delta0)-DP with (eps0, delta0)
    from :func:`advanced_composition_split` over the d coordinates; advanced
    composition gives (epsilon, delta). Assumes epsilon0 <= 15, delta < 1/2.
    Unbiased for the clipped mean; per-coordinate variance at most
    ``(2C)^2 Var_bound / s^2`` (see :meth:`noise_variance_bound`).
    """

    clip: float
    batch_size: int
    dim: int
    epsilon: float
    delta: float

    def __post_init__(self):
        check_scalar(self.clip, "clip", low=0.0, low_open=True)
        check_positive_int(self.dim, "dim")
        if not check_delta(self.delta) < 0.5:
            raise ValueError(f"delta must be < 1/2 for the shuffle protocol, got {self.delta}")
        self.protocol  # noqa: B018  (validates epsilon and batch size)

    @property
    def protocol(self) -> ScalarSumProtocol:
        e0, d0 = advanced_composition_split(self.epsilon, self.delta, self.dim)
        return ScalarSumProtocol(e0, d0, self.batch_size)

    def noise_variance_bound(self) -> float:
        """Per-coordinate variance bound of (output - clipped mean)."""
        return (2.0 * self.clip) ** 2 * self.protocol.variance_bound() / self.batch_size ** 2

    def release(self, rng, clipped_vectors):
        """Run the simulated protocol on vectors already clipped to norm C."""
        u = (np.asarray(clipped_vectors, dtype=np.float64) + self.clip) / (2.0 * self.clip)
        sums = self.protocol.simulate(rng, np.clip(u, 0.0, 1.0))
        return sums * (2.0 * self.clip) / self.batch_size - self.clip

    def __call__(self, rng, vectors):
        v = _check_vectors(vectors)
        if v.shape != (self.batch_size, self.dim):
            raise ValueError(f"vectors must have shape ({self.batch_size}, {self.dim}), "
                             f"got {v.shape}")
        return self.release(rng, clip_rows_l2(v, self.clip))


@dataclass(frozen=True)
class ShuffleMeanOracle2:
    """SIMULATION of the coordinate-wise shuffle-model median of means
    (paper Algorithm 13 with P_1D of Algorithm 14).

    For every coordinate and each of the ``m`` groups, the users of the group
    run the simulated P_1D on their values clipped to [-tau, tau] and shifted
    into [0, 2 tau]; the analyzer forms the group means and their median.

    Privacy claim (paper Proposition 53): a user belongs to one group per
    coordinate, so per coordinate it takes part in one P_1D run on s/m users,
    which is (eps0, delta0)-DP (Lemma 56, values normalised by the range
    2 tau); composing the d coordinates with :func:`advanced_composition_split`
    gives (epsilon, delta)-DP in the shuffle model (trusted shuffler, honest
    users). The paper's split is eps_j = eps / (4 sqrt(2 d ln(1/delta_j))),
    delta_j = delta / (2d); we solve the advanced composition bound
    numerically instead, which is never smaller.
    """

    clip: float
    batch_size: int
    groups: int
    dim: int
    epsilon: float
    delta: float

    def __post_init__(self):
        check_scalar(self.clip, "clip", low=0.0, low_open=True)
        s = check_positive_int(self.batch_size, "batch_size")
        m = check_positive_int(self.groups, "groups")
        check_positive_int(self.dim, "dim")
        if not check_delta(self.delta) < 0.5:
            raise ValueError(f"delta must be < 1/2 for the shuffle protocol, got {self.delta}")
        if s % m:
            raise ValueError(f"groups={m} must divide batch_size={s}")
        self.protocol  # noqa: B018

    @property
    def protocol(self) -> ScalarSumProtocol:
        e0, d0 = advanced_composition_split(self.epsilon, self.delta, self.dim)
        return ScalarSumProtocol(e0, d0, self.batch_size // self.groups)

    def noise_variance_bound(self) -> float:
        """Variance bound of one group mean's protocol noise (per coordinate)."""
        size = self.batch_size // self.groups
        return (2.0 * self.clip) ** 2 * self.protocol.variance_bound() / size ** 2

    def release(self, rng, values):
        """Run the simulated protocol on raw coordinate values (shape (s, d))."""
        v = np.asarray(values, dtype=np.float64)
        m, size = self.groups, self.batch_size // self.groups
        u = (np.clip(v, -self.clip, self.clip) + self.clip) / (2.0 * self.clip)
        proto = self.protocol
        means = np.empty((m, v.shape[1]))
        for i in range(m):
            sums = proto.simulate(rng, np.clip(u[i * size:(i + 1) * size], 0.0, 1.0))
            means[i] = sums * (2.0 * self.clip) / size - self.clip
        return np.median(means, axis=0)

    def __call__(self, rng, vectors):
        v = _check_vectors(vectors)
        if v.shape != (self.batch_size, self.dim):
            raise ValueError(f"vectors must have shape ({self.batch_size}, {self.dim}), "
                             f"got {v.shape}")
        return self.release(rng, v)


