"""Heavy-tailed family: the one-pass solvers ht-acsa, ht-sgd and ht-proxsgd."""

from __future__ import annotations

import math

import numpy as np

from dpopt._core.validation import check_scalar
from dpopt.solvers._base import (
    Checkpoints,
    Option,
    make_result,
    register_solver,
)
from dpopt.solvers._common import global_smoothness
from dpopt.solvers.heavy_tailed._shared import (
    _batch_plan,
    _check_iters,
    _clamp_iters,
    _common,
    prox_ball,
    read_records,
    resolve_mu,
)
from dpopt.solvers.heavy_tailed.options import (
    _ONE_PASS_AUDIT,
    _ONE_PASS_OPTIONS,
    _STRONG_CONVEXITY,
    _TAIL_OPTIONS,
)
from dpopt.solvers.heavy_tailed.rules import (
    acsa_iterations,
    clip_fraction,
    one_pass_clip,
    proxsgd_iterations,
    sgd_iterations,
    stich_schedule,
)

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


def _with_common_doc(func):
    func.__doc__ = (func.__doc__ or "") + _COMMON_DOC
    return func


#: What every one-pass method releases (the oracle's Gaussian on a clipped batch mean).
_ONE_PASS_RELEASE = {"mechanism": "Gaussian noise on the clipped mean of a disjoint batch per "
                                  "step (each record used once: parallel composition)",
                     "sensitivity": "2 C / s for a batch of s"}


@_with_common_doc
@register_solver("ht-acsa", description="noisy clipped accelerated SGD (AC-SA), one pass, "
                 "heavy-tailed gradients (Lowy & Razaviyayn, Alg. 2)", family="heavy-tailed",
                 options=(*_ONE_PASS_OPTIONS, *_TAIL_OPTIONS), run_length="n_iter",
                 audit=_ONE_PASS_AUDIT,
                 **_ONE_PASS_RELEASE)
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
    c = _common(problem, "ht-acsa", locals())
    beta = global_smoothness(problem, smoothness)
    n_iter, D = _check_iters(n_iter), 2.0 * c.radius
    eps = c.eps_z
    if n_iter is None:
        known = c.clip_mode == "theory" and math.isfinite(D)
        a = beta * D / c.r if known else 1.0
        n_iter = _clamp_iters(acsa_iterations(c.n_opt, c.dim, eps, c.k, a), c.n_opt, 1,
                              "ht-acsa")
    T, s, batches, clip_value, q, orc = _one_pass_setup(c, rng, n_iter, batch_size,
                                                        prox=False)
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


def _one_pass_setup(c, rng, n_iter, batch_size, *, prox):
    """The set-up the one-pass solvers share, in their order of random draws: the batch
    plan, the split into quantile and optimisation rows, the T disjoint batches, the
    clipping threshold (given or privately estimated) and the mean oracle.
    Returns ``(T, s, batches, clip_value, q, oracle)``."""
    T, s = _batch_plan(c, n_iter, batch_size, c.n_opt)
    rows_q, rows_opt = c.split(rng)
    batches = c.batches(rows_opt, T, s)
    q = c.clip_quantile and 1.0 - c.clip_quantile
    clip_value, q = _resolve_clip(c, rng, rows_q, rows_opt, T, s, q, prox=prox)
    return T, s, batches, clip_value, q, c.make_oracle(clip_value, s)


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
                 audit={**_ONE_PASS_AUDIT, "strong_convexity": 1.0},
                 **_ONE_PASS_RELEASE)
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
    c = _common(problem, "ht-sgd", locals())
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
    T, s, batches, clip_value, q, orc = _one_pass_setup(c, rng, n_iter, batch_size,
                                                        prox=False)
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
                 audit={**_ONE_PASS_AUDIT, "strong_convexity": 1.0},
                 **_ONE_PASS_RELEASE)
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
    c = _common(problem, "ht-proxsgd", locals())
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
    T, s, batches, clip_value, q, orc = _one_pass_setup(c, rng, n_iter, batch_size,
                                                        prox=True)
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


