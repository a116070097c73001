"""Heavy-tailed private stochastic optimization: noisy clipped one-pass methods.

Lowy & Razaviyayn, "Private Stochastic Optimization with Large Worst-Case
Lipschitz Parameter" (seed 004; notes ``shared/papers/004_heavy_tailed_dp_so.md``).
The per-sample gradients only need a bounded k-th moment,
``E||grad f(w, x)||^k <= r_k^k`` (k >= 2), not a uniform Lipschitz bound.

Solvers (all start at w = 0; the domain is ``W = {||w||_2 <= radius}`` intersected
with the penalty's box, projected exactly; the penalty psi is applied by its prox):

``"ht-acsa"``  noisy clipped accelerated SGD (AC-SA of Ghadimi & Lan; paper
    Algorithm 2 = 5 with MeanOracle1, Theorem 31) for smooth convex losses:
    ``w^md_t = (1 - a_t) w^ag_{t-1} + a_t w_{t-1}``, oracle at ``w^md_t``,
    ``w_t = prox(w_{t-1} - (t / (2 eta)) g_t)`` (a_t = 2/(t+1), a_t/eta_t = t/(2 eta)),
    ``w^ag_t = a_t w_t + (1 - a_t) w^ag_{t-1}``; output ``w^ag_T``.
``"ht-sgd"``  noisy clipped SGD for smooth strongly convex losses (Algorithm 6 = 7,
    Theorem 34); step sizes and averaging weights of Stich 2019, Lemma 3
    (a = mu/2, g = beta; the paper does not print them); output the weighted
    average of the iterates w_{t+1}. T batches (the paper's loop runs T + 1).
``"ht-proxsgd"``  noisy clipped proximal SGD for Proximal-PL losses (Algorithm 8 = 9,
    Theorem 48): ``w_{t+1} = prox_{eta psi}(w_t - eta g_t)``, eta = 1/(2 beta), last iterate.
``"ht-subgradient"``  localized noisy clipped subgradient method for non-smooth
    convex losses (Algorithm 4 with the regularized subroutine Algorithm 3,
    Theorem 41): n is rounded down to 2^l; phase i = 1..l uses a fresh batch of
    n_i = n/2^i records for T_i full-batch steps on
    ``(1/n_i) sum f(w, x) + (lambda_i/2)||w - w_{i-1}||^2`` over
    ``W ∩ B(w_{i-1}, D_i)``, with eta_i = 4^-i eta, lambda_i = 1/(eta_i n_i^(1+1/k));
    only the loss subgradients are clipped, the regularizer (and the penalty's
    subgradient) is added unclipped.

Privacy (replace-one adjacency; the mechanisms are documented in
:mod:`dpopt.privacy.mechanisms`). The records are split by a uniformly random
partition drawn inside the solver: disjoint batches of a public size s, each
record in at most one batch. In the one-pass solvers a record enters exactly
one oracle call (rho_opt-zCDP); in ht-subgradient it enters the T_i calls of
its phase, each (rho_opt / T_i)-zCDP. By parallel composition the run costs
the maximum over batches, i.e. rho_opt -- not the sum over iterations. There
is no option that reuses a record: ``n_iter * batch_size <= n`` is checked,
and records left over by the rounding are never read. Everything else
(iterates, step sizes) is post-processing.

Budget. Give ``epsilon`` (and ``delta``) or ``rho``. With ``accountant="zcdp"``
(the paper's notion) ``rho = dp_to_zcdp(epsilon, delta)`` and the reported
``epsilon = zcdp_to_dp(rho, delta)`` (dp-accounting's RDP conversion). Since
every mechanism here is Gaussian, a rho-zCDP run is also exactly
sqrt(2 rho)-Gaussian-DP, so ``accountant="exact"`` converts with the Gaussian-DP
formulas instead (``rho = gdp_mu(epsilon, delta)^2 / 2``, reported epsilon =
``gdp_epsilon(sqrt(2 rho), delta)``): a valid and tighter conversion, the one
the DP-GD baseline uses. ``rho=...`` sets the budget instead of ``epsilon``,
which then only acts as a cap: the reported epsilon is the conversion of rho
at ``delta``, and a rho whose conversion exceeds ``epsilon`` raises
``ValueError`` (so the library's rule "spent epsilon <= target", on which
:class:`dpopt.BudgetAccountant`'s pre-check relies, still holds; pass
``epsilon=math.inf`` to give rho alone, outside a budget accountant). Both
are reported: ``FitResult.epsilon/delta`` and ``params["rho"]``;
``FitResult.mechanisms`` holds the zCDP records (Gaussian records with
``accountant="exact"``) of the worst-case record.

Clipping threshold (``clip``):
* a number: used as is (public);
* ``"theory"``: the theorem's threshold from ``moment_bound`` (r_k) and ``moment_order`` (k);
* ``"quantile"``: a private quantile of the per-sample gradient norms at w = 0
  (:func:`dpopt.privacy.private_quantile`: a Gaussian-noised histogram of the
  norms on a public log grid, ``quantile_range``, scanned from the tail).
  Level 1 - q with ``q = sqrt(d T) / (eps n)`` (ht-acsa, ht-sgd),
  ``sqrt(d) T / (eps n)`` (ht-proxsgd) or ``sqrt(d ln n) / (eps n_1)``
  (ht-subgradient), eps = sqrt(2 rho_opt): the fraction of clipped gradients at
  which the theorems' thresholds sit (Markov), unless ``clip_quantile`` is
  given. Cost: with ``quantile_records="shared"`` (default) the quantile reads
  all records and takes ``quantile_share * rho`` (sequential composition; the
  optimization gets the rest); with ``"disjoint"`` a random ``quantile_share``
  fraction of the records is held out for the quantile and never used by the
  optimization, and both get the full rho (parallel composition). Where a
  moment bound enters a step-size rule, ``r_k`` is replaced by ``C q^(1/k)``
  (Markov's inequality read backwards; post-processing, free).
Default: ``"theory"`` when ``moment_bound`` is given, else ``"quantile"``.

Shuffle model (``model="shuffle-simulation"``; ht-acsa, ht-sgd, ht-proxsgd):
the oracle is replaced by a SIMULATION in one process of the shuffle protocol
(local randomizers + trusted shuffler + analyzer; paper Algorithms 10/11 or 13
with CJMP21's scalar-sum protocol). Claim: with a trusted shuffler and honest
users the shuffled messages of each call are (epsilon, delta)-DP for replacing
one user's record, so by parallel composition the run is (epsilon, delta)-DP
in the shuffle model. Not a zCDP guarantee: ``rho`` is not accepted,
``params["rho"]`` is None and ``mechanisms`` is empty.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from dpopt._validation import check_choice, check_positive_int, check_scalar
from dpopt.kernels.heavy import subgradient_steps
from dpopt.privacy import (
    ZCDP,
    Gaussian,
    MeanOracle1,
    MeanOracle2,
    ShuffleMeanOracle1,
    ShuffleMeanOracle2,
    clip_rows_l2,
    dp_to_zcdp,
    gdp_epsilon,
    gdp_mu,
    median_of_means,
    private_quantile,
    zcdp_to_dp,
)
from dpopt.privacy.mechanisms import gaussian_noise
from dpopt.solvers._base import (
    Checkpoints,
    Option,
    make_result,
    one_of,
    positive,
    positive_int,
    register_solver,
)
from dpopt.solvers._common import ZCDP_ACCOUNTANTS, global_smoothness

MODELS = ("central", "shuffle-simulation")
ORACLES = ("l2", "coordinate")
HT_ACCOUNTANTS = ZCDP_ACCOUNTANTS

# ---------------------------------------------------------------------------
# budget


@functools.lru_cache(maxsize=512)
def _rho_of(epsilon, delta, accountant):
    if math.isinf(epsilon):
        return math.inf
    if accountant == "zcdp":
        return dp_to_zcdp(epsilon, delta)
    return 0.5 * gdp_mu(epsilon, delta) ** 2


@functools.lru_cache(maxsize=512)
def _epsilon_of_rho(rho, delta, accountant):
    if math.isinf(rho):
        return math.inf
    if accountant == "zcdp":
        return zcdp_to_dp(rho, delta)
    return gdp_epsilon(math.sqrt(2.0 * rho), delta)


def resolve_budget(epsilon, delta, rho, accountant, model):
    """The total zCDP budget rho (None in the shuffle model); see the module docstring."""
    check_choice(model, "model", MODELS)
    check_choice(accountant, "accountant", HT_ACCOUNTANTS)
    if model == "shuffle-simulation":
        if rho is not None:
            raise ValueError("rho is a central-model (zCDP) budget; model='shuffle-simulation' "
                             "takes epsilon and delta")
        if math.isinf(epsilon):
            raise ValueError("model='shuffle-simulation' needs a finite epsilon")
        if delta >= 0.5:
            raise ValueError(f"delta must be < 1/2 for the shuffle protocol, got {delta}")
        return None
    if rho is not None:
        rho = check_scalar(rho, "rho", low=0.0, low_open=True, allow_inf=True)
        spent = _epsilon_of_rho(rho, float(delta), accountant)
        if spent > epsilon:  # every solver certifies epsilon <= its target (budget checks)
            raise ValueError(f"rho={rho:g} is ({spent:.6g}, {delta:g})-DP, more than "
                             f"epsilon={epsilon:g}; pass a larger epsilon (it caps rho; "
                             f"dpopt.solve's default is 1.0) or epsilon=math.inf")
        return rho
    return _rho_of(float(epsilon), float(delta), accountant)


# ---------------------------------------------------------------------------
# data access: ``read_records`` is the only function that reads records


class Batch:
    """The records of one batch: features (dense rows or CSR), labels, row norms."""

    __slots__ = ("rows", "X", "y", "norms")

    def __init__(self, rows, X, y, norms):
        self.rows, self.X, self.y, self.norms = rows, X, y, norms

    def derivs(self, problem, w):
        """l'(x_i^T w; y_i) for the batch."""
        z = np.asarray(self.X @ w).ravel()
        return problem.loss.deriv(z, self.y)

    def gradient_norms(self, problem, w):
        """||grad f(w, x_i)|| = |l'| ||x_i||."""
        return np.abs(self.derivs(problem, w)) * self.norms


def read_records(problem, rows):
    """Read the records ``rows`` (every access to the data goes through here)."""
    rows = np.asarray(rows)
    X = problem.X_csr[rows] if problem.is_sparse else np.ascontiguousarray(problem.X[rows])
    return Batch(rows, X, problem.y[rows], problem.row_norms[rows])


def _per_sample_gradients(Xb, d):
    if hasattr(Xb, "multiply"):
        return np.asarray(Xb.multiply(d[:, None]).todense())
    return Xb * d[:, None]


class GradientOracle:
    """One of the mean oracles, applied to the loss gradients of a batch.

    ``model="central"``: :class:`MeanOracle1` (``oracle="l2"``) or
    :class:`MeanOracle2` (``"coordinate"``); ``"shuffle-simulation"``: the
    shuffle-model simulations. For the central L2 oracle no per-sample gradient
    matrix is formed: the clipped mean is ``X_B^T (l' min(1, C / (|l'| ||x_i||))) / s``.
    """

    def __init__(self, *, model, oracle, clip, batch_size, dim, rho=None, epsilon=None,
                 delta=None, groups=1):
        self.model, self.kind, self.clip, self.s = model, oracle, clip, batch_size
        if model == "central" and oracle == "l2":
            self.mech = MeanOracle1(clip, batch_size, rho)
        elif model == "central":
            self.mech = MeanOracle2(clip, batch_size, groups, dim, rho)
        elif oracle == "l2":
            self.mech = ShuffleMeanOracle1(clip, batch_size, dim, epsilon, delta)
        else:
            self.mech = ShuffleMeanOracle2(clip, batch_size, groups, dim, epsilon, delta)

    @property
    def sigma(self):
        """Per-coordinate noise std of one call (an upper bound in the shuffle model)."""
        if self.model == "central":
            return self.mech.sigma
        return math.sqrt(self.mech.noise_variance_bound())

    def __call__(self, rng, problem, w, batch):
        """One oracle call on a :class:`Batch` (read by :func:`read_records`)."""
        Xb, d = batch.X, batch.derivs(problem, w)
        if self.model == "central" and self.kind == "l2":
            scale = np.abs(d) * batch.norms
            with np.errstate(divide="ignore", invalid="ignore"):
                factor = np.where(scale > self.clip, self.clip / scale, 1.0)
            mean = np.asarray(Xb.T @ (d * factor)).ravel() / self.s
            return self.mech.release(rng, mean)
        G = _per_sample_gradients(Xb, d)
        if self.model == "central":
            return self.mech.release(rng, median_of_means(G, self.clip, self.mech.groups))
        if self.kind == "l2":
            return self.mech.release(rng, clip_rows_l2(G, self.clip))
        return self.mech.release(rng, G)


# ---------------------------------------------------------------------------
# domain: prox of psi + indicator of the L2 ball, projection onto two balls


def _is_zero_penalty(pen):
    return not (np.any(pen.l1 > 0) or np.any(pen.l2 > 0) or np.any(np.isfinite(pen.lo))
                or np.any(np.isfinite(pen.up)))


def _is_isotropic_l2(pen):
    return not (np.any(pen.l1 > 0) or np.any(np.isfinite(pen.lo)) or np.any(np.isfinite(pen.up))
                ) and bool(np.all(pen.l2 == pen.l2[0]))


def prox_ball(penalty, v, step, radius):
    """Exact prox of ``step * psi + indicator(||w|| <= radius)`` at v.

    With a multiplier mu >= 0 for the ball, the minimizer is
    ``u(mu) = prox_{step/(1+mu) psi}(v / (1+mu))`` (psi separable, minimal at 0),
    whose norm decreases in mu: mu = 0 if ``||u(0)|| <= radius``, otherwise mu
    solves ``||u(mu)|| = radius`` (bisection, returning the feasible end). For an
    isotropic psi = (a/2)||w||^2 (or psi = 0) the answer is radial: shrink by
    1/(1 + step a), then scale onto the ball if outside.
    """
    v = np.asarray(v, dtype=np.float64)
    if _is_isotropic_l2(penalty):  # psi = (a/2)||w||^2: shrink, then scale into the ball
        u = v / (1.0 + step * float(penalty.l2[0]))
        nu = float(np.linalg.norm(u))
        return u if nu <= radius else u * (radius / nu)
    u = penalty.prox(v, step) if not _is_zero_penalty(penalty) else v
    if not math.isfinite(radius):
        return u
    nu = float(np.linalg.norm(u))
    if nu <= radius:
        return u
    if _is_zero_penalty(penalty):
        return v * (radius / nu)
    lo, hi = 0.0, max(float(np.linalg.norm(v)) / radius - 1.0, 1e-12)
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if np.linalg.norm(penalty.prox(v / (1.0 + mid), step / (1.0 + mid))) <= radius:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-13 * (1.0 + hi):
            break
    u = penalty.prox(v / (1.0 + hi), step / (1.0 + hi))
    nu = float(np.linalg.norm(u))
    return u if nu <= radius else u * (radius / nu)


def project_two_balls(v, c1, r1, c2, r2):
    """Euclidean projection of v onto B(c1, r1) ∩ B(c2, r2) (assumed non-empty).

    If the projection onto one ball lies in the other it is the answer;
    otherwise the answer lies on the intersection of the two spheres, a
    (d-2)-sphere in the hyperplane ``(x - c1) . e = h`` (e = (c2 - c1)/|c2 - c1|)
    with centre ``c1 + h e`` and radius ``sqrt(r1^2 - h^2)``: move the
    hyperplane projection of v radially onto it.
    """
    v, c1, c2 = (np.asarray(a, dtype=np.float64) for a in (v, c1, c2))

    def proj(x, c, r):
        if not math.isfinite(r):
            return x
        dx = x - c
        nd = float(np.linalg.norm(dx))
        return x if nd <= r else c + dx * (r / nd)

    def inside(x, c, r, tol=1e-9):
        return not math.isfinite(r) or np.linalg.norm(x - c) <= r * (1 + tol) + tol

    if inside(v, c1, r1, 0) and inside(v, c2, r2, 0):
        return v
    p1 = proj(v, c1, r1)
    if inside(p1, c2, r2):
        return p1
    p2 = proj(v, c2, r2)
    if inside(p2, c1, r1):
        return p2
    dist = float(np.linalg.norm(c2 - c1))
    if dist == 0.0:  # concentric: the smaller ball
        return p1 if r1 <= r2 else p2
    e = (c2 - c1) / dist
    h = (r1 * r1 - r2 * r2 + dist * dist) / (2.0 * dist)
    rim = math.sqrt(max(r1 * r1 - h * h, 0.0))
    centre = c1 + h * e
    t = v - c1
    flat = v - (float(t @ e) - h) * e
    radial = flat - centre
    nr = float(np.linalg.norm(radial))
    if nr == 0.0:  # v on the axis: any rim point is nearest
        radial = np.zeros_like(v)
        radial[np.argmin(np.abs(e))] = 1.0
        radial -= (radial @ e) * e
        nr = float(np.linalg.norm(radial))
    return centre + radial * (rim / nr)


# ---------------------------------------------------------------------------
# shared option handling


def resolve_mu(problem, strong_convexity, solver):
    """mu: a public float, or (None) the penalty's L2 strength (public by construction)."""
    if strong_convexity is not None:
        return check_scalar(strong_convexity, "strong_convexity", low=0.0, low_open=True)
    l2 = problem.penalty.l2
    pen = l2[:-1] if problem.fit_intercept else l2
    mu = float(pen.min()) if pen.size else 0.0
    if mu <= 0:
        raise ValueError(f"{solver} needs a strong convexity (or PL) constant: pass "
                         f"strong_convexity=<mu> or use an L2 penalty")
    return mu


class _Common:
    """Validated options shared by the solvers."""

    def __init__(self, problem, solver, *, epsilon, delta, rho, accountant, model, oracle, clip,
                 moment_bound, moment_order, radius, clip_quantile, quantile_share,
                 quantile_records, quantile_range, groups, step, checkpoint_every):
        self.problem, self.solver = problem, solver
        self.n, self.dim = problem.n_samples, problem.dim
        self.epsilon, self.delta = epsilon, delta
        self.accountant, self.model = accountant, model
        self.oracle = check_choice(oracle, "oracle", ORACLES)
        self.rho = resolve_budget(epsilon, delta, rho, accountant, model)
        self.rho_given = rho is not None
        self.k = check_scalar(moment_order, "moment_order", low=2.0)
        self.r = None if moment_bound is None else check_scalar(
            moment_bound, "moment_bound", low=0.0, low_open=True)
        self.radius = check_scalar(radius, "radius", low=0.0, low_open=True, allow_inf=True)
        self.step = check_scalar(step, "step", low=0.0, low_open=True)
        self.checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
        if clip is None:
            clip = "theory" if self.r is not None else "quantile"
        if isinstance(clip, str):
            self.clip_mode = check_choice(clip, "clip", ("theory", "quantile"))
            self.clip_value = None
        else:
            self.clip_mode = "given"
            self.clip_value = check_scalar(clip, "clip", low=0.0, low_open=True, allow_inf=True)
            if math.isinf(self.clip_value) and not self.non_private:
                raise ValueError("clip must be finite when the run is private (unbounded "
                                 "sensitivity)")
        if self.clip_mode == "theory" and self.r is None:
            raise ValueError("clip='theory' needs moment_bound (r_k, the k-th moment bound of "
                             "the gradient norms) and moment_order (k)")
        if self.clip_mode == "quantile" and model != "central":
            raise ValueError("clip='quantile' is a central-model mechanism; in the shuffle model "
                             "give clip=<float> or moment_bound")
        if self.clip_mode == "quantile" and oracle == "coordinate":
            raise ValueError("oracle='coordinate' needs clip=<tau> or moment_bound "
                             "(tau = 2 moment_bound)")
        self.clip_quantile = None if clip_quantile is None else check_scalar(
            clip_quantile, "clip_quantile", low=0.0, high=1.0, low_open=True, high_open=True)
        self.quantile_share = check_scalar(quantile_share, "quantile_share", low=0.0, high=1.0,
                                           low_open=True, high_open=True)
        self.quantile_records = check_choice(quantile_records, "quantile_records",
                                             ("shared", "disjoint"))
        try:
            lo, hi = (float(x) for x in quantile_range)
        except (TypeError, ValueError):
            raise ValueError(f"quantile_range must be a pair (lower, upper), got "
                             f"{quantile_range!r}") from None
        if not (0 < lo < hi < math.inf):
            raise ValueError(f"quantile_range must satisfy 0 < lower < upper < inf, got "
                             f"{quantile_range!r}")
        self.quantile_range = (lo, hi)
        self.groups = None if groups is None else check_positive_int(groups, "groups")
        self.uses_quantile = self.clip_mode == "quantile" and not self.non_private
        # records and budget split
        self.n_quantile = 0
        self.rho_quantile = 0.0
        self.rho_opt = self.rho
        if self.uses_quantile:
            if self.quantile_records == "shared":
                self.rho_quantile = self.quantile_share * self.rho
                self.rho_opt = (1.0 - self.quantile_share) * self.rho
                while self.rho_opt + self.rho_quantile > self.rho:  # never over the budget
                    self.rho_opt = math.nextafter(self.rho_opt, 0.0)
            else:
                self.n_quantile = max(1, int(round(self.quantile_share * self.n)))
                if self.n_quantile >= self.n:
                    raise ValueError("quantile_share leaves no record for the optimization")
                self.rho_quantile = self.rho
        self.n_opt = self.n - self.n_quantile

    @property
    def non_private(self):
        return self.rho is not None and math.isinf(self.rho)

    @property
    def eps_z(self):
        """The paper's epsilon: rho_opt = eps^2 / 2 (or the shuffle epsilon)."""
        if self.model != "central":
            return self.epsilon
        return math.inf if math.isinf(self.rho_opt) else math.sqrt(2.0 * self.rho_opt)

    def split(self, rng):
        """Draw the random partition: (quantile rows, optimization rows in random order)."""
        perm = rng.permutation(self.n)
        return perm[:self.n_quantile], perm[self.n_quantile:]

    def quantile_clip(self, rng, rows_q, rows_all, q):
        """Private (1 - q)-quantile of the gradient norms at w = 0."""
        rows = rows_q if self.quantile_records == "disjoint" else np.sort(rows_all)
        q = min(max(q, 1.0 / rows.size), 0.5)
        norms = read_records(self.problem, rows).gradient_norms(self.problem,
                                                                self.problem.zeros())
        c, info = private_quantile(rng, norms, 1.0 - q, self.rho_quantile,
                                   lower=self.quantile_range[0], upper=self.quantile_range[1])
        self.quantile_info = info
        self.quantile_level = 1.0 - q
        return c

    def proxy_moment(self, clip, q):
        """r_k for step-size rules: the given bound, or C q^(1/k) in quantile mode."""
        if self.r is not None:
            return self.r
        if not math.isfinite(clip):
            return None
        return clip * min(max(q, 1e-12), 1.0) ** (1.0 / self.k)

    def batches(self, rows_opt, n_batches, batch_size):
        """Disjoint batches (a (T, s) index array); checks T * s <= available records."""
        if n_batches * batch_size > rows_opt.size:
            raise ValueError(f"n_iter * batch_size = {n_batches} * {batch_size} exceeds the "
                             f"{rows_opt.size} records available: a record would be reused")
        return rows_opt[:n_batches * batch_size].reshape(n_batches, batch_size)

    def make_oracle(self, clip, batch_size, rho_call=None):
        groups = 1
        if self.oracle == "coordinate":
            groups = self.groups or MeanOracle2.default_groups(self.dim)
        return GradientOracle(model=self.model, oracle=self.oracle, clip=clip,
                              batch_size=batch_size, dim=self.dim,
                              rho=self.rho_opt if rho_call is None else rho_call,
                              epsilon=self.epsilon, delta=self.delta, groups=groups)

    def privacy(self, oracle_records, oracle_gaussians, z_main):
        """(calibration tuple, mechanisms, privacy params) for make_result."""
        if self.model != "central":
            acc = "shuffle-simulation (advanced composition over coordinates)"
            params = {"rho": None, "model": self.model, "epsilon_shuffle": self.epsilon}
            return (self.epsilon, self.delta, acc, z_main), [], params
        q_recs, q_gauss = [], []
        if self.uses_quantile:
            q_recs = self.quantile_info["records"]
            q_gauss = self.quantile_info["gaussian_records"]
        def total(records):
            return sum(r.rho * r.count for r in records)

        if self.quantile_records == "disjoint" and self.uses_quantile:
            # parallel composition: a record is either in the holdout or in the batches;
            # the records listed are those of the costlier group
            rho_spent = max(total(oracle_records), total(q_recs))
            recs, gauss = ((oracle_records, oracle_gaussians)
                           if total(oracle_records) >= total(q_recs) else (q_recs, q_gauss))
        else:  # sequential composition of the quantile (if any) and the oracle calls
            recs, gauss = oracle_records + q_recs, oracle_gaussians + q_gauss
            rho_spent = total(recs)
        if self.non_private:
            rho_spent = math.inf
        elif rho_spent > self.rho * (1.0 + 1e-12):
            raise RuntimeError(f"internal error: spent rho={rho_spent} exceeds the budget "
                               f"{self.rho}")
        eps = _epsilon_of_rho(rho_spent, self.delta, self.accountant)
        mechs = gauss if self.accountant == "exact" else recs
        params = {"rho": rho_spent, "rho_optimization": self.rho_opt,
                  "rho_quantile": self.rho_quantile, "model": self.model,
                  "rho_given": self.rho_given, "accountant": self.accountant}
        acc = "none" if self.non_private else self.accountant
        return (eps, self.delta, acc, 0.0 if self.non_private else z_main), mechs, params

    def base_params(self):
        return {"oracle": self.oracle, "clip_mode": self.clip_mode, "moment_order": self.k,
                "moment_bound": self.r, "radius": self.radius, "step": self.step,
                "quantile_records": self.quantile_records if self.uses_quantile else None,
                "quantile_share": self.quantile_share if self.uses_quantile else None,
                "quantile_level": getattr(self, "quantile_level", None),
                "n_quantile_records": self.n_quantile}


def _clamp_iters(T, n_avail, min_batch, solver):
    cap = max(1, n_avail // min_batch)
    if T > cap:
        warnings.warn(f"{solver}: the rule gives n_iter={T} but only {cap} batches of at least "
                      f"{min_batch} records fit in n={n_avail}; using {cap} (the theorem's "
                      f"conditions, e.g. kappa <= n / ln n, do not hold)", UserWarning,
                      stacklevel=4)
        return cap
    return max(1, T)


def _batch_plan(c, T, batch_size, rows_avail):
    """(T, s) from the options: s = floor(n / T) unless given; multiple of the groups."""
    groups = 1
    if c.oracle == "coordinate":
        groups = c.groups or MeanOracle2.default_groups(c.dim)
    if batch_size is None:
        s = rows_avail // T
    else:
        s = check_positive_int(batch_size, "batch_size")
    s = (s // groups) * groups
    if s < 1:
        raise ValueError(f"batches of {rows_avail // T} records are smaller than groups="
                         f"{groups}: lower n_iter or groups")
    return T, s


def _check_iters(n_iter, name="n_iter"):
    return None if n_iter is None else check_positive_int(n_iter, name)


# ---------------------------------------------------------------------------
# parameter rules (theorems; constants up to absolute factors, knobs default 1)


def acsa_iterations(n, d, eps, k, beta_d_over_r):
    """Theorem 31: T = ceil(min{(beta D / r_k)^(2k/(5k-1)) (eps n / sqrt d)^((2k-2)/(5k-1)),
    sqrt(beta D / r_k) n^(1/4)}), at least 1."""
    a = beta_d_over_r
    t2 = math.sqrt(a) * n ** 0.25
    if math.isinf(eps):
        t = t2
    else:
        t1 = a ** (2 * k / (5 * k - 1)) * (eps * n / math.sqrt(d)) ** ((2 * k - 2) / (5 * k - 1))
        t = min(t1, t2)
    return max(1, int(math.ceil(t)))


def one_pass_clip(r, n, d, eps, T, k, prox=False):
    """Theorems 31/34: C = r_k (eps n / sqrt(d T))^(1/k); Theorem 48 (``prox``):
    C = r_k (eps n / (sqrt(d) T))^(1/k)."""
    if math.isinf(eps):
        return math.inf
    denom = math.sqrt(d) * T if prox else math.sqrt(d * T)
    return r * (eps * n / denom) ** (1.0 / k)


def clip_fraction(n, d, eps, T, prox=False):
    """q such that the theorems' C is the Markov bound on the (1 - q)-quantile."""
    if math.isinf(eps):
        return 0.0
    return (math.sqrt(d) * T if prox else math.sqrt(d * T)) / (eps * n)


def sgd_iterations(n, d, eps, k, kappa, scale):
    """Theorem 34: T = ceil(4 kappa ln(scale (n + (eps^2 n^2 / d)^((k-1)/k)))),
    scale = mu beta D^2 / r_k^2 (1 when unknown); at least 1."""
    inner = n if math.isinf(eps) else n + (eps * eps * n * n / d) ** ((k - 1) / k)
    return max(1, int(math.ceil(4.0 * kappa * math.log(max(scale * inner, math.e)))))


def stich_schedule(T, beta, mu):
    """Step sizes eta_t and averaging weights zeta_t, t = 0..T-1 (Stich 2019, Lemma 3,
    with a = mu/2, g = beta, as Theorem 34 prescribes; kappa_S = 2g/a = 4 beta/mu)."""
    kappa_s = 4.0 * beta / mu
    if T <= 2.0 * beta / mu:
        eta = np.full(T, 1.0 / beta)
        # zeta_t = (1 - a eta)^(-(t+1)); normalised in log space against overflow
        log_w = -(np.arange(T) + 1.0) * math.log1p(-min(mu / (2.0 * beta), 1 - 1e-16))
        zeta = np.exp(log_w - log_w.max())
        return eta, zeta
    t0 = int(math.ceil(T / 2.0))
    t = np.arange(T, dtype=np.float64)
    shift = kappa_s + np.maximum(t - t0, 0.0)
    eta = np.where(t < t0, 1.0 / beta, 4.0 / (mu * shift))
    zeta = np.where(t < t0, 0.0, shift ** 2)
    return eta, zeta


def proxsgd_iterations(n, kappa, gap=None, mu=None, bias_var=None):
    """Theorem 48: T = 2 ceil(kappa ln(Delta mu / (B^2 + Sigma^2))) when the gap bound
    Delta is known, else the fallback T = 2 ceil(kappa ln n); at least 2."""
    if gap is None or bias_var is None or bias_var <= 0:
        return max(2, 2 * int(math.ceil(kappa * math.log(max(n, 2)))))
    return max(2, 2 * int(math.ceil(kappa * math.log(max(gap * mu / bias_var, math.e)))))


# ---------------------------------------------------------------------------
# solvers


_COMMON_DOC = """
    Common parameters
    -----------------
    rho : float, optional
        zCDP budget used instead of ``epsilon``, which then caps it (module docstring,
        "Budget").
    accountant : "zcdp" or "exact"
        epsilon <-> rho conversion (module docstring).
    model : "central" or "shuffle-simulation"
    oracle : "l2" (MeanOracle1) or "coordinate" (MeanOracle2; clip is then tau)
    clip : float, "theory" or "quantile" (module docstring, "Clipping threshold")
    moment_bound, moment_order : r_k and k of E||grad f||^k <= r_k^k (public knowledge)
    radius : float
        The domain W is the L2 ball of this radius (D = 2 radius); ``inf`` = unconstrained.
    n_iter, batch_size : int, optional
        T and s (default: the theorem's T and s = floor(n / T)); n_iter * batch_size <= n.
    step : float
        Multiplier of the rule's step size (1 = the theorem's).
    smoothness : "exact" or float
        beta of the average loss; ``"exact"`` reads the data without privacy (warns).
    clip_quantile : float, optional
        Level of the private quantile (default 1 - q from the theorem; see above).
    quantile_share, quantile_records, quantile_range : the private quantile's
        budget share (or record share), "shared"/"disjoint", public search range.
    groups : int, optional
        m for the coordinate oracle (default ceil(20 ln(40 d)), Lemma 57 with zeta = 0.1).
    checkpoint_every : int
        Record the output iterate every this many iterations.
"""


def _common(problem, solver, kw):
    return _Common(problem, solver, **kw)


def _with_common_doc(func):
    func.__doc__ = (func.__doc__ or "") + _COMMON_DOC
    return func


# ---------------------------------------------------------------------------
# options (declared once; the one-pass solvers share them)

_BUDGET_OPTIONS = (
    Option("rho", None, None, "zCDP budget used instead of epsilon (which then caps it)"),
    Option("accountant", "zcdp", one_of(*ZCDP_ACCOUNTANTS), "epsilon <-> rho conversion"),
)
_MOMENT_OPTIONS = (
    Option("clip", None, None, 'C (float), "theory" or "quantile" (module docstring)'),
    Option("moment_bound", None, None, "r_k of E||grad f||^k <= r_k^k (public knowledge)"),
    Option("moment_order", 2, None, "k of the moment bound"),
)
_QUANTILE_OPTIONS = (
    Option("clip_quantile", None, None, "level of the private quantile clip"),
    Option("quantile_share", 0.1, None, "budget (or record) share of the private quantile"),
    Option("quantile_records", "shared", one_of("shared", "disjoint"), "records of the quantile"),
    Option("quantile_range", (1e-6, 1e6), None, "public search range of the quantile"),
)
_ONE_PASS_OPTIONS = (
    *_BUDGET_OPTIONS,
    Option("model", "central", one_of(*MODELS), "central or simulated shuffle model"),
    Option("oracle", "l2", one_of(*ORACLES), "MeanOracle1 (l2) or MeanOracle2 (coordinate)"),
    *_MOMENT_OPTIONS,
    Option("radius", math.inf, None, "the domain is the L2 ball of this radius"),
    Option("n_iter", None, None, "T, the number of batches (default: the theorem's)"),
    Option("batch_size", None, None, "s, records per batch (default floor(n / T))"),
    Option("step", 1.0, positive, "multiplier of the rule's step size"),
    Option("smoothness", "exact", None, 'beta of the average loss; "exact" reads it (warns)'),
)
_TAIL_OPTIONS = (
    *_QUANTILE_OPTIONS,
    Option("groups", None, None, "m for the coordinate oracle"),
    Option("checkpoint_every", 1, positive_int, "record the output every this many iterations"),
)
_STRONG_CONVEXITY = Option("strong_convexity", None, None, "mu (default: the L2 penalty's alpha)")
#: one batch of all 50 canary records (T = 1): the final model is the single oracle call the
#: canary enters (with T batches it is averaged with T - 1 others and the audit loses power)
_ONE_PASS_AUDIT = {"clip": 1.0, "n_iter": 1, "batch_size": 50}


@_with_common_doc
@register_solver("ht-acsa", description="noisy clipped accelerated SGD (AC-SA), one pass, "
                 "heavy-tailed gradients (Lowy & Razaviyayn, Alg. 2)", family="heavy-tailed",
                 options=(*_ONE_PASS_OPTIONS, *_TAIL_OPTIONS), run_length="n_iter",
                 audit=_ONE_PASS_AUDIT)
def fit_ht_acsa(problem, *, epsilon, delta, rng, rho=None, accountant="zcdp", model="central",
                oracle="l2", clip=None, moment_bound=None, moment_order=2, radius=math.inf,
                n_iter=None, batch_size=None, step=1.0, smoothness="exact", clip_quantile=None,
                quantile_share=0.1, quantile_records="shared", quantile_range=(1e-6, 1e6),
                groups=None, checkpoint_every=1):
    """Noisy clipped AC-SA (module docstring), Theorem 31's parameters:
    T as in :func:`acsa_iterations` (with beta D / r_k = 1 when D or r_k is
    unknown), C as in :func:`one_pass_clip`, ``eta = max{2 beta, T^(3/2)
    sqrt(Sigma^2 + B^2) / D}`` with ``B = r_k^k / ((k-1) C^(k-1))`` and
    ``Sigma^2 = d sigma^2 + r_k^2 / s`` (r_2 <= r_k), steps ``a_t / eta_t = t / (2 eta)``.
    """
    c = _common(problem, "ht-acsa", dict(
        epsilon=epsilon, delta=delta, rho=rho, accountant=accountant, model=model,
        oracle=oracle, clip=clip, moment_bound=moment_bound, moment_order=moment_order,
        radius=radius, clip_quantile=clip_quantile, quantile_share=quantile_share,
        quantile_records=quantile_records, quantile_range=quantile_range, groups=groups,
        step=step, checkpoint_every=checkpoint_every))
    beta = global_smoothness(problem, smoothness)
    n_iter, D = _check_iters(n_iter), 2.0 * c.radius
    eps = c.eps_z
    if n_iter is None:
        known = c.clip_mode == "theory" and math.isfinite(D)
        a = beta * D / c.r if known else 1.0
        n_iter = _clamp_iters(acsa_iterations(c.n_opt, c.dim, eps, c.k, a), c.n_opt, 1,
                              "ht-acsa")
    T, s = _batch_plan(c, n_iter, batch_size, c.n_opt)
    rows_q, rows_opt = c.split(rng)
    batches = c.batches(rows_opt, T, s)
    q = c.clip_quantile and 1.0 - c.clip_quantile
    clip_value, q = _resolve_clip(c, rng, rows_q, rows_opt, T, s, q, prox=False)
    orc = c.make_oracle(clip_value, s)
    r = c.proxy_moment(clip_value, q)
    sigma = orc.sigma
    if math.isfinite(D) and r is not None:
        bias = 0.0 if math.isinf(clip_value) else r ** c.k / ((c.k - 1) * clip_value ** (c.k - 1))
        var = c.dim * sigma ** 2 + r * r / s
        eta = max(2.0 * beta, T ** 1.5 * math.sqrt(var + bias * bias) / D)
    else:
        eta = 2.0 * beta
    pen = problem.penalty
    w = problem.zeros()
    w_ag = w.copy()
    ck = Checkpoints()
    ck.record(w_ag, 0)
    for t in range(1, T + 1):
        a_t = 2.0 / (t + 1.0)
        w_md = (1.0 - a_t) * w_ag + a_t * w
        g = orc(rng, problem, w_md, read_records(problem, batches[t - 1]))
        gamma = c.step * t / (2.0 * eta)
        w = prox_ball(pen, w - gamma * g, gamma, c.radius)
        w_ag = a_t * w + (1.0 - a_t) * w_ag
        if t % c.checkpoint_every == 0 or t == T:
            ck.record(w_ag, t * s / c.n)
    return _finish(problem, "ht-acsa", c, w_ag, orc, T, s, ck,
                   {"n_iter": T, "batch_size": s, "clip": clip_value, "eta": eta, "beta": beta,
                    "sigma": sigma})


def _resolve_clip(c, rng, rows_q, rows_opt, T, s, q_override, prox):
    """The clipping threshold and the clipped fraction q it corresponds to."""
    n_used = T * s
    q = clip_fraction(n_used, c.dim, c.eps_z, T, prox) if q_override is None else q_override
    if c.clip_mode == "given":
        return c.clip_value, q
    if c.non_private:
        return math.inf, 0.0
    if c.clip_mode == "theory":
        if c.oracle == "coordinate":
            return 2.0 * c.r, q  # tau >= 2 L and L <= r_k (Lemma 52)
        return one_pass_clip(c.r, n_used, c.dim, c.eps_z, T, c.k, prox), q
    q = min(max(q, 1.0 / max(1, rows_q.size if c.quantile_records == "disjoint"
                                 else rows_opt.size + rows_q.size)), 0.5)
    return c.quantile_clip(rng, rows_q, np.concatenate([rows_q, rows_opt]), q), q


def _finish(problem, solver, c, w, orc, T, s, ck, params, oracle_records=None,
            oracle_gaussians=None, z_main=None):
    if c.model == "central":
        oracle_records = oracle_records or [orc.mech.record()]
        oracle_gaussians = oracle_gaussians or [orc.mech.gaussian_record()]
        z_main = orc.mech.noise_multiplier if z_main is None else z_main
    cal, mechs, pparams = c.privacy(oracle_records or [], oracle_gaussians or [], z_main or 0.0)
    n_used = T * s if params.get("records_used") is None else params["records_used"]
    allp = {**c.base_params(), **pparams, **params, "records_used": n_used,
            "records_unused": c.n - n_used - c.n_quantile}
    return make_result(problem, w, solver=solver, calibration_or_spent=cal, mechanisms=mechs,
                       n_iter=params.get("total_steps", T), passes=params.get(
                           "gradient_passes", n_used / c.n), checkpoints=ck, params=allp)


@_with_common_doc
@register_solver("ht-sgd", description="noisy clipped SGD with weighted averaging, one pass, "
                 "strongly convex, heavy-tailed gradients (Lowy & Razaviyayn, Alg. 6)",
                 family="heavy-tailed", run_length="n_iter",
                 options=(*_ONE_PASS_OPTIONS, _STRONG_CONVEXITY, *_TAIL_OPTIONS),
                 audit={**_ONE_PASS_AUDIT, "strong_convexity": 1.0})
def fit_ht_sgd(problem, *, epsilon, delta, rng, rho=None, accountant="zcdp", model="central",
               oracle="l2", clip=None, moment_bound=None, moment_order=2, radius=math.inf,
               n_iter=None, batch_size=None, step=1.0, smoothness="exact",
               strong_convexity=None, clip_quantile=None, quantile_share=0.1,
               quantile_records="shared", quantile_range=(1e-6, 1e6), groups=None,
               checkpoint_every=1):
    """Noisy clipped SGD (module docstring), Theorem 34's parameters:
    T from :func:`sgd_iterations` (scale mu beta D^2 / r_k^2 taken as 1 when D or
    r_k is unknown), C from :func:`one_pass_clip`, steps/weights from
    :func:`stich_schedule`. ``strong_convexity``: mu (default: the L2 penalty's alpha).
    """
    c = _common(problem, "ht-sgd", dict(
        epsilon=epsilon, delta=delta, rho=rho, accountant=accountant, model=model,
        oracle=oracle, clip=clip, moment_bound=moment_bound, moment_order=moment_order,
        radius=radius, clip_quantile=clip_quantile, quantile_share=quantile_share,
        quantile_records=quantile_records, quantile_range=quantile_range, groups=groups,
        step=step, checkpoint_every=checkpoint_every))
    beta = global_smoothness(problem, smoothness)
    mu = resolve_mu(problem, strong_convexity, "ht-sgd")
    kappa = max(beta / mu, 1.0)
    n_iter = _check_iters(n_iter)
    if n_iter is None:
        D = 2.0 * c.radius
        scale = (mu * beta * D * D / c.r ** 2 if c.clip_mode == "theory" and math.isfinite(D)
                 else 1.0)
        n_iter = _clamp_iters(sgd_iterations(c.n_opt, c.dim, c.eps_z, c.k, kappa, scale),
                              c.n_opt, 1, "ht-sgd")
    T, s = _batch_plan(c, n_iter, batch_size, c.n_opt)
    rows_q, rows_opt = c.split(rng)
    batches = c.batches(rows_opt, T, s)
    q = c.clip_quantile and 1.0 - c.clip_quantile
    clip_value, q = _resolve_clip(c, rng, rows_q, rows_opt, T, s, q, prox=False)
    orc = c.make_oracle(clip_value, s)
    eta, zeta = stich_schedule(T, beta, mu)
    eta = eta * c.step
    pen = problem.penalty
    w = problem.zeros()
    avg = np.zeros_like(w)
    zsum = 0.0
    ck = Checkpoints()
    ck.record(w, 0)
    for t in range(T):
        g = orc(rng, problem, w, read_records(problem, batches[t]))
        w = prox_ball(pen, w - eta[t] * g, eta[t], c.radius)
        if zeta[t] > 0:
            zsum += zeta[t]
            avg += (zeta[t] / zsum) * (w - avg)
        out = avg if zsum > 0 else w
        if (t + 1) % c.checkpoint_every == 0 or t + 1 == T:
            ck.record(out, (t + 1) * s / c.n)
    out = avg if zsum > 0 else w
    return _finish(problem, "ht-sgd", c, out, orc, T, s, ck,
                   {"n_iter": T, "batch_size": s, "clip": clip_value, "beta": beta, "mu": mu,
                    "kappa": kappa, "sigma": orc.sigma})


@_with_common_doc
@register_solver("ht-proxsgd", description="noisy clipped proximal SGD, one pass, Proximal-PL "
                 "losses, heavy-tailed gradients (Lowy & Razaviyayn, Alg. 8)",
                 family="heavy-tailed", run_length="n_iter",
                 options=(*_ONE_PASS_OPTIONS, _STRONG_CONVEXITY,
                          Option("gap_bound", None, None, "Delta >= F(0) - F* (sets T)"),
                          *_TAIL_OPTIONS),
                 audit={**_ONE_PASS_AUDIT, "strong_convexity": 1.0})
def fit_ht_proxsgd(problem, *, epsilon, delta, rng, rho=None, accountant="zcdp",
                   model="central", oracle="l2", clip=None, moment_bound=None, moment_order=2,
                   radius=math.inf, n_iter=None, batch_size=None, step=1.0, smoothness="exact",
                   strong_convexity=None, gap_bound=None, clip_quantile=None,
                   quantile_share=0.1, quantile_records="shared", quantile_range=(1e-6, 1e6),
                   groups=None, checkpoint_every=1):
    """Noisy clipped proximal SGD (module docstring), Theorem 48's parameters:
    eta = 1/(2 beta), C = r_k (eps n / (sqrt(d) T))^(1/k), T = 2 ceil(kappa ln(Delta mu /
    (B^2 + Sigma^2))) solved by fixed-point iteration when ``gap_bound`` (Delta >=
    F(0) - F*) is given, else T = 2 ceil(kappa ln n). ``strong_convexity``: the PPL
    constant mu (default: the L2 penalty's alpha).
    """
    c = _common(problem, "ht-proxsgd", dict(
        epsilon=epsilon, delta=delta, rho=rho, accountant=accountant, model=model,
        oracle=oracle, clip=clip, moment_bound=moment_bound, moment_order=moment_order,
        radius=radius, clip_quantile=clip_quantile, quantile_share=quantile_share,
        quantile_records=quantile_records, quantile_range=quantile_range, groups=groups,
        step=step, checkpoint_every=checkpoint_every))
    beta = global_smoothness(problem, smoothness)
    mu = resolve_mu(problem, strong_convexity, "ht-proxsgd")
    kappa = max(beta / mu, 1.0)
    gap = None if gap_bound is None else check_scalar(gap_bound, "gap_bound", low=0.0,
                                                      low_open=True)
    n_iter = _check_iters(n_iter)
    if n_iter is None:
        T = proxsgd_iterations(c.n_opt, kappa)
        if gap is not None and c.clip_mode == "theory" and not c.non_private:
            for _ in range(30):  # fixed point T -> C(T) -> B, Sigma -> T
                s_ = max(1, c.n_opt // T)
                C = one_pass_clip(c.r, T * s_, c.dim, c.eps_z, T, c.k, prox=True)
                B = c.r ** c.k / ((c.k - 1) * C ** (c.k - 1))
                sig = 2.0 * C / (s_ * c.eps_z)
                T_new = min(proxsgd_iterations(c.n_opt, kappa, gap, mu,
                                               B * B + c.dim * sig * sig + c.r ** 2 / s_),
                            c.n_opt)
                if T_new == T:
                    break
                T = T_new
        n_iter = _clamp_iters(T, c.n_opt, 1, "ht-proxsgd")
    T, s = _batch_plan(c, n_iter, batch_size, c.n_opt)
    rows_q, rows_opt = c.split(rng)
    batches = c.batches(rows_opt, T, s)
    q = c.clip_quantile and 1.0 - c.clip_quantile
    clip_value, q = _resolve_clip(c, rng, rows_q, rows_opt, T, s, q, prox=True)
    orc = c.make_oracle(clip_value, s)
    eta = c.step / (2.0 * beta)
    pen = problem.penalty
    w = problem.zeros()
    ck = Checkpoints()
    ck.record(w, 0)
    for t in range(T):
        g = orc(rng, problem, w, read_records(problem, batches[t]))
        w = prox_ball(pen, w - eta * g, eta, c.radius)
        if (t + 1) % c.checkpoint_every == 0 or t + 1 == T:
            ck.record(w, (t + 1) * s / c.n)
    return _finish(problem, "ht-proxsgd", c, w, orc, T, s, ck,
                   {"n_iter": T, "batch_size": s, "clip": clip_value, "beta": beta, "mu": mu,
                    "kappa": kappa, "eta": eta, "sigma": orc.sigma})


# ---------------------------------------------------------------------------
# localized noisy clipped subgradient method (Algorithms 3 and 4)


def subgradient_base_step(n, d, eps, k, D, r):
    """Theorem 41's eta with every moment constant (r_2, r~_k, r~_2k, R~_{2k,n}, L)
    replaced by the one bound r (they are all <= r~_2k; constants up to factors)."""
    p = 1.0 + 1.0 / k
    ln_n = math.log(max(n, 2))
    priv = 0.0 if math.isinf(eps) else (math.sqrt(d * ln_n) / (eps * n)) ** ((k - 1) / k)
    inv_priv = math.inf if math.isinf(eps) else (eps * n / math.sqrt(d * ln_n)) ** ((k - 1) / k)
    eps_d = math.inf if math.isinf(eps) else (eps / math.sqrt(d)) ** ((k - 1) / k)
    eta_a = (D * n * n) * min(1.0 / (r * n ** (1.5 / k)), eps_d / r) * (1 / math.sqrt(n) + priv)
    inner = min(1.0 / (r * n ** ((p - 1) / 2)), 1.0 / (r * n ** (1.0 / (2 * k))),
                inv_priv / (r * n ** (p / 2)))
    return min(eta_a, D / n ** (p / 2) * inner)


def _penalty_subgradient(pen, w):
    return pen.l1 * np.sign(w) + pen.l2 * w


@register_solver("ht-subgradient", description="localized noisy clipped subgradient method, "
                 "non-smooth convex losses, heavy-tailed subgradients (Lowy & Razaviyayn, "
                 "Alg. 4)", family="heavy-tailed",
                 penalties=("none", "l1", "l2", "elastic_net"), run_length="max_phase_iter",
                 options=(
                     *_BUDGET_OPTIONS, *_MOMENT_OPTIONS,
                     Option("radius", None, None, "D / 2: the (finite) radius of the domain"),
                     Option("step", 1.0, positive, "multiplier of the base step"),
                     Option("max_phase_iter", 1000, None, "cap on the iterations of a phase"),
                     *_QUANTILE_OPTIONS,
                     Option("implementation", "auto", one_of("auto", "numba", "python"),
                            "the phase loop: compiled (dense) or Python"),
                     Option("checkpoint_every", 1, positive_int, "record every this many "
                            "iterations"),
                 ),
                 # n' / 2 records in the first phase (n' = 2^floor(log2 n)), larger noise
                 # later: with n = 2 there is one phase and the canary is read half the time
                 audit={"clip": 1.0, "radius": 1e3, "moment_bound": 100.0, "max_phase_iter": 1},
                 audit_canary={"n_samples": 2})
def fit_ht_subgradient(problem, *, epsilon, delta, rng, rho=None, accountant="zcdp", clip=None,
                       moment_bound=None, moment_order=2, radius=None, step=1.0,
                       max_phase_iter=1000, clip_quantile=None, quantile_share=0.1,
                       quantile_records="shared", quantile_range=(1e-6, 1e6),
                       implementation="auto", checkpoint_every=1):
    """Localized noisy clipped subgradient method (module docstring), Theorem 41.

    ``moment_bound`` is r~_2k (Assumption 1 with order 2k: E sup_w ||g||^(2k)
    <= r~_2k^(2k)), used for every moment constant. Phase i: n_i = n'/2^i
    (n' = 2^floor(log2 n)), eta_i = 4^-i eta (eta from :func:`subgradient_base_step`,
    times ``step``), lambda_i = 1/(eta_i n_i^p), p = 1 + 1/k,
    T_i = ceil(n_i^p ln n) full-batch steps, at most ``max_phase_iter``: when capped,
    eta_i is multiplied by T_i^theory / T_i and lambda_i kept, so the phase keeps its
    total step length eta_i T_i, its contraction lambda_i eta_i T_i = ln n and (since
    sigma_i scales as sqrt(T_i)) the spread eta_i sigma_i sqrt(T_i) of the accumulated
    noise: a coarser discretization of the same phase [ours; needs T_i >= ln(n)/2 for
    lambda_i eta_i <= 2],
    D_i = 4 r (sqrt(n) 2^i)^(1/k) / lambda_i, C_i = r (eps n_i / sqrt(d ln n))^(1/k)
    (last phase: r (eps / sqrt d)^(1/k)); noise per step
    sigma_i = 2 C_i sqrt(T_i) / (n_i eps) (each step (rho/T_i)-zCDP).
    ``max_phase_iter=None`` runs the theorem's T_i (about n^(2+1/k) ln n gradient
    evaluations in total: impractical beyond a few thousand records). ``radius``
    (required) is the radius of the domain ball W (D = 2 radius).
    In quantile mode C_1 is the private quantile at level 1 - sqrt(d ln n)/(eps n_1)
    and C_i = C_1 (n_i / n_1)^(1/k); r is replaced by C_1 q^(1/k).
    ``implementation``: ``"numba"`` (dense data; :mod:`dpopt.kernels.heavy`), ``"python"``
    (reference, also for sparse data) or ``"auto"`` (numba when dense). Both draw the
    same noise; results agree up to floating-point summation order.
    """
    if radius is None:
        raise ValueError("ht-subgradient needs radius (the domain W = {||w|| <= radius} is "
                         "part of the method: eta and the localization radii use D = 2 radius)")
    c = _common(problem, "ht-subgradient", dict(
        epsilon=epsilon, delta=delta, rho=rho, accountant=accountant, model="central",
        oracle="l2", clip=clip, moment_bound=moment_bound, moment_order=moment_order,
        radius=radius, clip_quantile=clip_quantile, quantile_share=quantile_share,
        quantile_records=quantile_records, quantile_range=quantile_range, groups=None,
        step=step, checkpoint_every=checkpoint_every))
    if math.isinf(c.radius):
        raise ValueError("ht-subgradient needs a finite radius")
    if c.problem.penalty.name not in ("none", "l1", "l2", "elastic_net"):
        raise ValueError("ht-subgradient supports penalties none, l1, l2, elastic_net")
    check_choice(implementation, "implementation", ("auto", "numba", "python"))
    if implementation == "numba" and problem.is_sparse:
        raise ValueError("implementation='numba' needs dense data; use 'python' or 'auto'")
    use_numba = implementation == "numba" or (implementation == "auto" and not problem.is_sparse)
    cap = None if max_phase_iter is None else check_positive_int(max_phase_iter,
                                                                  "max_phase_iter")
    if c.n_opt < 2:
        raise ValueError("ht-subgradient needs at least 2 records for the optimization")
    levels = int(math.floor(math.log2(c.n_opt)))
    n_pow = 2 ** levels
    sizes = [n_pow >> i for i in range(1, levels + 1)]
    k, d, eps, D = c.k, c.dim, c.eps_z, 2.0 * c.radius
    p = 1.0 + 1.0 / k
    ln_n = math.log(n_pow)
    rows_q, rows_opt = c.split(rng)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    if starts[-1] > rows_opt.size:
        raise ValueError("internal error: phases exceed the available records")
    # clipping thresholds
    q_default = 0.0 if math.isinf(eps) else math.sqrt(d * ln_n) / (eps * sizes[0])
    q = q_default if c.clip_quantile is None else 1.0 - c.clip_quantile
    if c.clip_mode == "given":
        clips = [c.clip_value] * levels
    elif c.non_private:
        clips = [math.inf] * levels
    elif c.clip_mode == "theory":
        clips = [c.r * (eps * ni / math.sqrt(d * ln_n)) ** (1.0 / k) for ni in sizes[:-1]]
        clips.append(c.r * (eps / math.sqrt(d)) ** (1.0 / k))
    else:
        q = min(max(q, 1.0 / (rows_opt.size + rows_q.size)), 0.5)
        c1 = c.quantile_clip(rng, rows_q, np.concatenate([rows_q, rows_opt]), q)
        clips = [c1 * (ni / sizes[0]) ** (1.0 / k) for ni in sizes]
    r = c.proxy_moment(clips[0], q)
    if r is None:  # non-private without a moment bound: a scale from the data is not needed
        r = 1.0
    eta = c.step * subgradient_base_step(n_pow, d, eps, k, D, r)
    pen = problem.penalty
    w = problem.zeros()
    origin = problem.zeros()
    ck = Checkpoints()
    ck.record(w, 0)
    t_theory, t_used, recs, gauss, sigmas = [], [], [], [], []
    grads = 0
    for i, ni in enumerate(sizes, start=1):
        eta_i = eta * 4.0 ** (-i)
        lam = 1.0 / (eta_i * ni ** p)
        Ti_theory = int(math.ceil(ni ** p * ln_n))
        Ti = Ti_theory if cap is None else min(Ti_theory, cap)
        if Ti < Ti_theory:  # [ours] same lambda, same eta_i T_i and lambda_i eta_i T_i = ln n
            eta_i *= Ti_theory / Ti
        t_theory.append(Ti_theory)
        t_used.append(Ti)
        Di = 4.0 * r * (math.sqrt(n_pow) * 2.0 ** i) ** (1.0 / k) / lam
        batch = read_records(problem, np.sort(rows_opt[starts[i - 1]:starts[i]]))
        rho_call = c.rho_opt / Ti
        orc = GradientOracle(model="central", oracle="l2", clip=clips[i - 1], batch_size=ni,
                             dim=d, rho=rho_call)
        sigmas.append(orc.sigma)
        if i == 1:
            recs.append(ZCDP(rho_call, Ti))
            gauss.append(Gaussian(orc.mech.gaussian_record().noise_multiplier, Ti))
            z_main = orc.mech.noise_multiplier
        center = w.copy()
        if use_numba:
            done = 0
            while done < Ti:  # noise drawn in fixed-size chunks: same stream as one per step
                chunk = min(Ti - done, 4096)
                noise = gaussian_noise(rng, 1.0, (chunk, d))
                subgradient_steps(batch.X, batch.y, batch.norms, problem.loss.code,
                                  problem.loss.param, w, center, c.radius, Di, eta_i, lam,
                                  clips[i - 1], orc.sigma, noise, pen.l1, pen.l2)
                done += chunk
        else:
            for _ in range(Ti):
                g = orc(rng, problem, w, batch) + lam * (w - center) + _penalty_subgradient(pen, w)
                w = project_two_balls(w - eta_i * g, origin, c.radius, center, Di)
        grads += Ti * ni
        if i % c.checkpoint_every == 0 or i == levels:
            ck.record(w, starts[i] / c.n)
    params = {"n_phases": levels, "records_used": int(starts[-1]), "phase_sizes": sizes,
              "phase_iters": t_used, "phase_iters_theory": t_theory, "clips": clips,
              "sigmas": sigmas, "eta": eta, "clip": clips[0], "total_steps": int(sum(t_used)),
              "gradient_passes": grads / c.n, "max_phase_iter": cap}
    return _finish(problem, "ht-subgradient", c, w, None, len(sizes), 0, ck, params,
                   oracle_records=recs, oracle_gaussians=gauss, z_main=z_main)
