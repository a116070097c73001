"""Heavy-tailed DP-SO: mean oracles, private quantile, shuffle simulations, solvers.

Statistical tests use fixed seeds; each states its false-alarm rate, i.e. the
probability that it fails for a correct implementation over a random seed.
"""

import contextlib
import math
import warnings

import dp_accounting as dpa
import numpy as np
import pytest
from scipy import integrate, optimize, stats

import dpopt
from _broken_variants import unclipped
from _declarations import (
    clip_off,
    crosscheck,
    custom_noise_test,
    noise_scale_undetectable,
    noise_spec,
    one_step,
    required_options,
)
from _independent_accounting import zcdp_epsilon_continuous
from _noise_checks import NORMAL, assert_distribution, zero_problem
from dpopt import privacy
from dpopt.privacy import (
    ZCDP,
    advanced_composition_split,
    private_quantile,
)
from dpopt.solvers import heavy_tailed as ht
from dpopt.solvers.heavy_tailed import subgradient as ht_subgradient
from dpopt.solvers.heavy_tailed.oracles import (
    MeanOracle1,
    MeanOracle2,
    ScalarSumProtocol,
    ShuffleMeanOracle1,
    ShuffleMeanOracle2,
    clip_rows_l2,
    median_of_means,
)

ONE_PASS = ("ht-acsa", "ht-sgd", "ht-proxsgd")
ALPHA = 1e-4  # two-sided false-alarm rate of each chi-square / z test below
Z = stats.norm.ppf(1 - ALPHA / 2)  # about 3.9


def chi2_ok(sum_sq_over_var, dof, alpha=ALPHA):
    lo, hi = stats.chi2.ppf(alpha / 2, dof), stats.chi2.ppf(1 - alpha / 2, dof)
    return lo <= sum_sq_over_var <= hi


def light_problem(n=4000, p=5, seed=0, loss="squared", penalty="l2", alpha=0.1, **kw):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    w = rng.standard_normal(p)
    w /= np.linalg.norm(w)
    if loss == "logistic":
        y = np.where(X @ w + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    else:
        y = X @ w + 0.3 * rng.standard_normal(n)
    return dpopt.Problem(X, y, loss, penalty, alpha=alpha, **kw)


def student_moment(nu, k, shift):
    """E|shift + T_nu|^k by quadrature."""
    f = stats.t(nu).pdf
    return integrate.quad(lambda t: abs(shift + t) ** k * f(t), -np.inf, np.inf, limit=200)[0]


# ---------------------------------------------------------------------------
# MeanOracle1


def test_mean_oracle1_noise_matches_sigma():
    """Noise of one call ~ N(0, sigma^2 I) with sigma = 2C / (s sqrt(2 rho)) (chi-square,
    false alarm ALPHA)."""
    C, s, rho, d = 1.7, 40, 0.3, 6
    o = MeanOracle1(C, s, rho)
    sigma = 2 * C / (s * math.sqrt(2 * rho))
    assert o.sigma == pytest.approx(sigma) and o.sensitivity == pytest.approx(2 * C / s)
    assert o.record() == ZCDP(rho, 1)
    rng = np.random.default_rng(1)
    base = np.full(d, 0.25)
    draws = np.array([o.release(rng, base) - base for _ in range(3000)])
    assert chi2_ok(np.sum(draws ** 2) / sigma ** 2, draws.size)
    assert abs(draws.mean()) < Z * sigma / math.sqrt(draws.size)


def test_mean_oracle1_sensitivity_is_2C_over_s():
    rng = np.random.default_rng(2)
    C, s, d = 1.0, 10, 4
    worst = 0.0
    for _ in range(300):
        Zs = rng.standard_t(2, size=(s, d)) * rng.uniform(0.1, 10)
        Z2 = Zs.copy()
        Z2[rng.integers(s)] = rng.standard_t(2, size=d) * 100
        diff = clip_rows_l2(Zs, C).mean(0) - clip_rows_l2(Z2, C).mean(0)
        worst = max(worst, np.linalg.norm(diff))
    assert worst <= 2 * C / s * (1 + 1e-12)
    Zs = np.zeros((s, d))
    Zs[0, 0] = 5.0
    Z2 = Zs.copy()
    Z2[0, 0] = -5.0  # the bound is attained
    diff = clip_rows_l2(Zs, C).mean(0) - clip_rows_l2(Z2, C).mean(0)
    assert np.linalg.norm(diff) == pytest.approx(2 * C / s)


def test_mean_oracle1_bias_and_variance_match_lemma6():
    """z = (1 + T_5) e_1 in R^3: the oracle's mean equals the exact clipped mean
    (quadrature) within Z standard errors (false alarm ALPHA), that bias is
    detectable (so the test fails without clipping), and it is below Lemma 6's
    bound r_k^k / ((k-1) C^(k-1)) for k = 2, 3, 4; the variance matches
    d sigma^2 + Var(clipped) / s and is below d sigma^2 + r_2^2 / s."""
    nu, shift, C, s, d, rho, N = 5, 1.0, 2.0, 50, 3, 2.0, 4000
    f = stats.t(nu).pdf
    clipped_mean = integrate.quad(lambda t: np.clip(shift + t, -C, C) * f(t), -np.inf, np.inf,
                                  limit=200)[0]
    clipped_sq = integrate.quad(lambda t: np.clip(shift + t, -C, C) ** 2 * f(t), -np.inf, np.inf,
                                limit=200)[0]
    exact_bias = clipped_mean - shift
    o = MeanOracle1(C, s, rho)
    rng = np.random.default_rng(3)
    out = np.empty((N, d))
    for i in range(N):
        z = np.zeros((s, d))
        z[:, 0] = shift + rng.standard_t(nu, size=s)
        out[i] = o(rng, z)
    var_clip = clipped_sq - clipped_mean ** 2
    se = math.sqrt((var_clip / s + o.sigma ** 2) / N)
    emp_bias = out[:, 0].mean() - shift
    assert abs(emp_bias - exact_bias) <= Z * se
    assert abs(exact_bias) > 2 * Z * se  # detectable: an unclipped oracle would fail
    for k in (2, 3, 4):
        rk = student_moment(nu, k, shift) ** (1 / k)
        assert abs(exact_bias) <= o.bias_bound(rk, k)
    # variance: coordinate 0 carries the data, every coordinate the noise
    expected = d * o.sigma ** 2 + var_clip / s
    total = np.sum(out.var(axis=0, ddof=1))
    assert total == pytest.approx(expected, rel=0.08)  # sd of the estimate ~ 1.3%
    assert expected <= o.variance_bound(d, math.sqrt(student_moment(nu, 2, shift)))


def test_mean_oracle1_no_privacy_and_bad_input():
    o = MeanOracle1(math.inf, 3, math.inf)
    z = np.arange(6.0).reshape(3, 2)
    assert np.array_equal(o(np.random.default_rng(0), z), z.mean(0))
    with pytest.raises(ValueError, match="clip"):
        MeanOracle1(math.inf, 3, 1.0)
    with pytest.raises(ValueError, match="rho"):
        MeanOracle1(1.0, 3, 0.0)
    with pytest.raises(ValueError, match="batch_size"):
        MeanOracle1(1.0, 0, 1.0)
    with pytest.raises(ValueError, match="rows"):
        MeanOracle1(1.0, 4, 1.0)(np.random.default_rng(0), z)
    with pytest.raises(ValueError, match="NaN"):
        MeanOracle1(1.0, 3, 1.0)(np.random.default_rng(0), z * np.nan)


# ---------------------------------------------------------------------------
# MeanOracle2


def test_mean_oracle2_noise_and_sensitivity():
    """sigma = 2 tau m sqrt(d) / (s sqrt(2 rho)) (chi-square, false alarm ALPHA) and the
    median of clipped group means moves by at most 2 tau m sqrt(d) / s."""
    tau, s, m, d, rho = 0.8, 60, 5, 4, 0.5
    o = MeanOracle2(tau, s, m, d, rho)
    sens = 2 * tau * m * math.sqrt(d) / s
    assert o.sensitivity == pytest.approx(sens)
    assert o.sigma == pytest.approx(sens / math.sqrt(2 * rho))
    rng = np.random.default_rng(4)
    draws = np.array([o.release(rng, np.zeros(d)) for _ in range(3000)])
    assert chi2_ok(np.sum(draws ** 2) / o.sigma ** 2, draws.size)
    worst = 0.0
    for _ in range(300):
        x = rng.standard_t(2, size=(s, d))
        x2 = x.copy()
        x2[rng.integers(s)] = rng.choice([-1, 1], size=d) * 50.0
        worst = max(worst, np.linalg.norm(median_of_means(x, tau, m) - median_of_means(x2, tau, m)))
    assert worst <= sens * (1 + 1e-12)


def test_mean_oracle2_matches_direct_computation_and_bias_bounds():
    """Median of clipped group means equals a direct loop; per-coordinate clipping bias
    |E Pi_tau(x) - nu| (quadrature) is below Lemma 58's 10 gamma_k (2/tau)^(k-1); the
    noiseless error exceeds Lemma 57's bound in at most a fraction zeta of the trials
    (binomial test, false alarm ALPHA)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((12, 3))
    direct = [np.median([np.clip(x[g * 4:(g + 1) * 4, j], -0.5, 0.5).mean() for g in range(3)])
              for j in range(3)]
    assert np.allclose(median_of_means(x, 0.5, 3), direct)
    nu_, shift, tau = 4.5, 0.5, 2.0  # tau >= 2 |nu_j|
    f = stats.t(nu_).pdf
    clipped = integrate.quad(lambda t: np.clip(shift + t, -tau, tau) * f(t), -np.inf, np.inf,
                             limit=200)[0]
    for k in (2, 3, 4):
        gamma = student_moment(nu_, k, 0.0)  # central moment E|T|^k
        o = MeanOracle2(tau, 100, 1, 1, math.inf)
        assert abs(clipped - shift) <= o.coordinate_bias_bound(gamma, k)
    d, zeta, k = 3, 0.1, 2
    m = MeanOracle2.default_groups(d, zeta)
    s = 4 * m
    o = MeanOracle2(tau, s, m, d, math.inf)
    gamma = student_moment(nu_, k, 0.0)
    bound = o.error_bound(gamma, k)
    trials = 200
    errs = [np.linalg.norm(o(rng, shift + rng.standard_t(nu_, size=(s, d))) - shift)
            for _ in range(trials)]
    exceed = int(np.sum(np.array(errs) > bound))
    assert stats.binom.sf(exceed - 1, trials, zeta) > ALPHA


def test_mean_oracle2_bad_input():
    with pytest.raises(ValueError, match="divide"):
        MeanOracle2(1.0, 10, 3, 2, 1.0)
    with pytest.raises(ValueError, match="clip"):
        MeanOracle2(math.inf, 10, 2, 2, 1.0)
    with pytest.raises(ValueError, match="shape"):
        MeanOracle2(1.0, 10, 2, 2, 1.0)(np.random.default_rng(0), np.zeros((10, 3)))


# ---------------------------------------------------------------------------
# private quantile


def test_private_quantile_accuracy_and_noise(monkeypatch):
    rng = np.random.default_rng(6)
    v = np.abs(rng.standard_normal(20000)) * 3
    ratio = (1e6 / 1e-6) ** (1 / 60)
    for q in (0.2, 0.5, 0.9, 0.99):
        true = np.quantile(v, q)
        exact, _ = private_quantile(rng, v, q, math.inf)
        assert true <= exact <= true * ratio * (1 + 1e-9)
        noisy, info = private_quantile(rng, v, q, 1.0)
        assert true / ratio ** 2 <= noisy <= true * ratio ** 2
        assert info["records"] == [ZCDP(1.0, 1)] and info["sigma_count"] == 1.0
    # the histogram noise is drawn with sigma = 1 / sqrt(rho) (sensitivity sqrt(2))
    seen = []
    real = privacy.mechanisms.gaussian_noise

    def spy(rng_, sigma, size=None):
        seen.append(sigma)
        return real(rng_, sigma, size)

    monkeypatch.setattr(privacy.mechanisms, "gaussian_noise", spy)
    private_quantile(rng, v, 0.9, 0.04)
    assert seen == [pytest.approx(5.0)]


def test_private_quantile_robust_to_empty_range():
    """With a tiny budget the estimate stays near the data (never the top of the
    public range), erring downwards."""
    rng = np.random.default_rng(7)
    v = np.abs(rng.standard_normal(1024)) * 3.3
    est = [private_quantile(rng, v, 0.96, 0.009)[0] for _ in range(50)]
    assert max(est) <= 20 and min(est) >= np.quantile(v, 0.3)


def test_private_quantile_bad_input():
    rng = np.random.default_rng(0)
    for kw, match in [({"values": [-1.0]}, "non-negative"), ({"quantile": 1.0}, "quantile"),
                      ({"rho": 0.0}, "rho"), ({"lower": 2.0, "upper": 1.0}, "lower")]:
        args = {"values": [1.0, 2.0], "quantile": 0.5, "rho": 1.0, **kw}
        with pytest.raises(ValueError, match=match):
            private_quantile(rng, args.pop("values"), args.pop("quantile"), args.pop("rho"),
                             **args)


# ---------------------------------------------------------------------------
# shuffle-model simulations


def test_scalar_sum_protocol_unbiased_with_stated_variance():
    """Mean of the simulated analyzer output = true sum (z test) and its variance =
    (sum f(1-f) + s b p (1-p)) / g^2 (chi-square), false alarm ALPHA each."""
    proto = ScalarSumProtocol(1.0, 1e-6, 100)
    g, b, p = proto.g, proto.b, proto.p
    assert g >= math.sqrt(100) and 0 < p < 0.5
    assert b > 180 * g * g * math.log(2 / 1e-6) / (proto.eps_lemma ** 2 * 100)
    assert proto.eps_lemma * (1 + 2 / g) == pytest.approx(1.0)
    rng = np.random.default_rng(8)
    vals = rng.uniform(size=(100, 1))
    frac = vals[:, 0] * g - np.floor(vals[:, 0] * g)
    var = (np.sum(frac * (1 - frac)) + 100 * b * p * (1 - p)) / g ** 2
    assert var <= proto.variance_bound()
    out = np.array([proto.simulate(rng, vals)[0] for _ in range(4000)])
    assert abs(out.mean() - vals.sum()) <= Z * math.sqrt(var / out.size)
    assert chi2_ok(np.sum((out - vals.sum()) ** 2) / var, out.size)


def test_shuffle_oracles_unbiased_and_accounted():
    rng = np.random.default_rng(9)
    s, d, C = 200, 3, 1.0
    o1 = ShuffleMeanOracle1(C, s, d, 2.0, 1e-6)
    e0, d0 = advanced_composition_split(2.0, 1e-6, d)
    assert o1.protocol.epsilon == e0 and o1.protocol.delta == d0
    dprime = 1e-6 / 2
    total = min(math.sqrt(2 * d * math.log(1 / dprime)) * e0 + d * e0 * math.expm1(e0), d * e0)
    assert total <= 2.0 + 1e-9 and d * d0 <= 1e-6
    x = rng.standard_normal((s, d)) * 0.7
    target = clip_rows_l2(x, C).mean(0)
    outs = np.array([o1(rng, x) for _ in range(1500)])
    se = math.sqrt(o1.noise_variance_bound() / outs.shape[0])
    assert np.all(np.abs(outs.mean(0) - target) <= Z * se)
    assert np.all(outs.var(0) <= o1.noise_variance_bound() * 1.2)
    o2 = ShuffleMeanOracle2(1.0, 200, 5, d, 2.0, 1e-6)
    assert o2(rng, x).shape == (d,)
    with pytest.raises(ValueError, match="delta"):
        ShuffleMeanOracle1(C, s, d, 1.0, 0.6)


# ---------------------------------------------------------------------------
# domain helpers


def _numerical_prox(pen, v, step, radius):
    def obj(x):
        return step * pen.value(x) + 0.5 * np.sum((x - v) ** 2)

    def ball(x):
        return radius * radius - x @ x

    res = optimize.minimize(obj, np.zeros(v.size), method="SLSQP",
                            constraints=[{"type": "ineq", "fun": ball}], options={"ftol": 1e-12})
    return obj, res.fun


def test_prox_ball_matches_numerical_minimizer():
    rng = np.random.default_rng(10)
    pb = dpopt.Problem(rng.standard_normal((5, 4)), rng.standard_normal(5), "squared",
                       "elastic_net", alpha=0.7, l1_ratio=0.4, fit_intercept=True)
    for _ in range(5):
        v = rng.standard_normal(5) * 3
        u = ht.prox_ball(pb.penalty, v, 0.8, 1.2)
        obj, best = _numerical_prox(pb.penalty, v, 0.8, 1.2)
        assert np.linalg.norm(u) <= 1.2 * (1 + 1e-9)
        assert obj(u) <= best + 1e-6


def _numerical_two_ball(v, c2, r1, r2):
    cons = [{"type": "ineq", "fun": lambda x: r1 ** 2 - x @ x},
            {"type": "ineq", "fun": lambda x: r2 ** 2 - (x - c2) @ (x - c2)}]
    return optimize.minimize(lambda x: np.sum((x - v) ** 2), c2 * 0.5, method="SLSQP",
                             constraints=cons, options={"ftol": 1e-14}).fun


def test_project_two_balls_matches_numerical_projection():
    rng = np.random.default_rng(11)
    for _ in range(20):
        c1, c2 = np.zeros(3), rng.standard_normal(3)
        r1, r2 = 1.0, rng.uniform(0.3, 2.0)
        if np.linalg.norm(c2) > r1 + r2:
            continue
        v = rng.standard_normal(3) * 3
        u = ht.project_two_balls(v, c1, r1, c2, r2)
        assert np.linalg.norm(u - c1) <= r1 + 1e-9 and np.linalg.norm(u - c2) <= r2 + 1e-9
        assert np.sum((u - v) ** 2) <= _numerical_two_ball(v, c2, r1, r2) + 1e-6


# ---------------------------------------------------------------------------
# solvers: data access


@pytest.fixture
def counting(monkeypatch):
    """Wrap read_records: every call's row indices, in order."""
    calls = []
    real = ht.read_records

    def wrapper(problem, rows):
        calls.append(np.asarray(rows).copy())
        return real(problem, rows)

    for module in (ht, ht._shared, ht.one_pass, ht.subgradient):  # every module that reads
        monkeypatch.setattr(module, "read_records", wrapper)
    return calls


@pytest.mark.parametrize("solver", ONE_PASS)
def test_one_pass_touches_every_record_exactly_once(counting, solver):
    pb = light_problem(n=1000)
    res = dpopt.solve(pb, solver, epsilon=1.0, random_state=0, clip=3.0, n_iter=10,
                      smoothness=1.0, radius=5.0)
    assert len(counting) == 10 and all(c.size == 100 for c in counting)
    seen = np.concatenate(counting)
    assert np.array_equal(np.sort(seen), np.arange(1000))  # each record exactly once
    assert res.params["records_used"] == 1000 and res.params["records_unused"] == 0


@pytest.mark.parametrize("records", ["shared", "disjoint"])
def test_quantile_reads_are_accounted(counting, records):
    pb = light_problem(n=1000)
    res = dpopt.solve(pb, "ht-acsa", epsilon=2.0, random_state=0, clip="quantile",
                      quantile_records=records, quantile_share=0.2, n_iter=8,
                      smoothness=1.0, radius=5.0)
    quantile_rows, batches = counting[0], counting[1:]
    opt = np.concatenate(batches)
    assert np.unique(opt).size == opt.size  # no record in two batches
    if records == "disjoint":
        assert quantile_rows.size == 200
        assert np.intersect1d(quantile_rows, opt).size == 0  # parallel composition
        assert res.params["rho_quantile"] == res.params["rho_optimization"] == res.params["rho"]
    else:
        assert quantile_rows.size == 1000  # sequential composition: the shares add up
        assert res.params["rho_quantile"] + res.params["rho_optimization"] == \
            pytest.approx(res.params["rho"])
        assert res.params["rho_quantile"] == pytest.approx(0.2 * res.params["rho"])
    assert sum(m.rho * m.count for m in res.mechanisms) == pytest.approx(res.params["rho"])


def test_subgradient_phases_are_disjoint_and_read_once(counting):
    pb = light_problem(n=300, loss="absolute", penalty=None)
    res = dpopt.solve(pb, "ht-subgradient", epsilon=1.0, random_state=0, clip=2.0, radius=3.0,
                      max_phase_iter=20)
    sizes = [c.size for c in counting]
    assert sizes == [128, 64, 32, 16, 8, 4, 2, 1]  # n rounded down to 256, halves
    seen = np.concatenate(counting)
    assert np.unique(seen).size == seen.size == 255
    assert res.params["records_used"] == 255


def test_a_record_cannot_be_reused():
    pb = light_problem(n=500)
    with pytest.raises(ValueError, match="reused"):
        dpopt.solve(pb, "ht-sgd", epsilon=1.0, clip=1.0, n_iter=10, batch_size=60,
                    smoothness=1.0, random_state=0)
    with pytest.raises(ValueError, match="passes"):  # no multi-pass option exists
        dpopt.solve(pb, "ht-acsa", epsilon=1.0, clip=1.0, passes=2, smoothness=1.0)


# ---------------------------------------------------------------------------
# solvers: privacy


@pytest.mark.parametrize("accountant", ["zcdp", "exact"])
def test_budget_conversion_and_report(accountant):
    pb = light_problem(n=800)
    res = dpopt.solve(pb, "ht-acsa", epsilon=1.5, delta=1e-5, random_state=0, clip=2.0,
                      accountant=accountant, smoothness=1.0, radius=3.0)
    rho = res.params["rho"]
    if accountant == "zcdp":
        assert rho == pytest.approx(privacy.dp_to_zcdp(1.5, 1e-5))
        assert res.epsilon == pytest.approx(privacy.zcdp_to_dp(rho, 1e-5))
        assert res.mechanisms == [ZCDP(rho, 1)]
    else:
        assert rho == pytest.approx(0.5 * privacy.gdp_mu(1.5, 1e-5) ** 2)
        assert res.epsilon == pytest.approx(privacy.gdp_epsilon(math.sqrt(2 * rho), 1e-5))
    assert res.epsilon <= 1.5 + 1e-9 and res.delta == 1e-5
    assert privacy.epsilon_of(res.mechanisms, 1e-5) == pytest.approx(res.epsilon, rel=1e-6)
    assert res.adjacency == "replace-one"
    # rho overrides epsilon and is reported with its conversion
    res2 = dpopt.solve(pb, "ht-acsa", epsilon=1.5, delta=1e-5, rho=0.02, random_state=0,
                       clip=2.0, accountant=accountant, smoothness=1.0, radius=3.0)
    assert res2.params["rho"] == 0.02 and res2.params["rho_given"]
    assert res2.epsilon == pytest.approx(ht._epsilon_of_rho(0.02, 1e-5, accountant))
    assert res2.epsilon <= 1.5
    # epsilon caps rho (spent <= target always holds); epsilon=inf leaves rho alone
    with pytest.raises(ValueError, match="rho"):
        dpopt.solve(pb, "ht-acsa", epsilon=1.5, delta=1e-5, rho=1.0, clip=2.0,
                    accountant=accountant, smoothness=1.0)
    res3 = dpopt.solve(pb, "ht-acsa", epsilon=math.inf, delta=1e-5, rho=1.0, random_state=0,
                       clip=2.0, accountant=accountant, smoothness=1.0, radius=3.0)
    assert res3.params["rho"] == 1.0 and math.isfinite(res3.epsilon)


def test_budget_accountant_sees_the_spend():
    pb = light_problem(n=800)
    with dpopt.BudgetAccountant(epsilon=2.0, delta=1e-5) as acc:
        res = dpopt.solve(pb, "ht-acsa", epsilon=1.0, delta=1e-5, random_state=0, clip=2.0,
                          smoothness=1.0, radius=3.0)
        assert acc.spent() == pytest.approx(res.epsilon, rel=1e-3)


@pytest.mark.parametrize("share", [None, 0.25])
def test_solver_adds_enough_noise(share):
    """Zero gradient (X = 0): ht-proxsgd's iterate is w_T = -eta sum_t noise_t, so
    w_T / (eta sqrt(T)) ~ N(0, sigma^2) with sigma = 2C / (s sqrt(2 rho_opt)) computed
    here from first principles (rho_opt = (1 - share) dp_to_zcdp(eps, delta)). Chi-square
    test, false alarm ALPHA; it fails if the solver adds too little (or too much) noise."""
    n, p, T, C, eps, delta = 2000, 40, 20, 1.5, 2.0, 1e-5
    pb = dpopt.Problem(np.zeros((n, p)), np.ones(n), "squared")
    rho = privacy.dp_to_zcdp(eps, delta) * (1 - (share or 0.0))
    sigma = 2 * C / ((n // T) * math.sqrt(2 * rho))
    samples = []
    for seed in range(40):
        kw = {"clip": C} if share is None else {
            "clip": "quantile", "quantile_share": share, "clip_quantile": 0.5,
            "quantile_range": (C / 10, C * 10)}
        res = dpopt.solve(pb, "ht-proxsgd", epsilon=eps, delta=delta, random_state=seed,
                          n_iter=T, smoothness=1.0, strong_convexity=0.5, **kw)
        if share is not None:  # all norms are 0: the quantile is the lower range end
            assert res.params["clip"] == pytest.approx(C / 10)
            sigma_run = 2 * (C / 10) / ((n // T) * math.sqrt(2 * rho))
        else:
            sigma_run = sigma
        eta = res.params["eta"]
        samples.append(res.w / (eta * math.sqrt(T) * sigma_run))
    x = np.concatenate(samples)
    assert chi2_ok(np.sum(x ** 2), x.size)


def test_shuffle_model_reports_epsilon_delta_and_no_rho():
    pb = light_problem(n=2000)
    res = dpopt.solve(pb, "ht-acsa", epsilon=2.0, delta=1e-6, random_state=0, clip=3.0,
                      model="shuffle-simulation", smoothness=1.0, radius=3.0)
    assert res.epsilon == 2.0 and res.delta == 1e-6 and res.params["rho"] is None
    assert res.mechanisms == [] and "shuffle" in res.accountant
    res2 = dpopt.solve(pb, "ht-sgd", epsilon=2.0, delta=1e-6, random_state=0, clip=3.0,
                       model="shuffle-simulation", oracle="coordinate", groups=2,
                       smoothness=1.0, radius=3.0, n_iter=5)
    assert np.all(np.isfinite(res2.w))
    for kw, match in [({"rho": 0.1}, "rho"), ({"clip": "quantile"}, "quantile")]:
        with pytest.raises(ValueError, match=match):
            dpopt.solve(pb, "ht-acsa", epsilon=2.0, delta=1e-6, model="shuffle-simulation",
                        smoothness=1.0, **{"clip": 3.0, **kw})


# ---------------------------------------------------------------------------
# solvers: convergence without privacy, determinism, bad input


@pytest.mark.parametrize("solver,kw", [
    ("ht-acsa", {"radius": 3.0}),
    ("ht-sgd", {"radius": 3.0, "n_iter": 200}),
    ("ht-proxsgd", {"radius": 3.0, "n_iter": 40}),
    ("ht-acsa", {"radius": 3.0, "oracle": "coordinate", "clip": 10.0, "groups": 3}),
])
@pytest.mark.parametrize("loss", ["squared", "logistic", "huber"])
def test_converges_without_privacy_on_light_tails(solver, kw, loss):
    pb = light_problem(n=20000, loss=loss, alpha=0.05)
    _, fstar = dpopt.reference_optimum(pb)
    gap0 = pb.objective(pb.zeros()) - fstar
    res = dpopt.solve(pb, solver, epsilon=math.inf, random_state=0, smoothness=1.0, **kw)
    assert res.epsilon == math.inf and res.params["rho"] == math.inf
    assert pb.objective(res.w) - fstar <= 0.02 * gap0


def test_subgradient_converges_without_privacy():
    pb = light_problem(n=512, loss="absolute", penalty=None)
    _, fstar = dpopt.reference_optimum(pb)
    gap0 = pb.objective(pb.zeros()) - fstar
    res = dpopt.solve(pb, "ht-subgradient", epsilon=math.inf, random_state=0, radius=3.0,
                      max_phase_iter=None)
    assert res.params["phase_iters"] == res.params["phase_iters_theory"]
    assert pb.objective(res.w) - fstar <= 0.03 * gap0


def test_subgradient_numba_matches_python():
    pb = light_problem(n=256, loss="absolute", penalty="l1", alpha=0.01)
    a = dpopt.solve(pb, "ht-subgradient", epsilon=1.0, random_state=3, radius=2.0, clip=2.0,
                    max_phase_iter=50, implementation="numba")
    b = dpopt.solve(pb, "ht-subgradient", epsilon=1.0, random_state=3, radius=2.0, clip=2.0,
                    max_phase_iter=50, implementation="python")
    assert np.allclose(a.w, b.w, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("solver,kw", [
    ("ht-acsa", {"radius": 2.0}), ("ht-sgd", {"radius": 2.0, "n_iter": 30}),
    ("ht-proxsgd", {"n_iter": 30}), ("ht-subgradient", {"radius": 2.0, "max_phase_iter": 20}),
    ("ht-acsa", {"model": "shuffle-simulation", "clip": 2.0, "delta": 1e-6}),
])
def test_same_seed_same_result(solver, kw):
    pb = light_problem(n=600)
    kw = {"smoothness": 1.0, **kw} if solver != "ht-subgradient" else kw
    a = dpopt.solve(pb, solver, epsilon=1.0, random_state=42, **kw)
    b = dpopt.solve(pb, solver, epsilon=1.0, random_state=42, **kw)
    c = dpopt.solve(pb, solver, epsilon=1.0, random_state=43, **kw)
    assert np.array_equal(a.w, b.w) and np.array_equal(a.checkpoints, b.checkpoints)
    assert not np.array_equal(a.w, c.w)


def test_theory_parameters_follow_the_theorems():
    pb = light_problem(n=5000, p=4)
    res = dpopt.solve(pb, "ht-acsa", epsilon=math.inf, rho=0.5, random_state=0,
                      moment_bound=2.0, moment_order=4, smoothness=1.0, radius=1.0)
    n, d, eps, k, r = 5000, 4, 1.0, 4, 2.0
    T = math.ceil(min((1.0 * 2.0 / r) ** (2 * k / (5 * k - 1))
                      * (eps * n / math.sqrt(d)) ** ((2 * k - 2) / (5 * k - 1)),
                      math.sqrt(1.0 * 2.0 / r) * n ** 0.25))
    s = n // T
    assert res.params["n_iter"] == T and res.params["batch_size"] == s
    assert res.params["clip"] == pytest.approx(r * (eps * T * s / math.sqrt(d * T)) ** (1 / k))
    eta, zeta = ht.stich_schedule(100, 1.0, 0.1)  # T > 2 kappa: two halves
    assert np.all(eta[:50] == 1.0) and np.all(zeta[:50] == 0)
    assert eta[50] == pytest.approx(4 / (0.1 * 40)) and zeta[51] == pytest.approx(41 ** 2)


@pytest.mark.parametrize("solver,kw,match", [
    ("ht-acsa", {"rho": -1.0}, "rho"),
    ("ht-acsa", {"moment_order": 1.5}, "moment_order"),
    ("ht-acsa", {"clip": "theory"}, "moment_bound"),
    ("ht-acsa", {"clip": math.inf}, "clip"),
    ("ht-acsa", {"clip": "quantile", "oracle": "coordinate"}, "coordinate"),
    ("ht-acsa", {"quantile_range": (0, 1)}, "quantile_range"),
    ("ht-acsa", {"quantile_share": 1.0}, "quantile_share"),
    ("ht-acsa", {"model": "local"}, "model"),
    ("ht-acsa", {"n_iter": 0}, "n_iter"),
    ("ht-acsa", {"smoothness": -1.0}, "smoothness"),
    ("ht-acsa", {"radius": 0.0}, "radius"),
    ("ht-sgd", {"strong_convexity": 0.0}, "strong_convexity"),
    ("ht-subgradient", {}, "radius"),
    ("ht-subgradient", {"radius": 1.0, "max_phase_iter": 0}, "max_phase_iter"),
])
def test_bad_input_raises_value_error(solver, kw, match):
    pb = light_problem(n=200)
    base = {} if solver == "ht-subgradient" else {"smoothness": 1.0}
    with pytest.raises(ValueError, match=match):
        dpopt.solve(pb, solver, epsilon=1.0, random_state=0, **{**base, **kw})


def test_strong_convexity_required_without_l2_penalty():
    pb = light_problem(n=200, penalty=None)
    with pytest.raises(ValueError, match="strong_convexity"):
        dpopt.solve(pb, "ht-sgd", epsilon=1.0, smoothness=1.0, clip=1.0)


def test_exact_smoothness_warns():
    pb = light_problem(n=300)
    with pytest.warns(dpopt.PrivacyLeakWarning):
        dpopt.solve(pb, "ht-acsa", epsilon=1.0, clip=1.0, random_state=0)


def test_sparse_data_runs():
    import scipy.sparse as sp
    rng = np.random.default_rng(12)
    X = sp.random(800, 20, density=0.2, random_state=1, format="csr")
    y = np.asarray(X @ rng.standard_normal(20)).ravel()
    pb = dpopt.Problem(X, y, "squared", "l2", alpha=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for solver, kw in [("ht-acsa", {"radius": 2.0}), ("ht-proxsgd", {"n_iter": 10}),
                           ("ht-acsa", {"oracle": "coordinate", "clip": 1.0, "groups": 2})]:
            res = dpopt.solve(pb, solver, epsilon=1.0, random_state=0, smoothness=1.0, **kw)
            assert np.all(np.isfinite(res.w))
        res = dpopt.solve(pb, "ht-subgradient", epsilon=1.0, random_state=0, radius=2.0,
                          max_phase_iter=10)
        assert np.all(np.isfinite(res.w))


# ---------------------------------------------------------------------------
# declarations for the registry-wide contract tests (tests/_declarations.py)

required_options("ht-subgradient", radius=10.0, max_phase_iter=20)  # no sensible defaults
one_step("ht-proxsgd", n_iter=1, batch_size=30, smoothness=1.0, strong_convexity=1.0)  # step 1/4


def expected_epsilon(problem, o, res, eps_target):
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


def _public_beta(pb):
    return 1.0


crosscheck("ht-acsa", [
    (1.0, 1e-5, {"clip": 1.0, "n_iter": 4}),
    (3.0, 1e-8, {"clip": 2.0, "n_iter": 1, "accountant": "exact"}),
], smoothness=_public_beta)(expected_epsilon)
crosscheck("ht-sgd", [
    (0.5, 1e-6, {"clip": 1.0, "n_iter": 3, "batch_size": 10, "strong_convexity": 1.0}),
], smoothness=_public_beta)(expected_epsilon)
crosscheck("ht-proxsgd", [
    (2.0, 1e-3, {"clip": 0.5, "n_iter": 2, "strong_convexity": 1.0, "accountant": "exact"}),
], smoothness=_public_beta)(expected_epsilon)
crosscheck("ht-subgradient", [
    (1.0, 1e-5, {"clip": 1.0, "radius": 10.0, "moment_bound": 1.0, "max_phase_iter": 5}),
    (4.0, 1e-6, {"clip": 1.0, "radius": 10.0, "moment_bound": 1.0, "max_phase_iter": 3,
                 "accountant": "exact"}),
])(expected_epsilon)


def one_pass_noise(kind):
    """The one-pass solvers on X = 0: every oracle call returns N(0, sigma^2 I) with
    sigma = z 2C / s (MeanOracle1); ``smoothness`` = beta = 1, ``strong_convexity`` = 1."""
    def spec(problem, o, res):
        sigma = 2 * o["clip"] / o["batch_size"] * res.noise_multiplier
        step, beta, T = o.get("step", 1.0), o["smoothness"], o["n_iter"]
        if kind == "acsa":  # T = 1: a_1 = 1, eta = 2 beta, w_ag = w_1 = -(step / (4 beta)) g
            scale = step / (4 * beta) * sigma
        elif kind == "sgd":  # T = 1 <= 2 beta / mu: eta_0 = 1 / beta, output w_1
            scale = step / beta * sigma
        else:  # proxsgd: w_T = -(step / (2 beta)) sum_t g_t
            scale = step / (2 * beta) * sigma * math.sqrt(T)
        return [(res.w / scale, NORMAL)]
    return spec


_ZERO_HT = {"clip": 1.5, "batch_size": 20, "smoothness": 1.0}
noise_spec("ht-acsa", {**_ZERO_HT, "n_iter": 1, "step": 0.8})(one_pass_noise("acsa"))
noise_spec("ht-sgd", {**_ZERO_HT, "n_iter": 1, "strong_convexity": 1.0})(one_pass_noise("sgd"))
noise_spec("ht-proxsgd", {**_ZERO_HT, "n_iter": 1, "batch_size": 6, "strong_convexity": 1.0})(
    one_pass_noise("proxsgd"))


@custom_noise_test("ht-subgradient")
def subgradient_noise_check():
    """ht-subgradient's compiled kernel receives standard normal draws and sigma_i: check
    the draws (KS + moment) and sigma_i = 2 C_i sqrt(T_i) / (n_i sqrt(2 rho)) per phase
    (T_i calls of (rho / T_i)-zCDP, the docstring's noise), and that the kernel agrees with
    the Python path built on MeanOracle1 (``implementation="python"``)."""
    seen, orig = [], ht_subgradient.subgradient_steps

    def spy(*args):
        seen.append((args[12], np.array(args[13])))  # sigma, noise
        return orig(*args)

    problem = zero_problem(n=16, p=2)
    opts = {"clip": 1.5, "radius": 10.0, "moment_bound": 1.0, "max_phase_iter": 6}
    ht_subgradient.subgradient_steps = spy
    try:
        runs = [dpopt.solve(problem, "ht-subgradient", epsilon=1.0, delta=1e-5, random_state=s,
                            **opts) for s in range(150)]
    finally:
        ht_subgradient.subgradient_steps = orig
    assert_distribution(np.concatenate([nz.ravel() for _, nz in seen]), NORMAL,
                        "ht-subgradient draws")
    prm = runs[0].params
    rho = prm["rho_optimization"]
    expected = [2 * C * math.sqrt(T) / (n * math.sqrt(2 * rho)) for T, C, n in
                zip(prm["phase_iters"], prm["clips"], prm["phase_sizes"])]
    np.testing.assert_allclose(prm["sigmas"], expected, rtol=1e-12)
    np.testing.assert_allclose([sg for sg, _ in seen[:len(expected)]], expected, rtol=1e-12)
    py = dpopt.solve(problem, "ht-subgradient", epsilon=1.0, delta=1e-5, random_state=0,
                     implementation="python", **opts)
    np.testing.assert_allclose(py.w, runs[0].w, rtol=1e-9, atol=1e-12)


@clip_off("heavy-tailed")
@contextlib.contextmanager
def unclipped_heavy_tailed():
    """The oracles of the one-pass solvers read ``self.clip`` (the noise uses the mechanism's
    own copy); ht-subgradient's compiled kernel takes the clip as argument 11."""
    call = ht.GradientOracle.__call__

    def unclipped_call(self, *args, **kwargs):
        saved, self.clip = self.clip, np.inf
        try:
            return call(self, *args, **kwargs)
        finally:
            self.clip = saved

    ht.GradientOracle.__call__ = unclipped_call
    try:
        # subgradient_steps(X, y, norms, code, param, w, center, radius, dball, eta, lam, clip,
        #                   sigma, noise, l1, l2)
        with unclipped(ht_subgradient, "subgradient_steps", 11)():
            yield
    finally:
        ht.GradientOracle.__call__ = call


noise_scale_undetectable(
    "ht-subgradient", "each phase projects onto a localization ball of radius about the noise "
    "scale, so the 1-D model mostly lands on the boundary and only its sign survives; the "
    "first phase reads the canary with probability 1/2, so the likelihood ratio of any test "
    "is at most 3 (epsilon_lb <= log 3)")
