"""DP-GCD: differentially private greedy (proximal) coordinate descent.

Mangold, Bellet, Salmon, Tommasi, "High-Dimensional Private Empirical Risk
Minimization by Greedy Coordinate Descent", AISTATS 2023 (seed 002; notes in
``shared/papers/002_dp_gcd.md``): Algorithm 1 (smooth) and Algorithm 2
(proximal, Appendix C), with the coordinate-wise clipping of the DP-CD paper.

Algorithm
---------
Start at w = 0. Iteration t (one pass over the data):

1. clipped gradient g_j = (1/n) sum_i clip(d l(x_i^T w; y_i) / d w_j, C_j) for
   every j, with C_j = C sqrt(M_j / sum_k M_k) (the DP-CD thresholds);
2. private greedy selection j_t = report-noisy-max of the scores s_j(g, w)
   (rules below) over the coordinates with M_j > 0;
3. a *fresh* noisy gradient entry g_j + eta (independent of the selection noise)
   and the step w_j <- prox_{gamma_j psi_j}(w_j - gamma_j (g_j + eta)), gamma_j =
   gamma / M_j (GS-L: the L2 part is smooth, w_j <- w_j - gamma / (M_j + l2_j)
   (g_j + l2_j w_j + eta)); the margins X w are updated in O(n);
4. output the last iterate w^T (every iterate is recorded as a checkpoint).

Greedy rules (curv_j = M_j / gamma, the curvature the step assumes; GS-L uses
(M_j + l2_j) / gamma)::

    GS-L  |g_j + l2_j w_j| / sqrt(curv_j)            smooth penalty only (L2 or none)
    GS-s  dist(-g_j, d psi_j(w_j)) / sqrt(curv_j)
    GS-r  sqrt(curv_j) |prox_{psi_j / curv_j}(w_j - g_j / curv_j) - w_j|
    GS-q  sqrt(-2 V_j),  V_j = min_a g_j a + curv_j a^2 / 2 + psi_j(w_j + a) - psi_j(w_j)

with psi_j(u) = l1_j |u| + l2_j u^2 / 2 + indicator(lo_j <= u <= up_j) (L1, elastic
net, box). GS-q is the paper's "argmax of -min V" under the increasing map
v -> sqrt(2 v), which has the same argmax and a bounded sensitivity.

Sensitivity of the scores (replace-one adjacency)
-------------------------------------------------
Replacing one record moves every g_j by at most Delta_j = 2 C_j / n (a mean of n
terms each clipped to [-C_j, C_j]), all coordinates at once and in any
direction. Given w (public: a post-processing of earlier releases) each score
is a (1 / sqrt(curv_j))-Lipschitz function of g_j:

* GS-L: |.| is 1-Lipschitz;
* GS-s: the distance to a fixed interval is 1-Lipschitz;
* GS-r: the prox is 1-Lipschitz, so the step is (1 / curv_j)-Lipschitz in g_j;
* GS-q: h(g) = -V_j is convex with h' = -a*(g) and h >= curv_j a*^2 / 2 (convexity
  of psi_j at the minimiser a*), so |d sqrt(2 h) / dg| = |a*| / sqrt(2 h) <=
  1 / sqrt(curv_j).

So |s_j(D) - s_j(D')| <= Delta_s := max_j Delta_j / sqrt(curv_j) for every j
(with the DP-CD thresholds Delta_s = 2 C sqrt(gamma) / (n sqrt(sum_k M_k)) for
the proximal rules). The scores are not monotone, which is why the selection
noise is 2 Delta_s / epsilon' (:func:`dpopt.privacy.mechanisms.report_noisy_max`).

Privacy
-------
``selection``:
  ``"exponential"`` (default) Gumbel noise of scale 2 Delta_s / epsilon': the
  exponential mechanism, epsilon'-DP and epsilon'-bounded-range, hence
  rho = epsilon'^2 / 8 zCDP. ``"laplace"``: Laplace(2 Delta_s / epsilon')
  report-noisy-max, epsilon'-DP. ``"paper-laplace"``: the paper's Laplace(Delta_s /
  epsilon'), which the paper counts as epsilon'-DP; it is only 2 epsilon'-DP
  for these non-monotone scores, so it warns and the reported epsilon uses
  2 epsilon' (it exceeds the target unless the accountant had slack, as
  advanced composition often has). Reproduction only.
``accountant`` (the update noise follows):
  ``"auto"`` (default), ``"pld"``, ``"rdp"``: Gaussian update noise
  sigma_j = z Delta_j, and epsilon' = (2 / z) sqrt(s / (1 - s)) with s =
  ``selection_share`` (for the exponential mechanism s is the selection's share
  of each iteration's zCDP: epsilon'^2 / 8 = s / (1 - s) * 1 / (2 z^2)). The
  composition [T selections, T Gaussian(z)] is calibrated numerically with
  :func:`dpopt.privacy.calibrate`: PLD with the selection as PureDP(epsilon'),
  or RDP with the selection as zCDP (epsilon'^2 / 8 exponential, epsilon'^2 / 2
  Laplace); ``"auto"`` keeps whichever gives the smaller z (both are valid).
  ``"paper"``: the paper's eq. (2), advanced composition of 2T epsilon'-DP
  mechanisms, with Laplace(Delta_j / epsilon') update noise (Remark 4.3); the
  reported epsilon is the smaller of eq. (2) and the PLD of the same records.
The mechanisms are released adaptively (each iteration's selection and update
depend on earlier outputs), which all of these composition results allow.
Every iterate is a post-processing of the released indices and noisy entries,
so the checkpoints are covered. The smoothness constants M_j (hence C_j and the
steps) are public inputs, or computed from the data with a
:class:`dpopt.PrivacyLeakWarning` (``smoothness="exact"``).
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np

from dpopt._core.validation import check_choice, check_positive_int, check_scalar
from dpopt.kernels.gcd import (
    GS_L,
    GS_Q,
    GS_R,
    GS_S,
    add_column,
    clipped_gradient_from_derivs,
    fast_loss_derivs,
    greedy_scores,
)
from dpopt.kernels.prox import prox_scalar
from dpopt.privacy import ZCDP, Gaussian, Laplace, PureDP, calibrate, epsilon_of
from dpopt.privacy.mechanisms import (
    advanced_composition_epsilon,
    advanced_composition_epsilon0,
    exponential_mechanism_zcdp,
    report_noisy_max,
)
from dpopt.solvers._base import Checkpoints, Option, make_result, one_of, register_solver
from dpopt.solvers._common import (
    CHECKPOINT_EVERY,
    CLIP,
    PASSES,
    SELECTION_ACCOUNTANTS,
    SMOOTHNESS,
    STEP,
    check_clip,
    coordinate_clips,
    coordinate_smoothness,
    coordinate_steps,
    mean_sensitivity,
)

RULES = {"gs-l": GS_L, "gs-s": GS_S, "gs-r": GS_R, "gs-q": GS_Q}
SELECTIONS = ("exponential", "laplace", "paper-laplace")


# ---------------------------------------------------------------------------
# accounting


@dataclass(frozen=True)
class GCDCalibration:
    """Noise of DP-GCD for a target (epsilon, delta) and T iterations.

    epsilon_selection : epsilon' of one selection as the calibration assumed it
        (the selection noise scale is 2 Delta_s / epsilon', or Delta_s / epsilon'
        for ``"paper-laplace"``).
    update : ``"gaussian"`` (sigma_j = update_multiplier * Delta_j) or
        ``"laplace"`` (scale update_multiplier * Delta_j).
    epsilon : what the released composition provably achieves (honest).
    mechanisms : the accounted records (with the selection's true epsilon).
    """

    epsilon_selection: float
    update: str
    update_multiplier: float
    epsilon: float
    delta: float
    accountant: str
    mechanisms: tuple


def selection_epsilon(z, share):
    """epsilon' tied to the update multiplier z: epsilon'^2 / 8 = share / (1 - share) / (2 z^2)."""
    return 2.0 / z * math.sqrt(share / (1.0 - share))


def _selection_record(eps_sel, selection, accountant, count):
    true_eps = 2.0 * eps_sel if selection == "paper-laplace" else eps_sel
    if accountant == "rdp" and selection == "exponential":
        return ZCDP(exponential_mechanism_zcdp(true_eps), count)
    return PureDP(true_eps, count)


@functools.lru_cache(maxsize=1024)
def calibrate_gcd(epsilon, delta, iterations, selection="exponential", accountant="auto",
                  selection_share=0.5) -> GCDCalibration:
    """Calibrate DP-GCD's selection and update noise (module docstring; cached)."""
    T = iterations
    if math.isinf(epsilon):
        mechs = (PureDP(math.inf, T), Gaussian(0.0, T))
        return GCDCalibration(math.inf, "gaussian", 0.0, math.inf, delta, "none", mechs)
    if accountant == "paper":
        eps0 = advanced_composition_epsilon0(epsilon, delta, 2 * T)
        mechs = (_selection_record(eps0, selection, "pld", T), Laplace(1.0 / eps0, T))
        spent = epsilon_of(list(mechs), delta, accountant="pld")
        if selection != "paper-laplace":
            spent = min(spent, advanced_composition_epsilon(eps0, 2 * T, delta))
        return GCDCalibration(eps0, "laplace", 1.0 / eps0, spent, delta, "paper", mechs)

    def believed(acc):
        # the paper-laplace calibration believes its selection is eps'-DP
        sel = "laplace" if selection == "paper-laplace" else selection
        return lambda z: [_selection_record(selection_epsilon(z, selection_share), sel, acc, T),
                          Gaussian(z, T)]

    candidates = ("pld", "rdp") if accountant == "auto" else (accountant,)
    best = None
    for acc in candidates:
        cal = calibrate(believed(acc), epsilon, delta, accountant=acc)
        if best is None or cal.noise_multiplier < best[1].noise_multiplier:
            best = (acc, cal)
    acc, cal = best
    z = cal.noise_multiplier
    eps_sel = selection_epsilon(z, selection_share)
    mechs = (_selection_record(eps_sel, selection, acc, T), Gaussian(z, T))
    spent = cal.epsilon
    if selection == "paper-laplace":
        spent = epsilon_of(list(mechs), delta, accountant=acc)
    return GCDCalibration(eps_sel, "gaussian", z, spent, delta, acc, mechs)


# ---------------------------------------------------------------------------
# solver


def _check_rule(problem, rule):
    check_choice(rule, "rule", ("auto",) + tuple(RULES))
    smooth = problem.penalty.smooth
    if rule == "auto":
        return "gs-l" if smooth else "gs-r"
    if rule == "gs-l" and not smooth:
        raise ValueError("rule='gs-l' needs a smooth penalty (none or L2); use 'gs-s', 'gs-r' or "
                         f"'gs-q' for penalty={problem.penalty.name!r}")
    return rule


@dataclass
class GCDSetup:
    """Everything DP-GCD fixes before its first iteration (shared by the solver and tests).

    cand : coordinates that can be selected (M_j > 0); curv : curvature of the
    scores; steps : coordinate step sizes; sens : Delta_j = 2 C_j / n;
    score_sensitivity : Delta_s = max_j Delta_j / sqrt(curv_j); selection_scale :
    noise scale of the noisy max (0 = exact greedy); update_scale : per-coordinate
    scale of the update noise; noise : "gumbel" or "laplace".
    """

    rule: str
    cand: np.ndarray
    curv: np.ndarray
    steps: np.ndarray
    clips: np.ndarray
    sens: np.ndarray
    score_sensitivity: float
    selection_scale: float
    update_scale: np.ndarray
    noise: str
    calibration: GCDCalibration

    def scores(self, g, w, penalty):
        """Greedy scores of ``cand`` at w from the clipped gradient g."""
        return greedy_scores(RULES[self.rule], self.cand, g, w, self.curv, penalty.l1, penalty.l2,
                             penalty.lo, penalty.up)

    def select(self, scores, rng) -> int:
        """The private greedy choice (a coordinate index)."""
        return int(self.cand[report_noisy_max(scores, self.selection_scale, rng,
                                              noise=self.noise)])


def setup_dp_gcd(problem, epsilon, delta, T, step, clip, rule, selection, accountant,
                 selection_share, M) -> GCDSetup:
    """Steps, thresholds, score sensitivity and calibrated noise scales (module docstring)."""
    pen = problem.penalty
    clips = np.where(M > 0, coordinate_clips(M, clip), 0.0)
    cand = np.flatnonzero(M > 0).astype(np.int64)
    if rule == "gs-l":
        steps = coordinate_steps(M + pen.l2, step)
        curv = (M + pen.l2) / step
    else:
        steps = coordinate_steps(M, step)
        curv = M / step
    sens = mean_sensitivity(clips, problem.n_samples)
    cal = calibrate_gcd(epsilon, delta, T, selection, accountant, selection_share)
    if math.isinf(cal.epsilon_selection) or math.isinf(clip):
        score_sens, sel_scale, upd_scale = 0.0, 0.0, np.zeros(problem.dim)
    else:
        score_sens = float(np.max(sens[cand] / np.sqrt(curv[cand])))
        factor = 1.0 if selection == "paper-laplace" else 2.0
        sel_scale = factor * score_sens / cal.epsilon_selection
        upd_scale = cal.update_multiplier * sens
    return GCDSetup(rule, cand, curv, steps, clips, sens, score_sens, sel_scale, upd_scale,
                    "gumbel" if selection == "exponential" else "laplace", cal)


OPTIONS = (
    PASSES.but(doc="T, the number of greedy iterations (one full gradient each)"),
    STEP.but(doc="gamma: coordinate steps gamma / M_j"),
    CLIP.but(doc="C: coordinate thresholds C_j = C sqrt(M_j / sum_k M_k)"),
    Option("rule", "auto", one_of("auto", *RULES), "greedy rule (auto: GS-L smooth, else GS-r)"),
    Option("selection", "exponential", one_of(*SELECTIONS), "noisy-max mechanism"),
    Option("accountant", "auto", one_of(*SELECTION_ACCOUNTANTS), "calibration (paper: advanced "
           "composition)"),
    Option("selection_share", 0.5, None, "share of each iteration's budget for the selection"),
    SMOOTHNESS.but(doc='M_j: "exact" (PrivacyLeakWarning) or a public array'),
    CHECKPOINT_EVERY,
)


@register_solver("dp-gcd", description="DP greedy (proximal) coordinate descent, GS-L/GS-s/GS-r/"
                 "GS-q rules, noisy-max selection (Mangold et al. 2023)",
                 losses=("squared", "logistic", "huber"), family="dp-gcd", options=OPTIONS,
                 run_length="passes",
                 # with one feature the greedy selection is trivial: give it 10% of each iteration
                 audit={"passes": 10, "selection_share": 0.1},
                 mechanism="per iteration: report-noisy-max (Gumbel) over the greedy scores, then Gaussian "
                           "noise on the chosen clipped coordinate gradient",
                 sensitivity="scores: max_j 2 C_j / (n sqrt(M_j)); update: 2 C_j / n")
def fit_dp_gcd(problem, *, epsilon, delta, rng, passes=10, step=1.0, clip=1.0, rule="auto",
               selection="exponential", accountant="auto", selection_share=0.5,
               smoothness="exact", checkpoint_every=1):
    """Fit with DP-GCD (module docstring). One iteration = one pass (a full gradient).

    Parameters
    ----------
    passes : int
        T, the number of greedy iterations (fixed in advance: it sets the noise).
    step : float
        gamma: coordinate steps gamma / M_j.
    clip : float
        C: coordinate thresholds C_j = C sqrt(M_j / sum_k M_k) (``inf`` only with epsilon = inf).
    rule : "auto", "gs-l", "gs-s", "gs-r" or "gs-q"
        ``"auto"``: GS-L for a smooth penalty, GS-r otherwise (the paper's Figure 1).
    selection : "exponential", "laplace" or "paper-laplace"
        Noisy-max mechanism (module docstring); ``"paper-laplace"`` is
        under-calibrated (warns, and reports the epsilon it really spends).
    accountant : "auto", "pld", "rdp" or "paper"
        ``"paper"``: advanced composition (eq. (2)) with Laplace update noise.
    selection_share : float in (0, 1)
        Share of each iteration's (zCDP) budget given to the selection
        (numerical accountants only).
    smoothness : "exact" or array of shape (dim,)
        M_j; ``"exact"`` computes them from the data (PrivacyLeakWarning).
    checkpoint_every : int
        Record the iterate every this many iterations.
    """
    T = check_positive_int(passes, "passes")
    step = check_scalar(step, "step", low=0.0, low_open=True)
    clip = check_clip(epsilon, clip)
    rule = _check_rule(problem, rule)
    selection_share = check_scalar(selection_share, "selection_share", low=0.0, high=1.0,
                                   low_open=True, high_open=True)
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    M = coordinate_smoothness(problem, smoothness)
    if selection == "paper-laplace" and not math.isinf(epsilon):
        warnings.warn("selection='paper-laplace' uses the DP-GCD paper's Laplace(Delta/eps') "
                      "report-noisy-max, which is only 2 eps'-DP for these (non-monotone) "
                      "scores; the reported epsilon accounts for that and can exceed the target. "
                      "Use selection='exponential' or 'laplace' for a correct calibration.",
                      UserWarning, stacklevel=3)
    st = setup_dp_gcd(problem, epsilon, delta, T, step, clip, rule, selection, accountant,
                      selection_share, M)
    cal = st.calibration
    pen = problem.penalty

    w = problem.zeros()
    z = np.zeros(problem.n_samples)  # margins X w at w = 0
    X, y, code, param = problem.X, problem.y, problem.loss.code, problem.loss.param
    d = fast_loss_derivs(y, code, param, z)  # l'(z_i; y_i), refreshed where z changes
    ck = Checkpoints()
    ck.record(w, 0)
    for t in range(1, T + 1):
        g = clipped_gradient_from_derivs(X, d, st.clips)
        j = st.select(st.scores(g, w, pen), rng)
        noisy = g[j]  # a fresh draw, independent of the selection noise
        if st.update_scale[j] > 0:
            draw = rng.standard_normal() if cal.update == "gaussian" else rng.laplace()
            noisy += st.update_scale[j] * draw
        old = w[j]
        if rule == "gs-l":
            new = old - st.steps[j] * (noisy + pen.l2[j] * old)
        else:
            new = prox_scalar(old - st.steps[j] * noisy, st.steps[j], pen.l1[j], pen.l2[j],
                              pen.lo[j], pen.up[j])
        if new != old:
            w[j] = new
            add_column(X, y, code, param, z, j, new - old, d)
        if t % checkpoint_every == 0 or t == T:
            ck.record(w, t)
    return make_result(problem, w, solver="dp-gcd",
                       calibration_or_spent=(cal.epsilon, delta, cal.accountant,
                                             cal.update_multiplier),
                       mechanisms=list(cal.mechanisms), n_iter=T, passes=T, checkpoints=ck,
                       params={"passes": T, "step": step, "clip": clip, "rule": rule,
                               "selection": selection, "accountant": accountant,
                               "selection_share": selection_share,
                               "epsilon_selection": cal.epsilon_selection,
                               "selection_scale": st.selection_scale,
                               "score_sensitivity": st.score_sensitivity,
                               "update_noise": cal.update})
