"""The table layer on the estimators' side (:mod:`dpopt.preprocessing.tables` holds the
schema and the partition selection): :func:`prepare_default` runs the releases that come
before the default path's model (labels, categories, missing indicators) as a
:class:`Prior` of the one composition, :class:`TableEncoder` applies a released schema,
and :func:`release_table` is the selection alone, which
:class:`dpopt.PrivateTableEncoder` charges as a transformer."""

from __future__ import annotations

import math
import reprlib
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpopt._core.exceptions import ChargedFitError
from dpopt._core.validation import (
    check_range_width,
    real_pair,
)
from dpopt.preprocessing._bounds import release_counts
from dpopt.preprocessing._cells import check_cells
from dpopt.preprocessing.labels import (
    LABELS_COUNTED,
    LABELS_SELECTED,
    MAX_LABEL_SHARE,
    MIN_CLASS_FRACTION,
    SELECTION_SHARE_LABELS,
    declared_classes,
    encode_labels,
    label_share,
    select_labels,
    signed_labels,
    warn_if_none_declared,
)
from dpopt.preprocessing.tables import (
    CODINGS,
    Prior,
    TableSchema,
    as_pandas,
    delta_split,
    fit_schema,
    is_frame,
    plan_table,
    selection_share,
    selection_threshold,
)
from dpopt.preprocessing.target_coding import code_table, coding_shares
from dpopt.privacy import epsilon_of, gdp_mu
from dpopt.privacy.releases import begin

#: Bytes of one block of the dense design at prediction (:meth:`TableEncoder.prediction_blocks`).
PREDICTION_BLOCK_BYTES = 2 ** 25


@dataclass
class TableEncoder:
    """What an estimator keeps of its table: the schema and the raw column names."""

    schema: TableSchema | None
    feature_names_in: np.ndarray | None

    def transform(self, X, *, at_prediction=False):
        if self.schema is None:
            return X
        return self.schema.transform(X, at_prediction=at_prediction)

    def prediction_blocks(self, X, budget=PREDICTION_BLOCK_BYTES):
        """The dense design of ``X`` at prediction, block of rows by block of rows (at most
        ``budget`` bytes each, whatever n): the encoding and every feature map are per-row, so
        the blocks' margins are the whole design's, without its copies in memory. The
        warnings of ``transform(X, at_prediction=True)`` are raised once, for the whole X."""
        df = self.schema.checked_frame(X, at_prediction=True)
        rows = max(1, budget // (8 * max(1, len(self.schema.feature_names_out()))))
        lost = {}  # per column: whether every block's values missed the levels
        for start in range(0, max(len(df), 1), rows):
            yield self.schema.transform(df.iloc[start:start + rows], lost=lost)
        self.schema.warn_unmatched(lost)

    def get_feature_names_out(self):
        return np.array(self.schema.feature_names_out(), dtype=object)


def check_labels_kept(chosen, epsilon, mu=None, delta=None, records=(), selection_delta=0.0):
    """A clear error when the selection (at ``mu``, ``delta``: then the error says its
    threshold) kept no label; one kept label is :func:`dpopt.pipeline.constant.fit_one_class`.
    The outcome is the noisy selection's, so the error is a :class:`ChargedFitError` carrying
    the releases made so far (``records``, ``selection_delta``): the fit is charged for them."""
    if len(chosen) < 1:
        need = "" if mu is None else f" (about {selection_threshold(2 ** 0.5 / mu, 1, delta):.0f})"
        raise ChargedFitError(
            f"the label selection kept 0 classes of y: no label can be released, so nothing "
            f"can be predicted. A label must be held by enough records{need} to be released "
            f"privately at epsilon={epsilon:g}; declare the labels with classes=[...] or "
            f"raise epsilon (the selection is charged)", records, selection_delta)


def prepare_default(X, y, *, epsilon, delta, categories, feature_bounds, classes, classifier,
                    rng, count_declared=False, coding="one-hot", target_range=None,
                    gradient_model=None):
    """The table and label part of the default path: plan (public), select (private),
    encode. Returns ``(X_float, y, classes, encoder, public_bounds, prior)``.

    ``y`` is returned as given for regression, as indices into ``classes`` for a classifier.
    ``count_declared``: declared classes get noisy counts on all n rows
    (:func:`noisy_class_counts`, share
    :func:`declared_label_share`), from which the held-out
    selection of the default path reads the majority class as it does from selected labels'
    counts (the caller says whether that selection runs: otherwise nothing is spent).
    ``coding``: of the categorical columns (:data:`dpopt.preprocessing.tables.CODINGS`);
    ``"target"`` (string columns of a regressor or a binary classifier,
    :mod:`dpopt.preprocessing.target_coding`) falls back to one-hot where it does not apply;
    for a regressor the prior's ``info["target_range"]`` is then y's range it released (or
    ``target_range``, public, given); ``gradient_model``: as in
    :func:`~dpopt.preprocessing.target_coding.code_table`.
    """
    frame = is_frame(X)
    columns, df = None, None
    if frame:
        df = as_pandas(X)
        columns = plan_table(df, categories)
        check_cells(df, columns)
    elif categories:
        raise ValueError("categories= needs X as a DataFrame (columns by name)")
    given = check_feature_bounds(feature_bounds, columns, X.shape[1])  # before any release
    declared = declared_classes(y, classes) if classifier else None
    select_y = classifier and declared is None
    strings = [c for c in columns or [] if c.kind == "string"]
    mu, delta_sel, delta_y, share_y, share_c = selection_split(X.shape[0], columns, select_y,
                                                               epsilon, delta)
    shares = (coding == "target" and strings
              and coding_shares(X.shape[0], mu, classifier or target_range is not None))
    count_y = count_declared and declared is not None and len(declared) >= 2
    if count_y:
        share_y = declared_label_share(X.shape[0], mu)
    begin_selections(select_y, count_y, share_c)
    labels, records, label_counts, coding_info = None, [], None, {}
    if select_y:
        labels, records, _, label_counts = select_labels(y, mu * math.sqrt(share_y), delta_y,
                                                         rng)
    elif count_y:
        label_counts, records = noisy_class_counts(encode_labels(y, declared), len(declared),
                                                   mu * math.sqrt(share_y), rng)
    schema, encoder, Xf = None, None, X
    if frame:
        schema, _ = fit_schema(df, columns, mu * math.sqrt(share_c) if share_c else 0.0,
                               delta_sel - delta_y, rng,
                               coding="one-hot" if coding == "target" else coding)
        records += list(schema.records)
    y_out, classes_out = y, None
    if classifier:
        chosen = labels if select_y else declared
        check_labels_kept(chosen, epsilon, mu * math.sqrt(share_y) if select_y else None, delta_y,
                          records, delta_sel)
        y_out, classes_out = encode_labels(y, chosen), chosen
    if frame:
        if shares and (not classifier or len(classes_out) == 2):
            # a regressor's y, or a binary classifier's labels as -1 / +1 (0: neither class)
            values = y if not classifier else signed_labels(y_out)
            rec, spent, coding_info = code_table(
                df, schema, strings, values, mu, shares, rng,
                (-1.0, 1.0) if classifier else target_range, range_known=not classifier,
                gradient_model=gradient_model)
            records += rec
            share_c += spent
        warn_unused_columns(schema)
        Xf = (schema.transform_sparse(df) if schema.prefers_sparse(len(df))
              else schema.transform(df))
        encoder = TableEncoder(schema, np.asarray(df.columns, dtype=object))
    bounds = _resolve_bounds(given, schema, Xf.shape[1])
    prior = _prior(mu, delta_sel, share_y, share_c, records, schema, select_y, label_counts,
                   count_y, declared, X.shape[0])
    if coding_info:  # for the plan; a regressor's pipeline takes y's range as known
        prior.info.update(coding_info)
    return Xf, y_out, classes_out, encoder, bounds, prior


def warn_unused_columns(schema):
    """Warn (UserWarning) naming the text columns of ``schema`` that kept no level and no
    target code: every value counts as ``<other>``, so they add nothing to the model. Read
    from the released selection (post-processing: nothing spent). A column of numbers held
    as text (``object`` dtype, Decimal cells) is read as text and is the usual cause (an
    independent fuzz found such columns silent)."""
    unused = [c.name for c in schema.columns
              if c.kind == "string" and not c.levels and c.code is None and not c.has_missing]
    if unused:
        warnings.warn(f"column(s) {unused} kept no level at this budget (no value held by "
                      f"enough records to be named privately) and add nothing to the model; "
                      f"a column of numbers stored as text or object dtype is read as text: "
                      f"convert it with pd.to_numeric", UserWarning, stacklevel=5)


def begin_selections(select_y, count_y, share_c):
    """Mark the table layer's first release (:mod:`dpopt.privacy.releases`) when it makes
    one: the labels' selection or counts, or the columns' selection (its share of mu^2),
    in memory and on Dask alike."""
    if select_y or count_y or share_c:
        begin()


def no_column_left(prior):
    """The error of an encoded table with no column (reference coding, each categorical
    column's one kept level its reference): decided by the selection, so it is charged."""
    return ChargedFitError("the table's private selection left no column to fit (each "
                           "categorical column kept one level, its reference, and the others "
                           "were too rare to clear the selection's noise): use a larger "
                           "epsilon, declare the categories (or more of their levels), or add "
                           "a numeric column", prior.records, prior.delta)


def declared_label_share(n, mu):
    """The share of mu^2 of the declared labels' noisy counts (:func:`noisy_class_counts`),
    from public (n, mu) only: the smallest share that tells the majority of a 55/45 split
    (class rates differing by 2 ``MIN_CLASS_FRACTION``) with probability >= Phi(3): the
    difference of two counts carries noise of standard deviation sqrt(2) sigma =
    2 / (mu sqrt(share)), so 3 * 2 / (mu sqrt(share)) <= 2 MIN_CLASS_FRACTION n; kept
    within [``SELECTION_SHARE_LABELS``, ``MAX_LABEL_SHARE``] like :func:`label_share`."""
    need = (3.0 / (mu * MIN_CLASS_FRACTION * max(n, 1))) ** 2
    return min(MAX_LABEL_SHARE, max(SELECTION_SHARE_LABELS, need))


def noisy_class_counts(index, k, mu, rng):
    """Counts of the k declared classes (``index``: each record's class index) plus
    N(0, sigma^2) each, sigma = sqrt(2) / mu: replacing one record moves one unit from one
    count to another (L2 sensitivity sqrt(2), replace-one), so this is a Gaussian mechanism
    of multiplier 1 / mu (mu-GDP) over a public set of classes: no threshold, no delta of
    its own (a record outside the classes, index -1, is in no count: moving it in or out
    of one still moves at most two counts by one). Returns (noisy counts in class order,
    records)."""
    index = np.asarray(index, dtype=np.int64)
    return released_class_counts(np.bincount(index[index >= 0], minlength=k), mu, rng)


def released_class_counts(counts, mu, rng):
    """The release of :func:`noisy_class_counts` from the k classes' counts already summed
    (chunk by chunk out of core): the same Gaussian, the same draws."""
    counts = np.asarray(counts, dtype=np.float64)
    noisy, _, record = release_counts(counts[None, :], mu, rng)  # one histogram: sqrt(2)/mu
    return noisy[0].tolist(), [record]


def selection_split(n, columns, select_y, epsilon, delta):
    """``(mu, delta_sel, delta_y, share_y, share_c)`` of the table's releases, from public
    (n, schema, epsilon, delta) only: the fit's Gaussian-DP mu (at the delta the threshold
    leaves), the threshold's delta_sel (one delta_sel / k per data-driven column and for the
    labels), the labels' and the columns' shares of mu^2."""
    k_cols = sum(c.kind == "string" for c in (columns or []))
    k = k_cols + int(select_y)
    delta_g, delta_sel = delta_split(delta, k > 0)
    mu = gdp_mu(epsilon, delta_g)
    delta_y = delta_sel / k if select_y else 0.0
    share_y = label_share(n, mu, delta_y) if select_y else 0.0
    return mu, delta_sel, delta_y, share_y, selection_share(columns or [])


def _prior(mu, delta_sel, share_y, share_c, records, schema, select_y, label_counts=None,
           count_y=False, declared=None, n=0):
    """The :class:`Prior` of the table's releases (None when nothing was selected);
    ``declared``: the declared labels whose ``label_counts`` on ``n`` records were released
    (``count_y``), checked by :func:`~dpopt.preprocessing.labels.warn_if_none_declared`."""
    share = share_y + share_c
    info = {"selection_mu": mu * math.sqrt(share), "selection_delta": delta_sel,
            "label_share": share_y, "column_share": share_c}
    if schema is not None:
        info.update(_schema_info(schema))
    if select_y or count_y:
        info["labels"] = LABELS_SELECTED if select_y else LABELS_COUNTED
        info["label_counts"] = label_counts
        info["label_sigma"] = math.sqrt(2.0) / (mu * math.sqrt(share_y))
        if count_y and declared is not None:
            warn_if_none_declared(declared, label_counts, info["label_sigma"], n)
    return Prior(share, delta_sel, records, info) if share else None


def _schema_info(schema):
    kinds = {}
    for c in schema.columns:
        kinds[c.kind] = kinds.get(c.kind, 0) + 1
    declared = sum(len(c.levels) for c in schema.columns if c.kind == "declared")
    selected = sum(len(c.levels) for c in schema.columns if c.kind == "string")
    return {"columns": kinds, "declared_levels": declared, "selected_levels": selected,
            "missing_indicators": sum(c.has_missing for c in schema.columns),
            "threshold": schema.threshold}


def check_feature_bounds(feature_bounds, columns, width):
    """``feature_bounds`` as {column: (lower, upper)} (None when not given), checked from
    public facts only, so that a wrong one is refused before any release: the keys (names
    or positions), the pairs of finite numbers, and that each column is numeric in the
    table's plan ``columns`` (None for an array of ``width`` columns, keyed by index)."""
    if feature_bounds is None:
        return None
    if columns is None:
        return _by_name(_pair_of_arrays(feature_bounds, width), list(range(width)))
    given = _by_name(feature_bounds, [c.name for c in columns])
    kinds = {c.name: c.kind for c in columns}
    bad = [k for k in given if kinds[k] != "numeric"]
    if bad:
        raise ValueError(f"feature_bounds: {bad} are not numeric columns (the table layer "
                         f"gives the columns it makes from bool and categorical ones their "
                         f"public bounds)")
    return given


def _resolve_bounds(given, schema, width):
    """(lower, upper) public bounds of the encoded features (NaN: estimate privately), or
    None, from the checked ``given`` (:func:`check_feature_bounds`) and, for a table, its
    released ``schema``; ``width``: an array's number of features."""
    if schema is not None:
        lo, hi = schema.public_bounds(given or {})
        return None if np.all(np.isnan(lo)) and np.all(np.isnan(hi)) else (lo, hi)
    if given is None:
        return None
    lo, hi = np.full(width, np.nan), np.full(width, np.nan)
    for j, (a, b) in given.items():
        lo[j], hi[j] = a, b
    return lo, hi


def array_bounds(feature_bounds, width):
    """(lower, upper) of an array's ``feature_bounds`` ({column index: (lower, upper)}; NaN
    where not given), or None: the estimators' public bounds for arrays given as chunks."""
    return _resolve_bounds(check_feature_bounds(feature_bounds, None, width), None, width)


def _pair_of_arrays(feature_bounds, width):
    """An array's ``feature_bounds`` given as (lower, upper), two 1-d NumPy arrays of
    ``width`` values (the form of a fitted ``feature_bounds_``), as the dict form (NaN at
    both ends: estimate privately); any other value is returned as it is. Only NumPy arrays
    take this form, so that a list of per-feature pairs is never read as (lower, upper)."""
    if not (isinstance(feature_bounds, (tuple, list)) and len(feature_bounds) == 2
            and all(isinstance(v, np.ndarray) for v in feature_bounds)):
        return feature_bounds
    lo, hi = (np.asarray(v, dtype=np.float64) for v in feature_bounds)
    if lo.shape != (width,) or hi.shape != (width,):
        raise ValueError(f"feature_bounds as (lower, upper) needs two arrays of {width} "
                         f"values (one per feature), got shapes {lo.shape} and {hi.shape}")
    if np.any(np.isnan(lo) != np.isnan(hi)):
        raise ValueError("feature_bounds: a feature has one bound NaN and the other given; "
                         "give both or neither")
    return {j: (lo[j], hi[j]) for j in np.flatnonzero(~np.isnan(lo)).tolist()}


def _by_name(feature_bounds, names):
    """{column: (lower, upper)} from a dict keyed by name or index, checked. A key that is
    a column's name means that column (as ``categories=`` reads its keys), so an integer is
    a position only where no column is named by it."""
    if not isinstance(feature_bounds, dict):
        raise ValueError(f"feature_bounds must be a dict {{column name or index: (lower, "
                         f"upper)}} (or, for arrays, a pair (lower, upper) of arrays with one "
                         f"value per feature), got {reprlib.repr(feature_bounds)}")
    out = {}
    for key, pair in feature_bounds.items():
        if isinstance(key, (bool, np.bool_)):
            raise ValueError(f"feature_bounds: the key {key!r} is a bool, not a column name "
                             f"or index")
        if isinstance(key, (float, np.floating)) and not any(
                isinstance(name, (float, np.floating)) and name == key for name in names):
            raise ValueError(f"feature_bounds: the key {key!r} is a float, not a column name "
                             f"or index")  # (0.0 matched column 0, then indexed an array)
        if key in names:
            pass
        elif isinstance(key, (int, np.integer)):
            if not -len(names) <= key < len(names):
                raise ValueError(f"feature_bounds: column index {key} is out of range for "
                                 f"{len(names)} columns")
            key = names[key]
        else:
            raise ValueError(f"feature_bounds: {key!r} is not a column; columns: {names}")
        a, b = real_pair(pair, f"feature_bounds[{key!r}]")
        if not (math.isfinite(a) and math.isfinite(b) and a <= b):
            raise ValueError(f"feature_bounds[{key!r}] = {pair!r}: need finite lower <= upper")
        if a < b:
            check_range_width(a, b, f"feature_bounds[{key!r}]")
        out[key] = (a, b)
    return out


@dataclass
class TableRelease:
    """The table layer's selection alone (:func:`release_table`), for
    :class:`dpopt.PrivateTableEncoder`: the schema, the raw column names, the Gaussian
    records, what they spent (the threshold's delta included) and the 0/1 columns."""

    schema: TableSchema
    names: np.ndarray
    records: list
    epsilon: float
    delta: float
    public_bounds: dict


def checked_table(X, epsilon, coding):
    """``X`` as a pandas DataFrame, refused (before anything is read) unless a table with a
    finite ``epsilon`` and a known ``coding``."""
    if math.isinf(epsilon):
        raise ValueError("PrivateTableEncoder needs a finite epsilon: its selection of the "
                         "levels is private (declare every column's categories instead)")
    if coding not in CODINGS:
        raise ValueError(f"coding must be one of {CODINGS}, got {coding!r}")
    if not is_frame(X):
        raise ValueError("PrivateTableEncoder needs X as a DataFrame (pandas, polars or "
                         "pyarrow)")
    return as_pandas(X)


def release_table(df, epsilon, delta, categories, coding, rng) -> TableRelease:
    """Run the partition selection (:func:`fit_schema`) of ``df`` at ``(epsilon, delta)``:
    one Gaussian mechanism (mu = gdp_mu(epsilon, delta_g)) plus the threshold's delta_sel
    (:func:`delta_split`), under replace-one adjacency. Nothing is spent when every column
    is public (numbers without missing cells, bools, declared categories)."""
    columns = plan_table(df, categories)
    check_cells(df, columns)
    delta_g, delta_sel = delta_split(delta, any(c.kind == "string" for c in columns))
    schema, _ = fit_schema(df, columns, gdp_mu(epsilon, delta_g), delta_sel, rng,
                           coding=coding)
    numeric = {str(c.name) for c in columns if c.kind == "numeric"}
    spent = bool(schema.records)
    return TableRelease(schema, np.asarray(df.columns, dtype=object), list(schema.records),
                        epsilon_of(schema.records, delta_g) if spent else 0.0,
                        delta if spent else 0.0,
                        {name: (0.0, 1.0) for name in schema.feature_names_out()
                         if name not in numeric})


def public_table(X, categories=None):
    """``(schema, X_float)`` from the public schema only (declared categories, bool,
    numeric; a missing value imputed at 0 or encoded as ``<other>``, no indicator): for
    explicit solvers, which release nothing about the columns. A string column without
    declared categories is refused (its levels would have to be read from the data)."""
    df = as_pandas(X)
    columns = plan_table(df, categories)
    strings = [c.name for c in columns if c.kind == "string"]
    if strings:
        raise ValueError(f"columns {strings} hold strings (or pandas categories, whose "
                         f"categories are data unless declared): their levels must be chosen "
                         f"privately (solver='auto') or declared "
                         f"(categories={{{strings[0]!r}: [...]}})")
    schema = TableSchema(columns)
    return schema, schema.transform(df)


def explicit_table(X, categories=None):
    """``(raw column names or None, features, TableEncoder or None)`` of an explicit solver's
    in-memory DataFrame, from its public schema only (:func:`public_table`). A frame with a
    column that is not numeric is encoded (names and encoder kept); one of numbers only is
    read as an array, as scikit-learn reads it (a DataFrame of floats: scikit-learn keeps its
    names and checks them at prediction), its missing values imputed at 0 as in any other
    table (:func:`numbers_at_prediction` does the same at prediction)."""
    df = as_pandas(X)
    schema, Xf = public_table(df, categories)
    names = np.asarray(df.columns, dtype=object)
    if any(c.kind != "numeric" for c in schema.columns):
        return names, Xf, TableEncoder(schema, names)
    return None, pd.DataFrame(Xf, index=df.index, columns=df.columns), None


def numbers_at_prediction(X, names):
    """``X`` at the prediction of a model fitted on a DataFrame of numbers only by an explicit
    solver (:func:`explicit_table`), its columns ``names``: a DataFrame of numbers only with
    these columns, in this order, gets its missing values imputed at 0, as at fit, with the
    table's :class:`~dpopt.ImputedValueWarning`. Anything else as given (scikit-learn's
    checks then refuse other columns, text or a missing value)."""
    if not is_frame(X):
        return X
    df = as_pandas(X)
    if list(df.columns) != list(names):
        return X
    columns = plan_table(df)
    if any(c.kind != "numeric" for c in columns):
        return X
    return pd.DataFrame(TableSchema(columns).transform(df, at_prediction=True), index=df.index,
                        columns=df.columns)


def known_target_range(given, prior):
    """The target's range the default path takes as known: the one given
    (``target_bounds=``), else the one the table layer released with its target coding
    (post-processing of ``prior``), else None."""
    if given is not None or prior is None or "target_range" not in prior.info:
        return given
    return tuple(prior.info["target_range"])
