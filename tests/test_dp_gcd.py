"""DP-GCD: selection mechanisms, scores, accounting, noise scales, convergence, errors.

Statistical tests use fixed seeds; each states its false-alarm rate (the
probability that it fails for a correct implementation, had the seed been
drawn at random).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import optimize, stats

import dpopt
from _broken_variants import unclipping
from _declarations import clip_off, crosscheck, noise_spec
from _independent_accounting import (
    dpa_pld_compose,
    pure_and_gaussian_epsilon,
    zcdp_epsilon_continuous,
)
from _noise_checks import M_PUBLIC, coordinate_noise
from dpopt.kernels.gcd import GS_L, GS_Q, GS_R, GS_S, clipped_gradient, greedy_scores
from dpopt.kernels.grad import coordclip_gradient
from dpopt.privacy import ZCDP, Gaussian, PureDP, epsilon_of
from dpopt.privacy.mechanisms import (
    advanced_composition_epsilon,
    advanced_composition_epsilon0,
    report_noisy_max,
    report_noisy_max_epsilon,
    report_noisy_max_scale,
)
from dpopt.solvers import dp_gcd
from dpopt.solvers.dp_gcd import calibrate_gcd, setup_dp_gcd

ALPHA = 1e-3  # false-alarm rate of every goodness-of-fit test below


def _lasso(n=200, p=15, seed=0, penalty="l1", alpha=0.1, **kw):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * rng.uniform(0.5, 2.0, p)
    w = np.zeros(p)
    w[:3] = [3.0, -2.0, 1.0]
    y = X @ w + 0.5 * rng.standard_normal(n)
    return dpopt.Problem(X, y, "squared", penalty, alpha=alpha, **kw)


def _logistic(n=200, p=10, seed=1, alpha=1e-2):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = np.sign(X @ rng.lognormal(size=p) + rng.standard_normal(n))
    return dpopt.Problem(X, y, "logistic", "l2", alpha=alpha, fit_intercept=True)


def _fit(problem, **kw):
    kw.setdefault("smoothness", problem.coordinate_smoothness())
    return dpopt.solve(problem, "dp-gcd", **kw)


# --------------------------------------------------------------------------- mechanisms


@pytest.mark.parametrize("noise", ["gumbel", "laplace"])
def test_noisy_max_with_huge_noise_is_uniform(noise):
    # chi-square goodness of fit to the uniform law; false alarm ALPHA
    rng = np.random.default_rng(11)
    scores = np.arange(6.0)
    counts = np.bincount([report_noisy_max(scores, 1e9, rng, noise) for _ in range(6000)],
                         minlength=6)
    assert stats.chisquare(counts).pvalue > ALPHA


def test_gumbel_noisy_max_is_the_exponential_mechanism():
    # P[j] = softmax(s / b); chi-square goodness of fit, false alarm ALPHA
    rng = np.random.default_rng(12)
    scores, b = np.array([0.0, 0.5, 1.0, 2.0]), 0.7
    counts = np.bincount([report_noisy_max(scores, b, rng, "gumbel") for _ in range(8000)],
                         minlength=4)
    probs = np.exp(scores / b) / np.exp(scores / b).sum()
    assert stats.chisquare(counts, probs * counts.sum()).pvalue > ALPHA


def test_noisy_max_scale_zero_is_exact_argmax_and_draws_nothing():
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    assert report_noisy_max([1.0, 3.0, 2.0, 3.0], 0.0, rng) == 1
    assert rng.bit_generator.state == state


def test_noisy_max_scales_and_epsilons():
    assert report_noisy_max_scale(0.3, 0.5) == pytest.approx(1.2)
    assert report_noisy_max_scale(0.3, math.inf) == 0.0
    # the paper's Delta / eps' is only 2 eps'-DP
    assert report_noisy_max_epsilon(0.3, 0.3 / 0.5, "laplace") == pytest.approx(1.0)


@pytest.mark.parametrize("args, match", [
    (([], 1.0), "scores"), (([1.0, np.nan], 1.0), "scores"), (([1.0], -1.0), "scale"),
])
def test_noisy_max_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        report_noisy_max(*args, np.random.default_rng(0))
    with pytest.raises(ValueError, match="noise"):
        report_noisy_max([1.0], 1.0, np.random.default_rng(0), noise="normal")


# --------------------------------------------------------------------------- accounting

# eps' solving the paper's eq. (2) at eps = 1, delta = 1/n^2 (notes, section 3 table)
EPS_PRIME_TABLE = {1000: [0.12969, 0.09176, 0.06492, 0.04909, 0.04107, 0.03354, 0.02905],
                   20640: [0.10933, 0.07734, 0.05470, 0.04136, 0.03461, 0.02826, 0.02447]}
TS = [1, 2, 4, 7, 10, 15, 20]


@pytest.mark.parametrize("n", sorted(EPS_PRIME_TABLE))
def test_advanced_composition_matches_paper_table(n):
    for T, expected in zip(TS, EPS_PRIME_TABLE[n]):
        e0 = advanced_composition_epsilon0(1.0, 1.0 / n ** 2, 2 * T)
        assert e0 == pytest.approx(expected, abs=6e-6)
        assert advanced_composition_epsilon(e0, 2 * T, 1.0 / n ** 2) <= 1.0


@pytest.mark.parametrize("selection", ["exponential", "laplace"])
@pytest.mark.parametrize("accountant", ["auto", "pld", "rdp", "paper"])
def test_calibration_never_exceeds_target(selection, accountant):
    for T in (1, 7):
        cal = calibrate_gcd(1.0, 1e-6, T, selection, accountant, 0.5)
        assert cal.epsilon <= 1.0
        # the recorded composition, re-accounted independently, is within the target
        acc = "pld" if cal.accountant == "paper" else cal.accountant
        assert epsilon_of(list(cal.mechanisms), 1e-6, accountant=acc) <= 1.0 + 1e-3
        assert sum(m.count for m in cal.mechanisms) == 2 * T


def test_auto_accountant_is_the_tighter_one():
    zs = {a: calibrate_gcd(1.0, 1e-6, 10, "exponential", a, 0.5).update_multiplier
          for a in ("auto", "pld", "rdp")}
    assert zs["auto"] == min(zs["pld"], zs["rdp"])
    cal = calibrate_gcd(1.0, 1e-6, 10, "exponential", "rdp", 0.5)
    # exponential mechanism accounted as bounded range: rho = eps'^2 / 8
    assert cal.mechanisms[0] == ZCDP(cal.epsilon_selection ** 2 / 8, 10)


def test_paper_laplace_reports_the_epsilon_it_really_spends():
    cal = calibrate_gcd(1.0, 1e-6, 10, "paper-laplace", "paper", 0.5)
    e0 = advanced_composition_epsilon0(1.0, 1e-6, 20)
    assert cal.epsilon_selection == pytest.approx(e0)
    assert cal.mechanisms[0] == PureDP(2 * e0, 10)  # the honest selection epsilon
    assert cal.epsilon > 1.0
    assert cal.epsilon == pytest.approx(epsilon_of(list(cal.mechanisms), 1e-6, accountant="pld"))


def test_fit_reports_composition():
    problem = _lasso()
    res = _fit(problem, epsilon=1.0, passes=5, random_state=0)
    assert res.epsilon <= 1.0 and res.delta == 1.0 / 200 ** 2
    assert res.adjacency == "replace-one"
    sel, upd = res.mechanisms
    assert upd == Gaussian(res.noise_multiplier, 5) and sel.count == 5
    assert epsilon_of(res.mechanisms, res.delta, accountant=res.accountant) <= 1.0
    with pytest.warns(UserWarning, match="paper-laplace"):
        bad = _fit(problem, epsilon=1.0, passes=5, selection="paper-laplace", accountant="paper",
                   random_state=0)
    good = _fit(problem, epsilon=1.0, passes=5, accountant="paper", random_state=0)
    assert bad.mechanisms[0] == PureDP(2 * good.params["epsilon_selection"], 5)
    assert bad.epsilon == pytest.approx(epsilon_of(bad.mechanisms, bad.delta, accountant="pld"))
    assert bad.epsilon > good.epsilon


# --------------------------------------------------------------------------- scores


def _reference_score(rule, g, w, L, l1, l2):
    """Scores written out independently (GS-q by numerical minimisation)."""
    if rule == GS_L:
        return abs(g + l2 * w) / math.sqrt(L)
    if rule == GS_S:
        if w != 0:
            return abs(g + l2 * w + l1 * np.sign(w)) / math.sqrt(L)
        return max(abs(g) - l1, 0.0) / math.sqrt(L)

    def psi(u):
        return l1 * abs(u) + 0.5 * l2 * u * u

    def model(a):
        return g * a + 0.5 * L * a * a + psi(w + a) - psi(w)

    if rule == GS_R:
        v = w - g / L
        u = np.sign(v) * max(abs(v) - l1 / L, 0.0) / (1 + l2 / L)
        return math.sqrt(L) * abs(u - w)
    res = optimize.minimize_scalar(model, bounds=(-abs(w) - 10, abs(w) + 10), method="bounded",
                                   options={"xatol": 1e-12})
    return math.sqrt(max(-2 * min(res.fun, 0.0), 0.0))


@pytest.mark.parametrize("rule", [GS_L, GS_S, GS_R, GS_Q])
def test_scores_match_independent_formulas(rule):
    rng = np.random.default_rng(3)
    p = 40
    g = rng.standard_normal(p)
    w = np.where(rng.uniform(size=p) < 0.4, 0.0, rng.standard_normal(p))
    L = rng.uniform(0.5, 3.0, p)
    l1 = np.full(p, 0.0 if rule == GS_L else 0.6)
    l2 = np.full(p, 0.3)
    inf = np.full(p, np.inf)
    got = greedy_scores(rule, np.arange(p), g, w, L, l1, l2, -inf, inf)
    want = [_reference_score(rule, g[j], w[j], L[j], l1[j], l2[j]) for j in range(p)]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_scores_are_lipschitz_with_the_claimed_constant():
    # the sensitivity argument: |s_j(g) - s_j(g')| <= |g - g'| / sqrt(curv_j)
    rng = np.random.default_rng(4)
    p = 2000
    g = rng.standard_normal(p) * 2
    g2 = g + rng.uniform(-0.3, 0.3, p)
    w = np.where(rng.uniform(size=p) < 0.3, 0.0, rng.standard_normal(p))
    w[:100] = 1.0  # at the upper bound of the box
    w = np.clip(w, -2.0, 1.0)  # iterates are feasible
    L = rng.uniform(0.2, 4.0, p)
    l1, l2 = np.full(p, 0.5), np.full(p, 0.2)
    lo, up = np.full(p, -2.0), np.full(p, 1.0)
    cand = np.arange(p)
    for rule in (GS_S, GS_R, GS_Q):
        diff = np.abs(greedy_scores(rule, cand, g, w, L, l1, l2, lo, up)
                      - greedy_scores(rule, cand, g2, w, L, l1, l2, lo, up))
        assert np.all(diff <= np.abs(g - g2) / np.sqrt(L) + 1e-12)


@pytest.mark.parametrize("loss", ["logistic", "squared", "huber"])
@pytest.mark.parametrize("sparse", [False, True])
def test_fused_gradient_matches_reference_kernel(loss, sparse):
    rng = np.random.default_rng(5)
    X = (sp.random(300, 43, density=0.2, random_state=6) if sparse
         else rng.standard_normal((300, 43)))
    y = np.sign(rng.standard_normal(300)) if loss == "logistic" else rng.standard_normal(300)
    problem = dpopt.Problem(X, y, loss)
    z = rng.standard_normal(300) * 3
    clips = rng.uniform(0.01, 1.0, 43)
    clips[:3] = np.inf
    data = (problem.X, problem.y, problem.loss.code, problem.loss.param)
    np.testing.assert_allclose(clipped_gradient(*data, z, clips),
                               coordclip_gradient(*data, z, clips), rtol=1e-12, atol=1e-15)


def test_threaded_dense_kernel_gives_the_same_bits():
    import numba

    from dpopt.kernels.gcd import PARALLEL_MIN_SIZE

    rng = np.random.default_rng(8)
    n = PARALLEL_MIN_SIZE // 301 + 1
    problem = dpopt.Problem(rng.standard_normal((n, 301)), np.sign(rng.standard_normal(n)),
                            "logistic")
    M = problem.coordinate_smoothness()
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        a = dpopt.solve(problem, "dp-gcd", epsilon=1.0, passes=3, smoothness=M, random_state=0)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        b = dpopt.solve(problem, "dp-gcd", epsilon=1.0, passes=3, smoothness=M, random_state=0)
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(a.checkpoints, b.checkpoints)


# --------------------------------------------------------------------------- selection privacy


def _neighbours():
    """Two datasets differing in one record (row 0); with saturated clipping the
    greedy score gap s_0 - s_1 is -6 Delta_s on D and -4 Delta_s on D'."""
    n = 20
    col0 = np.array([-1.0] * 6 + [1.0] * 14)
    col1 = np.ones(n)
    X = np.column_stack([col0, col1])
    X2 = X.copy()
    X2[0] = [1.0, -1.0]  # the replaced record
    y = np.full(n, -10.0)  # l'(0) x_ij = 10 x_ij: every term is clipped
    return dpopt.Problem(X, y, "squared"), dpopt.Problem(X2, y, "squared")


def _selection_freq(problem, selection, accountant, epsilon, delta, draws, seed):
    M = np.ones(2)  # public smoothness constants (equal on D and D')
    st = setup_dp_gcd(problem, epsilon, delta, 1, 1.0, 1.0, "gs-l", selection, accountant, 0.5, M)
    w = problem.zeros()
    g = clipped_gradient(problem.X, problem.y, problem.loss.code, problem.loss.param,
                         problem.margins(w), st.clips)
    scores = st.scores(g, w, problem.penalty)
    rng = np.random.default_rng(seed)
    hits = sum(st.select(scores, rng) == 0 for _ in range(draws))
    return hits / draws, scores, st


@pytest.mark.parametrize("selection, accountant", [
    ("exponential", "paper"), ("laplace", "paper"), ("exponential", "auto"),
])
def test_selection_privacy_loss_within_claimed_bound(selection, accountant):
    # epsilon chosen so that eps' = 1 per selection under the paper accountant.
    # The estimated log(P_D'[0] / P_D[0]) has standard error <= 0.05 here and its
    # true value is <= eps' (0.92 for exponential, 0.78 for Laplace, both at
    # eps' = 1): a tolerance of 0.2 gives a false-alarm rate below 1e-4.
    delta = 1e-3
    epsilon = advanced_composition_epsilon(1.0, 2, delta)
    p_d, s_d, st = _selection_freq(_neighbours()[0], selection, accountant, epsilon, delta,
                                   20000, 1)
    p_n, s_n, _ = _selection_freq(_neighbours()[1], selection, accountant, epsilon, delta,
                                  20000, 2)
    gap_units = lambda s: (s[0] - s[1]) / st.score_sensitivity  # noqa: E731
    assert gap_units(s_d) == pytest.approx(-6) and gap_units(s_n) == pytest.approx(-4)
    claimed = st.calibration.epsilon_selection
    assert math.log(p_n / p_d) <= claimed + 0.2
    assert math.log((1 - p_d) / (1 - p_n)) <= claimed + 0.2


def test_privacy_test_detects_paper_calibration():
    # The same test on the paper's Laplace(Delta / eps') selection: the true log
    # ratio here is 1.71 > eps' = 1 (it is only 2 eps'-DP), standard error ~ 0.08,
    # so the claimed bound is exceeded (miss probability below 1e-6).
    delta = 1e-3
    epsilon = advanced_composition_epsilon(1.0, 2, delta)
    p_d, _, st = _selection_freq(_neighbours()[0], "paper-laplace", "paper", epsilon, delta,
                                 20000, 1)
    p_n, _, _ = _selection_freq(_neighbours()[1], "paper-laplace", "paper", epsilon, delta,
                                20000, 2)
    assert math.log(p_n / p_d) > st.calibration.epsilon_selection + 0.2
    assert math.log(p_n / p_d) <= 2 * st.calibration.epsilon_selection + 0.3


def test_solver_selection_with_huge_noise_is_uniform():
    # tiny epsilon: every coordinate equally likely (chi-square, false alarm ALPHA)
    problem = _lasso(n=50, p=5, penalty="l2", alpha=0.0)
    M = problem.coordinate_smoothness()
    picks = []
    for seed in range(2500):
        res = dpopt.solve(problem, "dp-gcd", epsilon=1e-4, passes=1, smoothness=M,
                          accountant="rdp", random_state=seed)
        picks.append(int(np.flatnonzero(res.w)[0]))
    assert stats.chisquare(np.bincount(picks, minlength=5)).pvalue > ALPHA


def _greedy_replay(problem, rule, T, step, M):
    """Non-private greedy CD written with NumPy only (exact gradient, no clipping)."""
    pen = problem.penalty
    w = problem.zeros()
    out = [w.copy()]
    code = {"gs-l": GS_L, "gs-s": GS_S, "gs-r": GS_R, "gs-q": GS_Q}[rule]
    for _ in range(T):
        g = problem.gradient(w)
        Lj = (M + pen.l2) / step if rule == "gs-l" else M / step
        s = [_reference_score(code, g[j], w[j], Lj[j], pen.l1[j], pen.l2[j])
             for j in range(problem.dim)]
        j = int(np.argmax(s))
        if rule == "gs-l":
            w[j] -= (g[j] + pen.l2[j] * w[j]) / Lj[j]
        else:
            v = w[j] - g[j] / Lj[j]
            w[j] = np.sign(v) * max(abs(v) - pen.l1[j] / Lj[j], 0) / (1 + pen.l2[j] / Lj[j])
        out.append(w.copy())
    return np.array(out)


@pytest.mark.parametrize("rule, penalty", [("gs-l", "l2"), ("gs-s", "elastic_net"),
                                           ("gs-r", "l1"), ("gs-q", "elastic_net")])
def test_zero_noise_is_exact_greedy(rule, penalty):
    problem = _lasso(penalty=penalty, alpha=0.3)
    M = problem.coordinate_smoothness()
    res = dpopt.solve(problem, "dp-gcd", epsilon=math.inf, passes=12, clip=math.inf, rule=rule,
                      step=0.8, smoothness=M, random_state=0)
    np.testing.assert_allclose(res.checkpoints, _greedy_replay(problem, rule, 12, 0.8, M),
                               rtol=1e-9, atol=1e-12)


# --------------------------------------------------------------------------- update noise


@pytest.mark.parametrize("accountant", ["rdp", "paper"])
def test_update_noise_scale_on_zero_gradient_problem(accountant):
    # y = 0, w = 0: the clipped gradient is exactly 0, so w_j after one step is
    # -gamma_j * noise. Its standard deviation over 3000 runs estimates the
    # noise to within 1.3% (one standard error); the 6% tolerance gives a false
    # alarm below 1e-5 and fails if the solver adds too little noise.
    rng = np.random.default_rng(7)
    X = rng.standard_normal((40, 4)) * [1.0, 2.0, 0.5, 1.5]
    problem = dpopt.Problem(X, np.zeros(40), "squared")
    M = problem.coordinate_smoothness()
    st = setup_dp_gcd(problem, 1.0, 1e-4, 1, 0.5, 2.0, "gs-l", "exponential", accountant, 0.5, M)
    normalised = []
    for seed in range(3000):
        res = dpopt.solve(problem, "dp-gcd", epsilon=1.0, delta=1e-4, passes=1, step=0.5,
                          clip=2.0, smoothness=M, accountant=accountant, random_state=seed)
        j = int(np.flatnonzero(res.w)[0])
        normalised.append(-res.w[j] / st.steps[j] / st.sens[j])  # noise / Delta_j
    normalised = np.array(normalised)
    cal = st.calibration
    if accountant == "paper":  # Laplace(Delta_j / eps'): std sqrt(2) / eps'
        expected = math.sqrt(2) * cal.update_multiplier
        assert cal.update_multiplier == pytest.approx(1 / cal.epsilon_selection)
    else:
        expected = cal.update_multiplier
        # the claimed multiplier is enough: an independent RDP re-accounting
        mechs = [ZCDP(cal.epsilon_selection ** 2 / 8, 1), Gaussian(cal.update_multiplier, 1)]
        assert epsilon_of(mechs, 1e-4, accountant="rdp") <= 1.0 + 1e-9
    assert np.std(normalised) == pytest.approx(expected, rel=0.06)
    assert abs(np.mean(normalised)) < 5 * expected / math.sqrt(3000)
    np.testing.assert_allclose(st.sens, 2 * 2.0 * np.sqrt(M / M.sum()) / 40)


# --------------------------------------------------------------------------- behaviour


def test_same_seed_same_result():
    problem = _logistic()
    a = _fit(problem, epsilon=1.0, passes=8, step=0.5, clip=0.5, random_state=42)
    b = _fit(problem, epsilon=1.0, passes=8, step=0.5, clip=0.5, random_state=42)
    c = _fit(problem, epsilon=1.0, passes=8, step=0.5, clip=0.5, random_state=43)
    np.testing.assert_array_equal(a.w, b.w)
    np.testing.assert_array_equal(a.checkpoints, b.checkpoints)
    assert not np.array_equal(a.w, c.w)


@pytest.mark.parametrize("make, rule", [
    (lambda: _lasso(penalty="l1"), "gs-s"), (lambda: _lasso(penalty="l1"), "gs-r"),
    (lambda: _lasso(penalty="elastic_net"), "gs-q"), (_logistic, "gs-l"),
    (lambda: _lasso(penalty="box", alpha=None, lower=-1.0, upper=1.5), "gs-r"),
    (lambda: dpopt.Problem(sp.random(150, 30, density=0.3, random_state=1),
                           np.random.default_rng(2).standard_normal(150), "squared", "l1",
                           alpha=0.01), "gs-q"),
])
def test_infinite_epsilon_converges_to_reference(make, rule):
    problem = make()
    _, f_star = dpopt.reference_optimum(problem)
    res = _fit(problem, epsilon=math.inf, clip=math.inf, passes=600, rule=rule, random_state=0,
               checkpoint_every=600)
    assert res.epsilon == math.inf and res.noise_multiplier == 0
    assert (problem.objective(res.w) - f_star) <= 1e-9 * max(1.0, abs(f_star))


def test_first_iterate_is_sparse_and_last_iterate_returned():
    problem = _lasso(p=30)
    res = _fit(problem, epsilon=1.0, passes=6, random_state=0)
    assert np.count_nonzero(res.checkpoints[0]) == 0
    assert all(np.count_nonzero(c) <= t for t, c in enumerate(res.checkpoints))
    np.testing.assert_array_equal(res.w, res.checkpoints[-1])
    assert res.passes == 6 and res.n_iter == 6 and len(res.checkpoints) == 7


def test_exact_smoothness_warns():
    with pytest.warns(dpopt.PrivacyLeakWarning):
        dpopt.solve(_lasso(), "dp-gcd", epsilon=1.0, passes=2, random_state=0)


@pytest.mark.parametrize("options, match", [
    ({"passes": 0}, "passes"), ({"passes": 2.5}, "passes"), ({"step": -1.0}, "step"),
    ({"clip": math.inf}, "clip"), ({"clip": 0.0}, "clip"), ({"rule": "gs-x"}, "rule"),
    ({"rule": "gs-l"}, "gs-l"), ({"selection": "gauss"}, "selection"),
    ({"accountant": "exact"}, "accountant"), ({"selection_share": 1.0}, "selection_share"),
    ({"smoothness": np.ones(3)}, "smoothness"), ({"smoothness": "private"}, "smoothness"),
    ({"checkpoint_every": 0}, "checkpoint_every"), ({"rule": None}, "rule"),
])
def test_bad_input(options, match):
    problem = _lasso(penalty="l1")
    options = {"smoothness": problem.coordinate_smoothness(), **options}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
        with pytest.raises(ValueError, match=match):
            dpopt.solve(problem, "dp-gcd", epsilon=1.0, random_state=0, **options)


def test_bad_loss_and_epsilon():
    rng = np.random.default_rng(0)
    problem = dpopt.Problem(rng.standard_normal((20, 3)), rng.standard_normal(20), "absolute")
    with pytest.raises(ValueError, match="loss"):
        dpopt.solve(problem, "dp-gcd", epsilon=1.0, smoothness=np.ones(3))
    with pytest.raises(ValueError, match="epsilon"):
        dpopt.solve(_lasso(), "dp-gcd", epsilon=0.0, smoothness=np.ones(15))


# ---------------------------------------------------------------------------
# declarations for the registry-wide contract tests (tests/_declarations.py)


@crosscheck("dp-gcd", [
    (1.0, 1e-5, {"passes": 5}),
    (3.0, 1e-7, {"passes": 8, "accountant": "pld"}),
    (0.5, 1e-6, {"passes": 4, "selection": "laplace", "accountant": "rdp",
                 "selection_share": 0.3}),
], smoothness=lambda pb: np.ones(pb.dim))
def expected_epsilon(problem, o, res, eps_target):
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


@noise_spec("dp-gcd", {"passes": 12, "step": 0.7, "clip": 2.0, "smoothness": M_PUBLIC})
def zero_gradient_noise(problem, o, res):
    """X = 0: every greedy score is 0, so the Gumbel noise picks a coordinate uniformly;
    T = passes updates w_j -= (step / M_j) z (2 C_j / n) xi: DP-CD's structure with N = T."""
    return coordinate_noise(problem, o, res, steps=o["passes"])


# clipped_gradient_from_derivs(X, d, clips)
clip_off("dp-gcd")(unclipping(dp_gcd, clipped_gradient_from_derivs=(2,)))
