"""Labels at the edges, on chunks as in memory (an independent fuzz of session 25): each
test fails without its fix."""

import warnings

import numpy as np
import pandas as pd
import pytest

import dpopt
from dpopt.privacy import Gaussian

da = pytest.importorskip("dask.array")  # the dask extra: installed by .ci/run
dd = pytest.importorskip("dask.dataframe")


def chunked(X, y, rows=1000):
    return da.from_array(X, chunks=(rows, -1)), da.from_array(y, chunks=rows)


def binary(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, X[:, 0] + rng.normal(size=n) > 0


def test_an_explicit_solver_on_chunks_keeps_the_declared_classes():
    """classes= on a Dask y with an explicit solver: the declared pair, as in memory (the
    chunked path read every label of y, one held by a single record, without a warning);
    undeclared, the label set is read with the in-memory PrivacyLeakWarning."""
    X, yb = binary()
    y = np.where(np.random.default_rng(1).random(3000) < 0.3, "zz", np.where(yb, "a", "b"))
    y = y.astype(object)
    y[17] = "one person's label"
    kw = dict(epsilon=1.0, random_state=0, solver="dp-gd", solver_options={"smoothness": 1.0})
    got = dpopt.DPLogisticRegression(classes=["a", "b"], **kw).fit(*chunked(X, y))
    ref = dpopt.DPLogisticRegression(classes=["a", "b"], **kw).fit(X, y)
    assert list(got.classes_) == list(ref.classes_) == ["a", "b"] and got.privacy_leaks_ == []
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-6, atol=1e-8)
    with pytest.warns(dpopt.PrivacyLeakWarning, match="np.unique"):
        dpopt.DPLogisticRegression(**kw).fit(*chunked(X, np.where(yb, "a", "b")))


def test_a_one_row_chunk_does_not_break_a_multiclass_fit():
    """A held-out split that leaves a chunk empty: the row normalization maps it to nothing
    (it raised scikit-learn's 'Found array with 0 sample(s)', only when the selection kept
    three labels, so the failure told the selection's outcome for free)."""
    X, yb = binary(300)
    y = np.where(yb, 1.0, 0.0)
    y[:60] = 7.0
    acc = dpopt.BudgetAccountant(epsilon=50, delta=1e-2)
    clf = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0, accountant=acc).fit(
        da.from_array(X, chunks=((1, 299), -1)), da.from_array(y, chunks=((1, 299),)))
    assert len(clf.classes_) == 3 and len(acc.ledger) == 1


def test_a_failure_after_the_label_selection_is_charged(monkeypatch):
    """Any error after the table layer's releases may follow from their outcome: it is a
    ChargedFitError that records them, and a retry pays again."""
    import dpopt.api._linear_model as lm

    def broken(*args, **kwargs):
        raise ValueError("a failure of the fit")

    monkeypatch.setattr(lm, "fit_selected", broken)
    X, yb = binary()
    acc = dpopt.BudgetAccountant(epsilon=50, delta=1e-2)
    with pytest.raises(dpopt.ChargedFitError, match="a failure of the fit"):
        dpopt.DPLogisticRegression(epsilon=1.0, random_state=0, accountant=acc).fit(
            X, np.where(yb, "a", "b"))
    assert len(acc.ledger) == 1 and acc.spent() > 0
    # nothing released before (a regressor on an array): a ValueError passes, uncharged
    acc = dpopt.BudgetAccountant(epsilon=50, delta=1e-2)
    with pytest.raises(ValueError, match="a failure of the fit") as err:
        dpopt.DPLinearRegression(epsilon=1.0, random_state=0, accountant=acc).fit(X, X[:, 0])
    assert not isinstance(err.value, dpopt.ChargedFitError) and acc.ledger == []

    def lost(*args, **kwargs):
        raise MemoryError("a lost worker")

    # an internal failure (not a refusal of the input): the whole target is charged
    monkeypatch.setattr(lm, "fit_selected", lost)
    with pytest.raises(dpopt.ChargedFitError, match="MemoryError: a lost worker"):
        dpopt.DPLinearRegression(epsilon=1.0, random_state=0, accountant=acc).fit(X, X[:, 0])
    assert acc.ledger[-1].epsilon == pytest.approx(1.0, rel=1e-9)


def neither(n, p, seed=0):
    """Two declared classes of three labels: 60% other, 30% c1, 10% c0; c0 / c1 follow the
    first feature."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    other = rng.random(n) < 0.6
    y = np.where(other, "other", np.where(X[:, 0] + 0.3 * rng.normal(size=n) > 0.8, "c0", "c1"))
    return X, y


def test_declared_classes_on_the_high_dimensional_route_name_the_majority():
    """p > n with declared classes, most records outside them: their counts are released
    and the screening route runs after them, so the held-out choice scores the records of
    neither class as misses and compares with the majority's count over n (the screen's
    class share counted them as the negative class, and the minority c0 was released:
    accuracy 0.10 against 0.30)."""
    X, y = neither(1500, 3000)
    clf = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0, classes=["c0", "c1"]).fit(X, y)
    plan = clf.fit_result_.params["auto"]
    assert "screen" in plan and plan["selection"]["majority_from"] == "the labels' noisy counts"
    assert np.mean(np.asarray(clf.predict(X)) == y) >= np.mean(y == "c1") - 0.005
    assert clf.epsilon_spent_ <= 1.0


def test_without_an_intercept_the_zero_predictor_scores_others_as_misses():
    """No intercept, declared classes, 60% of the records outside them: the model and the
    zero predictor (always classes_[0]) are both scored with those records as misses (zero
    counted them as hits and was released against a model of 0.91)."""
    X, y = neither(4000, 3)
    clf = dpopt.DPLogisticRegression(epsilon=4.0, random_state=0, classes=["c0", "c1"],
                                     fit_intercept=False).fit(X, y)
    assert clf.fit_result_.params["auto"]["selection"]["released"] == "model"


def test_three_declared_classes_at_a_tiny_epsilon_end_within_it():
    """epsilon = 0.001, three declared classes: the final accounting's PLD grid is relative to
    epsilon (at 1e-4 it overran the target, and the certification looped for ever)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 4))
    y = np.array(["c0", "c1", "c2"])[np.argmax(X[:, :3], axis=1)]
    clf = dpopt.DPLogisticRegression(epsilon=0.001, random_state=0,
                                     classes=["c0", "c1", "c2"]).fit(X, y)
    assert clf.epsilon_spent_ <= 0.001


def test_the_final_pld_grid_follows_a_small_epsilon():
    """A composition whose epsilon is below 0.2 is accounted on a grid of epsilon / 2000:
    closer to the exact value, and still above it."""
    from dpopt.privacy import epsilon_of, gdp_epsilon

    records = [Gaussian(400.0, 3)]
    exact = gdp_epsilon(np.sqrt(3) / 400.0, 1e-6)
    pld = epsilon_of(records, 1e-6, accountant="pld")
    assert exact <= pld <= exact * 1.01


@pytest.mark.parametrize("where", ["memory", "dask array", "dask frame"])
def test_text_labels_with_numeric_classes_are_refused(where):
    """Labels "0" / "1" held as Python strings with classes=[0, 1]: a ValueError naming
    classes (in memory they were matched as text, on chunks compared as numbers: two
    different fits)."""
    X, yb = binary()
    y = np.where(yb, "1", "0").astype(object)
    clf = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0, classes=[0, 1])
    data = {"memory": lambda: (X, y), "dask array": lambda: chunked(X, y),
            "dask frame": lambda: (dd.from_pandas(pd.DataFrame(X, columns=list("abc")).assign(
                s=np.where(yb, "u", "v")), npartitions=3),
                dd.from_pandas(pd.Series(y), npartitions=3))}[where]()
    with pytest.raises(ValueError, match="are numbers but y holds text"):
        clf.fit(*data)


def test_a_column_vector_y_on_chunks_fits_as_in_memory():
    X, yb = binary()
    y = yb.astype(int)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
        got = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0).fit(
            da.from_array(X, chunks=(1000, -1)), da.from_array(y, chunks=(1000, 1)))
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-6, atol=1e-8)


def test_missing_and_nullable_labels():
    """A pandas string y with NA: the missing-label ValueError in memory (scikit-learn's check
    raised 'boolean value of NA is ambiguous'); a nullable boolean Dask y fits."""
    X, yb = binary(300)
    y = pd.Series(np.where(yb, "a", "b"), dtype="string").mask(np.arange(300) == 299)
    with pytest.raises(ValueError, match="missing labels"):
        dpopt.DPLogisticRegression(epsilon=1.0).fit(X, y)
    X, yb = binary()
    clf = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0).fit(
        da.from_array(X, chunks=(1000, -1)), dd.from_pandas(pd.Series(yb, dtype="boolean"),
                                                            npartitions=3))
    assert [bool(c) for c in clf.classes_] == [False, True]
    # in memory a nullable boolean y is declared [False, True], as numpy's bools (it was read
    # as floats and its labels selected privately)
    mem = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0).fit(
        X, pd.Series(yb, dtype="boolean"))
    assert list(mem.classes_) == [False, True]
    assert mem.fit_result_.params["auto"]["table"]["labels"].startswith("declared")


def test_the_screens_class_share_names_a_majority_without_counts():
    """Without label counts (a pipeline call with no table layer) the screen's released
    positive share names the constant, and says so."""
    from dpopt.pipeline.majority import screened_majority

    got = screened_majority({"screen": {"class_rate": 0.2, "class_rate_sigma": 0.01}})
    assert got.best == 1 and got.rate == pytest.approx(0.8) and got.resolved
    assert got.rates == pytest.approx((0.2, 0.8)) and got.source == "the screen's class share"
    assert screened_majority({}) is None
