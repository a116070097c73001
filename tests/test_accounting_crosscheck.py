"""Accounting cross-checks: the epsilon each solver reports equals an independent computation.

Independent paths (tests/_independent_accounting.py, which never calls dpopt.privacy):
dp-accounting's analytic Gaussian mechanism and PLD/RDP accountants driven with
hand-built DpEvents, a numerical minimisation of the DP-CD paper's eq. (16)-(18),
numerical integration of the Gaussian hockey-stick divergence, and privacy-loss
distributions of the Poisson-subsampled Gaussian computed from scratch with
numpy (losses rounded down / up give a lower / upper bracket).

Every registered private solver needs an entry in ``EXPECTED`` (a grid of
options and the composition its docstring promises); a test fails otherwise.
A generic test also checks every solver's reported epsilon against an
optimistic (lower) reference built from the mechanisms it recorded: a solver
can never report less than its recorded composition really costs.
"""

import math
import warnings

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pldlib
from dp_accounting.rdp import rdp_privacy_accountant as rdp_mod
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpopt
from _independent_accounting import (
    dpa_pld_compose,
    dpa_pld_poisson_epsilon,
    dpa_rdp_poisson_epsilon,
    eq18_epsilon_numeric,
    gaussian_epsilon,
    hand_pld_epsilon_bracket,
    hockey_stick_gaussian,
    op_epsilon_quad,
    pure_and_gaussian_epsilon,
    zcdp_epsilon_continuous,
)
from _timeouts import time_limit
from dpopt import privacy
from dpopt.privacy import (
    ZCDP,
    Gaussian,
    Laplace,
    ObjectivePerturbation,
    PureDP,
    SubsampledGaussian,
    gdp_delta,
    gdp_epsilon,
)

PRIVATE = dpopt.available_solvers(private_only=True)


def tiny_problem(n=40, p=3, seed=0, name=None):
    """Ridge regression, or plain least squares for solvers without penalties (dp-accmd);
    the Huber loss for solvers without the squared loss (objective-perturbation)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X @ rng.standard_normal(p) + 0.1 * rng.standard_normal(n)
    penalties = dpopt.get_solver(name).penalties if name else None
    losses = dpopt.get_solver(name).losses if name else None
    loss = "squared" if losses is None or "squared" in losses else "huber"
    if penalties is not None and "l2" not in penalties:
        return dpopt.Problem(X, y, loss)
    return dpopt.Problem(X, y, loss, "l2", alpha=0.1)


# ---------------------------------------------------------------------------
# per-solver expectations: the composition each solver's docstring promises


def _dp_cd(problem, o, res, eps_target):
    steps = o["passes"] * problem.dim  # N = passes * p coordinate steps
    z, d = res.noise_multiplier, res.delta
    acc = o.get("accountant", "exact")
    if acc == "exact":
        v = gaussian_epsilon(z, steps, d)
        return v - 1e-8 * max(1, v), v + 1e-8 * max(1, v)
    if acc == "paper":
        assert z == pytest.approx(math.sqrt(3 * steps * math.log(1 / d)) / eps_target, rel=1e-12)
    v = eq18_epsilon_numeric(z, steps, d)  # "rdp" and "paper" report eq. (18) at z
    return v * (1 - 1e-7), v * (1 + 1e-7)


def _dp_gd(problem, o, res, eps_target):
    v = gaussian_epsilon(res.noise_multiplier, o["passes"], res.delta)  # one mechanism per step
    return v - 1e-8 * max(1, v), v + 1e-8 * max(1, v)


def _dp_sgd(problem, o, res, eps_target):
    n, b = problem.n_samples, o["batch_size"]
    q, steps = b / n, o["passes"] * max(1, round(n / b))
    z, d, adj = res.noise_multiplier, res.delta, o.get("adjacency", "replace-one")
    if o.get("accountant", "pld") == "rdp":
        # dpopt uses its own (denser) order grid: it may only be tighter than the default one,
        # and never below the tight PLD value
        lo = hand_pld_epsilon_bracket(z, q, steps, d, adj)[0]
        return lo - 1e-6, dpa_rdp_poisson_epsilon(z, q, steps, d) + 1e-9
    lo, hi = hand_pld_epsilon_bracket(z, q, steps, d, adj)
    if adj == "add-remove":  # dp-accounting's PLDAccountant on events: a second path
        hi = max(hi, dpa_pld_poisson_epsilon(z, q, steps, d, adj))
    return lo - 1e-6, hi + 1e-3


def _dp_rbcd(problem, o, res, eps_target):
    p = problem.dim
    sampling = o.get("sampling", "uniform")
    expected_size = {"uniform": 1.0, "importance": 1.0, "importance-sqrt": 1.0,
                     "full": float(p)}.get(sampling, o.get("block_size"))
    steps = math.ceil(o["passes"] * p / expected_size - 1e-9)  # N = ceil(passes p / E|S|)
    z, d = res.noise_multiplier, res.delta
    acc = o.get("accountant", "exact")
    if acc in ("rdp", "paper"):
        v = eq18_epsilon_numeric(z, steps, d)
        return v * (1 - 1e-7), v * (1 + 1e-7)
    v = gaussian_epsilon(z, steps, d)
    return (v - 1e-8 * max(1, v), v + 1e-8 * max(1, v)) if acc == "exact" else \
        (v - 1e-9, v + 2e-3)  # "pld": a pessimistic upper bound of the exact value


def _heavy_tailed(problem, o, res, eps_target):
    """One oracle call per record (disjoint batches: parallel composition), noise multiplier
    z = 1 / sqrt(2 rho); ht-subgradient: T_i calls per record in its phase, each with
    multiplier sqrt(T_i / (2 rho)). Checks the noise the solver reports against the
    mechanism's sensitivity 2C/s, then converts rho independently."""
    z, d, prm = res.noise_multiplier, res.delta, res.params
    if "phase_iters" in prm:
        rho = prm["phase_iters"][0] / (2 * z * z)
        for T_i, C_i, n_i, s_i in zip(prm["phase_iters"], prm["clips"], prm["phase_sizes"],
                                      prm["sigmas"]):
            assert T_i * (2 * C_i / n_i) ** 2 / (2 * s_i ** 2) <= rho * (1 + 1e-9)
    else:
        rho = 1 / (2 * z * z)
        assert prm["sigma"] == pytest.approx(2 * prm["clip"] / prm["batch_size"] * z, rel=1e-12)
    assert prm["rho"] == pytest.approx(rho, rel=1e-9)
    if res.accountant == "exact":  # rho-zCDP Gaussian = sqrt(2 rho)-GDP
        v = float(dpa.get_epsilon_gaussian(1 / math.sqrt(2 * rho), d))
        return v - 1e-8 * max(1, v), v + 1e-8 * max(1, v)
    v = zcdp_epsilon_continuous(rho, d)  # dpopt's grid of orders may only give more
    return v - 1e-9, v * (1 + 2e-3)


def _dp_gcd(problem, o, res, eps_target):
    """T selections and T Gaussian(z) updates; epsilon' = (2 / z) sqrt(s / (1 - s)) with s
    the selection share; the exponential mechanism is (epsilon'^2 / 8)-zCDP (bounded
    range), Laplace report-noisy-max epsilon'-DP ((epsilon'^2 / 2)-zCDP)."""
    T, z, d = o["passes"], res.noise_multiplier, res.delta
    share = o.get("selection_share", 0.5)
    eps_sel = res.params["epsilon_selection"]
    assert eps_sel == pytest.approx(2 / z * math.sqrt(share / (1 - share)), rel=1e-9)
    if res.accountant == "rdp":
        per = eps_sel ** 2 / 8 if o.get("selection", "exponential") == "exponential" \
            else eps_sel ** 2 / 2
        v = zcdp_epsilon_continuous(T * (per + 1 / (2 * z * z)), d)
        return v - 1e-9, v * (1 + 2e-3)
    exact = pure_and_gaussian_epsilon(eps_sel, T, math.sqrt(T) / z, d)
    return exact - 1e-6, max(exact, dpa_pld_compose([("pure", eps_sel, T), ("gaussian", z, T)],
                                                    d)) + 2e-3


def _dp_svrg(problem, o, res, eps_target):
    """Docstring analysis: z = sigma / (4C); K inner steps each release a Poisson-sampled sum
    of sensitivity 4C plus the un-noised full-gradient term of sensitivity 2Cq, the noise
    split rho / 1 - rho: SubsampledGaussian(z sqrt(1 - rho), q, K) + Gaussian(2 z sqrt(rho) / q,
    K)."""
    n, b, E = problem.n_samples, o["batch_size"], o["epochs"]
    m = o["epoch_length"]
    K = E * m if res.solver == "dp-svrg" else sum(m * 2 ** s for s in range(1, E + 1))
    q, z, rho, d = b / n, res.noise_multiplier, res.params["noise_split"], res.delta
    assert res.params["inner_steps"] == K
    assert res.params["sigma"] == pytest.approx(4 * o.get("clip", 1.0) * z, rel=1e-12)
    # dp-accounting's replace-one multiplier is sigma / C (record norm C): 2 z sqrt(1 - rho)
    parts = [("poisson", 2 * z * math.sqrt(1 - rho), q, K, "replace-one"),
             ("gaussian", 2 * z * math.sqrt(rho) / q, K)]
    return (dpa_pld_compose(parts, d, pessimistic=False) - 1e-6,
            dpa_pld_compose(parts, d) + 2e-3)


def _dp_accmd(problem, o, res, eps_target):
    v = gaussian_epsilon(res.noise_multiplier, o["iterations"], res.delta)
    return v - 1e-8 * max(1, v), v + 1e-8 * max(1, v)


def _adassp(problem, o, res, eps_target):
    """Three Gaussian releases (eigenvalue, upper triangle of X^T X, X^T y) with replace-one
    sensitivities B^2, sqrt(2) B^2, 2 B B_y (no intercept; with one: B^2 + 1,
    sqrt(2 B^4 + 2 B^2 + 1/2), 2 sqrt(B^2 + 1) B_y) and multipliers z_k = z / sqrt(s_k),
    s the normalised budget_split (the eigenvalue release absent when s_1 = 0): exactly
    mu-GDP with mu^2 = sum_k 1 / z_k^2."""
    B, By = o["row_bound"], o["target_bound"]
    split = np.asarray(o.get("budget_split", (0.1, 0.45, 0.45)), dtype=float)
    split = split / split.sum()
    if problem.fit_intercept:
        sens = (B * B + 1, math.sqrt(2 * B ** 4 + 2 * B * B + 0.5), 2 * math.sqrt(B * B + 1) * By)
    else:
        sens = (B * B, math.sqrt(2) * B * B, 2 * B * By)
    z = res.noise_multiplier
    inv_sq = 0.0
    for s, D, zk, sigma in zip(split, sens, res.params["noise_multipliers"], res.params["sigmas"]):
        if s == 0:
            assert math.isinf(zk) and math.isinf(sigma)
            continue
        assert zk == pytest.approx(z / math.sqrt(s), rel=1e-12)
        assert sigma == pytest.approx(zk * D, rel=1e-12)
        inv_sq += 1 / zk ** 2
    assert len(res.mechanisms) == int(np.count_nonzero(split))
    v = gaussian_epsilon(1 / math.sqrt(inv_sq), 1, res.delta)
    return v - 1e-8 * max(1, v), v + 1e-8 * max(1, v)


def _dp_frank_wolfe(problem, o, res, eps_target):
    """T exponential-mechanism selections (no intercept here), each eps_sel-DP with Gumbel
    scale 2 Delta_s / eps_sel, Delta_s = 2 r c U / n, U = min(clip, c r + t); (eps_sel^2 / 8)-zCDP
    as a bounded-range mechanism (rdp) or eps_sel-DP (pld, exact randomized-response
    composition)."""
    T, d, r = o["passes"], res.delta, o["radius"]
    c, t, clip = o["coordinate_bound"], o["target_bound"], o.get("clip", 1.0)
    eps_sel = res.params["epsilon_selection"]
    assert res.noise_multiplier == pytest.approx(2 / eps_sel, rel=1e-12)
    U = c * r + t if clip is None else min(clip, c * r + t)
    sens = 2 * r * c * U / problem.n_samples
    assert res.params["selection_scale"] == pytest.approx(2 * sens / eps_sel, rel=1e-12)
    if res.accountant == "rdp":
        v = zcdp_epsilon_continuous(T * eps_sel ** 2 / 8, d)
        return v - 1e-9, v * (1 + 2e-3)
    exact = pure_and_gaussian_epsilon(eps_sel, T, 0.0, d)
    return exact - 1e-6, max(exact, dpa_pld_compose([("pure", eps_sel, T)], d)) + 2e-3


def _objective_perturbation(problem, o, res, eps_target):
    """[ObjectivePerturbation(z, shift, 2), Gaussian(z_out)]: shift = log(1 + kappa),
    kappa = beta (B^2 / (lambda + alpha) + [intercept] / lambda) / n; sigma = 2 z L B_aug
    (replace-one); z_out = 10 / mu(eps, delta), sigma_out = 2 tolerance z_out.
    The epsilon is recomputed by quadrature of the dominating loss (+ the Gaussian)."""
    prm, n, d = res.params, problem.n_samples, res.delta
    replace_one, dof = True, 2  # the solver's guarantee is replace-one only
    L, beta, B, lam = 1.0, 1.0, prm["row_bound"], prm["regularization"]  # Huber, t = 1
    alpha = problem.penalty.alpha
    kappa = beta * (B * B / (lam + alpha) + (1 / lam if problem.fit_intercept else 0)) / n
    assert prm["shift"] == pytest.approx(math.log1p(kappa), rel=1e-12)
    b_aug = math.sqrt(B * B + problem.fit_intercept)
    z = res.noise_multiplier
    assert prm["sigma"] == pytest.approx(z * L * b_aug * (2 if replace_one else 1), rel=1e-12)
    mu = 1 / float(dpa.get_sigma_gaussian(eps_target, d))  # analytic Gaussian: sigma(eps, d)
    assert prm["z_out"] == pytest.approx(10 / mu, rel=1e-6)
    assert prm["sigma_out"] == pytest.approx(2 * prm["tolerance"] * prm["z_out"], rel=1e-12)
    assert [type(m).__name__ for m in res.mechanisms] == ["ObjectivePerturbation", "Gaussian"]
    assert res.mechanisms[0].dof == dof and res.mechanisms[0].shift == prm["shift"]
    v = op_epsilon_quad(z, prm["shift"], dof, d, prm["z_out"])
    return v - 1e-7, v * (1 + 1e-3) + 1e-7  # the certified Riemann sum is a slight overestimate


#: name -> (grid of (epsilon, delta, options), expectation(problem, options, result, eps))
EXPECTED = {
    "dp-cd": ([
        (0.3, 1e-8, {"passes": 1}),
        (1.0, 1e-5, {"passes": 7}),
        (8.0, 1e-3, {"passes": 3}),
        (1.0, 1e-6, {"passes": 5, "accountant": "rdp"}),
        (5.0, 1e-3, {"passes": 2, "accountant": "rdp"}),
        (0.5, 1e-5, {"passes": 4, "accountant": "paper"}),
    ], _dp_cd),
    "dp-gd": ([
        (0.3, 1e-8, {"passes": 1}),
        (1.0, 1e-5, {"passes": 25}),
        (8.0, 1e-3, {"passes": 3, "clipping": "coordinate"}),
    ], _dp_gd),
    "dp-sgd": ([
        (1.0, 1e-5, {"passes": 2, "batch_size": 4}),             # q = 0.1, T = 20
        pytest.param(1.5, 1e-3, {"passes": 1, "batch_size": 12},   # q = 0.3, T = 3
                     marks=pytest.mark.slow),
        (0.5, 1e-7, {"passes": 1, "batch_size": 40}),            # q = 1,   T = 1
        (2.0, 1e-6, {"passes": 3, "batch_size": 8, "adjacency": "add-remove"}),
        pytest.param(2.0, 1e-5, {"passes": 2, "batch_size": 8, "adjacency": "add-remove",
                                 "accountant": "rdp"}, marks=pytest.mark.slow),
    ], _dp_sgd),
    "dp-rbcd": ([
        (1.0, 1e-5, {"passes": 3}),
        (3.0, 1e-7, {"passes": 4, "sampling": "nice", "block_size": 2, "accountant": "rdp"}),
        (0.7, 1e-6, {"passes": 2, "sampling": "bernoulli", "block_size": 1.5,
                     "accountant": "paper"}),
        (2.0, 1e-3, {"passes": 5, "sampling": "full", "accountant": "pld"}),
    ], _dp_rbcd),
    "dp-gcd": ([
        (1.0, 1e-5, {"passes": 5}),
        (3.0, 1e-7, {"passes": 8, "accountant": "pld"}),
        (0.5, 1e-6, {"passes": 4, "selection": "laplace", "accountant": "rdp",
                     "selection_share": 0.3}),
    ], _dp_gcd),
    "dp-svrg": ([
        (1.0, 1e-5, {"epochs": 2, "epoch_length": 3, "batch_size": 8}),
        pytest.param(3.0, 1e-3, {"epochs": 1, "epoch_length": 4, "batch_size": 20,
                                 "noise_split": 0.2}, marks=pytest.mark.slow),
    ], _dp_svrg),
    "dp-svrg++": ([
        (1.0, 1e-6, {"epochs": 2, "epoch_length": 2, "batch_size": 8}),
    ], _dp_svrg),
    "dp-accmd": ([
        (1.0, 1e-5, {"iterations": 7, "constraint": "l2", "radius": 5.0}),
        (4.0, 1e-8, {"iterations": 3, "constraint": "l1", "radius": 2.0}),
    ], _dp_accmd),
    "ht-acsa": ([
        (1.0, 1e-5, {"clip": 1.0, "n_iter": 4}),
        (3.0, 1e-8, {"clip": 2.0, "n_iter": 1, "accountant": "exact"}),
    ], _heavy_tailed),
    "ht-sgd": ([
        (0.5, 1e-6, {"clip": 1.0, "n_iter": 3, "batch_size": 10, "strong_convexity": 1.0}),
    ], _heavy_tailed),
    "ht-proxsgd": ([
        (2.0, 1e-3, {"clip": 0.5, "n_iter": 2, "strong_convexity": 1.0, "accountant": "exact"}),
    ], _heavy_tailed),
    "ht-subgradient": ([
        (1.0, 1e-5, {"clip": 1.0, "radius": 10.0, "moment_bound": 1.0, "max_phase_iter": 5}),
        (4.0, 1e-6, {"clip": 1.0, "radius": 10.0, "moment_bound": 1.0, "max_phase_iter": 3,
                     "accountant": "exact"}),
    ], _heavy_tailed),
    "adassp": ([
        (1.0, 1e-5, {"row_bound": 2.0, "target_bound": 3.0}),
        (0.3, 1e-8, {"row_bound": 1.0, "target_bound": 1.0, "budget_split": (0.2, 0.3, 0.5)}),
        (4.0, 1e-3, {"row_bound": 5.0, "target_bound": 0.5, "budget_split": (0, 1, 1)}),
    ], _adassp),
    "dp-frank-wolfe": ([
        (1.0, 1e-5, {"passes": 5, "radius": 1.0, "coordinate_bound": 3.0, "target_bound": 5.0}),
        (3.0, 1e-7, {"passes": 2, "radius": 2.0, "coordinate_bound": 1.0, "target_bound": 1.0,
                     "clip": None, "accountant": "pld"}),
        (0.5, 1e-6, {"passes": 40, "radius": 0.5, "coordinate_bound": 2.0, "target_bound": 3.0,
                     "clip": 2.5, "accountant": "rdp"}),
    ], _dp_frank_wolfe),
    "objective-perturbation": ([
        (1.0, 1e-5, {"row_bound": 2.0}),
        (0.5, 1e-8, {"row_bound": 3.0}),
        (4.0, 1e-6, {"row_bound": 1.0, "regularization": 0.5, "tolerance": 1e-4}),
    ], _objective_perturbation),
}

PUBLIC_SMOOTHNESS = {"dp-cd": lambda pb: np.ones(pb.dim), "dp-gd": lambda pb: 1.0,
                     "dp-sgd": lambda pb: 1.0, "dp-rbcd": lambda pb: np.ones(pb.dim),
                     "dp-gcd": lambda pb: np.ones(pb.dim), "dp-svrg": lambda pb: 1.0,
                     "dp-svrg++": lambda pb: 1.0, "dp-accmd": lambda pb: 1.0,
                     "ht-acsa": lambda pb: 1.0, "ht-sgd": lambda pb: 1.0,
                     "ht-proxsgd": lambda pb: 1.0}


def test_every_private_solver_has_an_expected_composition():
    missing = [s for s in PRIVATE if s not in EXPECTED]
    assert not missing, f"add an EXPECTED entry (grid + composition) for {missing}"


def _cases():
    for name in EXPECTED:
        if name not in PRIVATE:
            continue
        for case in EXPECTED[name][0]:
            values, marks = (case.values, case.marks) if hasattr(case, "marks") else (case, ())
            yield pytest.param(name, *values, marks=marks, id=f"{name}-{values[0]}-{values[1]}")


CASES = list(_cases())


@pytest.mark.parametrize("name, eps, delta, opts", CASES)
def test_reported_epsilon_matches_an_independent_computation(name, eps, delta, opts):
    pb = tiny_problem(name=name)
    extra = {}
    if "smoothness" in dpopt.get_solver(name).options() and name in PUBLIC_SMOOTHNESS:
        extra["smoothness"] = PUBLIC_SMOOTHNESS[name](pb)
    if opts.get("clipping") == "coordinate":
        extra["smoothness"] = np.ones(pb.dim)
        extra["step_rule"] = "eso"
    res = dpopt.solve(pb, name, epsilon=eps, delta=delta, random_state=0, **opts, **extra)
    lo, hi = EXPECTED[name][1](pb, opts, res, eps)
    assert res.epsilon <= eps * (1 + 1e-12), "the solver spent more than its budget"
    assert lo <= res.epsilon <= hi, (res.privacy_report(), lo, hi)
    assert res.delta == delta and res.noise_multiplier > 0


# ---------------------------------------------------------------------------
# generic: every private solver's report vs an optimistic reference of its composition


def optimistic_epsilon(mechanisms, delta, adjacency):
    """A lower reference for the epsilon of ``mechanisms``: exact GDP for Gaussians,
    otherwise dp-accounting PLDs with optimistic (rounded-down) discretisation.
    ``None`` when no lower reference exists here (sampling without replacement)."""
    if all(isinstance(m, Gaussian) for m in mechanisms):
        mu = math.sqrt(sum(m.count / m.noise_multiplier ** 2 for m in mechanisms))
        return float(dpa.get_epsilon_gaussian(1 / mu, delta))
    ops = [m for m in mechanisms if isinstance(m, ObjectivePerturbation)]
    if ops:  # one objective perturbation + Gaussians: quadrature of the dominating loss
        if len(ops) > 1 or ops[0].count != 1 or \
                not all(isinstance(m, (Gaussian, ObjectivePerturbation)) for m in mechanisms):
            return None
        mu = math.sqrt(sum(m.count / m.noise_multiplier ** 2 for m in mechanisms
                           if isinstance(m, Gaussian)))
        return op_epsilon_quad(ops[0].noise_multiplier, ops[0].shift, ops[0].dof, delta,
                               1 / mu if mu > 0 else math.inf)
    pure = [m for m in mechanisms if isinstance(m, PureDP)]
    if pure and len({m.epsilon for m in pure}) == 1 and \
            all(isinstance(m, (Gaussian, PureDP)) for m in mechanisms):
        mu = math.sqrt(sum(m.count / m.noise_multiplier ** 2 for m in mechanisms
                           if isinstance(m, Gaussian)))
        return pure_and_gaussian_epsilon(pure[0].epsilon, sum(m.count for m in pure), mu, delta)
    total = None
    for m in mechanisms:
        kw = {"pessimistic_estimate": False, "value_discretization_interval": 1e-4}
        if isinstance(m, (Gaussian, ZCDP)):
            z = m.noise_multiplier if isinstance(m, Gaussian) else 1 / math.sqrt(2 * m.rho)
            pld = pldlib.from_gaussian_mechanism(z / math.sqrt(m.count), **kw)
        elif isinstance(m, SubsampledGaussian):
            if m.sampling != "poisson":
                return None
            rel = (dpa.NeighboringRelation.REPLACE_ONE if adjacency == "replace-one"
                   else dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
            z = 2 * m.noise_multiplier if adjacency == "replace-one" else m.noise_multiplier
            pld = pldlib.from_gaussian_mechanism(z, sampling_prob=m.sampling_rate,
                                                 neighboring_relation=rel, **kw
                                                 ).self_compose(m.count)
        elif isinstance(m, Laplace):
            pld = pldlib.from_laplace_mechanism(m.noise_multiplier, **kw).self_compose(m.count)
        else:
            pld = pldlib.from_privacy_parameters(
                dpa.pld.common.DifferentialPrivacyParameters(m.epsilon, 0.0),
                value_discretization_interval=1e-4).self_compose(m.count)
        total = pld if total is None else total.compose(pld)
    return float(total.get_epsilon_for_delta(delta))


@pytest.mark.parametrize("name", PRIVATE)
def test_every_solver_reports_at_least_what_its_composition_costs(name):
    pb = tiny_problem(name=name)
    spec = dpopt.get_solver(name)
    # the first grid options of EXPECTED (some solvers need options, e.g. ht-subgradient's radius)
    opts = EXPECTED[name][0][0][2] if name in EXPECTED else \
        {k: v for k, v in {"passes": 2}.items() if k in spec.options()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # e.g. iteration counts clamped to n
        warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
        res = dpopt.solve(pb, name, epsilon=1.5, delta=1e-6, random_state=0, **opts)
    assert res.epsilon <= 1.5 * (1 + 1e-12) and res.delta == 1e-6
    assert res.adjacency in privacy.ADJACENCIES and res.accountant not in ("", "none")
    assert res.mechanisms, "the FitResult must record the composition it accounted"
    # the recorded composition certifies the report (dpopt's own accountant) ...
    assert privacy.epsilon_of(res.mechanisms, res.delta, adjacency=res.adjacency) \
        <= res.epsilon + 1e-9
    # ... and the report is not below an optimistic independent reference
    lower = optimistic_epsilon(res.mechanisms, res.delta, res.adjacency)
    if lower is not None:
        assert res.epsilon >= lower - 1e-6, (res.privacy_report(), lower)


# ---------------------------------------------------------------------------
# golden tests of dpopt.privacy


@pytest.mark.parametrize("sigma, eps", [(1.0, 0.5), (3.0, 0.1), (0.5, 3.0), (10.0, 0.05),
                                        (0.8, 1.0)])
def test_gdp_profile_is_the_analytic_gaussian_mechanism(sigma, eps):
    """Balle & Wang 2018: delta(eps) of N(0, s^2) vs N(1, s^2) by numerical integration of
    the hockey-stick divergence, against dpopt's closed form with mu = 1 / sigma."""
    assert gdp_delta(1 / sigma, eps) == pytest.approx(hockey_stick_gaussian(1.0, sigma, eps),
                                                      rel=1e-7, abs=1e-14)


@pytest.mark.parametrize("mu, delta", [(0.3, 1e-5), (1.0, 1e-6), (4.0, 1e-9), (12.0, 1e-3)])
def test_gdp_epsilon_inverts_the_profile_and_matches_dp_accounting(mu, delta):
    eps = gdp_epsilon(mu, delta)
    assert gdp_delta(mu, eps) <= delta
    assert gdp_delta(mu, eps * (1 - 1e-6)) > delta  # smallest such epsilon
    assert eps == pytest.approx(dpa.get_epsilon_gaussian(1 / mu, delta), rel=1e-8)


@settings(max_examples=30, deadline=None)
@given(z=st.floats(0.5, 500), steps=st.integers(1, 20_000), log_delta=st.floats(-12, -1))
def test_eq18_closed_form_and_inverse(z, steps, log_delta):
    d = 10.0 ** log_delta
    eps = privacy.rdp_gaussian_epsilon(z, steps, d)
    assert eps == pytest.approx(eq18_epsilon_numeric(z, steps, d), rel=1e-7)
    # an upper bound: never below the exact (GDP) epsilon of the same composition
    assert eps >= gaussian_epsilon(z, steps, d) * (1 - 1e-9)
    z_back = privacy.rdp_gaussian_noise(eps, d, steps)
    assert z_back == pytest.approx(z, rel=1e-9)
    assert privacy.rdp_gaussian_epsilon(z_back, steps, d) <= eps


# TF-Privacy's MNIST tutorial table (github.com/tensorflow/privacy, tutorials/README.md,
# "Select Parameters"): n = 60000, batch 256, delta = 1e-5, steps = epochs * (60000 // 256),
# classic RDP accountant with orders 1.1..10.9 (step 0.1) and 12..63.
TF_PRIVACY_TABLE = [(1.12, 60, 2.92), (0.6, 30, 9.74), (1.2, 10, 1.20)]


@pytest.mark.parametrize("z, epochs, published", TF_PRIVACY_TABLE)
def test_published_dp_sgd_values(z, epochs, published):
    """The classic computation reproduces the table; dpopt's RDP (improved conversion) and
    PLD accountants certify no more, and agree with dp-accounting used directly."""
    q, steps = 256 / 60000, epochs * (60000 // 256)
    orders = np.array([1 + x / 10 for x in range(1, 100)] + list(range(12, 64)))
    curve = steps * rdp_mod._compute_rdp_poisson_subsampled_gaussian(q, z, orders)
    classic = float(np.min(curve - math.log(1e-5) / (orders - 1)))  # Mironov 2017, Prop. 3
    assert classic == pytest.approx(published, abs=0.015)
    mech = [SubsampledGaussian(z, q, steps)]
    ours_rdp = privacy.epsilon_of(mech, 1e-5, adjacency="add-remove", accountant="rdp")
    # the improved RDP conversion (and the PLD, checked on the cheapest row) only tighten it
    assert ours_rdp <= published + 0.005
    if steps < 5000:
        assert privacy.epsilon_of(mech, 1e-5, adjacency="add-remove", accountant="pld") < ours_rdp
    assert ours_rdp == pytest.approx(dpa_rdp_poisson_epsilon(z, q, steps, 1e-5), rel=0.02)


@pytest.mark.parametrize("z, q, steps, delta, adjacency", [
    (1.0, 0.1, 20, 1e-5, "replace-one"),
    (0.8, 0.3, 10, 1e-3, "replace-one"),
    (1.0, 0.5, 6, 1e-5, "add-remove"),
])
def test_pld_subsampled_gaussian_within_a_hand_computed_bracket(z, q, steps, delta, adjacency):
    ours = privacy.epsilon_of([SubsampledGaussian(z, q, steps)], delta, adjacency=adjacency,
                              accountant="pld")
    lo, hi = hand_pld_epsilon_bracket(z, q, steps, delta, adjacency)
    assert lo - 1e-6 <= ours <= hi + 1e-4


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(eps=st.floats(0.05, 30), log_delta=st.floats(-12, -1.5), steps=st.integers(1, 3000),
       accountant=st.sampled_from(["exact", "rdp", "exact", "rdp", "pld", "paper"]))
def test_gaussian_calibration_never_overshoots_any_accountant(eps, log_delta, steps, accountant):
    d = 10.0 ** log_delta
    if accountant == "paper":
        eps, d = min(eps, 1.0), min(d, 0.3)
    cal = privacy.calibrate_gaussian(eps, d, steps, accountant=accountant)
    assert cal.epsilon <= eps
    independent = (eq18_epsilon_numeric(cal.noise_multiplier, steps, d)
                   if accountant in ("rdp", "paper")
                   else gaussian_epsilon(cal.noise_multiplier, steps, d))
    assert independent <= eps * (1 + 1e-7)
    if accountant in ("exact", "rdp"):  # and the calibration is tight
        assert independent >= eps * (1 - 1e-3)


@settings(max_examples=2, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(eps=st.floats(0.5, 5), q=st.floats(0.05, 0.5), steps=st.integers(2, 10),
       adjacency=st.sampled_from(["replace-one", "add-remove"]))
def test_subsampled_calibration_never_overshoots_independent_check(eps, q, steps, adjacency):
    cal = privacy.calibrate(lambda z: [SubsampledGaussian(z, q, steps)], eps, 1e-6,
                            adjacency=adjacency)
    assert cal.epsilon <= eps
    assert dpa_pld_poisson_epsilon(cal.noise_multiplier, q, steps, 1e-6, adjacency) \
        <= eps + 2e-3  # dp-accounting's default grid is coarser than dpopt's final one


@settings(max_examples=2, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(z=st.floats(1.0, 5), q=st.floats(0.01, 0.5), steps=st.integers(1, 10),
       adjacency=st.sampled_from(["replace-one", "add-remove"]))
def test_subsampled_epsilon_is_monotone(z, q, steps, adjacency):
    """epsilon decreases with noise, increases with steps and with the sampling rate
    (up to the PLD grid: 1e-3)."""
    def eps(z_, q_, t_):
        return privacy.epsilon_of([SubsampledGaussian(z_, q_, t_)], 1e-5, adjacency=adjacency,
                                  accountant="pld")
    base = eps(z, q, steps)
    assert eps(1.3 * z, q, steps) <= base + 1e-3
    assert eps(z, q, steps + 3) >= base - 1e-3
    assert eps(z, min(1.0, 1.5 * q), steps) >= base - 1e-3


@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(z=st.floats(0.3, 50), q=st.floats(0.001, 1.0), steps=st.integers(1, 5000))
def test_rdp_epsilon_is_monotone(z, q, steps):
    def eps(z_, q_, t_):
        return privacy.epsilon_of([SubsampledGaussian(z_, q_, t_)], 1e-6, adjacency="add-remove",
                                  accountant="rdp")
    base = eps(z, q, steps)
    assert eps(1.1 * z, q, steps) <= base + 1e-12
    assert eps(z, q, steps + 1) >= base - 1e-12
    assert eps(z, min(1.0, 1.1 * q), steps) >= base - 1e-12


def test_pure_and_laplace_mechanisms():
    # Laplace with scale b * Delta_1 is (1/b)-DP; k of them compose to at most k/b
    for b, k in [(2.0, 1), (10.0, 5)]:
        eps = privacy.epsilon_of([Laplace(b, k)], 1e-6, accountant="pld")
        assert eps <= k / b + 1e-9
        assert eps == pytest.approx(optimistic_epsilon([Laplace(b, k)], 1e-6, "replace-one"),
                                    abs=2e-3)
    assert privacy.epsilon_of([PureDP(0.3, 2)], 1e-6, accountant="pld") <= 0.6 + 1e-9


# ---------------------------------------------------------------------------
# regressions: bugs found in the accounting module (see docs/privacy.md)


def test_tiny_and_huge_budgets_neither_hang_nor_overflow():
    # the accepted range is [MIN_EPSILON, MAX_EPSILON] (dpopt._validation); beyond it a
    # ValueError naming epsilon, before any search
    with time_limit(60):
        for eps in (1e-6, 100.0):
            for acc in ("exact", "rdp"):
                cal = privacy.calibrate_gaussian(eps, 1e-5, 10, accountant=acc)
                assert 0 < cal.noise_multiplier < math.inf and cal.epsilon <= eps
        for eps in (1e-4, 100.0):
            cal = privacy.calibrate(lambda z: [SubsampledGaussian(z, 0.1, 20)], eps, 1e-5)
            assert 0 < cal.noise_multiplier < math.inf and cal.epsilon <= eps
        for eps in (1e-10, 1e6, 1e300):
            with pytest.raises(ValueError, match="epsilon="):
                privacy.calibrate_gaussian(eps, 1e-5, 10)
            with pytest.raises(ValueError, match="epsilon="):
                privacy.calibrate(lambda z: [SubsampledGaussian(z, 0.1, 20)], eps, 1e-5)
        assert 0.0 <= gdp_delta(1e150, 1e300) <= 1.0


def test_pld_with_tiny_noise_is_bounded_in_time_and_valid():
    with time_limit(60):
        tiny = [Gaussian(0.01, 100)]
        pld = privacy.epsilon_of(tiny, 1e-5, accountant="pld")
        assert pld >= privacy.epsilon_of(tiny, 1e-5, accountant="exact") - 1e-6
        sub = privacy.epsilon_of([SubsampledGaussian(0.05, 0.1, 100)], 1e-5, accountant="pld")
        # finite, and no worse than the unsampled Gaussian that dominates it
        assert 0 < sub <= privacy.epsilon_of([Gaussian(0.05, 100)], 1e-5) + 1e-6


def test_fractional_batch_without_replacement_is_rounded_up():
    def eps(rate):
        return privacy.epsilon_of([SubsampledGaussian(1.0, rate, 100, "without-replacement",
                                                      100)], 1e-5, accountant="rdp")
    # 2.5 records per batch must be accounted as 3 (round-half-even made it 2)
    assert eps(0.025) == pytest.approx(eps(0.03), rel=1e-12)
