"""Named real datasets used by the DP-ERM papers: local copies first, download second.

:func:`load_dataset` looks for ``<name>.npz`` in this order:

1. the directory named by the environment variable ``DPOPT_DATA`` (an offline
   copy in the layout of the shared data directory, see ``MANIFEST.md``);
2. the cache directory: ``data_home`` if given, else ``$DPOPT_CACHE``, else
   ``~/.cache/dpopt``;
3. the public source (only with ``download=True``): the data are downloaded,
   converted to the same ``.npz`` layout, checked and saved in the cache.

If none of these works a :class:`DatasetNotAvailableError` (a ``ValueError``)
says where it looked. Sources and conversions:

============ ============== ================ ==============================================
name         task           shape            public source
============ ============== ================ ==============================================
california   regression     20640 x 8        ``sklearn.datasets.fetch_california_housing``
electricity  classification 45312 x 8        OpenML 151 (``fetch_openml(data_id=151)``)
mtp          regression     4450 x 202       OpenML 405
madelon      classification 2600 x 500       OpenML 1485 (UCI train + validation splits)
dorothea     classification 1150 x 100000    OpenML 4137 (UCI train + validation), sparse
covtype      classification 581012 x 54      ``sklearn.datasets.fetch_covtype``
adult        classification 32561 x 108      UCI Adult ``adult.data`` (train split; numeric
                                             columns raw + one-hot categoricals, see
                                             :func:`dpopt.datasets.load_adult` for both
                                             official splits)
============ ============== ================ ==============================================

Classification labels are float64 in {-1.0, +1.0}. Integrity checks (skipped
with ``verify=False``):

- ``california.npz`` and ``electricity.npz`` read from ``DPOPT_DATA`` must have
  the sha256 listed in ``MANIFEST.md``; a re-saved copy with the same arrays
  is also accepted (the sha256 of the arrays is checked next).
- The arrays of california and electricity, wherever they come from
  (``DPOPT_DATA``, cache or a fresh download), must have the sha256 of the
  MANIFEST copies (:func:`content_sha256`).
- For the other datasets no fixed checksum is recorded (the raw downloads are
  checksummed by scikit-learn: sha256 for the california and covtype archives,
  OpenML's md5 for OpenML files). When a download is cached, the sha256 of its
  arrays is written next to it (``<name>.sha256``) and checked on later reads.
- The shape must be the registered one.

Raw downloads are kept by scikit-learn under ``<cache>/raw`` (safe to delete once
``<name>.npz`` exists). If the cache cannot be written, the downloaded data are
still returned, with a ``UserWarning``.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp

from dpopt.datasets._store import (  # noqa: F401 (re-exported: public names of this module)
    ENV_CACHE,
    ENV_DATA,
    DatasetChecksumError,
    DatasetNotAvailableError,
    _env_data_dir,
    _file_sha256,
    get_data_home,
)
from dpopt.datasets.adult import load_adult
from dpopt.datasets.loaders import load_npz, save_npz, to_signed_labels

__all__ = [
    "Dataset",
    "DatasetNotAvailableError",
    "DatasetChecksumError",
    "BUNDLED_DATASETS",
    "load_dataset",
    "list_datasets",
    "load_bundled",
    "get_data_home",
    "content_sha256",
]

@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded dataset: the arrays plus where they came from.

    ``X`` is a float64 array (a CSR matrix for sparse data such as dorothea),
    ``y`` a float64 vector (in {-1.0, +1.0} when ``task == "classification"``),
    ``source`` says where the arrays were read from, ``description`` what they
    are and whom to cite.
    """

    X: np.ndarray | sp.csr_matrix
    y: np.ndarray
    name: str
    feature_names: tuple[str, ...] | None
    task: str
    source: str
    description: str

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.X.shape)

    def __repr__(self):
        return (f"Dataset(name={self.name!r}, task={self.task!r}, shape={self.shape}, "
                f"source={self.source!r})")


# --------------------------------------------------------------------------- downloads
# Each fetcher returns (X, y, feature_names) already converted: float64 X, float64 y,
# labels in {-1, +1}. They are the only functions that touch the network.


def _openml(data_id, raw_dir):
    # lazy: the light `dpopt datasets` does not load scikit-learn
    from sklearn.datasets import fetch_openml

    # liac-arff keeps pandas optional and reads both dense and sparse ARFF files.
    return fetch_openml(data_id=data_id, data_home=str(raw_dir), as_frame=False,
                        parser="liac-arff")


def _numeric_features(bunch):
    """Dense float64 X; nominal features whose categories are numbers get those numbers.

    With ``as_frame=False`` scikit-learn encodes a nominal ARFF feature by the
    index of its category (electricity's ``day`` {1..7} becomes 0..6); this maps
    the index back to the category's numeric value.
    """
    X = np.array(bunch.data, dtype=np.float64)
    for name, cats in (bunch.categories or {}).items():
        j = list(bunch.feature_names).index(name)
        try:
            values = np.array([float(c) for c in cats])
        except ValueError:  # the chained error would quote a category
            raise ValueError(f"nominal feature {name!r} has non-numeric categories") from None
        codes = X[:, j]
        if not np.all(np.isfinite(codes)):
            raise ValueError(f"nominal feature {name!r} has missing values")
        X[:, j] = values[codes.astype(np.intp)]
    return X


def _binary(target, positive, negative, source):
    found = set(np.unique(np.asarray(target)).tolist())
    if found != {positive, negative}:  # how many, not which: labels are records' values
        raise ValueError(f"{source}: expected the labels {{{positive!r}, {negative!r}}}, "
                         f"found {len(found)} distinct label(s), not these two")
    return to_signed_labels(np.asarray(target), positive)


def _fetch_california(raw_dir):
    # lazy: the light `dpopt datasets` does not load scikit-learn
    from sklearn.datasets import fetch_california_housing

    b = fetch_california_housing(data_home=str(raw_dir), download_if_missing=True)
    return np.ascontiguousarray(b.data), np.asarray(b.target, dtype=np.float64), b.feature_names


def _fetch_electricity(raw_dir):
    b = _openml(151, raw_dir)
    return _numeric_features(b), _binary(b.target, "UP", "DOWN", "OpenML 151"), b.feature_names


def _fetch_mtp(raw_dir):
    b = _openml(405, raw_dir)
    return _numeric_features(b), np.asarray(b.target, dtype=np.float64), b.feature_names


def _fetch_madelon(raw_dir):
    b = _openml(1485, raw_dir)
    return _numeric_features(b), _binary(b.target, "2", "1", "OpenML 1485"), b.feature_names


def _fetch_dorothea(raw_dir):
    # lazy: listing datasets (the light `dpopt datasets`) does not load scipy
    import scipy.sparse as sp

    b = _openml(4137, raw_dir)
    X = sp.csr_matrix(b.data, dtype=np.float64)
    return X, _binary(b.target, "1", "-1", "OpenML 4137"), b.feature_names


def _fetch_covtype(raw_dir):
    # lazy: the light `dpopt datasets` does not load scikit-learn
    from sklearn.datasets import fetch_covtype

    b = fetch_covtype(data_home=str(raw_dir), download_if_missing=True)
    target = np.asarray(b.target)
    if not set(np.unique(target).tolist()) <= set(range(1, 8)):
        raise ValueError("covtype: expected cover types 1..7")
    y = np.where(target == 2, 1.0, -1.0)
    return np.ascontiguousarray(b.data, dtype=np.float64), y, getattr(b, "feature_names", None)


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class _Spec:
    name: str
    task: str
    shape: tuple[int, int]
    origin: str
    description: str
    fetch: Callable
    npz_sha256: str | None = None  # sha256 of the MANIFEST.md file
    content_sha256: str | None = None  # content_sha256 of its arrays


_SPECS = (
    _Spec("california", "regression", (20640, 8),
          "scikit-learn fetch_california_housing (StatLib cal_housing)",
          "California housing (1990 census block groups): 8 features, target = median "
          "house value in units of $100,000. Cite R. K. Pace and R. Barry, 'Sparse "
          "Spatial Autoregressions', Statistics & Probability Letters 33 (1997).",
          _fetch_california,
          npz_sha256="9be07e4f20c54ff2b92e53414d2d87f48b1bed7b01327e1b3e746c5643e2aaad",
          content_sha256="7be479cd686338493de772ea236ee00faa24199671db39736e95ad43c59ebc46"),
    _Spec("electricity", "classification", (45312, 8),
          "OpenML 151 (https://www.openml.org/d/151), MOA elecNormNew",
          "Electricity (Elec2, normalized by A. Bifet): 8 features (day as 1..7), label "
          "UP = +1 / DOWN = -1, chronological order. Cite M. Harries, 'Splice-2 "
          "comparative evaluation: Electricity pricing', UNSW tech. report, 1999.",
          _fetch_electricity,
          npz_sha256="44760fe94b8b7824e582b71c77feb65a8ec5ae0c23bcb3ea369147cfeb58d965",
          content_sha256="ddf40886bc7dd337562712c91978a5f30bd11f422f868c10470b5eed92b8c3aa"),
    _Spec("mtp", "regression", (4450, 202),
          "OpenML 405 (https://www.openml.org/d/405)",
          "mtp: 202 numeric molecular descriptors, target oz203 (OpenML default target); "
          "used by the DP-GCD paper (least squares + L2).",
          _fetch_mtp),
    _Spec("madelon", "classification", (2600, 500),
          "OpenML 1485 (https://www.openml.org/d/1485)",
          "Madelon (NIPS 2003 feature selection challenge; UCI train + validation splits, "
          "2600 rows): 500 features, class '2' = +1, '1' = -1. The DP-GCD paper lists 501 "
          "features (probably with an intercept column). Cite I. Guyon et al., NIPS 2004.",
          _fetch_madelon),
    _Spec("dorothea", "classification", (1150, 100000),
          "OpenML 4137 (https://www.openml.org/d/4137)",
          "Dorothea (NIPS 2003 feature selection challenge; UCI train + validation splits, "
          "1150 rows): 100000 sparse binary features (CSR), label 1 = +1, -1 = -1. The "
          "DP-GCD paper uses 800 x 88119, likely the train split without all-zero "
          "columns. Cite I. Guyon et al., NIPS 2004.",
          _fetch_dorothea),
    _Spec("covtype", "classification", (581012, 54),
          "scikit-learn fetch_covtype (UCI Covertype)",
          "Forest cover type: 54 features (10 numeric, 44 binary), binarized as class 2 "
          "(lodgepole pine) = +1 vs the other six classes = -1, like LIBSVM's "
          "covtype.binary. The DP-ERM-revisited paper trains on 200,000 of the rows and "
          "does not say how it binarized. Cite J. A. Blackard and D. J. Dean (1999).",
          _fetch_covtype),
)
_REGISTRY = {s.name: s for s in _SPECS}


def _get_spec(name):
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ValueError(f"unknown dataset name {name!r}; known names: "
                         f"{sorted([*_REGISTRY, 'adult'])}")
    return _REGISTRY[name]


def _download(spec, raw_dir):
    """Fetch ``spec`` from its public source (the only network access; tests replace it)."""
    return spec.fetch(raw_dir)


# --------------------------------------------------------------------------- locations


def _find_local(name, env_dir, cache):
    """(path, where) of the first local copy of ``name``, or (None, None)."""
    if env_dir is not None and (env_dir / f"{name}.npz").is_file():
        return env_dir / f"{name}.npz", ENV_DATA
    if (cache / f"{name}.npz").is_file():
        return cache / f"{name}.npz", "cache"
    return None, None


def _not_available(spec, env_dir, cache, reason):
    if env_dir is None:
        env = f"{ENV_DATA} is not set"
    elif not env_dir.is_dir():
        env = f"{ENV_DATA}={str(env_dir)!r} is not a directory"
    else:
        env = f"{ENV_DATA}={str(env_dir)!r} has no {spec.name}.npz"
    return DatasetNotAvailableError(
        f"dataset {spec.name!r} is not available: {reason}. Looked for {spec.name}.npz in the "
        f"directory named by the environment variable {ENV_DATA} ({env}) and in the cache "
        f"directory {str(cache)!r} (data_home, ${ENV_CACHE} or ~/.cache/dpopt). Put "
        f"{spec.name}.npz (keys X, y, feature_names) in one of them, or load it with "
        f"download=True and internet access (source: {spec.origin}).")


# --------------------------------------------------------------------------- checks


def content_sha256(X, y) -> str:
    """sha256 of the arrays (not of a file), invariant to how they were stored.

    Hashes the layout ("dense" or canonical CSR), the shape, X as float64
    C-ordered bytes (or CSR indptr/indices as int64 and data as float64, after
    sorting indices and dropping explicit zeros) and y as float64 bytes.
    """
    # lazy: listing datasets (the light `dpopt datasets`) does not load scipy
    import scipy.sparse as sp

    h = hashlib.sha256()
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float64, copy=True)
        X.sum_duplicates()
        X.eliminate_zeros()
        X.sort_indices()
        h.update(b"csr" + np.asarray(X.shape, dtype=np.int64).tobytes())
        for part, dtype in ((X.indptr, np.int64), (X.indices, np.int64), (X.data, np.float64)):
            h.update(np.ascontiguousarray(part, dtype=dtype).tobytes())
    else:
        X = np.asarray(X)
        h.update(b"dense" + np.asarray(X.shape, dtype=np.int64).tobytes())
        h.update(np.ascontiguousarray(X, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(y, dtype=np.float64).tobytes())
    return h.hexdigest()


def _sidecar(path):
    return path.with_suffix(".sha256")


def _expected_content(spec, path):
    if spec.content_sha256 is not None:
        return spec.content_sha256
    sidecar = _sidecar(path)
    return sidecar.read_text().strip() if sidecar.is_file() else None


def _verify_content(spec, X, y, path, where):
    """Raise :class:`DatasetChecksumError` unless the arrays are the registered data."""
    if X.shape != spec.shape:
        raise DatasetChecksumError(
            f"{path}: dataset {spec.name!r} should have shape {spec.shape}, got {X.shape}; "
            f"pass verify=False to load it anyway")
    if where == ENV_DATA and spec.npz_sha256 is not None:
        if _file_sha256(path) == spec.npz_sha256:
            return
    expected = _expected_content(spec, path) if where != "download" else spec.content_sha256
    if expected is None:
        return
    actual = content_sha256(X, y)
    if actual != expected:
        extra = (f" The file's sha256 is not the MANIFEST's {spec.npz_sha256} either."
                 if where == ENV_DATA and spec.npz_sha256 else "")
        raise DatasetChecksumError(
            f"{path}: the arrays of dataset {spec.name!r} (from {where}) have sha256 "
            f"{actual}, expected {expected}.{extra} The data are not the registered "
            f"{spec.name} data: replace the file, or pass verify=False to load it anyway.")


def _check_labels(spec, y, origin):
    if spec.task != "classification":
        return y
    classes = np.unique(y)
    if not np.all(np.isin(classes, (-1.0, 1.0))):
        other = int(np.count_nonzero(~np.isin(classes, (-1.0, 1.0))))
        raise ValueError(f"{origin}: labels of the classification dataset {spec.name!r} "
                         f"must be -1/+1, found {other} other distinct value(s)")
    return y


def _dataset(spec, X, y, names, source):
    y = _check_labels(spec, np.asarray(y, dtype=np.float64), source)
    names = tuple(str(s) for s in names) if names is not None else None
    return Dataset(X=X, y=y, name=spec.name, feature_names=names, task=spec.task,
                   source=source, description=spec.description)


def _read_local(spec, path, where, verify):
    loaded = load_npz(path)
    if verify:
        _verify_content(spec, loaded.X, loaded.y, path, where)
    return _dataset(spec, loaded.X, loaded.y, loaded.feature_names, f"{where}: {path}")


def _save_cache(ds, cache, digest):
    """Write ``<name>.npz`` and ``<name>.sha256`` atomically; warn if that fails."""
    target = cache / f"{ds.name}.npz"
    tmp = cache / f"{ds.name}.tmp-{os.getpid()}.npz"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        save_npz(tmp, ds.X, ds.y, ds.feature_names)
        os.replace(tmp, target)
        _sidecar(target).write_text(digest + "\n")
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        warnings.warn(f"could not save dataset {ds.name!r} in the cache {str(cache)!r}: {exc}",
                      UserWarning, stacklevel=3)
        return None
    return target


def _check_finite(X, y, origin):
    # lazy: listing datasets (the light `dpopt datasets`) does not load scipy
    import scipy.sparse as sp

    values = X.data if sp.issparse(X) else np.asarray(X)
    if not (np.all(np.isfinite(values)) and np.all(np.isfinite(np.asarray(y, dtype=float)))):
        raise ValueError(f"{origin}: the downloaded data contain NaN or inf values")


def _check_bool(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a bool, got {value!r}")
    return bool(value)


# --------------------------------------------------------------------------- public API


def load_dataset(name, *, data_home=None, download=True, verify=True) -> Dataset:
    """Load a named real dataset (see the module docstring for names and sources).

    Parameters
    ----------
    name : str
        One of ``california``, ``electricity``, ``mtp``, ``madelon``, ``dorothea``,
        ``covtype`` (:func:`list_datasets`).
    data_home : str or PathLike, optional
        Cache directory (default ``$DPOPT_CACHE`` or ``~/.cache/dpopt``).
    download : bool
        Download from the public source when no local copy exists.
    verify : bool
        Check the registered shape and checksums (see the module docstring). Pass
        False to load a copy that differs on purpose (e.g. a subset).

    Raises
    ------
    ValueError
        Unknown name, or a local file that is not a valid dataset.
    DatasetNotAvailableError
        No local copy and ``download=False`` or the download failed (offline).
    DatasetChecksumError
        The data are not the registered data (and ``verify=True``).
    """
    if name == "adult":
        return _adult_train(data_home, _check_bool(download, "download"),
                            _check_bool(verify, "verify"))
    spec = _get_spec(name)
    download = _check_bool(download, "download")
    verify = _check_bool(verify, "verify")
    cache = get_data_home(data_home)
    env_dir = _env_data_dir()
    path, where = _find_local(spec.name, env_dir, cache)
    if path is not None:
        return _read_local(spec, path, where, verify)
    if not download:
        raise _not_available(spec, env_dir, cache, "no local copy and download=False")
    try:
        X, y, names = _download(spec, cache / "raw")
    except (OSError, http.client.HTTPException) as exc:
        raise _not_available(spec, env_dir, cache, f"the download failed ({exc})") from exc
    _check_finite(X, y, spec.origin)
    ds = _dataset(spec, X, y, names, f"download: {spec.origin}")
    if verify:
        _verify_content(spec, ds.X, ds.y, spec.origin, "download")
    _save_cache(ds, cache, content_sha256(ds.X, ds.y))
    return ds


def list_datasets(data_home=None) -> list[dict]:
    """The registered datasets, with whether a local copy exists (nothing is downloaded).

    Each entry has ``name``, ``task``, ``shape`` (registered), ``available``
    (a ``<name>.npz`` exists in ``$DPOPT_DATA`` or in the cache), ``location``
    (its path or None) and ``origin`` (the public source).
    """
    cache = get_data_home(data_home)
    env_dir = _env_data_dir()
    rows = []
    for spec in _SPECS:
        path, _ = _find_local(spec.name, env_dir, cache)
        rows.append({"name": spec.name, "task": spec.task, "shape": spec.shape,
                     "available": path is not None,
                     "location": str(path) if path is not None else None,
                     "origin": spec.origin})
    adult = [p for p in ([env_dir / "adult.npz"] if env_dir else []) + [cache / "adult.npz"]
             if p.is_file()]
    rows.append({"name": "adult", "task": "classification", "shape": (32561, 108),
                 "available": bool(adult), "location": str(adult[0]) if adult else None,
                 "origin": "UCI Adult (adult.data, adult.test)"})
    return rows


def _adult_train(data_home, download, verify) -> Dataset:
    a = load_adult(data_home=data_home, download=download, verify=verify)
    X, _, names = a.one_hot()
    return Dataset(X=X, y=a.y, name="adult", feature_names=names, task="classification",
                   source=a.source, description="UCI Adult, official training split: 6 numeric "
                   "columns raw and the 8 categorical ones one-hot (categories as schema); "
                   "label >50K = +1. Cite R. Kohavi, KDD 1996.")


# --------------------------------------------------------------------------- bundled

BUNDLED_DATASETS = ("breast_cancer", "diabetes")


def load_bundled(name) -> Dataset:
    """A small dataset shipped with scikit-learn (no download), for demos.

    ``breast_cancer``: Wisconsin diagnostic breast cancer, 569 x 30,
    classification with malignant = +1 and benign = -1 (scikit-learn codes
    malignant as 0). ``diabetes``: 442 x 10 regression, with scikit-learn's
    default scaling (each feature centred and scaled to unit Euclidean norm).
    """
    # lazy: the light `dpopt datasets` does not load scikit-learn
    from sklearn.datasets import load_breast_cancer, load_diabetes

    if not isinstance(name, str) or name not in BUNDLED_DATASETS:
        raise ValueError(f"unknown bundled dataset {name!r}; known: {list(BUNDLED_DATASETS)}")
    if name == "breast_cancer":
        b = load_breast_cancer()
        if str(b.target_names[0]) != "malignant":
            raise ValueError("unexpected class order in scikit-learn's breast_cancer data")
        y = np.where(b.target == 0, 1.0, -1.0)
        task, desc = "classification", ("Wisconsin diagnostic breast cancer (UCI), "
                                        "malignant = +1, benign = -1.")
    else:
        b = load_diabetes()
        y = np.asarray(b.target, dtype=np.float64)
        task, desc = "regression", ("Diabetes progression after one year (Efron et al., "
                                    "2004), scaled features as in scikit-learn.")
    return Dataset(X=np.asarray(b.data, dtype=np.float64), y=y, name=name,
                   feature_names=tuple(str(s) for s in b.feature_names), task=task,
                   source=f"scikit-learn bundled: sklearn.datasets.load_{name}",
                   description=desc)
