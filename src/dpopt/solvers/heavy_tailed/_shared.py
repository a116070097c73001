"""Heavy-tailed family: budget conversion, record access, domain projections and the
shared set-up of every solver (:class:`_Common`)."""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from dpopt._core.validation import check_choice, check_positive_int, check_scalar
from dpopt.privacy import (
    dp_to_zcdp,
    gdp_epsilon,
    gdp_mu,
    private_quantile,
    zcdp_to_dp,
)
from dpopt.solvers._common import ZCDP_ACCOUNTANTS
from dpopt.solvers.heavy_tailed.oracles import (
    MeanOracle1,
    MeanOracle2,
    ShuffleMeanOracle1,
    ShuffleMeanOracle2,
    clip_rows_l2,
    median_of_means,
)

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


_COMMON_KEYS = ("epsilon", "delta", "rho", "accountant", "model", "oracle", "clip", "moment_bound",
                "moment_order", "radius", "clip_quantile", "quantile_share", "quantile_records",
                "quantile_range", "groups", "step", "checkpoint_every")


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


def _common(problem, solver, options):
    """The shared set-up (:class:`_Common`) from a fit function's options (its ``locals()`` at entry): the
    keywords of :class:`_Common` are picked by name, so they are not repacked by hand."""
    return _Common(problem, solver, **{k: options[k] for k in _COMMON_KEYS})


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


