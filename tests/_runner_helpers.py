"""Top-level run functions for the runner tests (importable by worker processes)."""

import functools
import os
import time

import numpy as np


def noisy_run(config, seed):
    """A deterministic function of (config, seed) that exercises numpy's generators."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(config.get("size", 8)) * config["scale"]
    return {"value": float(x.sum()), "draws": x.tolist(), "elapsed": time.perf_counter()}


def slow_logged_run(config, seed):
    """Log the start of each run to $RUNNER_LOG, then sleep (for the kill/resume test)."""
    with open(os.environ["RUNNER_LOG"], "a") as fh:
        fh.write(f"{config['i']}\n")
    time.sleep(config.get("sleep", 0.2))
    return {"value": float(np.random.default_rng(seed).standard_normal())}


@functools.lru_cache(maxsize=1)
def toy_problem():
    """Fixed data (the run's seed drives the solver only) and its optimum F*."""
    import dpopt

    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 4))
    y = X @ np.array([1.0, -0.5, 0.0, 0.25]) + 0.1 * rng.standard_normal(200)
    problem = dpopt.Problem(X, y, loss="squared", penalty="l2", alpha=0.1)
    return problem, dpopt.reference_optimum(problem)[1]


def dpcd_run(config, seed):
    """A small private fit recorded with the fields dpopt.experiments.plotting reads."""
    import dpopt
    from dpopt.experiments.runner import fit_record

    problem, f_star = toy_problem()
    smoothness = np.ones(4) if config["solver"] == "dp-cd" else 4.0  # public constants
    res = dpopt.solve(problem, config["solver"], epsilon=config["epsilon"], delta=1e-6,
                      random_state=seed, passes=config.get("passes", 4), smoothness=smoothness)
    return fit_record(problem, res, f_star)


def toy_experiment(out, quick, n_jobs, backend, progress):
    """An experiment with the registered signature, for the `dpopt reproduce` test."""
    from dpopt.experiments.runner import ResultStore, run_grid

    configs = [{"solver": "dp-cd", "epsilon": e, "seed": r} for e in (1.0, 4.0) for r in range(2)]
    records = run_grid(configs, dpcd_run, store=ResultStore(out / "runs.jsonl"), n_jobs=n_jobs,
                       backend=backend, progress=progress)
    return {"runs": len(records)}
