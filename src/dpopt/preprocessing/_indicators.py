"""Which columns are 0/1 indicators: one Gaussian release of the counts of other values.

Why. A one-hot encoded table given as an array has many 0/1 columns. The feature bounds'
histogram release (:mod:`dpopt.preprocessing._bounds`) adds noise of standard deviation
sqrt(2 p) / mu to every count, p the number of released columns, so a hundred indicator
columns make the histograms of the few numeric ones ten times noisier than they would be
alone: on an array encoding of Adult (102 of its 108 columns are 0/1) the heavy tail of a
money column is then invisible and the column is clipped to "nonzero or not", while the same
table given as a DataFrame, whose bool and category columns have public [0, 1] bounds
(:mod:`dpopt.preprocessing.table_encoder`), keeps its scale. An indicator column needs no
histogram: its range is [0, 1].

Mechanism. For each column j of X given no public bound (neither side),
c_j = #{i : x_ij not in {0, 1}} is released with N(0, sigma^2) noise, sigma = sqrt(p') / mu
(p' released columns). Replace-one adjacency (n public): replacing one record changes each
c_j by at most 1, so the vector of counts moves by at most sqrt(p') in L2; the release is
the Gaussian mechanism of multiplier
1 / mu, exactly mu-GDP (Dong, Roth & Su 2022), recorded as ``Gaussian(1 / mu, 1)``.

Decision (post-processing, free). Column j is taken as an indicator, with the public range
[0, 1], when its noisy count is at most q n, q the lower level of the bounds' quantiles
(:data:`~dpopt.preprocessing._bounds.DEFAULT_QUANTILES`, 1%): with fewer than q n values
outside {0, 1}, the column's (q, 1 - q) quantiles are 0 or 1, so [0, 1] is the range the
quantile bounds aim at. Either error only costs what the library did before the test: an
indicator taken as numeric is located by the histograms as every column was; a numeric column
with few values outside {0, 1} taken as an indicator is clipped to [0, 1], which the
histograms' zero-inflated fallback does to such columns too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from dpopt.data.rows import rows_of
from dpopt.kernels import binning
from dpopt.preprocessing._bounds import DEFAULT_QUANTILES, check_mu
from dpopt.privacy.accounting import Gaussian
from dpopt.privacy.mechanisms import gaussian_noise

__all__ = ["IndicatorTest", "other_value_counts", "private_indicators"]


@dataclass(frozen=True)
class IndicatorTest:
    """The release and its decision: ``columns`` tested, their ``noisy`` counts of values
    outside {0, 1} (standard deviation ``sigma``), ``indicator`` (a bool per tested
    column), the ``threshold`` q n and the accounted ``mechanisms``."""

    columns: np.ndarray
    noisy: np.ndarray
    sigma: float
    threshold: float
    indicator: np.ndarray
    mechanisms: list = field(default_factory=list)

    @property
    def indicator_columns(self) -> np.ndarray:
        return self.columns[self.indicator]


def other_value_counts(X, columns) -> np.ndarray:
    """c_j = #{i : x_ij not in {0, 1}} for the ``columns`` of X (dense, a
    :class:`~dpopt.data.rows.RowSubset`, or sparse: its implicit zeros are in {0, 1})."""
    columns = np.asarray(columns, dtype=np.intp)
    if sp.issparse(X):
        X = sp.csc_matrix(X)[:, columns]
        column_of = np.repeat(np.arange(len(columns)), np.diff(X.indptr))
        other = (X.data != 0) & (X.data != 1)
        return np.bincount(column_of[other], minlength=len(columns)).astype(np.float64)
    source = rows_of(X)  # C-ordered float64 (or a RowSubset of one): one compiled pass
    if source is not None:
        return binning.other_counts(*source, columns).astype(np.float64)
    A = np.asarray(X)[:, columns]
    return np.count_nonzero((A != 0) & (A != 1), axis=0).astype(np.float64)


def private_indicators(counts, n, mu, rng, columns, quantile=DEFAULT_QUANTILES[0]):
    """The release and decision of the module docstring from the exact ``counts`` of the
    ``columns`` (summed over chunks or not: the same numbers) on n records."""
    mu = check_mu(mu)
    columns = np.asarray(columns, dtype=np.intp)
    counts = np.asarray(counts, dtype=np.float64)
    if counts.shape != columns.shape:
        raise ValueError(f"counts must have one entry per column, got {counts.shape} for "
                         f"{len(columns)} columns")
    if math.isinf(mu):  # not private: exact counts, recorded as such
        sigma, noisy, record = 0.0, counts.copy(), Gaussian(0.0, 1)
    else:
        sigma = math.sqrt(len(columns)) / mu
        noisy, record = counts + gaussian_noise(rng, sigma, len(columns)), Gaussian(1.0 / mu, 1)
    threshold = quantile * n
    return IndicatorTest(columns, noisy, sigma, threshold, noisy <= threshold, [record])
