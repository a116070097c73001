"""The table layer (dpopt.preprocessing.tables): column kinds, private selection of categories and labels,
missing values, public bounds, one composition, and the selection audit."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

import dpopt
import dpopt.preprocessing.tables as F
from dpopt.preprocessing.labels import LABELS_SELECTED
from dpopt.privacy import Gaussian, epsilon_of, gdp_mu

#: The size column's public levels (its dtype's categories are not read as a declaration).
SIZES = {"size": ["S", "M", "L", "XL"]}


def _table(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 80, n)
    color = rng.choice(["red", "green", "blue"], n)
    income = rng.normal(50, 10, n)
    income[rng.random(n) < 0.2] = np.nan  # 20% missing: its indicator is selected
    member = rng.random(n) < 0.3
    size = pd.Categorical(rng.choice(["S", "M"], n), categories=["S", "M", "L", "XL"])
    ident = np.array([f"id{i:06d}" for i in range(n)], dtype=object)
    score = 0.1 * (age - 45) + 2.0 * (color == "red") + member + rng.standard_normal(n)
    y = np.where(score > 0.5, "yes", "no")
    df = pd.DataFrame({"age": age, "color": color, "income": income, "member": member,
                       "size": size, "client": ident})
    return df, pd.Series(y)


def test_plan_reads_only_dtypes_and_declarations():
    df, _ = _table(100)
    kinds = {c.name: c.kind for c in F.plan_table(df)}
    # a pandas category is text, its levels selected privately: its categories are most
    # often made from the data (astype("category") lists every value, one record's too)
    assert kinds == {"age": "numeric", "color": "string", "income": "numeric",
                     "member": "bool", "size": "string", "client": "string"}
    declared = {c.name: c.levels for c in F.plan_table(
        df, {"color": ["red", "blue"], "size": ["S", "M", "L", "XL"]})}
    assert declared["color"] == ["red", "blue"] and declared["size"] == ["S", "M", "L", "XL"]
    with pytest.raises(ValueError, match="'when' has dtype datetime64"):
        F.plan_table(pd.DataFrame({"when": pd.to_datetime(["2020-01-01"])}))
    # complex numbers are not read as their real part (a silent coercion)
    with pytest.raises(ValueError, match="'z' has dtype complex128"):
        F.plan_table(pd.DataFrame({"z": [1 + 1j, 2 - 1j]}))
    with pytest.raises(ValueError, match="categories: \\['nope'\\] are not columns"):
        F.plan_table(df, {"nope": ["a"]})
    twice = df.set_axis(["age", "color", "age", "member", "size", "client"], axis=1)
    with pytest.raises(ValueError, match="same name: \\['age'\\]"):  # was an AttributeError
        dpopt.DPLinearRegression(epsilon=1.0).fit(twice, np.arange(100.0))


@pytest.mark.parametrize("cell", [[1, 2], {"a": 1}, {1, 2}, (1, 2), frozenset({1, 2})])
def test_a_cell_without_a_text_key_is_a_value_error_naming_its_column(cell):
    """A list, dict or set in a text column was a TypeError from pandas.factorize; it is now
    refused before any release, so the failed fit spends nothing. A tuple or frozenset,
    hashable, was one level each (session 48): refused as a list is."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.standard_normal(200),
                       "tags": pd.Series([cell] * 200, dtype=object)})
    accountant = dpopt.BudgetAccountant(epsilon=2.0, delta=1e-3)
    with pytest.raises(ValueError, match="column 'tags' holds values that are neither text"):
        dpopt.DPLinearRegression(epsilon=1.0, accountant=accountant).fit(
            df, rng.standard_normal(200))
    assert accountant.spent() == 0.0 and not accountant.ledger
    with pytest.raises(ValueError, match="y holds a label that is neither text nor a number"):
        dpopt.DPLogisticRegression(epsilon=1.0, accountant=accountant).fit(
            df[["a"]], pd.Series([cell, "b"] * 100, dtype=object))
    assert accountant.spent() == 0.0
    df["tags"] = rng.choice(["x", "y"], 200)
    model = dpopt.DPLinearRegression(epsilon=1.0, random_state=0).fit(df, rng.standard_normal(200))
    later = df.head(2).astype({"tags": object})
    later["tags"] = pd.Series([cell, "x"], dtype=object, index=later.index)
    with pytest.raises(ValueError, match="column 'tags' holds values that are neither text"):
        model.predict(later)


def test_dataframe_fit_selects_privately_and_keeps_indicator_columns():
    df, y = _table()
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpopt.PrivacyLeakWarning)
        model = dpopt.DPLogisticRegression(
            epsilon=1.0, random_state=0, categories={"size": ["S", "M", "L", "XL"]}).fit(df, y)
    schema = model.table_.schema
    levels = {c.name: c.levels for c in schema.columns}
    assert levels["color"] == ["blue", "green", "red"]
    assert levels["client"] == []  # an id column releases none of its values
    assert levels["size"] == ["S", "M", "L", "XL"]  # declared: public, all kept
    assert {c.name: c.has_missing for c in schema.columns}["income"]
    names = list(model.table_.get_feature_names_out())
    assert names == ["age", "color_blue", "color_green", "color_red", "color_<other>", "income",
                     "income_missing", "member", "size_S", "size_M", "size_L", "size_XL",
                     "size_<other>", "client_<other>"]
    assert model.coef_.shape == (1, len(names))
    assert list(model.feature_names_in_) == list(df.columns) and model.n_features_in_ == 6
    # every 0/1 column made by the layer has public bounds [0, 1]: never estimated or dropped
    lo, hi = model.feature_bounds_
    for j, name in enumerate(names):
        if name not in ("age", "income"):
            assert (lo[j], hi[j]) == (0.0, 1.0), name
    assert model.auto_.plan["public_bounds"] == len(names) - 2
    assert model.score(df, y) > 0.75
    info = model.auto_.plan["table"]
    assert info["declared_levels"] == 4 and info["selected_levels"] == 3
    assert info["labels"] == "selected privately"


def test_whole_fit_is_one_composition_and_one_charge():
    df, y = _table()
    acc = dpopt.BudgetAccountant(epsilon=2.0, delta=1e-5)
    model = dpopt.DPLogisticRegression(epsilon=1.0, delta=1e-6, random_state=1,
                                       accountant=acc).fit(df, y)
    plan, r = model.auto_.plan, model.fit_result_
    delta_sel = plan["selection_delta"]
    assert delta_sel == pytest.approx(F.SELECTION_DELTA_SHARE * 1e-6)
    assert r.delta == 1e-6 and model.delta_spent_ == 1e-6
    # the Gaussian mechanisms (selection included) compose to the target at delta - delta_sel
    assert epsilon_of(r.mechanisms, 1e-6 - delta_sel) == pytest.approx(1.0, rel=1e-6)
    mu = gdp_mu(1.0, 1e-6 - delta_sel)
    assert sum(v ** 2 for v in plan["mu_shares"].values()) == pytest.approx(mu ** 2, rel=1e-9)
    assert "selection" in plan["mu_shares"]
    assert len(acc._ledger) == 1  # one charge
    # a fit whose labels' selection keeps no label fails; the failure is the noisy
    # selection's outcome, so its releases (labels and columns) are charged (80 rows: a
    # label of all of them would clear the threshold, so the fit is not refused for free)
    few = df.iloc[:80]
    with pytest.raises(dpopt.ChargedFitError, match="kept 0 classes.*classes="):
        dpopt.DPLogisticRegression(epsilon=1.0, delta=1e-6, random_state=1,
                                   accountant=acc).fit(few, pd.Series([f"l{i}" for i in range(80)]))
    assert len(acc._ledger) == 2
    failed = acc._ledger[1]
    assert failed.delta == 1e-6 and 0.0 < failed.epsilon < 1.0


def test_one_kept_label_is_the_classifier_of_that_label():
    """The labels' selection keeps one label (the other is held by one record): no model can
    be fitted and no other label named, so the released classifier predicts the kept label
    (the majority, accuracy the majority rate) instead of refusing. Its privacy is the
    table layer's releases alone (the rest is not spent): warned, reported, charged once."""
    df, y = _table()
    acc = dpopt.BudgetAccountant(epsilon=2.0, delta=1e-5)
    y1 = pd.Series(["no"] * (len(y) - 1) + ["yes"])
    with pytest.warns(UserWarning, match="kept one label of y \\('no'\\)"):
        model = dpopt.DPLogisticRegression(epsilon=1.0, delta=1e-6, random_state=1,
                                           accountant=acc).fit(df, y1)
    assert list(model.classes_) == ["no"]
    assert np.all(model.predict(df) == "no") and model.score(df, y1) == np.mean(y1 == "no")
    assert model.predict_proba(df).shape == (len(df), 1)
    assert np.all(model.predict_proba(df) == 1.0) and np.all(model.decision_function(df) == 0)
    r, plan = model.fit_result_, model.auto_.plan
    assert plan["unlearnable"] and plan["solver"] == "none"
    assert r.mechanisms and all(type(m) is Gaussian for m in r.mechanisms)
    # the label and column selections' Gaussians, accounted at the delta left by the threshold
    assert model.epsilon_spent_ == pytest.approx(
        epsilon_of(r.mechanisms, 1e-6 - plan["selection_delta"]))
    assert 0 < model.epsilon_spent_ < 1.0 and model.delta_spent_ == 1e-6
    assert "no model" in model.privacy_report() and "kept one label" in model.privacy_report()
    assert len(acc._ledger) == 1 and acc._ledger[0].epsilon == model.epsilon_spent_
    # inference on the numeric columns (categorical ones are coded differently with inference)
    numeric = df.drop(columns=["color", "size", "client"])
    spent = dpopt.DPLogisticRegression(epsilon=1.0, delta=1e-6, random_state=1).fit(
        numeric, y1).epsilon_spent_
    with pytest.raises(dpopt.ChargedFitError, match="inference=True needs a model"):
        dpopt.DPLogisticRegression(epsilon=1.0, delta=1e-6, random_state=1, accountant=acc,
                                   inference=True).fit(numeric, y1)
    # refused on the selection's outcome: charged what the one-label classifier spends
    assert len(acc._ledger) == 2 and acc._ledger[1].epsilon == spent > 0


def test_selection_sensitivity_threshold_and_its_delta():
    df, _ = _table(500)
    cols = F.plan_table(df)
    mu, delta_sel = 0.3, 1e-7
    schema, _ = F.fit_schema(df, cols, mu, delta_sel, np.random.default_rng(0))
    k = 3  # color, client, size (an undeclared category): data-driven; income's missing
    fixed = 1  # count is a fixed partition
    assert schema.sigma == pytest.approx(math.sqrt(2 * k + fixed) / mu)
    assert schema.threshold == pytest.approx(1 + schema.sigma * norm.isf(delta_sel / k))
    # a value held by one record clears the threshold with probability <= delta_sel over all k
    assert k * norm.sf((schema.threshold - 1) / schema.sigma) <= delta_sel * (1 + 1e-9)
    assert schema.records == [dpopt.privacy.Gaussian(1.0 / mu, 1)]


def test_labels_declared_bool_categorical_and_arrays():
    df, y = _table()
    m = dpopt.DPLogisticRegression(classes=["no", "yes"], random_state=0).fit(df, y)
    # declared: not selected, but their noisy counts are released for the held-out choice
    assert list(m.classes_) == ["no", "yes"]
    assert m.auto_.plan["table"]["labels"] == "declared; their noisy counts released"
    assert 0.0 < m.auto_.plan["table"]["label_share"] <= 0.3
    m = dpopt.DPLogisticRegression(random_state=0).fit(df, y == "yes")
    assert list(m.classes_) == [False, True]
    # a categorical y's categories may be the data's labels: selected privately, as text
    m = dpopt.DPLogisticRegression(random_state=0).fit(
        df, pd.Categorical(y, categories=["yes", "no", "rare"]))
    assert list(m.classes_) == ["no", "yes"]
    assert m.auto_.plan["table"]["labels"] == LABELS_SELECTED
    # arrays with a well-populated binary numeric target: the classes np.unique would give,
    # chosen privately (a small share of the plan)
    X = np.random.default_rng(0).standard_normal((2000, 3))
    yy = (X[:, 0] > 0).astype(int)
    m = dpopt.DPLogisticRegression(random_state=0).fit(X, yy)
    assert list(m.classes_) == [0, 1] and m.auto_.plan["table"]["label_share"] > 0
    assert m.score(X, yy) > 0.8
    with pytest.raises(ValueError, match="at least 2 distinct"):
        dpopt.DPLogisticRegression(classes=["x"]).fit(X, yy)


def test_feature_bounds_are_public_and_cost_nothing():
    df, y = _table()
    m = dpopt.DPLogisticRegression(random_state=0, feature_bounds={
        "age": (18, 80), "income": (0, 100)}).fit(df, y)
    plan = m.auto_.plan
    assert "feature_bounds" not in plan["mu_shares"]  # nothing left to estimate
    lo, hi = m.feature_bounds_
    assert (lo[0], hi[0]) == (18, 80)
    X = np.random.default_rng(0).standard_normal((3000, 2)) * [1, 100]
    yr = X @ [1.0, 0.01]
    r = dpopt.DPLinearRegression(random_state=0, feature_bounds={0: (-4, 4)}).fit(X, yr)
    assert (r.feature_bounds_[0][0], r.feature_bounds_[1][0]) == (-4, 4)
    assert r.auto_.plan["public_bounds"] == 1
    with pytest.raises(ValueError, match="feature_bounds: 'nope' is not a column"):
        dpopt.DPLogisticRegression(feature_bounds={"nope": (0, 1)}).fit(df, y)
    with pytest.raises(ValueError, match="not numeric columns"):
        dpopt.DPLogisticRegression(feature_bounds={"color": (0, 1)}).fit(df, y)
    with pytest.raises(ValueError, match="lower <= upper"):
        dpopt.DPLogisticRegression(feature_bounds={"age": (5, 1)}).fit(df, y)


def test_feature_bounds_as_a_pair_of_arrays():
    """For arrays, (lower, upper) as a fitted ``feature_bounds_`` gives them (NaN at both
    ends: estimated privately); a list of per-feature pairs is never read that way."""
    X = np.random.default_rng(1).standard_normal((3000, 3)) * [1, 100, 10]
    yr = X @ [1.0, 0.01, 0.1]
    lo, hi = np.array([-4.0, np.nan, -30.0]), np.array([4.0, np.nan, 30.0])
    r = dpopt.DPLinearRegression(random_state=0, feature_bounds=(lo, hi)).fit(X, yr)
    assert r.auto_.plan["public_bounds"] == 2
    assert (r.feature_bounds_[0][0], r.feature_bounds_[1][2]) == (-4, 30)
    again = dpopt.DPLinearRegression(random_state=0, feature_bounds=r.feature_bounds_).fit(X, yr)
    assert again.auto_.plan["public_bounds"] == 3
    with pytest.raises(ValueError, match="two arrays of 3 values"):
        dpopt.DPLinearRegression(feature_bounds=(np.zeros(2), np.ones(2))).fit(X, yr)
    with pytest.raises(ValueError, match="one bound NaN"):
        dpopt.DPLinearRegression(feature_bounds=(lo, np.ones(3))).fit(X, yr)
    with pytest.raises(ValueError, match=r"must be a dict .*got \[\(0, 1\)"):
        dpopt.DPLinearRegression(feature_bounds=[(0, 1), (0, 1), (0, 1)]).fit(X, yr)


def test_predict_aligns_unseen_and_missing_values():
    df, y = _table()
    m = dpopt.DPLogisticRegression(random_state=0).fit(df, y)
    test = df.iloc[:50][list(reversed(df.columns))].copy()  # other column order
    test.loc[test.index[:5], "color"] = "purple"  # unseen -> <other>
    test.loc[test.index[5:10], "age"] = np.nan
    pred = m.predict(test)
    assert pred.shape == (50,) and set(pred) <= {"no", "yes"}
    enc = m.table_.transform(test)
    assert np.all(enc[:5, 4] == 1)  # color_<other>
    with pytest.raises(ValueError, match="lacks the column"):
        m.predict(test.drop(columns=["color"]))
    # a True/False column read back as text or 0/1 means the same; other values are refused
    # (they were read by truthiness: the string "False" counted as True)
    proba = m.predict_proba(test)
    for same in (test.member.astype(str), test.member.astype(int), test.member.astype(float)):
        np.testing.assert_allclose(m.predict_proba(test.assign(member=same)), proba)
    with pytest.raises(ValueError, match="'member' was True/False at fit time but holds"):
        m.predict(test.assign(member=np.where(test.member, "yes", "no")))
    # a table's columns are matched by name: an array (no names) is refused, clearly
    with pytest.raises(ValueError, match="must be a table .*matched by name; got ndarray"):
        m.predict(test.to_numpy())


def test_explicit_solver_takes_public_schema_only():
    df, y = _table(500)
    with pytest.raises(ValueError, match="hold strings.*solver='auto'.*categories="):
        dpopt.DPLogisticRegression(solver="dp-gd", classes=["no", "yes"]).fit(df, y)
    opts = {"smoothness": 1.0}
    with pytest.warns(dpopt.PrivacyLeakWarning, match="np.unique"):
        m = dpopt.DPLogisticRegression(solver="dp-gd", solver_options=opts, categories={
            "color": ["red", "green", "blue"], "client": [], "size": ["S", "M"]}).fit(df, y)
    assert any("np.unique" in msg for msg in m.privacy_leaks_)


def test_private_table_encoder_transformer_api():
    df, _ = _table(2000)
    enc = dpopt.PrivateTableEncoder(epsilon=1.0, delta=1e-6, random_state=0).fit(df)
    names = enc.get_feature_names_out()
    assert enc.transform(df).shape == (2000, len(names))
    assert 0 < enc.epsilon_spent_ <= 1.0 + 1e-9 and enc.delta_spent_ == 1e-6
    assert enc.public_bounds_["color_red"] == (0.0, 1.0) and "age" not in enc.public_bounds_
    out = enc.set_output(transform="pandas").transform(df)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == list(names)


def test_private_table_encoder_is_charged_like_every_private_transformer():
    """The encoder's release was charged to no budget: five fits of epsilon 1 passed a
    budget of 2 unrecorded, and a search left its epsilon out. It is now one charge, its
    records in ``mechanisms_`` for the search's composition; over budget it is refused
    before reading, and a failure after its first release is charged whole."""
    from sklearn.pipeline import make_pipeline

    df, y = _table(2000)
    acc = dpopt.BudgetAccountant(epsilon=2.0, delta=1e-4)
    enc = dpopt.PrivateTableEncoder(epsilon=1.0, random_state=0, accountant=acc).fit(df)
    assert acc.ledger[0].epsilon == pytest.approx(enc.epsilon_spent_) and enc.epsilon_spent_ > 0.9
    assert enc.mechanisms_ and enc.adjacency_ == "replace-one"
    with acc:  # the active budget, as for the scalers
        dpopt.PrivateTableEncoder(epsilon=0.5, random_state=1).fit(df)
    assert len(acc.ledger) == 2
    with pytest.raises(dpopt.BudgetExceededError):
        dpopt.PrivateTableEncoder(epsilon=5.0, accountant=acc).fit(df)
    assert len(acc.ledger) == 2
    public = df[["age", "member"]]  # nothing to select or count: nothing charged
    free = dpopt.PrivateTableEncoder(epsilon=1.0, accountant=acc).fit(public)
    assert free.epsilon_spent_ == 0.0 and free.mechanisms_ == [] and len(acc.ledger) == 3
    assert acc.ledger[2].epsilon == 0.0
    # in a search: the encoder's records are composed into every run's
    declared = {"color": ["red", "green", "blue"], "client": [], "size": ["S", "M"]}
    pipe = make_pipeline(
        dpopt.PrivateTableEncoder(epsilon=0.3, categories=declared, random_state=0),
        dpopt.DPLogisticRegression(solver="objective-perturbation", classes=["no", "yes"],
                                   epsilon=0.5, solver_options={"row_bound": 5.0}))
    grid = {"dplogisticregression__alpha": [1e-3, 1e-2]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = dpopt.PrivateHyperparameterSearch(pipe, grid, random_state=0).fit(df, y)
        alone = dpopt.PrivateHyperparameterSearch(pipe.set_params(
            privatetableencoder=dpopt.PrivateTableEncoder(epsilon=1e-6, categories=declared)),
            grid, random_state=0).fit(df, y)
    assert not search.privacy_leaks_ and len(search.candidate_mechanisms_[0]) == \
        len(search.best_estimator_.steps[-1][1].fit_result_.mechanisms) + 1
    assert search.epsilon_spent_ > alone.epsilon_spent_ + 0.2
    with pytest.raises(ValueError, match=r"text column\(s\) \['color', 'size', 'client'\]"):
        dpopt.PrivateHyperparameterSearch(make_pipeline(
            dpopt.PrivateTableEncoder(epsilon=0.3), pipe.steps[-1][1]), grid).fit(df, y)


def test_a_pandas_category_is_text_unless_declared():
    """``astype("category")`` on the private data lists every value the column holds, one
    record's included; read as a declaration, that value was a level of the model in every
    seed, and a neighbour without it never had it (session 40's neighbour audit). A
    category is now text, its levels chosen privately (the fit is the text column's), unless
    ``categories=`` names it: then its levels are the declaration's, as given."""
    df, y = _table(2000)
    text = df.assign(color=df["color"].astype(object))
    text.loc[0, "color"] = "violet"  # one record's value
    cat = text.assign(color=text["color"].astype("category"))
    assert "violet" in list(cat["color"].cat.categories)
    for seed in range(3):
        a, b = (dpopt.DPLogisticRegression(random_state=seed).fit(X, y) for X in (cat, text))
        names = list(a.table_.get_feature_names_out())
        assert names == list(b.table_.get_feature_names_out()) and "color_violet" not in names
        np.testing.assert_array_equal(a.coef_, b.coef_)
        assert a.epsilon_spent_ == b.epsilon_spent_
    declared = dpopt.DPLogisticRegression(random_state=0, categories={
        "color": list(cat["color"].cat.categories)}).fit(cat, y)
    assert "color_violet" in declared.table_.get_feature_names_out()


def test_a_categorys_kind_and_level_names_do_not_depend_on_one_record():
    """Two ways a category's data changed what the model is named (session 41's audit):
    pandas calls a category of True/False categories bool, so one record's "maybe" turned a
    bool column (one feature) into text (three); and a category of numbers becomes floats
    when one value is not whole, so one record's 2.5 renamed every level ("k_1" ->
    "k_1.0"). A category is text whatever its categories, and a category's whole floats are
    keyed as integers (declared levels too)."""
    rng = np.random.default_rng(0)
    n = 1500
    flag = rng.random(n) < 0.4
    k = rng.choice([1, 2, 3], n).astype(object)
    y = 2.0 * flag + (k == 2) + rng.standard_normal(n)
    odd_flag, odd_k = flag.astype(object), k.copy()
    odd_flag[0], odd_k[0] = "maybe", 2.5
    plain = pd.DataFrame({"flag": flag, "k": k}).astype("category")
    odd = pd.DataFrame({"flag": odd_flag, "k": odd_k}).astype("category")
    assert list(odd["k"].cat.categories) == [1.0, 2.0, 2.5, 3.0]
    assert [c.kind for c in F.plan_table(plain)] == [c.kind for c in F.plan_table(odd)] == \
        ["string", "string"]
    for seed in range(3):
        names = [list(dpopt.DPLinearRegression(epsilon=2.0, random_state=seed).fit(
            X, y).table_.get_feature_names_out()) for X in (plain, odd)]
        assert names[0] == names[1] and "k_2.5" not in names[0]
    assert "k_2" in names[0] and "flag_True" in names[0]
    m = dpopt.DPLinearRegression(epsilon=2.0, random_state=0, categories={"k": [1, 2, 3]})
    m.fit(odd.assign(k=odd["k"].cat.remove_categories([2.5])), y)  # floats 1.0, 2.0, 3.0
    assert m.table_.transform(odd)[1:, -4:-1].sum() == n - 1  # each matched a declared level
    # the same numbers written otherwise at prediction match the levels "1", "2", "3" (a float
    # column, text from a CSV, an older model's "1.0"); a text that only looks like one does not
    later = pd.DataFrame({"flag": flag[:4], "k": [1.0, "2.0", "3", "01"]})
    np.testing.assert_array_equal(m.table_.transform(later)[:, -4:],
                                  [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])


def test_pyarrow_table_through_narwhals():
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("narwhals")
    df, y = _table(2000)
    table = pa.Table.from_pandas(df.drop(columns=["size"]))
    a = dpopt.DPLogisticRegression(random_state=0).fit(table, y)
    # an Arrow integer or bool column holds missing cells whatever its cells: pandas'
    # nullable types say the same (numpy's int64 and bool cannot, a missing cell would make
    # them float and object: the table layer plans their missing counts only with the former)
    nullable = df.drop(columns=["size"]).astype({"age": "Int64", "member": "boolean"})
    b = dpopt.DPLogisticRegression(random_state=0).fit(nullable, y)
    np.testing.assert_allclose(a.coef_, b.coef_)
    # an independent fuzz: feature_names_in_ was np.asarray(table.columns), a pyarrow
    # Table's columns being its data: the model held every training cell, unreported
    assert a.feature_names_in_.shape == (table.num_columns,)
    assert list(a.feature_names_in_) == list(b.feature_names_in_) == table.column_names


@pytest.mark.parametrize("kind", ["label", "category"])
def test_selection_audit_one_record_value_is_not_released(kind):
    from dpopt.api.selection_audit import selection_audit

    res = selection_audit(kind, n_runs=150)
    assert res.consistent and res.released == 0, res.summary()


def test_declared_label_counts_audit_is_consistent_and_catches_too_little_noise(monkeypatch):
    """The declared labels' noisy counts: the empirical epsilon of the best threshold test on
    the count difference stays below the claim; with a tenth of the noise (the worst bug:
    too little noise) the audit sees a violation."""
    from dpopt.api.selection_audit import selection_audit
    from dpopt.preprocessing import table_encoder as TE

    res = selection_audit("counts", epsilon=1.0, delta=1e-3, n=200, n_runs=1500)
    assert res.consistent, res.summary()
    honest = TE.noisy_class_counts
    monkeypatch.setattr(TE, "noisy_class_counts",
                        lambda index, k, mu, rng: honest(index, k, 10.0 * mu, rng))
    broken = selection_audit("counts", epsilon=1.0, delta=1e-3, n=200, n_runs=1500)
    assert not broken.consistent, broken.summary()


def test_selection_audit_catches_a_threshold_that_lets_rare_values_through(monkeypatch):
    from dpopt.api.selection_audit import selection_audit

    monkeypatch.setattr(F, "selection_threshold", lambda sigma, k, delta: 0.5)
    res = selection_audit("category", n_runs=150)
    assert not res.consistent and res.released > 30, res.summary()


def test_a_table_target_is_one_column():
    """A one-column frame as y is its column (scikit-learn's DataConversionWarning, at the
    caller); more columns are refused naming y, before anything is charged (it was a
    pandas error about a buffer's dimensions)."""
    from sklearn.exceptions import DataConversionWarning

    df, y = _table(600)
    acc = dpopt.BudgetAccountant(epsilon=5.0, delta=1e-4)
    with pytest.warns(DataConversionWarning, match="column-vector y") as caught:
        one = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0).fit(df, y.to_frame())
    assert caught[0].filename == __file__
    ref = dpopt.DPLogisticRegression(epsilon=1.0, random_state=0).fit(df, y)
    assert np.array_equal(one.coef_, ref.coef_) and list(one.classes_) == list(ref.classes_)
    for two in (pd.DataFrame({"a": y, "b": y}), np.column_stack([y, y])):
        with pytest.raises(ValueError, match="y must be 1-d.*shape \\(600, 2\\)"):
            dpopt.DPLogisticRegression(epsilon=1.0, accountant=acc).fit(df, two)
    assert not acc._ledger


def test_reference_coding_schema_dense_sparse_names_and_round_trip():
    """Reference coding: each categorical column leaves out its best-populated level (by the
    released noisy counts) and the levels below the threshold (the declared 'L', 'XL' no
    record holds); its cells and values outside the levels get no column. The dense and
    sparse designs agree, and the schema survives a model file."""
    df, _ = _table(3000)
    schema, _ = F.fit_schema(df, F.plan_table(df, SIZES), 2.0, 1e-7, np.random.default_rng(0),
                             coding="reference")
    color, size = schema.columns[1], schema.columns[4]
    assert color.reference == max(color.levels, key=schema.counts["color"].get)
    assert size.levels == ["S", "M"] and size.reference in ("S", "M")
    assert set(schema.counts["size"]) == {"S", "M", "L", "XL", F.MISSING, F.OTHER}
    names = schema.feature_names_out()
    assert f"color_{color.reference}" not in names and "color_<other>" not in names
    assert [n for n in names if n.startswith("client")] == []  # no level kept: no column
    dense = schema.transform(df)
    np.testing.assert_array_equal(schema.transform_sparse(df).toarray(), dense)
    j = names.index(next(n for n in names if n.startswith("color_")))
    assert np.all(dense[(df["color"] == color.reference).to_numpy(), j:j + 2] == 0)
    back = F.TableSchema.from_dict(schema.to_dict())
    assert back.coding == "reference" and back.feature_names_out() == names
    np.testing.assert_array_equal(back.transform(df), dense)
    for bad in ({"coding": "dummy"}, {"columns": [dict(schema.to_dict()["columns"][1],
                                                       reference="purple")]}):
        with pytest.raises(ValueError, match="coding is one of"):
            F.TableSchema.from_dict({**schema.to_dict(), **bad})


def test_reference_coding_counts_declared_columns_with_their_sensitivity():
    """With reference coding a declared column releases the counts of its public keys: one
    record moves one unit between two of them, so it adds 2 to the squared sensitivity (as a
    selected column) instead of the 1 of its missing count, and the change is attained."""
    df, _ = _table(500)
    mu = 0.3
    one_hot, _ = F.fit_schema(df, F.plan_table(df, SIZES), mu, 1e-7, np.random.default_rng(0))
    reference, _ = F.fit_schema(df, F.plan_table(df, SIZES), mu, 1e-7,
                                np.random.default_rng(0), coding="reference")
    assert one_hot.sigma == pytest.approx(math.sqrt(2 * 2 + 2) / mu)  # size: a missing count
    assert reference.sigma == pytest.approx(math.sqrt(2 * 3 + 1) / mu)  # size: its counts
    changed = df.copy()
    changed.loc[0, "size"] = "M" if df.loc[0, "size"] == "S" else "S"
    a, b = (F._declared_counts(d["size"], ["S", "M", "L", "XL"]) for d in (df, changed))
    assert math.sqrt(sum((a[k] - b[k]) ** 2 for k in a)) == pytest.approx(math.sqrt(2))
    with pytest.raises(ValueError, match="needs the table"):
        F.fit_schema(None, F.plan_table(df, SIZES), mu, 1e-7, np.random.default_rng(0),
                     counts=({}, {}), coding="reference")


def test_private_table_encoder_reference_coding():
    df, _ = _table(2000)
    enc = dpopt.PrivateTableEncoder(coding="reference", random_state=0).fit(df)
    assert not any(n.endswith("<other>") for n in enc.get_feature_names_out())
    assert enc.transform(df).shape == (2000, len(enc.get_feature_names_out()))
    with pytest.raises(ValueError, match="coding must be one of"):
        dpopt.PrivateTableEncoder(coding="drop-first").fit(df)


def test_reference_counts_audit_is_consistent_and_catches_too_little_noise(monkeypatch):
    from dpopt.api.selection_audit import selection_audit

    res = selection_audit("reference", epsilon=1.0, delta=1e-3, n=200, n_runs=1500)
    assert res.consistent, res.summary()
    monkeypatch.setattr(F, "selection_sensitivity", lambda selected, counted, fixed: 0.1)
    broken = selection_audit("reference", epsilon=1.0, delta=1e-3, n=200, n_runs=1500)
    assert not broken.consistent, broken.summary()


def test_prediction_warns_where_a_missing_cell_has_no_indicator(tmp_path):
    """At prediction a missing cell in a column the model has no indicator for is imputed as
    in training, with a warning naming the column; never on training data (whether a
    private record has a missing cell is private), nor in a search's scores on private rows."""
    from dpopt import ImputedValueWarning
    from dpopt.api import modelio

    df, y = _table(3000)  # income: 20% missing, its indicator is released; age: none missing
    with warnings.catch_warnings():
        warnings.simplefilter("error", ImputedValueWarning)
        m = dpopt.DPLogisticRegression(random_state=0).fit(df, y)
        m.predict(df.head(20).assign(income=np.nan))  # indicator: no warning
    test = df.head(20).copy()
    test.loc[test.index[:2], "age"] = np.nan
    test.loc[test.index[2], "color"] = None
    with pytest.warns(ImputedValueWarning, match=r"\['age', 'color'\] hold missing values"):
        m.predict(test)
    model = {"coef": np.ravel(m.coef_).tolist(), "data": {"table": m.table_.schema.to_dict()}}
    with pytest.warns(ImputedValueWarning, match=r"\['age', 'color'\]"):
        modelio.features(model, test)
    search = dpopt.PrivateHyperparameterSearch(m, {"alpha": [1e-3]}, score_clip=1.0)
    with warnings.catch_warnings():  # the search scores candidates on private rows: silent
        warnings.simplefilter("error", ImputedValueWarning)
        search._noisy_score(m, test, y.head(20).to_numpy(), np.random.default_rng(0))


def test_declared_levels_match_cells_by_the_columns_text_and_are_distinct():
    """Declared levels are matched by text: 1 declared for a float column is its cells'
    "1.0" (it matched nothing, and the column vanished silently); two levels with one text
    are refused before anything is spent (pandas raised deep inside the encoding)."""
    rng = np.random.default_rng(0)
    k = rng.choice([1.0, 2.0], 500)
    cols = F.plan_table(pd.DataFrame({"k": k, "i": k.astype(int)}),
                        {"k": [1, 2], "i": [1.0, 2.0]})
    assert [c.levels for c in cols] == [["1.0", "2.0"], ["1", "2"]]
    with pytest.raises(ValueError, match=r"categories of column 'k': \['1'\] appear twice"):
        F.plan_table(pd.DataFrame({"k": k.astype(int).astype(object)}), {"k": [1, "1", 2]})


def test_reference_coding_keeps_the_dense_design():
    """The sparse design's unshifted scaling lost the intervals' smallest eigenvalue where
    the dense design gave them (a fuzz: 180 levels, 190,000 rows): reference coding stays
    dense whatever n."""
    df = pd.DataFrame({"s": np.random.default_rng(0).choice([f"v{i}" for i in range(20)], 4000)})
    schema, _ = F.fit_schema(df, F.plan_table(df), 2.0, 1e-7, np.random.default_rng(0))
    assert len(schema.feature_names_out()) == 21 and schema.prefers_sparse(10 ** 9)
    schema.coding = "reference"
    assert not schema.prefers_sparse(10 ** 9)


def test_a_model_file_reads_a_pyarrow_tables_columns_by_name():
    """modelio matched the training names against ``X.columns``, a pyarrow Table's data."""
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("narwhals")
    from dpopt.api import modelio

    df = pd.DataFrame({"b": [3.0, 4.0], "a": [1.0, 2.0]})
    model = {"data": {"columns": ["a", "b"]}, "coef": np.zeros(2)}
    np.testing.assert_array_equal(modelio.features(model, pa.Table.from_pandas(df)),
                                  [[1.0, 3.0], [2.0, 4.0]])


def test_an_arrow_dictionary_column_of_a_pyarrow_table_is_text_chosen_privately():
    """Converted by narwhals, an Arrow dictionary column became a pandas category, whose
    categories (every value the data holds, one record's included) were used as declared
    levels: named in the model in every seed (session 40's neighbour audit)."""
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("narwhals")
    rng = np.random.default_rng(0)
    n = 400
    a, y = rng.normal(size=n), rng.normal(size=n)
    city = rng.choice(["x", "y", "z"], n).astype(object)
    city[0] = "rare_id_12345"
    table = pa.table({"a": pa.array(a),
                      "city": pa.array(list(city), pa.string()).dictionary_encode()})
    for seed in range(5):
        est = dpopt.DPLinearRegression(epsilon=1.0, random_state=seed).fit(table, y)
        (line,) = est.table_.schema.describe()
        assert line.startswith("city: chosen privately") and "rare_id" not in line
        assert not any("rare_id" in name for name in est.table_.get_feature_names_out())
    assert est.predict(table).shape == (n,)


def test_an_arrow_tables_missing_cell_keeps_its_columns_kinds():
    """pandas makes an Arrow integer column with a missing cell float, and a bool one object
    (text to the table layer): one record's empty cell changed the plan (a bool column's
    text levels, an integer column's missing count), for a table whose types say what each
    column is (session 40)."""
    pa = pytest.importorskip("pyarrow")
    pytest.importorskip("narwhals")
    rng = np.random.default_rng(2)
    n = 1500
    age, member = rng.integers(18, 80, n).tolist(), (rng.random(n) < 0.4).tolist()
    y = np.asarray(age) / 10 + np.asarray(member) + rng.normal(size=n)
    plans = []
    for gap in (False, True):
        a, m = list(age), list(member)
        if gap:
            a[0] = m[0] = None
        table = pa.table({"age": pa.array(a, pa.int64()), "member": pa.array(m, pa.bool_())})
        est = dpopt.DPLinearRegression(epsilon=2.0, random_state=0).fit(table, y)
        plans.append((est.table_.schema.describe(), sorted(est.auto_.plan["mu_shares"])))
    assert plans[0] == plans[1]
    assert any(line.startswith("member: bool") for line in plans[0][0])
