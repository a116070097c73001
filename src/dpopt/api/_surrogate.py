"""Public stand-in data for :class:`dpopt.api.tuning.PrivateHyperparameterSearch`'s probe:
each candidate is fitted once on data of the private data's shape and schema, never its
values, to learn the mechanisms its real fits will run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from dpopt.preprocessing._plan import column_kind
from dpopt.preprocessing.tables import is_frame


def surrogate(X, n, rng):
    """Public stand-in data of X's shape and schema: standard normal numbers (sparse:
    about 10 non-zeros a row, every column touched), and for a DataFrame each column of
    its dtype (numbers, booleans alternating, a text or categorical column cycling through
    placeholders, as plain text; others refused, as at fit)."""
    if is_frame(X):
        cols = {}
        for name, dtype in X.dtypes.items():
            kind, _ = column_kind(name, dtype, {})  # dates, durations: refused, unread
            if kind == "bool":
                values = pd.array(np.arange(n) % 2 == 0, dtype=dtype)
            elif kind == "numeric":
                draws = rng.standard_normal(n)
                values = (pd.array(np.rint(draws * 3).astype(np.int64), dtype=dtype)
                          if pd.api.types.is_integer_dtype(dtype) else
                          pd.array(draws, dtype=dtype))
            else:  # text: placeholders (an Arrow dictionary or category column's as plain text)
                values = pd.array([f"level{i % 3}" for i in range(n)],
                                  dtype=dtype if pd.api.types.is_string_dtype(dtype) else object)
            cols[name] = values
        return pd.DataFrame(cols, columns=X.columns)
    p = X.shape[1]
    if sp.issparse(X) and n * p > 2_000_000:
        Xs = sp.random(n, p, density=min(1.0, 10.0 / p), format="csr", random_state=rng,
                       data_rvs=rng.standard_normal)
        return Xs + sp.csr_matrix((np.ones(p), (np.arange(p) % n, np.arange(p))), shape=(n, p))
    return rng.standard_normal((n, p))
