"""Private hyperparameter selection (Papernot & Steinke 2022)."""

import math
import warnings

import numpy as np
import pytest
from sklearn.model_selection import ParameterGrid

import dpopt
from dpopt import ChargedFitError
from dpopt.api.tuning import (
    ORDERS,
    PrivateHyperparameterSearch,
    rdp_curve,
    sample_repetitions,
    selection_epsilon,
    truncated_negative_binomial_gamma,
)
from dpopt.privacy import Gaussian, Laplace, calibrate_gaussian, epsilon_of


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return X, y


PUBLIC = {"smoothness": np.full(5, 0.25)}


@pytest.mark.parametrize("dist, eta", [("truncated-negative-binomial", 1.0),
                                       ("truncated-negative-binomial", 0.0),
                                       ("poisson", 1.0)])
def test_repetitions_have_the_requested_mean(dist, eta):
    # 4000 draws; tolerance 5 standard errors (false-alarm rate < 1e-6 by the CLT)
    rng = np.random.default_rng(1)
    ks = np.array([sample_repetitions(rng, dist, 5.0, eta) for _ in range(4000)])
    assert abs(ks.mean() - 5.0) < 5 * ks.std() / math.sqrt(len(ks))
    if dist != "poisson":
        assert ks.min() >= 1  # truncated: at least one run


def test_tnb_total_matches_the_theorem_by_hand():
    # Q = Gaussian mechanism with multiplier z: RDP(lambda) = lambda / (2 z^2), computed by hand.
    z, delta, mean, eta = 3.0, 1e-6, 8.0, 1.0
    curve = rdp_curve([Gaussian(z)])
    np.testing.assert_allclose(curve, ORDERS / (2 * z * z), rtol=1e-12)
    gamma = truncated_negative_binomial_gamma(mean, eta)
    assert gamma == pytest.approx(1 / mean)  # geometric: E[K] = 1/gamma
    lam = ORDERS
    inner = np.min(2 * (1 - 1 / lam) * lam / (2 * z * z) + 2 * math.log(1 / gamma) / lam)
    eps_prime = lam / (2 * z * z) + inner + math.log(mean) / (lam - 1)
    by_hand = np.min(eps_prime + np.log1p(-1 / lam) - np.log(delta * lam) / (lam - 1))
    got = selection_epsilon(curve, delta, distribution="truncated-negative-binomial",
                            mean_repetitions=mean, eta=eta)
    assert got == pytest.approx(by_hand, rel=1e-9)
    single = epsilon_of([Gaussian(z)], delta)
    assert single < got < mean * single  # costs more than one run, far less than E[K] runs


def test_total_grows_with_repetitions():
    cal = calibrate_gaussian(1.0, 1e-7, 50)
    curve = rdp_curve([Gaussian(cal.noise_multiplier, 50), Laplace(10.0)])
    totals = [selection_epsilon(curve, 1e-6, distribution="truncated-negative-binomial",
                                mean_repetitions=m) for m in (2, 5, 20, 100)]
    assert np.all(np.diff(totals) > 0)


@pytest.mark.parametrize("dist", ["truncated-negative-binomial", "poisson"])
def test_search_reports_and_records_its_total(dist):
    X, y = _data()
    acc = dpopt.BudgetAccountant(epsilon=10.0, delta=1e-5)
    est = dpopt.DPLogisticRegression(solver="dp-cd", epsilon=0.5, delta=1e-7, solver_options=PUBLIC)
    grid = {"alpha": [1e-3, 1e-1], "solver_options": [dict(PUBLIC, passes=p) for p in (2, 8)]}
    search = PrivateHyperparameterSearch(est, grid, distribution=dist, mean_repetitions=4,
                                         random_state=0, accountant=acc, delta=1e-6)
    search.fit(X, y)
    (entry,) = acc.ledger  # inner fits are not recorded separately
    assert entry.epsilon == search.epsilon_spent_ and entry.delta == 1e-6
    assert 0.6 < search.epsilon_spent_ < 4 * 0.6 * 2
    if search.n_repetitions_ > 0:
        assert search.best_params_ in list(ParameterGrid(grid))
        assert search.score(X, y) > 0.6
    again = PrivateHyperparameterSearch(est, grid, distribution=dist, mean_repetitions=4,
                                        random_state=0, delta=1e-6).fit(X, y)
    assert again.n_repetitions_ == search.n_repetitions_
    assert again.best_score_ == search.best_score_  # same seed, same search


def test_search_refused_over_budget_runs_nothing():
    X, y = _data()
    acc = dpopt.BudgetAccountant(epsilon=0.5, delta=1e-5)
    est = dpopt.DPLogisticRegression(solver="dp-cd", epsilon=0.5, delta=1e-7, solver_options=PUBLIC)
    search = PrivateHyperparameterSearch(est, {"alpha": [1e-3, 1e-2]}, random_state=0,
                                         accountant=acc)
    with pytest.raises(dpopt.BudgetExceededError):
        search.fit(X, y)
    assert acc.ledger == [] and not hasattr(search, "n_repetitions_")
    assert not hasattr(search, "n_features_in_")


def test_inner_leaks_are_reported():
    X, y = _data()
    est = dpopt.DPLogisticRegression(solver="dp-cd", epsilon=0.5, delta=1e-7,  # smoothness from
                                     classes=np.unique(y))  # the data; labels declared
    search = PrivateHyperparameterSearch(est, {"alpha": [1e-3]}, mean_repetitions=2,
                                         random_state=1)
    with pytest.warns(dpopt.PrivacyLeakWarning, match="smoothness"):
        search.fit(X, y)
    assert len(search.privacy_leaks_) == 1


@pytest.mark.filterwarnings("ignore::dpopt.PrivacyLeakWarning")
def test_noisy_score_has_the_claimed_laplace_scale():
    # the score mechanism: mean of m values in [0, 1] + Laplace(1 / (m * score_epsilon)).
    # A perfect classifier has score 1 exactly, so the spread is the noise alone; its
    # standard deviation must be sqrt(2) b. 3000 draws, 10% tolerance: the sample std of
    # Laplace noise has relative SE about 0.035, so a false alarm needs a ~3 SE deviation.
    X, y = _data(200)
    est = dpopt.DPLogisticRegression(solver="dp-cd", epsilon=math.inf).fit(X, y)
    search = PrivateHyperparameterSearch(est, {}, score_epsilon=0.5)
    keep = est.predict(X) == y
    rng = np.random.default_rng(0)
    draws = np.array([search._noisy_score(est, X[keep], y[keep], rng) for _ in range(3000)])
    b = 1.0 / (keep.sum() * 0.5)
    assert abs(draws.mean() - 1.0) < 5 * math.sqrt(2) * b / math.sqrt(3000)
    assert draws.std() == pytest.approx(math.sqrt(2) * b, rel=0.10)


def test_search_argument_errors():
    X, y = _data()
    reg = dpopt.DPLasso()
    with pytest.raises(ValueError, match="score_clip"):
        PrivateHyperparameterSearch(reg, {"alpha": [1.0]}).fit(X, y.astype(float))
    clf = dpopt.DPLogisticRegression()
    with pytest.raises(ValueError, match="distribution"):
        PrivateHyperparameterSearch(clf, {"alpha": [1.0]}, distribution="uniform").fit(X, y)
    with pytest.raises(ValueError, match="mean_repetitions"):
        PrivateHyperparameterSearch(clf, {"alpha": [1.0]}, mean_repetitions=0.5).fit(X, y)
    with pytest.raises(ValueError, match="Poisson"):  # DP-SGD: no replace-one RDP analysis
        PrivateHyperparameterSearch(
            dpopt.DPLogisticRegression(solver="dp-sgd", solver_options={"smoothness": 1.0}),
            {"alpha": [1.0]}).fit(X, y)


# ---------------------------------------------------------------------------
# every default estimator, Pipelines, DataFrames (issue 22, item 6)


def test_rdp_curve_holds_objective_perturbation_records():
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

    from dpopt.privacy import ObjectivePerturbation

    records = [Gaussian(20.0), ObjectivePerturbation(3.0, 0.05, 2), Gaussian(30.0)]
    curve = rdp_curve(records)
    assert np.all(np.isfinite(curve)) and np.all(curve > rdp_curve([Gaussian(20.0),
                                                                     Gaussian(30.0)]))
    by_curve = compute_epsilon(list(ORDERS), list(curve), 1e-6)[0]
    assert by_curve == pytest.approx(epsilon_of(records, 1e-6, accountant="rdp"), rel=1e-9)


@pytest.mark.parametrize("make", [dpopt.DPLogisticRegression, dpopt.DPLinearRegression,
                                  dpopt.DPLasso, dpopt.DPElasticNet, dpopt.DPHuberRegressor])
def test_search_works_with_every_default_estimator(make):
    X, y = _data(n=1500)
    classifier = make is dpopt.DPLogisticRegression
    est = make(epsilon=1.0, classes=[0, 1]) if classifier else make(epsilon=1.0)
    kw = {} if classifier else {"score_clip": 2.0}
    target = y if make is dpopt.DPLogisticRegression else X[:, 0] + 0.5 * X[:, 1]
    search = PrivateHyperparameterSearch(est, {"alpha": [1e-3, 1e-1]}, mean_repetitions=2,
                                         random_state=0, **kw).fit(X, target)
    assert math.isfinite(search.epsilon_spent_) and search.epsilon_spent_ > 1.0
    assert search.privacy_leaks_ == []
    if search.n_repetitions_ > 0:
        assert search.best_estimator_.auto_ is not None  # the default path ran


def test_search_with_a_pipeline_and_a_dataframe():
    pd = pytest.importorskip("pandas")
    from sklearn.pipeline import make_pipeline

    from dpopt.preprocessing import PrivateStandardScaler

    X, y = _data(n=4000)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    clf = dpopt.DPLogisticRegression(epsilon=0.5, solver="dp-cd", solver_options=PUBLIC,
                                     classes=[0, 1])
    pipe = make_pipeline(PrivateStandardScaler(epsilon=1.0), clf)
    grid = {"dplogisticregression__alpha": [1e-3, 1e-1]}
    search = PrivateHyperparameterSearch(pipe, grid, mean_repetitions=3,
                                         random_state=0).fit(frame, y)
    assert search.privacy_leaks_ == []
    # the scaler's releases are part of each trial's composition
    alone = PrivateHyperparameterSearch(clf, {"alpha": [1e-3, 1e-1]}, mean_repetitions=3,
                                        random_state=0).fit(X, y)
    assert len(search.candidate_mechanisms_[0]) > len(alone.candidate_mechanisms_[0])
    assert search.epsilon_spent_ > alone.epsilon_spent_
    if search.n_repetitions_ > 0:
        best = search.best_estimator_
        assert list(best.feature_names_in_) == ["a", "b", "c", "d"]  # X reached it unchanged
        seeds = [best[0].random_state, best[-1].random_state]
        assert seeds[0] != seeds[1]  # no two steps share noise
        assert search.score(frame, y) > 0.6


def test_search_reports_a_non_private_pipeline_step():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = _data()
    pipe = make_pipeline(StandardScaler(), dpopt.DPLogisticRegression(
        epsilon=0.5, solver="dp-cd", solver_options=PUBLIC))
    search = PrivateHyperparameterSearch(pipe, {"dplogisticregression__alpha": [1e-3]},
                                         mean_repetitions=2, random_state=1)
    with pytest.warns(dpopt.PrivacyLeakWarning, match="standardscaler"):
        search.fit(X, y)


def test_search_refuses_seeds_and_accountants_in_the_grid():
    X, y = _data()
    with pytest.raises(ValueError, match="random_state"):
        PrivateHyperparameterSearch(dpopt.DPLogisticRegression(),
                                    {"clf__random_state": [1]}).fit(X, y)


def test_search_multiclass_probe_has_the_classes():
    X, y = _data(n=1500)
    y3 = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5])
    est = dpopt.DPLogisticRegression(epsilon=1.0, solver="dp-cd", solver_options=PUBLIC)
    search = PrivateHyperparameterSearch(est, {"alpha": [1e-3]}, mean_repetitions=2,
                                         random_state=0).fit(X, y3)
    # three one-vs-rest fits per trial (dp-cd: one Gaussian record each)
    assert len(search.candidate_mechanisms_[0]) == 3
    if search.n_repetitions_ > 0:
        assert search.predict_proba(X[:4]).shape == (4, 3)


def test_search_with_a_column_transformer_on_a_string_frame():
    # a string column one-hot encoded with public categories, a private scaler on the
    # numbers: the scaler's records are accounted, no leak; scikit-learn's StandardScaler
    # in its place (fitted on the private data) is reported as a leak
    pd = pytest.importorskip("pandas")
    from sklearn.compose import make_column_transformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from dpopt.preprocessing import PrivateStandardScaler, public_one_hot_encoder

    X, y = _data(n=4000)
    frame = pd.DataFrame(X[:, :3], columns=["a", "b", "c"])
    frame["s"] = np.where(X[:, 3] > 0, "up", "down")

    def pipe(scaler):
        columns = make_column_transformer((public_one_hot_encoder([["down", "up"]]), ["s"]),
                                          (scaler, ["a", "b", "c"]))
        return make_pipeline(columns, dpopt.DPLogisticRegression(
            epsilon=0.5, solver="dp-cd", solver_options={"smoothness": np.full(6, 0.25)},
            classes=[0, 1]))

    grid = {"dplogisticregression__alpha": [1e-3]}
    search = PrivateHyperparameterSearch(pipe(PrivateStandardScaler(epsilon=1.0)), grid,
                                         mean_repetitions=2, random_state=0).fit(frame, y)
    assert search.n_repetitions_ >= 1 and search.privacy_leaks_ == []
    scaler = PrivateStandardScaler(epsilon=1.0).fit(X[:3000, :3]).mechanisms_
    assert len(search.candidate_mechanisms_[0]) == len(scaler) + 1  # scaler + the model
    with pytest.warns(dpopt.PrivacyLeakWarning, match="standardscaler"):
        PrivateHyperparameterSearch(pipe(StandardScaler()), grid, mean_repetitions=2,
                                    random_state=0).fit(frame, y)


def test_gaussian_records_are_dominated_by_their_total_mu():
    """A composition of Gaussian mechanisms is mu-GDP with mu^2 the sum of theirs, whatever
    their number and order (a fully adaptive one too: Smith & Thakurta 2022), so the
    default path's steps that move mu^2 by what earlier releases said (a second look, a
    re-centring) are accounted by the probe's total; other records keep the subsequence
    rule."""
    from dpopt.privacy import ObjectivePerturbation
    from dpopt.privacy.dominance import dominated as _dominated

    probe = [Gaussian(10.0), Gaussian(5.0), Gaussian(2.0)]  # mu^2 = 0.01 + 0.04 + 0.25
    moved = [Gaussian(20.0), Gaussian(2.0), Gaussian(5.0)]  # 0.0025 + 0.25 + 0.04, reordered
    assert _dominated(moved, probe)
    assert not _dominated([Gaussian(5.0), Gaussian(1 / math.sqrt(0.3))], probe)  # 0.34 > 0.30
    assert _dominated([Gaussian(10.0, count=4), Gaussian(2.0)], probe)  # 4 x 0.01 + 0.25
    assert not _dominated([Gaussian(10.0, count=6), Gaussian(2.0)], probe)
    op = ObjectivePerturbation(noise_multiplier=3.0, shift=0.1, dof=2)
    # with another kind of record the records must match a subsequence, in order
    assert _dominated([Gaussian(10.0), op], [Gaussian(10.0), Gaussian(5.0), op])
    assert not _dominated([Gaussian(5.0), Gaussian(10.0), op], [Gaussian(10.0), Gaussian(5.0), op])


@pytest.mark.parametrize("make", [dpopt.DPLinearRegression, dpopt.DPLogisticRegression,
                                  dpopt.DPHuberRegressor])
def test_search_accounts_the_default_paths_data_dependent_steps(make):
    """A year among noise columns: the real fits re-centre it (least squares) or read the
    target's range again (regressors) where the probe's surrogate data does not; the search
    still accounts each candidate by its probe, and the fits' records are dominated."""
    rng = np.random.default_rng(0)
    n = 3000
    year = rng.integers(2000, 2016, n).astype(float)
    Z = rng.standard_normal((n, 20))
    X, y = np.column_stack([year, Z]), (year - 2008) + Z[:, 0] + rng.standard_normal(n)
    classifier = make is dpopt.DPLogisticRegression
    target = (y > np.median(y)).astype(int) if classifier else y
    est = make(epsilon=2.0, **({"classes": [0, 1]} if classifier else {}))
    search = PrivateHyperparameterSearch(est, {"alpha": [1e-3, 1e-1]}, mean_repetitions=3,
                                         random_state=1,
                                         **({} if classifier else {"score_clip": 2.0}))
    search.fit(X, target)
    assert math.isfinite(search.epsilon_spent_) and search.epsilon_spent_ > 2.0
    if make is dpopt.DPLinearRegression and search.best_estimator_ is not None:
        # the year is re-centred (a second location release) or, where its centred
        # histogram is unresolved, read folded about the noisy mean (no release); either
        # way the target's range is read again, a release the probe's data decides too
        plan = search.best_estimator_.auto_.plan
        assert plan.get("recentred_features") == [0] or search.best_estimator_.auto_.scaling.scale[0] < 100
        assert "target_refine" in plan["mu_shares"]


def test_a_default_classifier_search_needs_declared_labels():
    # the default path selects its labels privately in each run; a probe that read them
    # from y would leak them, and one record's rare label made one run keep another set
    # and stop the search uncharged (an independent audit, session 31)
    X, y = _data(n=600)
    acc = dpopt.BudgetAccountant(epsilon=100.0, delta=1e-3)
    search = PrivateHyperparameterSearch(dpopt.DPLogisticRegression(epsilon=1.0),
                                         {"alpha": [1e-3]}, accountant=acc, random_state=0)
    with pytest.raises(ValueError, match="classes=") as err:
        search.fit(X, y)
    assert not isinstance(err.value, ChargedFitError)
    assert acc.spent() == 0.0 and not acc.ledger and not hasattr(search, "best_estimator_")


def test_declared_labels_make_the_search_blind_to_a_rare_label():
    # the audit's neighbours: one record relabelled to a third label
    X, y = _data(n=600)
    y2 = y.copy()
    y2[0] = 2
    spent = []
    for labels in (y, y2):
        search = PrivateHyperparameterSearch(
            dpopt.DPLogisticRegression(epsilon=1.0, classes=[0, 1]), {"alpha": [1e-3, 1e-2]},
            mean_repetitions=2.0, random_state=1).fit(X, labels)
        spent.append((search.epsilon_spent_, search.candidate_mechanisms_))
    assert spent[0] == spent[1]


def test_a_run_failing_on_its_releases_charges_the_whole_search():
    # a run's failure tells that the runs before it did not fail: charged as the whole
    # search (an independent audit, session 31: only the failed run's records were)
    calls = []

    class Flaky(dpopt.DPLogisticRegression):
        def fit(self, X, y):
            if X.shape[0] == 480:  # the real runs' training rows (the probe's are the same
                calls.append(1)    # number, but it comes first: count from the second call)
            if len(calls) == 3:
                raise ChargedFitError("no label kept", [Gaussian(7.0)], 1e-9)
            return super().fit(X, y)

    X, y = _data(n=600)
    grid = {"alpha": [1e-3]}
    paid = dpopt.BudgetAccountant(epsilon=100.0, delta=1e-3)
    whole = PrivateHyperparameterSearch(dpopt.DPLogisticRegression(epsilon=1.0, classes=[0, 1]),
                                        grid, mean_repetitions=20.0, random_state=3,
                                        accountant=paid).fit(X, y)
    assert whole.n_repetitions_ >= 2
    acc = dpopt.BudgetAccountant(epsilon=100.0, delta=1e-3)
    search = PrivateHyperparameterSearch(Flaky(epsilon=1.0, classes=[0, 1]), grid,
                                         mean_repetitions=20.0, random_state=3, accountant=acc)
    with pytest.raises(ChargedFitError, match="whole"):
        search.fit(X, y)
    assert acc.spent() == pytest.approx(paid.spent(), rel=1e-12)
    assert acc.spent() > 1.5 * epsilon_of([Gaussian(7.0)], 1e-3)  # more than the run's own


@pytest.mark.parametrize("error", [ValueError, RuntimeError])
def test_any_failure_of_a_real_run_charges_the_whole_search(error):
    # a solver refuses a non-finite model with a ValueError after its noisy steps, which
    # passed through uncharged (a second audit, session 31); here a stand-in fails so on
    # its second real run (the probe's fit comes first)
    calls = []

    class Failing(dpopt.DPLinearRegression):
        def fit(self, X, y):
            calls.append(1)
            if len(calls) == 3:
                raise error("produced a non-finite model")
            return super().fit(X, y)

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (400, 3))
    y = X @ np.array([0.5, -0.2, 0.1]) + 0.1 * rng.standard_normal(400)
    kw = {"score_clip": 1.0, "mean_repetitions": 20.0, "random_state": 3}
    paid = dpopt.BudgetAccountant(epsilon=100.0, delta=1e-3)
    whole = PrivateHyperparameterSearch(dpopt.DPLinearRegression(epsilon=1.0), {"alpha": [1.0]},
                                        accountant=paid, **kw).fit(X, y)
    assert whole.n_repetitions_ >= 2
    acc = dpopt.BudgetAccountant(epsilon=100.0, delta=1e-3)
    search = PrivateHyperparameterSearch(Failing(epsilon=1.0), {"alpha": [1.0]}, accountant=acc,
                                         **kw)
    with pytest.raises(ChargedFitError, match="non-finite"):
        search.fit(X, y)
    assert acc.spent() == pytest.approx(paid.spent(), rel=1e-12)


def test_an_explicit_multiclass_fit_reports_the_labels_it_read():
    # one-vs-rest dropped the label-set warning that a binary fit raises (second audit)
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (600, 3))
    y = np.where(np.arange(600) < 5, 2, (X[:, 0] > 0).astype(int))
    with pytest.warns(dpopt.PrivacyLeakWarning, match="np.unique"):
        clf = dpopt.DPLogisticRegression(solver="dp-gd", solver_options={
            "clip": 1.0, "smoothness": 1.0}).fit(X, y)
    assert list(clf.classes_) == [0, 1, 2] and any("np.unique" in m for m in clf.privacy_leaks_)


def test_a_probe_that_reads_the_labels_says_so_even_without_a_run():
    # an explicit solver's probe reads the training rows' label set (its fits do too);
    # the accounted total depends on it, so the search reports it whatever K is
    from dpopt.api.tuning import PROBE_LABELS_READ

    X, y = _data(n=600)
    opts = {**PUBLIC, "passes": 2}
    for classes, expected in ((None, True), ([0, 1], False)):
        est = dpopt.DPLogisticRegression(solver="dp-cd", epsilon=0.5, delta=1e-7,
                                         classes=classes, solver_options=opts)
        for seed in range(50):  # K ~ Poisson(1.01) is 0 with probability 0.36
            search = PrivateHyperparameterSearch(est, {"alpha": [1e-3]}, distribution="poisson",
                                                 mean_repetitions=1.01, random_state=seed)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                search.fit(X, y)
            if search.n_repetitions_ == 0:
                break
        assert search.n_repetitions_ == 0
        assert (PROBE_LABELS_READ in search.privacy_leaks_) is expected
        assert any("probe read" in str(w.message) for w in caught
                   if issubclass(w.category, dpopt.PrivacyLeakWarning)) is expected
