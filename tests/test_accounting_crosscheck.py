"""Accounting cross-checks: the epsilon each solver reports equals an independent computation.

Independent paths (tests/_independent_accounting.py, which never calls dpopt.privacy):
dp-accounting's analytic Gaussian mechanism and PLD/RDP accountants driven with
hand-built DpEvents, a numerical minimisation of the DP-CD paper's eq. (16)-(18),
numerical integration of the Gaussian hockey-stick divergence, and privacy-loss
distributions of the Poisson-subsampled Gaussian computed from scratch with
numpy (losses rounded down / up give a lower / upper bracket).

Every registered private solver declares, in its own test module, a grid of
options and the composition its docstring promises (``_declarations.crosscheck``);
a test fails otherwise.
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

import _declarations as D
import dpopt
from _independent_accounting import (
    dpa_pld_poisson_epsilon,
    dpa_rdp_poisson_epsilon,
    eq18_epsilon_numeric,
    gaussian_epsilon,
    hand_pld_epsilon_bracket,
    hockey_stick_gaussian,
    op_epsilon_quad,
    pure_and_gaussian_epsilon,
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
D.load()


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
# per-solver expectations: the composition each solver's docstring promises, declared with
# _declarations.crosscheck in the solver's own test module


def test_every_private_solver_has_an_expected_composition():
    missing = [s for s in PRIVATE if s not in D.CROSSCHECKS]
    assert not missing, (f"declare the expected composition (grid + epsilon) of {missing} with "
                         f"_declarations.crosscheck in the solver's test module")


def _cases():
    for name, (grid, _, _) in D.CROSSCHECKS.items():
        if name not in PRIVATE:
            continue
        for case in grid:
            values, marks = (case.values, case.marks) if hasattr(case, "marks") else (case, ())
            yield pytest.param(name, *values, marks=marks, id=f"{name}-{values[0]}-{values[1]}")


CASES = list(_cases())


@pytest.mark.parametrize("name, eps, delta, opts", CASES)
def test_reported_epsilon_matches_an_independent_computation(name, eps, delta, opts):
    pb = tiny_problem(name=name)
    _, expected, smoothness = D.CROSSCHECKS[name]
    extra = {}
    if "smoothness" in dpopt.get_solver(name).options() and smoothness is not None:
        extra["smoothness"] = smoothness(pb)
    if opts.get("clipping") == "coordinate":
        extra["smoothness"] = np.ones(pb.dim)
        extra["step_rule"] = "eso"
    res = dpopt.solve(pb, name, epsilon=eps, delta=delta, random_state=0, **opts, **extra)
    lo, hi = expected(pb, opts, res, eps)
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


def _first_options(grid):
    case = grid[0]
    return (case.values if hasattr(case, "values") else case)[2]


@pytest.mark.parametrize("name", PRIVATE)
def test_every_solver_reports_at_least_what_its_composition_costs(name):
    pb = tiny_problem(name=name)
    spec = dpopt.get_solver(name)
    # the first grid options of its crosscheck (some solvers need options, e.g.
    # ht-subgradient's radius)
    opts = _first_options(D.CROSSCHECKS[name][0]) if name in D.CROSSCHECKS else \
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
    # the accepted range is [MIN_EPSILON, MAX_EPSILON] (dpopt._core.validation); beyond it a
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


# ---------------------------------------------------------------------------
# the default path's held-out selection (dpopt.pipeline.selection)


@pytest.mark.parametrize("estimator", ["logistic", "linear", "linear-dp-gd",
                                       "linear-recentre"])
def test_selection_release_is_dominated_by_the_training_branch(estimator):
    """The score release (a Gaussian of L2 sensitivity sqrt(k)/m and std sigma, read from
    the selection's record) has, at every epsilon, a delta no larger than the training
    branch's composition (objective perturbation by quadrature, or the Gaussians by
    hockey-stick integration), so the pipeline's (epsilon, delta) is the training
    branch's; and that epsilon is what the fit reports."""
    from _independent_accounting import hockey_stick_gaussian, op_delta_quad

    rng = np.random.default_rng(0)
    X = rng.standard_normal((800, 3)) * 3 + 1
    z = X @ np.array([1.0, -1.0, 0.5])
    delta = 1e-5
    if estimator == "logistic":
        est = dpopt.DPLogisticRegression(epsilon=1.0, delta=delta, random_state=0)
        est.fit(X, (z > 0).astype(int))
    elif estimator == "linear":
        est = dpopt.DPLinearRegression(epsilon=1.0, delta=delta, random_state=0)
        est.fit(X, z + rng.standard_normal(800) + 20)  # a target the histogram places
        # in two bins ([10, 31.6]): its second look is one more Gaussian in the composition
        assert "target_refine" in est.auto_.plan["mu_shares"]
    elif estimator == "linear-recentre":  # a year the noisy mean misses: one more Gaussian
        year = rng.integers(2000, 2016, 4000).astype(float)
        W = np.column_stack([year, rng.standard_normal((4000, 30))])
        est = dpopt.DPLinearRegression(epsilon=1.0, delta=delta, random_state=0)
        est.fit(W, (year - 2008) + W[:, 1] + rng.standard_normal(4000))
        assert "recentre" in est.auto_.plan["mu_shares"]
    else:  # wide rows: AdaSSP declines; the curvature and T steps of DP-GD (Gaussians)
        W = rng.standard_normal((3000, 80)) + rng.standard_normal((3000, 1))
        est = dpopt.DPLinearRegression(epsilon=1.0, delta=delta, random_state=0,
                                       feature_bounds={j: (-5.0, 5.0) for j in range(80)})
        est.fit(W, W[:, :3].sum(axis=1) + rng.standard_normal(3000))
        assert est.auto_.plan["solver"] == "dp-gd"
        assert "curvature" in est.auto_.plan["mu_shares"]
    sel = est.auto_.plan["selection"]
    mechs = est.fit_result_.mechanisms
    nu = math.sqrt(sum(m.count / m.noise_multiplier ** 2 for m in mechs
                       if isinstance(m, Gaussian)))
    ops = [m for m in mechs if isinstance(m, ObjectivePerturbation)]
    assert len(ops) == (1 if estimator == "logistic" else 0)
    assert all(isinstance(m, (Gaussian, ObjectivePerturbation)) for m in mechs)
    m = sel["validation_rows"]
    # a regressor releases the gaps' histogram (sensitivity sqrt(2)) and the paired
    # difference clipped at T (sensitivity 2 T / m); a classifier k score columns (sqrt(k)/m)
    regression = estimator.startswith("linear")
    sens = (2 * sel["difference_bound"] / m if regression
            else math.sqrt(sel["released_columns"]) / m)
    if regression:
        assert sel["difference_bound"] <= sel["gap_bound"] and sel["gap_sigma"] > 0

    def train_delta(e):
        if ops:
            op = ops[0]
            return op_delta_quad(e, 1 / op.noise_multiplier, op.shift, op.dof, nu)
        return hockey_stick_gaussian(1.0, 1.0 / nu, e)

    # the validation branch: the scores, and for a regressor first the noisy mean of the
    # scaled target (sensitivity 2/m); Gaussians compose in quadrature of sensitivity/sigma
    ratio = sens / sel["sigma"]
    if regression:
        ratio = math.hypot(ratio, math.sqrt(2) / sel["gap_sigma"])
    if sel["sigma_mean"] is not None:
        ratio = math.hypot(ratio, (2 / sel["validation_rows"]) / sel["sigma_mean"])
    # a regressor's constant on all rows: both sides meet it (it is among the mechanisms)
    mu_c = est.auto_.plan.get("constant_mu", 0.0)
    assert (mu_c > 0) == estimator.startswith("linear")
    assert (Gaussian(1 / mu_c, 1) in mechs) if mu_c else True
    ratio = math.hypot(ratio, mu_c)
    for e in np.linspace(0.0, 3.0, 13):
        d_val = hockey_stick_gaussian(ratio, 1.0, e)
        assert d_val <= train_delta(e) * (1 + 1e-6) + 1e-13, e
    delta_g = delta - est.auto_.plan.get("selection_delta", 0.0)  # the labels' threshold
    assert est.epsilon_spent_ == pytest.approx(_independent_epsilon(ops, nu, delta_g), rel=2e-3)
    assert est.epsilon_spent_ <= 1.0 * (1 + 1e-9)


def _independent_epsilon(ops, nu, delta_g):
    """The fit's epsilon from its records, independently: the Gaussians' nu in quadrature
    with objective perturbation's by quadrature (at most one), else the analytic Gaussian."""
    if ops:
        op = ops[0]
        return op_epsilon_quad(op.noise_multiplier, op.shift, op.dof, delta_g, z_gauss=1 / nu)
    return gaussian_epsilon(1 / nu, 1, delta_g)


@pytest.mark.parametrize("estimator", ["linear", "logistic"])
def test_in_sample_check_composes_with_the_training_branch(estimator):
    """Below 100 rows the check's score release meets every record the training branch
    met (dpopt.pipeline.in_sample): its Gaussians, read from the selection's record
    (sensitivities 2 T / n and sqrt(2) for a regressor's difference and gaps, sqrt(k) / n
    for a classifier's scores, 2 / n for a paid mean), must compose to at most the mu_s
    the fit reports and records; the whole fit's epsilon is then the independent
    composition of the training branch and that Gaussian."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((80, 3)) * 3 + 1
    z = X @ np.array([1.0, -1.0, 0.5])
    delta = 1e-4
    if estimator == "logistic":
        est = dpopt.DPLogisticRegression(epsilon=4.0, delta=delta, random_state=0,
                                         classes=[0, 1]).fit(X, (z > 0).astype(int))
    else:
        est = dpopt.DPLinearRegression(epsilon=4.0, delta=delta, random_state=0)
        est.fit(X, z + rng.standard_normal(80) + 20)
    sel, plan = est.auto_.plan["selection"], est.auto_.plan
    n = sel["validation_rows"]
    assert sel["in_sample"] and n == 80
    mu_s = plan["mu_shares"]["in_sample_check"]
    if estimator == "linear":
        ratio = math.hypot(2 * sel["difference_bound"] / n / sel["sigma"],
                           math.sqrt(2) / sel["gap_sigma"])
    else:
        ratio = math.sqrt(sel["released_columns"]) / n / sel["sigma"]
    if sel["sigma_mean"] is not None:
        ratio = math.hypot(ratio, (2 / n) / sel["sigma_mean"])
    assert ratio <= mu_s * (1 + 1e-9)
    mechs = est.fit_result_.mechanisms
    assert mechs[-1] == Gaussian(1 / mu_s, 1)
    nu = math.sqrt(sum(m.count / m.noise_multiplier ** 2 for m in mechs
                       if isinstance(m, Gaussian)))
    ops = [m for m in mechs if isinstance(m, ObjectivePerturbation)]
    assert len(ops) == (1 if estimator == "logistic" else 0)
    delta_g = delta - plan.get("selection_delta", 0.0)
    assert est.epsilon_spent_ == pytest.approx(_independent_epsilon(ops, nu, delta_g), rel=2e-3)
    assert est.epsilon_spent_ <= 4.0 * (1 + 1e-9)


def test_second_look_at_the_target_composes_with_the_fit(monkeypatch):
    """A target centred at 0 whose first histogram of y does not resolve is read again
    (dpopt.pipeline.second_look.target_second_look): one more histogram of y, whose exact counts
    move by one in two bins when a record is replaced (L2 sensitivity sqrt(2)), released
    with sigma = sqrt(2) / mu_2. Its Gaussian(1 / mu_2) must be among the records, and the
    fit's epsilon the independent composition of them all."""
    import dpopt.preprocessing._bounds as bounds

    released = []
    real = bounds.release_counts

    def spy(counts, mu, rng):
        out = real(counts, mu, rng)
        released.append((np.asarray(counts).shape[0], out[1], mu))
        return out

    monkeypatch.setattr(bounds, "release_counts", spy)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3))
    y = X @ np.array([1.0, 2.0, 3.0]) + rng.standard_normal(300)
    est = dpopt.DPLinearRegression(epsilon=4.0, delta=1e-5, random_state=0).fit(X, y)
    mu_2 = est.auto_.plan["mu_shares"]["target_second_look"]
    rows, sigma, _ = next(r for r in released if r[2] == pytest.approx(mu_2, rel=1e-12))
    assert rows == 1 and sigma == pytest.approx(math.sqrt(2.0) / mu_2, rel=1e-12)
    mechs = est.fit_result_.mechanisms
    assert Gaussian(1 / mu_2, 1) in mechs
    nu = math.sqrt(sum(m.count / m.noise_multiplier ** 2 for m in mechs))
    assert all(isinstance(m, Gaussian) for m in mechs)
    assert est.epsilon_spent_ == pytest.approx(_independent_epsilon([], nu, 1e-5), rel=2e-3)
    assert est.epsilon_spent_ <= 4.0 * (1 + 1e-9)
