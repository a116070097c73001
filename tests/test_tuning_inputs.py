"""The input forms of PrivateHyperparameterSearch against the estimators': a DataFrame with
the target named by y, as ``fit(frame, "column")``; chunked data (Dask, a Parquet path)
refused with a ValueError naming the argument before anything is read or charged."""

import warnings

import numpy as np
import pandas as pd
import pytest

import dpopt

LEVELS = {"c": ["r", "g"]}  # a search needs a text column's levels declared


def _table(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.normal(size=n), "c": rng.choice(["r", "g"], n),
                       "age": rng.integers(18, 80, n).astype(float)})
    df["t"] = (df.a > 0).astype(int)
    return df


def _search(**kw):
    est = kw.pop("estimator", None) or dpopt.DPLogisticRegression(epsilon=0.5, classes=[0, 1],
                                                                  categories=LEVELS)
    return dpopt.PrivateHyperparameterSearch(est, {"alpha": [1e-3, 1e-2]}, random_state=0,
                                             **kw)


def test_search_takes_a_frame_and_the_target_column_name():
    """fit(df, "t") was refused ("y must be 1-dimensional ... got shape ()"); it is now the
    frame without the column and that column, as for the estimators, with the same result."""
    df = _table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
        named = _search().fit(df, "t")
        split = _search().fit(df.drop(columns="t"), df["t"])
    assert list(named.feature_names_in_) == ["a", "c", "age"]
    assert named.best_params_ == split.best_params_ and named.epsilon_spent_ == split.epsilon_spent_
    np.testing.assert_array_equal(named.predict(df.drop(columns="t")),
                                  split.predict(df.drop(columns="t")))


def test_regressor_search_takes_the_target_column_name():
    """y="age" on a regressor's search said the target "holds values that are not real
    numbers" (the name was read as the target)."""
    df = _table()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpopt.PrivacyLeakWarning)
        search = _search(estimator=dpopt.DPLinearRegression(epsilon=1.0, categories=LEVELS),
                         score_clip=20.0)
        search.fit(df.drop(columns="t"), "age")
    assert list(search.feature_names_in_) == ["a", "c"]
    assert np.isfinite(search.predict(df[["a", "c"]])).all()


def test_a_default_regressors_trials_may_take_another_route_than_its_probe():
    """On a table with a declared category the default regressor's trials run DP-GD where
    its probe on stand-in data ran AdaSSP, which leaves part of its mu^2 unspent: every
    trial spent more than the probe's records, and the search stopped with a charged error
    (each seed). A default-path candidate whose records are all Gaussian is now accounted
    by the mu of its target, which bounds any route: the same total as without the column."""
    df = _table()
    totals = []
    for X in (df[["a", "c"]], df[["a"]]):
        search = _search(estimator=dpopt.DPLinearRegression(epsilon=1.0, categories=LEVELS
                                                            if "c" in X else None),
                         score_clip=20.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            totals.append(search.fit(X, df["age"]).epsilon_spent_)
        accounted = search.candidate_mechanisms_[0]
        assert sum(m.count / m.noise_multiplier ** 2 for m in accounted) == pytest.approx(
            dpopt.privacy.gdp_mu(1.0, 1 / 1600 ** 2) ** 2, rel=1e-6)
    assert totals[0] == pytest.approx(totals[1], rel=1e-9)


def test_search_refuses_a_missing_column_and_a_name_without_a_frame_for_free():
    df = _table()
    acc = dpopt.BudgetAccountant(epsilon=100, delta=1e-2)
    with pytest.raises(ValueError, match=r"y='nope' is not a column of X"):
        _search(accountant=acc).fit(df, "nope")
    with pytest.raises(ValueError, match=r"y='t' names a column: X must then be a DataFrame"):
        _search(accountant=acc).fit(df[["a"]].to_numpy(), "t")
    assert acc.ledger == []


def test_search_refuses_chunked_data_before_reading_it(tmp_path):
    """A Parquet path was read as a number ("could not convert string to float"), a Dask
    DataFrame failed inside with a TypeError (a lazy scalar read as a bool); both, and a
    Dask y, are now refused with a ValueError naming the argument, nothing read or charged."""
    dd = pytest.importorskip("dask.dataframe")
    df = _table()
    path = tmp_path / "d.parquet"
    df.to_parquet(path)
    X, y = df.drop(columns="t"), df["t"]
    cases = {"X": [(str(path), "t"), (path, "t"),
                   (dd.from_pandas(X, npartitions=2), dd.from_pandas(y, npartitions=2)),
                   (dd.from_pandas(df, npartitions=2), "t")],
             "y": [(X, dd.from_pandas(y, npartitions=2))]}
    acc = dpopt.BudgetAccountant(epsilon=100, delta=1e-2)
    for name, fits in cases.items():
        for data in fits:
            search = _search(accountant=acc)
            with pytest.raises(ValueError, match=rf"^{name}: the search takes in-memory data"):
                search.fit(*data)
            assert not hasattr(search, "n_repetitions_")
    assert acc.ledger == []


def test_a_pyarrow_table_is_searched_as_the_frame_it_holds():
    """The search took a pyarrow table for an array (it lacked pandas' ``iloc``): its text
    column would have been refused and its numbers fitted by another route, where the
    estimators read it as a frame."""
    pa = pytest.importorskip("pyarrow")
    df = _table()
    X, y = df.drop(columns="t"), df["t"].to_numpy()
    runs = [_search(mean_repetitions=2).fit(data, y) for data in (X, pa.Table.from_pandas(X))]
    assert runs[0].epsilon_spent_ == runs[1].epsilon_spent_
    assert list(runs[1].feature_names_in_) == ["a", "c", "age"]
    np.testing.assert_array_equal(runs[0].predict(X), runs[1].predict(X))


def test_a_categorical_y_is_undeclared_and_classes_declares_it():
    """A categorical y's categories may be the data's labels, so they declare nothing: the
    search refuses it before reading the data, as a text y, and ``classes=`` declares the
    labels (their order too: ``classes_``, the columns of ``predict_proba``)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2000, 2))
    y = pd.Series(pd.Categorical(np.where(X[:, 0] > 0, "yes", "no"), categories=["yes", "no"]))
    accountant = dpopt.BudgetAccountant(epsilon=10.0, delta=1e-3)
    with pytest.raises(ValueError, match="labels declared"):
        dpopt.PrivateHyperparameterSearch(dpopt.DPLogisticRegression(epsilon=0.5),
                                          {"alpha": [1e-3, 1e-2]}, random_state=0,
                                          accountant=accountant).fit(X, y)
    assert not accountant.ledger
    search = dpopt.PrivateHyperparameterSearch(
        dpopt.DPLogisticRegression(epsilon=0.5, classes=["yes", "no"]),
        {"alpha": [1e-3, 1e-2]}, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        search.fit(X, y)
    assert [str(c) for c in search.classes_] == ["yes", "no"]
    assert search.predict_proba(X).shape == (2000, 2)
    assert not hasattr(dpopt.PrivateHyperparameterSearch(
        dpopt.DPLogisticRegression(), {"alpha": [1e-3]}), "classes_")


@pytest.mark.parametrize("regressor", [False, True])
def test_magnitudes_an_explicit_solver_refuses_are_refused_before_the_search(regressor):
    """A direct fit refuses entries beyond 1e150 for free; the search refused them in a
    trial, after its first release, charging the whole search (session 40's fuzz)."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(1000, 3))
    if regressor:
        est, y = dpopt.DPLinearRegression(epsilon=1.0, solver="dp-gd"), X[:, 0] * 1e300
    else:
        est, y = (dpopt.DPLogisticRegression(epsilon=1.0, solver="objective-perturbation",
                                             classes=[0, 1]), (X[:, 0] > 0).astype(int))
        X = X * 1e300
    acc = dpopt.BudgetAccountant(10.0, 1e-3)
    search = dpopt.PrivateHyperparameterSearch(est, {"alpha": [1e-3]}, accountant=acc,
                                               random_state=0,
                                               **({"score_clip": 1.0} if regressor else {}))
    with pytest.raises(ValueError, match="entries beyond 1e\\+150") as info:
        search.fit(X, y)
    assert not isinstance(info.value, dpopt.ChargedFitError)
    assert acc.spent() == 0.0 and len(acc.ledger) == 0
