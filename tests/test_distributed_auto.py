"""The default path and objective perturbation on chunked data: equal to the in-memory fits
at the same seed, whatever the chunking (dpopt.pipeline.chunked, objective perturbation's
chunked Newton)."""

import warnings

import numpy as np
import pytest

import dpopt
from dpopt.pipeline import default_path as auto
from dpopt.preprocessing import (
    feature_histograms,
    private_bounds_from_counts,
    private_feature_bounds,
    private_target_bounds,
)
from dpopt.privacy import (
    private_quantile,
    private_quantile_from_counts,
    quantile_counts,
    quantile_edges,
)

da = pytest.importorskip("dask.array")  # the dask extra: installed by .ci/run
pytest.importorskip("distributed")
from test_distributed import client  # noqa: E402,F401,I001  (the two-worker LocalCluster fixture)

from dpopt.data.chunked import ChunkedProblem  # noqa: E402

on_cluster = pytest.mark.usefixtures("client")

N, P = 1500, 4
CHUNKINGS = [500, 377, (100, 1100, 300)]
TOL = 1e-10  # adassp, dp-gd: the same releases, sums in another order
OP_TOL = 2e-6  # objective perturbation: 2 x its default tolerance (1e-6)


@pytest.fixture(autouse=True)
def _in_memory_without_the_held_out_choice(monkeypatch):
    """The fits here compare the default path itself, on all rows: the held-out choice
    between the model and the constant (dpopt.pipeline.selection) and its in-sample check
    are off for both layouts (tests/test_chunked_selection.py compares the two with it)."""
    from dpopt.pipeline import selection

    monkeypatch.setattr(selection, "MIN_VALIDATION", 10 ** 18)
    monkeypatch.setattr(selection, "in_sample_runs", lambda *args, **kwargs: False)


def raw_data(seed=0):
    """Raw features of different scales and offsets (the default path locates them)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, P)) * np.array([0.5, 3.0, 20.0, 1.0]) + np.array([0, 5, -40, 1])
    y = 3.0 + X @ np.array([1.0, -0.5, 0.05, 2.0]) + 0.5 * rng.standard_normal(N)
    return X, y


def as_dask(X, y, rows):
    return da.from_array(X, chunks=(rows, 2)), da.from_array(y, chunks=600)


def fit_pair(estimator, target, rows, **kwargs):
    X, _ = raw_data()
    ref = estimator(epsilon=1.0, random_state=4, **kwargs).fit(X, target)
    got = estimator(epsilon=1.0, random_state=4, **kwargs).fit(*as_dask(X, target, rows))
    return ref, got


def assert_same_release(ref, got, atol):
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=atol)
    np.testing.assert_allclose(got.intercept_, ref.intercept_, rtol=0, atol=atol)
    assert got.fit_result_.mechanisms == ref.fit_result_.mechanisms
    assert (got.epsilon_spent_, got.delta_spent_) == (ref.epsilon_spent_, ref.delta_spent_)
    assert got.auto_.plan["solver"] == ref.auto_.plan["solver"]
    assert got.auto_.plan["mu_shares"] == ref.auto_.plan["mu_shares"]
    assert got.auto_.plan["row_bound"] == ref.auto_.plan["row_bound"]
    # the grid's bounds, narrowed around the private means (sums over chunks: last bits)
    np.testing.assert_allclose(got.feature_bounds_, ref.feature_bounds_, rtol=1e-12)
    assert got.fit_result_.params["data"]["layout"] == "chunked"
    assert "accounting as on one machine (unchanged)" in got.privacy_report()


CASES = [  # (estimator, kwargs, classification target?, mechanism, tolerance)
    (dpopt.DPLinearRegression, {}, False, "adassp", TOL),
    (dpopt.DPLinearRegression, {"fit_intercept": False}, False, "adassp", TOL),
    (dpopt.DPLogisticRegression, {}, True, "objective-perturbation", OP_TOL),
    pytest.param(dpopt.DPHuberRegressor, {"fit_intercept": False}, False,
                 "objective-perturbation", OP_TOL, marks=pytest.mark.slow),
]


@on_cluster
@pytest.mark.parametrize("estimator, kwargs, classify, mechanism, atol", CASES)
def test_auto_chunked_equals_in_memory(estimator, kwargs, classify, mechanism, atol):
    X, y = raw_data()
    target = np.where(y > np.median(y), "yes", "no") if classify else y
    for rows in CHUNKINGS[::2]:
        ref, got = fit_pair(estimator, target, rows, **kwargs)
        assert ref.auto_.plan["solver"] == mechanism
        assert_same_release(ref, got, atol)
    if classify:
        np.testing.assert_array_equal(got.predict(X), ref.predict(X))
    else:
        np.testing.assert_allclose(got.predict(X), ref.predict(X), rtol=0, atol=100 * atol)
    assert not np.allclose(ref.coef_, 0.0)


@on_cluster
def test_auto_chunked_reads_a_concentrated_target_again_as_in_memory():
    """A target of about 1003 +- 3 is concentrated on the log grid: both layouts take the
    second look (its equal-bin counts summed over the chunks) and release the same model."""
    X, y = raw_data()
    ref, got = fit_pair(dpopt.DPLinearRegression, y + 1000.0, CHUNKINGS[0])
    assert "target_refine" in ref.auto_.plan["mu_shares"]
    assert_same_release(ref, got, TOL)


@on_cluster
def test_auto_chunked_l1_goes_to_dp_gd_and_equals_the_same_plan_in_memory(monkeypatch):
    X, y = raw_data(seed=1)
    got = [dpopt.DPLasso(epsilon=1.0, alpha=0.01, random_state=2).fit(*as_dask(X, y, rows))
           for rows in CHUNKINGS[2:]]  # chunking invariance of dp-gd: tests/test_distributed.py
    assert got[0].auto_.plan["solver"] == "dp-gd"
    assert got[0].auto_.plan["reason"].startswith(
        "chunked data: dp-cd takes one cluster-wide reduction per coordinate")
    in_memory = dpopt.DPLasso(epsilon=1.0, alpha=0.01, random_state=2).fit(X, y)
    assert in_memory.auto_.plan["solver"] == "dp-cd"
    monkeypatch.setattr(auto.InMemoryData, "chunked", True)  # the chunked routing, in memory
    ref = dpopt.DPLasso(epsilon=1.0, alpha=0.01, random_state=2).fit(X, y)
    for fit in got:
        assert_same_release(ref, fit, TOL)


@on_cluster
def test_auto_chunked_row_normalization_when_bounds_are_out_of_reach():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((400, 8)) * 5.0
    y = X @ rng.standard_normal(8)
    kw = dict(epsilon=0.5, delta=1e-5, random_state=1)
    ref = dpopt.DPLinearRegression(**kw).fit(X, y)
    got = dpopt.DPLinearRegression(**kw).fit(da.from_array(X, chunks=(130, 8)),
                                             da.from_array(y, chunks=130))
    assert got.auto_.plan["scaling"] == ref.auto_.plan["scaling"] == "row-normalized"
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=TOL)
    assert got.fit_result_.mechanisms == ref.fit_result_.mechanisms


@on_cluster
def test_auto_chunked_coarse_grid_bounds_as_in_memory():
    """Too few rows for the default grid, enough for one bin per decade: both layouts release
    the classifier's feature histograms on the coarse grid (chunk counts summed) and the same
    model."""
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    kw = dict(epsilon=1.0, random_state=3, classes=[0, 1])
    ref = dpopt.DPLogisticRegression(**kw).fit(X, y)
    got = dpopt.DPLogisticRegression(**kw).fit(da.from_array(X, chunks=(150, 30)),
                                               da.from_array(y, chunks=150))
    assert ref.auto_.plan["coarse_grid"] and got.auto_.plan["coarse_grid"]
    assert not np.allclose(ref.coef_, 0.0)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=OP_TOL)
    assert got.fit_result_.mechanisms == ref.fit_result_.mechanisms
    np.testing.assert_allclose(got.feature_bounds_, ref.feature_bounds_, rtol=1e-12)


@on_cluster
def test_fit_default_takes_dask_arrays_and_chunked_problems():
    X, y = raw_data(seed=2)
    kw = dict(loss="squared", penalty="l2", penalty_kwargs={"alpha": 0.01}, fit_intercept=True,
              epsilon=0.8, delta=1e-6, regression=True)
    ref = auto.fit_default(X, y, rng=np.random.default_rng(9), **kw)
    arrays = auto.fit_default(*as_dask(X, y, 400), rng=np.random.default_rng(9), **kw)
    problem = ChunkedProblem(*as_dask(X, y, 700), loss="squared")
    chunked = auto.fit_default(problem, None, rng=np.random.default_rng(9), **kw)
    for fit in (arrays, chunked):
        np.testing.assert_allclose(fit.result.w, ref.result.w, rtol=0, atol=TOL)
        assert fit.result.mechanisms == ref.result.mechanisms
    with pytest.raises(ValueError, match="y must be None"):
        auto.fit_default(problem, y, rng=np.random.default_rng(9), **kw)


@on_cluster
@pytest.mark.parametrize("loss, intercept", [("logistic", True), ("huber", False)])
def test_objective_perturbation_chunked_equals_in_memory(loss, intercept):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((N, 6)) * np.linspace(0.5, 2.0, 6)
    y = X @ rng.standard_normal(6) + 0.3 * rng.standard_normal(N)
    y = np.where(y > 0, 1.0, -1.0) if loss == "logistic" else y
    kw = dict(loss=loss, penalty="l2", alpha=0.01, fit_intercept=intercept)
    opts = dict(epsilon=1.0, delta=1e-6, random_state=3, row_bound=2.0)  # some rows clipped
    ref = dpopt.solve(dpopt.Problem(X, y, **kw), "objective-perturbation", **opts)
    for rows in CHUNKINGS:
        problem = ChunkedProblem(da.from_array(X, chunks=(rows, 3)), da.from_array(y), **kw)
        got = dpopt.solve(problem, "objective-perturbation", **opts)
        np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=2 * ref.params["tolerance"])
        assert (got.epsilon, got.delta, got.mechanisms) == (ref.epsilon, ref.delta, ref.mechanisms)
        assert got.params["gradient_bound"] == ref.params["gradient_bound"] == \
            0.5 * ref.params["tolerance"] * (ref.params["regularization"] +
                                              (0.0 if intercept else 0.01))
        assert "unchanged" in got.privacy_report()
    assert not np.allclose(ref.w, 0.0)


@on_cluster
def test_objective_perturbation_chunked_fallback_matches_in_memory(monkeypatch):
    """Newton crippled to one step on both: the accelerated fallback (first-order chunk
    reductions of 1 + d floats) releases within 2 x tolerance of the in-memory fallback.
    No intercept and alpha = 0.1: a well-conditioned F_b, so the fallback takes few steps."""
    from dpopt.solvers import _op_minimize

    rng = np.random.default_rng(6)
    X = rng.standard_normal((N, 5)) * np.linspace(0.5, 2.0, 5)
    y = np.where(X @ rng.standard_normal(5) + 0.3 * rng.standard_normal(N) > 0, 1.0, -1.0)
    kw = dict(loss="logistic", penalty="l2", alpha=0.1, fit_intercept=False)
    opts = dict(epsilon=1.0, delta=1e-6, random_state=2, row_bound=2.0)
    fallbacks = []
    original = _op_minimize.accelerated_gradient

    def counted(objective, *args, **kwargs):
        fallbacks.append(type(objective).__name__)
        return original(objective, *args, **kwargs)

    monkeypatch.setattr(_op_minimize, "MAX_NEWTON", 1)
    monkeypatch.setattr(_op_minimize, "accelerated_gradient", counted)
    ref = dpopt.solve(dpopt.Problem(X, y, **kw), "objective-perturbation", **opts)
    got = dpopt.solve(ChunkedProblem(da.from_array(X, chunks=(400, 5)), da.from_array(y), **kw),
                      "objective-perturbation", **opts)
    assert fallbacks == ["PerturbedObjective", "ChunkedPerturbedObjective"]
    np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=2 * ref.params["tolerance"])
    assert (got.epsilon, got.mechanisms) == (ref.epsilon, ref.mechanisms)


@on_cluster
def test_objective_perturbation_chunked_row_bound_from_data_warns():
    X, y = raw_data(seed=3)
    labels = np.where(y > np.median(y), 1.0, -1.0)
    with pytest.warns(dpopt.PrivacyLeakWarning, match="row_bound"):
        ref = dpopt.solve(dpopt.Problem(X, labels, loss="logistic"), "objective-perturbation",
                          epsilon=1.0, random_state=0)
    with pytest.warns(dpopt.PrivacyLeakWarning, match="row_bound"):
        got = dpopt.solve(ChunkedProblem(*as_dask(X, labels, 400), loss="logistic"),
                          "objective-perturbation", epsilon=1.0, random_state=0)
    assert got.params["row_bound"] == pytest.approx(ref.params["row_bound"], rel=1e-12)
    np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=2 * ref.params["tolerance"])


def sparse_raw_data(seed=7):
    """Sparse features of different scales (no offsets: sparse data is not centred)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    X = sp.random(N, P, density=0.5, format="csr", random_state=seed,
                  data_rvs=rng.standard_normal).multiply(np.array([0.5, 3.0, 20.0, 1.0]))
    X = sp.csr_matrix(X)
    y = 3.0 + X @ np.array([1.0, -0.5, 0.05, 2.0]) + 0.5 * rng.standard_normal(N)
    return X, y


@on_cluster
@pytest.mark.parametrize("estimator, classify, atol", [
    (dpopt.DPLinearRegression, False, TOL), (dpopt.DPLogisticRegression, True, OP_TOL)])
def test_auto_on_sparse_chunks_equals_in_memory_sparse(estimator, classify, atol):
    X, y = sparse_raw_data()
    target = np.where(y > np.median(y), 1, 0) if classify else y
    ref = estimator(epsilon=1.0, random_state=4).fit(X, target)
    got = estimator(epsilon=1.0, random_state=4).fit(
        da.from_array(X, chunks=(400, P), asarray=False), da.from_array(target, chunks=400))
    assert_same_release(ref, got, atol)
    assert "feature_means" not in got.auto_.plan["mu_shares"]  # sparse: no centring, as in memory
    assert got.fit_result_.params["data"]["sparse"]
    assert not np.allclose(ref.coef_, 0.0)


@on_cluster
def test_objective_perturbation_on_sparse_chunks_equals_in_memory_sparse():
    X, y = sparse_raw_data(seed=8)
    labels = np.where(y > np.median(y), 1.0, -1.0)
    kw = dict(loss="logistic", penalty="l2", alpha=0.01, fit_intercept=True)
    opts = dict(epsilon=1.0, delta=1e-6, random_state=3, row_bound=5.0)  # some rows clipped
    ref = dpopt.solve(dpopt.Problem(X, labels, **kw), "objective-perturbation", **opts)
    got = dpopt.solve(ChunkedProblem(da.from_array(X, chunks=(377, P), asarray=False), labels,
                                     **kw), "objective-perturbation", **opts)
    np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=2 * ref.params["tolerance"])
    assert got.mechanisms == ref.mechanisms


# ---------------------------------------------------------------------------- the routing


@pytest.mark.parametrize("loss, penalty, expected", [
    ("squared", "none", "adassp"), ("squared", "l2", "adassp"),
    ("logistic", "none", "objective-perturbation"), ("logistic", "l2", "objective-perturbation"),
    ("huber", "l2", "objective-perturbation"), ("huber", "none", "objective-perturbation"),
    ("squared", "l1", "dp-gd"), ("logistic", "elastic_net", "dp-gd"), ("huber", "l1", "dp-gd"),
    ("absolute", "none", "dp-gd"), ("absolute", "l2", "dp-gd"),
])
def test_chunked_routing_sends_every_pair_to_a_distributed_solver(loss, penalty, expected):
    from dpopt.solvers import distributed_solvers

    available = dpopt.available_solvers()
    solver, why = auto.choose_solver(loss, penalty, 10 ** 6, 20, available, chunked=True)
    assert solver == expected and solver in distributed_solvers()
    in_memory, _ = auto.choose_solver(loss, penalty, 10 ** 6, 20, available)
    if in_memory == "dp-cd":
        assert why.startswith(auto.CHUNKED_REASON)
    else:
        assert solver == in_memory


@on_cluster
def test_explicit_non_distributed_solver_is_refused_before_reading():
    X, y = raw_data()
    never_read = da.from_array(X, chunks=500).map_blocks(_fail, dtype=float)
    with pytest.raises(ValueError, match=r"dp-cd.*'objective-perturbation'"):
        dpopt.DPLasso(epsilon=1.0, solver="dp-cd").fit(never_read, y)


def test_auto_refuses_infinite_epsilon_before_reading():
    X, y = raw_data()
    never_read = da.from_array(X, chunks=500).map_blocks(_fail, dtype=float)
    with pytest.raises(ValueError, match="finite epsilon"):
        dpopt.DPLinearRegression(epsilon=np.inf).fit(never_read, y)


def _fail(block):
    raise AssertionError("the data was read")


# ---------------------------------------------------------------------------- from counts


def test_bounds_from_counts_equal_the_in_memory_release():
    X, y = raw_data(seed=4)
    counts = feature_histograms(X, range(P))
    public = ([np.nan, 0.0, np.nan, np.nan], [np.nan, 10.0, np.nan, 3.0])
    for bounds in (None, public):
        ref = private_feature_bounds(X, 0.5, np.random.default_rng(1), bounds=bounds)
        got = private_bounds_from_counts(counts, N, 0.5, np.random.default_rng(1), bounds=bounds)
        for name in ("lower", "upper", "noisy_counts", "unresolved", "public"):
            np.testing.assert_array_equal(getattr(got, name), getattr(ref, name))
        assert got.mechanisms == ref.mechanisms and got.sigma == ref.sigma
    ref = private_target_bounds(y, 0.3, np.random.default_rng(2))
    got = private_bounds_from_counts(feature_histograms(y[:, None], [0]), N, 0.3,
                                     np.random.default_rng(2))
    assert (got.lower, got.upper) == (ref.lower, ref.upper)
    with pytest.raises(ValueError, match="counts must have shape"):
        private_bounds_from_counts(counts[:, :-1], N, 0.5, np.random.default_rng(1))


def test_quantile_from_counts_equals_private_quantile():
    v = np.abs(np.random.default_rng(3).standard_cauchy(2000))
    ref = private_quantile(np.random.default_rng(0), v, 0.9, 0.05, lower=1e-3, upper=1e3)
    counts = quantile_counts(v, quantile_edges(1e-3, 1e3, 60))
    got = private_quantile_from_counts(np.random.default_rng(0), counts, 0.9, 0.05, lower=1e-3,
                                       upper=1e3)
    assert got[0] == ref[0] and got[1]["records"] == ref[1]["records"]
    with pytest.raises(ValueError, match="counts must have shape"):
        private_quantile_from_counts(np.random.default_rng(0), counts[1:], 0.9, 0.05, lower=1e-3,
                                     upper=1e3)


@on_cluster
def test_predict_on_chunked_data_is_lazy_and_equals_in_memory(tmp_path):
    """predict / predict_proba / decision_function take what fit takes (Dask arrays, .npy
    paths): one task per chunk applying the feature map and the model, same numbers."""
    X, y = raw_data()
    labels = np.where(y > np.median(y), "high", "low")
    reg = dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(*as_dask(X, y, 500))
    clf = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, labels)
    Xd = da.from_array(X, chunks=(377, P))
    np.save(tmp_path / "X.npy", X)
    for source in (Xd, tmp_path / "X.npy"):
        lazy = reg.predict(source)
        assert isinstance(lazy, da.Array) and lazy.shape == (N,)
        np.testing.assert_allclose(lazy.compute(), reg.predict(X), rtol=0, atol=1e-12)
        assert list(clf.predict(source).compute()) == list(clf.predict(X))
        np.testing.assert_allclose(clf.predict_proba(source).compute(), clf.predict_proba(X),
                                   rtol=0, atol=1e-12)
        np.testing.assert_allclose(clf.predict_log_proba(source).compute(),
                                   clf.predict_log_proba(X), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="fitted on 4 features"):
        reg.predict(da.from_array(X[:, :3], chunks=(500, 3)))


@on_cluster
@pytest.mark.parametrize("estimator, labels", [(dpopt.DPLinearRegression, False),
                                               (dpopt.DPLogisticRegression, True),
                                               (dpopt.DPLasso, False)])
def test_default_chunked_fit_on_raw_data_reads_nothing_unpaid(estimator, labels):
    """The default path on chunked raw data pays for every constant it reads: no
    PrivacyLeakWarning, and the whole pipeline spends exactly the target."""
    X, y = raw_data()
    target = np.where(y > np.median(y), 1.0, -1.0) if labels else y
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)  # a leak fails the test
        model = estimator(epsilon=1.0, random_state=3).fit(*as_dask(X, target, 377))
    assert model.privacy_leaks_ == []
    assert model.epsilon_spent_ == pytest.approx(1.0, rel=1e-6)
    assert not model.privacy_report().startswith("NOT end-to-end private")


def test_the_private_mean_of_a_concentrated_target_equals_the_in_memory_one():
    """Location, scale, mean: the chunked adapter counts the second look's equal bins over
    the chunks, and the three releases equal the in-memory ones at the same seed."""
    from dpopt.pipeline.chunked import ChunkedData
    from dpopt.pipeline.mean_of_y import private_mean_of_y
    from dpopt.pipeline.scaling import InMemoryData

    n = 4000
    y = 1000.0 + 30.0 * np.random.default_rng(7).standard_normal(n)
    X = np.zeros((n, 1))
    ref = private_mean_of_y(InMemoryData(X, y), 1.0, np.random.default_rng(3))
    problem = ChunkedProblem(da.from_array(X, chunks=(1000, 1)), da.from_array(y, chunks=1000),
                             loss="squared", fit_intercept=True)
    got = private_mean_of_y(ChunkedData(problem), 1.0, np.random.default_rng(3))
    assert len(ref[2]) >= 3 and "read again" in ref[3]  # a look, or more while they narrow
    assert got[0] == ref[0] and got[1] == pytest.approx(ref[1], abs=1e-12)
    assert got[2] == ref[2] and got[3] == ref[3]


@on_cluster
def test_auto_chunked_honours_public_feature_bounds():
    """feature_bounds= on a chunked array is public knowledge as in memory: those columns
    skip the bounds release (it was ignored on chunked arrays, which then paid for
    histograms of columns the user had bounded)."""
    bounds = {0: (-2.0, 2.0), 2: (-100.0, 20.0)}
    ref, got = fit_pair(dpopt.DPLinearRegression, raw_data()[1], CHUNKINGS[0],
                        feature_bounds=bounds)
    assert got.auto_.plan["public_bounds"] == ref.auto_.plan["public_bounds"] == 2
    assert_same_release(ref, got, TOL)
    assert got.feature_bounds_[0][2] == -100.0 and got.feature_bounds_[1][0] <= 2.0
    with pytest.raises(ValueError, match="feature_bounds"):
        dpopt.DPLinearRegression(epsilon=1.0, feature_bounds={9: (0, 1)}).fit(
            *as_dask(*raw_data(), 500))


# raw values beyond the magnitude limit: the default path clips them in both layouts

def _with_entry(a, index, value):
    a = a.copy()
    a[index] = value
    return a


@pytest.mark.parametrize("estimator, where, value, atol", [
    (dpopt.DPLinearRegression, "X", 1e200, TOL),
    (dpopt.DPLinearRegression, "y", -1e200, TOL),
    (dpopt.DPLinearRegression, "X", 1e-200, TOL),
    (dpopt.DPLogisticRegression, "X", -1e200, OP_TOL),
])
def test_auto_chunked_takes_raw_values_beyond_the_magnitude_limit_as_in_memory(
        estimator, where, value, atol):
    """One raw entry beyond MAX_MAGNITUDE (or non-zero below 1e-150): the in-memory default
    path clips it to the private bounds before any Problem is built, and so does the
    chunked one (it refused the raw chunk); the same release at the same seed, finite."""
    X, y = raw_data()
    if where == "X":
        X = _with_entry(X, (7, 1), value)
    target = np.where(y > np.median(y), 1.0, -1.0) if estimator is dpopt.DPLogisticRegression \
        else (_with_entry(y, 7, value) if where == "y" else y)
    ref = estimator(epsilon=1.0, random_state=4).fit(X, target)
    got = estimator(epsilon=1.0, random_state=4).fit(*as_dask(X, target, 377))
    assert np.all(np.isfinite(got.coef_)) and np.all(np.isfinite(got.intercept_))
    assert_same_release(ref, got, atol)


def test_auto_chunked_row_normalized_raw_value_beyond_the_limit_as_in_memory():
    rng = np.random.default_rng(6)
    X = _with_entry(rng.standard_normal((400, 8)) * 5.0, (3, 2), 1e200)
    y = X[:, [0, 1, 3]] @ rng.standard_normal(3)
    kw = dict(epsilon=0.5, delta=1e-5, random_state=1)
    ref = dpopt.DPLinearRegression(**kw).fit(X, y)
    got = dpopt.DPLinearRegression(**kw).fit(da.from_array(X, chunks=(130, 8)),
                                             da.from_array(y, chunks=130))
    assert got.auto_.plan["scaling"] == ref.auto_.plan["scaling"] == "row-normalized"
    assert np.all(np.isfinite(got.coef_))
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=TOL)


def test_explicit_chunked_solver_still_refuses_raw_values_beyond_the_limit():
    """An explicit solver takes the data as given, in memory and chunked: refused."""
    X, y = raw_data()
    X = _with_entry(X, (7, 1), 1e200)
    for data in ((X, y), as_dask(X, y, 377)):
        with pytest.raises(ValueError, match="X has entries beyond 1e\\+150"):
            dpopt.DPLinearRegression(epsilon=1.0, solver="adassp").fit(*data)


@pytest.mark.parametrize("estimator", [dpopt.DPLinearRegression, dpopt.DPLogisticRegression])
@pytest.mark.parametrize("where, value", [("X", np.nan), ("X", np.inf), ("y", np.nan),
                                          ("y", -np.inf)])
def test_auto_refuses_nan_and_inf_in_both_layouts(estimator, where, value):
    X, y = raw_data()
    y = np.where(y > np.median(y), 1.0, -1.0) if estimator is dpopt.DPLogisticRegression else y
    X = _with_entry(X, (7, 1), value) if where == "X" else X
    y = _with_entry(y, 7, value) if where == "y" else y
    for data in ((X, y), as_dask(X, y, 377)):
        with pytest.raises(ValueError, match=rf"(^|Input ){where} (contains|has missing)"):
            estimator(epsilon=1.0, random_state=0).fit(*data)
