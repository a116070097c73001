"""Experiment runner: resume after a kill, bit-identical results across backends."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpopt.experiments.runner import ResultStore, config_key, run_grid, strip_timings

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
CONFIGS = [{"scale": s, "rep": r, "size": 16} for s in (0.5, 2.0) for r in range(4)]


def _noisy():
    from _runner_helpers import noisy_run

    return noisy_run


def _grid(tmp_path, name, **kw):
    store = ResultStore(tmp_path / f"{name}.jsonl")
    return strip_timings(run_grid(CONFIGS, _noisy(), store=store, root_seed=11, progress=False,
                                  **kw))


def test_bit_identical_across_local_backends(tmp_path):
    ref = _grid(tmp_path, "sequential", backend="sequential")
    assert [r["config"] for r in ref] == CONFIGS
    assert len({r["value"] for r in ref}) == len(CONFIGS)  # every run has its own seed
    for backend, n_jobs in (("threading", 2), ("loky", 2)):
        assert _grid(tmp_path, backend, backend=backend, n_jobs=n_jobs) == ref, backend


def test_bit_identical_on_dask(tmp_path):
    distributed = pytest.importorskip("distributed")
    ref = _grid(tmp_path, "sequential", backend="sequential")
    # an in-process LocalCluster keeps the test fast; the address path is what
    # `dpopt reproduce --backend dask --scheduler ADDRESS` uses
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        got = _grid(tmp_path, "dask-address", backend="dask", scheduler=cluster.scheduler_address)
        with distributed.Client(cluster):  # an active client is reused
            again = _grid(tmp_path, "dask-client", backend="dask")
    assert got == ref and again == ref


@pytest.mark.slow
def test_bit_identical_on_dask_process_cluster(tmp_path):
    pytest.importorskip("distributed")
    ref = _grid(tmp_path, "sequential", backend="sequential")
    assert _grid(tmp_path, "dask", backend="dask", n_jobs=2) == ref  # LocalCluster, 2 processes


def test_resume_after_kill_loses_and_repeats_nothing(tmp_path):
    store_path, log = tmp_path / "runs.jsonl", tmp_path / "started.log"
    configs = [{"i": i, "sleep": 0.15} for i in range(12)]
    script = (
        "import json, sys\n"
        "from _runner_helpers import slow_logged_run\n"
        "from dpopt.experiments.runner import ResultStore, run_grid\n"
        "configs = json.loads(sys.argv[1])\n"
        "run_grid(configs, slow_logged_run, store=ResultStore(sys.argv[2]), root_seed=5,\n"
        "         backend='sequential', progress=False)\n")
    env = dict(os.environ, RUNNER_LOG=str(log),
               PYTHONPATH=os.pathsep.join([str(SRC), str(HERE)]))
    proc = subprocess.Popen([sys.executable, "-c", script, json.dumps(configs), str(store_path)],
                            env=env)
    try:
        deadline = time.monotonic() + 60
        while len(ResultStore(store_path).records()) < 4:
            assert proc.poll() is None, "the run finished before it could be killed"
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    before = ResultStore(store_path).records()
    assert 4 <= len(before) < len(configs)
    with store_path.open("a") as fh:  # a record cut mid-write by the kill
        fh.write('{"key": "0123", "config": {"i": 9')
    started_before = log.read_text().split()
    os.environ["RUNNER_LOG"] = str(log)
    try:
        from _runner_helpers import slow_logged_run

        records = run_grid(configs, slow_logged_run, store=ResultStore(store_path), root_seed=5,
                           backend="sequential", progress=False)
    finally:
        del os.environ["RUNNER_LOG"]
    started_after = log.read_text().split()[len(started_before):]
    done_before = {r["config"]["i"] for r in before}
    assert sorted(int(i) for i in started_after) == sorted(set(range(12)) - done_before)
    assert [r["config"] for r in records] == configs
    keys = [r["key"] for r in ResultStore(store_path).records()]
    assert sorted(keys) == sorted(config_key(c) for c in configs)  # each run exactly once
    for r in before:  # the finished runs were kept as they were
        assert r in records


def test_duplicates_run_once_and_arguments_checked(tmp_path):
    store = ResultStore(tmp_path / "r.jsonl")
    recs = run_grid(CONFIGS[:2] * 3, _noisy(), store=store, backend="sequential", progress=False)
    assert len(recs) == 2 and len(store.records()) == 2
    with pytest.raises(ValueError, match="backend"):
        run_grid(CONFIGS, _noisy(), store=store, backend="spark")
    with pytest.raises(ValueError, match="scheduler"):
        run_grid(CONFIGS, _noisy(), store=store, backend="loky", scheduler="tcp://x:1")


def test_strip_timings_drops_every_wall_time_field_and_keeps_the_rest():
    record = {"rel_error": [0.5], "wall": [1.2], "time": 3.0, "fit_time": 0.1, "times": [1],
              "elapsed": 2.0, "results": [{"wall_time": 1.0, "clip": 0.5}], "passes": 4}
    assert strip_timings(record) == {"rel_error": [0.5], "results": [{"clip": 0.5}], "passes": 4}
