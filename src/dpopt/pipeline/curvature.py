"""A released bound on the squared loss's curvature, for DP-GD's step on the default path.

DP-GD takes steps 1 / beta, beta >= lambda_max(X^T X / n) the smoothness of the squared loss
(1 / 2n) ||X w - y||^2 (plus alpha with an L2 penalty). The public bound r^2 (r bounds a
row with its intercept coordinate) holds for any data but is up to d times too large: on
scaled features whose directions share the row norm, lambda_max is about r^2 / d, and the
intercept's column alone gives 1. A step that much too short needs that many more noisy
steps. The default path runs DP-GD for least squares only where AdaSSP's noise on X^T X is
above its scale (:func:`dpopt.solvers.adassp.declines`), and then releases the curvature
first.

**Release.** G = X_c^T X_c over the rows clipped to norm B (the intercept's column
included), plus a symmetric Gaussian matrix E with iid N(0, sigma^2) entries on and above
the diagonal, sigma = Delta / mu, where Delta is the sensitivity of that upper triangle under
replace-one adjacency: sqrt(2) B^2, or sqrt(2 B^4 + 2 B^2 + 1/2) with an intercept (the
same release as AdaSSP's second one, :func:`dpopt.solvers.adassp.sensitivities`). One
Gaussian mechanism: mu-GDP, recorded as ``Gaussian(1 / mu)``.

**Post-processing.** beta = (lambda_max(G + E) + 3 sqrt(2) sigma) / n. For the top
eigenvector v of G, lambda_max(G + E) >= v^T G v + v^T E v, and v^T E v =
sum_i v_i^2 E_ii + 2 sum_{i<j} v_i v_j E_ij is N(0, sigma^2 (2 - sum_i v_i^4)), of
variance at most 2 sigma^2: beta >= lambda_max(G / n) with probability >= Phi(3) = 0.9987
(and a beta below it by less than a factor 2 still converges). beta is then kept within
public bounds: at most r^2 (every row has norm <= r) and, with an intercept, at least 1 (its
column alone has curvature n / n = 1); without one a beta <= 0 becomes r^2. The noise also lifts it:
lambda_max(G + E) <= lambda_max(G) + ||E||, E||E|| <= 2 sqrt(d) sigma (as in
:mod:`dpopt.solvers.adassp`, step 2).

**Share** (:func:`curvature_share`; derived for the last iterate and the run length of
:func:`dpopt.solvers._common.run_length`, kept with the suffix average after a comparison,
docs/default_path.md). At its best run length DP-GD's excess risk is of order
beta^(1/3) (L sqrt(d) / (n mu))^(2/3), so a share s
of the model's mu^2 spent here costs the steps a factor (1 - s)^(-1/3) and buys beta
~ lambda_0 + a / sqrt(s), a = 2 sqrt(d) Delta / (n mu) the overestimate at s = 1: s minimises
(lambda_0 + a / sqrt(s)) / (1 - s) on a public grid, lambda_0 = 1 the intercept column's
own curvature (r^2 / d without an intercept). a is computed from public (n, d) and the
released row bound: post-processing. The share comes out of the model's mu (fully adaptive
composition of Gaussian mechanisms, Smith & Thakurta 2022, as for the target's second look),
and only as far as the model keeps the mu of the smallest usable epsilon at the fit's delta
(:func:`keeps_least`; a delta far above 1/n makes that mu large): the grid's shares are cut
there, and where none is left nothing is released and DP-GD steps by the public bound. The
intercept's step and the threshold's re-reading below keep the same floor
(:func:`steps_above`), so a fit the plan admitted is never refused after its releases.

**The residual's clip** (:func:`huber_in_place_of_squares`). DP-GD's noise is proportional to
its clip G r, G the bound on |loss'|: 2 for the squared loss on the scaled domain (a target
and a prediction in [-1, 1]), while a record's residual is typically a few tenths. So DP-GD
minimises the Huber loss (Huber 1964) at a threshold t instead: its gradient is the residual
clipped to [-t, t] times the row, so G = t, the noise falls by 2 / t and the run length
grows by 2 / t (:func:`dpopt.solvers._common.smooth_run_length`). Huber's k = 1.345 (95% of
least squares' efficiency at normal errors) is in units of the residuals' standard deviation
sigma. Before the run the released spread is the target's, s, estimated from its second
look (:func:`dpopt.preprocessing._refine.spread_estimate`, at most the upper bound
:func:`~dpopt.preprocessing._refine.spread_bound` that AdaSSP's ridge takes; 1, its bound on
[-1, 1], where there is none), and s >= sigma (the spread about the mean is at least the
residuals' about the best linear function), so the run starts at t = k s.

**The threshold read again half-way** (:func:`rescaled_huber_fit`). At t = k s the clip is
k s / sigma = k / sqrt(1 - R^2) residual standard deviations: 3.7 where R^2 = 0.87. By the
average iterate's bound the Huber excess grows with the clip C = t r, and the Huber loss's
curvature near the minimiser is P(|residual| < t) times the squared loss's, so the R^2 cost
goes as (t / sigma) / (2 Phi(t / sigma) - 1): 2.2 times Huber's at R^2 = 0.87, within 16% of
it for R^2 <= 0.4. The suffix average discards the run's first floor(T / 2) steps, so their
end is where the residuals' spread can be read without shortening the average: the mean of
q(r_i) (:func:`spread_statistic` at threshold 2, the widest residual of a prediction in
[-1, 1]: r^2 / 4 up to |r| = 1, so its mean is the residuals' second moment on the scaled
target's half-range, what least squares weighs, not a robust scale that a skewed target's
bulk would shrink) at that iterate, released with N(0, (1 / (2 n mu_q))^2) noise
(:func:`noisy_spread_mean`: each q_i lies in [0, 1/2], so replacing a record moves the mean
by at most 1 / (2 n); w is DP-GD's released iterate). sigma is read at the release's upper
3-sigma limit (an overestimate with probability Phi(3), as the curvature's lift), from the
normal model (:func:`normal_spread`). The second half runs from that iterate at t' = min(t,
k sigma), its clip scaled by t' / t and its length (T - floor(T / 2)) t / t', at most 200
(the run length follows 1 / C, as T does; the single run again when t' = t), and returns
the average of its iterates. mu_q is one step's (:func:`one_step_share`): the first half's floor(T / 2)
steps, this release and the intercept's step (below) each get mu_m^2 / (T + 2), and the
second half keeps the single run's share of the rest, (T - floor(T / 2)) mu_m^2 / (T + 2),
spread over its own steps. The release and the second half's length read the first half's
output: fully adaptive composition of Gaussian mechanisms (Smith & Thakurta 2022), the
total mu^2 fixed in advance. Only DP-GD's suffix-averaged runs do this: L1 and elastic net
keep their last iterate (:func:`dpopt.solvers.dp_gd.default_settings`). The thresholds read
released numbers only, and each half's step, clip and noise follow its Huber loss's bounds,
so the privacy argument is DP-GD's for each half, plus one Gaussian release. The minimiser is
the regression's where the errors are symmetric; a skewed target's Huber intercept leans
towards its median (the next step).

**The intercept of least squares** (:func:`intercept_step`). Given DP-GD's slopes, the
intercept that minimises the squared loss is b + mean_i (y_i - x_i^T w), one Newton step on
the intercept alone (its curvature is exactly 1). DP-GD's own intercept misses it twice: its
gradient clips the residuals at t, so on a skewed target it converges to the Huber
intercept (towards the median), and its T noisy steps stop before convergence. So the default
path takes that step after DP-GD, with the residuals clipped at c = :data:`INTERCEPT_CLIP` = 1
(half the scaled target's range [-1, 1]: a residual beyond it misses by half of that
range): the mean of clip(y_i - x_i^T w, -c, c) over the n training rows, released with
N(0, (2 c / (n mu_b))^2) noise. Replacing one record moves one clipped residual by at most
2 c (w is fixed: it is DP-GD's output), so the sensitivity is 2 c / n and the release is
mu_b-GDP, recorded as ``Gaussian(1 / mu_b)``. Its share (:func:`one_step_share`) is one
step's: with T steps DP-GD spends mu_m^2 T / (T + 1) and this step mu_m^2 / (T + 1), so
each of the T + 1 steps gets the same mu^2 (T + 2 with the spread's release above; fully
adaptive composition of Gaussian mechanisms: the step reads DP-GD's output). Measured
exactly (no noise in the step) on the practitioner benchmark's DP-GD fits at epsilon = 1,
the step raised R^2 by 0.005 on
``doctor_contacts`` (skew 4.9), 0.004 on ``slid`` and 0.002 on ``txhousing`` and ``loans``
(docs/default_path.md).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from functools import partial

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from dpopt.data.losses import huber
from dpopt.data.problem import with_loss
from dpopt.pipeline.target_looks import from_model, keeps_least
from dpopt.privacy import Gaussian, gdp_epsilon
from dpopt.privacy.mechanisms import gaussian_noise
from dpopt.solvers import _common, solve_uncharged
from dpopt.solvers.adassp import sensitivities, symmetric_noise
from dpopt.solvers.dp_gd import suffix_start

#: Huber's k: the threshold in residual standard deviations at which the Huber estimate's
#: efficiency at normal errors is 95% (:func:`huber_in_place_of_squares`).
HUBER_K = 1.345
#: The residuals' clip of :func:`intercept_step`, on the scaled target's [-1, 1].
INTERCEPT_CLIP = 1.0
#: The threshold of :func:`residual_spread`'s statistic: 2, the widest residual of a
#: prediction in the scaled target's [-1, 1], so the statistic is r^2 / 4 up to |r| = 1.
SPREAD_THRESHOLD = 2.0
#: Shares of the model's mu^2 that :func:`curvature_share` chooses among.
SHARE_GRID = tuple(np.round(np.arange(0.02, 0.51, 0.02), 2))


def curvature_share(n, dim, mu, row_bound, fit_intercept, most=1.0):
    """The share s of the model's mu^2 for the release (module docstring), from public
    (n, d) and the released row bound, among the shares of the grid up to ``most``; None
    when there is none."""
    delta = sensitivities(row_bound, 1.0, fit_intercept)[1]
    a = 2.0 * math.sqrt(dim) * delta / (n * mu)
    lam0 = 1.0 if fit_intercept else (row_bound ** 2) / dim
    grid = [s for s in SHARE_GRID if s <= most]
    return min(grid, key=lambda s: (lam0 + a / math.sqrt(s)) / (1.0 - s)) if grid else None


def noisy_gram(problem, row_bound, mu, rng):
    """(G + E, n, sigma): the release of the module docstring, G the Gram matrix of
    ``problem``'s rows clipped to ``row_bound`` (its intercept column included), E
    symmetric with iid N(0, sigma^2) on and above the diagonal, sigma = Delta / mu."""
    if not (mu > 0 and math.isfinite(mu)):
        raise ValueError(f"mu must be positive and finite, got {mu!r}")
    xtx, _, n = problem.sufficient_statistics(row_bound, 1.0)
    xtx = np.asarray(xtx, dtype=np.float64)
    sigma = sensitivities(row_bound, 1.0, problem.fit_intercept)[1] / mu
    return xtx + sigma * symmetric_noise(xtx.shape[0], rng), n, sigma


def private_curvature(problem, row_bound, mu, rng):
    """(beta, record): the released upper bound on lambda_max(X^T X / n) of ``problem``'s
    rows clipped to ``row_bound`` (module docstring) and its Gaussian record."""
    noisy, n, sigma = noisy_gram(problem, row_bound, mu, rng)
    top = float(np.linalg.eigvalsh(0.5 * (noisy + noisy.T))[-1])
    beta = (top + 3.0 * math.sqrt(2.0) * sigma) / n
    # public bounds on lambda_max(X^T X / n): at most r^2 (every row has norm <= r), at
    # least 1 with an intercept (its column's own diagonal entry)
    r2 = row_bound ** 2 + (1.0 if problem.fit_intercept else 0.0)
    if problem.fit_intercept:
        beta = max(1.0, beta)
    elif not beta > 0:
        beta = r2
    return min(r2, beta), Gaussian(1.0 / mu)


def steps_above(mu, passes, suffix, least):
    """(re-read, intercept): whether the threshold's re-reading (:func:`rescaled_huber_fit`,
    ``suffix`` runs only) and the intercept's step (:func:`intercept_step`) fit above the
    model's floor ``least``: their one-step shares of the model's ``mu``
    (:func:`one_step_share`) leave each solve at least ``least``, the re-reading's two
    halves each (the smaller: min(h, T - h) / T of the steps' mu^2, h the first half's
    steps). Public numbers only; below the floor a step is left out, not refused."""
    head = _head_passes(passes)
    half = min(head, passes - head) / passes
    reread = bool(suffix) and keeps_least(mu, 1.0 - passes / (passes + 2.0) * half, least)
    return reread, keeps_least(mu, 1.0 / (passes + 1.0 + reread), least)


def curvature_step(problem, mus, row_bound, rng, least=0.0):
    """The default path's step: (beta, record) of :func:`private_curvature` at the share
    :func:`curvature_share` of the model's mu; ``mus`` (the plan's split) gets the step's
    "curvature" mu and the model keeps the rest (their squares add up to the model's).
    ``least``: the mu the model must keep (public: the smallest usable epsilon's at the
    fit's delta). The share is the best one on the grid that leaves the model that much;
    where none does (a tiny epsilon with a delta far above 1/n) nothing is released and
    (None, None) is returned: DP-GD then steps by the public bound r^2, and a fit that the
    plan admitted is not turned into a charged refusal after its scaling releases."""
    most = next((s for s in reversed(SHARE_GRID) if keeps_least(mus["model"], s, least)), 0.0)
    s = curvature_share(problem.n_samples, problem.dim, mus["model"], row_bound,
                        problem.fit_intercept, most=most)
    if s is None:
        return None, None
    from_model(mus, "curvature", math.sqrt(s) * mus["model"])
    return private_curvature(problem, row_bound, mus["curvature"], rng)


def huber_in_place_of_squares(problem, target_scale=None):
    """The least-squares ``problem`` with the Huber loss at t = :data:`HUBER_K` s instead
    (module docstring), s the released ``target_scale`` (the scaled target's estimated
    standard deviation, at most 1; 1 without one). Returns (the problem, t).
    Post-processing."""
    spread = 1.0 if target_scale is None else min(1.0, float(target_scale))
    t = HUBER_K * spread
    return with_loss(problem, huber(t)), t


def spread_statistic(residuals, t):
    """q(r) = h_{t/2}(r) / (t/2) - h_t(r) / t, h_t Huber's loss r^2 / 2 inside t and
    t |r| - t^2 / 2 beyond: r^2 / (2 t) up to t / 2, t / 4 beyond t, between them
    |r| - t / 4 - r^2 / (2 t) (continuous, non-decreasing in |r|, in [0, t / 4])."""
    a = np.abs(np.asarray(residuals, dtype=np.float64))
    return np.where(a <= t / 2, a * a / (2 * t),
                    np.where(a <= t, a - t / 4 - a * a / (2 * t), t / 4))


def expected_spread_statistic(sigma, t):
    """E q(sigma Z) for a standard normal Z (:func:`spread_statistic` at threshold ``t``),
    in closed form: u = t / (2 sigma), v = t / sigma, E[Z^2; |Z| <= u] = 2 Phi(u) - 1 -
    2 u phi(u) and the integral of z^2 phi(z) from u to v is Phi(v) - Phi(u) + u phi(u) -
    v phi(v)."""
    u, v = t / (2 * sigma), t / sigma
    cu, cv, pu, pv = norm.cdf(u), norm.cdf(v), norm.pdf(u), norm.pdf(v)
    inner = sigma ** 2 / (2 * t) * (2 * cu - 1 - 2 * u * pu)
    band = 2 * (sigma * (pu - pv) - t / 4 * (cv - cu)
                - sigma ** 2 / (2 * t) * (cv - cu + u * pu - v * pv))
    return float(inner + band + t / 2 * norm.sf(v))


def normal_spread(q, t):
    """The sigma at which :func:`expected_spread_statistic` equals ``q`` (it increases with
    sigma from 0 to t / 4), searched on [1e-6 t, 1e4 t] (beyond, the closed form loses its
    digits): inf above that range's reach, 1e-6 t below it."""
    lo, hi = t * 1e-6, t * 1e4
    if q <= expected_spread_statistic(lo, t):
        return lo
    if q >= expected_spread_statistic(hi, t):
        return math.inf
    return float(brentq(lambda s: expected_spread_statistic(s, t) - q, lo, hi, xtol=t * 1e-12))


def spread_of_margins(margins, y, t=SPREAD_THRESHOLD):
    """:func:`spread_statistic` of the residuals ``margins - y`` (per record, bounded)."""
    return spread_statistic(np.asarray(margins) - np.asarray(y), t)


def spread_noise(n, mu, t=SPREAD_THRESHOLD):
    """The standard deviation of :func:`noisy_spread_mean`'s noise: its sensitivity t / (4 n)
    over ``mu``."""
    return t / (4.0 * n * mu)


def noisy_spread_mean(problem, w, mu, rng, t=SPREAD_THRESHOLD):
    """(noisy mean of :func:`spread_statistic` at threshold ``t`` over ``problem``'s rows at
    ``w``, its record): the release of :func:`residual_spread`. Each record's statistic lies
    in [0, t / 4] (summed record by record, one pass in memory or chunked), so replacing one
    moves the mean by at most t / (4 n): N(0, :func:`spread_noise` ^2) noise, mu-GDP,
    ``Gaussian(1 / mu)``."""
    if not (mu > 0 and math.isfinite(mu)):
        raise ValueError(f"mu must be positive and finite, got {mu!r}")
    q = problem.mean_of(partial(spread_of_margins, t=t), np.asarray(w, dtype=np.float64))
    noise = float(gaussian_noise(rng, spread_noise(problem.n_samples, mu, t)))
    return q + noise, Gaussian(1.0 / mu)


def residual_spread(problem, w, mu, rng):
    """(sigma, record): the residuals' standard deviation at ``w`` (module docstring), read
    by :func:`normal_spread` from :func:`noisy_spread_mean`'s release at its upper 3-sigma
    limit. Post-processing of that release."""
    released, record = noisy_spread_mean(problem, w, mu, rng)
    limit = released + 3.0 * spread_noise(problem.n_samples, mu)
    return normal_spread(limit, SPREAD_THRESHOLD), record


def one_step_share(mus, step, passes, after=0):
    """Give plan step ``step`` one DP-GD step's mu out of the model's: mu_m / sqrt(T + 1 +
    ``after``) for T = ``passes`` steps, ``after`` the single releases still to take theirs
    the same way, so the T steps and each such release get the same mu^2 (module
    docstring). Returns that mu."""
    from_model(mus, step, mus["model"] / math.sqrt(passes + 1.0 + after))
    return mus[step]


def _head_passes(passes):
    """The steps of the re-read threshold's first half: those before the suffix average."""
    return suffix_start(passes) - 1


def rescaled_huber_fit(problem, options, mu, spread_mu, delta, rng):
    """DP-GD's suffix-averaged run in two halves with Huber's threshold re-read between them
    (module docstring): the first floor(T / 2) steps at the problem's threshold t, last
    iterate; :func:`residual_spread` there at mu ``spread_mu``; the remaining steps from that
    iterate at t' = min(t, k sigma), clip scaled by t' / t and length by t / t', their
    average. The first half has the single run's noise multiplier; the second keeps the
    single run's share of ``mu`` (the steps' mu) over its own steps, so the composition is
    the single run's mu^2 plus one release."""
    passes, t = options["passes"], problem.loss.param
    head_passes = _head_passes(passes)
    head = solve_uncharged(problem, "dp-gd", delta=delta, random_state=rng,
                           epsilon=gdp_epsilon(mu * math.sqrt(head_passes / passes), delta),
                           **{**options, "passes": head_passes, "output": "last"})
    start = time.perf_counter()
    spread, record = residual_spread(problem, head.w, spread_mu, rng)
    tail_t = min(t, HUBER_K * spread)
    spent = time.perf_counter() - start
    tail_mu, tail_clip = mu * math.sqrt(1 - head_passes / passes), options["clip"] * tail_t / t
    tail_passes = min(_common.MAX_RUN_LENGTH, round((passes - head_passes) * t / tail_t))
    tail = solve_uncharged(with_loss(problem, huber(tail_t)), "dp-gd", delta=delta,
                           random_state=rng, epsilon=gdp_epsilon(tail_mu, delta),
                           **{**options, "passes": tail_passes, "output": "average",
                              "clip": tail_clip, "init": head.w})
    before = head.time + spent
    return replace(
        tail, mechanisms=list(head.mechanisms) + [record] + list(tail.mechanisms),
        n_iter=head.n_iter + tail.n_iter, passes=head.passes + 1 + tail.passes,
        time=before + tail.time,
        **checkpoints_then(head, tail.checkpoints, tail.checkpoint_passes + head.passes + 1,
                           tail.checkpoint_times + before),
        params={**tail.params, "passes": head_passes + tail_passes, "output": "suffix",
                "tau": head_passes + tail_passes,
                "huber_threshold": t, "tail_huber_threshold": tail_t, "residual_spread": spread})


def checkpoints_then(result, rows, passes, times):
    """``result``'s checkpoints followed by the iterates ``rows`` at ``passes`` and ``times``
    (already counted from the start of ``result``'s run): the fields for ``replace``."""
    return dict(checkpoints=np.vstack([np.reshape(result.checkpoints, (-1, result.w.size)),
                                       np.reshape(rows, (-1, result.w.size))]),
                checkpoint_passes=np.append(result.checkpoint_passes, passes),
                checkpoint_times=np.append(result.checkpoint_times, times))


def noisy_mean_residual(problem, w, mu, rng, clip=INTERCEPT_CLIP):
    """(noisy mean of clip(y_i - x_i^T w, -clip, clip) over ``problem``'s rows, its record):
    the release of :func:`intercept_step` (sensitivity 2 clip / n, in memory or chunked: the
    intercept coordinate of the Huber loss's gradient at threshold ``clip``, one pass)."""
    if not (mu > 0 and math.isfinite(mu)):
        raise ValueError(f"mu must be positive and finite, got {mu!r}")
    w = np.asarray(w, dtype=np.float64)
    grad = with_loss(problem, huber(clip)).clipped_gradient(w, clips=np.full(w.size, clip))
    sigma = 2.0 * clip / (problem.n_samples * mu)
    return -float(grad[-1]) + float(gaussian_noise(rng, sigma)), Gaussian(1.0 / mu)


def intercept_step(problem, result, mu, rng):
    """DP-GD's ``result`` with its intercept moved by the noisy mean residual (module
    docstring), the release's record added to its mechanisms, and its pass over the data
    counted (one more pass and checkpoint, the released vector last)."""
    start = time.perf_counter()
    step, record = noisy_mean_residual(problem, result.w, mu, rng)
    w = np.array(result.w, dtype=np.float64)
    w[-1] += step
    spent = time.perf_counter() - start
    marks = {}
    if result.checkpoints is not None and len(result.checkpoint_times):
        marks = checkpoints_then(result, w, result.passes + 1,
                                 result.checkpoint_times[-1] + spent)
    return replace(result, w=w, coef=w[:-1].copy(), intercept=float(w[-1]),
                   mechanisms=list(result.mechanisms) + [record], passes=result.passes + 1,
                   time=result.time + spent, **marks)
