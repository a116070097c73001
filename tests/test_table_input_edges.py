"""Tables, targets and arguments at the edges (an independent fuzz of session 36): each is
refused with a ValueError naming what is wrong, before anything is spent, or read as the
user meant it. Each test fails without its fix (the last one on the release watch of the
same session, which charged that public refusal)."""

import re
import warnings

import numpy as np
import pandas as pd
import pytest

import dpopt
import dpopt.preprocessing.table_encoder as table_encoder


def frame(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"x": rng.normal(size=n), "c": rng.choice(["a", "b"], n)})
    return X, X.x + rng.normal(size=n)


def budget():
    return dpopt.BudgetAccountant(epsilon=50, delta=1e-2)


def refused_for_free(fit, match):
    acc = budget()
    with pytest.raises(ValueError, match=match) as err:
        fit(acc)
    assert not isinstance(err.value, dpopt.ChargedFitError) and acc.ledger == []


@pytest.mark.parametrize("layout", ["pandas", "dask"])
@pytest.mark.parametrize("key", ["<missing>", "<other>"])
@pytest.mark.parametrize("kind", ["text", "declared category"])
def test_a_key_of_dpopts_as_a_value_is_refused(key, kind, layout):
    """The text "<missing>" was counted, coded and predicted as a missing cell (a fit gave
    it the missing cells' coefficient), and a declared category of that name crashed in
    pandas after the selection's release, only when its noisy count cleared the threshold.
    A kept value "<other>" gave two one-hot columns of one name (an independent fuzz). On
    Dask both were refused after the first release, a charged failure of the whole budget:
    now before it, from the counting pass."""
    column = (pd.Series([key, "a", None] * 400, dtype=object) if kind == "text"
              else pd.Categorical([key, "a"] * 600, categories=[key, "a"]))
    X, y = pd.DataFrame({"x": np.arange(1200.0), "c": column}), pd.Series(np.arange(1200.0))
    if layout == "dask":
        dd = pytest.importorskip("dask.dataframe")
        X, y = dd.from_pandas(X, npartitions=3), dd.from_pandas(y, npartitions=3)
    refused_for_free(lambda acc: dpopt.DPLinearRegression(epsilon=1, random_state=0,
                                                          accountant=acc).fit(X, y),
                     f"'{key}'")


@pytest.mark.parametrize("categories, match", [
    ({"c": "ab"}, "must list"), ({"c": None}, "must list"), ({"c": 5}, "must list"),
    ({"c": {"a", "b"}}, "must list"), ({"c": ["a", None]}, "missing"), (["c"], "must be a dict"),
])
def test_declared_categories_are_checked(categories, match):
    X, y = frame()
    refused_for_free(lambda acc: dpopt.DPLinearRegression(
        epsilon=1, categories=categories, accountant=acc).fit(X, y), match)


def test_classes_as_a_set_are_refused():
    """A set's order follows the hash seed, and its second label is the positive class."""
    X, y = frame()
    refused_for_free(lambda acc: dpopt.DPLogisticRegression(
        classes={"yes", "no"}, accountant=acc).fit(X, np.where(y > 0, "yes", "no")), "list")


@pytest.mark.parametrize("labels", ["frame", "array"])
def test_labels_mixing_text_and_numbers_are_refused(labels):
    X, y = frame()
    mixed = np.array(["a" if v > 0 else 1 for v in y], dtype=object)
    refused_for_free(lambda acc: dpopt.DPLogisticRegression(accountant=acc).fit(
        X if labels == "frame" else X[["x"]].to_numpy(), mixed), "mixes text and numbers")


@pytest.mark.parametrize("target", ["dates", "durations", "complex", "scalar"])
@pytest.mark.parametrize("table", [True, False], ids=["frame", "array"])
def test_a_target_that_is_not_real_numbers_is_refused(target, table):
    """Dates became nanoseconds and complex numbers lost their imaginary part (a fit that
    predicts 0); on an array a date target crashed inside the model path."""
    X, y = frame()
    y = {"dates": pd.Series(pd.date_range("2020", periods=len(y))),
         "durations": pd.Series(pd.timedelta_range("1D", periods=len(y))),
         "complex": y + 1j, "scalar": 3.0}[target]
    data = X if table else X[["x"]].to_numpy()
    refused_for_free(lambda acc: dpopt.DPLinearRegression(epsilon=1, random_state=0,
                                                          accountant=acc).fit(data, y), r"\by\b|Complex")


@pytest.mark.parametrize("value", [pd.Timestamp("2020-01-01"), pd.Timedelta("1D"), 1 + 2j])
def test_prediction_refuses_what_fit_refuses_in_a_numeric_column(value):
    X, y = frame()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = dpopt.DPLinearRegression(epsilon=4, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="'x'"):
        model.predict(X.assign(x=value))


def test_prediction_refuses_a_repeated_column():
    X, y = frame()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = dpopt.DPLinearRegression(epsilon=4, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="columns with the same name"):
        model.predict(pd.concat([X, X[["x"]]], axis=1))


def test_feature_bounds_keys_are_names_before_positions():
    """With integer column labels, the key 0 named the column at position 0 (labelled 1)."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({1: rng.standard_normal(3000), 0: rng.uniform(0, 100, 3000)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = dpopt.DPLinearRegression(epsilon=2, random_state=0,
                                         feature_bounds={0: (0.0, 100.0)}).fit(X, X[1])
    lower, upper = model.feature_bounds_
    assert (lower[1], upper[1]) == (0.0, 100.0) and upper[0] < 100.0


def test_the_table_encoder_takes_the_estimators_delta_and_refuses_an_infinite_epsilon():
    X, _ = frame()
    enc = dpopt.PrivateTableEncoder(delta=None, random_state=0).fit(X)
    assert enc.delta_spent_ == pytest.approx(1.0 / len(X) ** 2)
    with pytest.raises(ValueError, match="finite epsilon"):
        dpopt.PrivateTableEncoder(epsilon=np.inf).fit(X)


def test_the_search_refuses_a_bad_target_or_column_for_free():
    """A missing y on a DataFrame charged the whole search; a date column crashed in its
    surrogate data."""
    X, y = frame(600)
    search = dpopt.PrivateHyperparameterSearch
    refused_for_free(lambda acc: search(dpopt.DPLinearRegression(epsilon=0.5), {"alpha": [0.1, 1]},
                                        accountant=acc, random_state=0, score_clip=10)
                     .fit(X, y.where(y.index != 3)), "missing")
    refused_for_free(lambda acc: search(dpopt.DPLinearRegression(epsilon=0.5), {"alpha": [0.1, 1]},
                                        accountant=acc, random_state=0, score_clip=10)
                     .fit(X.assign(d=pd.Timestamp("2020")), y), "'d'")


def _fail(*args, **kwargs):
    raise KeyError("decided by a release")


def test_a_failure_after_the_tables_first_release_is_charged_whole(monkeypatch):
    """The table layer's releases came before any watch: an error after them (not a
    ChargedFitError) passed uncharged."""
    monkeypatch.setattr(table_encoder, "_resolve_bounds", _fail)
    X, y = frame()
    acc = budget()
    with pytest.raises(dpopt.ChargedFitError, match="decided by a release"):
        dpopt.DPLinearRegression(epsilon=1, random_state=0, accountant=acc).fit(X, y)
    assert acc.ledger[0].epsilon == pytest.approx(1.0, rel=1e-9)
    # before the first release (a numeric frame's plan), the same error passes uncharged
    monkeypatch.setattr(table_encoder, "check_cells", _fail)
    acc = budget()
    with pytest.raises(KeyError):
        dpopt.DPLinearRegression(epsilon=1, random_state=0, accountant=acc).fit(X, y)
    assert acc.ledger == []


def test_a_table_coded_to_no_column_says_so_and_is_charged():
    """inference=True codes a categorical column against its best-populated level: with one
    level kept, no column is left, and the fit failed deep inside with 'X must be a
    non-empty 2-d array, got shape (200, 0)'."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"c": rng.choice(["u", "v"], 200)})
    acc = budget()
    with pytest.raises(dpopt.ChargedFitError, match="no column to fit"):
        dpopt.DPLogisticRegression(epsilon=1, inference=True, accountant=acc, random_state=0).fit(
            X, rng.integers(0, 2, 200))
    assert len(acc.ledger) == 1 and 0 < acc.spent() <= 1.0


def test_intervals_for_three_declared_classes_are_refused_before_the_tables_releases():
    """The refusal came after the table layer's column selection (then charged whole)."""
    X, y = frame(600)
    labels = np.random.default_rng(1).choice(["u", "v", "w"], 600)
    refused_for_free(lambda acc: dpopt.DPLogisticRegression(
        inference=True, classes=np.array(["u", "v", "w"]), accountant=acc).fit(X, labels),
        "k >= 3 classes")


def test_a_level_with_a_line_break_stays_on_its_line_in_the_report():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"x": rng.normal(size=2000), "c": rng.choice(["a\nb", "c"], 2000)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = dpopt.DPLinearRegression(epsilon=4, random_state=0).fit(X, X.x)
    lines = model.table_.schema.describe()
    assert lines == ["c: chosen privately: 'a\\nb', c; others -> <other>"]  # dpopt fit prints them


def _bounds_table(n=1000):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"age": rng.integers(17, 90, n), "color": rng.choice(["r", "g"], n)})
    return X, (X.age > 50).astype(int)


WRONG_BOUNDS = [{"nope": (0, 1)}, {"age": (90, 17)}, {"color": (0, 1)}, {True: (0, 1)},
                {5: (0, 1)}, {"age": (True, 5)}, {"age": ("1", 5)}, {"age": (0, np.inf)},
                [("age", 0, 1)]]


@pytest.mark.parametrize("bounds", WRONG_BOUNDS, ids=range(len(WRONG_BOUNDS)))
def test_a_wrong_feature_bounds_on_a_table_is_refused_for_free(bounds):
    """The keys and pairs were checked after the table layer's first release, so a typo
    was charged the fit's whole epsilon, on pandas and on Dask alike."""
    X, y = _bounds_table()
    refused_for_free(lambda acc: dpopt.DPLogisticRegression(
        epsilon=1, feature_bounds=bounds, accountant=acc, random_state=0).fit(X, y),
        "feature_bounds")
    dd = pytest.importorskip("dask.dataframe")
    refused_for_free(lambda acc: dpopt.DPLinearRegression(
        epsilon=1, feature_bounds=bounds, accountant=acc, random_state=0).fit(
        dd.from_pandas(X, npartitions=2), dd.from_pandas(X.age * 1.0, npartitions=2)),
        "feature_bounds")


@pytest.mark.parametrize("bounds", [{"nope": (0, 1)}, {0: (90, 17)}, {3: (0, 1)},
                                    {0: (True, 5)}, [(0, 1)]])
def test_a_wrong_feature_bounds_on_an_array_is_refused_for_free(bounds):
    """A classifier's label selection came first, in memory and on chunks."""
    X, y = _bounds_table()
    Xa = X[["age"]].to_numpy(dtype=float)
    refused_for_free(lambda acc: dpopt.DPLogisticRegression(
        epsilon=1, feature_bounds=bounds, accountant=acc).fit(Xa, y), "feature_bounds")
    da = pytest.importorskip("dask.array")
    refused_for_free(lambda acc: dpopt.DPLogisticRegression(
        epsilon=1, feature_bounds=bounds, accountant=acc).fit(
        da.from_array(Xa, chunks=300), da.from_array(y.to_numpy(), chunks=300)),
        "feature_bounds")


def test_a_search_with_a_wrong_feature_bounds_is_a_plain_refusal():
    """Its probe (public stand-in data) said the whole epsilon was charged, charging
    nothing."""
    X, y = _bounds_table()
    refused_for_free(lambda acc: dpopt.PrivateHyperparameterSearch(
        dpopt.DPLogisticRegression(epsilon=0.5, classes=[0, 1], feature_bounds={"nope": (0, 1)}),
        {"alpha": [1e-3]}, accountant=acc).fit(X, y), "'nope' is not a column")


@pytest.mark.parametrize("label, match", [(2, "only as a str"), (True, "one value"),
                                          (("y", "t"), "only as a str")])
def test_y_names_a_column_only_as_a_str(label, match):
    """``fit(X, 2)`` said "y must be 1-d ... got shape ()", and a MultiIndex column's
    label "X has 3000 rows but y has 2"."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({("x", "a"): rng.normal(size=3000), ("y", "t"): rng.integers(0, 2, 3000)})
    if label == 2:
        X.columns = [0, 2]
    for est in (dpopt.DPLogisticRegression, dpopt.DPLinearRegression):
        refused_for_free(lambda acc, est=est: est(epsilon=1, accountant=acc).fit(X, label),
                         match)


@pytest.mark.parametrize("layout", ["pandas", "dask"])
def test_explicit_solver_imputes_a_missing_number_whatever_the_other_columns(layout):
    """docs/tables.md: an explicit solver encodes a table from its public schema, a missing
    value imputed at 0 (no indicator). A frame of numbers only was read as an array and its
    NaN refused ("Input X contains NaN"), while the same frame with a bool column beside it
    was fitted with the NaN at 0: one rule now, for both, in memory and on Dask; predict on
    such a frame imputes as at fit, with the ImputedValueWarning of a table."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=2000), "b": rng.normal(size=2000)})
    X.loc[:99, "a"] = np.nan
    y = pd.Series((rng.random(2000) < 0.5).astype(int))
    if layout == "dask":
        dd = pytest.importorskip("dask.dataframe")
        convert = lambda v: dd.from_pandas(v, npartitions=2)  # noqa: E731
    else:
        convert = lambda v: v  # noqa: E731
    models = {}
    for name, Xv in (("numbers", X), ("mixed", X.assign(flag=rng.random(2000) < 0.5)),
                     ("filled", X.fillna(0.0))):
        with warnings.catch_warnings():
            warnings.simplefilter("error", dpopt.ImputedValueWarning)  # never on training data
            models[name] = dpopt.DPLogisticRegression(
                solver="dp-gd", classes=[0, 1], epsilon=1, random_state=0).fit(convert(Xv),
                                                                              convert(y))
    assert list(models["numbers"].feature_names_in_) == ["a", "b"]
    assert models["numbers"].table_ is None  # still read as an array (names checked in order)
    np.testing.assert_allclose(models["numbers"].coef_, models["filled"].coef_, rtol=0, atol=0)
    with pytest.warns(dpopt.ImputedValueWarning, match=r"\['a'\] hold missing values"):
        pred = models["numbers"].predict(convert(X))
        pred = np.asarray(pred.compute() if hasattr(pred, "compute") else pred)
    np.testing.assert_array_equal(pred, models["filled"].predict(X.fillna(0.0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.ImputedValueWarning)  # refused, not imputed
        with pytest.raises(ValueError, match="feature names"):
            models["numbers"].predict(X[["b", "a"]])


@pytest.mark.parametrize("text", [True, False], ids=["with a text column", "numbers only"])
@pytest.mark.parametrize("chunked", [False, True], ids=["pandas", "dask"])
def test_an_infinite_number_is_refused_before_any_release(text, chunked):
    """The encoding refused it after the selection's release: a ChargedFitError of the whole
    budget for a value any check could see first (found through `dpopt fit` on a CSV cell
    `inf`)."""
    X, y = frame()
    X.loc[3, "x"] = -np.inf
    if not text:
        X = X.assign(c=(X.c == "a").astype(float))
    if chunked:
        dd = pytest.importorskip("dask.dataframe")
        X, y = dd.from_pandas(X, npartitions=2), dd.from_pandas(y, npartitions=2)
    refused_for_free(lambda acc: dpopt.DPLinearRegression(
        epsilon=1, random_state=0, accountant=acc).fit(X, y), r"'x'\] hold an infinite value|"
        "Input X contains infinity")


def _frame_and_labels(n=2000):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=n), "f": 1.0,
                      "b": pd.Series(rng.choice(["x", "y"], n), dtype=object)})
    return X, pd.Series(np.where(X.a + rng.normal(size=n) > 0.5, "yes", "no"))


def test_the_search_refuses_bad_cells_before_its_first_release():
    """An independent fuzz: an infinite cell was refused by the estimator for free, but by
    the search only inside a trial, a charged failure of the whole search's budget."""
    X, y = _frame_and_labels()
    X.loc[0, "f"] = np.inf
    est = dpopt.DPLogisticRegression(epsilon=1.0, classes=["no", "yes"])
    refused_for_free(lambda acc: dpopt.PrivateHyperparameterSearch(
        est, {"alpha": [0.01, 0.1]}, random_state=0, accountant=acc).fit(X, y),
        r"\['f'\] hold an infinite value")


def test_tuple_labels_and_iterator_categories_are_refused_before_any_release():
    """Tuple labels (hashable, so counted) failed after the label release with a KeyError
    quoting a label's elements; categories= as an iterator crashed the search's clone and
    let a refit of the estimator see no declared level."""
    X, y = _frame_and_labels()
    ty = pd.Series([("a", 1) if v == "yes" else ("b", 2) for v in y])
    refused_for_free(lambda acc: dpopt.DPLogisticRegression(
        epsilon=1.0, random_state=0, accountant=acc).fit(X, ty), r"\(a tuple\)")
    est = dpopt.DPLogisticRegression(epsilon=1.0, classes=["no", "yes"],
                                     categories={"b": iter(["x", "y"])})
    refused_for_free(lambda acc: est.set_params(accountant=acc).fit(X, y),
                     r"categories\['b'\] must list")
    refused_for_free(lambda acc: dpopt.PrivateHyperparameterSearch(
        est, {"alpha": [0.01, 0.1]}, random_state=0, accountant=acc).fit(X, y),
        r"categories\['b'\] must list")


def test_a_lone_surrogate_at_prediction_is_named_by_its_column():
    X, y = _frame_and_labels()
    clf = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, y)
    X.loc[0, "b"] = "\ud800"
    with pytest.raises(ValueError, match="column 'b' holds text that is not valid Unicode"):
        clf.predict(X)


@pytest.mark.parametrize("classifier", [True, False])
def test_score_on_dask_collections_is_the_in_memory_score(classifier):
    """An independent fuzz: a model fitted on Dask predicted lazily, and ``score`` (sklearn's
    metrics) failed on the Dask array of unknown length."""
    dd = pytest.importorskip("dask.dataframe")
    X, y = _frame_and_labels()
    X = X.drop(columns=["f"])
    if not classifier:
        y = X.a * 2.0 + (X.b == "x")
    cls = dpopt.DPLogisticRegression if classifier else dpopt.DPLinearRegression
    Xd, yd = dd.from_pandas(X, npartitions=3), dd.from_pandas(y, npartitions=3)
    model = cls(epsilon=1.0, random_state=0).fit(Xd, yd)
    assert model.score(Xd, yd) == pytest.approx(model.score(X, y), abs=1e-12)


# -- an independent fuzz of inference, multiclass and the search (session 40)


def _categorical_labels(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    labels = np.where(X[:, 0] > 0.5, "c", np.where(X[:, 0] < -0.5, "a", "b"))
    return X, pd.Series(pd.Categorical(labels, categories=["c", "a", "b", "zz"]))


def test_a_true_false_category_y_is_no_declaration_either():
    """pandas calls a category of True/False categories bool; read so, its labels were
    declared, while one record's other label made them text (selected): the record decided.
    A categorical y is its values as objects whatever its categories: the labels are
    selected privately, an explicit solver reads them with its PrivacyLeakWarning (and
    keeps them bools, not the floats scikit-learn's checks made of them), the search needs
    classes=."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(2000, 2))
    y = pd.Series(X[:, 0] > 0).astype("category")
    est = dpopt.DPLogisticRegression(epsilon=2.0, random_state=0).fit(X, y)
    assert est.auto_.plan["table"]["labels"] == "selected privately"
    assert list(est.classes_) == [False, True]
    with pytest.warns(dpopt.PrivacyLeakWarning, match="np.unique"):
        explicit = dpopt.DPLogisticRegression(epsilon=2.0, solver="dp-gd", random_state=0,
                                              solver_options={"smoothness": 1.0}).fit(X, y)
    assert [type(c) for c in explicit.classes_] == [bool, bool]
    with pytest.raises(ValueError, match="labels declared"):
        dpopt.PrivateHyperparameterSearch(dpopt.DPLogisticRegression(epsilon=0.5),
                                          {"alpha": [1e-3, 1e-2]}).fit(X, y)


@pytest.mark.parametrize("solver", ["auto", "dp-gd"])
def test_a_categorical_ys_categories_are_data_unless_declared(solver):
    """A categorical y's categories are most often made from the labels (``astype("category")``
    lists every label, one record's too), so they are no declaration: the default path
    selects the labels privately (the category no record holds is not kept), an explicit
    solver reads ``np.unique(y)`` with a PrivacyLeakWarning, as for a text y; ``classes=``
    declares them, order included, with a NumPy X or a frame alike."""
    X, y = _categorical_labels()
    options = {} if solver == "auto" else {"solver_options": {"smoothness": 1.0}}

    def fit(Xin, classes=None):
        return dpopt.DPLogisticRegression(epsilon=4.0, random_state=0, solver=solver,
                                          classes=classes, **options).fit(Xin, y)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)
        for Xin in (X, pd.DataFrame(X, columns=["p", "q", "r"])):  # a frame: its own releases
            declared = fit(Xin, ["c", "a", "b", "zz"])
            assert [str(c) for c in declared.classes_] == ["c", "a", "b", "zz"]
            if solver == "auto":
                est = fit(Xin)
                assert est.auto_.plan["table"]["labels"] == "selected privately"
            else:
                with pytest.warns(dpopt.PrivacyLeakWarning, match="np.unique"):
                    est = fit(Xin)
            assert [str(c) for c in est.classes_] == ["a", "b", "c"]


def test_declared_categories_no_cell_could_hold_are_refused_for_free():
    """Text levels for a numeric column left the column out of the model silently (and
    spent the budget)."""
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"a": rng.normal(size=500), "s": rng.choice(["u", "v"], 500)})
    y = X["a"] + rng.normal(size=500)
    acc = dpopt.BudgetAccountant(10.0, 1e-3)
    for categories, words in (({"a": ["p", "q"]}, "lists text levels, but column 'a' holds"),
                              ({"a": [1.0, "x"]}, "lists text levels")):
        with pytest.raises(ValueError, match=re.escape(f"categories[{next(iter(categories))!r}]")
                           + ".*" + words):
            dpopt.DPLinearRegression(epsilon=1.0, categories=categories,
                                     accountant=acc).fit(X, y)
    assert acc.spent() == 0.0
    dpopt.DPLinearRegression(epsilon=1.0, categories={"s": ["u", "v", "w"]},
                             random_state=0).fit(X, y)  # a declared, absent level is fine
