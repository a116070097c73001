"""Top-level run functions for the runner tests (importable by worker processes)."""

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
