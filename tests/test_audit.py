"""Empirical privacy audit (dpopt.api.audit): every registered private solver is audited,
and deliberately broken variants are caught.

Statistical guarantees. Each audit's lower bound holds with probability >= 95%
(Clopper-Pearson, ``confidence=0.95``), so for a correct solver a single audit
exceeds the claimed epsilon with probability <= 5%; in practice the
final-iterate test is far from tight and the bounds stay well below the claim
(docs/privacy.md). All seeds are fixed, so the outcomes are deterministic.
The power tests use settings where the broken variants' bounds sit >= 0.7
above the claim across seeds 0..5 (measured when the defaults were chosen).
"""

import math

import numpy as np
import pytest
from scipy import stats

import _declarations as D
import dpopt
from _broken_variants import noise_scaled, private_families
from dpopt.api import audit as A
from dpopt.cli import main
from dpopt.privacy import gdp_delta, gdp_epsilon

PRIVATE = dpopt.available_solvers(private_only=True)
D.load()


def run_audit(name, fit=None, **kwargs):
    """Audit solver ``name`` (or ``fit``, a variant of it) with its registered settings."""
    kwargs = {**A.AUDIT_OPTIONS[name], **kwargs}
    return A.audit(fit or name, canary=A.AUDIT_CANARY.get(name), **kwargs)


# -- coverage ---------------------------------------------------------------------


def test_every_private_solver_has_audit_options():
    missing = [s for s in PRIVATE if s not in A.AUDIT_OPTIONS]
    assert not missing, (f"registered private solvers without quick-audit options: {missing}; "
                         f"declare them with register_solver(..., audit={{...}})")


def test_every_private_solver_states_its_mechanism_and_sensitivity():
    missing = [s for s in PRIVATE if not (dpopt.get_solver(s).mechanism.strip()
                                          and dpopt.get_solver(s).sensitivity.strip())]
    assert not missing, (f"private solvers that do not state what they release: {missing}; "
                         f"declare register_solver(..., mechanism=..., sensitivity=...)")


def test_every_private_family_has_a_clipping_variant():
    missing = [f for f in private_families() if f not in D.CLIP_OFF]
    assert not missing, (f"families without a clipping-disabled variant: {missing}; declare "
                         f"one in the family's test module with _declarations.clip_off "
                         f"(or no_clipping)")


def test_declarations_name_registered_private_solvers():
    """A declaration under a misspelt name would leave its solver unchecked."""
    tables = {"crosscheck": D.CROSSCHECKS, "noise_spec": D.NOISE_SPECS,
              "custom_noise_test": D.CUSTOM_NOISE_TESTS,
              "noise_scale_undetectable": D.NOISE_SCALE_UNDETECTABLE, "one_step": D.ONE_STEP}
    unknown = {what: sorted(set(table) - set(PRIVATE)) for what, table in tables.items()}
    unknown["clip_off"] = sorted(set(D.CLIP_OFF) - set(private_families()))
    unknown["required_options"] = sorted(set(D.REQUIRED_OPTIONS) - set(dpopt.available_solvers()))
    assert not any(unknown.values()), unknown


# -- statistics -------------------------------------------------------------------


@pytest.mark.parametrize("k,n", [(0, 10), (3, 50), (49, 50), (50, 50), (7, 1000)])
def test_clopper_pearson_matches_scipy_exact_interval(k, n):
    # the one-sided 97.5% upper bound is the upper end of the two-sided 95% exact interval
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact").high
    assert math.isclose(A.clopper_pearson_upper(k, n, 0.975), ref, rel_tol=1e-9, abs_tol=1e-12)


def test_epsilon_lower_bound_formula():
    assert A.epsilon_lower_bound(0.5, 0.5, 0.0) == 0.0
    assert math.isclose(A.epsilon_lower_bound(0.01, 0.5, 0.0), math.log(0.5 / 0.01))
    assert math.isclose(A.epsilon_lower_bound(0.5, 0.01, 1e-3), math.log(0.499 / 0.01))
    assert A.epsilon_lower_bound(0.0, 0.3, 0.0) == math.inf


def test_bound_never_exceeds_a_gaussian_mechanisms_true_epsilon():
    """Coverage of the whole procedure on an exactly known mechanism: scores
    N(0,1) vs N(mu,1) are mu-GDP; over 200 independent audits the bound must
    exceed the true epsilon in at most 5% (it should essentially never)."""
    rng = np.random.default_rng(0)
    mu, delta, n = 2.0, 1e-3, 600
    true_eps = gdp_epsilon(mu, delta)
    exceed, best = 0, 0.0
    for _ in range(200):
        lb = A.empirical_epsilon(rng.normal(0, 1, n), rng.normal(mu, 1, n), delta)[0]
        exceed += lb > true_eps
        best = max(best, lb)
    assert exceed <= 10
    assert best > 2.5  # and it has power (300 held-out runs cap the bound near 5)


def test_bound_detects_a_mechanism_with_more_leakage_than_claimed():
    rng = np.random.default_rng(1)
    claimed_mu, real_mu, delta = 0.7, 4.0, 1e-3
    lb = A.empirical_epsilon(rng.normal(0, 1, 2000), rng.normal(real_mu, 1, 2000), delta)[0]
    assert lb > gdp_epsilon(claimed_mu, delta)
    assert gdp_delta(real_mu, lb) > delta  # sanity: the bound is below the real epsilon


def test_empirical_epsilon_rejects_bad_scores():
    with pytest.raises(ValueError, match="finite"):
        A.empirical_epsilon([0, 1, np.nan, 2], [0, 1, 2, 3], 1e-3)
    with pytest.raises(ValueError, match="at least 4"):
        A.empirical_epsilon([0, 1], [0, 1], 1e-3)


# -- canaries ---------------------------------------------------------------------


@pytest.mark.parametrize("loss", ["squared", "huber", "absolute", "logistic"])
@pytest.mark.parametrize("adjacency", ["replace-one", "add-remove"])
def test_canary_pair_has_worst_case_clipped_gradients(loss, adjacency):
    pair = A.canary_problems(n_samples=20, n_features=3, loss=loss, adjacency=adjacency,
                             scale=10.0)
    w = np.zeros(3)
    clip = 1.0
    from dpopt.kernels.grad import l2clip_gradient

    g0, g1 = (l2clip_gradient(d.X, d.y, d.row_norms, d.loss.code, d.loss.param, d.margins(w),
                              clip) * d.n_samples for d in (pair.d0, pair.d1))
    gap = g1 - g0
    expected = 2 * clip if adjacency == "replace-one" else clip
    # the sums of clipped gradients differ by the full sensitivity, along -direction
    assert np.allclose(gap, -expected * pair.direction)
    # and the public constants the solvers may compute are identical on D0 and D1
    if adjacency == "replace-one":
        assert np.allclose(pair.d0.coordinate_smoothness(), pair.d1.coordinate_smoothness())
        assert np.isclose(pair.d0.global_smoothness(), pair.d1.global_smoothness())


def test_audit_rejects_bad_arguments():
    with pytest.raises(ValueError, match="not private"):
        A.audit("reference", n_runs=4)
    with pytest.raises(ValueError, match="solver must be"):
        A.audit("no-such-solver", n_runs=4)
    with pytest.raises(ValueError, match="n_runs"):
        A.audit("dp-cd", n_runs=2)
    with pytest.raises(ValueError, match="random_state"):
        A.audit("dp-cd", n_runs=4, random_state=None)
    with pytest.raises(ValueError, match="adjacency"):
        A.audit("dp-cd", n_runs=4, canary={"adjacency": "add-remove"})


# -- the quick audit of every solver ----------------------------------------------


@pytest.mark.parametrize("name", PRIVATE)
def test_quick_audit_is_consistent_with_the_claim(name):
    res = run_audit(name, n_runs=500, random_state=0)  # the table uses the default 1000
    assert res.epsilon <= A.DEFAULT_EPSILON * (1 + 1e-12)
    assert res.delta == A.DEFAULT_DELTA
    assert res.epsilon_lb <= res.epsilon, res.summary()


@pytest.mark.parametrize("name", PRIVATE)
def test_quick_audit_catches_noise_divided_by_4(name):
    if name in D.NOISE_SCALE_UNDETECTABLE:
        pytest.skip(D.NOISE_SCALE_UNDETECTABLE[name])
    res = run_audit(name, noise_scaled(name, 0.25), random_state=0)
    assert res.epsilon_lb > res.epsilon, res.summary()


def test_every_solver_has_a_variant_the_audit_catches():
    for name in PRIVATE:
        if name in D.NOISE_SCALE_UNDETECTABLE:
            assert D.CLIP_OFF.get(dpopt.get_solver(name).family) is not None, \
                f"{name}: neither noise / 4 nor a clipping variant can be audited"


@pytest.mark.parametrize("name", PRIVATE)
def test_quick_audit_catches_disabled_clipping(name):
    variant = D.CLIP_OFF[dpopt.get_solver(name).family]
    if variant is None:
        pytest.skip(f"{name} has no per-sample clipping")
    with variant():
        # 400 runs: with Poisson sampling the canary may miss every batch (1/16 for DP-SGD)
        res = run_audit(name, n_runs=400, random_state=0)
    assert res.epsilon_lb > res.epsilon, res.summary()


def test_clipping_variant_restores_the_solver():
    name = PRIVATE[0]
    variant = D.CLIP_OFF[dpopt.get_solver(name).family]
    if variant is None:
        pytest.skip("no clipping variant")
    with variant():
        pass
    assert run_audit(name, n_runs=100, random_state=0).consistent


def test_cli_audit(capsys):
    assert main(["audit", "dp-cd", "--runs", "40", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "empirical epsilon lower bound" in out and "dp-cd" in out
    assert main(["audit", "reference", "--runs", "40"]) == 2
    assert main(["audit", "objective-perturbation", "--canary", "curvature", "--runs", "100"]) == 0
    out = capsys.readouterr().out
    assert "(curvature)" in out and "consistent with" in out
    assert main(["audit", "adassp", "--canary", "curvature", "--runs", "40"]) == 2
    assert "--canary curvature needs a solver of the Huber loss" in capsys.readouterr().err


# -- objective perturbation's curvature (shift) term -----------------------------------


def test_curvature_canary_changes_the_hessian_and_not_the_gradient_at_zero():
    pair = A.curvature_canary_problems(n_samples=20, scale=1.0)
    w = np.zeros(1)
    from dpopt.kernels.grad import l2clip_gradient

    g0, g1 = (l2clip_gradient(d.X, d.y, d.row_norms, d.loss.code, d.loss.param, d.margins(w),
                              math.inf) for d in (pair.d0, pair.d1))
    assert np.array_equal(g0, g1) and not g1.any()
    # the canary sits in the Huber loss's quadratic zone (its residual 0 < the threshold 1):
    # the trace of the loss's Hessian x x^T is a^2 = 1 on D1 and 0 on D0
    d1 = pair.d1
    assert d1.loss.name == "huber" and np.max(np.abs(d1.margins(w) - d1.y)) < d1.loss.param
    assert [float((d.X * d.X).sum()) for d in (pair.d0, d1)] == [0.0, 1.0]
    assert pair.adjacency == "replace-one"
    with pytest.raises(ValueError, match="n_samples"):
        A.curvature_canary_problems(n_samples=1)


def test_objective_perturbation_shift_term_is_audited(monkeypatch):
    """The curvature canary exercises the Jacobian term the saturated canary cannot: the
    correct calibration is consistent, one that undercounts kappa a thousandfold (its lambda
    a thousand times too small for the shift it claims) is caught (seeds 0-5: correct
    0.00-0.59, broken 2.92-3.95 against the claimed 2)."""
    import dpopt.solvers.objective_perturbation as OP

    def run():
        OP.calibrate_objective_perturbation.cache_clear()
        return A.audit("objective-perturbation", problem_factory=A.curvature_canary_problems,
                       statistic=A.near_zero, n_runs=2000, row_bound=1.0, random_state=0)

    res = run()
    assert res.epsilon_lb <= res.epsilon, res.summary()
    kappa = OP.jacobian_kappa
    monkeypatch.setattr(OP, "jacobian_kappa", lambda *a: kappa(*a) / 1000)
    try:
        weak = run()
    finally:
        monkeypatch.undo()
        OP.calibrate_objective_perturbation.cache_clear()
    assert weak.epsilon_lb > weak.epsilon, weak.summary()


# -- thorough audit (opt-in) ------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", PRIVATE)
def test_thorough_audit(name):
    """5000 runs per dataset: consistent at delta = 1e-5, 1e-3 and 1e-2, and a noise/2
    variant (e.g. a forgotten factor 2 in the replace-one sensitivity) is caught at
    (2, 1e-2), where the correct Gaussian mechanism is 0.90-GDP and the broken one 1.79-GDP
    (at delta = 1e-3 its bound only just clears 2)."""
    for delta in (1e-5, A.DEFAULT_DELTA, 1e-2):
        res = run_audit(name, n_runs=5000, delta=delta, random_state=11)
        assert res.epsilon_lb <= res.epsilon, res.summary()
    if name in D.NOISE_SCALE_UNDETECTABLE:
        return
    res = run_audit(name, noise_scaled(name, 0.5), n_runs=5000, delta=1e-2, random_state=12)
    assert res.epsilon_lb > res.epsilon, res.summary()


@pytest.mark.slow
def test_thorough_audit_add_remove_dp_sgd():
    # under add-remove the data-dependent smoothness differs between D0 and D1: pass it
    opts = {**A.AUDIT_OPTIONS["dp-sgd"], "adjacency": "add-remove",
            "smoothness": A.canary_problems(adjacency="add-remove").d1.global_smoothness()}
    res = A.audit("dp-sgd", n_runs=3000, canary={"adjacency": "add-remove"}, random_state=13,
                  **opts)
    assert res.adjacency == "add-remove"
    assert res.epsilon_lb <= res.epsilon, res.summary()
    weak = A.audit(noise_scaled("dp-sgd", 0.25), n_runs=3000,
                   canary={"adjacency": "add-remove"}, random_state=14, **opts)
    assert weak.epsilon_lb > weak.epsilon, weak.summary()


@pytest.mark.parametrize("n_columns", [2, 1])
def test_selection_score_release_passes_the_audit_and_its_broken_variant_is_caught(n_columns):
    """The default path's held-out selection (dpopt.pipeline.selection): its score release at the
    claimed budget is consistent; with a quarter of the noise it is caught. One column: a
    classifier's model accuracy alone, against a rate released on all rows."""
    from dpopt.api.release_audits import audit_selection

    ok = audit_selection(n_runs=1000, n_columns=n_columns)
    assert ok.consistent and ok.epsilon == pytest.approx(2.0, rel=1e-6), ok.summary()
    broken = audit_selection(n_runs=1000, noise_scale=0.25, n_columns=n_columns)
    assert not broken.consistent, broken.summary()


@pytest.mark.parametrize("name", ["audit_adassp_gram", "audit_adassp_eigenvalue"])
def test_adassp_s_partial_releases_pass_their_audits_and_broken_variants_are_caught(name):
    """AdaSSP's X^T X and lambda_min releases, each at its own share of a fit at epsilon = 2
    (the solver's audit canary +-e_1 moves X^T y only, so it could not catch too little noise
    on them: an independent audit, session 31). The claim is the release's own epsilon."""
    from dpopt.api import release_audits

    audit = getattr(release_audits, name)
    ok = audit(n_runs=1000)
    assert ok.consistent and 0.1 < ok.epsilon < 2.0, ok.summary()
    broken = audit(n_runs=1000, noise_scale=0.25)
    assert not broken.consistent, broken.summary()


def test_the_constant_released_in_pieces_passes_its_audit_and_its_broken_variant_is_caught():
    """The mean on a wider range released in three pieces (dpopt.pipeline.constant.
    release_in_pieces: mu_k^2 in proportion to the pieces' widths, summing to mu^2): their sum
    is consistent at the claimed budget of one release at mu, and caught with a quarter of
    the noise."""
    from dpopt.api.release_audits import audit_constant

    ok = audit_constant(n_runs=1000, pieces=True)
    assert ok.consistent and ok.epsilon == pytest.approx(2.0, rel=1e-6), ok.summary()
    broken = audit_constant(n_runs=1000, pieces=True, noise_scale=0.25)
    assert not broken.consistent, broken.summary()


@pytest.mark.parametrize("name", ["audit_class_scores", "audit_constant",
                                  "audit_pooled_histogram", "audit_gap_histogram",
                                  "audit_multinomial_step", "audit_inference_gram"])
def test_a_single_release_passes_its_audit_and_its_broken_variant_is_caught(name):
    """The default path's single releases (dpopt.api.release_audits): the k >= 3 held-out
    class scores (sensitivity sqrt(3)/m), a regressor's constant on all rows, the target's
    histogram released again and pooled, a regressor's held-out histogram of prediction
    gaps, the multinomial model's DP-GD step. Each is consistent at the claimed budget and
    caught with a quarter of the noise."""
    from dpopt.api import release_audits

    audit = getattr(release_audits, name)
    ok = audit(n_runs=1000)
    assert ok.consistent and ok.epsilon == pytest.approx(2.0, rel=1e-6), ok.summary()
    broken = audit(n_runs=1000, noise_scale=0.25)
    assert not broken.consistent, broken.summary()
