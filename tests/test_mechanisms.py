"""Every noise draw has the distribution and scale the accounting assumes; clipping bounds
every contribution.

Statistical tests. Each check is a Kolmogorov-Smirnov test of the shape plus a
second-moment z-test of the scale (KS alone is weak against a scale error),
each at ALPHA = 1e-3, so a correct mechanism fails a check with probability
about 2e-3 (false alarm); selection frequencies use a chi-square test at ALPHA.
Seeds are fixed, so outcomes are deterministic. With 400 standardised draws a
noise scale 20% too small gives z ~ 5 in the moment test (rejected with
probability > 0.99); ``test_noise_test_catches_too_little_noise`` checks it.

Solver noise. Each registered private solver is run on a *zero-gradient*
problem (X = 0, public smoothness constants), so its iterates move only by its
noise. The solver's test module declares (``_declarations.noise_spec``), from the
solver's docstring, how the final iterate is built from the standard-normal draws
and the noise multiplier z it reports (sigma = z * sensitivity); the test
standardises the iterates with that formula and checks that the result is N(0, 1).
Too little (or too much) noise, or a sensitivity that disagrees with the docstring,
fails. A solver whose noise does not reach the iterate that way declares its own
check (``custom_noise_test``). A registered private solver without either fails
``test_every_private_solver_has_a_noise_spec``.

Selections (report-noisy-max) and mean oracles arrive with DP-GCD and the
heavy-tailed solvers, Gaussian releases of statistics with dpopt.preprocessing:
add them as one ``pytest.param`` in SELECTIONS / MEAN_ORACLES; the helpers compare
them with a reference implementation of the paper's mechanism written here with numpy.
"""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

import _declarations as D
import dpopt
from _noise_checks import ALPHA, LAPLACE, NORMAL, assert_distribution, zero_problem
from dpopt.kernels.cd import cd_steps_once
from dpopt.kernels.grad import coordclip_gradient, l2clip_gradient, l2clip_weights
from dpopt.privacy.mechanisms import gaussian_noise, laplace_noise

PRIVATE = dpopt.available_solvers(private_only=True)
D.load()


def assert_frequencies(counts, probs, what):
    """Chi-square goodness of fit of selection counts at level ALPHA (cells with
    expected count < 5 are pooled)."""
    counts, probs = np.asarray(counts, float), np.asarray(probs, float)
    expected = probs / probs.sum() * counts.sum()
    small = expected < 5
    if small.any():
        counts = np.append(counts[~small], counts[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
    p = stats.chisquare(counts, expected).pvalue
    assert p > ALPHA, f"{what}: chi-square p = {p:.2e}"


# ---------------------------------------------------------------------------
# the primitive samplers


def test_gaussian_and_laplace_primitives_have_the_stated_scale():
    rng = np.random.default_rng(0)
    assert_distribution(gaussian_noise(rng, 3.7, 4000) / 3.7, NORMAL, "gaussian_noise")
    assert_distribution(laplace_noise(rng, 0.3, 4000) / 0.3, LAPLACE, "laplace_noise")
    # vector scales apply per coordinate
    scale = np.array([0.1, 1.0, 50.0])
    draws = np.array([gaussian_noise(rng, scale, 3) for _ in range(1500)]) / scale
    assert_distribution(draws, NORMAL, "gaussian_noise, per-coordinate scales")


def test_ks_helper_can_fail():
    rng = np.random.default_rng(1)
    with pytest.raises(AssertionError, match="second moment"):
        assert_distribution(rng.normal(0, 0.9, 2000), NORMAL, "10% too little noise")
    with pytest.raises(AssertionError, match="KS"):
        assert_distribution(rng.laplace(0, 1 / math.sqrt(2), 2000), NORMAL, "Laplace, var 1")


# ---------------------------------------------------------------------------
# solver noise on a zero-gradient problem


def test_every_private_solver_has_a_noise_spec():
    missing = [s for s in PRIVATE if s not in D.NOISE_SPECS and s not in D.CUSTOM_NOISE_TESTS]
    assert not missing, (f"declare how the noise reaches the iterate of {missing} with "
                         f"_declarations.noise_spec (or custom_noise_test) in its test module")


NOISE_CASES = [pytest.param(name, i, id=f"{name}-{i}") for name in D.NOISE_SPECS if name in PRIVATE
               for i in range(len(D.NOISE_SPECS[name]))]


def _run_zero_gradient(name, opts, runs, sparse=False, scale_noise=1.0):
    smoothness = opts.get("smoothness", 1.0)
    p = np.size(smoothness) if np.ndim(smoothness) else 3
    problem = zero_problem(p=p, sparse=sparse)
    out = []
    for seed in range(runs):
        rng = np.random.default_rng([seed, 77])
        if scale_noise != 1.0:
            from _broken_variants import ScaledNoiseGenerator
            rng = ScaledNoiseGenerator([seed, 77], scale_noise)
        res = dpopt.solve(problem, name, epsilon=1.0, delta=1e-5, random_state=rng, **opts)
        out.append(res)
    return problem, out


def _statistics(name, i, results, problem):
    opts, spec = D.NOISE_SPECS[name][i]
    pieces = [spec(problem, opts, r) for r in results]
    return [(np.array([np.ravel(pc[k][0]) for pc in pieces]), pieces[0][k][1])
            for k in range(len(pieces[0]))]


@pytest.mark.parametrize("name, i", NOISE_CASES)
def test_solver_noise_has_the_claimed_scale(name, i):
    opts = D.NOISE_SPECS[name][i][0]
    problem, results = _run_zero_gradient(name, opts, runs=700)
    for k, (values, cdf) in enumerate(_statistics(name, i, results, problem)):
        assert_distribution(values, cdf, f"{name} noise, statistic {k}")


@pytest.mark.parametrize("name", [n for n in D.CUSTOM_NOISE_TESTS if n in PRIVATE])
def test_solver_noise_custom(name):
    D.CUSTOM_NOISE_TESTS[name]()


@pytest.mark.parametrize("name", [n for n in D.NOISE_SPECS if n in PRIVATE])
def test_noise_test_catches_too_little_noise(name):
    """The same test fails for the solver run with 80% of its noise (power check)."""
    opts = D.NOISE_SPECS[name][0][0]
    problem, results = _run_zero_gradient(name, opts, runs=400, scale_noise=0.8)
    with pytest.raises(AssertionError, match="KS|second moment"):
        for values, cdf in _statistics(name, 0, results, problem):
            assert_distribution(values, cdf, f"{name} with 80% noise")


@pytest.mark.parametrize("name", [n for n in D.NOISE_SPECS if n in PRIVATE])
def test_sparse_input_draws_the_same_noise(name):
    opts = D.NOISE_SPECS[name][0][0]
    _, dense = _run_zero_gradient(name, opts, runs=3)
    _, sparse = _run_zero_gradient(name, opts, runs=3, sparse=True)
    for a, b in zip(dense, sparse):
        np.testing.assert_allclose(a.w, b.w, rtol=1e-12, atol=0)


# ---------------------------------------------------------------------------
# selections (report-noisy-max) and mean oracles: helpers + reference mechanisms


def reference_gumbel_max(rng, scores, scale):
    """Exponential mechanism through the Gumbel-max trick: P(j) ~ exp(scores_j / scale)."""
    return int(np.argmax(scores + rng.gumbel(0.0, scale, np.shape(scores))))


def reference_laplace_noisy_max(rng, scores, scale):
    """Report-noisy-max with Laplace(scale) noise (Dwork & Roth, Claim 3.9)."""
    return int(np.argmax(scores + rng.laplace(0.0, scale, np.shape(scores))))


def selection_counts(select, scores, scale, draws, seed):
    rng = np.random.default_rng(seed)
    counts = np.zeros(len(scores), dtype=np.int64)
    for _ in range(draws):
        counts[select(rng, np.asarray(scores), scale)] += 1
    return counts


#: (select(rng, scores, scale) -> index, reference, kind): kind "probabilities" when the
#: reference returns the exact selection probabilities, "sampler" when it is a reference
#: implementation with the same contract (its frequencies are estimated from 60000 draws).
def _dpopt_rnm(noise):
    def select(rng, scores, scale):
        from dpopt.privacy.mechanisms import report_noisy_max
        return report_noisy_max(scores, scale, rng, noise=noise)
    return select


SELECTIONS = [
    pytest.param(reference_gumbel_max, lambda s, b: np.exp((s - np.max(s)) / b),
                 "probabilities", id="gumbel-max"),
    pytest.param(reference_laplace_noisy_max, reference_laplace_noisy_max, "sampler",
                 id="laplace-noisy-max"),
    pytest.param(_dpopt_rnm("gumbel"), lambda s, b: np.exp((s - np.max(s)) / b),
                 "probabilities", id="dpopt.report_noisy_max-gumbel"),
    pytest.param(_dpopt_rnm("laplace"), reference_laplace_noisy_max, "sampler",
                 id="dpopt.report_noisy_max-laplace"),
]


@pytest.mark.parametrize("select, reference, kind", SELECTIONS)
def test_selection_frequencies(select, reference, kind):
    scores, scale = np.array([0.0, 0.5, 1.0, 1.2, -2.0]), 0.7
    counts = selection_counts(select, scores, scale, 6000, seed=3)
    if kind == "sampler":
        ref = selection_counts(reference, scores, scale, 60000, seed=4)
        assert_frequencies(counts, ref / ref.sum(), "selection vs reference sampler")
    else:
        assert_frequencies(counts, reference(scores, scale), "selection vs exact probabilities")


def test_selection_helper_can_fail():
    scores = np.array([0.0, 0.5, 1.0, 1.2, -2.0])
    counts = selection_counts(reference_gumbel_max, scores, 0.7 / 2, 6000, seed=3)  # half noise
    with pytest.raises(AssertionError, match="chi-square"):
        assert_frequencies(counts, np.exp((scores - scores.max()) / 0.7), "half noise")


def reference_mean_oracle(rng, Z, clip, rho):
    """MeanOracle1 (heavy-tailed paper, Alg. 1): mean of the rows clipped to the L2 ball of
    radius C, plus N(0, sigma^2 I) with sigma = (2C/s) / sqrt(2 rho) (rho-zCDP, replace-one)."""
    s = Z.shape[0]
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    clipped = Z * np.minimum(1.0, clip / np.maximum(norms, 1e-300))
    return clipped.mean(axis=0) + rng.normal(0.0, 2 * clip / s / math.sqrt(2 * rho), Z.shape[1])


def l2_clipped_mean(Z, clip):
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    return (Z * np.minimum(1.0, clip / np.maximum(norms, 1e-300))).mean(axis=0)


def median_of_clipped_means(Z, clip, groups=3):
    """MeanOracle2's estimate: coordinate-wise clip to [-tau, tau], means of `groups`
    consecutive groups, median over the groups."""
    return np.median(np.clip(Z, -clip, clip).reshape(groups, -1, Z.shape[1]).mean(axis=1),
                     axis=0)


def _dpopt_mean_oracle1(rng, Z, clip, rho):
    from dpopt.solvers.heavy_tailed.oracles import (
    MeanOracle1,
)
    return MeanOracle1(clip, Z.shape[0], rho)(rng, Z)


def _dpopt_mean_oracle2(rng, Z, clip, rho):
    from dpopt.solvers.heavy_tailed.oracles import (
    MeanOracle2,
)
    return MeanOracle2(clip, Z.shape[0], 3, Z.shape[1], rho)(rng, Z)


def _histogram_release(rng, Z, clip, rho):
    """dpopt.preprocessing's release: noisy per-feature histograms on the public grid,
    mu-GDP with mu = sqrt(2 rho) (same Gaussian mechanism as rho-zCDP)."""
    from dpopt.preprocessing import release_histograms
    return release_histograms(Z, np.arange(Z.shape[1]), math.sqrt(2 * rho), rng)[0].ravel()


def _exact_histograms(Z, clip):
    from dpopt.preprocessing import DEFAULT_GRID
    return np.array([np.bincount(DEFAULT_GRID.bin_index(Z[:, j]), minlength=DEFAULT_GRID.n_bins)
                     for j in range(Z.shape[1])], dtype=float).ravel()


def _moment_release(which):
    """dpopt.preprocessing.release_clipped_moments with public bounds [-C, C]: T1 (sum of
    clipped x / 2C) or T2 (sum of (clipped x / 2C)^2), mu = sqrt(2 rho)."""
    def oracle(rng, Z, clip, rho):
        from dpopt.preprocessing import release_clipped_moments
        d = Z.shape[1]
        return release_clipped_moments(Z, np.full(d, -clip), np.full(d, clip),
                                       math.sqrt(2 * rho), rng)[which]

    def estimate(Z, clip):
        u = np.clip(Z, -clip, clip) / (2 * clip)
        return (u if which == 0 else u * u).sum(axis=0)
    return oracle, estimate


#: (oracle(rng, Z, clip, rho) -> noisy estimate, estimate(Z, clip) without noise,
#:  sensitivity(s, d, clip) under replace-one); sigma = sensitivity / sqrt(2 rho) (rho-zCDP)
MEAN_ORACLES = [
    pytest.param(reference_mean_oracle, l2_clipped_mean, lambda s, d, c: 2 * c / s,
                 id="MeanOracle1-reference"),
    pytest.param(_dpopt_mean_oracle1, l2_clipped_mean, lambda s, d, c: 2 * c / s,
                 id="heavy_tailed.oracles.MeanOracle1"),
    pytest.param(_dpopt_mean_oracle2, median_of_clipped_means,
                 lambda s, d, c: 2 * c * 3 * math.sqrt(d) / s, id="heavy_tailed.oracles.MeanOracle2"),
    pytest.param(_histogram_release, _exact_histograms, lambda s, d, c: math.sqrt(2 * d),
                 id="dpopt.preprocessing.release_histograms"),
    pytest.param(*_moment_release(0), lambda s, d, c: math.sqrt(d),
                 id="dpopt.preprocessing.release_clipped_moments-T1"),
    pytest.param(*_moment_release(1), lambda s, d, c: math.sqrt(d) / 4,
                 id="dpopt.preprocessing.release_clipped_moments-T2"),
]


@pytest.mark.parametrize("oracle, estimate, sensitivity", MEAN_ORACLES)
def test_mean_oracle_noise_and_clipping(oracle, estimate, sensitivity):
    rng = np.random.default_rng(5)
    Z = rng.standard_t(2.5, size=(30, 4)) * 10  # heavy tails: most rows get clipped
    clip, rho = 2.0, 0.3
    sigma = sensitivity(*Z.shape, clip) / math.sqrt(2 * rho)
    out = np.array([oracle(rng, Z, clip, rho) for _ in range(800)])
    assert_distribution((out - estimate(Z, clip)) / sigma, NORMAL, "mean oracle")


@settings(max_examples=40, deadline=None)
@given(data=st.data(), which=st.integers(0, len(MEAN_ORACLES) - 1))
def test_mean_oracle_sensitivity(data, which):
    """Without noise (rho = inf) replacing one row moves the estimate by at most the
    sensitivity the noise is calibrated to."""
    oracle, _, sensitivity = MEAN_ORACLES[which].values
    d = data.draw(st.integers(1, 4))
    Z = data.draw(hnp.arrays(np.float64, (6, d), elements=finite))
    row = data.draw(hnp.arrays(np.float64, (d,), elements=finite))
    i, clip = data.draw(st.integers(0, 5)), data.draw(st.floats(1e-3, 1e3))
    Z2 = Z.copy()
    Z2[i] = row
    rng = np.random.default_rng(0)
    gap = np.linalg.norm(oracle(rng, Z, clip, math.inf) - oracle(rng, Z2, clip, math.inf))
    assert gap <= sensitivity(6, d, clip) * (1 + 1e-9)


# ---------------------------------------------------------------------------
# clipping bounds every contribution (kernels/grad.py and kernels/cd.py)

# |values| in [1e-100, 1e6] or 0 (dpopt.Problem rejects entries whose squares underflow)
finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False).map(
    lambda v: 0.0 if abs(v) < 1e-100 else v)


def _pair(X, y, i, row, label, sparse, loss="squared"):
    """Problems D and D' that differ in record i (replace-one)."""
    X2, y2 = X.copy(), y.copy()
    X2[i], y2[i] = row, label
    make = (lambda A: sp.csr_matrix(A)) if sparse else (lambda A: A)
    return dpopt.Problem(make(X), y, loss), dpopt.Problem(make(X2), y2, loss)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(1, 8), p=st.integers(1, 5), sparse=st.booleans(),
       loss=st.sampled_from(["squared", "huber", "absolute", "logistic"]))
def test_clipped_gradients_have_the_stated_sensitivity(data, n, p, sparse, loss):
    X = data.draw(hnp.arrays(np.float64, (n, p), elements=finite))
    labels = st.sampled_from([-1.0, 1.0]) if loss == "logistic" else finite
    y = np.array(data.draw(st.lists(labels, min_size=n, max_size=n)))
    i = data.draw(st.integers(0, n - 1))
    row = data.draw(hnp.arrays(np.float64, (p,), elements=finite))
    label = data.draw(labels)
    w = data.draw(hnp.arrays(np.float64, (p,), elements=st.floats(-10, 10)))
    C = data.draw(st.floats(1e-3, 1e3))
    clips = C * data.draw(hnp.arrays(np.float64, (p,), elements=st.floats(0.0, 1.0)))
    d0, d1 = _pair(X, y, i, row, label, sparse, loss)
    z0, z1 = d0.margins(w), d1.margins(w)
    tol = 1 + 1e-9
    # L2 clipping: every per-sample weight * ||x_i|| <= C, and ||g - g'|| <= 2C/n
    code, param = d0.loss.code, d0.loss.param
    for d, z in ((d0, z0), (d1, z1)):
        weights = l2clip_weights(d.y, d.row_norms, code, param, z, C)
        assert np.all(np.abs(weights) * d.row_norms <= C * tol + 1e-300)
    gap = np.linalg.norm(l2clip_gradient(d0.X, d0.y, d0.row_norms, code, param, z0, C)
                         - l2clip_gradient(d1.X, d1.y, d1.row_norms, code, param, z1, C))
    assert gap <= 2 * C / n * tol
    # coordinate clipping: |g_j - g'_j| <= 2 C_j / n for every j
    g0 = coordclip_gradient(d0.X, d0.y, code, param, z0, clips)
    gap_j = np.abs(g0 - coordclip_gradient(d1.X, d1.y, code, param, z1, clips))
    assert np.all(gap_j <= 2 * clips / n * tol + 1e-300)
    # and it is the brute-force clipped average
    deriv = d0.loss.deriv(z0, d0.y)
    brute = np.clip(deriv[:, None] * X, -clips, clips).mean(axis=0)
    np.testing.assert_allclose(g0, brute, rtol=1e-9, atol=1e-12 * (1 + C))


@settings(max_examples=40, deadline=None)
@given(data=st.data(), n=st.integers(1, 8), p=st.integers(1, 4), sparse=st.booleans(),
       penalty=st.sampled_from([{}, {"penalty": "l1", "alpha": 0.3},
                                {"penalty": "l2", "alpha": 2.0},
                                {"penalty": "box", "lower": -0.1, "upper": 0.2}]))
def test_one_cd_step_moves_at_most_step_times_sensitivity(data, n, p, sparse, penalty):
    X = data.draw(hnp.arrays(np.float64, (n, p), elements=finite))
    y = data.draw(hnp.arrays(np.float64, (n,), elements=finite))
    i = data.draw(st.integers(0, n - 1))
    row = data.draw(hnp.arrays(np.float64, (p,), elements=finite))
    label = data.draw(finite)
    j = data.draw(st.integers(0, p - 1))
    clips = data.draw(hnp.arrays(np.float64, (p,), elements=st.floats(1e-3, 1e3)))
    steps = data.draw(hnp.arrays(np.float64, (p,), elements=st.floats(1e-3, 1e3)))
    d0, d1 = _pair(X, y, i, row, label, sparse)
    out = []
    for d in (d0, d1):
        d = dpopt.Problem(d.X, d.y, "squared", **penalty) if penalty else d
        w = np.zeros(p)
        z = d.margins(w)
        cd_steps_once(d.X, d.y, d.loss.code, d.loss.param, d.penalty.arrays, z, w, np.array([j]),
                      np.zeros(1), steps, clips, np.zeros(p))
        out.append(w[j])
    assert abs(out[0] - out[1]) <= steps[j] * 2 * clips[j] / n * (1 + 1e-9)


@pytest.mark.parametrize("name", [n for n in D.ONE_STEP if n in PRIVATE])
def test_solvers_keep_clipping_with_extreme_records(name):
    """One step of a solver (``_declarations.one_step``) on D and D' (one record replaced by
    a record with a gradient ~1e12), same seed so the noise cancels: the iterates differ by
    at most step * 2C / n, the sensitivity the noise is calibrated to."""
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((30, 1)), rng.standard_normal(30)
    X2, y2 = X.copy(), y.copy()
    X2[0], y2[0] = 1e6, -1e6
    a, b = (dpopt.solve(dpopt.Problem(A, v), name, epsilon=1.0, clip=1.0, step=0.5,
                        random_state=3, **D.ONE_STEP[name]) for A, v in ((X, y), (X2, y2)))
    assert np.all(np.isfinite(b.w))
    assert np.linalg.norm(a.w - b.w) <= 0.5 * 2 * 1.0 / 30 * (1 + 1e-9), name
