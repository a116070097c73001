"""The private mean of y when its histograms do not resolve its range: the records the
largest bins place (dpopt.pipeline.mean_of_y._anchored)."""

import math
import warnings

import numpy as np
import pytest

from dpopt.pipeline import mean_of_y
from dpopt.pipeline.mean_of_y import _anchored, private_mean_of_y
from dpopt.pipeline.scaling import InMemoryData
from dpopt.preprocessing._bounds import DEFAULT_GRID
from dpopt.privacy import gdp_mu

GRID = DEFAULT_GRID


def _counts(values, sigma, rng):
    exact = np.bincount(GRID.bin_index(np.asarray(values, dtype=float)), minlength=GRID.n_bins)
    return exact + sigma * rng.standard_normal(GRID.n_bins)


def _constants(y, mu, seeds):
    """(released constant in y's units, what) over ``seeds`` fits of the mean alone."""
    data, out = InMemoryData(np.zeros((y.size, 1)), y), []
    for seed in range(seeds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            target, mean, records, what, spent = private_mean_of_y(
                data, mu, np.random.default_rng(seed))
        assert sum(1 / r.noise_multiplier ** 2 for r in records) == pytest.approx(spent ** 2)
        out.append((0.0 if target is None else target.center + target.half_width * mean, what))
    return out


def test_noise_alone_places_nothing():
    """Pure noise: the largest of the 109 bins clears 4.5 sigma with probability 3.7e-4, so
    no range is read (the constant stays 0)."""
    rng = np.random.default_rng(0)
    placed = [_anchored(_counts([], 20.0, rng), 20.0, GRID) for _ in range(300)]
    assert sum(p is not None for p in placed) <= 1


def test_the_largest_bins_place_a_target_and_its_mirror():
    """Three adjacent bins 3-6 sigma high are placed, a lone noise bin two decades away is
    not (the range is contiguous); a target centred at 0 is placed on both signs, so the
    mean read from the placed bins stays near 0."""
    sigma, rng = 10.0, np.random.default_rng(1)
    counts = np.zeros(GRID.n_bins)
    y = np.concatenate([np.full(35, 70.0), np.full(40, 130.0), np.full(60, 240.0)])
    counts += np.bincount(GRID.bin_index(y), minlength=GRID.n_bins)
    far = GRID.bin_index(np.array([30000.0]))[0]
    counts[far] = 2.5 * sigma
    placed = _anchored(counts, sigma, GRID)
    assert set(np.flatnonzero(placed)) == set(GRID.bin_index(y))
    signed = 3.0 * rng.standard_normal(2000)
    placed = _anchored(_counts(signed, sigma, rng), sigma, GRID)
    lo, hi = GRID.bin_ends()
    assert lo[placed].min() < -1.0 and hi[placed].max() > 1.0


def test_an_unresolved_target_far_from_zero_is_not_released_as_zero(monkeypatch):
    """The diabetes target's shape (mean 152, sd 77, 331 rows) at epsilon = 0.25: in about a
    fifth of the fits no scan resolves even the pooled histogram at mu, and the constant was
    0, an R^2 loss of (152 / 77)^2 = 3.9. The largest bins place the records, and the loss
    falls well below that; a target centred at 0 stays near 0."""
    n = 331
    mu = gdp_mu(0.25, 1 / n ** 2)
    y = np.clip(152 + 77 * np.random.default_rng(0).standard_normal(n), 25, 346)

    def loss(fits):
        return np.mean([((c - y.mean()) / y.std()) ** 2 for c, _ in fits])

    placed = _constants(y, mu, 60)
    assert any("place" in what for _, what in placed)
    monkeypatch.setattr(mean_of_y, "_anchored", lambda noisy, sigma, grid: None)
    zeros = _constants(y, mu, 60)
    assert loss(zeros) > 0.5 and loss(placed) < 0.25 * loss(zeros)
    monkeypatch.undo()
    signed = 3.0 * np.random.default_rng(1).standard_normal(300)
    fits = _constants(signed, gdp_mu(0.25, 1 / 300 ** 2), 60)
    assert np.mean([(c / signed.std()) ** 2 for c, _ in fits]) < 0.02
    assert math.isfinite(loss(placed))
