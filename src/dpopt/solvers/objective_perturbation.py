"""Objective perturbation with approximate minima perturbation (AMP) and tight accounting.

References: Chaudhuri, Monteleoni, Sarwate, "Differentially private empirical risk
minimization", JMLR 2011 (objective perturbation); Kifer, Smith, Thakurta, "Private convex
empirical risk minimization and high-dimensional regression", COLT 2012 (Gaussian noise);
Iyengar, Near, Song, Thakkar, Thakurta, Wang, "Towards practical differentially private
convex optimization", IEEE S&P 2019 (AMP); Redberg, Koskela, Wang, "Improving the privacy
and practicality of objective perturbation for differentially private linear learners",
NeurIPS 2023 (privacy profile of OP for generalized linear models).

Mechanism
---------
With b ~ N(0, sigma^2 I_dim) drawn once, the solver minimises (scikit-learn scaling)

    F_b(w) = (1/n) sum_i l(x_i^T w; y_i) + (alpha/2) ||w_feat||^2 + (lambda/2) ||w||^2 + b^T w / n

(``alpha`` the user's L2 penalty on the features, ``lambda`` the regularization OP adds on
every coordinate, the intercept included) to ||grad F_b(w_hat)|| <= tau / 2 (Newton's method,
then if needed an accelerated gradient method for a public number of steps:
:mod:`dpopt.solvers._op_minimize`), then releases w_out = w_hat + N(0, sigma_out^2 I). Rows are first clipped:
feature parts longer than ``row_bound`` B are rescaled to norm B, so every augmented row
has ||x|| <= B_aug = sqrt(B^2 + [intercept]).

Loss constants (margin z = x^T w): |l'| <= L and 0 <= l'' <= beta.
logistic: L = 1, beta = 1/4. huber with threshold t: L = t, beta = 1. The Huber loss is
not twice differentiable at |z - y| = t; the argument below needs only that the noise
map is a bi-Lipschitz bijection (area formula), with l'' taken where it exists (almost
everywhere): the Huber derivative is Lipschitz, so the argument holds (Chaudhuri et al.
assume C^2 for the classical change of variables; the area formula removes that need).

Privacy of the exact minimiser w* (sum form: multiply F_b by n)
--------------------------------------------------------------
b = -n grad F_0(w*) =: b_D(w*) is a bijection R^dim -> R^dim (strongly convex, Lipschitz
gradient), so w* has density p_D(w) = phi_sigma(b_D(w)) det A_D(w), A_D(w) = n Hessian,
A_D(w) >= K := n diag(lambda + alpha, ..., lambda + alpha, lambda [intercept]).

(The add-remove cases below are for a regularization fixed in sum form, the setting of
Redberg et al. and of a record with dof = 1; see "Why not add-remove".)

* Jacobian term. Between neighbours the Hessian changes by l''(x^T w) x x^T terms; with
  c = l'' x^T A^{-1} x in [0, kappa], kappa = beta max_x x^T K^{-1} x =
  (beta / n) (B^2 / (lambda + alpha) + [intercept] / lambda), the log-determinant ratio is
  log(1 + c) (add-remove) or log(1 + c') - log(1 + c) (replace-one, both through the
  common n - 1 records): |log det ratio| <= shift := log(1 + kappa). (Redberg et al. use
  -log(1 - beta/lambda) >= log(1 + beta/lambda), a looser bound.)
* Gaussian term. Under w ~ p_D', u = b_D'(w) / sigma ~ N(0, I) exactly and
  b_D(w) = b_D'(w) + d(w): add-remove d = l'(x^T w) x (one record), replace-one
  d = l'(x^T w) x - l'(x'^T w) x'. Then ||phi||-ratio = u^T e + ||e||^2 / 2 with e = d / sigma
  in the span of the differing records and ||e|| <= m, so it is at most m ||P u|| + m^2/2
  (P the projection on that span): m = L B_aug / sigma and ||P u|| ~ chi_1 (add-remove;
  Redberg et al.'s folded normal), m = 2 L B_aug / sigma and ||P u|| <= chi_2 (replace-one,
  two directions x, x').

Why not add-remove. The solver's objective is in scikit-learn's averaged scaling, so in sum
form its regularization n (lambda + alpha) / 2 ||w||^2 depends on n: removing a record also
changes it, and the difference of the noise maps gains (lambda + alpha) w, unbounded in w.
Redberg et al.'s add-remove analysis holds for a regularization fixed in sum form; here n
is the same on both sides only under replace-one, the guarantee this solver reports.

In every ordering the privacy loss is stochastically dominated by shift + m^2/2 + m R,
R ~ chi_dof: the record :class:`dpopt.privacy.ObjectivePerturbation` (noise multiplier
z = sigma / Delta with Delta = 2 L B_aug and dof = 2 here, replace-one), which
explains why this composes with Gaussian mechanisms and how each accountant evaluates it.
Without other mechanisms, delta(eps) = E[(1 - e^(eps - shift - m^2/2 - m R))_+]; for dof = 1
this is 2 delta_Gauss(eps - shift) when eps - shift >= m^2/2, else 1 - 2 e^(eps - shift) Phi(-m)
(Redberg et al.'s profile, with the tighter shift).

Approximate minimiser (AMP, Iyengar et al. Thm. 1). F_b is (lambda + [no intercept] alpha)
=: s strongly convex, so ||w_hat - w*|| <= ||grad F_b(w_hat)|| / s <= tau / s = ``tolerance``
(tau := tolerance * s), for every dataset. Releasing (w*, w_hat + N(0, sigma_out^2)) is an
adaptive composition: given w*, w_hat is a function of (D, w*) within ``tolerance`` of w*,
so the second release is a Gaussian mechanism of sensitivity 2 tolerance for ANY pair of
datasets (adjacency-free); w_out is post-processing. Records:
``[ObjectivePerturbation(z, shift, dof), Gaussian(z_out)]``, sigma_out = 2 tolerance z_out.

Calibration
-----------
z_out = 1 / (0.1 mu) with mu = gdp_mu(epsilon, delta): the output noise takes ~1% of the
budget in GDP terms (and is ~1e-4 with the default tolerance). ``regularization="auto"``
follows Redberg et al.'s recommendation: the OP noise is allowed to be ``NOISE_FACTOR`` = 1.3
times the noise of a plain Gaussian mechanism with the same sensitivity and budget
(z = 1.3 / mu), the largest shift that still meets (epsilon, delta) is found numerically,
and lambda is the smallest regularization whose shift is that (kappa decreases in lambda);
then z is recalibrated exactly for that lambda (so z <= 1.3 / mu). A float
``regularization`` fixes lambda; z is the smallest multiplier meeting the target (a
ValueError if the Jacobian term alone exceeds the budget). Accountant: the exact one of
:func:`dpopt.privacy.epsilon_of` (certified Riemann sum); the achieved epsilon is checked
<= target. The calibration depends only on public quantities and is cached.

Release rule
------------
The AMP argument needs only ||grad F_b(w_hat)|| <= tau at the released w_hat; how w_hat was
found is not released. :func:`dpopt.solvers._op_minimize.minimize_to_tolerance` runs damped
Newton, and if Newton did not certify the target (tau / 2 on the computed gradient), Nesterov's
accelerated gradient method with step 1 / beta_F for at most
ceil(2 sqrt(kappa) log(G0 sqrt(kappa (kappa + 1)) / target)) steps, kappa = beta_F / s,
beta_F = beta B_aug^2 + max reg (:func:`smoothness_bound`), G0 = L B_aug + ||b|| / n >=
||grad F_b(0)||: public quantities after which the target holds in exact arithmetic for every
dataset of the domain (proof in that module). So in exact arithmetic a fit always releases,
on every pair of neighbours (before, a Newton failure raised a ValueError, an event that
depended on the data). In float64 an ill-conditioned problem can leave stage 2's last point
above the target; that point is not released (:func:`raise_uncertified`: a ChargedFitError
charging the whole budget), and the target itself has a public floor
(:func:`gradient_floor`).
A private result reports ``gradient_bound`` (the target, public) and not the gradient norm
reached, nor the number of steps taken (``n_iter`` is 1: one release), which depend on the
data.

Chunked data
------------
The solver is declared ``distributed=True``: it fits a
:class:`dpopt.data.chunked.ChunkedProblem` (Dask arrays, files read out of core) with the same
Newton's method, each point it tries costing one cluster-wide reduction. Every chunk task
clips its own rows to B (the same per-row map as in memory) and returns its share of
(sum_i l(z_i), sum_i l'(z_i) x_i, sum_i l''(z_i) x_i x_i^T), a (1 + dim + dim^2)-vector that
Dask's tree sum adds (:func:`chunk_newton_terms`); the client adds the regularization and
b^T w / n and solves the dim x dim Newton system (dense at every dim: dim^2 floats per
chunk, like AdaSSP's statistics). One reduction per Newton step when the full step is
accepted, one more per halving of the line search. The Hessian is reduced rather than
multiplied by vectors because on a cluster a round trip costs far more than the chunk's
d^2 flops per row: Newton-CG would need one reduction per conjugate-gradient iteration
(tens per Newton step) against one here. The fallback's points need the loss and gradient
only (:func:`chunk_gradient_terms`, 1 + dim floats per chunk). b and the output noise are drawn on the
client from the fit's Generator, in the in-memory order. Privacy is unchanged: the OP
argument is about the exact minimiser w* of F_b, a function of the data and b only, and
the AMP argument needs only ||grad F_b(w_hat)|| <= tau / 2 at the released w_hat (checked on
the client on the reduced gradient), whatever algorithm, machine or order of additions
reached it; so the records and the accounting are the single-machine ones, and a chunked
fit is within ``tolerance`` of the in-memory one at the same seed (both within tolerance/2
of the same w*; in practice to rounding, as Newton takes the same steps).

``epsilon = inf``: no noise, lambda = 0 with ``"auto"`` (the user's problem itself; without
any regularization there is no strong convexity and Newton's result is released as is).
The target is tau / 2 on the computed gradient (margin for round-off). Random draws:
``standard_normal(dim)`` for b, then ``standard_normal(dim)`` for the output noise.

Large problems: above ``HESSIAN_ROWS`` rows (dense), the rows are clipped by a row-scaled
view of X (:class:`ClippedRows`, no copy) and Newton's directions use the Hessian of every
stride-th row (refined on slow contraction; :mod:`dpopt.solvers._op_minimize`). Hessian
products run on one BLAS thread (:func:`single_threaded_blas`).
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
from scipy import optimize

from dpopt._core.exceptions import ChargedFitError, PrivacyLeakWarning
from dpopt._core.validation import check_scalar
from dpopt.data import Problem
from dpopt.data.chunked import ChunkedProblem
from dpopt.privacy import (
    Gaussian,
    ObjectivePerturbation,
    epsilon_of,
    gdp_mu,
    objective_perturbation_delta,
)
from dpopt.solvers._base import Checkpoints, DefaultUse, Option, make_result, register_solver
from dpopt.solvers._op_minimize import minimize_to_tolerance, newton
from dpopt.solvers._op_objective import (  # noqa: F401 (clip_feature_rows, loss_curvature: public here)
    ChunkedPerturbedObjective,
    PerturbedObjective,
    clip_feature_rows,
    loss_curvature,
)

NOISE_FACTOR = 1.3  # Redberg et al.'s f: OP noise <= 1.3 x the plain Gaussian mechanism's
OUTPUT_SHARE = 0.1  # mu_out / mu: the output perturbation's share of the budget (GDP units)
MAX_AUTO_SHIFT = 10.0


def loss_constants(loss) -> tuple[float, float]:
    """(L, beta): |l'(z; y)| <= L and 0 <= l''(z; y) <= beta for every margin and label."""
    if loss.name == "logistic":
        return 1.0, 0.25
    if loss.name == "huber":
        return float(loss.param), 1.0
    raise ValueError(f"objective perturbation supports the logistic and huber losses, "
                     f"got {loss.name!r}")


def smoothness_bound(beta, row_sq_bound, reg) -> float:
    """beta_F = beta B_aug^2 + max_j reg_j >= ||Hessian of F_b|| for every dataset whose
    (augmented) rows have ||x||^2 <= ``row_sq_bound`` (public: the data Hessian
    (1/n) sum_i l'' x_i x_i^T has norm <= beta max_i ||x_i||^2)."""
    return beta * row_sq_bound + float(np.max(reg))


# ---------------------------------------------------------------------------
# data


def resolve_row_bound(problem, row_bound) -> float:
    """B: the public bound, or max_i ||x_i|| over the features (warns: not private)."""
    if row_bound is not None:
        return check_scalar(row_bound, "row_bound", low=0.0, low_open=True)
    warnings.warn("objective-perturbation computes the row-norm bound from the private data "
                  "without privacy; pass row_bound=<B> (a public bound) to avoid this",
                  PrivacyLeakWarning, stacklevel=3)
    bound = problem.max_row_norm()
    if bound == 0 and not problem.fit_intercept:
        raise ValueError("every row of X is zero: there is no row bound to derive "
                         "(and nothing to learn); pass row_bound=<B>")
    return bound if bound > 0 else 1.0


@functools.singledispatch
def perturbed_objective(problem, bound, reg, lin):
    """F_b(w) = (1/n) sum_i l(x_i^T w; y_i) + (1/2) sum_j reg_j w_j^2 + lin^T w over the rows
    clipped to norm ``bound`` (module docstring), one implementation per data layout, chosen
    by the problem's type (the reduction is this solver's own, so it lives here rather than
    in the data protocol): in memory the clipped design and a sampled-Hessian Newton method
    (:class:`PerturbedObjective`); on chunks, rows clipped chunk by chunk inside each
    reduction (:class:`ChunkedPerturbedObjective`). The same function either way."""
    raise ValueError(f"problem must be a dpopt.Problem or ChunkedProblem, got "
                     f"{type(problem).__name__}")


@perturbed_objective.register(Problem)
def _in_memory(problem, bound, reg, lin):
    return PerturbedObjective(clip_feature_rows(problem, bound), problem.y, problem.loss, reg, lin)


@perturbed_objective.register(ChunkedProblem)
def _on_chunks(problem, bound, reg, lin):
    return ChunkedPerturbedObjective(problem, bound, reg, lin)


# ---------------------------------------------------------------------------
# calibration (public quantities only)


def jacobian_kappa(lam, alpha, beta, b2, n, intercept) -> float:
    """kappa = beta max_x x^T K^{-1} x (module docstring); inf when K is singular."""
    feat = b2 / (lam + alpha) if lam + alpha > 0 else (math.inf if b2 > 0 else 0.0)
    icpt = (1.0 / lam if lam > 0 else math.inf) if intercept else 0.0
    return beta * (feat + icpt) / n


def _regularization_for_shift(shift, alpha, beta, b2, n, intercept) -> float:
    """Smallest lambda >= 0 with log(1 + kappa(lambda)) <= shift (kappa decreases in lambda)."""
    target = math.expm1(min(shift, 700.0))  # e^700: kappa beyond any float data
    if jacobian_kappa(0.0, alpha, beta, b2, n, intercept) <= target:
        return 0.0
    hi = 1.0
    while jacobian_kappa(hi, alpha, beta, b2, n, intercept) > target:
        hi *= 2.0
    lo = hi / 2.0
    while lo > 1e-300 and jacobian_kappa(lo, alpha, beta, b2, n, intercept) <= target:
        lo /= 2.0
    log_lam = optimize.brentq(
        lambda v: jacobian_kappa(math.exp(v), alpha, beta, b2, n, intercept) - target,
        math.log(lo), math.log(hi), xtol=1e-13)
    lam, grow = math.exp(log_lam), 1e-12
    while jacobian_kappa(lam, alpha, beta, b2, n, intercept) > target:
        lam, grow = lam * (1.0 + grow), 2.0 * grow
    return lam


def _delta_excess(epsilon, delta, z, shift, dof, mu_out):
    return objective_perturbation_delta(epsilon, ObjectivePerturbation(z, shift, dof), mu_out) - delta


def _smallest_multiplier(epsilon, delta, shift, dof, mu_out, start):
    """Smallest z (to 1e-9 relative) meeting the target for this shift."""
    def f(log_z):
        return _delta_excess(epsilon, delta, math.exp(log_z), shift, dof, mu_out)

    lo = hi = math.log(start)
    while f(hi) > 0:
        hi += 1.0
    while f(lo) <= 0:
        if lo < -700:  # epsilon so large that any noise meets it
            return math.exp(lo)
        lo -= 1.0
    return math.exp(optimize.brentq(f, lo, hi, xtol=1e-10)) * (1.0 + 1e-9)


@functools.lru_cache(maxsize=512)
def calibrate_objective_perturbation(epsilon, delta, *, dof, regularization, alpha, beta, b2, n,
                                     intercept, prior_mu=0.0):
    """(lambda, z, shift, z_out, achieved epsilon) for a private run (module docstring).

    ``prior_mu``: Gaussian-DP mu of Gaussian mechanisms composed with this run (e.g. the
    private scaling of the estimators' default path). The target (epsilon, delta) is then
    met by the whole composition: the run's own Gaussian-equivalent budget is
    sqrt(mu^2 - prior_mu^2), and every delta is computed with the prior's Gaussian part
    folded into the output perturbation's (the two are one Gaussian of mu^2 summed).
    ``achieved`` is the epsilon of the whole composition.
    """
    mu_all = gdp_mu(epsilon, delta)
    if not 0.0 <= prior_mu < mu_all:
        raise ValueError(f"prior_mu={prior_mu!r} must be in [0, {mu_all:.6g}) (the mu of "
                         f"epsilon={epsilon:g}, delta={delta:g})")
    mu = math.sqrt(mu_all ** 2 - prior_mu ** 2)
    z_out = 1.0 / (OUTPUT_SHARE * mu)
    mu_out = math.hypot(1.0 / z_out, prior_mu)  # every Gaussian of the composition
    if regularization == "auto":
        z_target = NOISE_FACTOR / mu
        if _delta_excess(epsilon, delta, z_target, 0.0, dof, mu_out) > 0:
            # the chi term alone needs more than 1.3 x the Gaussian noise: 1.3 x its own need
            z_target = NOISE_FACTOR * _smallest_multiplier(epsilon, delta, 0.0, dof, mu_out,
                                                           z_target)
        hi = epsilon
        while _delta_excess(epsilon, delta, z_target, hi, dof, mu_out) <= 0:
            hi *= 2.0
        shift_max = optimize.brentq(
            lambda s: _delta_excess(epsilon, delta, z_target, s, dof, mu_out), 0.0, hi,
            xtol=1e-12)
        # kappa <= e^MAX_SHIFT - 1: at absurd epsilons lambda would underflow (the output
        # perturbation's gradient tolerance with it) for no gain
        shift_max = min(shift_max, MAX_AUTO_SHIFT)
        lam = _regularization_for_shift(shift_max, alpha, beta, b2, n, intercept)
    else:
        lam = regularization
    shift = math.log1p(jacobian_kappa(lam, alpha, beta, b2, n, intercept))
    if _delta_excess(epsilon, delta, math.inf, shift, dof, mu_out) > 0:
        raise ValueError(f"regularization={lam:g} is too small for epsilon={epsilon:g}: the "
                         f"Jacobian term alone costs {shift:.4g}; increase it or use 'auto'")
    z = _smallest_multiplier(epsilon, delta, shift, dof, mu_out, NOISE_FACTOR / mu)
    prior = [Gaussian(1.0 / prior_mu)] if prior_mu > 0 else []
    records = [ObjectivePerturbation(z, shift, dof), Gaussian(z_out)]
    achieved = epsilon_of(records + prior, delta, accountant="exact")
    grow = 1e-9
    while not achieved <= epsilon:  # rarely: the same bound was solved for
        z, grow = z * (1.0 + grow), 2.0 * grow
        records[0] = ObjectivePerturbation(z, shift, dof)
        achieved = epsilon_of(records + prior, delta, accountant="exact")
    return lam, z, shift, z_out, achieved


# ---------------------------------------------------------------------------
# the gradient target's float64 floor


#: The unit roundoff of float64, u = 2^-53.
UNIT_ROUNDOFF = 2.0 ** -53

#: ``tolerance`` when none is given, unless :func:`smallest_tolerance` is larger.
DEFAULT_TOLERANCE = 1e-6


def gradient_floor(L, b_aug, dim) -> float:
    """sqrt(dim) u L B_aug: below this no computed gradient can certify ||grad F_b|| <= target.

    Each coordinate of grad F_b is a mean of terms l'(z_i) x_ij of magnitude up to L B_aug,
    and each term is known in float64 to a relative u at best, so a coordinate is uncertain
    by up to u L B_aug however exactly the terms are summed, and the norm over dim
    coordinates by sqrt(dim) u L B_aug. The floor is necessary, not sufficient: the
    factor-2 margin of the target (tau / 2 on the computed gradient) is meant to cover the
    rounding of the sums and of the margins, as measured, not as proven (the margins'
    rounding grows with ||w||; docs/objective_perturbation.md). Public: (L, B_aug, dim)
    only."""
    return math.sqrt(dim) * UNIT_ROUNDOFF * L * b_aug


def smallest_tolerance(L, b_aug, dim, convexity) -> float:
    """The smallest ``tolerance`` whose target, tolerance * convexity / 2, is at least
    :func:`gradient_floor` (public; the calibration's lambda gives ``convexity``)."""
    return 2.0 * gradient_floor(L, b_aug, dim) / convexity


def resolve_tolerance(tolerance, smallest, public=True):
    """``tolerance``, None meaning :data:`DEFAULT_TOLERANCE` raised to ``smallest`` where
    that is larger; a ValueError naming it when a given value is below ``smallest``: its
    target would be a gradient norm float64 cannot certify (an independent audit saw a point
    released whose computed gradient was 270 times its target of 1.35e-20 at
    ``tolerance=1e-17``). Checked before the objective reads the data or any noise is
    drawn, so such a fit spends nothing. ``public``: whether ``smallest`` is (with a row
    bound read from the data it is a function of the largest row norm, and the message
    does not quote it)."""
    if tolerance is None:
        return max(DEFAULT_TOLERANCE, smallest)
    if tolerance < smallest:
        least = (f"{smallest:.3g}, the smallest" if public else
                 "the smallest (not quoted: it follows from the row bound read from the data)")
        raise ValueError(f"tolerance={tolerance:g} is below {least} whose gradient target "
                         "(tolerance * strong convexity / 2) float64 can resolve for this "
                         "problem (sqrt(dim) u L B_aug, u = 2^-53); use a larger tolerance "
                         "or regularization, or leave it unset")
    return tolerance


def raise_uncertified():
    """The refusal of a point whose computed gradient norm is above the target: the
    accelerated stage's step count certifies the target in exact arithmetic only, and on
    an ill-conditioned problem float64's rounding can leave its last point short (an
    independent audit: two nearly collinear features, lambda = 4.5e-8, a computed gradient
    2.3 times the target and an exact one 1.18 times tau). Releasing it would add output
    noise for a sensitivity the point does not have. Whether this happens depends on the
    data, so the refusal is an output: a ChargedFitError charging the whole (epsilon,
    delta) the fit reserved (``whole``: the releases of a pipeline before the solver are
    not known here). It is not covered by the guarantee's analysis either; it only never
    releases a point the analysis does not cover. The message quotes no number (the target
    follows from a row bound that may have been read from the data)."""
    raise ChargedFitError(
        "objective perturbation could not certify its approximate minimiser: the computed "
        "gradient norm at its last point is above its target (float64 rounding on an "
        "ill-conditioned problem); nothing is released, and the fit's whole budget is charged "
        "because whether this happens depends on the data. Use a larger regularization or "
        "tolerance, or drop nearly collinear features", whole=True)


# ---------------------------------------------------------------------------
# the solver


OPTIONS = (
    Option("row_bound", None, None, "public bound B on the feature-row norms (longer rows are "
           "rescaled); None reads it from the data, with a PrivacyLeakWarning"),
    Option("regularization", "auto", None, "'auto' or lambda >= 0 added on every coordinate"),
    Option("tolerance", None, None, "guaranteed ||w_hat - w*|| of the approximate minimizer; "
           "None: 1e-6, or the smallest that float64 can certify where that is larger"),
    Option("prior_mu", 0.0, None, "Gaussian-DP mu of Gaussian releases composed with this run "
           "(the target then covers the whole composition)"),
)


# the Huber canary's derivative is saturated at +-t, so its whole (clipped) gradient
# sensitivity enters the minimiser; the row bound is public (rows of norm 10 are clipped)
def default_settings(*, row_bound, **public):
    """Objective perturbation on the default path's scaled domain: rows of norm <= R."""
    return {"row_bound": row_bound}


@register_solver("objective-perturbation",
                 description="objective perturbation + approximate minima perturbation, "
                             "tight privacy profile (Redberg, Koskela, Wang 2023)",
                 losses=("logistic", "huber"), penalties=("none", "l2"),
                 family="objective-perturbation", options=OPTIONS,
                 audit={"row_bound": 1.0},
                 audit_canary={"loss": "huber", "scale": 10.0}, distributed=True,
                 mechanism="Gaussian linear term b^T w / n in the objective, then Gaussian output noise on "
                           "the approximate minimiser",
                 sensitivity="2 L B_aug for b (privacy loss shift + m^2/2 + m chi_dof, shift = log(1 + "
                             "kappa)); 2 tolerance for the output",
                 default_path=DefaultUse(
                     default_settings, rank=20, losses=("logistic", "huber"),
                     penalties=("none", "l2"),
                     why="{loss} loss (bounded derivative, bounded curvature) with an L2 or no "
                         "penalty: objective perturbation releases a perturbed exact minimizer "
                         "and needs no step, clip or pass count"))
def fit_objective_perturbation(problem, *, epsilon, delta, rng, row_bound=None,
                               regularization="auto", tolerance=None, prior_mu=0.0):
    """Fit by objective perturbation (see module docstring).

    Options: ``row_bound`` (public bound B on the feature-row norms; None: from the data,
    with a PrivacyLeakWarning), ``regularization`` ("auto" or lambda >= 0 added on every
    coordinate), ``tolerance`` (guaranteed ||w_hat - w*||, the sensitivity / 2 of the output
    perturbation; None: :func:`resolve_tolerance`, which also refuses one too small for
    float64), ``prior_mu`` (Gaussian-DP mu of Gaussian mechanisms released before this
    run in the same fit, e.g. private scaling: (epsilon, delta) is then the target of the whole
    composition, and the result reports the epsilon of this run's own mechanisms). The
    guarantee is under replace-one adjacency (module docstring).
    """
    adjacency = "replace-one"
    if tolerance is not None:
        tolerance = check_scalar(tolerance, "tolerance", low=0.0, low_open=True)
    prior_mu = check_scalar(prior_mu, "prior_mu", low=0.0)
    if not (isinstance(regularization, str) and regularization == "auto"):
        regularization = check_scalar(regularization, "regularization", low=0.0)
    L, beta = loss_constants(problem.loss)
    # the features' smallest L2 weight: the curvature the calibration may count on (alpha
    # on every feature, unless the penalty was reweighted per coordinate)
    alpha = (float(np.min(problem.penalty.l2[:problem.n_features], initial=problem.penalty.alpha))
             if problem.penalty.name == "l2" else 0.0)
    bound = resolve_row_bound(problem, row_bound)
    private = not math.isinf(epsilon)
    intercept = problem.fit_intercept
    b2 = bound * bound
    dof = 2
    if private:
        lam, z, shift, z_out, achieved = calibrate_objective_perturbation(
            epsilon, delta, dof=dof, regularization=regularization, alpha=alpha, beta=beta,
            b2=b2, n=problem.n_samples, intercept=intercept, prior_mu=prior_mu)
        if prior_mu > 0:  # report this run's own mechanisms; the caller composes the rest
            achieved = epsilon_of([ObjectivePerturbation(z, shift, dof), Gaussian(z_out)], delta,
                                  accountant="exact")
        sensitivity = L * math.sqrt(b2 + intercept) * (2.0 if dof == 2 else 1.0)
        sigma = z * sensitivity
        spent = (achieved, delta, "exact", z)
    else:
        lam = 0.0 if regularization == "auto" else regularization
        z = z_out = shift = sigma = 0.0
        spent = (math.inf, delta, "none", 0.0)
    convexity = lam + (0.0 if intercept else alpha)
    if private and convexity <= 0:
        raise ValueError("regularization=0 leaves the perturbed objective without strong "
                         "convexity (intercept, or no L2 penalty): use a positive value or 'auto'")
    tolerance = resolve_tolerance(tolerance, smallest_tolerance(
        L, math.sqrt(b2 + intercept), problem.dim, convexity) if private else 0.0,
        public=row_bound is not None)
    sigma_out = 2.0 * tolerance * z_out
    noise = rng.standard_normal(problem.dim)
    reg = np.full(problem.dim, lam + alpha)
    if intercept:
        reg[-1] = lam
    lin = sigma * noise / problem.n_samples
    obj = perturbed_objective(problem, bound, reg, lin)
    tau = tolerance * convexity if private else tolerance * max(convexity, 1e-3)
    target = 0.5 * tau  # half: room for round-off in the computed gradient
    with np.errstate(over="ignore", invalid="ignore"):
        if convexity > 0:  # always when private: the release rule of _op_minimize
            w, gnorm, iters, _ = minimize_to_tolerance(
                obj, problem.zeros(), target, convexity=convexity,
                smoothness=smoothness_bound(beta, b2 + intercept, reg),
                g0_bound=L * math.sqrt(b2 + intercept) + float(np.linalg.norm(lin)))
        else:  # epsilon = inf without any regularization: no bound needed, nothing private
            w, gnorm, iters = newton(obj, problem.zeros(), target)
    if private and not gnorm <= target:
        raise_uncertified()
    w = w + sigma_out * rng.standard_normal(problem.dim)
    ck = Checkpoints()
    ck.record(w, 1)
    mechs = [ObjectivePerturbation(z, shift, dof), Gaussian(z_out)]
    iters = iters if not private else 1  # how many steps were needed depends on the data
    return make_result(problem, w, solver="objective-perturbation", calibration_or_spent=spent,
                       mechanisms=mechs, n_iter=iters, passes=iters, checkpoints=ck,
                       adjacency=adjacency,
                       params={"row_bound": bound, "regularization": lam, "tolerance": tolerance,
                               "L": L, "beta": beta, "shift": shift,
                               "sigma": sigma, "sigma_out": sigma_out, "z_out": z_out,
                               "gradient_bound": target,
                               **({} if private else {"gradient_norm": gnorm})})
