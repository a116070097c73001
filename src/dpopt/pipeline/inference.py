"""Private inference for the default path's linear models: standard errors, intervals, p-values.

What is estimated
-----------------
The default path (:mod:`dpopt.pipeline.default_path`) fits the model on privately clipped and scaled data:
features clipped to their private bounds, mapped to [0, 1] and centred, rows longer than
the private row bound R rescaled to norm R, a regression target clipped to its private
bounds and mapped to [-1, 1]. The estimand is therefore the population minimizer theta of
the model's loss (plus the user's own L2 penalty, if any) on the data *after* these maps,
given the released scaling, mapped back to raw units by the same affine map as ``coef_``.
It equals the coefficients of the data-generating model when the clipping does not bind on
its support (e.g. bounded features whose range the private bounds cover, no row beyond R);
when it binds the estimand differs from them (a clipped feature's slope is the slope of
the clipped feature, which is not the raw one when E[y | x] is linear in the raw x).
``docs/inference.md`` shows such a case.

Method (one more Gaussian release, then post-processing)
--------------------------------------------------------
Both mechanisms of the default path have a known noise law, and both estimators are
M-estimators, so the variance of the released estimate is, to first order, the sandwich
variance of the non-private estimator plus the variance of the privacy noise propagated
through the inverse Hessian (Avella-Medina, Bradshaw & Loh, "Differentially private
inference via noisy optimization", Annals of Statistics 2023, Thm. 3 and Sec. 4: noisy
Hessian and noisy sandwich; the OLS case is the sufficient-statistics setting of Ferrando,
Wang & Sheldon, "Parametric bootstrap for differentially private confidence intervals",
AISTATS 2022, Sec. 5). Write u_i for the clipped augmented row (intercept last),
psi_i for the per-record score at the estimate and H for the Hessian of the summed loss:

    Var(theta_hat) ~ H^{-1} (sum_i psi_i psi_i^T) H^{-1}  +  H^{-1} Sigma_priv H^{-1}.

* Least squares (AdaSSP; Wang, UAI 2018). AdaSSP releases M = X^T X + E (+ the user's
  penalty), E symmetric with iid N(0, sigma_2^2) entries on and above the diagonal, and
  b = X^T y + e, e ~ N(0, sigma_3^2 I), then solves with an adaptive ridge lambda. The
  intervals do not use the ridge: where M is positive definite, theta_hat = M^{-1} b
  satisfies exactly theta_hat - theta = M^{-1} (xi + e - E theta), xi = X^T y - G theta
  the sampling part (G = X^T X + penalty, theta the estimand). So, to first order,

      Cov(theta_hat) = M^{-1} (meat + sigma_3^2 I + Cov(E theta)) M^{-1},
      Cov(E theta) = sigma_2^2 (||theta||^2 I + theta theta^T - diag(theta^2))

  (:func:`gram_noise_cov`), with the released noise scales used exactly; the meat
  sum_i r_i^2 u_i u_i^T, r_i = clip(y_i - u_i^T theta_hat, -C, C), is released once: the
  Gaussian mechanism of :func:`release_gram`, L2 sensitivity sqrt(2) * C^2 * B_a^2
  (replace-one; B_a^2 = R^2 + [intercept]), C a private quantile of |r_i| released first
  with a quarter of the inference mu^2 (:func:`residual_clip`; at most 2, where |y_i| <= 1
  after scaling); its noise enters the
  covariance linearly, and only the sum in brackets is projected on the PSD cone. M^{-1}
  depends on E, which biases theta_hat at second order: E[theta_hat] = (I + B) theta,
  B = G^{-1} E[E G^{-1} E] = sigma_2^2 G^{-1} (G^{-1} - diag(G^{-1}) + tr(G^{-1}) I)
  (:func:`noise_bias_operator`, estimated with M); the estimate is (I + B)^{-1} theta_hat
  and its covariance is mapped by (I + B)^{-1} too. The plug-in M^{-1} (.) M^{-1} is, to
  second order, the mean over E of the conditional covariance, so no further correction
  is made. The meat's noise makes each variance uncertain: the interval is Student's t
  with Satterthwaite's degrees of freedom (:func:`satterthwaite_dof`). Validity: the
  expansion is a series in B; where B's spectral radius is not
  below 1, or M is not positive definite, the released statistics do not determine
  theta to first order and no intervals are given (a reason names it) -- a rule of the
  noise law, no tuned constant.
* Logistic (objective perturbation). The released w is the minimizer of the loss plus
  (lambda + alpha)/2 ||w||^2 + b^T w / n, b ~ N(0, sigma^2 I), then + N(0, sigma_out^2 I).
  Two Gram-type releases at the (public) released w: the Hessian sum_i l''(u_i^T w) u_i
  u_i^T (0 <= l'' <= 1/4: sensitivity sqrt(2) B_a^2 / 4) and the meat sum_i l'(u_i^T w)^2
  u_i u_i^T (|l'| <= 1: sensitivity sqrt(2) B_a^2), the share split between them by
  :func:`logistic_split` (a function of public quantities: n, the dimension, B_a and
  objective perturbation's noise scale). One Newton step on the loss with the
  user's penalty alone removes the added ridge lambda (to first order):
  theta_hat = w + (H/n + diag(alpha))^{-1} lambda w; the noise b enters as
  (H/n + alpha)^{-1} b / n, so Sigma_priv = sigma^2 I (summed scale) plus the output noise.
  The step is exact for a quadratic loss; as a series in n lambda H^{-1} it converges only
  while n lambda is below the smallest eigenvalue of the released Hessian (not the floored
  one: a floor carries no information): otherwise (small n and epsilon, where OP's ridge
  is large or the Hessian's release is within its noise) it cannot undo the shrinkage, the
  estimate stays biased and no intervals are given. The plug-in M^{-1} (.) M^{-1} with the
  released M = H + E over-states the variance at second order (E[M^{-1}] = (I + B) H^{-1},
  :func:`noise_bias_operator`); removing that bias was tried and not kept: the fits that
  pass the refusal are those whose noise raised M's spectrum, and corrected intervals
  under-covered there (docs/inference.md).

Privacy. Every release above is a Gaussian mechanism on clipped rows with the stated
sensitivity; its noise is calibrated to the ``inference`` share of the fit's Gaussian-DP
mu (:func:`dpopt.pipeline.default_path.plan_budget`), so the whole fit, model and inference, is one
composition: one (epsilon, delta) in ``privacy_report()``, one charge to a
:class:`~dpopt.BudgetAccountant`. Everything after the releases (sandwich, mapping to raw
units, intervals, p-values) is post-processing. The released matrices are projected on the
positive semi-definite cone (eigenvalues clipped) before use; the logistic Hessian's
eigenvalues are floored at one noise standard deviation (a stop-gap: where the floor binds
the Hessian is not determined and the summary says so; docs/inference.md shows the
small-n under-coverage it leaves).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy import special
from sklearn.utils.validation import check_is_fitted

from dpopt._core.exceptions import NoIntervalsError
from dpopt.pipeline.residual_clip import (  # noqa: F401 (the meat's constants, public here)
    RESIDUAL_BINS,
    RESIDUAL_BOUND,
    RESIDUAL_CLIP_SHARE,
    residual_clip,
)
from dpopt.privacy import Gaussian
from dpopt.solvers.adassp import symmetric_noise
from dpopt.solvers.objective_perturbation import clip_feature_rows

#: Mechanisms of the default path whose released model has a known noise law here.
SUPPORTED = ("adassp", "objective-perturbation")
#: Bounds on the logistic loss's curvature and squared slope: 0 <= l'' <= 1/4, l'^2 <= 1.
LOGISTIC_CURVATURE, LOGISTIC_SLOPE_SQ = 0.25, 1.0


def unsupported_reason(solver, *, chunked=False, row_normalized=False, unlearnable=False,
                       degenerate_target=False):
    """Why the default path's fit cannot give intervals, or None if it can."""
    if degenerate_target:
        return ("the target's private bounds collapsed (too few samples for this epsilon): "
                "the model is the constant 0, there is nothing to give intervals for")
    if unlearnable:
        return ("the default path released no model (only a constant: too few rows for a "
                "model at this epsilon and delta; the plan's reason says which), so there is "
                "nothing to give intervals for")
    if chunked:
        return "inference is not implemented on chunked data (fit in memory)"
    if row_normalized:
        return ("the default path row-normalized the features (the budget cannot locate "
                "per-feature bounds at this n and epsilon): the coefficients apply to the "
                "normalized rows and have no raw-unit counterpart; use a larger epsilon")
    if solver not in SUPPORTED:
        return (f"the default path fits this model with {solver!r}, whose released model has "
                f"no noise law usable for intervals here (supported: {', '.join(SUPPORTED)}: "
                f"squared or logistic loss with an L2 or no penalty)")
    return None


# --------------------------------------------------------------------------- releases


def release_gram(U, weights, weight_bound, row_sq_bound, mu, rng):
    """Noisy sum_i weights_i u_i u_i^T (upper triangle released, mirrored), mu-GDP.

    Replace-one: the sum changes by D = a a^T - b b^T with a = sqrt(w) u, ||a||^2 <= c :=
    ``weight_bound * row_sq_bound``, and ||D||_F^2 = ||a||^4 + ||b||^4 - 2 (a^T b)^2 <= 2 c^2,
    so the upper triangle moves by at most sqrt(2) c in L2. N(0, (sqrt(2) c / mu)^2) on each
    entry of it is the Gaussian mechanism with multiplier 1 / mu. Returns (matrix, sigma,
    record)."""
    sensitivity = math.sqrt(2.0) * weight_bound * row_sq_bound
    sigma = sensitivity / mu
    G = U.T @ (np.asarray(weights)[:, None] * U) if not sp.issparse(U) else \
        np.asarray((U.T @ sp.diags(weights) @ U).toarray())
    return np.asarray(G) + sigma * symmetric_noise(U.shape[1], rng), sigma, Gaussian(1.0 / mu)


def psd_part(M, floor=0.0):
    """M symmetrized, eigenvalues clipped below at ``floor`` (the nearest PSD matrix for 0)."""
    vals, vecs = np.linalg.eigh(0.5 * (M + M.T))
    return (vecs * np.maximum(vals, floor)) @ vecs.T


def clipped_design(problem, row_bound):
    """The rows the mechanisms saw: feature parts rescaled to norm <= R, intercept 1 last."""
    U = clip_feature_rows(problem, row_bound)  # sparse, a ClippedRows view, or dense
    return U.toarray() if hasattr(U, "toarray") else np.asarray(U)


@dataclass
class ScaledInference:
    """Estimate and covariance on the scaled domain (intercept last), plus notes."""

    estimate: np.ndarray
    cov: np.ndarray
    method: str
    notes: tuple = ()
    unavailable: str | None = None  # why the releases cannot give intervals
    # the covariance's own noise: cov = P (C + N) P^T with N symmetric Gaussian of entry
    # scale ``noise_scale`` (the released meat's); gives per-coordinate degrees of freedom
    propagator: np.ndarray | None = None
    noise_scale: float = 0.0


def least_squares_inference(problem, result, release, row_bound, mu, rng):
    """AdaSSP's noisy statistics, its noise law and one released meat (module docstring)."""
    n, d = problem.n_samples, problem.dim
    _, sigma_gram, sigma_xty = result.params["sigmas"]
    penalty = np.diag(n * np.asarray(problem.penalty.l2, dtype=np.float64))
    M = 0.5 * (release.xtx + release.xtx.T) + penalty
    fit = noisy_normal_equations(M, release.xty, sigma_gram, eigen_lower=(
        None if math.isinf(result.params["sigmas"][0]) else release.lambda_min))
    # residuals at the corrected estimate (at AdaSSP's own model if there is none)
    theta = fit.estimate if fit.unavailable is None else np.asarray(result.w, dtype=np.float64)
    U = clipped_design(problem, row_bound)
    r = np.clip(np.clip(problem.y, -1.0, 1.0) - U @ theta, -RESIDUAL_BOUND, RESIDUAL_BOUND)
    mu_clip, mu_meat = mu * math.sqrt(RESIDUAL_CLIP_SHARE), mu * math.sqrt(1 - RESIDUAL_CLIP_SHARE)
    bound, rec_clip = residual_clip(r, mu_clip, mu_meat, rng)
    r = np.clip(r, -bound, bound)
    B_a2 = row_bound ** 2 + problem.fit_intercept
    S, sigma_meat, rec = release_gram(U, r * r, bound ** 2, B_a2, mu_meat, rng)
    if fit.unavailable is not None:
        return ScaledInference(theta, np.full((d, d), np.nan), METHOD_LS,
                               unavailable=fit.unavailable), rec_clip + [rec]
    # the noisy meat enters linearly (unbiased): only the sum is projected on the PSD cone
    S = S * n / max(n - d, 1)  # HC1 small-sample factor
    noise = sigma_xty ** 2 * np.eye(d) + gram_noise_cov(theta, sigma_gram)
    cov = fit.propagator @ psd_part(S + noise) @ fit.propagator.T
    notes = ()
    if release.ridge > 0:
        notes = (f"AdaSSP's adaptive ridge ({release.ridge:.3g}) is not used by the intervals: "
                 f"they solve the noisy normal equations without it (the noisy Gram matrix "
                 f"is positive definite here) and correct the second-order bias of its noise",)
    return ScaledInference(fit.estimate, cov, METHOD_LS, notes, propagator=fit.propagator,
                           noise_scale=sigma_meat * n / max(n - d, 1)), rec_clip + [rec]


METHOD_LS = "sandwich (HC1) + delta method of AdaSSP's noise"


@dataclass
class NoisyNormalEquations:
    """theta = (I + B)^{-1} M^{-1} b and its propagator (I + B)^{-1} M^{-1}, or the reason
    why the released Gram matrix cannot support them."""

    estimate: np.ndarray | None
    propagator: np.ndarray | None
    unavailable: str | None = None


def noisy_normal_equations(M, b, sigma, eigen_lower=None):
    """Solve the noisy normal equations M theta = b (M = X^T X + E + penalty, b = X^T y + e)
    and remove the second-order bias of the Gram noise E (entries N(0, sigma^2) on and above
    the diagonal, mirrored).

    With G the noiseless matrix, theta_hat = M^{-1} b = theta + M^{-1} (xi + e - E theta)
    exactly (xi the sampling part of X^T y), so theta_hat is unbiased but for the
    dependence of M^{-1} on E: expanding M^{-1} = G^{-1} - G^{-1} E G^{-1} + ..., the mean
    is (I + B) theta + O(sigma^3) (:func:`noise_bias_operator`); the estimate is
    (I + B)^{-1} theta_hat. Where the expansion does not converge, no intervals.

    ``eigen_lower``: AdaSSP's private lower bound on lambda_min(X^T X) (its eigenvalue
    release, a (1 - rho)-confidence bound from a release independent of E). M's own
    spectrum cannot tell a direction the data determine from one whose eigenvalue the noise
    pushed up (the plug-in radius is then small exactly when it is wrong), so the
    convergence is also checked at the smallest eigenvalue G can have: the radius of B is
    about sigma^2 (tr(G^{-1}) + 1 / lambda_min) / lambda_min, evaluated at lambda_min =
    eigen_lower (and tr(G^{-1}) by M's)."""
    Minv, B, reason = noise_bias_operator(M, sigma)
    if reason is None and eigen_lower is not None:
        reason = eigen_bound_reason(eigen_lower, np.trace(Minv), sigma)
    if reason is not None:
        return NoisyNormalEquations(None, None, REFUSED_LS.format(why=reason))
    propagator = np.linalg.solve(np.eye(M.shape[0]) + B, Minv)
    return NoisyNormalEquations(propagator @ b, propagator)


def eigen_bound_reason(eigen_lower, trace_inv, sigma):
    """Why the series of :func:`noise_bias_operator` may diverge at the smallest eigenvalue
    the data allow (None if it converges there)."""
    if eigen_lower <= 0:
        return ("the private lower bound on the smallest eigenvalue of X^T X is 0: some "
                "direction may carry no information")
    radius = sigma ** 2 * (trace_inv + 1.0 / eigen_lower) / eigen_lower
    if radius >= 1.0:
        return (f"at the private lower bound {eigen_lower:.3g} on the smallest eigenvalue of "
                f"X^T X, the second-order effect of the noise does not vanish (radius "
                f"{radius:.2g} >= 1)")
    return None


def noise_bias_operator(M, sigma):
    """(M^{-1}, B, reason): the second-order bias operator of the inverse of a matrix
    released with symmetric Gaussian noise E (iid N(0, sigma^2) on and above the diagonal).

    With G = M - E, E[(G + E)^{-1}] G = I + B + O(sigma^3), B = G^{-1} E[E G^{-1} E], and
    for symmetric A, E[E A E]_ik sums A_jl E[E_ij E_lk] over {i, j} = {l, k}:
    sigma^2 (A - diag(A) + tr(A) I). B is estimated with M for G. The expansion of
    (G + E)^{-1} is a series whose terms shrink like the powers of B: where B's spectral
    radius is not below 1, or M is not positive definite, the released matrix does not
    determine its inverse to first order and ``reason`` says so (a delta method built on it
    would not hold). Post-processing of M."""
    vals, vecs = np.linalg.eigh(0.5 * (M + M.T))
    if vals[0] <= 0:
        return None, None, "the noisy matrix is not positive definite"
    Minv = (vecs / vals) @ vecs.T
    B = sigma ** 2 * Minv @ (Minv - np.diag(np.diag(Minv)) + np.trace(Minv) * np.eye(M.shape[0]))
    radius = float(np.max(np.abs(np.linalg.eigvals(B))))
    if not radius < 1.0:
        return Minv, B, (f"the second-order effect of its noise does not vanish (spectral "
                         f"radius {radius:.2g} >= 1)")
    return Minv, B, None


REFUSED_LS = ("the noisy Gram matrix released by AdaSSP does not determine the coefficients "
              "at this n and epsilon ({why}), so the delta method behind the intervals does "
              "not hold; use a larger epsilon or more data")


def gram_noise_cov(theta, sigma):
    """Cov(E theta) for the symmetric Gaussian E of AdaSSP (iid N(0, sigma^2) on and above
    the diagonal): entry (i, k) sums theta_j theta_l Cov(E_ij, E_kl), which is sigma^2 when
    {i, j} = {k, l}: sigma^2 (||theta||^2 I + theta theta^T - diag(theta^2))."""
    theta = np.asarray(theta, dtype=np.float64)
    return sigma ** 2 * ((theta @ theta) * np.eye(theta.size) + np.outer(theta, theta)
                         - np.diag(theta * theta))


def logistic_inference(problem, result, row_bound, mu, rng):
    """Objective perturbation's released model + noisy Hessian and meat (module docstring)."""
    p = result.params
    n, d = problem.n_samples, problem.dim
    w = np.asarray(result.w, dtype=np.float64)
    U = clipped_design(problem, row_bound)
    z = U @ w
    s = special.expit(-problem.y * z)  # |l'(z; y)| = 1 / (1 + e^{y z})
    B_a2 = row_bound ** 2 + problem.fit_intercept
    alpha = np.asarray(problem.penalty.l2, dtype=np.float64)
    share_h = logistic_split(n, d, B_a2, p["sigma"], float(np.mean(alpha)))
    mu_h, mu_s = mu * math.sqrt(share_h), mu * math.sqrt(1.0 - share_h)
    Hs, sigma_h, rec_h = release_gram(U, s * (1.0 - s), LOGISTIC_CURVATURE, B_a2, mu_h, rng)
    Ss, _, rec_s = release_gram(U, s * s, LOGISTIC_SLOPE_SQ, B_a2, mu_s, rng)
    H = Hs + n * np.diag(alpha)  # summed scale
    Hinv = inverse_floored(H, sigma_h)
    floored = int(np.sum(np.linalg.eigvalsh(0.5 * (H + H.T)) < sigma_h))
    ridge = n * float(p["regularization"])
    # the step's expansion in the ridge converges only when the ridge is below the released
    # curvature's smallest eigenvalue (not the floored one: the floor is no information)
    lam_min = float(np.linalg.eigvalsh(0.5 * (H + H.T))[0])
    if not lam_min > ridge:
        return ScaledInference(w, np.full((d, d), np.nan), METHOD_LOGISTIC,
                               unavailable=REFUSED_LOGISTIC.format(ridge=ridge, lam=lam_min)), \
            [rec_h, rec_s]
    theta = w + n * Hinv @ (p["regularization"] * w)  # the Newton step removing OP's ridge
    priv = p["sigma"] ** 2 * np.eye(d)
    cov = Hinv @ (psd_part(Ss) * n / max(n - d, 1) + priv) @ Hinv + p["sigma_out"] ** 2 * np.eye(d)
    notes = () if not floored else (FLOORED_NOTE.format(k=floored, d=d),)
    return ScaledInference(theta, cov, METHOD_LOGISTIC, notes), [rec_h, rec_s]


def logistic_split(n, dim, row_sq_bound, sigma_op, alpha=0.0):
    """Share of the inference mu^2 given to the logistic Hessian release (the meat gets
    the rest), from public quantities only.

    What the two releases are for. The covariance is V = H^{-1} (S + P) H^{-1} with
    P = sigma_op^2 I the objective-perturbation noise (known exactly: its scale is
    calibrated from public quantities). Along an eigenvector of H with eigenvalue h (and
    S ~ h there, the information identity E[l'^2 | x] = l'' of a well-specified model),
    V = (h + P) / h^2, so to first order dV / V = dS / (h + P) - 2 dH / h: the Hessian's
    noise counts twice and against h alone, the meat's once and against h + P. With
    sensitivities Delta_H = sqrt(2) B_a^2 / 4 and Delta_S = sqrt(2) B_a^2 (module
    docstring) and shares a, 1 - a of mu^2, the noise of a quadratic form v^T E v scales
    like Delta / (mu sqrt(share)) for both, and the variance of dV / V is proportional to

        4 Delta_H^2 / (a h^2) + Delta_S^2 / ((1 - a) (h + P)^2),

    minimal at a / (1 - a) = 2 Delta_H (h + P) / (Delta_S h) = (h + P) / (2 h). Without
    privacy noise in the model (P = 0) this is the fixed split 1/3, 2/3 of the first
    version; where P dominates the bracket (small epsilon, or small n: P does not grow with
    n, h does) the meat's noise is negligible against P and the Hessian -- whose noise also
    decides whether the Newton step is valid at all (``REFUSED_LOGISTIC``) -- should get
    almost everything. h is private; the split uses the public upper bound on the mean
    eigenvalue of the summed Hessian, h <= n (beta B_a^2 / dim + mean(alpha)), beta = 1/4
    (tr(H) <= n beta B_a^2 since l'' <= beta and ||u||^2 <= B_a^2). The optimal a
    decreases in h, so this is the smallest share the optimum can take for a direction of
    average curvature; the weaker directions -- the ones that decide the refusal -- would
    want more. The share is a function of public quantities only (n is public under
    replace-one adjacency, the others were released before), and the two Gaussian
    mechanisms compose to the inference mu for every value of a (mu^2 a + mu^2 (1 - a)):
    given the earlier releases the pair is one mu-GDP mechanism, whatever split they
    chose, so adaptive composition holds with the plan's mu unchanged."""
    h = n * (LOGISTIC_CURVATURE * row_sq_bound / dim + alpha)
    ratio = 2.0 * LOGISTIC_CURVATURE * (h + sigma_op ** 2) / (LOGISTIC_SLOPE_SQ * h)
    return ratio / (1.0 + ratio)


METHOD_LOGISTIC = "sandwich + objective-perturbation noise"
REFUSED_LOGISTIC = ("objective perturbation's ridge (n lambda = {ridge:.3g}) is not small against "
                    "the released Hessian (smallest eigenvalue {lam:.3g}): one Newton step cannot "
                    "remove the shrinkage it causes, and the intervals would be centred on a "
                    "biased estimate; use a larger epsilon or more data")
FLOORED_NOTE = ("{k} of the {d} eigenvalues of the released Hessian are within its noise (floored "
                "at one noise standard deviation): the covariance in those directions is not "
                "determined by the data and the intervals can under-cover (docs/inference.md)")


def inverse_floored(M, floor):
    """M's inverse with its eigenvalues floored at ``floor`` (M symmetrized)."""
    vals, vecs = np.linalg.eigh(0.5 * (M + M.T))
    return (vecs / np.maximum(vals, floor)) @ vecs.T


def release_inference(problem, result, solver, *, row_bound, mu, rng, adassp_release=None):
    """The inference releases of a default-path fit on the scaled ``problem`` (mu-GDP in
    all). Returns (ScaledInference, Gaussian records)."""
    if solver == "adassp":
        return least_squares_inference(problem, result, adassp_release, row_bound, mu, rng)
    if solver == "objective-perturbation":
        return logistic_inference(problem, result, row_bound, mu, rng)
    raise ValueError(unsupported_reason(solver))


# --------------------------------------------------------------------------- raw units


def raw_map(scaling, target, dim, fit_intercept):
    """(A, c) with raw = A theta + c (raw: coef then intercept): the map of
    :meth:`dpopt.pipeline.autofit.AutoFit.raw_model`, which is affine in theta."""
    p = dim - fit_intercept
    h, center = (1.0, 0.0) if target is None else (target.half_width, target.center)
    inv = np.divide(1.0, scaling.scale, out=np.zeros(p), where=scaling.scale > 0)
    A = np.zeros((dim, dim))
    A[np.arange(p), np.arange(p)] = h * inv
    c = np.zeros(dim)
    if fit_intercept:
        A[p, :p] = -h * inv * scaling.offset
        A[p, p] = h
        c[p] = center
    return A, c


@dataclass
class Inference:
    """Estimate and covariance in raw units (coefficients, then the intercept if fitted)."""

    estimate: np.ndarray
    cov: np.ndarray
    fit_intercept: bool
    dropped: np.ndarray  # features whose private bounds collapsed (coefficient fixed at 0)
    method: str
    n_samples: int
    notes: tuple = ()
    unavailable: str | None = None  # the releases were made but cannot give intervals
    dof: np.ndarray | None = None  # Satterthwaite degrees of freedom per coordinate

    @classmethod
    def from_scaled(cls, scaled, scaling, target, fit_intercept, n_samples):
        dim = scaled.estimate.size
        A, c = raw_map(scaling, target, dim, fit_intercept)
        cov = A @ scaled.cov @ A.T
        dof = None
        if scaled.propagator is not None and scaled.noise_scale > 0:
            dof = satterthwaite_dof(A @ scaled.propagator, np.diag(cov), scaled.noise_scale)
        return cls(A @ scaled.estimate + c, cov, fit_intercept,
                   np.asarray(scaling.scale) <= 0, scaled.method, int(n_samples),
                   scaled.notes, scaled.unavailable, dof)

    @property
    def bse(self):
        se = np.sqrt(np.maximum(np.diag(self.cov), 0.0))
        p = self.dropped.size
        se[:p][self.dropped] = np.nan
        return se


def satterthwaite_dof(P, variances, noise_scale):
    """Degrees of freedom of each estimated variance v_j = a_j (C + N) a_j^T (a_j row j of
    P) whose part N is Gaussian noise, symmetric with iid N(0, s^2) entries on and above the
    diagonal: Var(a N a^T) = s^2 (2 ||a||^4 - sum_k a_k^4) (each upper entry counts twice
    off the diagonal), and the moment match v ~ (v_true / nu) chi^2_nu gives
    nu = 2 v^2 / Var (Satterthwaite, Biometrics Bulletin 1946). The Wald interval then uses
    Student's t with nu degrees of freedom: a variance estimated from a noisy release is
    itself uncertain, and z would under-cover where that noise is comparable to it."""
    sq = np.sum(P * P, axis=1)
    var = noise_scale ** 2 * (2.0 * sq * sq - np.sum(P ** 4, axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(var > 0, 2.0 * np.asarray(variances) ** 2 / var, np.inf)


def check_alpha(alpha):
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) \
            or not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must be a number in (0, 1) (1 - confidence level), got {alpha!r}")
    return float(alpha)


def wald_table(inf, names, alpha):
    """statsmodels-style columns: coef, std err, z, P>|z|, [alpha/2, 1 - alpha/2]."""
    se = inf.bse
    dof = np.full(se.shape, np.inf) if inf.dof is None else np.maximum(inf.dof, 1.0)
    finite = np.isfinite(dof)
    q = np.where(finite, special.stdtrit(np.where(finite, dof, 1.0), 1.0 - alpha / 2.0),
                 special.ndtri(1.0 - alpha / 2.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = inf.estimate / se
        pval = np.where(finite, 2.0 * special.stdtr(np.where(finite, dof, 1.0), -np.abs(z)),
                        2.0 * special.ndtr(-np.abs(z)))
    lo, hi = f"[{alpha / 2:g}", f"{1 - alpha / 2:g}]"
    return pd.DataFrame({"coef": inf.estimate, "std err": se, "z": z, "P>|z|": pval,
                         lo: inf.estimate - q * se, hi: inf.estimate + q * se}, index=names)


def render(table, header):
    """Plain text in the style of statsmodels' summary tables."""
    body = table.to_string(float_format=lambda v: f"{v:.4g}")
    width = max(len(line) for line in body.splitlines() + header.splitlines())
    rule = "=" * width
    return "\n".join([rule, header, rule, body, rule])


def negated(table):
    """The :meth:`InferenceMixin.summary` table of the negated model (a binary classifier's
    other label as +1): coef, z and the bounds change sign, the bounds swap, the standard
    errors and p-values stay; its text is rendered again with the same header and notes."""
    out = table.copy()
    lo, hi = table.columns[-2:]
    out["coef"], out["z"] = -table["coef"], -table["z"]
    out[lo], out[hi] = -table[hi], -table[lo]
    return _with_text(out, table.attrs["header"], table.attrs["notes"])


def _with_text(table, header, notes):
    """``table`` with its header, notes and plain-text rendering in ``attrs``."""
    table.attrs.update(header=header, notes=notes)
    table.attrs["text"] = render(table, header) + "".join(f"\nNote: {n}" for n in notes)
    return table


# --------------------------------------------------------------------------- estimator side


class InferenceMixin:
    """``conf_int``, ``bse_`` and ``summary`` for estimators fitted with ``inference=True``."""

    def _inference(self):
        check_is_fitted(self, "coef_")
        auto = getattr(self, "auto_", None)
        name = type(self).__name__
        if auto is None:
            raise NoIntervalsError(f"{name} was fitted with solver={self.solver!r}: intervals "
                                   f"are only given for the default path (solver='auto', "
                                   f"inference=True)")
        if getattr(auto, "inference", None) is None and len(getattr(self, "classes_", ())) > 2:
            raise NoIntervalsError(f"{name} was fitted on {len(self.classes_)} classes: "
                                   f"intervals are given for a regression or two classes")
        if auto.inference is None:
            reason = (unsupported_reason(None, unlearnable=True) if auto.plan.get("unlearnable")
                      else auto.plan.get("inference_unavailable"))
            if reason is None:
                raise NoIntervalsError(f"{name} was fitted with inference=False: nothing was "
                                       f"released for intervals; refit with inference=True (it "
                                       f"spends a share of the same epsilon)")
            raise NoIntervalsError(f"{name}: no intervals for this fit: {reason}")
        if auto.inference.unavailable is not None:
            raise NoIntervalsError(f"{name}: no intervals for this fit: "
                                   f"{auto.inference.unavailable}")
        return auto.inference

    @property
    def bse_(self):
        """Standard errors of ``coef_``'s estimand (raw units), shape (n_features,)."""
        inf = self._inference()
        return inf.bse[:inf.dropped.size]

    def conf_int(self, alpha=0.05):
        """(n_features, 2) Wald interval (level 1 - alpha) for the coefficients, raw units."""
        alpha = check_alpha(alpha)
        inf = self._inference()
        table = wald_table(inf, self._inference_names(), alpha)
        return table.iloc[:inf.dropped.size, 4:6].to_numpy()

    def _inference_names(self):
        """The names of ``coef_``'s entries (a table's encoded columns: its one-hot levels
        and missing indicators), then the intercept's."""
        table = getattr(self, "table_", None)
        names = getattr(self, "feature_names_in_", None)
        if table is not None and table.schema is not None:
            names = table.get_feature_names_out()
        names = [str(v) for v in names] if names is not None else \
            [f"x{j}" for j in range(np.shape(self.coef_)[-1])]
        return names + (["intercept"] if self.fit_intercept else [])

    def summary(self, alpha=0.05):
        """Coefficient table: a pandas DataFrame indexed by feature names (intercept last),
        columns coef, std err, z, P>|z| and the interval bounds; its ``attrs["text"]`` (and
        :meth:`summary_text`) is the plain-text rendering, with the header and notes."""
        alpha = check_alpha(alpha)
        inf = self._inference()
        table = wald_table(inf, self._inference_names(), alpha)
        r = self.fit_result_
        header = (f"{type(self).__name__} (solver='auto' -> {self.auto_.plan['solver']}), "
                  f"({r.epsilon:.3g}, {r.delta:.2g})-DP including the inference releases\n"
                  f"n = {inf.n_samples}, covariance: {inf.method}")
        notes = list(inf.notes)
        if inf.dropped.any():
            notes.append("features whose private bounds collapsed (std err NaN) are fixed at 0")
        notes.append("estimand: the coefficients on the privately clipped and scaled data, "
                     "mapped to raw units (docs/inference.md)")
        return _with_text(table, header, notes)

    def summary_text(self, alpha=0.05):
        """The plain-text rendering of :meth:`summary` (statsmodels style)."""
        return self.summary(alpha).attrs["text"]
