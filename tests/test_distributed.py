"""Chunked (Dask / out-of-core) fits: equal to the in-memory fits, whatever the chunking,
the workers, a failed task or a lost worker (dpopt.data.chunked)."""

import threading

import numpy as np
import pytest
import scipy.sparse as sp

import dpopt
from dpopt.data import chunked as distributed
from dpopt.data.chunked import ChunkedProblem, poisson_rows

da = pytest.importorskip("dask.array")  # the dask extra: installed by .ci/run
pytest.importorskip("distributed")
from distributed import Client, LocalCluster  # noqa: E402

N, P = 1500, 6
CHUNKINGS = [500, 377, (100, 1100, 300), N]
TOL = 1e-10


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as c:
        yield c


def data(loss, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, P)) * np.linspace(0.5, 2.0, P)
    y = X @ rng.standard_normal(P) + 0.3 * rng.standard_normal(N)
    return X, (np.where(y > 0, 1.0, -1.0) if loss == "logistic" else y)


def chunked(X, y, rows, **kw):
    return ChunkedProblem(da.from_array(X, chunks=(rows, 3)), da.from_array(y), **kw)


def sparse_data(loss, seed=0, density=0.4):
    rng = np.random.default_rng(seed)
    X = sp.csr_matrix(sp.random(N, P, density=density, format="csr", random_state=seed,
                                 data_rvs=rng.standard_normal).multiply(np.linspace(0.5, 2.0, P)))
    y = X @ rng.standard_normal(P) + 0.3 * rng.standard_normal(N)
    return X, (np.where(y > 0, 1.0, -1.0) if loss == "logistic" else y)


def sparse_chunked(X, y, rows, **kw):
    """A Dask array whose chunks are CSR matrices (columns chunked too, merged on entry)."""
    Xd = da.from_array(X, chunks=(rows, 3), asarray=False)
    assert sp.issparse(Xd._meta)
    return ChunkedProblem(Xd, da.from_array(y), **kw)


GD_OPTIONS = [{"smoothness": 2.0, "clip": 0.7},
              {"smoothness": np.full(P + 1, 0.8), "clipping": "coordinate", "step_rule": "eso",
               "clip": 0.7, "output": "random"}]


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("options", GD_OPTIONS)
def test_dp_gd_chunked_equals_in_memory(client, loss, options, sparse):
    X, y = (sparse_data if sparse else data)(loss)
    kw = dict(loss=loss, penalty="l1", alpha=0.01, fit_intercept=True)
    ref = dpopt.solve(dpopt.Problem(X, y, **kw), "dp-gd", epsilon=1.0, random_state=7, passes=6,
                      **options)
    for rows in CHUNKINGS[1:3] if sparse else CHUNKINGS:  # (the sparse path is chunk-blind too)
        problem = (sparse_chunked if sparse else chunked)(X, y, rows, **kw)
        assert problem.is_sparse == sparse == problem.describe()["sparse"]
        got = dpopt.solve(problem, "dp-gd", epsilon=1.0, random_state=7, passes=6, **options)
        np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=TOL)
        np.testing.assert_allclose(got.checkpoints, ref.checkpoints, rtol=0, atol=TOL)
        assert (got.epsilon, got.delta, got.mechanisms) == (ref.epsilon, ref.delta, ref.mechanisms)
    assert not np.allclose(ref.w, 0.0)


def test_persisted_chunks_are_reduced_task_by_task_with_the_same_results(client):
    """persist() holds X and y on the workers; reductions then skip the Dask graph (one
    submitted task per chunk and a tree of sums) and give the same fits."""
    X, y = data("logistic", seed=2)
    kw = dict(loss="logistic", penalty="l2", alpha=0.01, fit_intercept=True)
    problem = chunked(X, y, 377, **kw)
    assert problem._held_chunks() is None  # a graph over in-memory arrays: not held
    assert problem.persist() is problem and problem._held_chunks() is not None
    for name, opts in [("dp-gd", {"passes": 5, "clip": 0.7, "smoothness": 0.5}),
                       ("dp-sgd", {"passes": 2, "batch_size": 100, "clip": 0.7,
                                   "smoothness": 0.5}),
                       ("objective-perturbation", {"row_bound": 3.0})]:
        graph = dpopt.solve(chunked(X, y, 377, **kw), name, epsilon=1.0, random_state=4, **opts)
        held = dpopt.solve(problem, name, epsilon=1.0, random_state=4, **opts)
        np.testing.assert_allclose(held.w, graph.w, rtol=0, atol=TOL)
    Xs, ys = data("squared", seed=2)
    sq = chunked(Xs, ys, 500).persist()
    ref = dpopt.solve(dpopt.Problem(Xs, ys), "adassp", epsilon=1.0, random_state=1, row_bound=4.0,
                      target_bound=4.0)
    got = dpopt.solve(sq, "adassp", epsilon=1.0, random_state=1, row_bound=4.0, target_bound=4.0)
    np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=TOL)


def test_dp_gd_exact_smoothness_warns_and_matches(client):
    X, y = data("squared")
    with pytest.warns(dpopt.PrivacyLeakWarning):
        ref = dpopt.solve(dpopt.Problem(X, y), "dp-gd", epsilon=2.0, random_state=1, passes=3)
    with pytest.warns(dpopt.PrivacyLeakWarning):
        got = dpopt.solve(chunked(X, y, 400), "dp-gd", epsilon=2.0, random_state=1, passes=3)
    np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=TOL)


@pytest.mark.parametrize("intercept", [False, True])
def test_adassp_chunked_equals_in_memory(client, intercept):
    X, y = data("squared", seed=3)
    kw = dict(penalty="l2", alpha=0.05, fit_intercept=intercept)
    opts = dict(row_bound=2.5, target_bound=4.0)  # some rows and targets are clipped
    ref = dpopt.solve(dpopt.Problem(X, y, **kw), "adassp", epsilon=0.5, random_state=2, **opts)
    for rows in CHUNKINGS:
        got = dpopt.solve(chunked(X, y, rows, **kw), "adassp", epsilon=0.5, random_state=2, **opts)
        np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=TOL)
        assert got.epsilon == ref.epsilon and got.mechanisms == ref.mechanisms


def test_dp_sgd_depends_on_seed_and_data_not_chunking(client):
    X, y = data("logistic", seed=5)
    kw = dict(loss="logistic", penalty="l2", alpha=0.01)
    opts = dict(passes=2, batch_size=500, clip=0.5, smoothness=0.5)
    fits = [dpopt.solve(chunked(X, y, rows, **kw), "dp-sgd", epsilon=1.0, random_state=4, **opts)
            for rows in CHUNKINGS[:3]]
    for got in fits[1:]:
        np.testing.assert_allclose(got.w, fits[0].w, rtol=0, atol=TOL)
    # the same sampler in one process (one chunk, synchronous scheduler): the same fit
    import dask

    with dask.config.set(scheduler="sync"):
        local = dpopt.solve(ChunkedProblem(X, y, chunk_rows=N, **kw), "dp-sgd", epsilon=1.0,
                            random_state=4, **opts)
    np.testing.assert_allclose(local.w, fits[0].w, rtol=0, atol=TOL)
    other = dpopt.solve(chunked(X, y, 500, **kw), "dp-sgd", epsilon=1.0, random_state=5, **opts)
    assert np.abs(other.w - fits[0].w).max() > 1e-3  # the seed matters
    ref = dpopt.solve(dpopt.Problem(X, y, **kw), "dp-sgd", epsilon=1.0, random_state=4, **opts)
    assert fits[0].mechanisms == ref.mechanisms and fits[0].epsilon == ref.epsilon
    assert "accounting as on one machine" in fits[0].privacy_report()


def test_poisson_rows_are_chunk_independent_with_the_global_rate():
    entropy, n, rate = (11, 12), 20_000, 0.03
    whole = poisson_rows(entropy, 5, rate, 0, n, n)
    cuts = [0, 1, 4095, 4096, 9000, 15_001, n]
    parts = np.concatenate([poisson_rows(entropy, 5, rate, a, b, n) for a, b in zip(cuts, cuts[1:])])
    np.testing.assert_array_equal(parts, whole)
    assert np.all(np.diff(whole) > 0) and whole.min() >= 0 and whole.max() < n
    counts = [poisson_rows(entropy, s, rate, 0, n, n).size for s in range(40)]
    # Binomial(n, rate): mean 600, sd 24; the mean of 40 draws is within 6 sd / sqrt(40)
    assert abs(np.mean(counts) - n * rate) < 6 * np.sqrt(n * rate * (1 - rate) / 40)
    assert not np.array_equal(poisson_rows(entropy, 6, rate, 0, n, n), whole)


_CALLS = {"n": 0, "fail_at": -1, "signal_at": -1}
_LOCK = threading.Lock()
_SIGNAL = threading.Event()
_ORIGINAL = distributed._chunk_gradient


def _instrumented_chunk_gradient(*args, **kwargs):
    """The chunk task, counting its calls: fails once at call ``fail_at``, signals at
    ``signal_at`` (module-level so that the scheduler can serialize it)."""
    with _LOCK:
        _CALLS["n"] += 1
        count = _CALLS["n"]
    if count == _CALLS["signal_at"]:
        _SIGNAL.set()
    if count == _CALLS["fail_at"]:
        raise OSError("transient failure of a worker's read")
    return _ORIGINAL(*args, **kwargs)


@pytest.fixture
def instrumented(monkeypatch):
    _CALLS.update(n=0, fail_at=-1, signal_at=-1)
    _SIGNAL.clear()
    monkeypatch.setattr(distributed, "_chunk_gradient", _instrumented_chunk_gradient)
    return _CALLS


def test_a_failed_task_is_retried_and_changes_nothing(client, instrumented):
    X, y = data("squared")
    opts = dict(passes=4, smoothness=2.0, clip=0.7)
    ref = dpopt.solve(dpopt.Problem(X, y), "dp-gd", epsilon=1.0, random_state=9, **opts)
    instrumented["fail_at"] = 7  # a task of the second step
    got = dpopt.solve(chunked(X, y, 300), "dp-gd", epsilon=1.0, random_state=9, **opts)
    assert instrumented["n"] == 4 * 5 + 1  # 5 chunks x 4 steps, and the failed task again
    np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=TOL)
    instrumented.update(n=0)
    with pytest.raises(OSError, match="transient"):  # without retries it reaches the caller
        dpopt.solve(ChunkedProblem(da.from_array(X, chunks=(300, P)), y, retries=0), "dp-gd",
                    epsilon=1.0, random_state=9, **opts)


@pytest.mark.parametrize("held", [False, True], ids=["graph", "held"])
def test_a_worker_lost_mid_fit_changes_nothing(instrumented, held):
    X, y = data("logistic", seed=8)
    kw = dict(loss="logistic", penalty="l2", alpha=0.01, fit_intercept=True)
    opts = dict(passes=6, smoothness=0.5, clip=0.7)
    ref = dpopt.solve(dpopt.Problem(X, y, **kw), "dp-gd", epsilon=1.0, random_state=3, **opts)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as c:
        Xd = da.from_array(X, chunks=(250, P)).persist()  # chunks held by both workers
        problem = ChunkedProblem(Xd, y, **kw)
        if held:  # y held too: reductions submitted on the held chunks (ChunkedProblem.persist)
            problem.persist()
            assert problem._held_chunks() is not None
        victim = max(cluster.workers.values(), key=lambda w: len(w.data))
        instrumented["signal_at"] = 13  # during the third step

        def kill():
            if _SIGNAL.wait(60):
                cluster.sync(victim.close)

        killer = threading.Thread(target=kill)
        killer.start()
        got = dpopt.solve(problem, "dp-gd", epsilon=1.0, random_state=3, **opts)
        killer.join(60)
        assert _SIGNAL.is_set() and victim.status.name in ("closed", "closing")
        assert len(c.scheduler_info()["workers"]) == 1  # the rest ran on the survivor
    np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=TOL)


def test_memmap_npy_out_of_core_equals_in_memory(tmp_path):
    X, y = data("squared", seed=4)
    np.save(tmp_path / "X.npy", X.astype(np.float32))
    np.save(tmp_path / "y.npy", y)
    X32 = X.astype(np.float32).astype(np.float64)
    ref = dpopt.solve(dpopt.Problem(X32, y, fit_intercept=True), "dp-gd", epsilon=1.0,
                      random_state=0, passes=4, smoothness=2.0)
    mm = np.load(tmp_path / "X.npy", mmap_mode="r")
    for source, rows in ((mm, 256), (str(tmp_path / "X.npy"), 1000)):
        problem = ChunkedProblem(source, tmp_path / "y.npy", fit_intercept=True, chunk_rows=rows)
        assert problem.n_chunks == -(-N // rows)
        got = dpopt.solve(problem, "dp-gd", epsilon=1.0, random_state=0, passes=4, smoothness=2.0)
        np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=TOL)
    ref = dpopt.solve(dpopt.Problem(X32, y), "adassp", epsilon=1.0, random_state=0,
                      row_bound=3.0, target_bound=5.0)
    got = dpopt.solve(ChunkedProblem(mm, y, chunk_rows=333), "adassp", epsilon=1.0, random_state=0,
                      row_bound=3.0, target_bound=5.0)
    np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=TOL)


def test_dask_dataframe_with_target_column_and_estimator(client, tmp_path):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")  # needs pyarrow: dpopt[dask] installs it
    X, y = data("logistic", seed=6)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(P)]).assign(label=(y > 0).astype(int))
    ddf = dd.from_pandas(frame, npartitions=4)
    problem = ChunkedProblem(ddf, "label", loss="squared")
    assert (problem.n_samples, problem.n_features, problem.n_chunks) == (N, P, 4)
    frame_fit = dpopt.solve(problem, "adassp", epsilon=1.0, random_state=1, row_bound=3.0,
                            target_bound=1.0)
    ddf.to_parquet(tmp_path / "data.parquet")
    on_disk = dpopt.solve(ChunkedProblem(tmp_path / "data.parquet", "label"), "adassp",
                          epsilon=1.0, random_state=1, row_bound=3.0, target_bound=1.0)
    ref = dpopt.solve(dpopt.Problem(X, (y > 0).astype(float)), "adassp", epsilon=1.0,
                      random_state=1, row_bound=3.0, target_bound=1.0)
    np.testing.assert_allclose(frame_fit.w, ref.w, rtol=0, atol=TOL)
    np.testing.assert_allclose(on_disk.w, ref.w, rtol=0, atol=TOL)
    opts = {"passes": 3, "smoothness": 0.5, "clip": 0.7}
    ref = dpopt.DPLogisticRegression(epsilon=1.0, alpha=0.01, solver="dp-gd", solver_options=opts,
                                     random_state=0).fit(X, y)
    got = dpopt.DPLogisticRegression(epsilon=1.0, alpha=0.01, solver="dp-gd", solver_options=opts,
                                     random_state=0).fit(da.from_array(X, chunks=(400, P)),
                                                         da.from_array(y, chunks=400))
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=TOL)
    np.testing.assert_array_equal(got.classes_, ref.classes_)
    np.testing.assert_array_equal(got.predict(X), ref.predict(X))
    assert got.epsilon_spent_ == ref.epsilon_spent_


def test_solvers_that_do_not_take_chunked_data_say_which_do(client):
    X, y = data("squared")
    problem = chunked(X, y, 500)
    with pytest.raises(ValueError, match=r"dp-cd.*one cluster-wide reduction per coordinate"):
        dpopt.solve(problem, "dp-cd", epsilon=1.0)
    with pytest.raises(ValueError, match=r"\['adassp', 'dp-gd', 'dp-rbcd', 'dp-sgd', "
                                         r"'objective-perturbation'\]"):
        dpopt.solve(problem, "dp-svrg", epsilon=1.0)
    assert distributed.distributed_solvers() == ["adassp", "dp-gd", "dp-rbcd", "dp-sgd",
                                                 "objective-perturbation"]


@pytest.mark.parametrize("bad, match", [
    (lambda X, y: (np.where(np.arange(N)[:, None] == 1200, np.nan, X), y), "NaN"),
    (lambda X, y: (da.from_array(X, chunks=400).map_blocks(np.ma.masked_array), y),
     "NumPy or scipy.sparse chunks"),
    (lambda X, y: (da.from_array(sp.csr_matrix(np.where(np.arange(N)[:, None] == 900, np.inf, X)),
                                 chunks=(400, P), asarray=False), y), "NaN or infinity"),
    (lambda X, y: (X, y[:-1]), "inconsistent numbers of samples"),
    (lambda X, y: (X[:, 0], y), "2-dimensional"),
    (lambda X, y: (X, np.where(y > 0, 1.0, 0.0)), r"\{-1, \+1\}"),
])
def test_bad_chunked_input_is_refused(bad, match):
    X, y = data("logistic")
    Xb, yb = bad(X, y)
    with pytest.raises(ValueError, match=match):
        ChunkedProblem(da.from_array(Xb, chunks=400) if isinstance(Xb, np.ndarray) and Xb.ndim == 2
                       else Xb, yb, loss="logistic")


def test_zarr_array_on_disk_equals_in_memory(tmp_path):
    zarr = pytest.importorskip("zarr")  # the dask extra: installed by .ci/run
    X, y = data("squared", seed=9)
    store = zarr.create_array(str(tmp_path / "X.zarr"), shape=X.shape, chunks=(400, P),
                              dtype="f8")
    store[:] = X
    ref = dpopt.solve(dpopt.Problem(X, y), "dp-gd", epsilon=1.0, random_state=0, passes=3,
                      smoothness=2.0)
    problem = ChunkedProblem(tmp_path / "X.zarr", y)
    assert problem.n_chunks == 4
    got = dpopt.solve(problem, "dp-gd", epsilon=1.0, random_state=0, passes=3, smoothness=2.0)
    np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=TOL)


# ---------------------------------------------------------------------------
# sparse chunks


def test_sparse_chunks_adassp_dp_sgd_and_data_dependent_constants(client):
    X, y = sparse_data("squared", seed=2)
    kw = dict(penalty="l2", alpha=0.05, fit_intercept=True)
    opts = dict(row_bound=1.5, target_bound=2.0)  # some rows and targets are clipped
    ref = dpopt.solve(dpopt.Problem(X, y, **kw), "adassp", epsilon=0.5, random_state=2, **opts)
    for rows in (400, 1100):
        got = dpopt.solve(ChunkedProblem(X, y, chunk_rows=rows, **kw), "adassp", epsilon=0.5,
                          random_state=2, **opts)
        np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=TOL)
    # dp-sgd's batches depend on the seed and the row index only: sparse chunks = dense chunks
    sgd = dict(passes=2, batch_size=300, clip=0.5, smoothness=0.5)
    dense = dpopt.solve(chunked(X.toarray(), y, 500, **kw), "dp-sgd", epsilon=1.0,
                        random_state=4, **sgd)
    sparse = dpopt.solve(sparse_chunked(X, y, 377, **kw), "dp-sgd", epsilon=1.0, random_state=4,
                         **sgd)
    np.testing.assert_allclose(sparse.w, dense.w, rtol=0, atol=TOL)
    assert not np.allclose(dense.w, 0.0)
    # the non-private constants, computed chunk by chunk, are the in-memory Problem's
    problem, memory = sparse_chunked(X, y, 500, **kw), dpopt.Problem(X, y, **kw)
    np.testing.assert_allclose(problem.coordinate_smoothness(), memory.coordinate_smoothness(),
                               rtol=1e-12)
    assert problem.global_smoothness() == pytest.approx(memory.global_smoothness(), rel=1e-12)
    assert problem.max_row_nnz() == int(np.diff(memory.X_csr.indptr).max())
    assert problem.objective(ref.w) == pytest.approx(memory.objective(ref.w), rel=1e-12)


def test_sparse_chunks_with_duplicates_and_explicit_zeros_are_canonicalised(client):
    X, y = sparse_data("squared", seed=4, density=0.3)
    coo = X.tocoo()  # each entry split in two halves, plus stored zeros
    messy = sp.coo_matrix((np.concatenate([coo.data / 2, coo.data / 2, np.zeros(5)]),
                           (np.concatenate([coo.row, coo.row, np.arange(5)]),
                            np.concatenate([coo.col, coo.col, np.zeros(5, int)]))),
                          shape=X.shape).tocsr()
    assert messy.nnz > X.nnz
    Xd = da.from_array(messy, chunks=(400, P), asarray=False)
    with pytest.warns(dpopt.PrivacyLeakWarning):  # omega is read from the (sparse) data
        ref = dpopt.solve(dpopt.Problem(X, y), "dp-rbcd", epsilon=1.0, random_state=1,
                          sampling="nice", block_size=3, passes=3, clip=0.5,
                          smoothness=np.full(P, 0.8))
    with pytest.warns(dpopt.PrivacyLeakWarning):
        got = dpopt.solve(ChunkedProblem(Xd, y), "dp-rbcd", epsilon=1.0, random_state=1,
                          sampling="nice", block_size=3, passes=3, clip=0.5,
                          smoothness=np.full(P, 0.8))
    assert got.params["omega"] == ref.params["omega"]
    np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=TOL)


def test_sparse_chunk_design_and_row_norms_with_empty_rows():
    from dpopt.data.chunked import _csr_design, _row_sq_norms

    X, _ = sparse_data("squared", seed=3, density=0.15)
    X = sp.csr_matrix(X[:60].multiply(np.arange(60)[:, None] % 7 != 0))  # rows 0, 7, ... empty
    X = sp.vstack([X, sp.csr_matrix((2, P))], format="csr")  # and the last two
    assert np.diff(X.indptr)[[0, -1]].tolist() == [0, 0]
    design = _csr_design(X.tocoo(), True)
    np.testing.assert_array_equal(design.toarray(), np.hstack([X.toarray(), np.ones((62, 1))]))
    assert design.has_canonical_format
    for Z in (X, design):
        np.testing.assert_allclose(_row_sq_norms(Z), (Z.toarray() ** 2).sum(axis=1), rtol=1e-15)


def test_estimator_takes_a_dask_array_of_sparse_chunks(client):
    X, y = sparse_data("logistic", seed=6)
    opts = {"passes": 3, "smoothness": 0.5, "clip": 0.7}
    ref = dpopt.DPLogisticRegression(epsilon=1.0, alpha=0.01, solver="dp-gd", solver_options=opts,
                                     random_state=0).fit(X, y)
    got = dpopt.DPLogisticRegression(epsilon=1.0, alpha=0.01, solver="dp-gd", solver_options=opts,
                                     random_state=0).fit(da.from_array(X, chunks=(400, P),
                                                                       asarray=False),
                                                         da.from_array(y, chunks=400))
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=TOL)
    np.testing.assert_array_equal(got.predict(X), ref.predict(X))
    assert got.epsilon_spent_ == ref.epsilon_spent_


# ---------------------------------------------------------------------------
# dp-rbcd


RBCD_OPTIONS = [{"sampling": "nice", "block_size": 3},
                {"sampling": "bernoulli", "block_size": 2.5, "block_smoothness": "max"},
                {"sampling": "full"}]


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("options", RBCD_OPTIONS)
def test_dp_rbcd_chunked_equals_in_memory(client, options, sparse):
    X, y = (sparse_data if sparse else data)("logistic", seed=1)
    kw = dict(loss="logistic", penalty="l1", alpha=0.01, fit_intercept=True)
    opts = dict(options, passes=3, clip=0.7, smoothness=np.full(P + 1, 0.4), omega=P + 1)
    ref = dpopt.solve(dpopt.Problem(X, y, **kw), "dp-rbcd", epsilon=1.0, random_state=3, **opts)
    for rows in CHUNKINGS[1:3]:
        problem = (sparse_chunked if sparse else chunked)(X, y, rows, **kw)
        got = dpopt.solve(problem, "dp-rbcd", epsilon=1.0, random_state=3, **opts)
        np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=TOL)
        np.testing.assert_allclose(got.checkpoints, ref.checkpoints, rtol=0, atol=TOL)
        assert (got.epsilon, got.mechanisms, got.n_iter) == (ref.epsilon, ref.mechanisms,
                                                             ref.n_iter)
        assert got.params["coordinate_updates"] == ref.params["coordinate_updates"]
    assert not np.allclose(ref.w, 0.0)


def test_dp_rbcd_exact_smoothness_on_chunks_warns_and_matches(client):
    X, y = data("squared", seed=2)
    with pytest.warns(dpopt.PrivacyLeakWarning):
        ref = dpopt.solve(dpopt.Problem(X, y), "dp-rbcd", epsilon=1.0, random_state=5,
                          sampling="nice", block_size=4, passes=4)
    with pytest.warns(dpopt.PrivacyLeakWarning):
        got = dpopt.solve(chunked(X, y, 400), "dp-rbcd", epsilon=1.0, random_state=5,
                          sampling="nice", block_size=4, passes=4)
    np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=TOL)


@pytest.mark.parametrize("options", [{}, {"sampling": "importance"},
                                     {"sampling": "nice", "block_size": 1}])
def test_dp_rbcd_refuses_single_coordinates_on_chunks(options):
    X, y = data("squared")
    never_read = da.from_array(X, chunks=(500, P)).map_blocks(_fail_if_read, dtype=float)
    problem = ChunkedProblem(never_read, y, validate=False)
    with pytest.raises(ValueError, match="one coordinate per step.*large blocks"):
        dpopt.solve(problem, "dp-rbcd", epsilon=1.0, **options)  # "exact" M_j: not computed
    with pytest.raises(ValueError, match="one coordinate per step"):
        dpopt.solve(problem, "dp-rbcd", epsilon=1.0, smoothness=np.ones(P), **options)


class _OneCoordinate:
    """A user sampler of single coordinates."""

    max_size = 1

    def marginals(self):
        return np.full(P, 1.0 / P)

    def draw(self, rng):
        return rng.integers(0, P, size=1)


def test_dp_rbcd_refuses_a_user_sampler_of_single_coordinates_on_chunks():
    X, y = data("squared")
    never_read = da.from_array(X, chunks=(500, P)).map_blocks(_fail_if_read, dtype=float)
    with pytest.raises(ValueError, match="one coordinate per step"):
        dpopt.solve(ChunkedProblem(never_read, y, validate=False), "dp-rbcd", epsilon=1.0,
                    sampling=_OneCoordinate(), smoothness=np.ones(P))


def _fail_if_read(block):
    raise AssertionError("the data was read")


# ---------------------------------------------------------------------------
# a worker process killed mid-fit


def test_a_worker_process_killed_mid_fit_changes_nothing(tmp_path, monkeypatch):
    """Two worker processes under nannies; a chunk task of the second step SIGKILLs its own
    worker process. The scheduler reruns the lost work (on the survivor, or on the process
    the nanny starts meanwhile) and the fit is bit for bit the undisturbed one."""
    import functools
    import os

    import dask

    from _worker_kill import gradient_killing_its_worker_once

    X, y = data("squared", seed=12)
    opts = dict(passes=4, smoothness=2.0, clip=0.7)
    ref = dpopt.solve(dpopt.Problem(X, y), "dp-gd", epsilon=1.0, random_state=6, **opts)
    problem = chunked(X, y, 250)
    with dask.config.set(scheduler="sync"):  # the same graph, hence the same order of additions
        undisturbed = dpopt.solve(problem, "dp-gd", epsilon=1.0, random_state=6, **opts)
    flag = tmp_path / "killed"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as c:
        pids = set(c.run(os.getpid).values())
        monkeypatch.setattr(distributed, "_chunk_gradient",
                            functools.partial(gradient_killing_its_worker_once, flag=str(flag)))
        got = dpopt.solve(problem, "dp-gd", epsilon=1.0, random_state=6, **opts)
        # the flag is written just before the SIGKILL: a worker process died during the fit
        assert int(flag.read_text()) in pids
    np.testing.assert_array_equal(got.w, undisturbed.w)
    np.testing.assert_array_equal(got.checkpoints, undisturbed.checkpoints)
    np.testing.assert_allclose(got.w, ref.w, rtol=0, atol=TOL)
