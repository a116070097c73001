"""The default-fit speed benchmark (benchmarks/bench_default_fit.py) runs: every stage it
times still exists (it wraps them by name), on a small problem."""

import numpy as np

from _benchmarks import load_benchmark


def test_the_timed_stages_exist_and_a_small_comparison_runs():
    bench = load_benchmark("bench_default_fit")
    for _, owner, name in bench.STAGES:
        assert callable(getattr(owner, name)), name
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 5))
    y = (X @ np.linspace(1, -1, 5) + rng.logistic(size=3000) > 0).astype(int)
    dp, sk, stages, model, ref = bench.compare(X, y, X, repeats=1)
    assert dp[0] > 0 and sk[0] > 0
    assert stages["mechanism (solver)"] > 0 and stages["private scaling"] > 0
    assert model.score(X, y) > 0.6 and ref.score(X, y) > 0.6
