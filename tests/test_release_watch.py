"""The charge point knows when the model path began to release (dpopt.privacy.releases):
a failure after that point is an output of the releases and is charged whole; a refusal of
public facts before it charges nothing. Each test but the last two fails without its fix."""

import numpy as np
import pandas as pd
import pytest

import dpopt
import dpopt.pipeline.default_path as default_path
import dpopt.pipeline.feature_selection as feature_selection
from dpopt.privacy.releases import begin, watch


def regression(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, X @ np.array([1.0, -0.5, 0.2, 0.0]) + rng.normal(size=n)


def budget():
    return dpopt.BudgetAccountant(epsilon=50, delta=1e-2)


@pytest.mark.parametrize("estimator", [
    dpopt.DPLasso(alpha=-1.0), dpopt.DPElasticNet(l1_ratio=2.0),
    dpopt.DPHuberRegressor(threshold=0.0), dpopt.DPLinearRegression(alpha="big"),
], ids=["lasso alpha", "elastic net l1_ratio", "huber threshold", "ridge alpha"])
def test_bad_parameters_are_refused_before_a_tables_releases(estimator):
    """A table with a text column makes the table layer release its categories first; a
    bad alpha, l1_ratio or Huber threshold was checked only when the scaled problem was
    built, after them, and the refusal was charged as a ChargedFitError (epsilon 0.196 of
    a budget of 50 for DPLasso(alpha=-1))."""
    X, y = regression(500)
    frame = pd.DataFrame({"a": X[:, 0], "s": np.random.default_rng(1).choice(list("xyz"), 500)})
    acc = budget()
    with pytest.raises(ValueError) as err:
        estimator.set_params(epsilon=1.0, random_state=0, accountant=acc).fit(frame, y)
    assert not isinstance(err.value, dpopt.ChargedFitError) and acc.ledger == []


def test_a_classifiers_bad_penalty_is_refused_before_its_labels_are_selected():
    X, y = regression(500)
    acc = budget()
    with pytest.raises(ValueError, match="l1_ratio") as err:
        dpopt.DPLogisticRegression(penalty="elastic_net", l1_ratio=-0.5, accountant=acc,
                                   random_state=0).fit(X, np.where(y > 0, "a", "b"))
    assert not isinstance(err.value, dpopt.ChargedFitError) and acc.ledger == []


def _raise(*args, **kwargs):
    raise ValueError("decided by a release")


@pytest.mark.parametrize("where, module, name", [
    ("after the private scaling", default_path, "_model_options"),
    ("after the constant's releases", default_path, "constant_fit"),
])
def test_a_value_error_after_the_first_release_charges_the_whole_fit(monkeypatch, where,
                                                                    module, name):
    """A regressor on an array has no table release before the model path, so a ValueError
    from inside it passed uncharged, whatever the scaling or the constant had released."""
    monkeypatch.setattr(module, name, _raise)
    X, y = regression(2000 if name == "_model_options" else 90)  # 90: the private mean
    acc = budget()
    with pytest.raises(dpopt.ChargedFitError, match="decided by a release"):
        dpopt.DPLinearRegression(epsilon=1.0, random_state=0, accountant=acc).fit(X, y)
    assert len(acc.ledger) == 1 and acc.ledger[0].epsilon == pytest.approx(1.0, rel=1e-9)


def test_a_value_error_after_the_screen_charges_the_whole_fit(monkeypatch):
    """On the high-dimensional route the screen is the model path's first release; a
    ValueError after it charged only the declared classes' counts."""
    monkeypatch.setattr(feature_selection, "select_features", _raise)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3000))
    y = np.where(X[:, 0] + rng.normal(size=300) > 0, "a", "b")
    acc = budget()
    with pytest.raises(dpopt.ChargedFitError, match="decided by a release"):
        dpopt.DPLogisticRegression(epsilon=1.0, random_state=0, accountant=acc,
                                   classes=["a", "b"]).fit(X, y)
    assert len(acc.ledger) == 1 and acc.ledger[0].epsilon == pytest.approx(1.0, rel=1e-9)


def test_a_refusal_before_any_release_passes_uncharged(monkeypatch):
    """The model share's check runs on public n, epsilon and delta before the scaling: its
    ValueError is a refusal, not an output of a release."""
    monkeypatch.setattr(default_path, "_check_model_share", _raise)
    X, y = regression()
    acc = budget()
    with pytest.raises(ValueError, match="decided by a release") as err:
        dpopt.DPLinearRegression(epsilon=1.0, random_state=0, accountant=acc).fit(X, y)
    assert not isinstance(err.value, dpopt.ChargedFitError) and acc.ledger == []


def test_a_watch_is_per_block_and_begin_outside_one_does_nothing():
    begin()
    with watch() as outer:
        with watch() as inner:
            begin()
        assert inner.started and not outer.started
        begin()
    assert outer.started
