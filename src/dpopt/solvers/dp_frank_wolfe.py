"""DP Frank-Wolfe over an L1 ball: private LASSO.

Talwar, Thakurta, Zhang, "Nearly Optimal Private LASSO", NeurIPS 2015
(Algorithm 1, the noisy Frank-Wolfe method over a polytope, specialised to the
L1 ball as in their Algorithm 2).

Problem
-------
    min  f(w, b) = (1/n) sum_i l(x_i^T w + b; y_i) + alpha/2 ||w||^2   s.t.  ||w||_1 <= r

(``penalty="none"`` or ``"l2"``; r = ``radius``, public; the intercept b only
with ``fit_intercept``, never constrained). The L1 ball is the convex hull of
the 2p vertices S = {+r e_j, -r e_j}; the linear minimisation over it picks one.

Algorithm
---------
The features are clipped entrywise to [-c, c] (c = ``coordinate_bound``) and,
for the squared loss, the targets to [-t, t] (t = ``target_bound``). Start at
w = 0, b = 0. For t = 0, ..., T - 1 (T = ``passes``):

1. per-sample derivatives d_i = clip(l'(x_i^T w + b; y_i), -U, U) (U below) and
   the gradient of the smooth part g = (1/n) X^T d + alpha w;
2. private vertex choice: the score of a vertex s is -<s, g> (so the scores are
   -r g_j for +r e_j and +r g_j for -r e_j), and s_t is drawn by the exponential
   mechanism, P[s] proportional to exp(score(s) / scale), implemented as
   report-noisy-max with Gumbel noise
   (:func:`dpopt.privacy.mechanisms.report_noisy_max`);
3. with an intercept: b <- Pi_[-B, B](b - eta (mean(d) + N(0, sigma_b^2)));
4. w <- (1 - mu_t) w + mu_t s_t with mu_t = 2 / (t + 2) (so w stays in the ball).

The output is the last iterate (every iterate is a checkpoint). The paper adds
Laplace noise to every score (report-noisy-max); the Gumbel version is the
exponential mechanism, which composes better (bounded range, below).

Intercept (``fit_intercept=True``): not constrained by the L1 ball; it takes a
noisy projected gradient step of its own (step 3, a Gaussian mechanism per
iteration, paid from ``intercept_share`` of the budget) with eta = 1/2 (squared
loss, curvature 1 in b) or 1 (logistic, curvature <= 1/4): the update contracts
and averages its noise over a few steps. The box [-B, B] holds the optimal
intercept of every w in the ball: B = c r + t for the squared loss (the optimum
is mean(y - X w)), B = c r + log(n) for the logistic loss (at b = c r + log n
the derivative in b is at least n_- / (n + 1) > 0 when both classes occur, and
symmetrically), so it only bounds the iterates, which the sensitivity needs.

Sensitivity (replace-one adjacency: one record (x_i, y_i) is replaced)
----------------------------------------------------------------------
U bounds |d_i|: the derivative is clipped to [-U, U] with U = min(``clip``, U0),
where U0 bounds |l'| on the domain (so ``clip=None`` clips nothing): U0 = 1 for
the logistic loss, U0 = c r + t (+ B with an intercept) for the squared loss
(|x^T w| <= ||x||_inf ||w||_1 <= c r, |y| <= t, |b| <= B). A ``clip`` below U0
biases the gradient (residuals beyond it count as +-clip, as in DP-GD) and
lowers the noise: U0 is a worst case that real residuals rarely approach.

* g_j = (1/n) sum_i d_i x_ij, with |d_i x_ij| <= U c: replacing one record moves
  it by at most 2 U c / n, so each score r |g_j| moves by at most
  Delta_s = 2 r c U / n (all scores at once, in any direction);
* the alpha w part is public (w is a post-processing of earlier releases);
* the intercept gradient mean(d) moves by at most 2 U / n (L2 sensitivity), and
  sigma_b = z_b 2 U / n.

The scores are not monotone, and the Gumbel noise scale 2 Delta_s / eps_sel
makes one selection eps_sel-DP; the exponential mechanism is moreover
eps_sel-bounded-range, hence (eps_sel^2 / 8)-zCDP (Durfee & Rogers 2019; Cesar
& Rogers 2021), see :func:`dpopt.privacy.mechanisms.exponential_mechanism_zcdp`.

Privacy accounting
------------------
The composition is [T selections] (+ [T Gaussian(z_b)] with an intercept),
released adaptively. ``intercept_share`` s is the intercept's share of each
iteration's zCDP: 1 / (2 z_b^2) = s / (1 - s) * eps_sel^2 / 8. The single free
parameter (z_b, or eps_sel without an intercept) is calibrated numerically to
(epsilon, delta) with :func:`dpopt.privacy.calibrate`: ``accountant="rdp"``
records the selections as ZCDP(eps_sel^2 / 8, T) (bounded range), ``"pld"`` as
PureDP(eps_sel, T), and ``"auto"`` keeps whichever needs less noise (both are
valid). ``FitResult.mechanisms`` holds exactly the composition accounted, and
``noise_multiplier`` is the selection's Gumbel scale over Delta_s (2 / eps_sel).

Iterations
----------
``passes="auto"`` sets T from the paper's analysis (Talwar et al., Theorem 2.6:
the excess risk of noisy Frank-Wolfe is about 2 Gamma / T plus the selection
error, at most scale * log(2p) per step, with scale = Delta_s sqrt(T / (2 rho_s))
for a run of selection zCDP rho_s). Minimising 2 Gamma / T + C sqrt(T),
C = Delta_s log(2p) / sqrt(2 rho_s), gives T = (4 Gamma / C)^(2/3), which grows
like (n eps)^(2/3) as in the paper. For Gamma we take (beta0 c^2 + alpha) r^2 / 4
(beta0 = 1 squared, 1/4 logistic), 1/16 of the worst-case curvature constant
(beta0 c^2 + alpha)(2 r)^2: the worst case needs every x_i aligned with the step,
and with it T came out 5-10 times above the best fixed T on a sparse synthetic
problem and on California (docs/dp_frank_wolfe.md); rho_s is the selection's
share of the zCDP equivalent of (epsilon, delta) (:func:`dpopt.privacy.dp_to_zcdp`).
All inputs are public. T is clamped to [1, 1000] (``MAX_AUTO_PASSES``; 1000
without privacy).

Data bounds: ``coordinate_bound=None`` / ``target_bound=None`` take max |x_ij| /
max |y| from the data without privacy (:class:`dpopt.PrivacyLeakWarning`).
Random draws per iteration: 2p Gumbel draws (``rng.gumbel``), then, with an
intercept, one ``rng.standard_normal()``.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from dpopt._core.exceptions import PrivacyLeakWarning
from dpopt._core.validation import check_positive_int, check_scalar
from dpopt.privacy import ZCDP, Gaussian, PureDP, calibrate, dp_to_zcdp
from dpopt.privacy.mechanisms import exponential_mechanism_zcdp, report_noisy_max
from dpopt.solvers._base import Checkpoints, Option, make_result, one_of, register_solver

FW_ACCOUNTANTS = ("auto", "pld", "rdp")
MAX_AUTO_PASSES = 1000
DEFAULT_INTERCEPT_SHARE = 0.1
#: step of the intercept's noisy gradient update: 1/2 of 1/beta for the squared loss (beta = 1),
#: 1/4 of it for the logistic loss (beta = 1/4): the update contracts and averages the noise
INTERCEPT_STEP = {"squared": 0.5, "logistic": 1.0}


# ---------------------------------------------------------------------------
# data bounds and clipping


def resolve_bounds(problem, coordinate_bound, target_bound):
    """(c, t): the public bounds, or the data's maxima with a PrivacyLeakWarning."""
    feats = _features(problem)
    if coordinate_bound is None:
        warnings.warn("dp-frank-wolfe takes the coordinate bound max |x_ij| from the private "
                      "data without privacy; pass coordinate_bound=<c> (public) to avoid this",
                      PrivacyLeakWarning, stacklevel=4)
        vals = feats.data if sp.issparse(feats) else feats
        c = float(np.max(np.abs(vals))) if vals.size else 0.0
    else:
        c = check_scalar(coordinate_bound, "coordinate_bound", low=0.0, low_open=True)
    t = 0.0
    if target_bound is not None:
        t = check_scalar(target_bound, "target_bound", low=0.0, low_open=True)
    if problem.loss.name == "squared" and target_bound is None:
        warnings.warn("dp-frank-wolfe takes the target bound max |y| from the private data "
                      "without privacy; pass target_bound=<t> (public) to avoid this",
                      PrivacyLeakWarning, stacklevel=4)
        t = float(np.max(np.abs(problem.y)))
    return c, t


def _features(problem):
    """The feature columns of ``problem.X`` (without the intercept column)."""
    return problem.X[:, :problem.n_features]


def clip_data(problem, coordinate_bound, target_bound):
    """Features clipped entrywise to [-c, c] (a copy: dense Fortran or CSC) and, for the
    squared loss, targets clipped to [-t, t]; logistic labels are left as they are."""
    feats = _features(problem)
    if sp.issparse(feats):
        Xc = sp.csc_matrix(feats, copy=True)
        np.clip(Xc.data, -coordinate_bound, coordinate_bound, out=Xc.data)
    else:
        Xc = np.asfortranarray(np.clip(feats, -coordinate_bound, coordinate_bound))
    y = problem.y
    if problem.loss.name == "squared":
        y = np.clip(y, -target_bound, target_bound)
    return Xc, y


def intercept_box(loss_name, c, radius, t, n):
    """B: the intercept is kept in [-B, B], a box that holds the optimal intercept of every
    w in the ball (module docstring)."""
    return c * radius + (t if loss_name == "squared" else math.log(n))


def derivative_bound(loss_name, c, radius, t, n, fit_intercept, clip=None):
    """U: a bound on |l'| over the domain, lowered to ``clip`` if given (module docstring)."""
    if loss_name == "logistic":
        U = 1.0
    else:
        U = c * radius + t + (intercept_box(loss_name, c, radius, t, n) if fit_intercept else 0.0)
    return U if clip is None else min(U, clip)


def score_sensitivity(c, radius, U, n):
    """Delta_s = 2 r c U / n: how far one vertex score moves when one record is replaced."""
    return 2.0 * radius * c * U / n


def intercept_sensitivity(U, n):
    """2 U / n: L2 sensitivity of the intercept gradient mean(l')."""
    return 2.0 * U / n


# ---------------------------------------------------------------------------
# accounting


@dataclass(frozen=True)
class FWCalibration:
    """Calibrated noise of DP Frank-Wolfe.

    epsilon_selection : eps_sel of one selection (Gumbel scale 2 Delta_s / eps_sel).
    intercept_multiplier : z_b (0 without an intercept mechanism).
    intercept_releases : number of Gaussian intercept releases (0 or T).
    epsilon, accountant, mechanisms : what the composition provably achieves.
    """

    epsilon_selection: float
    intercept_multiplier: float
    intercept_releases: int
    epsilon: float
    delta: float
    accountant: str
    mechanisms: tuple


def _selection_record(eps_sel, accountant, count):
    if accountant == "rdp":
        return ZCDP(exponential_mechanism_zcdp(eps_sel), count)
    return PureDP(eps_sel, count)


def selection_epsilon(z, share, releases, iterations):
    """eps_sel tied to z_b: T eps_sel^2 / 8 = (1 - s) / s * k / (2 z^2)."""
    rho_b = releases / (2.0 * z * z)
    return math.sqrt(8.0 * rho_b * (1.0 - share) / share / iterations)


@functools.lru_cache(maxsize=256)
def calibrate_fw(epsilon, delta, iterations, releases=0, share=0.1, accountant="auto"):
    """Calibrate the selections (and the intercept's Gaussian noise; module docstring)."""
    T = iterations
    if math.isinf(epsilon):
        mechs = (PureDP(math.inf, T),) + ((Gaussian(0.0, releases),) if releases else ())
        return FWCalibration(math.inf, 0.0, releases, math.inf, delta, "none", mechs)

    def records(acc):
        if releases == 0:  # the free parameter is 1 / eps_sel
            return lambda z: [_selection_record(1.0 / z, acc, T)]
        return lambda z: [_selection_record(selection_epsilon(z, share, releases, T), acc, T),
                          Gaussian(z, releases)]

    candidates = ("pld", "rdp") if accountant == "auto" else (accountant,)
    best = None
    for acc in candidates:
        try:
            cal = calibrate(records(acc), epsilon, delta, accountant=acc)
        except (ValueError, OverflowError) as exc:
            # the PLD grid rounds each pure-DP loss up: over many tiny selections the
            # rounding alone can exceed the target (and astronomically large epsilons
            # overflow its construction); "auto" then keeps the RDP calibration
            if len(candidates) == 1:
                raise ValueError(f"accountant={acc!r} cannot calibrate epsilon={epsilon} with "
                                 f"{T} selections ({exc}); try accountant='auto'") from None
            continue
        if best is None or cal.noise_multiplier < best[1].noise_multiplier:
            best = (acc, cal)
    if best is None:
        raise ValueError(f"no noise level achieves epsilon={epsilon} with {T} selections")
    acc, cal = best
    z = cal.noise_multiplier
    mechs = tuple(records(acc)(z))
    if releases == 0:
        return FWCalibration(1.0 / z, 0.0, 0, cal.epsilon, delta, acc, mechs)
    return FWCalibration(selection_epsilon(z, share, releases, T), z, releases, cal.epsilon,
                         delta, acc, mechs)


def default_passes(problem, epsilon, delta, radius, c, U, share):
    """T = (4 Gamma / C)^(2/3), clamped to [1, MAX_AUTO_PASSES] (module docstring)."""
    if math.isinf(epsilon):
        return MAX_AUTO_PASSES
    n, p = problem.n_samples, problem.n_features
    alpha = float(np.max(problem.penalty.l2))
    # a typical curvature, 1/16 of the worst case (beta0 c^2 + alpha) (2 r)^2 (module docstring)
    gamma = (problem.loss.curvature * c * c + alpha) * radius * radius / 4.0
    delta_s = score_sensitivity(c, radius, U, n)
    if gamma <= 0 or delta_s <= 0:
        return 1
    rho_s = dp_to_zcdp(epsilon, delta) * (1.0 - share)
    C = delta_s * math.log(2 * p) / math.sqrt(2.0 * rho_s)
    T = (4.0 * gamma / C) ** (2.0 / 3.0)
    return int(min(max(round(T), 1), MAX_AUTO_PASSES))


# ---------------------------------------------------------------------------
# the iteration


def vertex_scores(g, radius):
    """Scores -<s, g> of the vertices [+r e_1, ..., +r e_p, -r e_1, ..., -r e_p]."""
    return np.concatenate([-radius * g, radius * g])


def vertex_of(index, p):
    """(coordinate, sign) of vertex ``index`` in the order of :func:`vertex_scores`."""
    return (index, 1.0) if index < p else (index - p, -1.0)


def column(X, j):
    """Column j of the clipped features as (rows, values) (rows=None: dense)."""
    if sp.issparse(X):
        lo, hi = X.indptr[j], X.indptr[j + 1]
        return X.indices[lo:hi], X.data[lo:hi]
    return None, X[:, j]


def smooth_gradient(X, weights, n):
    """(1/n) X^T weights."""
    return np.asarray(X.T @ weights).ravel() / n


@dataclass
class FWState:
    """Iterate and margins: w (features), b (intercept), zw = X w."""

    w: np.ndarray
    b: float
    zw: np.ndarray

    def step(self, X, mu, j, sign, radius):
        """w <- (1 - mu) w + mu sign r e_j, with the margins updated in O(column)."""
        self.w *= 1.0 - mu
        self.w[j] += mu * sign * radius
        self.zw *= 1.0 - mu
        rows, vals = column(X, j)
        if rows is None:
            self.zw += (mu * sign * radius) * vals
        else:
            self.zw[rows] += (mu * sign * radius) * vals


def loss_weights(loss, state, y, U):
    """Per-sample weights of the gradient: l'(x_i^T w + b; y_i) clipped to [-U, U]."""
    return np.clip(loss.deriv(state.zw + state.b, y), -U, U)


OPTIONS = (
    Option("radius", 1.0, None, "r, the public L1 radius of the constraint"),
    Option("passes", "auto", None, "T, the number of Frank-Wolfe iterations, or 'auto'"),
    Option("coordinate_bound", None, None, "c, public bound on |x_ij| (entries clipped); None "
           "reads it from the data, with a PrivacyLeakWarning"),
    Option("target_bound", None, None, "t, public bound on |y| (squared loss); None reads it "
           "from the data, with a PrivacyLeakWarning"),
    Option("clip", 1.0, None, "bound on each per-sample derivative, or None for the worst case"),
    Option("intercept_share", DEFAULT_INTERCEPT_SHARE, None, "share of each iteration's zCDP "
           "spent on the intercept's noisy step"),
    Option("accountant", "auto", one_of(*FW_ACCOUNTANTS), "how the selections are composed"),
    Option("checkpoint_every", None, None, "iterations between recorded iterates (None: T / 20)"),
)


# target_bound >> coordinate_bound * radius: the canary's clipped residual is about -t on D1
# and +t on D0, so its score change is t / (c r + t) ~ 99% of the sensitivity; few iterations
# keep each selection strong (T = 3 gave the largest noise/4 bounds)
@register_solver("dp-frank-wolfe", description="DP Frank-Wolfe over an L1 ball (private LASSO), "
                 "exponential-mechanism vertex selection (Talwar, Thakurta, Zhang 2015)",
                 losses=("squared", "logistic"), penalties=("none", "l2"),
                 family="dp-frank-wolfe", options=OPTIONS, run_length="passes",
                 audit={"passes": 3, "radius": 1.0, "coordinate_bound": 1.0,
                        "target_bound": 100.0},
                 mechanism="per iteration: exponential mechanism (Gumbel) over the 2p vertices of the L1 "
                           "ball, plus Gaussian noise on the intercept gradient",
                 sensitivity="scores: 2 r c U / n; intercept: 2 U / n")
def fit_dp_frank_wolfe(problem, *, epsilon, delta, rng, radius=1.0, passes="auto",
                       coordinate_bound=None, target_bound=None, clip=1.0,
                       intercept_share=DEFAULT_INTERCEPT_SHARE,
                       accountant="auto", checkpoint_every=None):
    """Fit with DP Frank-Wolfe over {||w||_1 <= radius} (module docstring).

    Parameters
    ----------
    radius : float
        r, the public L1 radius of the constraint (default 1: the unit ball, natural
        when features lie in [-1, 1] and the model is expected to be sparse).
    passes : "auto" or int
        T, the number of Frank-Wolfe iterations (one full gradient each);
        ``"auto"`` uses the theory-based default of the module docstring.
    coordinate_bound : float, optional
        c, public bound on |x_ij|; entries are clipped to [-c, c]. ``None``: max |x_ij|
        from the data (PrivacyLeakWarning).
    target_bound : float, optional
        t, public bound on |y| for the squared loss; targets are clipped to [-t, t].
        ``None``: max |y| from the data (PrivacyLeakWarning). Ignored (but checked)
        for the logistic loss.
    clip : float or None
        Per-sample derivatives (residuals for the squared loss) are clipped to
        [-clip, clip]; ``None`` keeps the worst-case bound U0 (no bias, much more noise).
        Default 1, the scale of targets in [-1, 1].
    intercept_share : float in (0, 1)
        Share of each iteration's zCDP given to the intercept step (with
        ``fit_intercept``; ignored without it).
    accountant : "auto", "pld" or "rdp"
        How the selections are composed (module docstring).
    checkpoint_every : int, optional
        Record the iterate every this many iterations (default: about 100 checkpoints).
    """
    radius = check_scalar(radius, "radius", low=0.0, low_open=True)
    if not (isinstance(passes, str) and passes == "auto"):
        passes = check_positive_int(passes, "passes")
    loss_name = problem.loss.name
    share = check_scalar(intercept_share, "intercept_share", low=0.0, high=1.0, low_open=True,
                         high_open=True)
    if checkpoint_every is not None:
        checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    c, t = resolve_bounds(problem, coordinate_bound, target_bound)
    if clip is not None:
        clip = check_scalar(clip, "clip", low=0.0, low_open=True)
    has_b = problem.fit_intercept
    n, p = problem.n_samples, problem.n_features
    U = derivative_bound(loss_name, c, radius, t, n, has_b, clip)
    T = default_passes(problem, epsilon, delta, radius, c, U, share if has_b else 0.0) \
        if passes == "auto" else passes
    every = checkpoint_every or max(1, math.ceil(T / 100))
    cal = calibrate_fw(epsilon, delta, T, T if has_b else 0, share, accountant)

    X, y = clip_data(problem, c, t)
    delta_s = score_sensitivity(c, radius, U, n)
    scale = 0.0 if math.isinf(cal.epsilon_selection) else 2.0 * delta_s / cal.epsilon_selection
    sigma_b = cal.intercept_multiplier * intercept_sensitivity(U, n)
    b_box = intercept_box(loss_name, c, radius, t, n)
    eta_b = INTERCEPT_STEP[loss_name]
    l2 = problem.penalty.l2[:p]

    state = FWState(np.zeros(p), 0.0, np.zeros(n))
    ck = Checkpoints()
    ck.record(_pack(problem, state.w, state.b), 0)
    for it in range(T):
        weights = loss_weights(problem.loss, state, y, U)
        g = smooth_gradient(X, weights, n) + l2 * state.w
        j, sign = vertex_of(report_noisy_max(vertex_scores(g, radius), scale, rng), p)
        if has_b:
            noisy = weights.mean() + sigma_b * rng.standard_normal()
            state.b = min(max(state.b - eta_b * noisy, -b_box), b_box)
        state.step(X, 2.0 / (it + 2.0), j, sign, radius)
        if (it + 1) % every == 0 or it + 1 == T:
            ck.record(_pack(problem, state.w, state.b), it + 1)
    z_sel = 0.0 if math.isinf(cal.epsilon_selection) else 2.0 / cal.epsilon_selection
    return make_result(problem, _pack(problem, state.w, state.b), solver="dp-frank-wolfe",
                       calibration_or_spent=(cal.epsilon, delta, cal.accountant, z_sel),
                       mechanisms=list(cal.mechanisms), n_iter=T, passes=T, checkpoints=ck,
                       params={"radius": radius, "passes": T, "coordinate_bound": c,
                               "target_bound": t, "clip": clip, "derivative_bound": U,
                               "accountant": accountant,
                               "intercept_share": share if has_b else 0.0,
                               "epsilon_selection": cal.epsilon_selection,
                               "selection_scale": scale, "score_sensitivity": delta_s,
                               "intercept_multiplier": cal.intercept_multiplier,
                               "intercept_sigma": sigma_b, "intercept_box": b_box})


def _pack(problem, w, b):
    return np.append(w, b) if problem.fit_intercept else w.copy()
