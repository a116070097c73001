import os
from pathlib import Path

import numpy as np
import pytest


def shared_data_file(name):
    """Path of a real dataset in $DPOPT_DATA, or skip the test saying what to do."""
    how = (f"set DPOPT_DATA to a directory holding {name}.npz (keys as in the datasets' "
           f"MANIFEST.md; dpopt.datasets.load_dataset({name!r}) downloads and caches it)")
    root = os.environ.get("DPOPT_DATA", "").strip()
    if not root:
        pytest.skip(f"real dataset {name!r} not available: DPOPT_DATA is not set; {how}")
    path = Path(root) / f"{name}.npz"
    if not path.is_file():
        pytest.skip(f"real dataset {name!r} not available: {path} does not exist; {how}")
    return path


@pytest.fixture
def regression_data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 6)) * np.array([1, 2, 5, 0.5, 1, 3])
    w = np.array([1.0, -2.0, 0.0, 0.5, 0.0, 0.3])
    y = X @ w + 0.1 * rng.standard_normal(80)
    return X, y


@pytest.fixture
def classification_data():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((100, 5))
    y = np.where(X @ np.array([1.0, -1.0, 0.5, 0.0, 2.0]) + 0.3 * rng.standard_normal(100) > 0,
                 1.0, -1.0)
    return X, y
