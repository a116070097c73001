"""DP-SVRG and DP-SVRG++: noisy proximal SVRG with clipped, Poisson-sampled inner steps.

Wang, Ye, Xu, "Differentially Private Empirical Risk Minimization Revisited:
Faster and More General", NIPS 2017 (arXiv:1802.05251), Algorithms 1 and 2;
notes in ``shared/papers/001_dp_erm_revisited.md``.

Algorithm (one epoch s, snapshot w~ = w~_{s-1}, step eta = step / L)::

    g~  = (1/n) sum_i clip(grad l_i(w~))                       full clipped gradient at w~
    for t = 1..m_s:
        B_t ~ Poisson(q): each record independently with prob. q = b / n
        R_t = sum_{i in B_t} [clip(grad l_i(w_{t-1})) - clip(grad l_i(w~))] + b g~ + N(0, sigma^2 I)
        w_t = prox_{eta psi}(w_{t-1} - eta R_t / b)
    w~_s = (1/m_s) sum_t w_t                                    snapshot = average of the iterates

``"dp-svrg"`` (Algorithm 1, strongly convex F): m_s = m and every epoch starts
from the snapshot, w_0 = w~_{s-1}. ``"dp-svrg++"`` (Algorithm 2): m_s = 2^s m
and epoch s starts from the previous epoch's last iterate. Both return the
last snapshot w~_T. clip is L2 clipping to C of each per-sample gradient (for
a linear model a scalar weight per row, no per-sample matrix); the penalty
enters only through the prox. b is the expected batch size (public, default
round(sqrt(n))); the paper's algorithm is b = 1 (one index per step),
``batch_size > 1`` is the minibatch extension of the notes (item 13), outside
the paper's theorems. With tight accounting b = 1 needs a noise multiplier
near its floor (~0.2 for the paper's experiment), i.e. noise of std ~0.7 G per
coordinate on every step: docs/reproduction/dp-svrg/.

Privacy (replace-one adjacency, the library default and the paper's)
--------------------------------------------------------------------
Every inner step releases R_t (the iterates are post-processing of the R_t).
Each record contributes d_i = clip(g_i(w)) - clip(g_i(w~)) to the sampled sum,
with ||d_i|| <= 2C because the two terms are clipped separately, so replacing
one record moves the sampled sum by at most **4C** (if it is sampled). The
full-gradient term b g~ moves by at most b 2C / n = **2C q**, and it moves
whether or not the record is sampled. g~ is not noised on its own: it enters
every step un-noised, so its cost is charged at **every** inner step (charging
it once per epoch would be wrong). The single Gaussian N(0, sigma^2 I) is split
in the analysis only (paper, App. B.2): for any rho in (0, 1),
sigma^2 = (1 - rho) sigma^2 + rho sigma^2, and R_t is a post-processing of the
pair (sampled sum + N(0, (1-rho) sigma^2), b g~ + N(0, rho sigma^2)). With
z = sigma / (4C) the K = sum_s m_s steps compose as

    SubsampledGaussian(z sqrt(1 - rho), q, K)  and  Gaussian(2 z sqrt(rho) / q, K)

(:func:`svrg_mechanisms`), accounted with dp-accounting's PLD accountant (its
replace-one analysis of Poisson subsampling, as :mod:`dpopt.solvers.dp_sgd`),
z calibrated numerically with :func:`dpopt.privacy.calibrate`. The sampler is
Poisson, as the analysis assumes (invariant 2). rho is any public number; by
default it is chosen numerically (``noise_split="auto"``, :func:`choose_split`):
in the paper's regime (b = 1, q = 1/n) almost all variance goes to the sampled
term (rho ~ 3%); for minibatches the optimum is about rho = 1/3, and then the
full gradient costs about as much as the sampled term (its sensitivity 2Cq is
not amplified by sampling, the sampled term's 4C is, by q): charging it at
every step raises the noise by ~1.5x over plain subsampled steps.

Why not noise g~ once per epoch (g^ = g~ + N(0, sigma_g^2 I)) and reuse g^
in the m steps as post-processing? That is also correct: T Gaussian releases
of sensitivity 2C/n plus K subsampled steps whose noise covers the sampled
term alone. It is not cheaper. Match the error the full-gradient noise puts
into the sum of an epoch's gradient estimates v_t = R_t / b: per epoch
m sigma_g (the same draw m times) against sqrt(m) sqrt(rho) sigma / b (fresh
draws), equal when sigma_g^2 = rho sigma^2 / (m b^2). Then the T per-epoch
releases are mu-GDP with mu^2 = T (2C/n)^2 / sigma_g^2 = K (2Cq)^2 / (rho
sigma^2), exactly the mu of the K per-step charges, and the sampled term has
the same (1 - rho) sigma^2 in both. Same privacy, same error variance; the
per-step form needs one draw per step and leaves rho to the accountant (any
rho certifies the same run, so it can be optimized after the fact), the
per-epoch form fixes rho in the algorithm and its error is constant within an
epoch. We implement the paper's per-step form.

The paper's closed-form noise (eqs. 3, 6, 9, 11) is kept only as
:func:`paper_noise_variance`, a documented comparison never used to run.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from dpopt._core.validation import check_choice, check_positive_int, check_scalar
from dpopt.kernels.grad import l2clip_weights
from dpopt.kernels.svrg import svrg_steps
from dpopt.privacy import Calibration, Gaussian, SubsampledGaussian, calibrate, epsilon_of
from dpopt.privacy.accounting import PLD_DISCRETIZATION, PLD_SEARCH_DISCRETIZATION
from dpopt.solvers._base import (
    Checkpoints,
    Option,
    make_result,
    one_of,
    positive_int,
    register_solver,
)
from dpopt.solvers._common import (
    BATCH_SIZE,
    CHECKPOINT_EVERY,
    CLIP,
    SMOOTH_LOSSES,
    SMOOTHNESS,
    STEP,
    adjacency_factor,
    check_clip,
    per_sample_smoothness,
    poisson_batches,
)

SPLIT_GRID = (1e-3, 3e-3, 0.01, 0.03, 0.1, 0.2, 1 / 3)
CHUNK_ELEMENTS = 2_000_000  # noise drawn per chunk of inner steps (chunk * p doubles)


class TheoryConditionWarning(UserWarning):
    """The parameters do not satisfy a (sufficient) condition of the paper's utility analysis."""


# ---------------------------------------------------------------------------
# theory helpers


def svrg_condition(step_size, smoothness, strong_convexity, epoch_length) -> float:
    """A of eq. (4) (Theorem 4.2); DP-SVRG's linear rate needs A < 1/2.

    A = 1 / (eta (1 - 8 eta L) mu m) + 8 L eta (m + 1) / (m (1 - 8 L eta)), with
    eta the absolute step size, L the per-sample smoothness, mu the strong
    convexity of F + psi and m the epoch length. ``inf`` when 8 eta L >= 1 or
    mu = 0. The condition is sufficient, not necessary (and privacy does not
    depend on it). It cannot hold for eta >= 1 / (24 L); the smallest feasible
    m is about 193 L / mu, at eta = 1 / (48 L).
    """
    eta, L, mu, m = (float(step_size), float(smoothness), float(strong_convexity),
                     float(epoch_length))
    if mu <= 0 or 8 * eta * L >= 1 or eta <= 0:
        return math.inf
    return 1 / (eta * (1 - 8 * eta * L) * mu * m) + 8 * L * eta * (m + 1) / (m * (1 - 8 * L * eta))


def min_epoch_length(step_size, smoothness, strong_convexity):
    """Smallest m with :func:`svrg_condition` < 1/2, or ``None`` if no m works."""
    eta, L, mu = float(step_size), float(smoothness), float(strong_convexity)
    if mu <= 0 or not 0 < 24 * eta * L < 1:
        return None
    # A < 1/2  <=>  m (1/2 - 8 L eta / (1 - 8 L eta)) > 1 / (eta (1 - 8 eta L) mu) + 8 L eta / (1 - 8 L eta)
    r = 8 * L * eta / (1 - 8 * L * eta)
    m = (1 / (eta * (1 - 8 * eta * L) * mu) + r) / (0.5 - r)
    if not m < 2.0 ** 52:  # beyond exact integers: no usable epoch length (and m += 1 stalls)
        return None
    m = max(1, math.floor(m) + 1)
    for _ in range(64):  # the closed form is within rounding of the answer
        if svrg_condition(eta, L, mu, m) < 0.5:
            return m
        m += 1
    return None


def paper_noise_variance(algorithm, *, n_samples, epsilon, delta, epochs, epoch_length=None,
                         lipschitz=1.0, c=1.0) -> float:
    """The paper's closed-form noise variance per coordinate (comparison only, never used to run).

    ``"dp-svrg"`` eq. (3): c G^2 T m ln(1/delta) / (n^2 eps^2); ``"dp-svrg++"`` eq. (6):
    c G^2 2^T m ln(2/delta) / (n^2 eps^2); ``"dp-accmd"`` eq. (9) and ``"dp-gd"``
    eq. (11): c G^2 T ln(1/delta) / (n^2 eps^2) (``epochs`` = T iterations). The
    constant c is unspecified in the paper (c = 1 here) and the SVRG forms are
    only claimed for eps <= c_1 K / n^2; at realistic sizes they are far below
    what a numerical accountant certifies (docs/reproduction/dp-svrg/).
    """
    check_choice(algorithm, "algorithm", ("dp-svrg", "dp-svrg++", "dp-accmd", "dp-gd"))
    n = check_positive_int(n_samples, "n_samples")
    eps = check_scalar(epsilon, "epsilon", low=0.0, low_open=True)
    delta = check_scalar(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    T = check_positive_int(epochs, "epochs")
    G = check_scalar(lipschitz, "lipschitz", low=0.0, low_open=True)
    c = check_scalar(c, "c", low=0.0, low_open=True)
    base = c * G * G / (n * n * eps * eps)
    if algorithm in ("dp-svrg", "dp-svrg++"):
        m = check_positive_int(epoch_length, "epoch_length")
        if algorithm == "dp-svrg":
            return base * T * m * math.log(1 / delta)
        return base * 2.0 ** T * m * math.log(2 / delta)
    return base * T * math.log(1 / delta)


# ---------------------------------------------------------------------------
# accounting


def svrg_mechanisms(noise_multiplier, sampling_rate, steps, split):
    """The composition of ``steps`` DP-SVRG inner steps (module docstring).

    ``noise_multiplier`` z = sigma / (4C); ``split`` rho is the share of sigma^2
    attributed to the full-gradient term in the analysis.
    """
    z, q = float(noise_multiplier), float(sampling_rate)
    if z == 0:
        return [SubsampledGaussian(0.0, q, steps), Gaussian(0.0, steps)]
    return [SubsampledGaussian(z * math.sqrt(1.0 - split), q, steps),
            Gaussian(2.0 * z * math.sqrt(split) / q, steps)]


def _epsilon_on_grid(z, rate, steps, split, delta, grid):
    return epsilon_of(svrg_mechanisms(z, rate, steps, split), delta, accountant="pld",
                      _pld_step=grid)


def choose_split(epsilon, delta, sampling_rate, steps) -> float:
    """A noise split rho from :data:`SPLIT_GRID` with (nearly) the smallest epsilon.

    Public quantities only. (1) A reference multiplier at rho = 1/3 by a short
    bisection on calibrate's coarse search grid; (2) the rho with the smallest
    epsilon there on that grid; (3) from it, walk up the grid on the fine
    certification grid while epsilon decreases. The coarse grid's pessimism
    grows with the number of subsampled compositions and hardly touches the
    single Gaussian term, so it favours too small a rho: hence the walk up on
    the fine grid. Any rho gives a valid analysis (the calibration certifies
    the chosen one); the choice only affects how tight it is. rho = 1/3 is the
    optimum when the subsampled term is nearly Gaussian (minibatches: its
    sensitivity 4C is amplified by q, the full gradient's 2Cq is not, and
    4 / (1 - rho) + 1 / rho is smallest at 1/3); a batch of one wants ~1-3%.
    """
    coarse = min(PLD_SEARCH_DISCRETIZATION, epsilon / 200)
    fine = min(PLD_DISCRETIZATION, epsilon / 2000)

    def eps(z, rho, grid):
        return _epsilon_on_grid(z, sampling_rate, steps, rho, delta, grid)

    lo = hi = 1.0
    while eps(hi, 1 / 3, coarse) > epsilon and hi < 1e12:
        lo, hi = hi, 2 * hi
    while eps(lo, 1 / 3, coarse) <= epsilon and lo > 1e-6:
        hi, lo = lo, lo / 2
    for _ in range(3):
        mid = math.sqrt(lo * hi)
        if eps(mid, 1 / 3, coarse) <= epsilon:
            hi = mid
        else:
            lo = mid
    start = min(range(len(SPLIT_GRID)), key=lambda i: eps(hi, SPLIT_GRID[i], coarse))
    best, best_eps = SPLIT_GRID[start], eps(hi, SPLIT_GRID[start], fine)
    for rho in SPLIT_GRID[start + 1:]:
        e = eps(hi, rho, fine)
        if e >= best_eps:
            break
        best, best_eps = rho, e
    return best


@functools.lru_cache(maxsize=128)
def calibrate_svrg(epsilon, delta, sampling_rate, steps, noise_split="auto"):
    """(Calibration, rho) for ``steps`` inner steps at sampling rate q (cached);
    ``noise_split="auto"`` picks rho with :func:`choose_split`."""
    if math.isinf(epsilon):
        return Calibration(0.0, math.inf, delta, "none", "replace-one"), math.nan
    rho = (choose_split(epsilon, delta, sampling_rate, steps) if noise_split == "auto"
           else float(noise_split))
    cal = calibrate(lambda z: svrg_mechanisms(z, sampling_rate, steps, rho), epsilon, delta,
                    adjacency="replace-one", accountant="pld")
    return cal, rho


# ---------------------------------------------------------------------------
# sampling and the inner loop


def _inner_loop(problem, Xrows, w, snap_weights, snap_grad, n_steps, rate, batch_size, eta,
                scale, clip, rng, wsum):
    """``n_steps`` inner steps in chunks; returns the number of per-sample gradients."""
    p = problem.dim
    chunk = max(1, min(n_steps, CHUNK_ELEMENTS // p))
    done = evals = 0
    while done < n_steps:
        c = min(chunk, n_steps - done)
        idx, starts = poisson_batches(rng, problem.n_samples, rate, c, draw="sizes")
        noise = rng.standard_normal((c, p)) if scale > 0 else np.zeros((c, p))
        svrg_steps(Xrows, problem.y, problem.row_norms, problem.loss.code, problem.loss.param,
                   problem.penalty.arrays, w, snap_weights, snap_grad, starts, idx, noise,
                   1.0 / batch_size, scale, eta, clip, wsum)
        evals += 2 * idx.size
        done += c
    return evals


def _check_theory(variant, eta, L, mu, m, condition):
    if condition == "ignore":
        return
    if variant == "dp-svrg":
        A = svrg_condition(eta, L, mu, m)
        if A < 0.5:
            return
        if mu <= 0:
            msg = ("DP-SVRG's utility analysis (Theorem 4.2) needs a strongly convex objective "
                   "(strong_convexity = 0 here: add an L2 penalty, pass strong_convexity, or use "
                   "dp-svrg++)")
        else:
            need = min_epoch_length(eta, L, mu)
            at48 = min_epoch_length(1 / (48 * L), L, mu)
            fix = (f"epoch_length >= {need} at this step" if need is not None else
                   f"step < 1/24 (eta L = {eta * L:.3g}; e.g. step = 1/48 with epoch_length >= "
                   f"{at48})" if at48 is not None else
                   f"an epoch length beyond any practical run (L / mu = {L / mu:.3g})")
            msg = (f"step size and epoch length violate condition (4) of DP-SVRG's analysis: "
                   f"A = {A:.3g} >= 1/2 (eta = {eta:.3g}, L = {L:.3g}, mu = {mu:.3g}, "
                   f"m = {m}); it needs {fix}")
    else:
        if eta * L <= 1 / 13 + 1e-12:
            return
        msg = (f"DP-SVRG++'s analysis (Theorem 4.4) uses eta = 1/(13 L); got eta L = "
               f"{eta * L:.3g} (step <= 1/13)")
    msg += ". The condition is sufficient for the utility bound only; privacy is unaffected."
    if condition == "raise":
        raise ValueError(msg)
    warnings.warn(msg, TheoryConditionWarning, stacklevel=4)


def _strong_convexity(problem, strong_convexity):
    if strong_convexity is None:
        return float(np.min(problem.penalty.l2))  # public: the penalty is the user's choice
    return check_scalar(strong_convexity, "strong_convexity", low=0.0)


def _fit(problem, variant, *, epsilon, delta, rng, epochs, epoch_length, batch_size, step, clip,
         smoothness, strong_convexity, noise_split, condition, checkpoint_every):
    n = problem.n_samples
    epochs = check_positive_int(epochs, "epochs")
    batch_size = (max(1, round(math.sqrt(n))) if batch_size is None
                  else check_positive_int(batch_size, "batch_size"))
    if batch_size > n:
        raise ValueError(f"batch_size must be <= n_samples={n}, got {batch_size}")
    if epoch_length is not None:
        m = check_positive_int(epoch_length, "epoch_length")
    elif variant == "dp-svrg":
        m = max(1, round(n / batch_size))
    else:
        m = max(1, round(8 * n / (batch_size * 2 ** min(epochs, 40))))
    step = check_scalar(step, "step", low=0.0, low_open=True)
    clip = check_clip(epsilon, clip)
    if not (isinstance(noise_split, str) and noise_split == "auto"):
        noise_split = check_scalar(noise_split, "noise_split", low=0.0, high=1.0, low_open=True,
                                   high_open=True)
    check_choice(condition, "condition", ("warn", "raise", "ignore"))
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    if variant == "dp-svrg":
        lengths = [m] * epochs
    else:
        if epochs > 40:
            raise ValueError(f"epochs must be <= 40 for dp-svrg++ (2^epochs inner steps), "
                             f"got {epochs}")
        lengths = [m * 2 ** s for s in range(1, epochs + 1)]
    n_steps = sum(lengths)
    mu = _strong_convexity(problem, strong_convexity)
    L = per_sample_smoothness(problem, smoothness)
    eta = step / L
    if batch_size == 1:  # the paper's algorithm; its analysis says nothing about minibatches
        _check_theory(variant, eta, L, mu, m, condition)

    rate = batch_size / n
    cal, rho = calibrate_svrg(epsilon, delta, rate, n_steps, noise_split)
    # a per-sample term grad l_i(w) - grad l_i(w~) has norm <= 2C: one record moves the
    # batch sum by 2 * adjacency_factor() * C = 4C under replace-one
    sigma = (cal.noise_multiplier * (2.0 * adjacency_factor()) * clip
             if cal.noise_multiplier > 0 else 0.0)
    Xrows = problem.X_rows

    snap = problem.zeros()
    w = snap.copy()
    ck = Checkpoints()
    ck.record(snap, 0)
    evals = 0
    for s, m_s in enumerate(lengths, start=1):
        snap_weights = l2clip_weights(problem.y, problem.row_norms, problem.loss.code,
                                      problem.loss.param, problem.margins(snap), clip)
        snap_grad = np.asarray(problem.X.T @ snap_weights).ravel() / n
        evals += n
        if variant == "dp-svrg":
            w = snap.copy()
        wsum = np.zeros(problem.dim)
        evals += _inner_loop(problem, Xrows, w, snap_weights, snap_grad, m_s, rate, batch_size,
                             eta, sigma / batch_size, clip, rng, wsum)
        snap = wsum / m_s
        if s % checkpoint_every == 0 or s == epochs:
            ck.record(snap, evals / n)
    params = {"epochs": epochs, "epoch_length": m, "batch_size": batch_size, "step": step,
              "step_size": eta, "smoothness": L, "clip": clip, "noise_split": rho,
              "sigma": sigma, "inner_steps": n_steps, "gradient_evaluations": evals,
              "strong_convexity": mu}
    return make_result(problem, snap, solver=variant, calibration_or_spent=cal,
                       mechanisms=svrg_mechanisms(cal.noise_multiplier, rate, n_steps, rho),
                       n_iter=n_steps, passes=evals / n, checkpoints=ck, params=params)


_OPTIONS_DOC = """
    Parameters
    ----------
    epochs : int
        T, the number of epochs (each starts with a full clipped gradient).
    epoch_length : int, optional
        m, inner steps per epoch (dp-svrg++: epoch s has 2^s m). Default
        n / b for dp-svrg (an epoch samples n records in expectation: 3 passes
        with its full gradient) and 8 n / (b 2^T) for dp-svrg++ (the last
        epoch samples 8 n records).
    batch_size : int, optional
        b, the expected Poisson batch size (sampling rate b / n). Default
        round(sqrt(n)); 1 is the paper's algorithm (with tight accounting its
        noise is far too large at realistic sizes: docs/reproduction/dp-svrg/).
    step : float
        The step size is eta = step / L.
    clip : float
        C, L2 clipping threshold of every per-sample gradient (the paper's G when
        the loss is G-Lipschitz and C >= G). ``inf`` only with epsilon = inf.
    smoothness : "exact" or float
        L, a bound on the smoothness of every l(x_i^T .; y_i) (e.g. 0.25 for the
        logistic loss with ||x_i|| <= 1); ``"exact"`` computes c max ||x_i||^2 from
        the data without privacy (:class:`~dpopt.PrivacyLeakWarning`).
    noise_split : "auto" or float in (0, 1)
        rho, the share of sigma^2 attributed to the full-gradient term in the
        accounting (module docstring); ``"auto"`` picks it numerically.
    condition : "warn", "raise" or "ignore"
        What to do when, with ``batch_size=1`` (the setting of the paper's
        analysis), the step / epoch length miss the sufficient condition of
        its utility theorem (a :class:`TheoryConditionWarning`): eq. (4) for
        dp-svrg, eta <= 1/(13 L) for dp-svrg++. Not a privacy matter.
    checkpoint_every : int
        Record the snapshot every this many epochs.

    ``passes`` of the result counts per-sample gradient evaluations / n with the
    paper's bookkeeping (n per full gradient, 2 per sampled record: T(n + 2m) for
    b = 1). The kernel keeps the n loss derivatives of the snapshot, so it
    actually computes one new gradient per sampled record.
"""


_SVRG_OPTIONS = (
    Option("epochs", 15, positive_int, "T, the number of epochs (each starts with a full "
           "clipped gradient)"),
    Option("epoch_length", None, None, "m, inner steps per epoch (dp-svrg++: epoch s has 2^s m)"),
    BATCH_SIZE.but(doc="b, the expected Poisson batch size (rate b / n); default round(sqrt(n))"),
    STEP.but(default=0.5, doc="the step size is eta = step / L"),
    CLIP.but(doc="C, L2 clipping threshold of every per-sample gradient"),
    SMOOTHNESS.but(doc='L, the per-sample smoothness; "exact" reads it from the data (warns)'),
    Option("strong_convexity", None, None, "mu for the condition check (dp-svrg only)"),
    Option("noise_split", "auto", None, "rho, the share of sigma^2 on the full-gradient term"),
    Option("condition", "warn", one_of("warn", "raise", "ignore"), "the paper's condition "
           "(eq. 4) with batch_size=1 fails"),
    CHECKPOINT_EVERY,
)
_SVRGPP_OPTIONS = tuple(o.but(default=8) if o.name == "epochs" else o for o in _SVRG_OPTIONS
                        if o.name != "strong_convexity")


#: What one inner step releases (module docstring, "Privacy").
_SVRG_RELEASE = {"mechanism": "Poisson-sampled variance-reduced sum plus the full clipped "
                              "gradient, one Gaussian per inner step",
                 "sensitivity": "4 C for the sampled sum, 2 C q for the full-gradient term"}


@register_solver("dp-svrg", description="DP proximal SVRG, Poisson-sampled clipped inner steps "
                 "(Wang, Ye, Xu 2017, Alg. 1)", losses=SMOOTH_LOSSES, family="dp-svrg",
                 options=_SVRG_OPTIONS, run_length="epochs",
                 audit={"epochs": 1, "epoch_length": 1, "batch_size": 25,
                        "strong_convexity": 1.0},
                 **_SVRG_RELEASE)
def fit_dp_svrg(problem, *, epsilon, delta, rng, epochs=15, epoch_length=None, batch_size=None,
                step=0.5, clip=1.0, smoothness="exact", strong_convexity=None,
                noise_split="auto", condition="warn", checkpoint_every=1):
    """Fit with DP-SVRG (module docstring): every epoch restarts from the snapshot.

    strong_convexity : float, optional
        mu of F + psi for the condition check (eq. 4); default the smallest L2
        coefficient of the penalty (public).
    """
    return _fit(problem, "dp-svrg", epsilon=epsilon, delta=delta, rng=rng, epochs=epochs,
                epoch_length=epoch_length, batch_size=batch_size, step=step, clip=clip,
                smoothness=smoothness, strong_convexity=strong_convexity,
                noise_split=noise_split, condition=condition, checkpoint_every=checkpoint_every)


@register_solver("dp-svrg++", description="DP proximal SVRG++ with doubling epochs, for "
                 "non-strongly convex objectives (Wang, Ye, Xu 2017, Alg. 2)",
                 losses=SMOOTH_LOSSES, family="dp-svrg", options=_SVRGPP_OPTIONS,
                 run_length="epochs", audit={"epochs": 1, "epoch_length": 1, "batch_size": 25},
                 mechanism="as dp-svrg, with epochs of doubling length",
                 sensitivity=_SVRG_RELEASE["sensitivity"])
def fit_dp_svrg_pp(problem, *, epsilon, delta, rng, epochs=8, epoch_length=None,
                   batch_size=None, step=0.5, clip=1.0, smoothness="exact", noise_split="auto",
                   condition="warn", checkpoint_every=1):
    """Fit with DP-SVRG++ (module docstring): epoch s has 2^s m steps and starts from the
    previous epoch's last iterate."""
    return _fit(problem, "dp-svrg++", epsilon=epsilon, delta=delta, rng=rng, epochs=epochs,
                epoch_length=epoch_length, batch_size=batch_size, step=step, clip=clip,
                smoothness=smoothness, strong_convexity=0.0, noise_split=noise_split,
                condition=condition, checkpoint_every=checkpoint_every)


fit_dp_svrg.__doc__ += _OPTIONS_DOC
fit_dp_svrg_pp.__doc__ += _OPTIONS_DOC
