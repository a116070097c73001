import os
from pathlib import Path

import numpy as np
import pytest


def shared_data_file(name):
    """Path of a real dataset in $DPOPT_DATA, or skip the test with the reason."""
    root = os.environ.get("DPOPT_DATA")
    if not root:
        pytest.skip("DPOPT_DATA is not set: real datasets are not available here")
    path = Path(root) / f"{name}.npz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
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
