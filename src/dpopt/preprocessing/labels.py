"""The labels of a classifier: declared (public) or chosen by the private partition
selection of :mod:`dpopt.preprocessing.tables` (its module docstring gives the argument:
each label's count moves by one when a record's label changes, L2 sensitivity sqrt(2) under
replace-one; a label held by one record is kept with probability at most delta_sel), and
the per-record map from labels to class indices."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype
from scipy.stats import norm
from sklearn.utils.multiclass import check_classification_targets

from dpopt.preprocessing.tables import Prior, delta_split, select_noisy, selection_threshold
from dpopt.privacy import Gaussian, gdp_mu

__all__ = ["select_labels", "label_prior", "warn_if_none_declared", "label_selection",
           "label_share", "declared_classes",
           "encode_labels",
           "OTHER_LABEL", "LABELS_SELECTED", "LABELS_COUNTED", "SELECTION_SHARE_LABELS", "MAX_LABEL_SHARE",
           "MIN_CLASS_FRACTION", "signed_labels", "labels_present", "category_values", "check_label_targets",
           "check_label_kind", "label_checks", "partition_checks",
           "computed_with_checks"]

#: ``Prior.info["labels"]`` when the labels were chosen by the private selection.
LABELS_SELECTED = "selected privately"
#: ``Prior.info["labels"]`` when the labels were declared and their noisy counts released.
LABELS_COUNTED = "declared; their noisy counts released"
#: Share of mu^2 when only the labels of a classifier are selected.
SELECTION_SHARE_LABELS = 0.02
#: The largest share the labels' selection may take (:func:`label_share`).
MAX_LABEL_SHARE = 0.3
#: A class holding this fraction of the rows is kept with probability >= 99.87%.
MIN_CLASS_FRACTION = 0.05


def select_labels(y, mu, delta, rng, classes=None, counts=None):
    """Labels of y chosen privately: ``(classes, records, delta_sel)``.

    ``classes`` given (or y categorical / bool): the declared labels, nothing spent.
    Otherwise one partition selection of the label counts (sensitivity sqrt(2) under
    replace-one): ``mu`` is its Gaussian-DP budget, ``delta`` the threshold's delta_sel. The
    records are ``[Gaussian(1 / mu, 1)]``; a label held by one record is kept with
    probability at most ``delta``. The classes are returned in ``np.unique`` order, with
    their noisy counts (released with them; ``None`` for declared labels):
    ``(classes, records, delta_sel, noisy_counts)``. ``counts`` ({label: count}, summed over
    chunks) replaces counting ``y``.
    """
    declared = declared_classes(y, classes)
    if declared is not None:
        return declared, [], 0.0, None
    sigma = math.sqrt(2.0) / mu
    tau = selection_threshold(sigma, 1, delta)
    counts = _label_counts(np.asarray(y)) if counts is None else counts
    chosen, noisy = _kept_labels(counts, sigma, tau, rng)
    return chosen, [Gaussian(1.0 / mu, 1)], float(delta), noisy


def _kept_labels(counts, sigma, tau, rng):
    """(kept labels in np.unique order, their noisy counts in the same order)."""
    noisy = select_noisy({str(k): v for k, v in counts.items()}, sigma, tau, rng)
    chosen = np.array(sorted(k for k in counts if str(k) in noisy))
    return chosen, [noisy[str(k)] for k in chosen]


#: The declared labels' released counts must sum above this many standard deviations of
#: their noise for :func:`warn_if_none_declared` to see any record holding one of them.
DECLARED_EVIDENCE = 3.0


def warn_if_none_declared(classes, counts, sigma, n):
    """Warn (UserWarning) when the released noisy ``counts`` of the declared ``classes``
    (noise standard deviation ``sigma`` each) on ``n`` records give no evidence that any
    record holds one of them, and evidence that most do not: their sum is below
    :data:`DECLARED_EVIDENCE` standard deviations of its noise, and that many above it is
    still below n / 2 (where the noise cannot tell none from all, nothing is said: an
    independent review found the first test alone warning on correct declarations at small
    n epsilon). Labels outside ``classes=`` count as the negative class, so a misspelt or
    mis-cased declaration (``["Yes", "No"]`` for "yes"/"no") fits every record as that
    class and predicts it everywhere. Post-processing of released counts and public n:
    nothing is spent (an independent fuzz found such fits silent)."""
    if counts is None or len(counts) == 0 or not sigma > 0:
        return
    total, sd = float(np.sum(counts)), sigma * math.sqrt(len(counts))
    if total < DECLARED_EVIDENCE * sd and total + DECLARED_EVIDENCE * sd < 0.5 * n:
        warnings.warn(f"classes={[str(c) for c in classes]}: no record's label is shown to be "
                      f"one of them (their released noisy counts sum to {round(total)}, noise "
                      f"sd {sd:.0f}); labels outside classes= count as the negative class "
                      f"{str(classes[0])!r}, so the model predicts it for every row: check "
                      f"classes= against y's labels (compared exactly, case included)",
                      UserWarning, stacklevel=5)


def label_prior(counts, n, epsilon, delta, rng):
    """The labels' selection of the default path from exact label counts ({label: count},
    counted in memory or over chunks): ``(classes, Prior)``. Its share is
    :func:`label_share`, its threshold delta all of delta_sel (the labels are the only
    data-driven partition here)."""
    share, mu_y, sigma, tau, delta_sel = label_selection(n, epsilon, delta)
    classes, noisy = _kept_labels(counts, sigma, tau, rng)
    info = {"selection_mu": mu_y, "selection_delta": delta_sel, "label_share": share,
            "column_share": 0.0, "labels": LABELS_SELECTED, "label_counts": noisy,
            "label_sigma": sigma}
    return classes, Prior(share, delta_sel, [Gaussian(1.0 / mu_y, 1)], info)


def label_selection(n, epsilon, delta, share=None):
    """``(share, mu, sigma, tau, delta_sel)`` of the labels' selection when they are the only
    data-driven partition (:func:`label_prior`): its share of mu^2 (:func:`label_share`, or
    ``share``), its mu, the noise sd sqrt(2) / mu of a count, the threshold and its delta."""
    delta_g, delta_sel = delta_split(delta, True)
    mu = gdp_mu(epsilon, delta_g)
    share = label_share(n, mu, delta_sel) if share is None else share
    mu_y = mu * math.sqrt(share)
    sigma = math.sqrt(2.0) / mu_y
    return share, mu_y, sigma, selection_threshold(sigma, 1, delta_sel), delta_sel


def check_label_targets(y):
    """scikit-learn's refusal of continuous numbers as labels (``check_classification_targets``),
    which calls an object array of True/False or numbers (a nullable boolean chunk, a
    categorical y's values: :func:`category_values`) "unknown": such labels are checked as
    bools or numbers."""
    y = np.asarray(y)
    kind = infer_dtype(y.ravel(), skipna=False) if y.dtype == object and y.size else None
    if kind in _TYPED:
        y = y.astype(_TYPED[kind])
    check_classification_targets(y)


#: An object array's labels (:func:`~pandas.api.types.infer_dtype`) as scikit-learn checks them.
_TYPED = {"boolean": bool, "integer": np.int64, "floating": np.float64,
          "mixed-integer-float": np.float64}


def category_values(y):
    """An in-memory categorical ``y`` as an object array of its values; any other y as it is.
    Its categories are no declaration (they are most often made from the labels), and
    neither is their dtype: True/False categories made a bool y, whose labels are public,
    until one record's other value made it text. As objects, its labels are selected
    privately, or read by an explicit solver with its PrivacyLeakWarning, as a text y's."""
    if str(getattr(y, "dtype", None)) == "category" and not hasattr(y, "dask"):
        return np.asarray(y, dtype=object)
    return y


def labels_present(y):
    """y, after a clear ValueError for a missing label (None, NaN: scikit-learn would call
    it 'unknown') or a text label that is not valid Unicode (pandas reads text through
    UTF-8). Reads nothing it releases."""
    try:
        labels = pd.Series(np.asarray(y, dtype=object).ravel())
    except UnicodeEncodeError:
        raise ValueError("y holds a label that is not valid Unicode (a lone surrogate "
                         "character): read the file with its encoding, or replace the "
                         "character") from None
    if pd.isna(labels).any():
        raise ValueError("y has missing labels: drop those rows first (the labels cannot be "
                         "imputed)")
    try:
        pd.factorize(labels)
    except TypeError:  # an unhashable label (a list, a dict, a set) cannot be counted
        raise ValueError("y holds a label that is neither text nor a number (a list, a dict "
                         "or a set): give one label per row") from None
    mixed = infer_dtype(labels, skipna=False) in ("mixed", "mixed-integer")
    if mixed and not labels.map(pd.api.types.is_scalar).all():  # a tuple: hashable, but the
        raise ValueError("y holds a label that is neither text nor a number (a tuple): give "
                         "one label per row")  # releases read a label as one value
    if mixed and labels.map(lambda v: isinstance(v, (str, bytes))).any():  # cannot be sorted
        raise ValueError("y mixes text and numbers as labels: give them one kind (e.g. "
                         "y.astype(str))")
    if str(getattr(y, "dtype", "")) == "boolean":  # pandas' nullable bools, no NA left:
        return np.asarray(y, dtype=bool)  # numpy's, declared [False, True] as they are
    return y


def _checked_block(y, classes):
    """One chunk of labels checked as an in-memory y is (:func:`labels_present`, scikit-learn's
    refusal of continuous numbers, the kind of the declared ``classes``); a chunk fails iff
    the whole would."""
    y = np.asarray(y)
    if y.size:
        check_label_targets(labels_present(y))
        if classes is not None:
            check_label_kind(y, classes)
    return 0


def _is_expression(task):
    """Whether Dask computes ``task`` as an expression (a Dask DataFrame collection) rather
    than from a graph (a Dask array, a delayed object), as :func:`dask.compute` tells them."""
    # lazy: dask is an optional dependency (pip install dpopt[dask])
    from dask.delayed import Delayed
    try:
        from dask._expr import Expr  # lazy: dask is optional (its expressions: 2025 on)
    except ImportError:  # pragma: no cover - a Dask without expressions: one kind only
        return False
    return not isinstance(task, Delayed) and isinstance(getattr(task, "expr", None), Expr)


def label_checks(y, classes=None):
    """The in-memory checks of a classifier's labels on a Dask array or Series ``y`` as lazy
    tasks, one per chunk, to compute in the pass that counts the labels (a check that fails
    stops that pass, before anything is released): a ValueError, as in memory, for a missing
    label, invalid text, continuous numbers or ``classes`` of another kind."""
    # lazy: dask is an optional dependency (pip install dpopt[dask])

    items = None if classes is None or isinstance(classes, (str, bytes)) else list(classes)
    return partition_checks(y, _checked_block, items)


def partition_checks(y, check, *args):
    """``check(part, *args)`` (a ValueError on bad values, else 0) on each partition or
    chunk of a Dask Series or array ``y``, as lazy tasks: on a Series one expression, as
    the frame's counts are (:func:`computed_with_checks`), on an array delayed tasks."""
    if hasattr(y, "map_partitions"):
        return [y.map_partitions(_one_row, check, *args, meta=pd.Series(dtype=np.int64))]
    # lazy: dask is an optional dependency (pip install dpopt[dask])
    import dask

    parts = y.to_delayed()
    parts = parts.ravel().tolist() if isinstance(parts, np.ndarray) else list(parts)
    return [dask.delayed(check)(part, *args) for part in parts]


def _one_row(part, check, *args):
    return pd.Series([check(part, *args)], dtype=np.int64)


def computed_with_checks(tasks, checks):
    """``dask.compute(*tasks)`` in one pass with the labels' ``checks`` (:func:`label_checks`);
    where a task fails on labels the checks refuse (``numpy.unique`` on None and text), the
    checks' own ValueError is raised instead."""
    # lazy: dask is an optional dependency (pip install dpopt[dask])
    import dask

    every = [*tasks, *checks]
    expressions = [_is_expression(t) for t in every]
    try:
        if all(expressions) or not any(expressions):
            return dask.compute(*every)[:len(tasks)]
        # graphs and expressions in one compute warn and materialize the expressions: one
        # compute of each kind (they read different collections: a Dask array y, a frame X)
        done = iter(dask.compute(*[t for t, e in zip(every, expressions) if e]))
        rest = iter(dask.compute(*[t for t, e in zip(every, expressions) if not e]))
        return tuple(next(done) if e else next(rest) for e in expressions)[:len(tasks)]
    except ValueError:
        raise
    except Exception:
        dask.compute(*checks)  # the labels' error, where they have one
        raise


def _label_counts(labels):
    values, counts = np.unique(labels, return_counts=True)
    return dict(zip(values.tolist(), counts.tolist()))


def declared_classes(y, classes=None):
    """The public label set: ``classes=``, or [False, True] for a bool target; None when the
    labels must be selected (a categorical target's too: its categories are most often
    made from the labels, one record's included)."""
    if classes is not None:
        if isinstance(classes, (set, frozenset, dict)):  # the positive class is the second
            raise ValueError(f"classes must be a list or a tuple (their order names the "
                             f"positive class), got a {type(classes).__name__}")
        items = [] if isinstance(classes, (str, bytes)) else list(classes)
        if any(np.ndim(c) != 0 for c in items):  # (a 2-d array was NumPy's truth-value error)
            raise ValueError(f"classes must be a flat list of labels, got {classes!r}")
        text = [isinstance(c, (str, bytes)) for c in items]
        if any(c is None or c != c for c in items) or (any(text) and not all(text)):
            raise ValueError(f"classes must be labels of one kind (all text or all numbers), "
                             f"none missing, got {classes!r}")
        out = np.asarray(items)
        if out.ndim != 1 or out.size < 2 or np.unique(out).size != out.size:
            raise ValueError(f"classes must list at least 2 distinct labels, each once, got {classes!r}")
        check_label_kind(y, items)
        return out
    dtype = getattr(y, "dtype", None)  # a categorical y's categories may be data: selected
    if dtype is not None and (np.dtype(dtype).kind == "b" if isinstance(dtype, np.dtype)
                              else str(dtype) == "boolean"):
        return np.array([False, True])
    return None


def _held_kind(y):
    """"text", "numbers" or None (unknown, mixed): the kind of labels y holds, from its dtype,
    or from its values when it holds Python objects in memory (a chunked y's are read chunk
    by chunk: :func:`label_checks`)."""
    dtype = getattr(y, "dtype", None)
    kind = getattr(dtype, "kind", None)
    if kind is not None and kind in "iufb":
        return "numbers"
    if kind is not None and kind in "US" or str(dtype) == "string":
        return "text"
    if str(dtype) == "category":
        return _held_kind(np.asarray(y.cat.categories if hasattr(y, "cat") else y.categories))
    if hasattr(y, "dask") or not hasattr(y, "__len__") or not len(y):
        return None
    return _VALUE_KINDS.get(infer_dtype(np.asarray(y, dtype=object).ravel(), skipna=False))


#: :func:`pandas.api.types.infer_dtype` of an object y's values, as :func:`_held_kind` reads it.
_VALUE_KINDS = {"string": "text", "bytes": "text", "integer": "numbers", "floating": "numbers",
                "mixed-integer-float": "numbers", "boolean": "numbers", "complex": "numbers"}


def check_label_kind(y, classes):
    """A ValueError naming ``classes`` when they are text and y holds numbers, or the other
    way round: ``classes_`` and ``predict`` would not be y's kind, and no label would match.
    Reads the labels' type only."""
    text = [isinstance(c, (str, bytes)) for c in classes]
    held = _held_kind(y)
    if held == "numbers" and all(text) or held == "text" and not any(text):
        raise ValueError(f"classes {list(classes)!r} are {'text' if all(text) else 'numbers'} "
                         f"but y holds {held}: classes_ and predict would not be y's kind; "
                         f"declare its labels")


OTHER_LABEL = -1  # the class index of a label outside the classes (unselected, undeclared)


def signed_labels(index):
    """A binary model's targets from label indices (:func:`encode_labels`): +1 for
    ``classes[1]``, -1 for ``classes[0]``, 0 for a label outside both (:data:`OTHER_LABEL`:
    neither class, it pulls the model neither way)."""
    index = np.asarray(index)
    return np.where(index == OTHER_LABEL, 0.0, np.where(index == 1, 1.0, -1.0))


def encode_labels(y, classes):
    """Index of each label in ``classes``, :data:`OTHER_LABEL` outside them (per record: n is
    unchanged; a negative of every one-vs-rest model, wrong for every candidate of the
    held-out choice). Numbers compare as numbers (3 == 3.0), anything else by its text."""
    y, classes = np.asarray(y), np.asarray(classes)
    index = np.full(len(y), OTHER_LABEL, dtype=np.int64)
    if y.dtype.kind in "iufb" and classes.dtype.kind in "iufb":
        yv = y.astype(np.float64)
        for i, c in enumerate(classes.astype(np.float64)):
            index[yv == c] = i
        return index
    text = y if y.dtype.kind == "U" else np.array([str(v) for v in y], dtype=object)
    for i, c in enumerate(classes):
        index[text == str(c)] = i
    return index



def label_share(n, mu, delta_y):
    """The share of mu^2 of the labels' selection, from public (n, mu, delta_y) only.

    The smallest share whose threshold keeps a class holding ``MIN_CLASS_FRACTION`` of the
    n rows with probability >= Phi(3) (99.87%): tau + 3 sigma <= f n with
    tau = 1 + sigma z, z = Phi^-1(1 - delta_y), sigma = sqrt(2) / (mu sqrt(share)); kept
    within [``SELECTION_SHARE_LABELS``, ``MAX_LABEL_SHARE``].
    """
    z = float(norm.isf(delta_y))
    room = max(MIN_CLASS_FRACTION * n - 1.0, 1e-9)
    need = (math.sqrt(2.0) * (z + 3.0) / (mu * room)) ** 2
    return min(MAX_LABEL_SHARE, max(SELECTION_SHARE_LABELS, need))

