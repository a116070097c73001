"""Golden and property tests of the accountant (dpopt.privacy)."""

import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_mod
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from dpopt import privacy
from dpopt.privacy import ZCDP, Gaussian, Laplace, PureDP, SubsampledGaussian


def analytic_gaussian_delta(sigma, sens, eps):
    """Balle & Wang (2018), Theorem 8, written out independently."""
    a = sens / (2 * sigma) - eps * sigma / sens
    b = -sens / (2 * sigma) - eps * sigma / sens
    return norm.cdf(a) - math.exp(eps) * norm.cdf(b)


@pytest.mark.parametrize("z, steps, delta", [(1.0, 1, 1e-5), (5.0, 100, 1e-5),
                                             (107.0, 400, 2.3e-9), (0.7, 3, 1e-3)])
def test_gdp_matches_analytic_gaussian_mechanism(z, steps, delta):
    eps = privacy.epsilon_of([Gaussian(z, steps)], delta, accountant="exact")
    # composition of `steps` Gaussians with multiplier z = one with multiplier z / sqrt(steps)
    assert analytic_gaussian_delta(z / math.sqrt(steps), 1.0, eps) == pytest.approx(delta, rel=1e-6)
    assert dpa.get_epsilon_gaussian(z / math.sqrt(steps), delta) == pytest.approx(eps, rel=1e-6)


def test_heterogeneous_gaussians_compose_exactly():
    mechs = [Gaussian(2.0, 3), Gaussian(4.0, 10)]
    mu = math.sqrt(3 / 4 + 10 / 16)
    assert privacy.epsilon_of(mechs, 1e-6) == pytest.approx(privacy.gdp_epsilon(mu, 1e-6))
    pld = privacy.epsilon_of(mechs, 1e-6, accountant="pld")
    exact = privacy.epsilon_of(mechs, 1e-6)
    assert exact <= pld <= exact + 1e-3  # PLD is a tight upper bound


def test_rdp_closed_form_eq18_and_inverse():
    # eq. (18) of the DP-CD paper is the continuous-order optimum of N a / (2 z^2) + log(1/d)/(a-1)
    z, n, d = 6.38 * math.sqrt(400), 400, 1 / 20640 ** 2
    alphas = np.linspace(1.0001, 200, 2_000_000)
    brute = np.min(n * alphas / (2 * z * z) + math.log(1 / d) / (alphas - 1))
    assert privacy.rdp_gaussian_epsilon(z, n, d) == pytest.approx(brute, rel=1e-6)
    # values quoted in the paper notes: s / sqrt(N) = 6.38 (California), 6.62 (Electricity)
    assert privacy.rdp_gaussian_noise(1.0, 1 / 20640 ** 2, 400) / 20 == pytest.approx(6.38, abs=5e-3)
    assert privacy.rdp_gaussian_noise(1.0, 1 / 45312 ** 2, 400) / 20 == pytest.approx(6.62, abs=5e-3)
    z = privacy.rdp_gaussian_noise(0.9, 1e-6, 1234)
    assert privacy.rdp_gaussian_epsilon(z, 1234, 1e-6) <= 0.9


def test_paper_closed_form_is_never_below_numerical():
    for steps in (10, 400, 5000):
        paper = privacy.calibrate_gaussian(1.0, 1e-6, steps, accountant="paper").noise_multiplier
        rdp = privacy.calibrate_gaussian(1.0, 1e-6, steps, accountant="rdp").noise_multiplier
        exact = privacy.calibrate_gaussian(1.0, 1e-6, steps, accountant="exact").noise_multiplier
        assert paper >= rdp >= exact
    with pytest.raises(ValueError, match="epsilon <= 1"):
        privacy.calibrate_gaussian(2.0, 1e-6, 10, accountant="paper")


def test_published_dp_sgd_value():
    """TF-Privacy's README: N=60000, batch 256, sigma 1.1, 60 epochs, delta 1e-5 -> eps = 3.01
    with the classic RDP conversion over its order grid. Our accountants must reproduce the
    classic value from the same RDP curve and certify no more than it."""
    q, steps = 256 / 60000, math.ceil(60 * 60000 / 256)
    orders = [1.25, 1.5, 1.75, 2., 2.25, 2.5, 3., 3.5, 4., 4.5] + list(range(5, 64)) + [128, 256]
    curve = steps * rdp_mod._compute_rdp_poisson_subsampled_gaussian(q, 1.1, orders)
    classic = np.min(curve - math.log(1e-5) / (np.array(orders) - 1))
    assert classic == pytest.approx(3.01, abs=0.005)
    mech = [SubsampledGaussian(1.1, q, steps)]
    ours_rdp = privacy.epsilon_of(mech, 1e-5, adjacency="add-remove", accountant="rdp")
    ours_pld = privacy.epsilon_of(mech, 1e-5, adjacency="add-remove", accountant="pld")
    assert ours_pld < ours_rdp <= classic


def test_subsampling_at_rate_one_is_the_gaussian_mechanism():
    exact = privacy.epsilon_of([Gaussian(2.0, 10)], 1e-5)
    for adjacency in ("replace-one", "add-remove"):
        pld = privacy.epsilon_of([SubsampledGaussian(2.0, 1.0, 10)], 1e-5, adjacency=adjacency,
                                 accountant="pld")
        assert pld == pytest.approx(exact, abs=2e-3) and pld >= exact - 1e-9
    wor = privacy.epsilon_of([SubsampledGaussian(2.0, 1.0, 10, "without-replacement", 100)], 1e-5,
                             accountant="rdp")
    assert wor == pytest.approx(privacy.epsilon_of([Gaussian(2.0, 10)], 1e-5, accountant="rdp"))


def test_replace_one_poisson_matches_dp_accounting_directly():
    # our multiplier is sigma / (2C) under replace-one: dp-accounting's is sigma / C
    z, q, steps = 1.5, 0.01, 500
    acc = dpa.pld.PLDAccountant(dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(2 * z)), steps)
    ours = privacy.epsilon_of([SubsampledGaussian(z, q, steps)], 1e-6, accountant="pld")
    assert ours == pytest.approx(acc.get_epsilon(1e-6), rel=1e-3)


def test_mixed_composition_and_pure_dp():
    lap = privacy.epsilon_of([Laplace(10.0, 1)], 1e-6, accountant="pld")
    assert lap <= 0.1 + 1e-9
    assert privacy.epsilon_of([PureDP(0.1, 1)], 1e-6, accountant="pld") <= 0.1 + 1e-9
    mixed = privacy.epsilon_of([Laplace(10.0, 1), Gaussian(50.0, 100)], 1e-6)
    basic = 0.1 + privacy.epsilon_of([Gaussian(50.0, 100)], 1e-6)
    assert mixed < basic
    with pytest.raises(ValueError, match="'exact'"):
        privacy.epsilon_of([Laplace(10.0, 1)], 1e-6, accountant="exact")


def test_zcdp_conversion_round_trip():
    eps = privacy.zcdp_to_dp(0.5, 1e-5)
    assert eps <= 0.5 + 2 * math.sqrt(0.5 * math.log(1e5))  # classic bound is looser
    assert privacy.dp_to_zcdp(eps, 1e-5) == pytest.approx(0.5, rel=1e-6)
    assert privacy.epsilon_of([ZCDP(0.5)], 1e-5, accountant="auto") == pytest.approx(eps)


def test_calibration_inf_and_bad_arguments():
    cal = privacy.calibrate_gaussian(math.inf, 1e-5, 10)
    assert cal.noise_multiplier == 0.0
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="epsilon"):
            privacy.calibrate_gaussian(bad, 1e-5, 10)
    for bad in (0.0, 1.0, 2.0):
        with pytest.raises(ValueError, match="delta"):
            privacy.calibrate_gaussian(1.0, bad, 10)
    with pytest.raises(ValueError, match="adjacency"):
        privacy.epsilon_of([Gaussian(1.0)], 1e-5, adjacency="swap")
    with pytest.raises(ValueError, match="no replace-one analysis"):
        privacy.epsilon_of([SubsampledGaussian(1.0, 0.1, 3)], 1e-5, accountant="rdp")


@settings(max_examples=25, deadline=None)
@given(eps=st.floats(0.05, 20), log_delta=st.floats(-12, -2), steps=st.integers(1, 5000))
def test_gaussian_calibration_never_overshoots(eps, log_delta, steps):
    delta = 10 ** log_delta
    cal = privacy.calibrate_gaussian(eps, delta, steps)
    assert cal.epsilon <= eps
    assert privacy.epsilon_of([Gaussian(cal.noise_multiplier, steps)], delta) <= eps
    # and it is tight: 0.1% less noise would overshoot
    assert privacy.epsilon_of([Gaussian(cal.noise_multiplier * 0.999, steps)], delta) > eps


@settings(max_examples=8, deadline=None)
@given(eps=st.floats(0.2, 5), q=st.floats(0.005, 0.2), steps=st.integers(10, 300))
def test_subsampled_calibration_never_overshoots(eps, q, steps):
    cal = privacy.calibrate(lambda z: [SubsampledGaussian(z, q, steps)], eps, 1e-6)
    assert cal.epsilon <= eps
    assert privacy.epsilon_of([SubsampledGaussian(cal.noise_multiplier, q, steps)], 1e-6) <= eps


@settings(max_examples=40, deadline=None)
@given(z=st.floats(0.5, 50), steps=st.integers(1, 1000), factor=st.floats(1.01, 3))
def test_epsilon_is_monotone(z, steps, factor):
    d = 1e-6
    base = privacy.epsilon_of([Gaussian(z, steps)], d)
    assert privacy.epsilon_of([Gaussian(z * factor, steps)], d) <= base
    assert privacy.epsilon_of([Gaussian(z, steps + 1)], d) >= base
    assert privacy.epsilon_of([Gaussian(z, steps)], d * 2) <= base


def test_gdp_calibration_round_trips_below_the_target_at_extreme_budgets():
    """(session 48, an independent fuzz) delta(epsilon) of mu-GDP was a difference of two
    numbers agreeing to more digits than delta has at small mu: 1.9e-5 relative error at
    epsilon = 1.7e-6, delta = 1e-30; gdp_mu then certified mus whose true delta was above
    the target, and epsilon_spent_ came back above the requested epsilon (8e-9 relative;
    at epsilon = 1e-6 a regressor's own check refused the fit after its releases)."""
    from dpopt.privacy.accountants import gdp_delta, gdp_epsilon, gdp_mu

    for epsilon in (1e-6, 1.7e-6, 3.3e-5, 1e-3, 0.1, 1.0, 37.0, 100.0):
        for delta in (1e-30, 1.2e-30, 1e-20, 1e-12, 1e-6, 0.015, 0.3):
            mu = gdp_mu(epsilon, delta)
            assert gdp_delta(mu, epsilon) <= delta
            assert gdp_epsilon(mu, delta) <= epsilon, (epsilon, delta)
    mp = pytest.importorskip("mpmath")

    def exact(mu, eps):
        mu, eps = mp.mpf(mu), mp.mpf(eps)
        return mp.ncdf(-eps / mu + mu / 2) - mp.e ** eps * mp.ncdf(-eps / mu - mu / 2)

    with mp.workdps(50):  # (0.05, 1e-30): mu near 2e-3, just above the expansion's switch
        for epsilon, delta in ((1.7e-6, 1e-30), (1e-6, 1e-12), (1e-5, 1e-12), (0.05, 1e-30),
                               (1.0, 1e-10), (99.9, 1e-6)):
            mu = gdp_mu(epsilon, delta)
            true = exact(mu, epsilon)
            assert true <= delta  # a certified mu is (epsilon, delta)-DP in exact arithmetic
            assert abs(gdp_delta(mu, epsilon) / float(true) - 1) < 1e-9


def test_the_smallest_epsilons_spend_no_more_than_asked():
    import warnings

    import pandas as pd

    import dpopt

    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=400), "c": rng.choice(["u", "v", "w"], 400)})
    y = 2 * X["a"] + rng.normal(size=400)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = dpopt.DPLinearRegression(epsilon=1e-6, delta=1e-12, target_bounds=(-8, 8),
                                         random_state=0).fit(X, y)  # was a ChargedFitError
        encoder = dpopt.PrivateTableEncoder(epsilon=1.7e-6, delta=1.2e-30,
                                            random_state=0).fit(X)
    assert model.epsilon_spent_ <= 1e-6 and encoder.epsilon_spent_ <= 1.7e-6
