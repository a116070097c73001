"""Datasets for DP-ERM: synthetic generators, file loaders and named real datasets.

- :mod:`~dpopt.datasets.synthetic`: the papers' synthetic problems (Sparse LASSO /
  square, log1, log2) and imbalanced / heavy-tailed designs.
- :mod:`~dpopt.datasets.loaders`: ``.npz``, LIBSVM and CSV readers.
- :mod:`~dpopt.datasets.registry`: named real datasets (california, electricity,
  mtp, madelon, dorothea, covtype) read from ``$DPOPT_DATA``, a cache or their
  public source, and scikit-learn's bundled demo datasets.
"""

from dpopt.datasets.adult import AdultSplits, load_adult
from dpopt.datasets.loaders import (
    LoadedData,
    load_csv,
    load_file,
    load_libsvm,
    load_npz,
    save_npz,
    to_signed_labels,
)
from dpopt.datasets.registry import (
    BUNDLED_DATASETS,
    Dataset,
    DatasetChecksumError,
    DatasetNotAvailableError,
    content_sha256,
    get_data_home,
    list_datasets,
    load_bundled,
    load_dataset,
)
from dpopt.datasets.synthetic import (
    make_heavy_tailed,
    make_imbalanced,
    make_log1,
    make_log2,
    make_quasi_sparse_logistic,
    make_sparse_lasso,
    make_square,
)

__all__ = [
    # synthetic
    "make_sparse_lasso",
    "make_square",
    "make_quasi_sparse_logistic",
    "make_log1",
    "make_log2",
    "make_imbalanced",
    "make_heavy_tailed",
    # loaders
    "LoadedData",
    "load_npz",
    "save_npz",
    "load_libsvm",
    "load_csv",
    "load_file",
    "to_signed_labels",
    # registry
    "Dataset",
    "DatasetNotAvailableError",
    "DatasetChecksumError",
    "BUNDLED_DATASETS",
    "load_dataset",
    "list_datasets",
    "load_bundled",
    "get_data_home",
    "content_sha256",
    "AdultSplits",
    "load_adult",
]
