"""UCI Adult (Census Income): the official train and test splits, numeric + categorical.

Kohavi, "Scaling up the accuracy of naive-Bayes classifiers: a decision-tree
hybrid", KDD 1996; Dua & Graff, UCI Machine Learning Repository.

:func:`load_adult` reads ``adult.npz`` (keys ``X_num``, ``X_cat``, ``y``,
``X_num_test``, ``X_cat_test``, ``y_test``, ``num_names``, ``cat_names``; the
layout of the shared data's ``MANIFEST.md``) from ``$DPOPT_DATA`` or the cache,
or downloads ``adult.data`` and ``adult.test`` from the UCI repository, parses
them the same way (fields stripped, the test file's first line and the label's
trailing ``.`` dropped, ``?`` stored as ``""``, ``>50K`` = +1) and caches the
result. :meth:`AdultSplits.one_hot` gives the matrices a practitioner would
build: the 6 numeric columns raw, then one 0/1 column per category of each of
the 8 categorical columns. The categories are taken from the training split
and treated as **public schema** (they are the ones ``adult.names`` lists, plus
the missing-value marker); a test category absent from training gets all zeros.
"""

from __future__ import annotations

import contextlib
import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpopt.datasets._store import (
    DatasetChecksumError,
    DatasetNotAvailableError,
    _env_data_dir,
    _file_sha256,
    get_data_home,
)
from dpopt.datasets._where import is_number

ADULT_SHA256 = "a4fd6e222ca744b83dd74829853eba5d86fac3473efe9ef436c9e9dd5643e041"
ADULT_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/adult/"
NUM_NAMES = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")
CAT_NAMES = ("workclass", "education", "marital-status", "occupation", "relationship", "race",
             "sex", "native-country")
_NUM_COLS = (0, 2, 4, 10, 11, 12)
_CAT_COLS = (1, 3, 5, 6, 7, 8, 9, 13)
_KEYS = ("X_num", "X_cat", "y", "X_num_test", "X_cat_test", "y_test", "num_names", "cat_names")


@dataclass(frozen=True, eq=False)
class AdultSplits:
    """The official splits: numeric (float64) and categorical (str) columns, labels ±1."""

    X_num: np.ndarray
    X_cat: np.ndarray
    y: np.ndarray
    X_num_test: np.ndarray
    X_cat_test: np.ndarray
    y_test: np.ndarray
    num_names: tuple
    cat_names: tuple
    source: str

    def categories(self):
        """Per categorical column, the sorted categories of the training split (schema)."""
        return [np.unique(self.X_cat[:, j]) for j in range(self.X_cat.shape[1])]

    def one_hot(self):
        """(X_train, X_test, feature_names): numeric columns raw, then one-hot columns."""
        cats = self.categories()
        names = list(self.num_names) + [f"{c}={v or '?'}" for c, vs in zip(self.cat_names, cats)
                                        for v in vs]
        return (_encode(self.X_num, self.X_cat, cats), _encode(self.X_num_test, self.X_cat_test,
                                                               cats), tuple(names))


def _encode(X_num, X_cat, cats):
    blocks = [np.asarray(X_num, dtype=np.float64)]
    for j, vs in enumerate(cats):
        blocks.append((X_cat[:, j][:, None] == vs[None, :]).astype(np.float64))
    return np.hstack(blocks)


def _numbers(fields, number):
    bad = next((i for i in _NUM_COLS if not is_number(fields[i])), None)
    if bad is not None:  # checked first: float's error would quote the cell
        raise ValueError(f"adult: line {number}: field {bad + 1} is not a number")
    return [float(fields[i]) for i in _NUM_COLS]


def parse_adult_lines(lines):
    """(X_num, X_cat, y) from the lines of ``adult.data`` or ``adult.test`` (module docstring)."""
    num, cat, lab = [], [], []
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line or line.startswith("|"):
            continue
        f = [s.strip() for s in line.split(",")]
        if len(f) != 15:  # where, not the record: a line is a person's data
            raise ValueError(f"adult: line {number}: expected 15 comma-separated fields, "
                             f"got {len(f)}")
        label = f[14].rstrip(".")
        if label not in (">50K", "<=50K"):
            raise ValueError(f"adult: line {number}: the label (field 15) is neither "
                             f"'>50K' nor '<=50K'")
        num.append(_numbers(f, number))
        cat.append(["" if f[i] == "?" else f[i] for i in _CAT_COLS])
        lab.append(1 if label == ">50K" else -1)
    return (np.array(num, dtype=np.float64).reshape(-1, 6), np.array(cat, dtype="<U26").reshape(
        -1, 8), np.array(lab, dtype=np.int8))


def _download(cache: Path) -> Path:
    parts = {}
    for split, fname in (("train", "adult.data"), ("test", "adult.test")):
        with urllib.request.urlopen(ADULT_URL + fname, timeout=60) as resp:  # noqa: S310
            parts[split] = parse_adult_lines(resp.read().decode("utf-8").splitlines())
    (xn, xc, y), (xnt, xct, yt) = parts["train"], parts["test"]
    cache.mkdir(parents=True, exist_ok=True)
    target, tmp = cache / "adult.npz", cache / f"adult.tmp-{os.getpid()}.npz"
    np.savez_compressed(tmp, X_num=xn, X_cat=xc, y=y, X_num_test=xnt, X_cat_test=xct, y_test=yt,
                        num_names=np.array(NUM_NAMES), cat_names=np.array(CAT_NAMES))
    os.replace(tmp, target)
    return target


def load_adult(*, data_home=None, download=True, verify=True) -> AdultSplits:
    """Load Adult's official splits (module docstring).

    Looks for ``adult.npz`` in ``$DPOPT_DATA``, then the cache (``data_home``,
    ``$DPOPT_CACHE`` or ``~/.cache/dpopt``), then downloads it when ``download``.
    ``verify`` checks the shapes (32561 and 16281 rows) and, for the shared copy,
    the sha256 of ``MANIFEST.md``.
    """
    cache = get_data_home(data_home)
    env_dir = _env_data_dir()
    candidates = [(env_dir / "adult.npz", "DPOPT_DATA")] if env_dir is not None else []
    candidates.append((cache / "adult.npz", "cache"))
    path, where = next(((p, w) for p, w in candidates if p.is_file()), (None, None))
    if path is None:
        if not download:
            raise DatasetNotAvailableError(
                "dataset 'adult' is not available: no adult.npz in $DPOPT_DATA "
                f"({'not set' if env_dir is None else str(env_dir)!r}) or the cache "
                f"{str(cache)!r}, and download=False")
        try:
            path, where = _download(cache), "download"
        except OSError as exc:
            raise DatasetNotAvailableError(
                f"dataset 'adult' is not available: no local adult.npz and the download from "
                f"{ADULT_URL} failed ({exc})") from exc
    with np.load(path, allow_pickle=False) as f:
        missing = [k for k in _KEYS if k not in f]
        if missing:
            raise ValueError(f"{path}: not an Adult file (missing keys {missing})")
        arrays = {k: f[k] for k in _KEYS}
    if verify:
        if arrays["X_num"].shape != (32561, 6) or arrays["X_num_test"].shape != (16281, 6):
            raise DatasetChecksumError(f"{path}: Adult should have 32561 + 16281 rows of 6 numeric "
                                       f"columns, got {arrays['X_num'].shape} and "
                                       f"{arrays['X_num_test'].shape}; pass verify=False")
        if where == "DPOPT_DATA":
            with contextlib.suppress(OSError):
                if _file_sha256(path) != ADULT_SHA256:
                    raise DatasetChecksumError(f"{path}: sha256 differs from MANIFEST.md's "
                                               f"{ADULT_SHA256}; pass verify=False to load it")
    return AdultSplits(
        X_num=arrays["X_num"].astype(np.float64), X_cat=arrays["X_cat"].astype(str),
        y=arrays["y"].astype(np.float64), X_num_test=arrays["X_num_test"].astype(np.float64),
        X_cat_test=arrays["X_cat_test"].astype(str), y_test=arrays["y_test"].astype(np.float64),
        num_names=tuple(str(s) for s in arrays["num_names"]),
        cat_names=tuple(str(s) for s in arrays["cat_names"]), source=f"{where}: {path}")
