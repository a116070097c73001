"""The table layer on Dask DataFrames (:mod:`dpopt.preprocessing.table_encoder` is the
in-memory side): the same plan, the same releases from counts summed over the partitions
(each record is in one partition, so the sensitivities are those in memory), the encoding
applied partition by partition, and the checks that come before any release."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpopt._core.input import numeric_target, one_target
from dpopt.data.chunked import as_dask_arrays
from dpopt.data.sources import is_chunked_input, open_target
from dpopt.preprocessing._cells import (
    MISSING,
    cell_text,
    check_finite,
    check_keys,
    check_reserved,
    not_unicode,
    split_target,
    text_codes,
)
from dpopt.preprocessing.labels import (
    computed_with_checks,
    declared_classes,
    label_checks,
    labels_present,
    partition_checks,
    select_labels,
)
from dpopt.preprocessing.table_encoder import (
    TableEncoder,
    _prior,
    _resolve_bounds,
    begin_selections,
    check_feature_bounds,
    check_labels_kept,
    declared_label_share,
    released_class_counts,
    selection_split,
    warn_unused_columns,
)
from dpopt.preprocessing.tables import TableSchema, column_kind, fit_schema, plan_table


def is_dask_frame(X):
    """A Dask DataFrame, whatever its dtypes: the default path encodes it with the table
    layer (:func:`prepare_dask`) as it does a pandas DataFrame (:func:`prepare_default`),
    an explicit solver by :func:`dask_table`."""
    return type(X).__name__ == "DataFrame" and (type(X).__module__ or "").startswith("dask")


def split_dask_target(ddf, y):
    """``(features, target)`` of a Dask DataFrame; ``y`` may name one of its columns.
    Repeated column names are refused first (from the metadata: nothing is read)."""
    ddf, y = split_target(ddf, y)
    return ddf, _text_as_objects(y)


def _text_as_objects(y):
    """A Dask Series of text as Python strings (Dask's arrays hold no str dtype)."""
    if hasattr(y, "to_dask_array") and _text_dtype(getattr(y, "dtype", None)):
        return y.astype(object)
    return y


def _text_dtype(dtype):
    """A pandas or Arrow string dtype (an object dtype may hold anything)."""
    return (dtype is not None and not isinstance(dtype, np.dtype)
            and pd.api.types.is_string_dtype(dtype))


def split_default_target(ddf, y, *, classifier, who):
    """``(features, target, n)`` of a default-path fit on a Dask DataFrame of n rows (``y``
    as :func:`split_dask_target` takes it; ``who``: the estimator's name). The target is a
    Dask Series or a 1-d Dask array, and what is public is refused with a ValueError naming
    y before anything is read or released: None, one value, more than one column, a
    regressor's text or non-real dtype. A y in memory (NumPy, pandas) is checked as in
    memory (n targets; a classifier's labels present, a regressor's real and finite numbers)
    and made a Dask Series of one partition. A Dask y's values (missing, text in an object
    column, its length) are checked in the pass that counts (:func:`target_checks`)."""
    ddf, y = split_target(ddf, y)
    if y is None:
        raise ValueError(f"{who} requires y to be passed, but the target y is None")
    y = open_target(y)
    if is_chunked_input(y):
        y = _dask_column(y)
        if not classifier and (_text_dtype(y.dtype) or y.dtype.kind in "mMc"):
            raise ValueError(f"{who} needs a numeric target y; it holds {y.dtype}, not real "
                             f"numbers")
    n = int(len(ddf))
    if not is_chunked_input(y):
        y = _in_memory_target(y, n, classifier, who)
    elif not hasattr(y, "to_dask_array"):  # a Dask array: its length from its chunks
        y = y.compute_chunk_sizes() if math.isnan(y.shape[0]) else y
        if y.shape[0] != n:
            raise ValueError(f"X has {n} rows but y has {y.shape[0]}")
    return ddf, _text_as_objects(y), n


def _dask_column(y):
    """A Dask y as one column (a Series or a 1-d array); a ValueError naming y otherwise."""
    if is_dask_frame(y) and len(y.columns) == 1:
        return y[y.columns[0]]
    if hasattr(y, "to_dask_array") and not is_dask_frame(y):  # a Dask Series
        return y
    shape = getattr(y, "shape", None)
    if hasattr(y, "to_delayed") and shape is not None and (
            len(shape) == 1 or len(shape) == 2 and shape[1] == 1):  # a Dask array
        return y if len(shape) == 1 else y[:, 0]
    what = (f"a Dask DataFrame of {len(y.columns)} columns" if is_dask_frame(y)
            else f"shape {shape}" if shape is not None else type(y).__name__)
    raise ValueError(f"y must be 1-d, one target per row; got {what}")


def _in_memory_target(y, n, classifier, who):
    """A y in memory beside a Dask X, checked as in memory, as a Dask Series."""
    y = one_target(y)
    if len(y) != n:
        raise ValueError(f"X has {n} rows but y has {len(y)}")
    y = labels_present(y) if classifier else numeric_target(y, who)
    # lazy: dask is an optional dependency (pip install dpopt[dask])
    import dask
    import dask.dataframe as dd

    y = y.reset_index(drop=True) if isinstance(y, pd.Series) else pd.Series(np.asarray(y))
    with dask.config.set({"dataframe.convert-string": False}):  # text read as in memory
        return dd.from_pandas(y, npartitions=1)


def target_checks(y, classifier, classes, who):
    """The in-memory checks of a Dask ``y`` as lazy tasks, one per partition or chunk, to
    compute in the pass that counts (a failure stops it before any release): a classifier's
    labels (:func:`~dpopt.preprocessing.labels.label_checks`), a regressor's real and finite
    numbers (:func:`~dpopt._core.input.numeric_target`)."""
    if classifier:
        return label_checks(y, classes)
    return partition_checks(y, _numeric_block, who)


def _numeric_block(part, who):
    numeric_target(part, who)
    return 0


def prepare_dask(ddf, y, *, n, epsilon, delta, categories, feature_bounds, classes,
                 classifier, rng, count_declared=False, who="the estimator"):
    """The table releases of the default path on a Dask DataFrame: the plan, the split of
    the budget, the labels' and the columns' partition selection of :func:`prepare_default`,
    with every count (values of each string column, missing cells, labels) summed over the
    partitions by Dask in one pass; only those counts leave the workers, and they enter the
    same noisy threshold as in memory (same sensitivity: each record is in one partition).
    Returns ``(encoded Dask DataFrame, classes or None, TableEncoder, public bounds,
    Prior)``; the encoding is applied partition by partition (a per-record map: free).
    ``count_declared``: as in :func:`prepare_default` (the declared classes' counts summed
    over the partitions, then the same release). ``y``: a Dask Series or 1-d array
    (:func:`split_default_target`), checked in the counting pass (:func:`target_checks`:
    ``who`` names the estimator in a regressor's refusal), its length too."""
    columns = plan_table(ddf._meta, categories)
    given = check_feature_bounds(feature_bounds, columns, len(columns))  # before any release
    y_meta = getattr(y, "_meta", None)
    declared = declared_classes(y_meta, classes) if classifier else None
    select_y = classifier and declared is None
    mu, delta_sel, delta_y, share_y, share_c = selection_split(n, columns, select_y,
                                                               epsilon, delta)
    count_y = count_declared and declared is not None and len(declared) >= 2
    if count_y:
        share_y = declared_label_share(n, mu)
    values, missing, label_counts, rows = _dask_counts(
        ddf, y, columns, select_y or count_y, target_checks(y, classifier, classes, who))
    if rows != n:
        raise ValueError(f"X has {n} rows but y has {rows}")
    begin_selections(select_y, count_y, share_c)
    chosen, records, noisy_counts = None, [], None
    if select_y:
        chosen, records, _, noisy_counts = select_labels(None, mu * math.sqrt(share_y), delta_y,
                                                         rng, counts=label_counts)
    elif count_y:
        noisy_counts, records = released_class_counts(
            [label_counts.get(c, 0) for c in declared], mu * math.sqrt(share_y), rng)
    schema, _ = fit_schema(None, columns, mu * math.sqrt(share_c) if share_c else 0.0,
                           delta_sel - delta_y, rng, counts=(values, missing))
    records += list(schema.records)
    warn_unused_columns(schema)
    if classifier:
        chosen = chosen if select_y else declared_classes(y_meta, classes)
        check_labels_kept(chosen, epsilon, mu * math.sqrt(share_y) if select_y else None, delta_y,
                          records, delta_sel)
    names = list(ddf.columns)
    bounds = _resolve_bounds(given, schema, len(schema.feature_names_out()))
    prior = _prior(mu, delta_sel, share_y, share_c, records, schema, select_y, noisy_counts,
                   count_y, declared if count_y else None, n)
    encoder = TableEncoder(schema, np.asarray(names, dtype=object))
    return encode_partitions(ddf, encoder), chosen, encoder, bounds, prior


def _dask_counts(ddf, y, columns, count_y, checks=()):
    """``({column: {value text: count}}, {column: missing count}, {label: count} or None,
    y's number of rows)`` summed over the partitions (one ``dask.compute``; the labels' when
    ``count_y``, and y's ``checks``, :func:`target_checks`, in the same pass)."""
    # lazy: dask is an optional dependency (pip install dpopt[dask])
    checks = [*checks, *kind_checks(ddf, y, columns, count_y)]  # each partition, as read
    strings = [c.name for c in columns if c.kind == "string"]
    declared = [c.name for c in columns if c.kind == "declared"]  # texts checked, not counted
    fixed = [c.name for c in columns if c.kind != "string" and c.missable]
    numeric = [c.name for c in columns if c.kind == "numeric"]  # infinities refused
    tasks = ([_as_values(ddf[c]).value_counts(dropna=False) for c in strings + declared]
             + [ddf[c].isna().sum() for c in fixed]
             + [_row_count(y)] + ([_label_count_task(y)] if count_y else [])
             + [ddf[c].abs().max() for c in numeric])
    try:
        out = computed_with_checks(tasks, checks)
    except UnicodeEncodeError:  # Dask hashes (or converts) text first: name the column
        for c in strings + declared:
            try:
                ddf[c].map_partitions(_checked_text, c, meta=ddf[c]._meta).compute()
            except UnicodeEncodeError:  # pyarrow's conversion refused it before the check
                raise not_unicode(c) from None
        raise
    for c, counts in zip(strings + declared, out):  # before any release (check_cells)
        texts = [str(k) for k in counts.index if not pd.isna(k)]
        check_keys(c, texts)
        check_reserved(c, texts)
    check_finite([c for c, top in zip(numeric, out[len(out) - len(numeric):])
                  if np.isinf(float(top))])
    out = out[:len(out) - len(numeric)]
    out = out[:len(strings)] + out[len(strings) + len(declared):]
    values = {}
    for c, counts in zip(strings, out):
        values[c] = {}
        for key, count in counts.items():
            if not count:  # a category no record holds (a categorical's dtype lists it)
                continue
            text = MISSING if pd.isna(key) else str(key)  # a category's: keyed (_as_values)
            values[c][text] = values[c].get(text, 0) + int(count)
    missing = {c: int(m) for c, m in zip(fixed, out[len(strings):])}
    rows = int(out[len(strings) + len(fixed)])
    labels = {k: int(v) for k, v in out[-1].items() if v} if count_y else None  # held ones
    return values, missing, labels, rows


def _as_values(s):
    """A Dask ``category`` column counted by its cells' text keys, each partition's read with
    its own dtype (:func:`cell_text`: the metadata's categories may be unknown): Dask joins
    the partitions' counts by their categories, which fails when the metadata's are unknown
    and the partitions' are not text (True/False, numbers)."""
    if not isinstance(s.dtype, pd.CategoricalDtype):
        return s
    return s.map_partitions(_keyed, meta=pd.Series([], dtype=object, name=s.name))


def _keyed(part):
    return part.cat.rename_categories(lambda v: cell_text(v, part.dtype)).astype(object)


def kind_checks(ddf, y, columns, selected):
    """Checks (:func:`~dpopt.preprocessing.labels.partition_checks`, computed in the counting
    pass) of every partition of ``ddf`` and ``y`` against the kinds planned from the metadata
    (the first partition's types): pandas reads each chunk's types from its own cells, so one
    record's text in a column of numbers or True/False, or a label written otherwise, made
    one partition disagree with the plan and the fit fail after its first release (or the
    ``selected`` labels change type: their integer, float or bool type must then agree too,
    else numbers or text). A ValueError naming the columns, before any release; a
    partition whose column holds no value agrees."""
    kinds = {c.name: c.kind for c in columns}
    declared = {c.name for c in columns if c.kind == "declared"}
    checks = partition_checks(ddf, _agreeing, kinds, declared)
    if hasattr(y, "to_dask_array"):  # a Dask Series: its partitions' labels likewise
        checks += partition_checks(y, _agreeing_labels, _label_class(y._meta.dtype, selected),
                                   selected)
    return checks


def _agreeing(part, kinds, declared):
    wrong = [name for name, kind in kinds.items() if bool(part[name].notna().any())
             and column_kind(name, part[name].dtype, declared)[0] != kind]
    if wrong:
        raise ValueError(f"Dask DataFrame column(s) {wrong}: a partition holds values of "
                         f"another kind (numbers, True/False, text) than the frame's metadata "
                         f"says: each chunk's types were read from its own cells; read the data "
                         f"with the columns' types given (dtype=, a Parquet schema)")
    return 0


def _label_class(dtype, exact):
    kind = getattr(dtype, "kind", "O")
    if not exact:
        return "numbers" if kind in "iufb" else "text"
    return {"i": "integer", "u": "integer", "f": "float", "b": "bool"}.get(kind, "text")


def _agreeing_labels(part, expected, exact):
    if len(part) and _label_class(part.dtype, exact) != expected:
        raise ValueError(f"y: a partition holds labels of another type ({part.dtype}) than the "
                         f"Dask Series' metadata says ({expected}): each chunk's types were "
                         f"read from its own cells; read y with its type given")
    return 0


def _row_count(y):
    """y's number of rows: a Dask Series' as a lazy scalar, computed with the counts (an
    expression, as they are: ``dask.compute`` returns mixed kinds of collections grouped by
    kind, not in the order given); a Dask array's from its chunks (known:
    :func:`split_default_target`)."""
    return y.size if hasattr(y, "to_dask_array") else int(y.shape[0])


def _checked_text(s, name):
    """:func:`check_keys` of one partition's cells of column ``name`` (nothing returned)."""
    check_keys(name, text_codes(s, name)[1])
    return s.iloc[:0]


def _label_count_task(y):
    if hasattr(y, "value_counts"):  # a category by its labels: its categories may be unknown
        return (y.astype(object) if isinstance(y.dtype, pd.CategoricalDtype) else y).value_counts()
    # lazy: dask is an optional dependency (pip install dpopt[dask])
    import dask
    import dask.array as da
    values, counts = da.unique(y, return_counts=True)
    return dask.delayed(lambda v, c: pd.Series(c, index=v))(values, counts)


def encode_partitions(ddf, encoder, at_prediction=False):
    """The Dask DataFrame of the encoded features, partition by partition, columns matched
    by name (a training column missing from ``ddf`` is refused now, from its metadata).
    ``at_prediction``: each partition warns, when computed, of missing cells the model has
    no indicator for, as in memory (never on the training data)."""
    encoder.transform(ddf._meta)  # the schema's check of the columns (no row read)
    names = list(encoder.get_feature_names_out())
    meta = pd.DataFrame({name: pd.Series(dtype=float) for name in names})
    return ddf.map_partitions(_encode_partition, encoder, names, at_prediction, meta=meta)


def chunked_design(X, table, names, width):
    """The Dask array of a model's features from chunked ``X`` at prediction. A model fitted
    on a table (``table``, its :class:`TableEncoder`) takes a Dask DataFrame, its columns
    matched by name, and refuses other inputs, as in memory; a model fitted on a frame of
    numbers as an array (``names``: its ``feature_names_in_``) refuses a Dask DataFrame
    whose columns differ from them, as scikit-learn does in memory. Refused unless the
    features are ``width`` columns. Nothing is computed: a frame's array has row chunks of
    unknown length, so no partition is read (nor warns) before the caller computes."""
    if table is not None and table.schema is not None:
        if not is_dask_frame(X):
            raise ValueError(f"X must be a DataFrame with the columns the model was fitted "
                             f"on, {list(table.feature_names_in)}: they are matched by name; "
                             f"got {type(X).__name__}")
        X = encode_partitions(X, table, at_prediction=True)
    elif names is not None and is_dask_frame(X):
        if list(X.columns) != list(names):
            raise ValueError(f"X has the columns {list(X.columns)}; the model was fitted on "
                             f"{list(names)}: the feature names should match, in this order")
        columns = plan_table(X._meta)
        if all(c.kind == "numeric" for c in columns):  # a missing value at 0, as at fit
            X = encode_partitions(X, TableEncoder(TableSchema(columns), names), at_prediction=True)
    # a frame's rows per partition are not known: not computed here (prediction stays lazy)
    X = X.to_dask_array() if is_dask_frame(X) else as_dask_arrays(X, None)[0]
    if X.ndim != 2 or X.shape[1] != width:
        raise ValueError(f"X has shape {X.shape}; the model was fitted on {width} features")
    return X


def set_input_names(est, names, width):
    """``est.feature_names_in_`` and ``est.n_features_in_`` after a chunked fit, as
    scikit-learn sets them in memory: a DataFrame's raw column ``names`` and their number;
    else (``names`` None) no names, an earlier fit's removed, and ``width`` features."""
    vars(est).pop("feature_names_in_", None)
    if names is not None:
        est.feature_names_in_ = np.asarray(names, dtype=object)
    est.n_features_in_ = width if names is None else len(names)


def _encode_partition(part, encoder, names, at_prediction):
    return pd.DataFrame(encoder.transform(part, at_prediction=at_prediction), index=part.index,
                        columns=names)


def dask_table(ddf, y, categories=None):
    """``(features, y, TableEncoder or None, column names)`` of a Dask DataFrame for an
    explicit solver, by the in-memory rule: a frame whose columns are all numeric is
    read as an array (no encoder, its names kept; a missing value imputed at 0 partition by
    partition, as in a table with another column); any other is encoded
    from the public schema only (bool, numeric and declared columns; a missing value imputed
    at 0 / ``<other>``, no indicator), as these solvers release nothing about the columns. A
    column whose categories would have to be read from the data is refused, naming it."""
    ddf, y = split_dask_target(ddf, y)
    names = np.asarray(ddf.columns, dtype=object)
    columns = plan_table(ddf._meta, categories)
    if all(c.kind == "numeric" for c in columns):  # a missing value at 0, as in memory
        return encode_partitions(ddf, TableEncoder(TableSchema(columns), names)), y, None, names
    strings = [c.name for c in columns if c.kind == "string"]
    if strings:
        raise ValueError(f"Dask DataFrame column(s) {strings} hold text whose categories are "
                         f"not declared: an explicit solver takes declared categories only "
                         f"(categories={{{strings[0]!r}: [...]}}); solver='auto' selects them "
                         f"privately")
    encoder = TableEncoder(TableSchema(columns), names)
    return encode_partitions(ddf, encoder), y, encoder, names


def declared_counts_prior(y, classes, n, epsilon, delta, rng, checks=()):
    """The :class:`Prior` of the declared ``classes``' noisy counts on the n labels ``y`` of a
    Dask array (no table): the release :func:`prepare_default` makes with ``count_declared``
    (the same share :func:`declared_label_share`, the same draws), from the labels' counts
    summed over the chunks as :func:`prepare_dask` sums them; ``checks``
    (:func:`~dpopt.preprocessing.labels.label_checks`) run in the same pass."""
    mu, delta_sel, _, _, _ = selection_split(n, None, False, epsilon, delta)
    share_y = declared_label_share(n, mu)
    summed = computed_with_checks([_label_count_task(y)], checks)[0]
    label_counts, records = released_class_counts([summed.get(c, 0) for c in classes],
                                                  mu * math.sqrt(share_y), rng)
    return _prior(mu, delta_sel, share_y, 0.0, records, None, False, label_counts, True, classes,
                  n)
