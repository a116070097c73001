"""Tables at scale (issue 22): the CLI reader's compact text columns (still selected
privately), the sparse design of one-hot-heavy tables, and Dask DataFrames with text."""

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import dpopt
from dpopt.preprocessing import tables
from dpopt.preprocessing.table_encoder import public_table
from dpopt.preprocessing.tables import plan_table


def _frame(n=600, seed=0):
    rng = np.random.default_rng(seed)
    income = rng.normal(50, 10, n)
    income[rng.random(n) < 0.2] = np.nan
    city = rng.choice([f"c{i}" for i in range(30)], n).astype(object)
    city[rng.random(n) < 0.05] = None
    age = rng.integers(18, 80, n).astype(float)
    y = np.where(0.05 * (age - 45) + (city == "c1") + rng.standard_normal(n) > 0, "yes", "no")
    return pd.DataFrame({"age": age, "income": income, "city": city,
                         "member": rng.random(n) < 0.3,
                         "size": pd.Categorical(rng.choice(["S", "M"], n),
                                                categories=["S", "M", "L"])}), pd.Series(y)


def test_sparse_design_equals_the_dense_one():
    X, _ = _frame()
    schema, dense = public_table(X.drop(columns=["city"]), {"size": ["S", "M", "L"]})
    sparse = schema.transform_sparse(X)
    assert sp.isspmatrix_csr(sparse) and sparse.has_sorted_indices
    np.testing.assert_array_equal(sparse.toarray(), dense)
    est = dpopt.DPLogisticRegression(epsilon=50.0, random_state=0)  # selected levels too
    est.fit(*_frame())
    full = est.table_.schema
    Xf, _ = _frame()
    np.testing.assert_array_equal(full.transform_sparse(Xf).toarray(), full.transform(Xf))
    assert sparse.nnz == len(X) * schema.row_slots()


def test_sparse_only_when_one_hot_dominates_and_the_design_is_large(monkeypatch):
    est = dpopt.DPLogisticRegression(epsilon=50.0, random_state=0).fit(*_frame())
    schema = est.table_.schema
    width = len(schema.feature_names_out())
    assert schema.row_slots() <= tables.SPARSE_DENSITY * width  # 30 cities + 3 sizes
    assert not schema.prefers_sparse(600)  # a small design stays dense
    assert schema.prefers_sparse(tables.SPARSE_MIN_BYTES // (8 * width) + 1)
    numeric = public_table(_frame()[0][["age", "income"]])[0]
    assert not numeric.prefers_sparse(10 ** 9)  # no one-hot block: never sparse


def test_a_sparse_fit_is_private_and_predicts_with_its_own_map(monkeypatch):
    X, y = _frame(3000, seed=2)
    monkeypatch.setattr(tables, "SPARSE_MIN_BYTES", 0)
    est = dpopt.DPLogisticRegression(epsilon=20.0, random_state=1).fit(X, y)
    assert est.table_.schema.prefers_sparse(len(X))  # the cities were selected
    assert est.auto_.scaling.offset.tolist() == [0.0] * est.coef_.shape[1]  # sparse scaling
    assert est.epsilon_spent_ <= 20.0 and est.privacy_leaks_ == []
    assert est.score(X, y) > 0.6
    monkeypatch.setattr(tables, "SPARSE_MIN_BYTES", 2 ** 60)
    dense = dpopt.DPLogisticRegression(epsilon=20.0, random_state=1).fit(X, y)
    assert np.any(dense.auto_.scaling.offset != 0)  # dense: shifted to the lower bound


def test_cli_fits_and_predicts_a_text_csv_without_pyarrow(tmp_path):
    """pyarrow is not a dependency of dpopt: the CLI's reader turned each text column into an
    Arrow dictionary, so ``dpopt fit`` on a CSV with text failed with ModuleNotFoundError
    where pyarrow is not installed (here: unimportable from the start, in a subprocess, so
    that pandas too knows it is absent)."""
    import subprocess
    import sys

    X, y = _frame(400)
    X.drop(columns=["size"]).assign(target=y).to_csv(tmp_path / "t.csv", index=False)
    script = """
import sys
sys.modules["pyarrow"] = None  # before pandas: as where pyarrow is not installed
from dpopt.cli.commands import main
data, model, out = sys.argv[1:]
assert main(["fit", data, "--loss", "logistic", "--target", "target", "--epsilon", "2",
             "--seed", "0", "--out", model]) == 0
assert main(["predict", model, data, "--out", out]) == 0
"""
    data, model, out = (str(tmp_path / name) for name in ("t.csv", "m.json", "p.csv"))
    run = subprocess.run([sys.executable, "-c", script, data, model, out],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert len(pd.read_csv(out)) == 400


def test_cli_reader_keeps_text_compact_and_selected_privately(tmp_path):
    from dpopt.cli.labels import compact_labels
    from dpopt.cli.tables import read_table

    X, y = _frame(800)
    X["target"] = y
    path = tmp_path / "t.csv"
    X.drop(columns=["size"]).to_csv(path, index=False)
    Xr, yr, _, _ = read_table(path, target="target")
    assert isinstance(Xr["city"].dtype, pd.CategoricalDtype)  # integer codes
    kinds = {c.name: c.kind for c in plan_table(Xr)}
    assert kinds["city"] == "string"  # its values are data: chosen privately, not declared
    labels = compact_labels(yr)
    assert labels.dtype.kind == "U" and set(labels) == {"yes", "no"}
    # the same values as pandas' own reader: the same encoding
    est = dpopt.DPLogisticRegression(epsilon=5.0, random_state=0).fit(Xr, labels)
    plain = pd.read_csv(path).drop(columns=["target"])
    plain[["age"]] = plain[["age"]].astype(float)  # the reader's kinds: int -> float,
    plain["member"] = plain["member"].astype("boolean")  # True/False -> nullable boolean
    ref = dpopt.DPLogisticRegression(epsilon=5.0, random_state=0).fit(plain, y)
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    # a Parquet file's categorical column is data too (not a declaration)
    X.assign(city=X["city"].astype("category")).to_parquet(tmp_path / "t.parquet")
    Xp, _, _, _ = read_table(tmp_path / "t.parquet", target="target")
    kinds = {c.name: c.kind for c in plan_table(Xp)}
    assert kinds["city"] == "string" and kinds["size"] == "string"


def _one_hot(est):
    """The in-memory estimator with the table layer's one-hot coding, as on a Dask frame
    (target coding is in memory only: docs/tables.md)."""
    est._coding = lambda: "one-hot"
    return est


def _dask(X, y, parts=3):
    dd = pytest.importorskip("dask.dataframe")
    return dd.from_pandas(X, npartitions=parts), dd.from_pandas(y, npartitions=parts)


def test_dask_frame_with_text_selects_like_the_in_memory_layer():
    X, y = _frame(3000, seed=3)
    X = X.drop(columns=["size"])
    ddf, dy = _dask(X, y)
    acc = dpopt.BudgetAccountant(epsilon=4.0, delta=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Dask: string target to object
        est = dpopt.DPLogisticRegression(epsilon=2.0, delta=1e-6, random_state=0,
                                         accountant=acc).fit(ddf, dy)
        pred = np.asarray(est.predict(ddf).compute())
    ref = _one_hot(dpopt.DPLogisticRegression(epsilon=2.0, delta=1e-6, random_state=0))
    ref.fit(X, y)
    # the same counts, the same split of the budget, the same noise: the same release
    assert est.table_.schema.to_dict() == ref.table_.schema.to_dict()
    assert list(est.classes_) == list(ref.classes_) == ["no", "yes"]
    assert est.auto_.plan["mu_shares"]["selection"] == ref.auto_.plan["mu_shares"]["selection"]
    assert est.epsilon_spent_ <= 2.0 and est.delta_spent_ == 1e-6 and len(acc._ledger) == 1
    assert np.mean(pred == y.to_numpy()) > 0.6
    # a label held by one record leaves one class: the classifier of that label, as in
    # memory (the same selection, the same releases), charged once
    y1 = pd.Series(["no"] * (len(y) - 1) + ["yes"])
    with pytest.warns(UserWarning, match="kept one label"):
        one = dpopt.DPLogisticRegression(epsilon=2.0, delta=1e-6, random_state=0,
                                         accountant=acc).fit(*_dask(X, y1))
        ref = dpopt.DPLogisticRegression(epsilon=2.0, delta=1e-6, random_state=0).fit(X, y1)
    assert list(one.classes_) == list(ref.classes_) == ["no"]
    assert np.all(np.asarray(one.predict(_dask(X, y1)[0]).compute()) == "no")
    assert one.epsilon_spent_ == pytest.approx(ref.epsilon_spent_) and one.epsilon_spent_ < 2.0
    assert len(acc._ledger) == 2


def test_dask_frame_declared_categories_regression_and_explicit_solvers():
    X, y = _frame(2000, seed=4)
    X = X.drop(columns=["size"])
    levels = [f"c{i}" for i in range(30)]
    target = pd.Series(X["age"].to_numpy() * 0.1 + (X["city"] == "c1").to_numpy())
    ddf, dt = _dask(X, target)
    est = dpopt.DPLinearRegression(epsilon=2.0, random_state=0,
                                   categories={"city": levels}).fit(ddf, dt)
    names = list(est.table_.get_feature_names_out())
    ref = dpopt.DPLinearRegression(epsilon=2.0, random_state=0,
                                   categories={"city": levels}).fit(X, target)
    assert names == list(ref.table_.get_feature_names_out())
    assert "city_c0" in names and "income_missing" in names  # selected: 20% missing
    assert est.coef_.shape[-1] == len(names)
    # the in-memory fit reports the same (2 + 5e-15 here: round-off of the composition)
    assert est.epsilon_spent_ == pytest.approx(ref.epsilon_spent_, rel=1e-12, abs=0)
    with pytest.raises(ValueError, match=r"\['city'\].*categories="):
        dpopt.DPLinearRegression(epsilon=2.0, alpha=0.1, solver="dp-gd",
                                 random_state=0).fit(ddf, dt)


def test_clip_sparse_in_column_groups_equals_the_dense_clip(monkeypatch):
    from dpopt.preprocessing import feature_maps

    rng = np.random.default_rng(0)
    X = sp.random(500, 60, density=0.1, random_state=0, format="csr")
    X.data = X.data * 10 - 5
    before = X.copy()
    lower, upper = -rng.random(60) * 3, rng.random(60) * 3
    monkeypatch.setattr(feature_maps, "CLIP_BLOCK", 37)  # many groups, some one column
    out = feature_maps.clip_sparse(X, lower, upper)
    np.testing.assert_array_equal(out.toarray(), np.clip(X.toarray(), lower, upper))
    assert (X != before).nnz == 0  # the input is not modified


@pytest.mark.parametrize("known", [False, True])
def test_dask_category_is_selected_not_declared(known):
    """A Dask category column is text whether Dask has read its categories or not (known
    ones come from the data too: ``categorize()``, a Parquet file's pandas metadata)."""
    X, y = _frame(2000, seed=5)
    X["city"] = X["city"].astype(pd.CategoricalDtype([f"c{i}" for i in range(40)]))
    X["member"] = X["member"].astype("category")  # True/False categories: text too
    ddf, dy = _dask(X, y)
    if not known:  # Dask joined bool categories with unknown ones by their type: a crash
        ddf["city"] = ddf["city"].cat.as_unknown()
        ddf["member"] = ddf["member"].cat.as_unknown()
    est = dpopt.DPLogisticRegression(epsilon=4.0, random_state=0).fit(ddf, dy)
    plain = X.assign(city=X["city"].astype(object))  # 10 categories no record holds
    ref = _one_hot(dpopt.DPLogisticRegression(epsilon=4.0, random_state=0)).fit(plain, y)
    kinds = {c.name: c.kind for c in est.table_.schema.columns}
    assert kinds["city"] == kinds["size"] == kinds["member"] == "string"
    assert est.table_.schema.to_dict() == ref.table_.schema.to_dict()


def test_a_dask_categorical_y_is_selected_like_in_memory():
    """A Dask category target's known categories were its classes (an unused one too): they
    are data, the labels are selected privately, the same as in memory (one-hot coding)."""
    X, y = _frame(2000, seed=6)
    y = y.astype(pd.CategoricalDtype(["yes", "no", "zz"]))  # "zz": no record's label
    ddf, dy = _dask(X, y)
    est = dpopt.DPLogisticRegression(epsilon=4.0, random_state=0).fit(ddf, dy)
    ref = _one_hot(dpopt.DPLogisticRegression(epsilon=4.0, random_state=0)).fit(X, y)
    assert list(est.classes_) == list(ref.classes_) == ["no", "yes"]
    assert est.auto_.plan["table"]["labels"] == "selected privately"
    np.testing.assert_allclose(est.coef_, ref.coef_)


@pytest.mark.parametrize("declared", [False, True])
def test_dask_frame_with_text_that_is_not_unicode_is_refused_before_any_release(declared):
    """As in memory (check_cells): a lone surrogate in one record's cell of a string column,
    or of a declared one, is a ValueError naming the column, found in the pass that counts
    the values, before the selection's release; nothing is spent, with or without Dask's
    conversion of text to pyarrow strings (which refuses the cell first)."""
    dask = pytest.importorskip("dask")
    cells = ["a", "b"] * 50 + ["Z\udcfcrich"]
    X = pd.DataFrame({"c": pd.Series(cells, dtype=object), "x": np.arange(101.0)})
    categories = {"c": ["a", "b", "Z\udcfcrich"]} if declared else None
    acc = dpopt.BudgetAccountant(epsilon=5, delta=1e-3)
    for convert in (False, True):  # Dask's default converts text to pyarrow strings
        with dask.config.set({"dataframe.convert-string": convert}):
            ddf, dy = _dask(X, pd.Series(np.arange(101.0)))
            with pytest.raises(ValueError, match="column 'c' holds text that is not valid"):
                dpopt.DPLinearRegression(epsilon=1, accountant=acc,
                                         categories=categories).fit(ddf, dy)
    assert acc.spent() == 0.0


def test_made_up_names_that_repeat_a_column_get_a_suffix_and_dask_keeps_every_column():
    """A column "a" of level "b" beside a column "a_b", a missing indicator beside a column
    "x_missing": the made-up names take ".1" (the table's own names stay), every name is
    unique, and a Dask frame's encoded partitions keep every column (its meta used to lose
    the repeated ones)."""
    rng = np.random.default_rng(0)
    n = 3000
    X = pd.DataFrame({"a": rng.choice(["b", "c"], n), "a_b": rng.normal(size=n),
                      "x": np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n)),
                      "x_missing": rng.normal(size=n)})
    y = pd.Series(2.0 * (X["a"] == "b") + X["a_b"] + rng.normal(size=n))
    m = dpopt.DPLinearRegression(epsilon=2.0, random_state=0).fit(X, y)
    names = list(m.table_.get_feature_names_out())
    assert names == ["a_b.1", "a_c", "a_<other>", "a_b", "x", "x_missing.1", "x_missing"]
    ddf, dy = _dask(X, y)
    est = dpopt.DPLinearRegression(epsilon=2.0, random_state=0).fit(ddf, dy)
    assert list(est.table_.get_feature_names_out()) == names and len(est.coef_) == len(names)
    assert np.isfinite(np.asarray(est.predict(ddf).compute())).all()


def test_dask_frame_of_numbers_and_bools_goes_through_the_table_layer():
    """A bool column beside float ones made the Dask frame's array an object one, refused
    ("X must have a numeric dtype"); it is now encoded as in memory (a bool is a 0/1 column
    with public bounds), and the fit equals the pandas frame's at the same seed."""
    rng = np.random.default_rng(0)
    n = 2000
    X = pd.DataFrame({"x": rng.normal(size=n), "b": rng.random(n) < 0.4})
    y = pd.Series(X["x"].to_numpy() + X["b"].to_numpy() + rng.normal(size=n))
    ref = dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(X, y)
    ddf, dy = _dask(X, y, parts=2)
    est = dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(ddf, dy)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-9)
    assert list(est.table_.get_feature_names_out()) == ["x", "b"]


def _numbers(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"a": rng.standard_normal(n), "b": rng.uniform(0, 10, n)})
    return X, pd.Series(X["a"] + 0.3 * X["b"] + rng.standard_normal(n), name="y")


def test_dask_frame_of_numbers_is_the_pandas_frame_with_its_names():
    """A Dask DataFrame of numbers only went to the chunked path as an array: no
    feature_names_in_, columns matched by position at predict (reordered columns gave other
    predictions, renamed ones were accepted) and another plan than in memory (no missing
    counts). It now goes through the table layer as the pandas frame does: the same names,
    the same releases (the float columns' missing counts) and the same model at the same
    seed; predict matches columns by name."""
    X, y = _numbers()
    ddf, dy = _dask(X, y, parts=2)
    est = dpopt.DPLinearRegression(epsilon=4.0, random_state=0).fit(ddf, dy)
    ref = dpopt.DPLinearRegression(epsilon=4.0, random_state=0).fit(X, y)
    assert list(est.feature_names_in_) == list(ref.feature_names_in_) == ["a", "b"]
    assert est.n_features_in_ == ref.n_features_in_ == 2
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=0, atol=1e-10)
    assert est.intercept_ == pytest.approx(ref.intercept_, abs=1e-10)
    assert est.auto_.plan["mu_shares"] == ref.auto_.plan["mu_shares"]
    head = X.head(5)
    np.testing.assert_array_equal(est.predict(head[["b", "a"]]), est.predict(head))
    np.testing.assert_allclose(np.asarray(est.predict(ddf[["b", "a"]]).compute()),
                               est.predict(X), rtol=0, atol=1e-12)
    for renamed in (head.rename(columns={"a": "z"}), ddf.rename(columns={"a": "z"})):
        with pytest.raises(ValueError, match=r"lacks the column\(s\) \['a'\]"):
            est.predict(renamed)
    with pytest.raises(ValueError, match="matched by name"):  # an array has no names
        est.predict(ddf.to_dask_array(lengths=True))


def test_explicit_solver_keeps_a_dask_frames_names_as_in_memory():
    """An explicit solver takes a Dask DataFrame of numbers as an array, as it takes the
    pandas frame, and keeps its names: predict refuses reordered or renamed columns, as
    scikit-learn's checks do in memory; a refit on an array drops them."""
    X, y = _numbers(1000)
    ddf, dy = _dask(X, y, parts=2)
    kw = dict(epsilon=4.0, random_state=0, solver="dp-gd", alpha=0.01,
              solver_options={"smoothness": 100.0})
    est = dpopt.DPLinearRegression(**kw).fit(ddf, dy)
    ref = dpopt.DPLinearRegression(**kw).fit(X, y)
    assert list(est.feature_names_in_) == ["a", "b"] and est.table_ is None
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=0, atol=1e-10)
    for bad in (ddf[["b", "a"]], ddf.rename(columns={"a": "z"}), X[["b", "a"]]):
        with pytest.raises(ValueError, match="feature names should match"):
            est.predict(bad)
    est.fit(ddf.to_dask_array(lengths=True), dy.to_dask_array(lengths=True))
    assert not hasattr(est, "feature_names_in_") and est.n_features_in_ == 2


@pytest.mark.parametrize("solver", ["auto", "dp-gd"])
def test_dask_frame_with_repeated_column_names_is_refused_before_any_release(solver):
    """As in memory: a ValueError naming the repeated names, before anything is read or
    released (it used to fail inside the table layer with an AttributeError)."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"x": rng.normal(size=500), "x2": rng.normal(size=500),
                      "c": rng.choice(["u", "v"], 500)}).set_axis(["x", "x", "c"], axis=1)
    y = pd.Series(rng.normal(size=500))
    acc = dpopt.BudgetAccountant(epsilon=10, delta=1e-3)
    kw = {} if solver == "auto" else {"alpha": 0.1, "categories": {"c": ["u", "v"]}}
    for data in (_dask(X, y), _dask(X[["x"]], y)):  # with text, and numbers only
        with pytest.raises(ValueError, match=r"columns with the same name: \['x'\]"):
            dpopt.DPLinearRegression(epsilon=1, solver=solver, accountant=acc,
                                     **kw).fit(*data)
    with pytest.raises(ValueError, match=r"columns with the same name: \['x'\]"):
        dpopt.DPLinearRegression(epsilon=1, accountant=acc).fit(X, y)
    assert acc._ledger == [] and acc.spent() == 0.0


def test_a_parquet_path_is_the_table_it_holds(tmp_path):
    """An estimator fitted on a Parquet path read it as an array (a text column refused,
    the names lost); it now opens the file as a lazy Dask DataFrame and takes the table
    layer: the Dask frame's model, its names, and predict on the path by name."""
    dd = pytest.importorskip("dask.dataframe")
    pytest.importorskip("pyarrow")
    X, y = _frame(1500, seed=5)
    path = tmp_path / "t.parquet"
    X.assign(target=y).to_parquet(path)
    ddf = dd.read_parquet(path)  # its categorical column's levels unknown: selected
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Dask: string target to object
        est = dpopt.DPLogisticRegression(epsilon=2.0, random_state=0).fit(path, "target")
        ref = dpopt.DPLogisticRegression(epsilon=2.0, random_state=0).fit(ddf, "target")
        pred = np.asarray(est.predict(str(path)).compute())
    assert list(est.feature_names_in_) == list(X.columns)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(pred, est.predict(X))


def test_y_may_name_a_column_of_a_pandas_frame_as_of_a_dask_one():
    """``fit(frame, "target")`` took the name for a target of one value ("y has 1"); the
    column is now split off, as for a Dask DataFrame, and an unknown name is refused."""
    X, y = _numbers(800)
    table = X.assign(target=y)
    est = dpopt.DPLinearRegression(epsilon=4.0, random_state=0).fit(table, "target")
    ref = dpopt.DPLinearRegression(epsilon=4.0, random_state=0).fit(X, y)
    assert list(est.feature_names_in_) == ["a", "b"]
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=0, atol=0)
    acc = dpopt.BudgetAccountant(epsilon=10, delta=1e-3)
    with pytest.raises(ValueError, match=r"y='tgt' is not a column of X"):
        dpopt.DPLinearRegression(epsilon=1, accountant=acc).fit(table, "tgt")
    assert acc._ledger == []


def test_dask_predict_warns_of_missing_cells_the_model_has_no_indicator_for():
    """As in memory, predict on a Dask DataFrame warns (when computed) that a missing cell
    in a column without an indicator is imputed; the training data never warn."""
    X, y = _numbers(2000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.ImputedValueWarning)
        est = dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(*_dask(X, y))
        est.predict(_dask(X, y)[0]).compute()  # no missing cell: silent
    assert est.table_.schema.columns[0].has_missing is False
    Z = X.head(20).copy()
    Z.loc[0, "a"] = np.nan
    with pytest.warns(dpopt.ImputedValueWarning, match=r"\['a'\] hold missing values"):
        pred = np.asarray(est.predict(_dask(Z, y.head(20), parts=2)[0]).compute())
    with pytest.warns(dpopt.ImputedValueWarning):
        np.testing.assert_allclose(pred, est.predict(Z), rtol=0, atol=1e-12)


def _refused_for_free(fit, match):
    acc = dpopt.BudgetAccountant(epsilon=10, delta=1e-3)
    with pytest.raises(ValueError, match=match) as err:
        fit(acc)
    assert not isinstance(err.value, dpopt.ChargedFitError) and acc._ledger == []


def _with_target(n=2000):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=n), "c": rng.choice(["r", "g"], n)})
    return X.assign(t=np.where(rng.random(n) < 0.1, np.nan, X.a * 2))


@pytest.mark.parametrize("case", ["missing", "text", "None", "scalar", "two columns", "short"])
def test_a_dask_regressors_bad_target_is_refused_for_free_as_in_memory(case):
    """pandas refused these targets for free; on Dask (and so on a Parquet path) they were
    charged the whole fit, the failure coming after the table layer's selection."""
    dd = pytest.importorskip("dask.dataframe")
    df = _with_target()
    ddf = dd.from_pandas(df, npartitions=2)
    X = ddf.drop(columns="t")
    data = {"missing": (ddf, "t"), "text": (X, "c"), "None": (X, None), "scalar": (X, 3.0),
            "two columns": (X, ddf[["a", "t"]]), "short": (X, ddf.a.head(50, compute=False))}
    match = {"missing": "missing", "text": "numeric target", "None": "requires y",
             "scalar": "one value", "two columns": "one target per row",
             "short": "y has 50"}[case]
    _refused_for_free(lambda acc: dpopt.DPLinearRegression(
        epsilon=1, random_state=0, accountant=acc).fit(*data[case]), match)


def test_a_parquet_paths_bad_target_is_refused_for_free(tmp_path):
    pytest.importorskip("dask.dataframe")
    pytest.importorskip("pyarrow")
    path = tmp_path / "t.parquet"
    _with_target().to_parquet(path)
    for target, match in (("t", "missing"), ("c", "numeric target")):
        _refused_for_free(lambda acc, target=target: dpopt.DPLinearRegression(
            epsilon=1, random_state=0, accountant=acc).fit(path, target), match)


def test_a_dask_classifier_takes_labels_in_memory_as_the_regressor_does():
    """With y a NumPy array, a pandas Series or a one-column frame, the chunked default path
    crashed (AttributeError: ... to_delayed); a wrong y is refused for free, naming it."""
    dd = pytest.importorskip("dask.dataframe")
    X, y = _frame(1500, seed=2)
    ddf, dy = _dask(X, y, parts=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = dpopt.DPLogisticRegression(epsilon=2.0, random_state=0).fit(ddf, dy)
        for labels in (y.to_numpy(), y, y.to_frame(), dd.from_pandas(y.to_frame(), 2)):
            est = dpopt.DPLogisticRegression(epsilon=2.0, random_state=0).fit(ddf, labels)
            np.testing.assert_allclose(est.coef_, ref.coef_, rtol=0, atol=1e-12)
    numbered = dd.from_pandas(X[["age", "income"]].set_axis([0, 2], axis=1), npartitions=2)
    for data, match in (((ddf, None), "requires y"), ((ddf, y.to_numpy()[:10]), "y has 10"),
                        ((ddf, dd.from_pandas(pd.DataFrame({"u": y, "v": y}), 2)),
                         "one target per row"),
                        ((ddf, np.where(X.age > 50, None, y)), "missing labels"),
                        ((numbered, 2), "only as a str")):
        _refused_for_free(lambda acc, data=data: dpopt.DPLogisticRegression(
            epsilon=1, random_state=0, accountant=acc).fit(*data), match)


def _computes():
    """A Dask callback counting the computes started while it is active."""
    from dask.callbacks import Callback

    class Count(Callback):
        n = 0

        def _start(self, dsk):
            Count.n += 1

    return Count


def test_dask_predict_is_lazy_and_warns_once_when_computed():
    """predict on a Dask DataFrame is documented lazy, but the encoded partitions' row counts
    were computed at predict() (every partition encoded, an out-of-core file read twice), so
    the ImputedValueWarning fired at predict() and again at .compute(). Now nothing is
    computed before the caller computes, and the warning comes once."""
    X, _ = _numbers(3000)
    est = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0).fit(X, (X.a > 0).astype(int))
    Z = X.copy()
    Z.loc[2990:, "a"] = np.nan
    ddf = _dask(Z, Z.a)[0]
    count = _computes()
    with warnings.catch_warnings(record=True) as caught, count():
        warnings.simplefilter("always")
        lazy = {name: getattr(est, name)(ddf)
                for name in ("predict", "predict_proba", "decision_function")}
        assert count.n == 0 and not caught  # nothing read yet
        pred = lazy["predict"].compute()
    assert count.n == 1
    assert [w.category for w in caught] == [dpopt.ImputedValueWarning]
    with pytest.warns(dpopt.ImputedValueWarning):
        np.testing.assert_array_equal(pred, est.predict(Z))
        np.testing.assert_allclose(lazy["predict_proba"].compute(), est.predict_proba(Z),
                                   rtol=0, atol=1e-12)


@pytest.mark.parametrize("source", ["frame", "series", "array", "parquet"])
@pytest.mark.parametrize("classes", [None, [0, 1], [0, 1, 2]])
def test_dask_default_fit_passes_on_no_dask_mixed_collections_warning(source, classes,
                                                                      tmp_path):
    """Every Dask / Parquet default fit of a classifier passed on Dask's own UserWarning
    "Computing mixed collections ..." (the labels' checks were delayed objects computed
    with the frame's count expressions); the counts are now computed without mixing."""
    da = pytest.importorskip("dask.array")
    X, _ = _frame(1500, seed=1)
    y = pd.Series((X["age"] > 45).astype(int) + (classes is not None and len(classes) == 3)
                  * (X["member"]).astype(int), name="t")
    ddf, dy = _dask(X, y)
    data = {"frame": lambda: (_dask(X.assign(t=y), y)[0], "t"),
            "series": lambda: (ddf, dy),
            "array": lambda: (ddf, da.from_array(y.to_numpy(), chunks=500)),
            "parquet": lambda: (str(tmp_path / "t.parquet"), "t")}[source]
    if source == "parquet":
        X.assign(t=y).to_parquet(tmp_path / "t.parquet")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dpopt.DPLogisticRegression(epsilon=2.0, random_state=0, classes=classes).fit(*data())
    assert not [str(w.message) for w in caught if "mixed collections" in str(w.message)]


def test_the_dask_predict_benchmark_runs_on_a_small_table(monkeypatch, capsys):
    """benchmarks/bench_dask_predict.py: the lazy path and its eager reference, timed."""
    pytest.importorskip("dask.dataframe")
    pytest.importorskip("pyarrow")
    from _benchmarks import load_benchmark

    bench = load_benchmark("bench_dask_predict")
    monkeypatch.setattr("sys.argv", ["bench", "--rows", "3000", "--features", "3",
                                     "--repeats", "1"])
    bench.main()
    out = capsys.readouterr().out
    ratio = [line for line in out.splitlines() if "ratio" in line]
    assert len(ratio) == 1 and float(ratio[0].split()[-1]) > 0


def test_a_dask_parquet_dictionary_column_is_text_not_an_empty_declaration(tmp_path):
    """Dask reads an Arrow dictionary column of a Parquet file written without pandas'
    metadata as a category with known, empty categories: declared with no level, every
    value went to <other> and the column carried nothing (session 40)."""
    dd = pytest.importorskip("dask.dataframe")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    n = 3000
    city = rng.choice(["x", "y", "z"], n)
    target = np.where(city == "x", 2.0, 0.0) + rng.normal(size=n)
    pq.write_table(pa.table({"a": rng.normal(size=n),
                             "city": pa.array(list(city)).dictionary_encode(),
                             "t": target}), tmp_path / "d.parquet")
    frame = dd.read_parquet(tmp_path / "d.parquet")
    assert list(frame["city"].dtype.categories) == []  # Dask's reading, the case at hand
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        est = dpopt.DPLinearRegression(epsilon=4.0, random_state=0).fit(
            frame.drop(columns=["t"]), frame["t"])
    (line,) = [r for r in est.table_.schema.describe() if r.startswith("city")]
    assert line.startswith("city: chosen privately: x, y, z")


@pytest.mark.parametrize("case", ["label", "float label", "bool cell", "number cell"])
def test_a_partition_whose_types_disagree_with_the_metadata_is_refused_for_free(tmp_path, case):
    """A Parquet file per chunk, each chunk's types read from its own cells: one record's
    label 'zz', label 1.0, cell 'maybe' in a True/False column or cell 'zz' in a column of
    numbers gave the last file other types than the metadata (the first file's). The fit
    failed after its first release (charged), crashed, or released float labels; the
    counting pass now checks each partition against the plan, before any release
    (session 40's Dask neighbour audit)."""
    dd = pytest.importorskip("dask.dataframe")
    rng = np.random.default_rng(0)
    n = 300
    frame = pd.DataFrame({"x": rng.normal(size=n), "bb": rng.random(n) < 0.5,
                          "y": (rng.random(n) < 0.5).astype(int)})
    column, value = {"label": ("y", "zz"), "float label": ("y", "1.0"),
                     "bool cell": ("bb", "maybe"), "number cell": ("x", "zz")}[case]
    text = frame.astype(str)
    text.iloc[n - 1, text.columns.get_loc(column)] = value
    for i in range(3):  # each chunk through a CSV: pandas reads its types from its cells
        text.iloc[i * 100:(i + 1) * 100].to_csv(tmp_path / f"part{i}.csv", index=False)
        pd.read_csv(tmp_path / f"part{i}.csv").to_parquet(tmp_path / f"part{i}.parquet")
        (tmp_path / f"part{i}.csv").unlink()
    data = dd.read_parquet(tmp_path)
    acc = dpopt.BudgetAccountant(10.0, 1e-3)
    with pytest.raises(ValueError, match="a partition holds") as info:
        dpopt.DPLogisticRegression(epsilon=1.0, random_state=0, accountant=acc).fit(
            data.drop(columns=["y"]), data["y"])
    assert not isinstance(info.value, dpopt.ChargedFitError) and acc.ledger == []


def test_a_partition_whose_column_holds_no_value_agrees_with_any_plan(tmp_path):
    """The check above reads kinds from values: a chunk whose text column is all empty
    (pandas reads it as float) is not refused."""
    dd = pytest.importorskip("dask.dataframe")
    rng = np.random.default_rng(1)
    n = 300
    frame = pd.DataFrame({"x": rng.normal(size=n), "c": rng.choice(["a", "b"], n),
                          "y": (rng.random(n) < 0.5).astype(int)})
    frame.loc[200:, "c"] = np.nan
    for i in range(3):
        frame.iloc[i * 100:(i + 1) * 100].to_csv(tmp_path / f"part{i}.csv", index=False)
        pd.read_csv(tmp_path / f"part{i}.csv").to_parquet(tmp_path / f"part{i}.parquet")
        (tmp_path / f"part{i}.csv").unlink()
    data = dd.read_parquet(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        est = dpopt.DPLogisticRegression(epsilon=2.0, random_state=0).fit(
            data.drop(columns=["y"]), data["y"])
    assert est.coef_.shape[0] == 1
