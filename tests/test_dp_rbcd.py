"""DP-RBCD (solver "dp-rbcd"): special cases, samplers, block steps, noise scale, bad input."""

import itertools
import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

import dpopt
from _broken_variants import unclipping
from _declarations import clip_off, crosscheck, noise_spec, one_step
from _independent_accounting import eq18_epsilon_numeric, gaussian_epsilon
from _noise_checks import M_PUBLIC, coordinate_noise, eso_noise
from dpopt._core.exceptions import PrivacyLeakWarning
from dpopt.privacy import calibrate_gaussian, epsilon_of
from dpopt.solvers.dp_rbcd import (
    BernoulliSampler,
    FullSampler,
    ImportanceSampler,
    NiceSampler,
    UniformSampler,
    block_clip_norms,
    make_sampler,
    pass_ends,
)


def solve(pb, solver, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return dpopt.solve(pb, solver, **kw)


def imbalanced_problem(loss="squared", penalty="l1", sparse=False, intercept=True, n=120, p=6,
                       seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p)) * np.logspace(-1, 1, p)
    if sparse:
        X = X * (rng.random((n, p)) < 0.5)
        X = sp.csc_matrix(X)
    y = X @ rng.standard_normal(p) + 0.3 * rng.standard_normal(n)
    if loss == "logistic":
        y = np.where(y > np.median(y), 1.0, -1.0)
    return dpopt.Problem(X, y, loss, penalty, alpha=0.02, fit_intercept=intercept)


def same_bits(a, b):
    return a.shape == b.shape and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------------------
# special cases, bit for bit

CASES = list(itertools.product([False, True], [("squared", "l1"), ("logistic", "l2")],
                               [1.0, math.inf]))


@pytest.mark.parametrize("sparse, lp, eps", CASES)
def test_uniform_single_coordinate_is_dp_cd_bit_for_bit(sparse, lp, eps):
    pb = imbalanced_problem(*lp, sparse=sparse)
    kw = dict(epsilon=eps, delta=1e-5, random_state=7, passes=6, step=0.8, clip=3.0,
              checkpoint_every=2)
    ref = solve(pb, "dp-cd", **kw)
    for extra in ({}, {"sampling": "uniform"}, {"sampling": "nice", "block_size": 1},
                  {"sampling": UniformSampler(pb.dim)}):
        got = solve(pb, "dp-rbcd", **kw, **extra)
        assert same_bits(got.w, ref.w), extra
        assert same_bits(got.checkpoints, ref.checkpoints), extra
        assert (got.epsilon, got.noise_multiplier, got.n_iter) == \
               (ref.epsilon, ref.noise_multiplier, ref.n_iter)
        assert got.mechanisms == ref.mechanisms


@pytest.mark.parametrize("sparse, lp, eps", CASES)
def test_full_set_is_dp_gd_bit_for_bit(sparse, lp, eps):
    pb = imbalanced_problem(*lp, sparse=sparse)
    kw = dict(epsilon=eps, delta=1e-5, random_state=11, passes=9, step=1.5, clip=2.0)
    ref = solve(pb, "dp-gd", clipping="coordinate", step_rule="eso", **kw)
    for extra in ({"sampling": "full"}, {"sampling": "nice", "block_size": pb.dim},
                  {"sampling": "bernoulli", "block_size": pb.dim}):
        got = solve(pb, "dp-rbcd", **kw, **extra)
        assert same_bits(got.w, ref.w), extra
        assert same_bits(got.checkpoints, ref.checkpoints), extra
        assert (got.epsilon, got.noise_multiplier, got.n_iter) == \
               (ref.epsilon, ref.noise_multiplier, ref.n_iter)


def test_special_case_tests_can_fail():
    """A different seed or step changes the result: the equalities above are not vacuous."""
    pb = imbalanced_problem()
    kw = dict(epsilon=1.0, delta=1e-5, passes=3)
    a = solve(pb, "dp-cd", random_state=1, **kw)
    assert not same_bits(a.w, solve(pb, "dp-rbcd", random_state=2, **kw).w)
    assert not same_bits(a.w, solve(pb, "dp-rbcd", random_state=1, step=0.9, **kw).w)
    b = solve(pb, "dp-gd", clipping="coordinate", step_rule="eso", random_state=1, **kw)
    assert not same_bits(b.w, solve(pb, "dp-rbcd", sampling="nice", block_size=pb.dim - 1,
                                    random_state=1, **kw).w)


def test_sparse_and_dense_kernels_agree_on_blocks():
    pb_s = imbalanced_problem(sparse=True)
    pb_d = dpopt.Problem(pb_s.X.toarray()[:, :-1], pb_s.y, "squared", "l1", alpha=0.02,
                         fit_intercept=True)
    kw = dict(epsilon=2.0, delta=1e-5, random_state=3, passes=5, sampling="nice", block_size=3,
              omega=pb_d.dim)
    np.testing.assert_allclose(solve(pb_s, "dp-rbcd", **kw).checkpoints,
                               solve(pb_d, "dp-rbcd", **kw).checkpoints, rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------------------
# samplers

def all_samplers(p=7):
    M = np.logspace(-2, 1, p)
    return {
        "uniform": UniformSampler(p),
        "importance-M": make_sampler("importance", p, smoothness=M),
        "importance-sqrt": make_sampler("importance-sqrt", p, smoothness=M),
        "importance-user": make_sampler("importance", p, probabilities=np.arange(1, p + 1)),
        "nice-3": NiceSampler(p, 3),
        "nice-6": NiceSampler(p, 6),
        "bernoulli": BernoulliSampler(np.linspace(0.05, 0.9, p)),
        "full": FullSampler(p),
    }


@pytest.mark.parametrize("name", list(all_samplers()))
def test_sampler_empirical_marginals(name):
    """Inclusion counts over N draws against Binomial(N, p_j).

    Two-sided normal test on every coordinate at level 1e-4 / p (Bonferroni):
    false-alarm rate <= 1e-4 per sampler (the seed is fixed, so the outcome is too).
    """
    sampler, N = all_samplers()[name], 40_000
    p = sampler.dim
    indptr, indices = sampler.draw_many(np.random.default_rng(2024), N)
    sizes = np.diff(indptr)
    assert indptr[0] == 0 and indptr.shape == (N + 1,)
    for k in range(0, N, 997):  # sets: sorted, distinct, in range
        s = indices[indptr[k]:indptr[k + 1]]
        assert np.all(np.diff(s) > 0) and (s.size == 0 or (s[0] >= 0 and s[-1] < p))
    q = sampler.marginals()
    assert q.shape == (p,) and np.all(q > 0) and np.all(q <= 1)
    assert np.isclose(q.sum(), sampler.expected_size)
    assert sizes.max() <= sampler.max_size
    counts = np.bincount(indices, minlength=p)
    if np.all(q == 1.0):
        assert np.all(counts == N)
        return
    zscores = (counts - N * q) / np.sqrt(N * q * (1 - q))
    assert np.max(np.abs(zscores)) < stats.norm.isf(1e-4 / (2 * p))
    # and a wrong claim would be detected: marginals off by 5% of a coordinate's own value
    wrong = q.copy()
    wrong[np.argmax(q)] *= 1.05
    zw = (counts - N * wrong) / np.sqrt(N * wrong * (1 - np.minimum(wrong, 0.999)))
    assert np.max(np.abs(zw)) > stats.norm.isf(1e-4 / (2 * p))


def test_sampler_shapes_of_blocks():
    rng = np.random.default_rng(0)
    indptr, _ = NiceSampler(9, 4).draw_many(rng, 50)
    assert np.all(np.diff(indptr) == 4)
    indptr, _ = UniformSampler(9).draw_many(rng, 50)
    assert np.all(np.diff(indptr) == 1)
    b = BernoulliSampler(np.full(5, 0.1))
    indptr, _ = b.draw_many(rng, 5000)
    empty = np.mean(np.diff(indptr) == 0)
    assert abs(empty - b.empty_probability) < 5 * math.sqrt(0.59 * 0.41 / 5000)  # 0.9^5 = 0.59
    assert list(pass_ends(NiceSampler(9, 4), 9, 5)) == [0, 3, 5, 7, 9, 12]
    assert list(pass_ends(UniformSampler(9), 9, 3)) == [0, 9, 18, 27]
    assert list(pass_ends(FullSampler(9), 9, 3)) == [0, 1, 2, 3]
    assert list(pass_ends(BernoulliSampler(np.full(9, 0.25)), 9, 2)) == [0, 4, 8]


def test_block_clip_norms():
    clips = np.array([0.5, 1.0, 2.0, 0.25])
    C = float(np.linalg.norm(clips))
    indptr = np.array([0, 1, 3, 3, 7])
    indices = np.array([2, 0, 3, 0, 1, 2, 3])
    got = block_clip_norms(indptr, indices, clips, C)
    np.testing.assert_allclose(got, [2.0, math.hypot(0.5, 0.25), 0.0, C], rtol=1e-15)
    assert got[0] == clips[2] and got[3] == C


# ---------------------------------------------------------------------------
# block steps are safe (epsilon = inf)

STABLE = [("uniform", {}), ("importance", {}), ("importance-sqrt", {}),
          ("nice", {"block_size": 3}), ("nice", {"block_size": 6}),
          ("bernoulli", {"block_size": 3}), ("bernoulli", {"block_size": 3,
                                                          "block_smoothness": "max"}),
          ("full", {})]


def correlated_problem(loss, sparse=False):
    """Strongly correlated, imbalanced columns: naive block steps 1/M_j diverge here."""
    rng = np.random.default_rng(5)
    n, p = 300, 8
    X = (0.8 * rng.standard_normal((n, 1)) + 0.6 * rng.standard_normal((n, p))) \
        * np.logspace(-1, 1, p)
    if sparse:
        X = sp.csc_matrix(X * (rng.random((n, p)) < 0.7))
    y = X @ rng.standard_normal(p) + 0.1 * rng.standard_normal(n)
    if loss == "logistic":
        y = np.where(y > np.median(y), 1.0, -1.0)
        return dpopt.Problem(X, y, "logistic", "l2", alpha=0.05)
    return dpopt.Problem(X, y, "squared", "l1", alpha=0.05)


@pytest.mark.parametrize("loss, sparse", [("squared", False), ("squared", True),
                                          ("logistic", False)])
@pytest.mark.parametrize("sampling, extra", STABLE)
def test_block_steps_never_diverge_without_noise(loss, sparse, sampling, extra):
    pb = correlated_problem(loss, sparse)
    _, fstar = dpopt.reference_optimum(pb)
    r = solve(pb, "dp-rbcd", epsilon=math.inf, clip=math.inf, passes=150, sampling=sampling,
              random_state=0, **extra)
    F = r.objective_trajectory(pb)
    gap0 = F[0] - fstar
    # every pass decreases F (each step satisfies the descent lemma), up to rounding
    assert np.all(np.diff(F) <= 1e-12 * max(1.0, abs(fstar)))
    assert (F[-1] - fstar) <= 0.05 * gap0


def test_naive_block_steps_would_diverge():
    """The ESO matters: telling the solver the per-coordinate M_j / tau (i.e. steps
    1 / M_j on tau-blocks) makes the same problem blow up, so the test above can fail."""
    pb = correlated_problem("squared")
    M = pb.coordinate_smoothness()
    r = solve(pb, "dp-rbcd", epsilon=math.inf, clip=math.inf, passes=40, sampling="nice",
              block_size=6, smoothness=M / 6, random_state=0)
    assert r.objective_trajectory(pb)[-1] > 1e6 * pb.objective(pb.zeros())


# ---------------------------------------------------------------------------
# privacy: noise scale and accounting

def zero_gradient_problem():
    """Every clipped per-sample term is +-C_j in cancelling pairs, so g = 0 exactly and
    each block update is pure noise: Delta w_j = -gamma_j(S) sigma_S eta_j."""
    rng = np.random.default_rng(9)
    m, p = 10, 4
    base = rng.choice([-1.0, 1.0], (m, p)) * (1 + rng.random((m, p))) * np.array([0.5, 1, 2, 3])
    X = np.repeat(base, 2, axis=0)
    y = np.tile([1e4, -1e4], m)
    return dpopt.Problem(X, y, "squared", None)


def subset_law(sampler):
    """(S, P(S)) for every set in the sampler's support (small p)."""
    p = sampler.dim
    if isinstance(sampler, FullSampler):
        return [(tuple(range(p)), 1.0)]
    if isinstance(sampler, UniformSampler | ImportanceSampler):
        return [((j,), q) for j, q in enumerate(sampler.marginals())]
    if isinstance(sampler, NiceSampler):
        sets = list(itertools.combinations(range(p), sampler.tau))
        return [(s, 1.0 / len(sets)) for s in sets]
    q = sampler.marginals()
    out = []
    for mask in itertools.product([0, 1], repeat=p):
        prob = float(np.prod(np.where(mask, q, 1 - q)))
        out.append((tuple(j for j in range(p) if mask[j]), prob))
    return out


@pytest.mark.parametrize("sampling, extra", [("uniform", {}), ("importance", {}),
                                             ("nice", {"block_size": 2}),
                                             ("bernoulli", {"probabilities": [.3, .6, .2, .5]}),
                                             ("full", {})])
def test_noise_scale_matches_claimed_sigma(sampling, extra):
    """Per-pass increments of each coordinate have variance
    k * sum_S P(S) 1{j in S} gamma_j(S)^2 sigma_S^2 with sigma_S = z 2 ||C_S||_2 / n.

    The increments are Gaussian scale mixtures (random number of hits per pass) with
    kurtosis below 15 here, so the sample variance of N = 6000 of them has relative
    sd below 0.05; the tolerance 0.25 is > 5 sd: false-alarm rate below 1e-4 per
    coordinate. Noise too small by a factor 1.16 in std (0.75 in variance) fails.
    """
    pb = zero_gradient_problem()
    n, p, C, step, N = pb.n_samples, pb.dim, 1.0, 0.7, 6000
    r = solve(pb, "dp-rbcd", epsilon=1.0, delta=1e-5, random_state=4, passes=N, step=step,
              clip=C, sampling=sampling, checkpoint_every=1, **extra)
    incr = np.diff(r.checkpoints, axis=0)
    M = pb.coordinate_smoothness()
    clips = C * np.sqrt(M / M.sum())
    sampler = make_sampler(sampling, p, smoothness=M, **extra)
    k = r.params["steps_per_pass"]
    z = r.noise_multiplier
    claimed = np.zeros(p)
    for S, prob in subset_law(sampler):
        if not S:
            continue
        sigma = z * 2 * np.linalg.norm(clips[list(S)]) / n
        for j in S:
            claimed[j] += k * prob * (step / (len(S) * M[j]) * sigma) ** 2
    ratio = incr.var(axis=0) / claimed
    assert np.all(np.abs(ratio - 1) < 0.25), ratio
    # and the multiplier is the one the accountant certified for all the steps
    assert r.n_iter == round(N * k) == math.ceil(N * p / sampler.expected_size - 1e-9)
    assert z == calibrate_gaussian(1.0, 1e-5, r.n_iter).noise_multiplier
    assert epsilon_of(r.mechanisms, 1e-5) <= 1.0 + 1e-9


def test_gradient_really_is_zero_on_the_noise_problem():
    pb = zero_gradient_problem()
    clips = 1.0 * np.sqrt(pb.coordinate_smoothness() / pb.coordinate_smoothness().sum())
    from dpopt.kernels.grad import coordclip_gradient
    w = np.random.default_rng(0).standard_normal(pb.dim)
    g = coordclip_gradient(pb.X, pb.y, pb.loss.code, pb.loss.param, pb.margins(w), clips)
    assert np.all(g == 0.0)


def test_privacy_report_and_empty_steps_are_counted():
    pb = imbalanced_problem()
    r = solve(pb, "dp-rbcd", epsilon=0.5, delta=1e-6, random_state=0, passes=4,
              sampling="bernoulli", probabilities=np.full(pb.dim, 0.05))
    k = r.params["steps_per_pass"]
    assert k == 20  # p / E|S| = 1 / 0.05
    assert r.params["empty_steps"] > 0
    assert r.n_iter == 4 * k and r.mechanisms[0].count == 4 * k  # empty steps included
    assert r.epsilon <= 0.5 and r.adjacency == "replace-one" and r.accountant == "exact"
    assert r.epsilon == pytest.approx(epsilon_of(r.mechanisms, 1e-6, accountant="exact"))
    for acc in ("rdp", "pld"):
        ra = solve(pb, "dp-rbcd", epsilon=0.5, delta=1e-6, random_state=0, passes=2,
                   sampling="nice", block_size=2, accountant=acc)
        assert ra.epsilon <= 0.5 and ra.accountant == acc


def test_same_seed_same_result_other_seed_other_result():
    pb = imbalanced_problem(sparse=True)
    kw = dict(epsilon=1.0, delta=1e-5, passes=4, sampling="bernoulli", block_size=2.5, omega=7)
    a = solve(pb, "dp-rbcd", random_state=123, **kw)
    b = solve(pb, "dp-rbcd", random_state=123, **kw)
    c = solve(pb, "dp-rbcd", random_state=124, **kw)
    assert same_bits(a.checkpoints, b.checkpoints)
    assert not np.array_equal(a.w, c.w)


def test_user_sampler_is_used_and_validated():
    pb = imbalanced_problem()
    p = pb.dim

    class Halves:  # duck-typed: the first or second half of the coordinates
        def marginals(self):
            return np.full(p, 0.5)

        def draw(self, rng):
            return np.arange(p // 2) if rng.random() < 0.5 else np.arange(p // 2, p)

    r = solve(pb, "dp-rbcd", epsilon=1.0, delta=1e-5, random_state=0, passes=3,
              sampling=Halves())
    assert r.params["steps_per_pass"] == 2 and r.params["coordinate_updates"] == 3 * p
    r = solve(pb, "dp-rbcd", epsilon=1.0, delta=1e-5, random_state=0, passes=2,
              sampling="nice", block_size=3)
    assert r.n_iter == 5 and r.params["coordinate_updates"] == 15  # ceil(2 * 7 / 3) steps

    class Delegate:  # a user object drawing exactly like the uniform sampler
        def marginals(self):
            return np.full(p, 1 / p)

        def draw(self, rng):
            raise AssertionError("draw_many is preferred")

        def draw_many(self, rng, k):
            return UniformSampler(p).draw_many(rng, k)

    kw = dict(epsilon=1.0, delta=1e-5, random_state=5, passes=3)
    assert same_bits(solve(pb, "dp-rbcd", sampling=Delegate(), **kw).w,
                     solve(pb, "dp-cd", **kw).w)


def make_bad(marginals=None, draw=None):
    class Bad:
        pass
    bad = Bad()
    if marginals is not None:
        bad.marginals = marginals
    if draw is not None:
        bad.draw = draw
    return bad


P = 7  # dim of imbalanced_problem() (6 features + intercept)
BAD = [
    ({"sampling": "blocks"}, "sampling must be one of"),
    ({"sampling": 3}, "sampling must be one of"),
    ({"sampling": "nice"}, "needs block_size"),
    ({"sampling": "nice", "block_size": 0}, "block_size must be a positive integer"),
    ({"sampling": "nice", "block_size": 2.0}, "block_size must be a positive integer"),
    ({"sampling": "nice", "block_size": P + 1}, "block_size must be <= p"),
    ({"sampling": "uniform", "block_size": 2}, "block_size is only used"),
    ({"sampling": "full", "probabilities": np.ones(P)}, "probabilities is only used"),
    ({"sampling": "importance", "probabilities": np.ones(P - 1)}, "probabilities must be"),
    ({"sampling": "importance", "probabilities": np.r_[0.0, np.ones(P - 1)]}, "> 0"),
    ({"sampling": "importance", "probabilities": np.r_[np.nan, np.ones(P - 1)]}, "finite"),
    ({"sampling": "importance", "probabilities": "M"}, "probabilities must be"),
    ({"sampling": "bernoulli"}, "exactly one of"),
    ({"sampling": "bernoulli", "probabilities": np.full(P, 1.5)}, "<= 1"),
    ({"sampling": "bernoulli", "block_size": 0.0}, "block_size must be > 0"),
    ({"sampling": "bernoulli", "block_size": P + 1.0}, "block_size must be <="),
    ({"sampling": UniformSampler(P + 1)}, "sampling has dim"),
    ({"sampling": make_bad(draw=lambda rng: [0])}, "has no marginals"),
    ({"sampling": make_bad(marginals=lambda: np.full(P, 0.5))}, "has no draw"),
    ({"sampling": make_bad(lambda: np.full(P - 1, 0.5), lambda rng: [0])}, r"marginals\(\)"),
    ({"sampling": make_bad(lambda: np.full(P, 0.5), lambda rng: [P])}, "outside"),
    ({"sampling": make_bad(lambda: np.full(P, 0.5), lambda rng: [1, 1])}, "distinct"),
    ({"sampling": make_bad(lambda: np.full(P, 0.5), lambda rng: [0.5])}, "integer array"),
    ({"sampling": make_bad(lambda: np.full(P, 0.5), lambda rng: [[0]])}, "1-D integer"),
    ({"block_smoothness": "tau"}, "block_smoothness must be one of"),
    ({"omega": 0}, "omega must be a positive integer"),
    ({"accountant": "moments"}, "accountant must be one of"),
    ({"clip": math.inf}, "clip must be finite when epsilon is finite"),
    ({"step": 0.0}, "step must be > 0"),
    ({"passes": 0}, "passes must be a positive integer"),
    ({"smoothness": np.ones(3)}, "smoothness must have shape"),
    ({"checkpoint_every": -1}, "checkpoint_every must be a positive integer"),
]


@pytest.mark.parametrize("kwargs, match", BAD)
def test_bad_input_raises_value_error_and_changes_nothing(kwargs, match):
    pb = imbalanced_problem()
    X0, y0 = pb.X.copy(), pb.y.copy()
    with pytest.raises(ValueError, match=match):
        solve(pb, "dp-rbcd", **{"epsilon": 1.0, "delta": 1e-5, "random_state": 0, "passes": 2,
                                **kwargs})
    assert np.array_equal(pb.X, X0) and np.array_equal(pb.y, y0)


def test_importance_needs_positive_smoothness():
    pb = imbalanced_problem()
    M = pb.coordinate_smoothness().copy()
    M[2] = 0.0
    with pytest.raises(ValueError, match="M_j > 0"):
        solve(pb, "dp-rbcd", epsilon=1.0, delta=1e-5, sampling="importance", smoothness=M)


def test_privacy_leak_warnings():
    pb = imbalanced_problem(sparse=True)
    M = pb.coordinate_smoothness()
    kw = dict(epsilon=1.0, delta=1e-5, random_state=0, passes=1, smoothness=M)
    with pytest.warns(PrivacyLeakWarning, match="omega"):
        dpopt.solve(pb, "dp-rbcd", sampling="nice", block_size=2, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        dpopt.solve(pb, "dp-rbcd", sampling="nice", block_size=2, omega=pb.dim, **kw)
        dpopt.solve(pb, "dp-rbcd", sampling="uniform", **kw)  # singletons never need omega
    with pytest.warns(PrivacyLeakWarning, match="smoothness"):
        dpopt.solve(pb, "dp-rbcd", epsilon=1.0, delta=1e-5, random_state=0, passes=1)


def test_registered():
    assert "dp-rbcd" in dpopt.available_solvers()
    assert dpopt.get_solver("dp-rbcd").family == "dp-rbcd"


# ---------------------------------------------------------------------------
# declarations for the registry-wide contract tests (tests/_declarations.py)


@crosscheck("dp-rbcd", [
    (1.0, 1e-5, {"passes": 3}),
    (3.0, 1e-7, {"passes": 4, "sampling": "nice", "block_size": 2, "accountant": "rdp"}),
    (0.7, 1e-6, {"passes": 2, "sampling": "bernoulli", "block_size": 1.5,
                 "accountant": "paper"}),
    (2.0, 1e-3, {"passes": 5, "sampling": "full", "accountant": "pld"}),
], smoothness=lambda pb: np.ones(pb.dim))
def expected_epsilon(problem, o, res, eps_target):
    """N = ceil(passes p / E|S|) Gaussian block steps: exact GDP, eq. (18) at z ("rdp",
    "paper") or a pessimistic upper bound of the exact value ("pld")."""
    p = problem.dim
    sampling = o.get("sampling", "uniform")
    expected_size = {"uniform": 1.0, "importance": 1.0, "importance-sqrt": 1.0,
                     "full": float(p)}.get(sampling, o.get("block_size"))
    steps = math.ceil(o["passes"] * p / expected_size - 1e-9)
    z, d = res.noise_multiplier, res.delta
    acc = o.get("accountant", "exact")
    if acc in ("rdp", "paper"):
        v = eq18_epsilon_numeric(z, steps, d)
        return v * (1 - 1e-7), v * (1 + 1e-7)
    v = gaussian_epsilon(z, steps, d)
    return (v - 1e-8 * max(1, v), v + 1e-8 * max(1, v)) if acc == "exact" else \
        (v - 1e-9, v + 2e-3)


# uniform sampling is DP-CD's update; full sampling is DP-GD's eso step
noise_spec("dp-rbcd", {"passes": 10, "step": 0.7, "clip": 2.0, "smoothness": M_PUBLIC})(
    coordinate_noise)
noise_spec("dp-rbcd", {"passes": 3, "step": 1.0, "clip": 1.0, "smoothness": M_PUBLIC,
                       "sampling": "full"})(eso_noise)
# _run_pass(problem, z, w, indptr, indices, noise, sigma, scale, incremental, step, M, clips)
clip_off("dp-rbcd")(unclipping(dpopt.data.steps, _run_pass=(11,)))  # as MarginBlockSteps calls it
one_step("dp-rbcd", passes=1, smoothness=np.ones(1))  # p = 1: one coordinate step
