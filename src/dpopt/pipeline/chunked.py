"""The default path (``solver="auto"``, :mod:`dpopt.pipeline.default_path`) on chunked data.

:func:`dpopt.pipeline.default_path.fit_default` runs the same budget plan and the same private releases
whether the data is in memory or a :class:`~dpopt.data.chunked.ChunkedProblem`; only the
data-dependent parts change place. Here each of them is a per-chunk task whose results
Dask's tree sum adds (:meth:`ChunkedProblem._reduce <dpopt.data.chunked.ChunkedProblem>`),
and the noise is drawn once, on the client, from the fit's Generator, by the very functions
the in-memory path uses:

=====================  ==========================================  ===========================
step                   per chunk (on the workers)                  released on the client by
=====================  ==========================================  ===========================
indicator test         counts of every feature's values outside    :func:`~dpopt.preprocessing.
                       {0, 1}                                      _indicators.private_indicators`
feature bounds         exact counts of every feature on the        :func:`~dpopt.preprocessing.
                       public signed-log grid (p x bins)           private_bounds_from_counts`
feature means          column sums of the scaled chunk             :func:`~dpopt.preprocessing.
                                                                   _norms.noisy_means`
row-norm bound         counts of the scaled rows' norms on the     :func:`~dpopt.preprocessing._norms.
                       public geometric edges (62 bins)            row_bound_from_counts`
target bounds          exact counts of y on the public grid        :func:`~dpopt.preprocessing.
                                                                   private_bounds_from_counts`
held-out choice        sums of the held-out records' scores, and   :func:`~dpopt.pipeline.
                       how many break their bound (must be 0)      held_out.held_out_totals`
=====================  ==========================================  ===========================

Why the releases are the in-memory ones. The counts are integers: summed over chunks they
are exactly the counts of the whole data, so the noisy histograms, their sensitivity
(sqrt(2 p) and sqrt(2) under replace-one), their records and the bounds read from them are
identical at the same seed. The column sums differ from the in-memory ones by the rounding
of a different order of additions (~1e-16 relative); their sensitivity (sqrt(p), features
in [0, 1]) does not depend on how they are added. The scaling is then applied lazily to
every chunk (``map_blocks`` of the same :class:`~dpopt.preprocessing.feature_maps.Scaling` /
:class:`~dpopt.preprocessing.feature_maps.TargetScaling`, a per-record map), which gives the scaled
:class:`~dpopt.data.chunked.ChunkedProblem` the model mechanism fits distributed.

The mechanism. :func:`dpopt.pipeline.default_path.choose_solver` with ``chunked=True`` keeps the table's
distributed rows (adassp for the squared loss, objective perturbation for the logistic and
Huber losses, with no or an L2 penalty) and sends the rows that lead to dp-cd in memory (L1,
elastic net, the absolute loss, Huber with L1) to dp-gd with :func:`dpopt.pipeline.default_path.rules`: dp-cd
takes one cluster-wide reduction per coordinate, dp-gd one per step. So a chunked auto fit
equals the in-memory auto fit at the same seed (to rounding for adassp and dp-gd, to the
optimiser's tolerance for objective perturbation), except on those rows, where in memory the
mechanism is dp-cd.

Privacy. The same mechanisms are released the same number of times with the same
calibration: the accounting is the single-machine one, unchanged (``params["data"]`` and
the estimators' ``privacy_report`` say so). The workers see the data and send only exact
partial sums to the client, which releases only noised quantities.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from dpopt.data.chunked import ChunkedProblem, _features
from dpopt.preprocessing._bounds import (
    DEFAULT_GRID,
    ZERO_INFLATED_FALLBACK,
    feature_histograms,
    private_bounds_from_counts,
    public_bounds,
)
from dpopt.preprocessing._indicators import other_value_counts
from dpopt.preprocessing._norms import (
    noisy_means,
    noisy_target_mean,
    row_bound_from_counts,
    row_norm_edges,
    row_norms,
)
from dpopt.preprocessing._refine import REFINE_BINS, linear_counts, refined_bounds
from dpopt.preprocessing.far_ends import confirmed_range
from dpopt.privacy import quantile_counts

# ---------------------------------------------------------------------------
# per-chunk work (module-level pure functions: they run on the workers; each returns the
# chunk's (1, width) share of an additive statistic)


def _chunk_feature_counts(xb, yb, *, grid):
    """Exact counts of every feature of the chunk on the public grid, flattened."""
    X = _features(xb)
    X = X.tocsc() if sp.issparse(X) else X  # sparse: the implicit zeros counted, not stored
    return feature_histograms(X, range(X.shape[1]), grid).ravel()[None, :]


def _chunk_other_value_counts(xb, yb, *, columns):
    """The chunk's counts of values outside {0, 1} in each of ``columns``."""
    return other_value_counts(_features(xb), columns)[None, :]


def _chunk_target_counts(xb, yb, *, grid):
    """Exact counts of the chunk's targets on the public grid."""
    return feature_histograms(np.asarray(yb, dtype=np.float64), [0], grid)


def _chunk_scaled_sums(xb, yb, *, scaling):
    """Column sums of the chunk after the (public) scaling."""
    return np.asarray(scaling.transform(_features(xb)).sum(axis=0)).reshape(1, -1)


def _chunk_scaled_feature_counts(xb, yb, *, scaling, columns, grid):
    """Exact counts of the chunk's scaled features ``columns`` on the public grid."""
    Z = scaling.transform(_features(xb))
    return feature_histograms(Z, columns, grid).ravel()[None, :]


def _chunk_row_norm_counts(xb, yb, *, scaling, edges):
    """Counts of the scaled rows' norms of the chunk on the public edges."""
    norms = row_norms(scaling.transform(_features(xb)))
    return quantile_counts(norms, edges).astype(np.float64)[None, :]


def _chunk_target_linear_counts(xb, yb, *, lower, upper, bins):
    """Exact counts of the chunk's clipped targets on the equal bins of [lower, upper]."""
    return linear_counts(np.asarray(yb, dtype=np.float64), lower, upper, bins)[None, :]


def _chunk_target_sum(xb, yb, *, target):
    """Sum of the chunk's targets after the (public) target scaling."""
    scaled = np.clip(target.transform(np.asarray(yb, dtype=np.float64)), -1.0, 1.0)
    return np.array([[np.sum(scaled)]])


def _scale_block(xb, scaling):
    """The scaled chunk (a sparse chunk stays sparse: its scaling has no offset)."""
    return scaling.transform(_features(xb))


# ---------------------------------------------------------------------------
# the adapter


class ChunkedData:
    """The data-dependent steps of :func:`dpopt.pipeline.default_path.fit_default` on a
    :class:`~dpopt.data.chunked.ChunkedProblem` (module docstring); the interface of
    :class:`dpopt.pipeline.default_path.InMemoryData`."""

    chunked = True
    public_target = None  # a public (lower, upper) of the target: see InMemoryData

    def __init__(self, problem):
        self.raw = problem
        self.sparse = problem.is_sparse  # scipy.sparse chunks: no centring, as in memory
        self.shape = (problem.n_samples, problem.n_features)

    @classmethod
    def of(cls, X, y, *, loss, fit_intercept):
        """From a ChunkedProblem (``y`` must be None) or any input it takes (validated, but
        for the magnitude: the raw records are clipped by the scaling, as in memory)."""
        if getattr(X, "is_chunked", False) is True:
            if y is not None:
                raise ValueError("y must be None when X is a ChunkedProblem (it has its target)")
            return cls(X)
        return cls(ChunkedProblem(X, y, loss=loss, fit_intercept=fit_intercept,
                                  check_magnitude=False))

    def feature_bounds(self, mu, rng, bounds=None, grid=DEFAULT_GRID):
        p = self.shape[1]
        counts = self.raw._reduce(_chunk_feature_counts, p * grid.n_bins, grid=grid)
        return private_bounds_from_counts(counts.reshape(p, grid.n_bins), self.shape[0],
                                          mu, rng, bounds=bounds, grid=grid,
                                          fallback=ZERO_INFLATED_FALLBACK)

    def other_value_counts(self, columns):
        return self.raw._reduce(_chunk_other_value_counts, len(columns), columns=columns)

    def scaled_sums(self, scaling):
        return self.raw._reduce(_chunk_scaled_sums, self.shape[1], scaling=scaling)

    def means(self, scaling, mu, rng):
        return noisy_means(self.scaled_sums(scaling), self.shape[0], mu, rng)

    def centred_bounds(self, scaling, columns, mu, rng):
        k = len(columns)
        counts = self.raw._reduce(_chunk_scaled_feature_counts, k * DEFAULT_GRID.n_bins,
                                  scaling=scaling, columns=columns, grid=DEFAULT_GRID)
        return private_bounds_from_counts(counts.reshape(k, DEFAULT_GRID.n_bins), self.shape[0],
                                          mu, rng, quiet=True)

    def row_bound(self, scaling, mu, rng):
        p = self.shape[1]
        edges = row_norm_edges(p)
        counts = self.raw._reduce(_chunk_row_norm_counts, edges.size + 1, scaling=scaling,
                                  edges=edges)
        return row_bound_from_counts(np.rint(counts), p, mu, rng)

    def target_bounds(self, mu, rng):
        if self.public_target is not None:  # nothing released, no pass over the chunks
            return public_bounds(*self.public_target, self.shape[0])
        return private_bounds_from_counts(self._target_counts()[None, :], self.shape[0], mu, rng,
                                          quiet=True)

    def confirmed_target_range(self, noisy, sigma, lower, upper, mu, rng):
        # the counts are a pass over the chunks, made only when an end is far
        return confirmed_range(noisy, sigma, self.shape[0], lower, upper, mu, rng,
                               self._target_counts)

    def _target_counts(self):
        """The exact counts of y on the default grid, summed over the chunks (one pass)."""
        return self.raw._reduce(_chunk_target_counts, DEFAULT_GRID.n_bins, grid=DEFAULT_GRID)

    def refined_target_bounds(self, lower, upper, mu, rng, bins=REFINE_BINS):
        counts = self.raw._reduce(_chunk_target_linear_counts, bins, lower=lower,
                                  upper=upper, bins=bins)
        return refined_bounds(np.ravel(counts), self.shape[0], lower, upper, mu, rng)

    def target_mean(self, target, mu, rng):
        total = self.raw._reduce(_chunk_target_sum, 1, target=target)
        return noisy_target_mean(float(np.sum(total)), self.shape[0], mu, rng)

    def problem(self, scaling, target, relabel=None, **kwargs):
        """The scaled ChunkedProblem: the scalings applied lazily to every chunk (already
        validated: no second pass); ``relabel`` maps the target chunk by chunk."""
        meta = sp.csr_matrix((0, 0)) if self.sparse else np.empty((0, 0))
        X = self.raw.X.map_blocks(_scale_block, scaling, dtype=np.float64, meta=meta)
        y = self.raw.y if target is None else \
            self.raw.y.map_blocks(target.transform, dtype=np.float64)
        if relabel is not None:
            y = y.map_blocks(relabel, dtype=np.float64)
        return ChunkedProblem(X, y, validate=False, retries=self.raw.retries, **kwargs)
