"""AdaSSP: sufficient-statistics perturbation with an adaptive ridge (squared loss).

Yu-Xiang Wang, "Revisiting differentially private linear regression: optimal and
adaptive prediction & estimation in unbounded domain", UAI 2018, Algorithm 2.

The squared-loss objective (1/n) sum_i (x_i^T w - y_i)^2 / 2 + psi(w) with psi = 0 or
alpha/2 ||w||^2 (intercept unpenalized) is minimised by the normal equations

    (X^T X + n alpha P) w = X^T y,        P = diag(1, ..., 1, 0 for the intercept),

which depend on the data only through the sufficient statistics X^T X and X^T y. AdaSSP
releases them with Gaussian noise and solves a ridge-regularised version:

1. lambda_min~ = max(0, lambda_min(X^T X) + sigma_1 Z - sigma_1 Phi^{-1}(1 - rho)),
   Z ~ N(0, 1): a private lower estimate of the smallest eigenvalue; it is below the
   true lambda_min(X^T X) with probability >= 1 - rho (Phi is the normal CDF; the paper
   shifts by sqrt(log(6/delta)) standard deviations instead, tying the failure
   probability to delta).
2. lambda = max(0, t_rho - lambda_min~) with t_rho = sigma_2 tau(d, rho) a (1 - rho)-quantile
   bound on -lambda_min(E) of the matrix noise E of step 3 (-E has the law of E, so it
   bounds lambda_max(E)); tau is the smaller of two such bounds (:func:`eigen_tail`):

   * sqrt(2 d log(d / rho)) (Tropp, "An Introduction to Matrix Concentration
     Inequalities", 2015, Thm 4.1.1: for the Gaussian series E = sum_k g_k A_k,
     P(lambda_max(E) >= t) <= d exp(-t^2 / (2 v)) with v = ||sum_k A_k^2||; here
     A_ii = sigma_2 e_i e_i^T, A_ij = sigma_2 (e_i e_j^T + e_j e_i^T) and
     sum_k A_k^2 = d sigma_2^2 I, so v = d sigma_2^2);
   * 2 sqrt(d) + 2 sqrt(log(1 / rho)), a mean plus a concentration term. Mean:
     lambda_max(E) = sup_v X_v over unit v with X_v = v^T E v, and
     E (X_v - X_u)^2 <= 2 sigma_2^2 ||v v^T - u u^T||_F^2 <= 4 sigma_2^2 ||v - u||^2, the
     increments of Y_v = 2 sigma_2 <g, v>, so E lambda_max(E) <= E sup_v Y_v =
     2 sigma_2 E||g|| <= 2 sigma_2 sqrt(d) (the Sudakov-Fernique inequality; Vershynin,
     "High-Dimensional Probability", 2018, Thm 7.2.11 and sec. 7.3 for the same argument on
     Gaussian matrices). Concentration: lambda_max is sqrt(2) sigma_2-Lipschitz in the
     d (d + 1) / 2 standard normals behind E (||E - E'||_op <= ||E - E'||_F and each
     off-diagonal normal appears twice), so P(lambda_max(E) >= E lambda_max(E) + t) <=
     exp(-t^2 / (4 sigma_2^2)) (Gaussian concentration, Vershynin Thm 5.2.2 with its
     sharp constant, Boucheron, Lugosi & Massart 2013, Thm 5.6).

   The second is about 2 / sqrt(log(d / rho) / 2) times smaller for large d (0.64 at
   d = 58, 0.58 at d = 124, rho = 0.05) and the first is smaller below d of about 9: the
   ridge is the noise's own scale, not twice it. Both replace the paper's
   c B^2 = sqrt(d log(6/delta) log(2 d^2/rho)) B^2 / (epsilon/3), which is
   sigma_2 sqrt(d log(2 d^2 / rho)) at the paper's noise level; d counts the intercept.
   The ridge is post-processing of the released eigenvalue: privacy does not depend on it.
3. X^T X + E, E symmetric with iid N(0, sigma_2^2) entries on and above the diagonal
   (mirrored below), and X^T y + N(0, sigma_3^2 I).
4. w = (X^T X + E + lambda I + n alpha P)^{-1} (X^T y + e).

With probability >= 1 - 2 rho both bounds of steps 1-2 hold and the matrix of step 4 is
positive semi-definite: lambda_min(X^T X + E + lambda I) >= lambda_min(X^T X) - t_rho +
lambda >= lambda_min(X^T X) - lambda_min~ >= 0 when lambda > 0, and >= lambda_min(X^T X)
- t_rho >= lambda_min~ - t_rho >= 0 otherwise. The solve never assumes it: it uses the
eigendecomposition of the symmetric matrix and keeps only eigenvalues above
d * machine-epsilon * max |eigenvalue| (the pseudo-inverse of the matrix's projection on
the positive semi-definite cone). When the matrix is positive definite and well
conditioned, the usual case, this is the exact inverse; at epsilon = inf it is the
minimum-norm least-squares solution of singular normal equations. Post-processing, so free.

The adaptive ridge lambda is added to every coordinate, the intercept's included: it is not
a modelling penalty but the correction that keeps the noisy Gram matrix positive definite,
and its noise E hits the intercept's row and column too. Its effect on the intercept is
small only while lambda << n (the intercept's diagonal entry of X^T X is n): it pulls the
intercept towards 0 by about lambda / (n + lambda); ``ridge="sure"`` (below) leaves the
intercept out. The user's alpha (n alpha in the normal equations) leaves the intercept
unpenalized, as everywhere in dpopt.

Clipping. Every row's feature part is rescaled to L2 norm at most B = ``row_bound`` (the
intercept's constant 1 is kept), every target clipped to [-B_y, B_y], B_y = ``target_bound``.
The guarantee holds for any data because the statistics are computed from the clipped rows.
``None`` takes B or B_y from the data, without privacy (:class:`~dpopt.PrivacyLeakWarning`).

Privacy (replace-one adjacency: the neighbouring dataset differs in the value of one
record; n is public). Write x, x' for the clipped feature parts of the replaced record,
a = ||x||^2 <= B^2, b = ||x'||^2 <= B^2, c = x^T x', and u, u' for the full rows (with the
intercept's 1 appended when fitted), ||u||^2 <= B_a^2 = B^2 (+ 1).

* lambda_min(X^T X): with A the Gram matrix of the other n - 1 rows, Weyl's inequality
  puts lambda_min(A + u u^T) in [lambda_min(A), lambda_min(A) + ||u||^2], so the two values
  differ by at most Delta_1 = B_a^2.
* X^T X: the released parameters are the upper triangle (diagonal included) of the
  difference D = u u^T - u' u'^T, whose squared norm is at most ||D||_F^2 (off-diagonal
  entries count once instead of twice). Without intercept ||D||_F^2 = a^2 + b^2 - 2 c^2
  <= 2 B^4, so Delta_2 = sqrt(2) B^2 (attained by x = B e_1, x' = B e_2). With an
  intercept D has the feature block x x^T - x' x'^T, the off-diagonal column x - x' (once
  in the upper triangle) and a zero corner: the squared norm is at most
  a^2 + b^2 - 2 c^2 + a + b - 2 c <= 2 B^4 + 2 B^2 + max_{|c| <= B^2} (-2 c^2 - 2 c), i.e.
  Delta_2^2 = 2 B^4 + 2 B^2 + 1/2 if B^2 >= 1/2, else 4 B^2 (below sqrt(2) B_a^2).
* X^T y: u y - u' y' has norm at most ||u|| |y| + ||u'|| |y'| <= Delta_3 = 2 B_a B_y
  (attained with u = u', y = -y' = B_y).

Each release is a Gaussian mechanism sigma_k = z_k Delta_k; together they are exactly
mu-GDP with mu^2 = sum_k 1 / z_k^2 (Dong, Roth, Su 2022). ``budget_split`` = (s_1, s_2, s_3)
(normalised to sum 1) gives release k the share s_k of mu^2: z_k = 1 / (mu sqrt(s_k)), mu
calibrated numerically to (epsilon, delta) with the exact GDP accountant. Records:
``[Gaussian(z_1), Gaussian(z_2), Gaussian(z_3)]`` (the first is omitted when s_1 = 0: no
eigenvalue release, lambda = t_rho). ``FitResult.noise_multiplier`` is 1 / mu, the
multiplier of the single Gaussian mechanism equivalent to the composition.

Default split (0.1, 0.45, 0.45) of mu^2. The paper splits epsilon (and delta) in thirds;
with Gaussian mechanisms at equal (epsilon, delta) this means equal multipliers, i.e. equal
thirds of mu^2. The eigenvalue, though, is one number that only steers the ridge: when
lambda_min(X^T X) is large against t_rho (large n) lambda is 0 whatever its noise, and when
it is small lambda ~ t_rho + (margin), the margin sigma_1 Phi^{-1}(1 - rho) growing only like
1 / sqrt(s_1). The two statistics carry the model, and which of them dominates the error
depends on ||w*|| B against B_y (unknown), so they share the rest equally. On California
(docs/adassp.md) the default gains over equal thirds at every epsilon measured.

Random draws, in order: ``rng.standard_normal()`` (step 1, skipped when s_1 = 0), then
``rng.standard_normal(d (d + 1) / 2)`` (the upper triangle of E, row by row), then
``rng.standard_normal(d)`` (the noise of X^T y). At epsilon = inf the draws happen and are
multiplied by 0.

Choosing the ridge for prediction (``ridge="sure"``, the default path's setting). The
ridge of step 2 keeps the noisy system well posed whatever the data; for prediction it is a
worst-case choice, since the best ridge depends on how w* lies along the spectrum of X^T X,
which nothing public gives. It also shrinks the intercept: the intercept's estimate is
about n / (n + lambda) times the mean of y, a bias in every prediction that is not small
when lambda is a fair share of n (lambda / n = 0.14 on a 15,000-row table at epsilon = 1).
So "sure" applies the ridge to the features only, D = diag(lambda, ..., lambda, 0), as the
user's alpha; the intercept's diagonal entry is n, far above the noise, and positive
definiteness is checked rather than assumed (below).

The released statistics themselves say which ridge predicts best, without any further
release: for w(lambda) = (X^T X + E + D + n alpha P)^{-1} (X^T y + e), the in-sample loss
sum_i (y_i - u_i^T w)^2 is y^T y - 2 w^T X^T y + w^T X^T X w, and Stein's lemma (Stein,
"Estimation of the mean of a multivariate normal distribution", Ann. Statist. 1981;
E[g(Z) Z] = s^2 E[g'(Z)] for Z ~ N(0, s^2)) turns the two unknown terms into functions of
the release that are unbiased over the noise: with G = (X^T X + E + D + n alpha P)^{-1},

    E[w^T e]     = sigma_3^2 E[tr G]                                   (dw/de = G),
    E[w^T E w]   = -2 sigma_2^2 E[tr(G) ||w||^2 + w^T G w - sum_i G_ii w_i^2]

(dw/dE_ij = -G (e_i e_j^T + e_j e_i^T) w for the entries i <= j of the symmetric noise, each
of variance sigma_2^2). Hence the estimate of the loss up to the constant y^T y,

    L(lambda) = w^T (X^T X + E) w + 2 sigma_2^2 (tr(G) ||w||^2 + w^T G w - sum_i G_ii w_i^2)
                - 2 (w^T (X^T y + e) - sigma_3^2 tr G),

is an estimate of how well w(lambda) fits the training rows. It does not see the sampling
noise of y, which favours less shrinkage on few rows; the loss on new targets at the same
rows adds 2 s^2 df(lambda) (Mallows, "Some comments on C_p", Technometrics 1973), with s^2
the residual variance, at most B_y^2 for clipped targets, and df(lambda) = tr(G X^T X),
estimated from the noisy matrix: 1 for the intercept plus sum_k max(v_k, 0) / (v_k + lambda)
over the eigenvalues v_k of the features' block with the intercept profiled out.
The criterion L(lambda) + 2 s_max^2 df(lambda) (an upper bound of that optimism, so it errs
towards shrinkage), s_max = B_y or the smaller public ``residual_sd`` (any upper bound on the
standard deviation of the target's noise: the clipped target's own standard deviation is one,
since Var(y) = Var(E[y | x]) + E Var(y | x); the default path gives the one its second look at
the target's range reads, :func:`dpopt.preprocessing._refine.spread_bound`), is computed
for lambda = lambda_AdaSSP * 2^-k, k = 0..6
(:data:`SURE_FACTORS`; only values at which the matrix is positive definite, where w is
smooth in the noise and the lemma applies), and the smallest is kept (:func:`sure_ridge`);
if no factor gives a positive definite matrix, step 4's solution is kept. Only less
shrinkage than step 2's is tried: that ridge already covers the noise's most negative
eigenvalue with probability 1 - rho, so more has no reason from the noise. Post-processing
of the release: privacy is unchanged. Measured in docs/adassp.md.

Under ``ridge="sure"`` the eigenvalue release has nothing left to do, and the default path
drops it (:data:`SURE_SPLIT`, (0, 1/2, 1/2) of mu^2): lambda_min~ only moves the top of the
grid from t_rho to t_rho - lambda_min~, and the grid t_rho 2^-k already reaches 64 times
below t_rho, so the release buys a finer grid at best, while its tenth of mu^2 given to the
two statistics lowers both their noise scales by the factor sqrt(0.45 / 0.5) = 0.95. It also
stops deciding for the criterion: when lambda_min~ >= t_rho step 2 gives no ridge at all,
and every factor of the grid is then 0, whereas the sampling noise of y on few rows can
favour some shrinkage, which the Mallows term sees. Without the release, step 2's ridge is
t_rho (sigma_1 = inf above), and the positive definiteness of each candidate is checked as
before.

The fit's :class:`FitResult` carries the released :class:`Release` as the attribute
``release`` (used by :mod:`dpopt.pipeline.inference`; post-processing).

Distributed use: :func:`sufficient_statistics` reads one block of rows (dense or sparse) and
returns its clipped statistics; sums over blocks are the full statistics, and
:func:`adassp_from_statistics` calibrates, adds the noise and solves from the statistics alone.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import special

from dpopt._core.exceptions import PrivacyLeakWarning
from dpopt._core.validation import check_scalar
from dpopt.data.statistics import row_scales, sufficient_statistics  # noqa: F401 (tests read them here)
from dpopt.privacy import Calibration, Gaussian, calibrate
from dpopt.solvers._base import Checkpoints, DefaultUse, Option, make_result, one_of, register_solver

DEFAULT_SPLIT = (0.1, 0.45, 0.45)

#: The default path's split, for ``ridge="sure"``: no eigenvalue release (module docstring,
#: "Choosing the ridge for prediction").
SURE_SPLIT = (0.0, 0.5, 0.5)


# ---------------------------------------------------------------------------
# the data pass


# ---------------------------------------------------------------------------
# sensitivities and calibration


def sensitivities(row_bound, target_bound, fit_intercept):
    """(Delta_1, Delta_2, Delta_3): L2 sensitivities under replace-one adjacency of
    lambda_min(X^T X), the upper triangle of X^T X and X^T y (module docstring)."""
    b2 = row_bound * row_bound
    if fit_intercept:
        # sqrt(2 b2^2 + 2 b2 + 1/2) written so that b2^2 cannot overflow
        d2 = b2 * math.sqrt(2.0 + 2.0 / b2 + 0.5 / b2 / b2) if b2 >= 0.5 else 2.0 * row_bound
        return b2 + 1.0, d2, 2.0 * math.sqrt(b2 + 1.0) * target_bound
    return b2, math.sqrt(2.0) * b2, 2.0 * row_bound * target_bound


def check_budget_split(budget_split):
    """Three non-negative finite shares of mu^2 (normalised), the last two positive."""
    if isinstance(budget_split, (str, bytes)) or not hasattr(budget_split, "__len__") \
            or len(budget_split) != 3:
        raise ValueError(f"budget_split must be a sequence of 3 shares (eigenvalue, X^T X, "
                         f"X^T y), got {budget_split!r}")
    shares = [check_scalar(s, "budget_split", low=0.0) for s in budget_split]
    if shares[1] <= 0 or shares[2] <= 0:
        raise ValueError(f"budget_split: the shares of X^T X and X^T y must be > 0, got "
                         f"{budget_split!r}")
    total = sum(shares)
    return tuple(s / total for s in shares)


def mechanism_records(z, shares):
    """Gaussian records of the releases for overall multiplier z = 1 / mu."""
    return [Gaussian(z / math.sqrt(s)) for s in shares if s > 0]


def calibrate_adassp(epsilon, delta, shares) -> tuple[Calibration, tuple]:
    """Calibration of z = 1 / mu and the multipliers (z_1, z_2, z_3) (``inf`` for a
    release with no share; 0 at epsilon = inf)."""
    cal = calibrate(lambda z: mechanism_records(z, shares), epsilon, delta, accountant="exact")
    z = cal.noise_multiplier
    return cal, tuple(z / math.sqrt(s) if s > 0 else math.inf for s in shares)


def eigen_tail(d, rho):
    """t_rho / sigma_2 (step 2 of the module docstring): the smaller of the matrix Gaussian
    series bound sqrt(2 d log(d / rho)) and the mean-plus-concentration bound
    2 sqrt(d) + 2 sqrt(log(1 / rho)); each is a (1 - rho)-quantile bound on lambda_max(E)
    for E with N(0, 1) entries on and above the diagonal, so their minimum is one too."""
    return min(math.sqrt(2.0 * d * math.log(d / rho)),
               2.0 * math.sqrt(d) + 2.0 * math.sqrt(math.log(1.0 / rho)))


# ---------------------------------------------------------------------------
# release and solve (from the statistics only)


@dataclass(frozen=True)
class Release:
    """The noisy statistics and the ridge derived from them (all private)."""

    lambda_min: float  # lambda_min~, the private lower estimate (step 1)
    ridge: float  # lambda (step 2)
    xtx: np.ndarray  # X^T X + E
    xty: np.ndarray  # X^T y + e


def symmetric_noise(d, rng):
    """Symmetric matrix, iid N(0, 1) on and above the diagonal (row by row), mirrored."""
    rows, cols = np.triu_indices(d)
    E = np.zeros((d, d))
    E[rows, cols] = rng.standard_normal(rows.size)
    E[cols, rows] = E[rows, cols]
    return E


def release_statistics(xtx, xty, sigmas, rho, rng) -> Release:
    """Steps 1-3 with noise scales ``sigmas`` = (sigma_1, sigma_2, sigma_3); sigma_1 = inf
    skips the eigenvalue release (lambda_min~ = 0)."""
    s1, s2, s3 = sigmas
    d = xty.size
    if math.isinf(s1):
        lam_min = 0.0
    else:
        lam_true = float(np.linalg.eigvalsh(xtx)[0])
        shift = s1 * special.ndtri(1.0 - rho)
        lam_min = max(0.0, lam_true + s1 * rng.standard_normal() - shift)
    ridge = max(0.0, s2 * eigen_tail(d, rho) - lam_min)
    noisy_xtx = xtx + s2 * symmetric_noise(d, rng)
    noisy_xty = xty + s3 * rng.standard_normal(d)
    return Release(lam_min, ridge, noisy_xtx, noisy_xty)


def solve_psd(M, b):
    """Solution of M w = b on the eigenvectors of the symmetric M whose eigenvalues exceed
    d * eps * max |eigenvalue| (module docstring); returns (w, number of dropped directions)."""
    M = 0.5 * (M + M.T)
    vals, vecs = np.linalg.eigh(M)
    scale = float(np.max(np.abs(vals))) if vals.size else 0.0
    keep = vals > vals.size * np.finfo(np.float64).eps * scale
    if not np.any(keep):
        return np.zeros_like(b), int(vals.size)
    V = vecs[:, keep]
    return V @ ((V.T @ b) / vals[keep]), int(vals.size - keep.sum())


#: Multiples of step 2's ridge tried by ``ridge="sure"`` (module docstring).
SURE_FACTORS = tuple(2.0 ** -k for k in range(7))


def sure_ridge(release, penalty, sigma_gram, sigma_xty, target_bound, intercept=False):
    """(factor, w, estimates): the multiple of the release's ridge among :data:`SURE_FACTORS`
    whose solution has the smallest estimated prediction loss (module docstring: the Stein
    estimate of the in-sample loss plus Mallows' 2 B_y^2 df), that solution, and every
    factor's estimate (nan where the matrix is not positive definite). ``penalty``: the
    diagonal n alpha P; ``intercept``: the last coordinate is the intercept, which the
    ridge leaves out. Post-processing of ``release``; ``sigma_gram``, ``sigma_xty`` are its
    public noise scales, ``target_bound`` the public B_y. None when no factor gives a
    positive definite matrix.

    One eigendecomposition serves every factor: with the intercept profiled out (its
    entry m = n + noise, its column c), the feature block of G is S^-1 for the Schur
    complement S = F + D - c c^T / m, whose ridge is lambda I, and the intercept's row of
    G follows from S^-1 c (block inversion); df is tr(S^-1 S_+) + 1, the intercept's own
    degree of freedom added to the features' after profiling it out."""
    gram = 0.5 * (release.xtx + release.xtx.T)
    M, b = gram + np.diag(penalty), np.asarray(release.xty, dtype=np.float64)
    k = M.shape[0] - 1 if intercept else M.shape[0]
    F, c, m = M[:k, :k], M[:k, k:], (M[k, k] if intercept else 1.0)
    if intercept and not m > 0:
        return None
    schur = F - (c @ c.T) / m if intercept else F
    vals, vecs = np.linalg.eigh(schur)
    squares = vecs * vecs
    b_f = vecs.T @ (b[:k] - c[:, 0] * b[k] / m if intercept else b[:k])
    c_f = vecs.T @ c[:, 0] if intercept else np.zeros(k)
    tol = M.shape[0] * np.finfo(np.float64).eps * float(np.max(np.abs(np.diag(M))))
    best, estimates = None, []
    for f in SURE_FACTORS:
        den = vals + f * release.ridge
        if not den.min() > tol:
            estimates.append(math.nan)
            continue
        v = b_f / den  # the features' w in the eigenbasis of S
        w = vecs @ v
        sc = c_f / den  # S^-1 c in that basis
        g_diag = squares @ (1.0 / den)
        trace, cgc = float(np.sum(1.0 / den)), float(c_f @ sc)
        if intercept:
            w = np.append(w, (b[k] - c[:, 0] @ w) / m)
            corner = 1.0 / m + cgc / m ** 2  # G's intercept entry
            g_diag = np.append(g_diag, corner)
            trace += corner
            # w^T G w by blocks: S^-1 on the features, -S^-1 c / m off, corner
            wf = vecs.T @ w[:k]
            wgw = (float(wf @ (wf / den)) - 2.0 * w[k] * float(wf @ sc) / m
                   + corner * w[k] ** 2)
        else:
            wgw = float(np.sum(v * v / den))
        quad = float(w @ gram @ w)  # w^T (X^T X + E) w
        stein = 2.0 * sigma_gram ** 2 * (trace * float(w @ w) + wgw - float(g_diag @ (w * w)))
        df = float(np.sum(np.maximum(vals, 0.0) / den)) + (1.0 if intercept else 0.0)
        loss = (quad + stein - 2.0 * (float(b @ w) - sigma_xty ** 2 * trace)
                + 2.0 * target_bound ** 2 * df)
        estimates.append(loss)
        if best is None or loss < best[2]:
            best = (f, w, loss)
    return None if best is None else (best[0], best[1], estimates)


def adassp_from_statistics(xtx, xty, n, *, epsilon, delta, rng, row_bound, target_bound,
                           fit_intercept, l2, rho=0.05, budget_split=DEFAULT_SPLIT,
                           ridge="adaptive", residual_sd=None):
    """Steps 1-4 from clipped statistics (e.g. sums of :func:`sufficient_statistics` over
    row blocks, clipped to ``row_bound`` and ``target_bound``): calibrate to (epsilon,
    delta), release, solve. ``l2`` is the per-coordinate L2 penalty (alpha, 0 for the
    intercept); ``residual_sd``: the public scale of ``ridge="sure"``'s Mallows term (None:
    ``target_bound``). Returns (w, Calibration, mechanism records, params)."""
    rho = check_scalar(rho, "rho", low=0.0, high=1.0, low_open=True, high_open=True)
    shares = check_budget_split(budget_split)
    cal, zs = calibrate_adassp(epsilon, delta, shares)
    deltas = sensitivities(row_bound, target_bound, fit_intercept)
    sigmas = tuple(math.inf if math.isinf(z) else z * D for z, D in zip(zs, deltas))
    rel = release_statistics(np.asarray(xtx, dtype=np.float64), np.asarray(xty, dtype=np.float64),
                             sigmas, rho, rng)
    if not (np.all(np.isfinite(rel.xtx)) and np.all(np.isfinite(rel.xty))
            and math.isfinite(rel.ridge)):
        raise ValueError("the noisy sufficient statistics overflowed: rescale the data or give "
                         "smaller row_bound / target_bound")
    penalty = n * np.asarray(l2, dtype=np.float64)
    scale = target_bound if residual_sd is None else min(target_bound, residual_sd)
    chosen = (sure_ridge(rel, penalty, sigmas[1], sigmas[2], scale, fit_intercept)
              if ridge == "sure" else None)
    if chosen is None:
        w, dropped = solve_psd(rel.xtx + np.diag(rel.ridge + penalty), rel.xty)
        factor, estimates = 1.0, None
    else:
        (factor, w, estimates), dropped = chosen, 0
    params = {"row_bound": row_bound, "target_bound": target_bound, "rho": rho,
              "budget_split": shares, "noise_multipliers": zs, "sensitivities": deltas,
              "sigmas": sigmas, "lambda_min_estimate": rel.lambda_min, "ridge": rel.ridge,
              "ridge_rule": ridge, "residual_sd": residual_sd, "ridge_factor": factor,
              "sure_estimates": estimates,
              "dropped_directions": dropped, "release": rel}
    return w, cal, mechanism_records(cal.noise_multiplier, shares), params


# ---------------------------------------------------------------------------
# the solver


def resolve_bound(value, name, from_data):
    """A public bound given by the user, or the data's (non-private, warns)."""
    if value is None:
        warnings.warn(f"AdaSSP's {name} is computed from the private data without privacy; "
                      f"pass {name}=<public bound> to avoid this", PrivacyLeakWarning,
                      stacklevel=3)
        return float(from_data())
    return check_scalar(value, name, low=0.0, low_open=True)


OPTIONS = (
    Option("row_bound", None, None, "public bound B on the L2 norm of each row's features "
           "(longer rows are rescaled to B); None reads it from the data, with a "
           "PrivacyLeakWarning"),
    Option("target_bound", None, None, "public bound on |y| (targets are clipped to it); None "
           "reads it from the data, with a PrivacyLeakWarning"),
    Option("rho", 0.05, None, "failure probability of the adaptive ridge's lower eigenvalue "
           "estimate, in (0, 1)"),
    Option("budget_split", DEFAULT_SPLIT, None, "shares of mu^2 of the three releases "
           "(lambda_min, X^T X, X^T y)"),
    Option("ridge", "adaptive", one_of("adaptive", "sure"), "'adaptive': the paper's ridge "
           "(step 2), on every coordinate; 'sure': the multiple 2^-k (k = 0..6) of it with the "
           "smallest Stein estimate of the prediction loss, on the features only "
           "(post-processing, no budget)"),
    Option("residual_sd", None, lambda v, name: None if v is None else
           check_scalar(v, name, low=0.0, low_open=True),
           "public upper bound on the standard deviation of the target's noise around the "
           "model (the clipped target's own standard deviation is one), the scale of "
           "ridge='sure''s Mallows term; None: target_bound"),
)


def gram_noise_ratio(n, dim, mu, budget_split=SURE_SPLIT):
    """||E|| / (n B^2 / d): the spectral norm of the noise on X^T X (about 2 sqrt(d) sigma_2,
    step 2 of the module docstring, with sigma_2 = sqrt(2) B^2 / mu_2) over the average
    eigenvalue of X^T X when every row has norm B (trace n B^2 over d directions); B
    cancels, so the ratio 2 sqrt(2) d^(3/2) / (n mu_2) is public. mu_2 is the share of
    the X^T X release in the model's ``mu``."""
    share = budget_split[1] / sum(budget_split)
    return 2.0 * math.sqrt(2.0) * dim ** 1.5 / (n * mu * math.sqrt(share))


def declines(n, dim, mu):
    """Why the default path passes AdaSSP over at these public sizes, or None: when
    :func:`gram_noise_ratio` rho exceeds 1 / d. The ridge the noise on X^T X forces (of the
    noise's own scale, step 2) is rho times the average eigenvalue h of X^T X / n, and it
    shrinks every direction whose eigenvalue is below it by more than half. A table's d
    columns carry directions down to about h / d (an indicator, a level of a categorical
    column, a correlated pair: a small part of a trace shared by d columns), so from
    rho = 1 / d on, AdaSSP's ridge reaches directions of the solution, while the gradient
    method's noise does not pass through X^T X (DP-GD with a released curvature and the
    residual's clip, :mod:`dpopt.pipeline.curvature`). Below it AdaSSP's closed form is
    also the one that converges to least squares as epsilon grows. mu_2 is the X^T X
    share of :data:`SURE_SPLIT`, the split the default path runs AdaSSP with. The
    threshold 1 / d replaced 1 after a comparison of the two forced on every regression
    table of the practitioner benchmark (docs/default_path.md)."""
    ratio = gram_noise_ratio(n, dim, mu)
    if ratio <= 1.0 / dim:
        return None
    return (f"its noise on X^T X is {ratio:.3g} times the average eigenvalue of X^T X "
            f"(2 sqrt(2) d^1.5 / (n mu_2) > 1 / d at n = {n}, d = {dim})")


def declines_at(n, dim, mu):
    """Whether the default path certainly passes AdaSSP over for a table of n records and dim
    columns at a budget of at most ``mu`` (:func:`declines` at the whole n and mu: the fit's
    training rows and model mu are fewer, which only raises the ratio)."""
    return declines(n, dim, mu) is not None


# public bounds equal to the canary's norm (1) and below its label (clipped to 1). The canary
# +-a e_1 leaves X^T X unchanged and moves only X^T y, so most of mu^2 goes to that release
# (with the default split noise / 4 gives bounds 1.9-2.9 over seeds 0-5, here 2.7-3.7); the
# X^T X and eigenvalue releases have their own audits (dpopt.api.release_audits:
# audit_adassp_gram, audit_adassp_eigenvalue) besides the checks of tests/test_adassp.py.
def default_settings(*, row_bound, target_spread=None, inference=False, **public):
    """AdaSSP on the default path's scaled domain: rows of norm <= R, targets in [-1, 1];
    ``target_spread``, where the path released one, bounds the scaled target's standard
    deviation (the ridge choice's residual scale). The ridge is chosen by ``"sure"``, so
    the split has no eigenvalue release (:data:`SURE_SPLIT`), unless the fit gives
    ``inference``: its intervals need that release's lower bound on lambda_min(X^T X)
    (:func:`dpopt.pipeline.inference.noisy_normal_equations`)."""
    settings = {"row_bound": row_bound, "target_bound": 1.0, "ridge": "sure",
                "budget_split": DEFAULT_SPLIT if inference else SURE_SPLIT}
    if target_spread is not None:
        settings["residual_sd"] = float(target_spread)
    return settings


@register_solver("adassp", description="AdaSSP: sufficient-statistics perturbation with an adaptive "
                 "ridge, closed form (Wang, UAI 2018)", losses=("squared",),
                 penalties=("none", "l2"), family="adassp", options=OPTIONS,
                 audit={"row_bound": 1.0, "target_bound": 1.0, "budget_split": (0.05, 0.15, 0.8)},
                 distributed=True,
                 mechanism="three Gaussian releases: the smallest eigenvalue of X^T X, X^T X and X^T y "
                           "(clipped rows and targets)",
                 sensitivity="B_a^2 for lambda_min; sqrt(2) B^2, or sqrt(2 B^4 + 2 B^2 + 1/2) with an "
                             "intercept, for X^T X; 2 B_a B_y for X^T y (B_a^2 = B^2 + [intercept])",
                 default_path=DefaultUse(
                     default_settings, rank=30, losses=("squared",), penalties=("none", "l2"),
                     declines=declines, instead="dp-gd",
                     why="squared loss with an L2 or no penalty: sufficient-statistics "
                         "perturbation with adaptive ridge (AdaSSP) needs one pass and no tuning"))
def fit_adassp(problem, *, epsilon, delta, rng, row_bound=None, target_bound=None, rho=0.05,
               budget_split=DEFAULT_SPLIT, ridge="adaptive", residual_sd=None):
    """Fit squared-loss regression (no penalty or L2) with AdaSSP (module docstring).

    ``row_bound``: public bound B on the L2 norm of each row's features (rows are rescaled
    to it); ``target_bound``: public bound on |y| (targets clipped); ``None`` takes them from
    the data with a PrivacyLeakWarning. ``rho`` in (0, 1): failure probability of each of
    the two high-probability bounds behind the ridge. ``budget_split``: shares of mu^2 of
    the eigenvalue, X^T X and X^T y releases. ``ridge``: "adaptive" (step 2) or "sure" (the
    multiple of it with the smallest Stein estimate of the in-sample loss, module
    docstring); ``residual_sd``: a public upper bound on the standard deviation of the
    target's noise, the scale of that estimate's Mallows term (None: ``target_bound``). One
    pass over the data.
    """
    check_scalar(rho, "rho", low=0.0, high=1.0, low_open=True, high_open=True)
    check_budget_split(budget_split)
    # in memory or summed over chunks: the same statistics (Problem / ChunkedProblem)
    B = resolve_bound(row_bound, "row_bound", problem.max_row_norm)
    By = resolve_bound(target_bound, "target_bound", problem.max_abs_target)
    ck = Checkpoints()
    ck.record(problem.zeros(), 0)
    xtx, xty, n = problem.sufficient_statistics(B, By)
    w, cal, records, params = adassp_from_statistics(
        xtx, xty, n, epsilon=epsilon, delta=delta, rng=rng, row_bound=B, target_bound=By,
        fit_intercept=problem.fit_intercept, l2=problem.penalty.l2, rho=rho,
        budget_split=budget_split, ridge=ridge, residual_sd=residual_sd)
    ck.record(w, 1)
    release = params.pop("release")
    result = make_result(problem, w, solver="adassp", calibration_or_spent=cal,
                         mechanisms=records, n_iter=1, passes=1, checkpoints=ck, params=params)
    result.release = release  # the noisy statistics (not a field: kept out of model files)
    return result
