"""BudgetAccountant: refusal, tight composition, context manager, adjacency, copies."""

import math
import pickle
import threading

import numpy as np
import pytest

import dpopt
from dpopt.privacy import gdp_epsilon
from dpopt.privacy.budget import Spend, current_budget


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4))
    y = X @ np.array([1.0, -0.5, 0.0, 0.25]) + 0.1 * rng.standard_normal(300)
    return dpopt.Problem(X, y, loss="squared", penalty="l2", alpha=0.1)


PUBLIC = {"smoothness": np.ones(4), "passes": 2}  # public constants: no PrivacyLeakWarning


def _fit(problem, eps, seed=0, **kw):
    return dpopt.solve(problem, "dp-cd", epsilon=eps, delta=kw.pop("delta", 1e-7),
                       random_state=seed, **PUBLIC, **kw)


def test_refuses_before_fitting_and_records_nothing(problem):
    acc = dpopt.BudgetAccountant(epsilon=1.0, delta=1e-5)
    granted = 0
    with acc:
        for seed in range(20):
            try:
                _fit(problem, 0.4, seed)
            except dpopt.BudgetExceededError as exc:
                assert isinstance(exc, ValueError) and "nothing was fitted" in str(exc)
                break
            granted += 1
            assert acc.spent() <= acc.epsilon  # the pre-fit check is conservative
    assert 2 <= granted < 20
    assert len(acc.ledger) == granted
    spent = acc.spent()
    with pytest.raises(dpopt.BudgetExceededError):
        _fit(problem, 0.4, budget=acc)
    assert len(acc.ledger) == granted and acc.spent() == spent


def test_composition_is_tight_and_beats_basic_composition(problem):
    acc = dpopt.BudgetAccountant(epsilon=10.0, delta=1e-5)
    results = [_fit(problem, 0.3, seed, budget=acc) for seed in range(6)]
    basic_eps, basic_delta = acc.basic_composition()
    assert basic_eps == pytest.approx(6 * 0.3, rel=1e-6) and basic_delta < acc.delta
    # DP-CD fits are Gaussian compositions: the ledger is composed exactly (Gaussian DP)
    mu = math.sqrt(sum(m.count / m.noise_multiplier ** 2 for r in results for m in r.mechanisms))
    assert acc.spent() == pytest.approx(gdp_epsilon(mu, acc.delta), rel=1e-9)
    assert acc.spent() < 0.6 * basic_eps


def test_black_box_entries_compose_with_pld():
    acc = dpopt.BudgetAccountant(epsilon=10.0, delta=1e-5)
    for _ in range(10):
        acc.record(Spend("external release", 0.2, 1e-7, "replace-one"))
    basic, _ = acc.basic_composition()
    assert acc.spent() < basic  # advanced composition beats the sum ...
    assert acc.spent() > 0.2  # ... and is a real composition


def test_context_manager_is_the_default(problem):
    outer = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-5)
    inner = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-5)
    assert current_budget() is None
    with outer:
        _fit(problem, 0.5)
        with inner:
            _fit(problem, 0.5)
            est = dpopt.DPLinearRegression(solver="dp-cd", epsilon=0.5, delta=1e-7, random_state=0,
                                           solver_options={"smoothness": np.ones(5)})
            est.fit(problem.X, problem.y)
        assert current_budget() is outer
    assert current_budget() is None
    _fit(problem, 0.5)  # not recorded anywhere
    assert [len(outer.ledger), len(inner.ledger)] == [1, 2]


def test_non_private_fits_refused(problem):
    acc = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-5)
    with pytest.raises(dpopt.BudgetExceededError, match="non-private"):
        dpopt.solve(problem, "reference", epsilon=1.0, budget=acc)
    with pytest.raises(dpopt.BudgetExceededError, match="non-private"):
        _fit(problem, math.inf, budget=acc)
    assert acc.ledger == []


def test_failed_fit_releases_its_reservation(problem):
    acc = dpopt.BudgetAccountant(epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="step"):
        _fit(problem, 0.9, budget=acc, step=-1.0)
    assert acc.ledger == [] and acc.spent() == 0.0
    _fit(problem, 0.9, budget=acc)  # the whole budget is still available


def test_adjacencies_are_not_mixed_silently(problem):
    sgd = {"passes": 1, "smoothness": 4.0, "adjacency": "add-remove"}
    strict = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-5)
    with pytest.raises(dpopt.BudgetExceededError, match="convert_adjacency"):
        dpopt.solve(problem, "dp-sgd", epsilon=0.5, delta=1e-7, random_state=0, budget=strict,
                    **sgd)
    assert strict.ledger == []
    conv = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-5, convert_adjacency=True)
    res = dpopt.solve(problem, "dp-sgd", epsilon=0.5, delta=1e-7, random_state=0, budget=conv,
                      **sgd)
    (entry,) = conv.ledger
    assert entry.converted_from == "add-remove" and entry.adjacency == "replace-one"
    assert entry.epsilon == pytest.approx(2 * res.epsilon)
    z = res.mechanisms[0].noise_multiplier
    assert entry.mechanisms[0].noise_multiplier == pytest.approx(z / 2)
    add_remove = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-5, adjacency="add-remove",
                                        convert_adjacency=True)
    with pytest.raises(dpopt.BudgetExceededError, match="does not imply"):
        _fit(problem, 0.5, budget=add_remove)


def test_remaining_is_what_can_still_be_granted(problem):
    acc = dpopt.BudgetAccountant(epsilon=1.5, delta=1e-5)
    _fit(problem, 0.8, budget=acc)
    rem = acc.remaining(delta=1e-7)
    assert 0.5 < rem < 1.5
    acc.check(rem, 1e-7)
    with pytest.raises(dpopt.BudgetExceededError):
        acc.check(rem * 1.02, 1e-7)


def test_concurrent_fits_cannot_overspend(problem):
    acc = dpopt.BudgetAccountant(epsilon=1.0, delta=1e-5)
    outcomes = []

    def work(seed):
        try:
            _fit(problem, 0.45, seed, budget=acc)
            outcomes.append("ok")
        except dpopt.BudgetExceededError:
            outcomes.append("refused")

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("ok") == len(acc.ledger) >= 1
    assert acc.spent() <= acc.epsilon


def test_copies_share_or_detach():
    acc = dpopt.BudgetAccountant(epsilon=1.0, delta=1e-5)
    import copy

    assert copy.deepcopy(acc) is acc and copy.copy(acc) is acc
    clone = pickle.loads(pickle.dumps(acc))
    with pytest.raises(ValueError, match="fork the ledger"):
        clone.check(0.1, 1e-7)


@pytest.mark.parametrize("kwargs, name", [
    ({"epsilon": 0.0, "delta": 1e-5}, "epsilon"),
    ({"epsilon": math.inf, "delta": 1e-5}, "epsilon"),
    ({"epsilon": 1.0, "delta": 0.0}, "delta"),
    ({"epsilon": 1.0, "delta": 1e-5, "adjacency": "swap"}, "adjacency"),
    ({"epsilon": 1.0, "delta": 1e-5, "accountant": "magic"}, "accountant"),
])
def test_bad_budget_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        dpopt.BudgetAccountant(**kwargs)


def test_report_mentions_every_fit(problem):
    acc = dpopt.BudgetAccountant(epsilon=2.0, delta=1e-5)
    _fit(problem, 0.5, budget=acc)
    text = acc.report()
    assert "dp-cd" in text and "basic composition" in text
