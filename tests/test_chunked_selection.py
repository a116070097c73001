"""The held-out choice between the model and the constant on chunked data
(dpopt.pipeline.selection): the same split, releases and decision as in memory at the same
seed, whatever the chunking."""

import numpy as np
import pytest

import dpopt
from dpopt.pipeline.held_out import held_out_totals, score_totals

da = pytest.importorskip("dask.array")  # the dask extra: installed by .ci/run
pytest.importorskip("distributed")
from test_distributed import client  # noqa: E402,F401,I001  (the two-worker LocalCluster fixture)

from dpopt.data.chunked import ChunkedProblem  # noqa: E402
from dpopt.pipeline.chunked import ChunkedData  # noqa: E402
from dpopt.pipeline.scaling import InMemoryData  # noqa: E402

on_cluster = pytest.mark.usefixtures("client")
N = 1500


def data(signal, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, 4)) * np.array([0.5, 3.0, 20.0, 1.0]) + np.array([0, 5, -40, 1])
    y = 3.0 + signal * (X @ np.array([1.0, -0.5, 0.05, 2.0])) + 0.5 * rng.standard_normal(N)
    return X, y


def test_take_keeps_the_rows_in_order_and_refuses_a_bad_index():
    X, y = data(1.0)
    problem = ChunkedProblem(da.from_array(X, chunks=(377, 4)), da.from_array(y, chunks=377))
    index = np.array([0, 3, 376, 377, 1000, N - 1])
    part = problem.take(index)
    assert part.n_samples == len(index) and part.n_features == 4
    np.testing.assert_array_equal(part.X.compute(), X[index])
    np.testing.assert_array_equal(part.y.compute(), y[index])
    for bad in ([3, 1], [1, 1], [-1, 2], [N]):
        with pytest.raises(ValueError, match="index must be sorted distinct row numbers"):
            problem.take(np.array(bad))


def pair(estimator, X, target, rows, epsilon):
    ref = estimator(epsilon=epsilon, random_state=3).fit(X, target)
    got = estimator(epsilon=epsilon, random_state=3).fit(
        da.from_array(X, chunks=(rows, 2)), da.from_array(target, chunks=600))
    return ref, got


@on_cluster
@pytest.mark.parametrize("estimator, classify, atol", [
    (dpopt.DPLinearRegression, False, 1e-9),
    (dpopt.DPLogisticRegression, True, 2e-6),  # objective perturbation's tolerance
])
@pytest.mark.parametrize("signal", [1.0, 0.0])
def test_chunked_held_out_choice_equals_in_memory(estimator, classify, atol, signal):
    """Same split (the fit's generator), same training branch on the training rows, same
    held-out release summed over chunks, same decision: with signal the model, without it
    the constant (do no harm out of core too)."""
    X, y = data(signal)
    target = np.where(y > np.median(y), "yes", "no") if classify else y
    for rows in (500, (100, 1100, 300)):
        ref, got = pair(estimator, X, target, rows, epsilon=1.0)
        a, b = ref.auto_.plan["selection"], got.auto_.plan["selection"]
        assert b["released"] == a["released"]
        assert b["validation_rows"] == a["validation_rows"] == N // 5
        assert b["sigma"] == pytest.approx(a["sigma"], rel=1e-12)
        np.testing.assert_allclose(b["noisy_scores"], a["noisy_scores"], rtol=0, atol=1e-9)
        np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=atol)
        np.testing.assert_allclose(got.intercept_, ref.intercept_, rtol=0, atol=atol)
        assert got.fit_result_.mechanisms == ref.fit_result_.mechanisms
        assert got.epsilon_spent_ == pytest.approx(ref.epsilon_spent_, rel=1e-12)
        assert got.epsilon_spent_ <= 1.0 + 1e-9
    assert (a["released"] == "model") == (signal > 0)


@on_cluster
def test_the_chunked_held_out_sums_refuse_a_broken_bound():
    """A per-record difference beyond the bound the noise is calibrated to stops the
    release, counted on the workers as in memory."""
    X, y = data(1.0)
    reg = dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(X, y)
    auto = reg.auto_
    cands = [("model", np.asarray(auto.result.coef, float), float(auto.result.intercept)),
             ("noisy mean of y", np.zeros(4), 0.0)]
    kwargs = dict(scaling=auto.scaling, target=auto.target, cands=cands, regression=True)
    memory = score_totals(X, y, bound=1.0, **kwargs)
    problem = ChunkedProblem(da.from_array(X, chunks=(377, 4)), da.from_array(y, chunks=377))
    np.testing.assert_allclose(held_out_totals(ChunkedData(problem), bound=1.0, **kwargs),
                               memory[:-1], rtol=1e-12)
    for records in (ChunkedData(problem), InMemoryData(X, y)):
        with pytest.raises(RuntimeError, match="beyond its bound"):
            held_out_totals(records, bound=1e-6, **kwargs)


@on_cluster
@pytest.mark.parametrize("estimator, classify", [(dpopt.DPLinearRegression, False),
                                                 (dpopt.DPLogisticRegression, True)])
def test_chunks_with_no_held_out_or_no_training_row(estimator, classify):
    """Chunks of 3 rows: about half hold no held-out row, some no training row; the empty
    parts add nothing and the fit equals the in-memory one."""
    X, y = data(1.0)
    X, y = X[:150], y[:150]
    target = np.where(y > np.median(y), "yes", "no") if classify else y
    ref = estimator(epsilon=4.0, random_state=1).fit(X, target)
    got = estimator(epsilon=4.0, random_state=1).fit(
        da.from_array(X, chunks=(3, 4)), da.from_array(target, chunks=3))
    assert got.auto_.plan["selection"]["released"] == ref.auto_.plan["selection"]["released"]
    assert got.auto_.plan["selection"]["validation_rows"] == 30
    np.testing.assert_allclose(got.auto_.plan["selection"]["noisy_scores"],
                               ref.auto_.plan["selection"]["noisy_scores"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=0, atol=2e-6)


def test_the_chunked_auto_benchmark_runs_on_a_small_problem():
    """benchmarks/bench_chunked_auto.py (its own LocalCluster: a separate process here)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_chunked_auto.py"
    out = subprocess.run([sys.executable, str(script), "--rows", "3000", "--chunk-rows", "1000",
                          "--repeats", "1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith("DP")]
    assert [r[0] for r in rows] == ["DPLogisticRegression", "DPLinearRegression"]
    assert all(float(r[3]) > 0 and float(r[5]) > 0 for r in rows)  # the two ratios
