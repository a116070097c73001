"""Heavy-tailed family: the localized noisy clipped subgradient method (ht-subgradient)."""

from __future__ import annotations

import math

import numpy as np

from dpopt._core.validation import check_choice, check_positive_int
from dpopt.kernels.heavy import subgradient_steps
from dpopt.privacy import (
    ZCDP,
    Gaussian,
)
from dpopt.privacy.mechanisms import gaussian_noise
from dpopt.solvers._base import (
    Checkpoints,
    Option,
    one_of,
    positive,
    positive_int,
    register_solver,
)
from dpopt.solvers.heavy_tailed._shared import (
    GradientOracle,
    _common,
    project_two_balls,
    read_records,
)
from dpopt.solvers.heavy_tailed.one_pass import (
    _finish,
)
from dpopt.solvers.heavy_tailed.options import (
    _BUDGET_OPTIONS,
    _MOMENT_OPTIONS,
    _QUANTILE_OPTIONS,
)

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
                 audit_canary={"n_samples": 2},
                 mechanism="Gaussian noise on clipped full-batch means, T_i steps per phase on a disjoint "
                           "phase batch of n_i records",
                 sensitivity="2 C_i / n_i per step")
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
    c = _common(problem, "ht-subgradient", {**locals(), "model": "central", "oracle": "l2",
                                               "groups": None})
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
