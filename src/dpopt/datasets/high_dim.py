"""Generated p >> n classification problems (benchmarks and tests of private feature selection).

Both generators draw everything from one generator (``random_state``) and return labels in
{-1.0, +1.0} with a chosen majority rate, so that the constant predictor is a fixed
reference.

* :func:`make_sparse_text` -- a bag-of-words-like sparse binary matrix: feature j is present
  in a row with a Zipf-distributed rate r_j (a few frequent words, a long tail of rare ones);
  ``n_informative`` mid-frequency features have their rate multiplied by ``lift`` in the
  minority class (a naive-Bayes generative model, as for text classification).
* :func:`make_dense_high_dim` -- dense standard-normal features, a logistic model on
  ``n_informative`` of them with its intercept set so that the majority rate is about
  ``majority``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from dpopt._core.validation import check_positive_int, check_random_state, check_scalar

__all__ = ["make_sparse_text", "make_dense_high_dim"]


def _labels(rng, n, majority):
    """n labels, the minority class (+1) with probability 1 - majority."""
    return np.where(rng.random(n) < 1.0 - majority, 1.0, -1.0)


def make_sparse_text(n_samples=800, n_features=100_000, *, majority=0.9, words_per_row=60.0,
                     n_informative=100, lift=10.0, random_state=None):
    """(X, y): X a CSR matrix of 0/1 entries, y in {-1, +1} with P(y = -1) = ``majority``.

    Choices: background rates r_j proportional to 1 / (j + 10) (Zipf's law), scaled so that
    a row has ``words_per_row`` ones on average; the informative features are drawn among
    the features with base rate between 0.5% and 5% and get rate min(1, lift r_j) in the
    minority class. Entries are drawn independently (duplicates of a position collapse to
    one, which lowers the realised rates by less than r_j / 2).
    """
    n = check_positive_int(n_samples, "n_samples")
    p = check_positive_int(n_features, "n_features")
    check_scalar(majority, "majority", low=0.5, high=1.0, high_open=True)
    check_scalar(words_per_row, "words_per_row", low=0.0, low_open=True)
    check_scalar(lift, "lift", low=0.0, low_open=True)
    k = min(check_positive_int(n_informative, "n_informative"), p)
    rng = check_random_state(random_state)
    y = _labels(rng, n, majority)
    rate = 1.0 / (np.arange(p) + 10.0)
    rate = np.minimum(rate * (words_per_row / rate.sum()), 1.0)
    band = np.flatnonzero((rate >= 0.005) & (rate <= 0.05))
    pool = band if band.size >= k else np.arange(p)
    informative = rng.choice(pool, size=k, replace=False)
    rows_of = [np.flatnonzero(y < 0), np.flatnonzero(y > 0)]
    blocks_r, blocks_c = [], []
    for cls, rows in enumerate(rows_of):
        r = rate.copy()
        if cls == 1:
            r[informative] = np.minimum(1.0, lift * r[informative])
        hits = rng.binomial(rows.size, r)
        blocks_c.append(np.repeat(np.arange(p), hits))
        blocks_r.append(rows[rng.integers(0, max(rows.size, 1), hits.sum())] if rows.size
                        else np.zeros(0, dtype=int))
    r, c = np.concatenate(blocks_r), np.concatenate(blocks_c)
    X = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(n, p))
    X.sum_duplicates()
    X.data[:] = 1.0
    return X, y


def make_dense_high_dim(n_samples=500, n_features=2000, *, majority=0.7, n_informative=10,
                        signal=1.5, random_state=None):
    """(X, y): X ~ N(0, 1) entries, P(y = +1 | x) = sigmoid(b + signal * sum of the first
    ``n_informative`` features / sqrt(n_informative)) with b = logit(1 - majority) (so the
    minority rate is about 1 - majority for a weak signal)."""
    n = check_positive_int(n_samples, "n_samples")
    p = check_positive_int(n_features, "n_features")
    check_scalar(majority, "majority", low=0.5, high=1.0, high_open=True)
    check_scalar(signal, "signal", low=0.0)
    k = min(check_positive_int(n_informative, "n_informative"), p)
    rng = check_random_state(random_state)
    X = rng.standard_normal((n, p))
    b = np.log((1.0 - majority) / majority)
    z = b + signal * X[:, :k].sum(axis=1) / np.sqrt(k)
    y = np.where(rng.random(n) < expit(z), 1.0, -1.0)
    return X, y
