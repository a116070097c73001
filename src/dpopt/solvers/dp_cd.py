"""DP-CD: differentially private proximal coordinate descent.

Mangold, Bellet, Salmon, Tommasi, "Differentially Private Coordinate Descent
for Composite Empirical Risk Minimization", ICML 2022 (seed 003; notes in
``shared/papers/003_dp_cd.md``).

Each step draws j uniformly (with replacement) and sets

    w_j <- prox_{gamma_j psi_j}( w_j - gamma_j (g_j + eta_j) ),
    g_j  = (1/n) sum_i clip(d l(x_i^T w; y_i) / d w_j, C_j),
    C_j  = C sqrt(M_j / sum_k M_k),  gamma_j = gamma / M_j,  eta_j ~ N(0, sigma_j^2).

Privacy (replace-one adjacency). g_j has sensitivity Delta_j = 2 C_j / n, and
sigma_j = z Delta_j with one noise multiplier z for every coordinate, so every
step is a Gaussian mechanism with multiplier z whichever j is drawn. The N =
passes * p steps compose adaptively; z is calibrated numerically so that the
composition is (epsilon, delta)-DP (``accountant="exact"``: Gaussian DP,
mu = sqrt(N) / z; ``"pld"``: dp-accounting's PLD; ``"rdp"``: the paper's eq.
(18); ``"paper"``: Theorem 3.1's closed form, reproduction only). Every
intermediate iterate is a post-processing of the released noisy coordinate
gradients, so the recorded checkpoints are covered by the same guarantee.

Smoothness constants M_j (``smoothness``):

* ``"exact"``: c ||X_j||^2 / n from the data, without privacy
  (:class:`~dpopt.PrivacyLeakWarning`), as in the paper's DP-CD.
* an array: public constants given by the user.
* ``"private"`` (the paper's DP-CD-P, Section 5.2 and Appendix F): the
  per-sample constants M_j^(i) = c x_ij^2 are clipped to public bounds b_j
  (``smoothness_bounds``), averaged, and released with Laplace noise. M_j^(i)
  lies in [0, b_j], so replacing one record moves the j-th mean by at most
  b_j / n (the paper uses 2 b_j / n, which is valid but loose). With
  eps_M = ``smoothness_share`` * epsilon, coordinate j gets Laplace noise of
  scale (p / eps_M) b_j / n: each coordinate is an (eps_M / p)-DP Laplace
  mechanism, the vector is eps_M-DP by basic composition (mechanism record
  ``Laplace(p / eps_M, count=p)``). The optimisation then gets the rest of the
  budget: with ``accountant="exact"`` or ``"pld"`` the noise multiplier z is
  calibrated so that the PLD composition [Laplace part, Gaussian steps] is
  (epsilon, delta)-DP (tighter than splitting); with ``"rdp"``/``"paper"`` the
  steps are calibrated to (epsilon - eps_M, delta) and the two parts add up by
  basic composition, as in the paper. An estimate below its own noise scale
  (p / eps_M) b_j / n, including a non-positive one, is raised to that scale
  (a data-independent floor, so post-processing): it keeps gamma / M_j and
  C_j finite and errs towards smaller steps where the estimate is unreliable.
  Without ``smoothness_bounds`` the paper's crude bound b_j = c (2 max_i
  |x_ij|)^2 is computed from the data, with a PrivacyLeakWarning.

Output (``averaging``): ``"last"`` returns the last iterate (what the paper's
experiments select on); ``"epoch"`` is Algorithm 1: the N steps are cut into
inner loops of K = ``inner_steps`` steps (default p), each loop's average
(1/K) sum_{k=1..K} theta^k (theta^0 excluded) becomes the start of the next
loop, and the output is the last average (a shorter final loop is averaged
over its own length). The sum is kept lazily (``cd_steps_accumulate``), O(1)
per step; the margins are recomputed (one X w) after each average.
Checkpoints then record the latest completed average. Privacy is identical.

Random draws, in order (DP-RBCD's uniform sampler reproduces this stream):
with ``smoothness="private"`` first ``rng.laplace(size=p)`` (the smoothness
noise); then, for every pass, ``coords = rng.integers(0, p, size=p)`` followed
by ``noise = rng.standard_normal(p)``, and step k of the pass uses coordinate
coords[k] and noise noise[k]. Averaging draws nothing.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from dpopt._core.exceptions import PrivacyLeakWarning
from dpopt._core.validation import check_positive_int, check_scalar
from dpopt.kernels.cd import cd_steps, cd_steps_accumulate
from dpopt.privacy import Calibration, Gaussian, Laplace, calibrate, calibrate_gaussian
from dpopt.solvers._base import Checkpoints, DefaultUse, Option, make_result, one_of, register_solver
from dpopt.solvers._common import (
    CHECKPOINT_EVERY,
    CLIP,
    GAUSSIAN_ACCOUNTANTS,
    PASSES,
    SMOOTHNESS,
    STEP,
    cd_work,
    check_clip,
    check_vector,
    coordinate_clips,
    coordinate_smoothness,
    coordinate_steps,
    mean_noise_std,
    run_length,
    scaled_domain,
)

# ---------------------------------------------------------------------------
# DP-CD-P: private smoothness constants


def smoothness_bounds_of(problem, bounds):
    """Public bounds b_j on the per-sample constants c x_ij^2: the user's, or the paper's
    crude c (2 max_i |x_ij|)^2 computed from the data (with a PrivacyLeakWarning)."""
    if bounds is not None:
        b = check_vector(bounds, "smoothness_bounds", problem.dim)
        if np.any(b <= 0):
            raise ValueError("smoothness_bounds must be positive")
        return b
    warnings.warn("smoothness='private' without smoothness_bounds derives the bounds "
                  "c (2 max|x_ij|)^2 from the private data without privacy (as the DP-CD paper "
                  "does); pass smoothness_bounds (public knowledge) to avoid this",
                  PrivacyLeakWarning, stacklevel=3)
    X = problem.X
    amax = (np.asarray(abs(X).max(axis=0).todense()).ravel() if problem.is_sparse
            else np.abs(X).max(axis=0))
    b = problem.loss.curvature * (2.0 * amax) ** 2
    return np.where(b > 0, b, problem.loss.curvature)  # all-zero column: any positive bound


def clipped_smoothness_means(problem, bounds):
    """(1/n) sum_i min(c x_ij^2, b_j) for every j (the quantity DP-CD-P privatizes)."""
    c = problem.loss.curvature
    X = problem.X
    if problem.is_sparse:
        sq = X.multiply(X).tocsc() * c
        sq.data = np.minimum(sq.data, np.repeat(bounds, np.diff(sq.indptr)))
        total = np.asarray(sq.sum(axis=0)).ravel()
    else:
        total = np.minimum(c * X * X, bounds).sum(axis=0)
    return total / problem.n_samples


def private_smoothness(problem, bounds, eps_m, rng):
    """Laplace estimate of the M_j with budget ``eps_m`` (module docstring): returns
    (M_priv, noise multiplier of the per-coordinate Laplace mechanisms)."""
    p, n = problem.dim, problem.n_samples
    mean = clipped_smoothness_means(problem, bounds)
    draws = rng.laplace(size=p)  # drawn even without privacy: one documented random stream
    if math.isinf(eps_m):
        return mean, 0.0
    mult = p / eps_m  # scale / sensitivity, sensitivity b_j / n
    scale = mult * bounds / n
    estimate = mean + scale * draws
    return np.maximum(estimate, scale), mult


@functools.lru_cache(maxsize=512)
def calibrate_with_laplace(epsilon, delta, p, eps_m, n_steps, accountant):
    """Noise multiplier of the N Gaussian steps after an eps_m-DP Laplace release (cached).

    ``"exact"``/``"pld"``: PLD composition of both parts; ``"rdp"``/``"paper"``: the
    steps get (epsilon - eps_m, delta), then basic composition (the paper's split).
    """
    if accountant in ("exact", "pld"):
        return calibrate(lambda z: [Laplace(p / eps_m, p), Gaussian(z, n_steps)], epsilon, delta,
                         accountant="pld")
    rest = epsilon - eps_m
    cal = calibrate_gaussian(rest, delta, n_steps, accountant=accountant)
    return Calibration(cal.noise_multiplier, cal.epsilon + eps_m, delta,
                       f"{cal.accountant}+basic", cal.adjacency)


# ---------------------------------------------------------------------------
# the solver


class _Averager:
    """Algorithm 1's inner-loop averages, kept lazily (module docstring)."""

    def __init__(self, problem, w, K):
        self.problem, self.K = problem, K
        self.start = w.copy()
        self.acc = np.zeros_like(w)
        self.m = 0  # steps done in the current inner loop

    def run(self, work, w, coords, noise, steps, clips, sigma):
        """Run a pass's steps, closing inner loops on the way; returns (work, w)."""
        k0 = 0
        while k0 < len(coords):
            seg = min(len(coords) - k0, self.K - self.m)
            # a change at the loop's s-th step (1-based) is in theta^s .. theta^K
            weights = (self.K - self.m - np.arange(seg)).astype(np.float64)
            cd_steps_accumulate(work, w, coords[k0:k0 + seg], noise[k0:k0 + seg], steps, clips,
                                sigma, self.acc, weights)
            self.m += seg
            k0 += seg
            if self.m == self.K:
                work, w = self._restart(self.start + self.acc / self.K)
        return work, w

    def _restart(self, avg):
        self.start = avg.copy()
        self.acc[:] = 0.0
        self.m = 0
        return cd_work(self.problem, self.problem.margins(avg)), avg

    def final(self, w):
        """Output: the last average (a partial last loop is averaged over its m steps)."""
        if self.m == 0:
            return self.start
        # sum_{k<=m} theta^k = m theta^0 + acc - (K - m) (theta^m - theta^0)
        return self.start + (self.acc - (self.K - self.m) * (w - self.start)) / self.m


OPTIONS = (
    PASSES.but(doc="number of passes; one pass is p coordinate steps (N = passes * p)"),
    STEP.but(doc="gamma, the step scale: gamma_j = gamma / M_j"),
    CLIP.but(doc="C, the overall clipping threshold (inf only with epsilon = inf)"),
    SMOOTHNESS.but(doc='M_j: "exact" (PrivacyLeakWarning), "private" (DP-CD-P) or a public array'),
    Option("smoothness_bounds", None, None, 'public bounds b_j on c x_ij^2 (smoothness="private")'),
    Option("smoothness_share", 0.1, None, "share of epsilon spent on the private M_j"),
    Option("averaging", "last", one_of("last", "epoch"), "last iterate or inner-loop averages"),
    Option("inner_steps", None, None, 'K, the inner-loop length for averaging="epoch"'),
    Option("accountant", "exact", one_of(*GAUSSIAN_ACCOUNTANTS), "calibration of the noise"),
    CHECKPOINT_EVERY,
)


def default_settings(*, loss, n, dim, mu, row_bound, alpha=0.0, huber_threshold=1.0,
                     **public):
    """DP-CD on the default path's scaled domain: T = :func:`~dpopt.solvers._common.run_length`
    passes with gamma = 1 and the coordinate smoothness bound loss'' max|x_ij|^2 <= c (every
    scaled feature is in [-1, 1]) passed as public ``smoothness``; clip G sqrt(dim), the
    largest coordinate-gradient vector norm on the domain. Public numbers only."""
    T = run_length(n, dim, mu)
    G, c, _ = scaled_domain(loss, row_bound, T, huber_threshold)
    return {"passes": T, "step": 1.0, "clip": G * math.sqrt(dim),
            "smoothness": np.full(dim, max(c, 1e-12))}


@register_solver("dp-cd", description="DP proximal coordinate descent with coordinate-wise "
                 "clipping (Mangold et al. 2022)", family="dp-cd", options=OPTIONS,
                 run_length="passes", audit={"passes": 10},
                 mechanism="Gaussian noise on one clipped coordinate gradient per step, passes * p steps",
                 sensitivity="2 C_j / n for coordinate j (coordinate-wise clipping, sum_j C_j^2 = C^2)",
                 default_path=DefaultUse(
                     default_settings, rank=10,
                     why="non-smooth penalty or loss: DP coordinate descent (its prox handles "
                         "L1) with the rules of dpopt.pipeline.default_path.rules",
                     losses=("squared", "logistic", "huber", "absolute"),
                     penalties=("none", "l1", "l2", "elastic_net")))
def fit_dp_cd(problem, *, epsilon, delta, rng, passes=10, step=1.0, clip=1.0,
              smoothness="exact", smoothness_bounds=None, smoothness_share=0.1,
              averaging="last", inner_steps=None, accountant="exact", checkpoint_every=1):
    """Fit with DP-CD (module docstring).

    Parameters
    ----------
    passes : int
        Number of passes; one pass is p coordinate steps (N = passes * p).
    step : float
        gamma, the step scale: gamma_j = gamma / M_j.
    clip : float
        C, the overall clipping threshold (``inf`` only with epsilon = inf).
    smoothness : "exact", "private" or array of shape (p,)
        M_j used for steps and clipping thresholds.
    smoothness_bounds : array of shape (p,), optional
        Public bounds b_j on c x_ij^2 for ``smoothness="private"``.
    smoothness_share : float in (0, 1)
        Share of epsilon spent on the private M_j (paper: 0.1).
    averaging : "last" or "epoch"
        Output the last iterate, or Algorithm 1's inner-loop averaging.
    inner_steps : int, optional
        K, the inner-loop length in steps for ``averaging="epoch"`` (default p).
    accountant : "exact", "pld", "rdp" or "paper"
        How the noise multiplier is calibrated (module docstring).
    checkpoint_every : int
        Record the iterate every this many passes.
    """
    passes = check_positive_int(passes, "passes")
    step = check_scalar(step, "step", low=0.0, low_open=True)
    clip = check_clip(epsilon, clip)
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    private_m = isinstance(smoothness, str) and smoothness == "private"
    if smoothness_bounds is not None and not private_m:
        raise ValueError("smoothness_bounds is only used with smoothness='private'")
    share = check_scalar(smoothness_share, "smoothness_share", low=0.0, high=1.0, low_open=True,
                         high_open=True)
    if inner_steps is not None:
        if averaging != "epoch":
            raise ValueError("inner_steps is only used with averaging='epoch'")
        inner_steps = check_positive_int(inner_steps, "inner_steps")
    p = problem.dim
    n_steps = passes * p

    mechanisms = []
    if private_m:
        bounds = smoothness_bounds_of(problem, smoothness_bounds)
        eps_m = share * epsilon
        if accountant == "paper" and epsilon - eps_m > 1:
            raise ValueError("accountant='paper' needs (1 - smoothness_share) * epsilon <= 1")
        M, lap_mult = private_smoothness(problem, bounds, eps_m, rng)
        if math.isinf(epsilon):
            cal = calibrate_gaussian(epsilon, delta, n_steps)
        else:
            cal = calibrate_with_laplace(epsilon, delta, p, eps_m, n_steps, accountant)
        mechanisms.append(Laplace(lap_mult, p))
    else:
        M = coordinate_smoothness(problem, smoothness)
        cal = calibrate_gaussian(epsilon, delta, n_steps, accountant=accountant)
    mechanisms.append(Gaussian(cal.noise_multiplier, n_steps))
    clips = coordinate_clips(M, clip)
    steps = coordinate_steps(M, step)
    if cal.noise_multiplier == 0:  # epsilon = inf (the only case clip = inf is allowed)
        sigma = np.zeros(p)
    else:
        sigma = mean_noise_std(cal.noise_multiplier, clips, problem.n_samples)

    w = problem.zeros()
    work = cd_work(problem, problem.margins(w))  # margins, kept in the kernels' working form
    avg = _Averager(problem, w, inner_steps or p) if averaging == "epoch" else None
    ck = Checkpoints()
    ck.record(w, 0)
    for t in range(1, passes + 1):
        coords = rng.integers(0, p, size=p)
        noise = rng.standard_normal(p)
        if avg is None:
            cd_steps(work, w, coords, noise, steps, clips, sigma)
        else:
            work, w = avg.run(work, w, coords, noise, steps, clips, sigma)
        if avg is not None and t == passes:
            w = avg.final(w)
        if t % checkpoint_every == 0 or t == passes:
            ck.record(w if avg is None or t == passes else avg.start, t)
    params = {"passes": passes, "step": step, "clip": clip, "accountant": accountant,
              "smoothness": smoothness if isinstance(smoothness, str) else "given",
              "averaging": averaging}
    if private_m:
        params["smoothness_share"] = share
    if avg is not None:
        params["inner_steps"] = avg.K
    return make_result(problem, w, solver="dp-cd", calibration_or_spent=cal,
                       mechanisms=mechanisms, n_iter=n_steps, passes=passes, checkpoints=ck,
                       params=params)
