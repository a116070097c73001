"""``solver="auto"``: the estimators' default path, private end to end.

A plain ``DPLogisticRegression(epsilon=1).fit(X, y)`` on raw data runs this
pipeline. Every scaling step is a Gaussian mechanism: with mu the Gaussian-DP
parameter (Dong, Roth & Su 2022) of the target (epsilon, delta), step k gets
mu_k with sum_k mu_k^2 = mu^2. A Gaussian model mechanism gets the remaining
mu, so the fit is (epsilon, delta)-DP exactly; objective perturbation (not
Gaussian) is calibrated against the whole target given the scaling's mu
(``prior_mu``), which its dominating pair composes with exactly.

====================  ==========  ============================================================
step                  share mu^2  what it releases (replace-one adjacency)
====================  ==========  ============================================================
feature bounds        10%         per-feature noisy histograms on a public grid -> lower/upper
                                  quantiles (:func:`dpopt.preprocessing.private_feature_bounds`)
row-norm bound        3%          noisy log-histogram of the scaled rows' norms -> its 95%
                                  quantile R (:func:`dpopt.privacy.private_quantile`)
target bounds         5%          (regression) noisy histogram of y -> lower/upper quantiles
model                 the rest    the mechanism of :data:`AUTO_TABLE` on the scaled data
====================  ==========  ============================================================

Why these shares: the bounds only need to be right within a factor (they fix a
scale, not a statistic), and a 15-18% share costs the model a factor
1/sqrt(0.82..0.85) ~ 1.09 in noise standard deviation, whatever n and epsilon.

Scaling (post-processing of the bounds, free): dense features are clipped to
their private bounds and mapped to [0, 1] (min-max; a column whose bounds
collapse becomes 0); sparse features are clipped and divided by their largest
absolute bound (zeros stay zeros). Without an intercept no shift is applied, so
the model class is unchanged. Rows longer than R are rescaled to norm R by the
mechanism (so the guarantee never depends on the data). A regression target is
clipped to its private bounds and mapped to [-1, 1]. The fitted coefficients
are mapped back to raw units; ``predict`` clips features to the same bounds.

The model mechanism and its settings come from (loss, penalty, n, p) only, by
the table below (:func:`choose_solver`), and the explicit solvers get their
knobs from :func:`rules`, derived from the scaled domain (not from the data):

===========================  =============================  ====================================
loss                         penalty                        mechanism
===========================  =============================  ====================================
squared                      none, l2                       ``adassp`` (Wang 2018): one pass,
                                                            adaptive ridge, near-optimal n >> p
logistic, huber              none, l2                       ``objective-perturbation``
                                                            (Redberg, Koskela & Wang 2023)
any                          l1, elastic_net; or the        ``dp-cd`` with :func:`rules`
                             absolute loss                  (prox handles L1; clipping never binds)
===========================  =============================  ====================================

When a mechanism of the table is not registered in the running installation,
the next rule applies (``dp-gd`` with :func:`rules`), and ``fit_result_.params``
says so.

Chunked data (a :class:`~dpopt.data.chunked.ChunkedProblem`, Dask collections, files read
out of core): the same plan and the same releases, the data-dependent parts (histogram
counts, column sums, row-norm counts) computed per chunk and summed by Dask's tree, the
noise added once on the client by the functions used in memory (:class:`InMemoryData` and
:class:`dpopt.pipeline.chunked.ChunkedData` share them: :func:`noisy_means`,
:func:`row_bound_from_counts`, :func:`dpopt.preprocessing.private_bounds_from_counts`), so the
sensitivities and records are those above. Only distributed mechanisms are chosen: the rows
of the table leading to ``dp-cd`` lead to ``dp-gd`` with :func:`rules` (:data:`CHUNKED_REASON`:
DP-CD takes one cluster-wide reduction per coordinate, DP-GD one per step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from dpopt.privacy import (
    Gaussian,
    epsilon_of,
    gdp_epsilon,
    gdp_mu,
    private_quantile_from_counts,
    quantile_counts,
    quantile_edges,
)

#: Shares of mu^2 (Gaussian-DP) spent on the steps that fix the scale.
SHARES = {"feature_bounds": 0.10, "feature_means": 0.04, "row_norm": 0.03,
          "target_bounds": 0.05}
#: Share of mu^2 of the releases of :mod:`dpopt.inference` (``inference=True`` only): they
#: fix a variance, not the model, so they need to be right within tens of percent.
INFERENCE_SHARE = 0.10
#: The largest share a scaling step may take when its default share cannot resolve it.
MAX_SHARE = 0.30
#: Level of the private quantile of the scaled rows' norms (the row bound R).
ROW_NORM_QUANTILE = 0.95
#: Geometric bins of the row-norm histogram (between min(1e-3, sqrt(p) / 2) and sqrt(p)).
ROW_NORM_BINS = 60

# Curvature bound of loss''(z) and bound of |loss'(z)| on targets in [-1, 1] (for the rules).
_CURVATURE = {"squared": 1.0, "logistic": 0.25, "huber": 1.0, "absolute": 0.0}


@dataclass(frozen=True)
class Scaling:
    """Post-processing of private bounds: clip to [lower, upper], subtract ``offset``,
    divide by ``scale`` (0 where the bounds collapsed: that feature becomes 0)."""

    lower: np.ndarray
    upper: np.ndarray
    offset: np.ndarray
    scale: np.ndarray

    @classmethod
    def from_bounds(cls, lower, upper, *, shift, sparse):
        lower, upper = np.asarray(lower, float), np.asarray(upper, float)
        if sparse:  # zero must stay inside the clipping box so that zeros stay zeros
            lower, upper = np.minimum(lower, 0.0), np.maximum(upper, 0.0)
        if shift and not sparse:
            offset, scale = lower, upper - lower
        else:
            offset, scale = np.zeros_like(lower), np.maximum(np.abs(lower), np.abs(upper))
        return cls(lower, upper, offset, scale)

    def transform(self, X):
        inv = np.divide(1.0, self.scale, out=np.zeros_like(self.scale), where=self.scale > 0)
        if sp.issparse(X):  # offset is 0 for sparse data
            X = self.clip(X) @ sp.diags(inv)
            X.eliminate_zeros()
            return sp.csc_matrix(X)
        return (np.clip(X, self.lower, self.upper) - self.offset) * inv

    def centered(self, means):
        """The same map followed by subtracting ``means`` (in scaled units)."""
        return replace(self, offset=self.offset + np.asarray(means) * self.scale)

    def to_dict(self):
        """The map ``coef_`` needs at prediction time, for a model file."""
        return {"type": "clip", "lower": self.lower.tolist(), "upper": self.upper.tolist()}

    def prepare(self, X):
        """The features ``coef_`` applies to: X clipped to [lower, upper] (sparse stays sparse)."""
        return self.clip(X)

    def clip(self, X):
        """X clipped to [lower, upper] feature-wise (sparse stays sparse)."""
        if sp.issparse(X):
            X = sp.csc_matrix(X, dtype=np.float64, copy=True)
            cols = np.repeat(np.arange(X.shape[1]), np.diff(X.indptr))
            X.data = np.clip(X.data, self.lower[cols], self.upper[cols])
            return X
        return np.clip(X, self.lower, self.upper)

    def unscale(self, coef, intercept):
        """Coefficients on raw (clipped) features: w_j / s_j, b - sum_j w_j o_j / s_j."""
        inv = np.divide(1.0, self.scale, out=np.zeros_like(self.scale), where=self.scale > 0)
        raw = coef * inv
        return raw, float(intercept - raw @ self.offset)


@dataclass(frozen=True)
class RowNormalization:
    """x -> x / ||x||_2 for every row (0 stays 0): a per-record map that reads no other
    record, so it costs no privacy. Used when the budget cannot locate per-feature
    bounds (:func:`bounds_resolvable`); the model is then linear in the normalized
    features and ``coef_`` applies to them."""

    lower = upper = None

    def transform(self, X):
        from sklearn.preprocessing import normalize

        out = normalize(X, norm="l2", copy=True)
        return sp.csc_matrix(out) if sp.issparse(out) else out

    prepare = transform

    def to_dict(self):
        return {"type": "row-normalize"}

    def unscale(self, coef, intercept):
        return np.asarray(coef, dtype=np.float64), float(intercept)


@dataclass(frozen=True)
class TargetScaling:
    """y -> (clip(y, lower, upper) - center) / half_width, into [-1, 1]."""

    lower: float
    upper: float
    center: float
    half_width: float

    @classmethod
    def from_bounds(cls, lower, upper, *, shift):
        if shift:
            center, half = 0.5 * (lower + upper), 0.5 * (upper - lower)
        else:
            center, half = 0.0, max(abs(lower), abs(upper))
        return cls(float(lower), float(upper), float(center), float(half))

    def transform(self, y):
        if self.half_width == 0:
            return np.zeros_like(y)
        return (np.clip(y, self.lower, self.upper) - self.center) / self.half_width


@dataclass
class AutoFit:
    """What the default path produced: the model's FitResult (with the whole
    composition in it), the scalings to apply at prediction time, and the plan."""

    result: object
    scaling: Scaling
    target: TargetScaling | None
    plan: dict = field(default_factory=dict)
    inference: object = None  # dpopt.inference.Inference when inference=True

    def raw_model(self) -> tuple[np.ndarray, float]:
        """``(coef, intercept)`` in the raw units of X and y (post-processing)."""
        coef, intercept = self.scaling.unscale(np.asarray(self.result.coef, float),
                                               float(self.result.intercept))
        if self.target is not None:  # y = center + half_width * (scaled model)
            coef = self.target.half_width * coef
            intercept = self.target.center + self.target.half_width * intercept
        return coef, intercept

    def report(self, name) -> str:
        """One line: the mechanism chosen, the privacy of the whole pipeline and its mu split."""
        from dpopt.solvers._base import chunked_note

        plan, r = self.plan, self.result
        if plan.get("unlearnable"):
            return f"{name} (solver='auto'): nothing released. {plan['reason']}"
        shares = ", ".join(f"{k} mu={v:.3g}" for k, v in plan["mu_shares"].items())
        return (f"{name} (solver='auto' -> {plan['solver']}): ({r.epsilon:.4g}, {r.delta:.3g})-DP "
                f"under {r.adjacency} adjacency, end to end (scaling included), accountant "
                f"{r.accountant}; Gaussian-DP mu={plan['mu']:.4g} split as "
                f"{shares}{chunked_note(r.params)}")


# --------------------------------------------------------------------------- the table


#: Why chunked data never goes to dp-cd (recorded in ``params["auto"]["reason"]``).
CHUNKED_REASON = "chunked data: dp-cd takes one cluster-wide reduction per coordinate"


def choose_solver(loss, penalty, n, p, available, *, chunked=False) -> tuple[str, str]:
    """The mechanism for (loss, penalty, n, p) and why (see the module table).

    ``chunked``: the data is a :class:`~dpopt.data.chunked.ChunkedProblem`; only the
    solvers declared distributed are candidates, and the rows of the table that lead to
    dp-cd (one reduction per coordinate) lead to dp-gd, a block method (one reduction of
    the full gradient per step; its prox handles L1)."""
    if chunked:
        from dpopt.solvers import get_solver

        available = [name for name in available if get_solver(name).distributed]
    smooth_l2 = penalty in ("none", "l2")
    if loss == "squared" and smooth_l2 and "adassp" in available:
        return "adassp", ("squared loss with an L2 or no penalty: sufficient-statistics "
                          "perturbation with adaptive ridge (AdaSSP) needs one pass and no tuning")
    if loss in ("logistic", "huber") and smooth_l2 and "objective-perturbation" in available:
        return "objective-perturbation", (
            f"{loss} loss (bounded derivative, bounded curvature) with an L2 or no penalty: "
            f"objective perturbation releases a perturbed exact minimizer and needs no step, "
            f"clip or pass count")
    if penalty in ("l1", "elastic_net") or loss in ("huber", "absolute"):
        if chunked:
            return "dp-gd", (f"{CHUNKED_REASON}: DP gradient descent instead (a block method, "
                             f"one reduction of the full gradient per step; its prox handles "
                             f"L1) with the rules of dpopt.pipeline.default_path.rules")
        return "dp-cd", ("non-smooth penalty or loss: DP coordinate descent (its prox handles "
                         "L1) with the rules of dpopt.pipeline.default_path.rules")
    return "dp-gd", "fallback: DP gradient descent with the rules of dpopt.pipeline.default_path.rules"


def run_length(n, dim, mu):
    """T = (n mu / sqrt(dim))^(2/3), clamped to [5, 200].

    For a convex, L-Lipschitz, beta-smooth objective on a domain of radius D,
    noisy gradient descent with T steps of 1/beta has excess risk of order
    beta D^2 / T + L D sqrt(T dim) / (n mu) (optimisation plus the noise of T
    Gaussian steps of sensitivity 2L/n each at multiplier sqrt(T)/mu); equating
    the two gives T ~ (beta D n mu / (L sqrt(dim)))^(2/3). On the scaled domain
    beta D / L is of order one, so it is set to one. The clamp keeps a minimum
    of progress and a bounded cost.
    """
    return int(min(200, max(5, round((n * mu / math.sqrt(dim)) ** (2.0 / 3.0)))))


def rules(solver, *, loss, n, dim, mu, row_bound, alpha=0.0, huber_threshold=1.0):
    """Public settings of ``dp-gd`` / ``dp-sgd`` / ``dp-cd`` on data scaled by the default path.

    ``row_bound`` is R (features of every row have norm <= R after scaling; each
    feature is in [0, 1] or [-1, 1]); ``dim`` counts the intercept column.
    Nothing here reads the data.

    * clip: the largest per-sample gradient norm on the scaled domain,
      |loss'| sqrt(R^2 + 1) (logistic |loss'| <= 1; huber t; absolute 1; squared
      2, the residual bound for targets in [-1, 1] and predictions in [-1, 1]),
      so clipping binds only on rows the mechanism rescales;
    * step: 1 / beta with beta = loss'' (R^2 + 1) + alpha (global smoothness bound;
      dp-gd, dp-sgd), and DP-CD's gamma = 1 with the coordinate smoothness bound
      loss'' max|x_ij|^2 <= loss'' passed as public ``smoothness``;
    * the non-smooth absolute loss has no curvature: its step is the subgradient
      method's constant step D / (G sqrt(T)) (Nesterov, *Introductory Lectures on Convex
      Optimization*, sec. 3.2.3) with D = 1, the norm of a model that spans the scaled
      target range [-1, 1] on unit-range features, i.e. the rule above with
      loss'' := sqrt(T) (``step = 1/beta``, beta = sqrt(T) (R^2 + 1) + alpha);
    * passes: :func:`run_length` (dp-gd steps, dp-cd passes, dp-sgd steps);
    * dp-sgd: the Poisson rate q = mu / sqrt(T) (the smallest rate whose noise
      multiplier sqrt(T) q / mu stays >= 1, where subsampling amplification is
      roughly linear), batch q n, T steps (so passes = q T).
    """
    lipschitz = {"logistic": 1.0, "huber": huber_threshold, "absolute": 1.0, "squared": 2.0}[loss]
    T = run_length(n, dim, mu)
    curv = _CURVATURE[loss] if loss != "absolute" else math.sqrt(T)
    r_aug = math.sqrt(row_bound ** 2 + 1.0)
    clip = lipschitz * r_aug
    beta = max(curv * r_aug ** 2 + alpha, 1e-12)
    if solver == "dp-gd":
        return {"passes": T, "step": 1.0, "clip": clip, "smoothness": beta}
    if solver == "dp-sgd":
        q = min(1.0, mu / math.sqrt(T))
        batch = max(1, int(round(q * n)))
        return {"passes": max(1, int(math.ceil(T * batch / n))), "step": 1.0, "clip": clip,
                "batch_size": batch, "smoothness": beta}
    if solver == "dp-cd":
        M = np.full(dim, max(curv, 1e-12))
        M[-1] = max(curv, 1e-12)
        return {"passes": T, "step": 1.0, "clip": lipschitz * math.sqrt(dim), "smoothness": M}
    raise ValueError(f"no rule for solver {solver!r}")


# --------------------------------------------------------------------------- the pipeline


def bounds_resolvable(n, p, mu_bounds):
    """Whether the feature-bound release can see a feature's bulk, from public (n, p, mu).

    The release adds N(0, sigma^2) with sigma = sqrt(2p) / mu_bounds to every count,
    and a bin is trusted when its noisy count exceeds t sigma (t =
    ``DEFAULT_BIN_CONFIDENCE`` of :mod:`dpopt.preprocessing`). A feature whose
    values span one decade fills about ``bins_per_decade`` bins of the public grid,
    about n / bins_per_decade records each: the bounds are resolvable when that
    count clears the threshold. Below it, every feature would collapse and be
    dropped, so the default path normalizes rows instead (:class:`RowNormalization`).
    """
    from dpopt.preprocessing._bounds import DEFAULT_BIN_CONFIDENCE, DEFAULT_GRID

    sigma = math.sqrt(2.0 * p) / mu_bounds
    return n / DEFAULT_GRID.bins_per_decade >= DEFAULT_BIN_CONFIDENCE * sigma


def plan_budget(n, p, mu, *, regression, center, inference=False):
    """Shares of mu^2 for the scaling steps, from public (n, p, mu) only.

    Feature bounds get ``SHARES["feature_bounds"]``, or ``MAX_SHARE`` when that is
    what :func:`bounds_resolvable` needs, or nothing: then rows are normalized
    (free) and no mean or row norm is needed either. Means are released only when
    features are centred (dense data with an intercept). A regression target gets
    ``SHARES["target_bounds"]`` or ``MAX_SHARE`` likewise; if even that cannot
    resolve one histogram, no private fit can learn the target's scale: the plan is
    then ``None`` (see :func:`fit_default`). ``inference``: :data:`INFERENCE_SHARE` for the
    releases of :mod:`dpopt.inference` (only with per-feature bounds: a row-normalized
    model has no raw-unit coefficients).
    """
    shares = {}
    for share in (SHARES["feature_bounds"], MAX_SHARE):
        if bounds_resolvable(n, p, mu * math.sqrt(share)):
            shares["feature_bounds"] = share
            if center:
                shares["feature_means"] = SHARES["feature_means"]
            shares["row_norm"] = SHARES["row_norm"]
            if inference:
                shares["inference"] = INFERENCE_SHARE
            break
    if regression:
        share = next((s for s in (SHARES["target_bounds"], MAX_SHARE)
                      if bounds_resolvable(n, 1, mu * math.sqrt(s))), None)
        if share is None:
            return None
        shares["target_bounds"] = share
    return shares


def split_mu(epsilon, delta, shares):
    """(mu, {step: mu_step}): ``model`` gets what the shares leave (sum of mu^2 = mu^2)."""
    mu = gdp_mu(epsilon, delta)
    out = {k: mu * math.sqrt(v) for k, v in shares.items()}
    out["model"] = mu * math.sqrt(1.0 - sum(shares.values()))
    return mu, out


def private_means(Xs, mu, rng):
    """Noisy column means of features scaled into [0, 1] (:func:`noisy_means` of the
    column sums)."""
    return noisy_means(np.asarray(Xs.sum(axis=0)).ravel(), Xs.shape[0], mu, rng)


def noisy_means(sums, n, mu, rng):
    """Noisy column means from the exact column sums of n rows scaled into [0, 1] (summed
    in memory or over chunks): each column sum moves by at most 1 when one record is
    replaced, so the p sums have L2 sensitivity sqrt(p); N(0, p / mu^2) noise on each makes
    one Gaussian mechanism of multiplier 1/mu."""
    p = len(sums)
    noisy = sums + rng.standard_normal(p) * (math.sqrt(p) / mu)
    return np.clip(noisy / n, 0.0, 1.0), [Gaussian(1.0 / mu, 1)]


def _row_norms(X):
    if sp.issparse(X):
        return np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    return np.sqrt(np.einsum("ij,ij->i", X, X))


def private_row_bound(X_scaled, mu, rng):
    """R: private ROW_NORM_QUANTILE-quantile of the scaled rows' norms, capped at the
    domain bound sqrt(p) (every scaled feature is in [-1, 1]), and equal to it when the
    noisy scan finds no quantile (too few rows for the budget). One noisy histogram of
    sensitivity sqrt(2) (replace-one): a Gaussian mechanism of multiplier 1/mu."""
    p = X_scaled.shape[1]
    return row_bound_from_counts(quantile_counts(_row_norms(X_scaled), row_norm_edges(p)), p,
                                 mu, rng)


def _row_norm_range(p):
    """(lower, upper) of the row-norm histogram: public, from p only; the upper end is the
    domain bound sqrt(p) of p scaled features."""
    cap = math.sqrt(p)
    return min(1e-3, cap / 2), cap


def row_norm_edges(p):
    """The public edges of the row-norm histogram (:data:`ROW_NORM_BINS` geometric bins)."""
    return quantile_edges(*_row_norm_range(p), ROW_NORM_BINS)


def row_bound_from_counts(counts, p, mu, rng):
    """:func:`private_row_bound` from the exact counts of the scaled rows' norms on
    :func:`row_norm_edges` (counted in memory or summed over chunks)."""
    lower, cap = _row_norm_range(p)
    rho = 0.5 * mu ** 2  # private_quantile's rho-zCDP histogram is sqrt(2 rho)-GDP
    r, info = private_quantile_from_counts(rng, counts, ROW_NORM_QUANTILE, rho, lower=lower,
                                           upper=cap, bins=ROW_NORM_BINS)
    # a scan that never stopped (too few rows for this budget) says nothing: use the domain
    return (cap if r <= lower else r), list(info["gaussian_records"])


class InMemoryData:
    """The data-dependent steps of :func:`fit_default` on arrays in memory (dense or
    sparse). :class:`dpopt.pipeline.chunked.ChunkedData` does the same steps on chunked
    data, with the same releases: the two share every privacy-relevant function."""

    chunked = False

    def __init__(self, X, y):
        self.X, self.y = X, y
        self.shape = X.shape
        self.sparse = sp.issparse(X)
        self._scaled = None

    def scaled(self, scaling):
        """``scaling.transform(X)``, computed once per scaling."""
        if self._scaled is None or self._scaled[0] is not scaling:
            self._scaled = (scaling, scaling.transform(self.X))
        return self._scaled[1]

    def feature_bounds(self, mu, rng):
        from dpopt.preprocessing import private_feature_bounds

        return private_feature_bounds(self.X, mu, rng)

    def means(self, scaling, mu, rng):
        return private_means(self.scaled(scaling), mu, rng)

    def row_bound(self, scaling, mu, rng):
        return private_row_bound(self.scaled(scaling), mu, rng)

    def target_bounds(self, mu, rng):
        from dpopt.preprocessing import private_target_bounds

        return private_target_bounds(self.y, mu, rng)

    def problem(self, scaling, target, **kwargs):
        from dpopt.data import Problem

        y = self.y if target is None else target.transform(self.y)
        return Problem(self.scaled(scaling), y, **kwargs)


def _data_of(X, y, loss, fit_intercept):
    """The data adapter of :func:`fit_default`: in memory, or chunked (a
    :class:`~dpopt.data.chunked.ChunkedProblem`, or a Dask collection / path with ``y``)."""
    from dpopt.data.chunked import is_chunked_input

    if getattr(X, "is_chunked", False) is True or is_chunked_input(X):
        from dpopt.pipeline.chunked import ChunkedData

        return ChunkedData.of(X, y, loss=loss, fit_intercept=fit_intercept)
    return InMemoryData(X, y)


def fit_default(X, y, *, loss, penalty, penalty_kwargs, fit_intercept, epsilon, delta, rng,
                regression, inference=False):
    """Run the default path (module docstring) and return an :class:`AutoFit`.

    ``y`` is already encoded for the loss ({-1, +1} labels for logistic). ``X`` may also
    be chunked: a :class:`~dpopt.data.chunked.ChunkedProblem` (``y`` None: its own target)
    or a Dask collection / path (with ``y``); the same releases are then computed chunk by
    chunk and the mechanism is a distributed one (:mod:`dpopt.pipeline.chunked`). The
    returned ``result`` is the model's FitResult with ``epsilon``, ``mechanisms`` and
    ``accountant`` replaced by those of the whole composition.

    ``inference``: also release what :mod:`dpopt.inference` needs for standard errors
    (its share of mu is in the plan and the composition); a ValueError before the data
    is read when the path cannot give them (:func:`dpopt.inference.unsupported_reason`).
    """
    from dpopt.privacy.budget import _unbudgeted
    from dpopt.solvers import available_solvers, solve

    data = _data_of(X, y, loss, fit_intercept)
    n, p = data.shape
    loss_name = loss if isinstance(loss, str) else loss.name
    center = fit_intercept and not data.sparse
    if inference:
        _check_inference(loss_name, penalty, penalty_kwargs, n, p, data.chunked)
    shares = plan_budget(n, p, gdp_mu(epsilon, delta), regression=regression, center=center,
                         inference=inference)
    if shares is None:
        return _no_model(p, loss, penalty, penalty_kwargs, fit_intercept, delta, n, epsilon)
    mu_total, mus = split_mu(epsilon, delta, shares)
    row_mode = "feature_bounds" not in shares
    records = []
    if row_mode:
        scaling, R = RowNormalization(), 1.0
    else:
        fb = data.feature_bounds(mus["feature_bounds"], rng)
        records += list(fb.mechanisms)
        scaling = Scaling.from_bounds(fb.lower, fb.upper, shift=fit_intercept, sparse=data.sparse)
        if center:
            means, rec = data.means(scaling, mus["feature_means"], rng)
            records += rec
            scaling = scaling.centered(means)
        R, rec = data.row_bound(scaling, mus["row_norm"], rng)
        records += rec

    target = None
    if regression:
        tb = data.target_bounds(mus["target_bounds"], rng)
        records += list(tb.mechanisms)
        target = TargetScaling.from_bounds(tb.lower[0], tb.upper[0], shift=fit_intercept)

    problem = data.problem(scaling, target, loss=loss, penalty=penalty,
                           fit_intercept=fit_intercept, **penalty_kwargs)
    solver, why = choose_solver(loss_name, problem.penalty.name, n, p, available_solvers(),
                                chunked=data.chunked)
    options = _model_options(solver, problem, mus["model"], R, penalty_kwargs)
    eps_model = gdp_epsilon(mus["model"], delta)
    if solver == "objective-perturbation":
        # not a Gaussian mechanism: it calibrates against the whole target, given the
        # Gaussian releases above (their mu adds in quadrature to its Gaussian part)
        options["prior_mu"] = math.sqrt(max(mu_total ** 2 - mus["model"] ** 2, 0.0))
        eps_model = epsilon
    with _unbudgeted():  # the caller charges the whole pipeline once
        result = solve(problem, solver, epsilon=eps_model, delta=delta, random_state=rng,
                       **options)

    from dpopt.inference import SUPPORTED as INFERENCE_PATHS
    from dpopt.inference import Inference, release_inference

    released = None  # the inference releases: only on a path with a usable noise law
    degenerate = target is not None and target.half_width == 0  # the model is 0
    if "inference" in mus and solver in INFERENCE_PATHS and not degenerate:
        scaled, rec = release_inference(problem, result, solver, row_bound=R,
                                        mu=mus["inference"], rng=rng,
                                        adassp_release=getattr(result, "release", None))
        result.mechanisms = list(result.mechanisms) + rec
        released = Inference.from_scaled(scaled, scaling, target, fit_intercept, n)
    mechanisms = records + list(result.mechanisms)
    total = epsilon_of(mechanisms, delta, adjacency=result.adjacency)
    plan = {"solver": solver, "reason": why, "mu": mu_total, "mu_shares": mus,
            "scaling": "row-normalized" if row_mode else "private feature bounds",
            "row_bound": R, "model_options": _public(options)}
    if inference and released is None:
        plan["inference_unavailable"] = unsupported_reason_of(solver, row_mode, degenerate)
    result = replace(result, epsilon=total, mechanisms=mechanisms,
                     accountant="exact" if all(isinstance(m, Gaussian) for m in mechanisms)
                     else result.accountant,
                     params={**result.params, "auto": plan})
    return AutoFit(result, scaling, target, plan, released)


def _check_inference(loss_name, penalty, penalty_kwargs, n, p, chunked):
    """ValueError, before any data is read, when the path's mechanism cannot give intervals."""
    from dpopt.inference import unsupported_reason
    from dpopt.solvers import available_solvers

    pen = "none" if penalty == "l2" and not penalty_kwargs.get("alpha") else penalty
    solver = choose_solver(loss_name, pen, n, p, available_solvers(), chunked=chunked)[0]
    reason = unsupported_reason(solver, chunked=chunked)
    if reason is not None:
        raise ValueError(f"inference=True: {reason}")


def unsupported_reason_of(solver, row_mode, degenerate_target=False):
    from dpopt.inference import unsupported_reason

    return unsupported_reason(solver, row_normalized=row_mode,
                              degenerate_target=degenerate_target)


def _no_model(p, loss, penalty, penalty_kwargs, fit_intercept, delta, n, epsilon):
    """The documented result when n is too small to locate the target's range at this
    epsilon: the zero model, computed without reading the data, so nothing is spent."""
    import warnings

    from dpopt.data import Problem
    from dpopt.solvers import Checkpoints, make_result

    reason = (f"n_samples={n} is too few to locate the range of the target privately at "
              f"epsilon={epsilon:g} (even {MAX_SHARE:.0%} of the budget cannot resolve its "
              f"histogram): the model is the constant 0 and nothing was spent; use a larger "
              f"epsilon, or scale y with public bounds and pass an explicit solver")
    warnings.warn(reason, UserWarning, stacklevel=4)
    problem = Problem(np.zeros((1, p)), np.zeros(1), loss=loss, penalty=penalty,
                      fit_intercept=fit_intercept, **penalty_kwargs)
    plan = {"solver": "none", "reason": reason, "mu": 0.0, "mu_shares": {}, "unlearnable": True,
            "scaling": "none", "row_bound": None, "model_options": {}}
    result = make_result(problem, np.zeros(p + fit_intercept), solver="none",
                         calibration_or_spent=(0.0, delta, "none", 0.0), mechanisms=[],
                         n_iter=0, passes=0.0, checkpoints=Checkpoints(), params={"auto": plan})
    return AutoFit(result, RowNormalization(), None, plan)


def _model_options(solver, problem, mu, R, penalty_kwargs):
    alpha = float(penalty_kwargs.get("alpha", 0.0) or 0.0)
    if solver == "adassp":
        return {"row_bound": R, "target_bound": 1.0}
    if solver == "objective-perturbation":
        return {"row_bound": R}
    threshold = problem.loss.param if problem.loss.name == "huber" else 1.0
    return rules(solver, loss=problem.loss.name, n=problem.n_samples, dim=problem.dim, mu=mu,
                 row_bound=R, alpha=alpha, huber_threshold=threshold)


def _public(options):
    return {k: (v.tolist() if isinstance(v, np.ndarray) and v.size <= 8 else
                f"array({v.shape[0]})" if isinstance(v, np.ndarray) else v)
            for k, v in options.items()}
