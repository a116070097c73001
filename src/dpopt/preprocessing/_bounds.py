"""Private per-feature bounds from one Gaussian release of noisy histograms.

Mechanism
---------
Every feature ``j`` that needs a private bound gets a histogram of its n
values on the fixed public grid :class:`SignedLogGrid` (no parameter of the
grid depends on the data). All histograms are released at once with
independent ``N(0, sigma^2)`` noise on every count.

Sensitivity (replace-one adjacency: neighbouring datasets have the same n and
differ in one record's value). Replacing a record moves, in each of the
``p`` released histograms, one unit out of one bin and into another (or
nothing if both values fall in the same bin): the released vector of
``p * bins`` counts moves by at most ``sqrt(2 p)`` in L2. With ``sigma =
sqrt(2 p) / mu`` the release is the Gaussian mechanism with noise multiplier
``z = 1 / mu``, i.e. exactly mu-GDP (Dong, Roth, Su 2022), recorded as
``Gaussian(1 / mu, 1)``; it composes with the model's Gaussian mechanisms by
``mu_total^2 = sum_k mu_k^2``. Under add-remove adjacency one histogram bin
per feature moves by one: sensitivity ``sqrt(p)``, so the same record is
also valid (conservative) there. ``n`` is public under replace-one.

Post-processing (free). The bounds are read from the noisy histograms by the
confidence-margin scan :func:`dpopt.privacy.mechanisms.noisy_scan` (shared
with :func:`dpopt.privacy.private_quantile`): the lower bound is the lower
end of the first bin (from the bottom) where the noisy cumulative count
reaches ``q_lo n + c sigma sqrt(j)``, the upper bound the upper end of the
first bin (from the top) where the noisy tail exceeds ``(1 - q_hi) n + c
sigma sqrt(j)``; ``j`` is the number of bins scanned and ``c`` the
``confidence`` (default 4: a scan stops in an empty region with probability
about 6e-4 over the 109 bins of the default grid). A second rule stops the scan
as soon as the bins whose own noisy count exceeds ``t sigma`` (``bin_confidence``
t = 4.5) hold more than the target tail: no growing margin for tails that sit in
a few well-populated bins (false stop at most 3.7e-4 per scan). Both ends are rounded
outwards to bin edges. A feature whose scans never stop or cross, or whose
bounds hold less than half of the records (noisy count), is read again on coarser
grids (2, then 1 bin per decade: :func:`coarsened` sums its released counts, so this is
free): a column spread over both signs and several decades (centred data, |x| from
0.1 to 10) fills many bins of the default grid with few records each, and a coarser bin
holds several of them. Still unresolved after that, it gets [0, 0] and a warning.

Zero-inflated columns (``fallback``). A column of counts or indicators that is zero in
most rows has its 1% and 99% quantiles at 0 whenever fewer than 1% of its values are
nonzero, and its nonzero values are invisible to the scan whenever their counts stay
below the noise margin (about 4.5 sigma per bin): both bounds then land on the exact zero
bin and the column collapses to [0, 0], a constant, i.e. it is dropped. No post-processing
of this release can locate values whose counts are below its noise, so the default path
passes a public ``fallback`` range instead (:data:`ZERO_INFLATED_FALLBACK`, [0, 1]), chosen
by the shape of the release:

* bounds collapsed onto the zero bin (both scans stopped there: the bulk of the column is
  exactly 0, the nonzero values are too few to be placed): ``fallback`` = [0, 1]. It is
  exact for indicators (0/1) and keeps "nonzero or not" for counts (clip at 1): the
  zero-inflated columns of tables are counts and indicators, so the nonnegative side is
  the public default;
* unresolved (the scans found nothing: the values are spread over more bins than the
  noise lets through, and not even their sign is known): the symmetric hull
  [-m, m], m = max(|fallback|) = 1, which keeps values of either sign near the unit scale.

Both are public, so they cost nothing; the features that took one are listed in
``FeatureBounds.fallback`` (the default path warns and reports them by index).
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from dpopt._core.validation import check_positive_int, check_range, check_scalar
from dpopt.data.rows import RowSubset, rows_of
from dpopt.kernels import binning
from dpopt.kernels.binning import all_finite_rows
from dpopt.privacy.accounting import Gaussian
from dpopt.privacy.mechanisms import gaussian_noise, noisy_scan

__all__ = ["SignedLogGrid", "FeatureBounds", "DEFAULT_QUANTILES", "DEFAULT_CONFIDENCE",
           "COARSE_GRID", "DEFAULT_BIN_CONFIDENCE", "bounds_resolvable",
           "ZERO_INFLATED_FALLBACK", "collapsed_to_zero",
           "private_feature_bounds", "private_target_bounds", "release_histograms",
           "release_counts", "feature_histograms", "private_bounds_from_counts", "public_bounds",
           "histogram_bounds", "histogram_quantiles", "coarsened", "coarser_grids"]

#: Default (lower, upper) quantile levels; see docs/preprocessing.md for the reasoning.
DEFAULT_QUANTILES = (0.01, 0.99)
#: Default confidence of the scan (in noise standard deviations of the accumulated count).
DEFAULT_CONFIDENCE = 4.0
#: Default per-bin threshold of the scan's second rule (in noise standard deviations).
DEFAULT_BIN_CONFIDENCE = 4.5
#: Public range of a feature whose bounds collapse onto the zero bin or are unresolved
#: (module docstring, "Zero-inflated columns"): exact for indicators, "nonzero" for counts.
ZERO_INFLATED_FALLBACK = (0.0, 1.0)


@dataclass(frozen=True)
class SignedLogGrid:
    """A public histogram grid for signed values over many orders of magnitude.

    Positive edges ``e_k = 10^(k / bins_per_decade)`` from ``10^min_decade`` to
    ``10^max_decade`` (so 1 and every power of ten are exact edges). Bins, in
    increasing order of value: ``(-inf, -e_K)``, ``[-e_k, -e_{k-1})``, ...,
    ``[-e_0, 0)``, the exact bin ``{0}``, ``(0, e_0]``, ``(e_{k-1}, e_k]``, ...,
    ``(e_K, inf)``. Positive bins are closed on the right and negative bins on
    the left, so a column of 0/1 (or 0/-1) values comes out with bounds exactly
    [0, 1]. Values beyond ``10^max_decade`` in magnitude fall in the overflow
    bins, whose outer end is taken as ``+-10^max_decade``.
    """

    min_decade: int = -4
    max_decade: int = 9
    bins_per_decade: int = 4

    def __post_init__(self):
        for name in ("min_decade", "max_decade"):
            check_scalar(getattr(self, name), name, low=-300, high=300, integer=True)
        if not self.min_decade < self.max_decade:
            raise ValueError(f"need min_decade < max_decade, got {self.min_decade}, "
                             f"{self.max_decade}")
        check_positive_int(self.bins_per_decade, "bins_per_decade")

    @property
    def edges(self) -> np.ndarray:
        """The positive edges e_0 < ... < e_K."""
        b = self.bins_per_decade
        k = np.arange(self.min_decade * b, self.max_decade * b + 1)
        return 10.0 ** (k / b)

    @property
    def n_bins(self) -> int:
        return 2 * (self.edges.size + 1) + 1

    @property
    def zero_bin(self) -> int:
        return self.edges.size + 1

    def bin_index(self, values) -> np.ndarray:
        """The bin of every value (an int array of the same shape)."""
        v = np.asarray(values, dtype=np.float64)
        k = np.searchsorted(self.edges, np.abs(v), side="left")  # number of edges < |v|
        z = self.zero_bin
        return np.where(v > 0, z + 1 + k, np.where(v < 0, z - 1 - k, z))

    def bin_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower end, upper end) of every bin, overflow bins ending at +-10^max_decade."""
        e = self.edges
        inner = np.concatenate([[0.0], e])  # lower end of the positive bins (0, e_0], ...
        outer = np.concatenate([e, [e[-1]]])  # upper end; the overflow bin is clamped
        lower = np.concatenate([-outer[::-1], [0.0], inner])
        upper = np.concatenate([-inner[::-1], [0.0], outer])
        return lower, upper


DEFAULT_GRID = SignedLogGrid()
#: The default grid's decades at one bin each: where n is too small for the default grid
#: (``dpopt.pipeline.scaling.bounds_grid``), a feature's bulk then fills one or two bins
#: holding several times the records, and its range is located within a factor of 10.
COARSE_GRID = SignedLogGrid(DEFAULT_GRID.min_decade, DEFAULT_GRID.max_decade, 1)


@dataclass
class FeatureBounds:
    """Per-feature bounds and what their release cost.

    ``lower``, ``upper``: arrays of length p. ``public``: True where both
    bounds were given (nothing released for that feature). ``mechanisms``:
    the accounted records (``[Gaussian(1 / mu, 1)]``, or ``[]`` when every
    bound was public). ``noise_multiplier`` = 1 / mu, ``sigma`` the noise std
    of every count, ``noisy_counts`` the released histograms of the features
    ``private_index`` (shape (len(private_index), grid.n_bins); a released,
    hence reusable, quantity), ``n_samples`` the public n, ``unresolved`` the
    features the budget could not locate (bounds [0, 0]), ``fallback`` the features that
    got the public ``fallback`` range instead of collapsed or unresolved bounds (all False
    without a ``fallback``).
    """

    lower: np.ndarray
    upper: np.ndarray
    mechanisms: list = field(default_factory=list)
    public: np.ndarray | None = None
    noise_multiplier: float = math.inf
    sigma: float = 0.0
    private_index: np.ndarray | None = None
    noisy_counts: np.ndarray | None = None
    n_samples: int = 0
    grid: SignedLogGrid = DEFAULT_GRID
    unresolved: np.ndarray | None = None
    fallback: np.ndarray | None = None

    @property
    def collapsed(self) -> np.ndarray:
        """Features whose bounds coincide (a constant after clipping)."""
        return self.lower == self.upper


# ---------------------------------------------------------------------------
# validation


def check_matrix(X, name="X"):
    """A float64 2-d dense array or a CSC matrix (CSR/COO converted, never densified); a
    :class:`~dpopt.data.rows.RowSubset` stays one (its rows checked in place)."""
    if isinstance(X, RowSubset):
        if X.shape[0] < 1 or X.shape[1] < 1:
            raise ValueError(f"{name} must be a non-empty 2-d array, got shape {X.shape}")
        if not all_finite_rows(X.base, X.rows):
            raise ValueError(f"{name} contains NaN or infinity")
        return X
    if sp.issparse(X):
        X = sp.csc_matrix(X, dtype=np.float64)
        values = X.data
    else:
        X = np.asarray(X, dtype=np.float64)
        values = X
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"{name} must be a non-empty 2-d array, got shape {X.shape}")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} contains NaN or infinity")
    return X


def check_mu(mu, name="mu"):
    """mu > 0 of Gaussian DP; ``inf`` means no noise (not private)."""
    return check_scalar(mu, name, low=0.0, low_open=True, allow_inf=True)


def check_quantiles(quantiles, name="quantiles"):
    try:
        lo, hi = quantiles
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (lower, upper), got {quantiles!r}") from None
    lo = check_scalar(lo, name, low=0.0, high=1.0, low_open=True, high_open=True)
    hi = check_scalar(hi, name, low=0.0, high=1.0, low_open=True, high_open=True)
    if not lo < hi:
        raise ValueError(f"{name} must satisfy lower < upper, got {quantiles!r}")
    return lo, hi


def check_public_bounds(bounds, n_features, name="bounds"):
    """``None`` or a pair (lower, upper) of scalars or length-p arrays; NaN = unknown.

    Returns two float arrays of length ``n_features`` (NaN where not given).
    """
    nan = np.full(n_features, np.nan)
    if bounds is None:
        return nan, nan.copy()
    try:
        lo, hi = bounds
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be None or a pair (lower, upper), got {bounds!r}") from None
    out = []
    for side, val in (("lower", lo), ("upper", hi)):
        arr = np.array(nan if val is None else val, dtype=np.float64)
        if arr.ndim == 0:
            arr = np.full(n_features, float(arr))
        if arr.shape != (n_features,):
            raise ValueError(f"{name}: the {side} bounds must be a scalar or have length "
                             f"n_features={n_features}, got shape {arr.shape}")
        if np.any(np.isinf(arr)):
            raise ValueError(f"{name}: the {side} bounds must be finite (NaN = estimate)")
        out.append(arr)
    lo, hi = out
    if np.any(lo > hi):
        j = int(np.flatnonzero(lo > hi)[0])
        raise ValueError(f"{name}: lower > upper for feature {j} ({lo[j]} > {hi[j]})")
    return lo, hi


# ---------------------------------------------------------------------------
# the release


def feature_histograms(X, columns, grid=DEFAULT_GRID) -> np.ndarray:
    """Exact counts (not private) of the columns ``columns`` of X on ``grid``,
    shape (len(columns), grid.n_bins), float64. Sparse columns: the implicit zeros are
    counted as ``n - nnz`` without densifying.

    One compiled pass over X (:mod:`dpopt.kernels.binning`): the counts are exactly those
    of ``np.bincount(grid.bin_index(X[:, j]))`` for every column (the bin of a value is
    found from a table of the grid's cells and checked against its edges), only faster."""
    n = X.shape[0]
    columns = np.asarray(columns, dtype=np.int64).reshape(-1)
    edges, table, first, steps = _lookup(grid)
    args = (columns, edges, table, first, grid.zero_bin, steps, grid.n_bins)
    if sp.issparse(X):
        X = X if X.format == "csc" else sp.csc_matrix(X)
        counts = binning.csc_counts(np.asarray(X.data, dtype=np.float64),
                                    X.indptr.astype(np.int64), n, *args)
    else:
        X = X if isinstance(X, RowSubset) else np.asarray(X, dtype=np.float64)
        source = rows_of(X)  # C-ordered (or a RowSubset of such): read row by row
        counts = (binning.counts_by_rows(*source, *args) if source is not None
                  else binning.dense_counts_by_columns(X, *args))
    return counts.astype(np.float64)


def scaled_feature_histograms(X, scaling, columns, grid=DEFAULT_GRID) -> np.ndarray:
    """:func:`feature_histograms` of ``scaling.transform(X)`` for a
    :class:`~dpopt.preprocessing.feature_maps.Scaling`, the same counts, computed without
    storing the transform where the map has a compiled row pass
    (``scaling.compiled_source``: :func:`dpopt.kernels.binning.clip_scale_counts`)."""
    source = scaling.compiled_source(X)
    if source is None:
        return feature_histograms(scaling.transform(X), columns, grid)
    columns = np.asarray(columns, dtype=np.int64).reshape(-1)
    edges, table, first, steps = _lookup(grid)
    return binning.clip_scale_counts(*source, columns, edges, table, first, grid.zero_bin,
                                     steps, grid.n_bins).astype(np.float64)


@functools.lru_cache(maxsize=8)
def _lookup(grid):
    """The kernels' lookup of a (frozen, hashable) grid: :func:`binning.grid_lookup`."""
    return binning.grid_lookup(grid.edges)


def release_histograms(X, columns, mu, rng, grid=DEFAULT_GRID):
    """The Gaussian release (module docstring): noisy counts of ``columns``, sigma
    and the record (:func:`release_counts` of :func:`feature_histograms`)."""
    return release_counts(feature_histograms(X, columns, grid), mu, rng)


def bounds_resolvable(n, p, mu_bounds, grid=DEFAULT_GRID):
    """Whether the bounds' release on ``grid`` can see a feature's bulk, from public (n, p,
    mu): a bin is trusted above ``DEFAULT_BIN_CONFIDENCE`` sigma = sqrt(2p) / mu_bounds, and a
    decade fills about ``grid.bins_per_decade`` bins of n / bins_per_decade records each.
    Below, every feature would collapse (:func:`dpopt.pipeline.scaling.bounds_grid`)."""
    return n * mu_bounds >= resolvable_n_mu(p, grid)


def resolvable_n_mu(p, grid=DEFAULT_GRID):
    """The least n mu for :func:`bounds_resolvable` (about 25.5 for one feature, default grid)."""
    return grid.bins_per_decade * DEFAULT_BIN_CONFIDENCE * math.sqrt(2.0 * p)


def release_counts(counts, mu, rng):
    """The Gaussian release of exact histograms ``counts`` (one row per feature, however
    they were counted: in memory, or summed over the chunks of a Dask array): noisy
    counts, sigma and the record. ``sigma = sqrt(2 p) / mu`` with p = len(counts), the
    replace-one sensitivity of p histograms (module docstring); mu = inf adds no noise and
    records ``Gaussian(0)`` (not private)."""
    p = len(counts)
    if math.isinf(mu):
        return counts, 0.0, Gaussian(0.0, 1)
    sigma = math.sqrt(2.0 * p) / mu
    return counts + gaussian_noise(rng, sigma, counts.shape), sigma, Gaussian(1.0 / mu, 1)


def histogram_bounds(noisy, sigma, n, quantiles, confidence=DEFAULT_CONFIDENCE, grid=DEFAULT_GRID,
                     bin_confidence=DEFAULT_BIN_CONFIDENCE):
    """(lower, upper, unresolved) read from noisy histograms (module docstring).

    A feature is *unresolved* when a scan never stops, the two scans cross (the
    lower stop above the upper one), or the bounds hold less than half of the
    records (noisy count): the noise is then comparable to n, a scan can run
    through the data and stop on noise beyond it or on one populated bin at the
    far side, and neither end can be trusted. Unresolved features are read again on
    :func:`coarser_grids` (post-processing of the same counts); those still unresolved
    get bounds [0, 0] (dropped)."""
    noisy = np.atleast_2d(np.asarray(noisy, dtype=np.float64))
    lower, upper, unresolved = _scan_bounds(noisy, sigma, n, quantiles, confidence,
                                            grid.bin_ends(), bin_confidence)
    for coarse in coarser_grids(grid):
        rows = np.flatnonzero(unresolved)
        if rows.size == 0:
            break
        counts, s_c = coarsened(noisy[rows], sigma, grid, coarse)
        lo, hi, still = _scan_bounds(counts, s_c, n, quantiles, confidence, coarse.bin_ends(),
                                     bin_confidence, inside_margin=confidence)
        done = rows[~still]
        lower[done], upper[done], unresolved[done] = lo[~still], hi[~still], False
    return np.where(unresolved, 0.0, lower), np.where(unresolved, 0.0, upper), unresolved


def _scan_bounds(noisy, sigma, n, quantiles, confidence, ends, bin_confidence,
                 inside_margin=0.0):
    """The two scans of :func:`histogram_bounds` on one grid (no coarser reading), whose
    bins end at ``ends`` = (lower ends, upper ends).
    ``inside_margin``: the noisy count inside the bounds must exceed n/2 by that many
    standard deviations of its noise (the coarser readings ask ``confidence``: a second
    look at the same counts must not accept bounds that hold half of n by noise alone)."""
    lo_q, hi_q = quantiles
    lo_end, hi_end = ends
    b_lo = noisy_scan(noisy, lo_q * n, sigma, confidence, from_top=False,
                      bin_confidence=bin_confidence)
    b_hi = noisy_scan(noisy, (1.0 - hi_q) * n, sigma, confidence, from_top=True,
                      bin_confidence=bin_confidence)
    lower, upper = lo_end[b_lo], hi_end[b_hi]
    cum = np.concatenate([np.zeros((len(b_lo), 1)), np.cumsum(noisy, axis=1)], 1)
    rows = np.arange(len(b_lo))
    inside = cum[rows, np.maximum(b_hi, b_lo) + 1] - cum[rows, b_lo]  # noisy count in [lower, upper]
    spread = inside_margin * sigma * np.sqrt(np.abs(b_hi - b_lo) + 1.0)
    unresolved = (b_lo < 0) | (b_hi < 0) | (b_lo > b_hi) | (inside - spread < n / 2)
    return lower.astype(np.float64), upper.astype(np.float64), unresolved


def coarser_grids(grid):
    """The grids an unresolved histogram on ``grid`` is read again on: 2 and 1 bins per
    decade over the same decades, where they divide ``grid.bins_per_decade`` (then every
    edge of the coarser grid is an edge of ``grid``, and each bin of ``grid`` lies in
    exactly one coarser bin)."""
    b = grid.bins_per_decade
    return tuple(SignedLogGrid(grid.min_decade, grid.max_decade, c) for c in (2, 1)
                 if c < b and b % c == 0)


def coarsened(noisy, sigma, grid, coarse):
    """Noisy histograms on ``grid`` (one per row) summed into the bins of ``coarse``
    (post-processing of the release, free), and a bound on their noise's standard
    deviation: a coarse bin sums at most ``grid.bins_per_decade / coarse.bins_per_decade``
    independent noises of standard deviation ``sigma``, so the scan's margins stay valid.
    Each bin of ``grid`` is placed by a point it contains: its outer end (positive bins are
    closed on the right, negative ones on the left), twice that end for the overflow bins."""
    lo, hi = grid.bin_ends()
    point = np.where(hi > 0, hi, np.where(lo < 0, lo, 0.0))
    point[0], point[-1] = 2.0 * lo[0], 2.0 * hi[-1]
    index = coarse.bin_index(point)
    noisy = np.atleast_2d(np.asarray(noisy, dtype=np.float64))
    summed = np.zeros((noisy.shape[0], coarse.n_bins))
    np.add.at(summed, (slice(None), index), noisy)
    return summed, sigma * math.sqrt(grid.bins_per_decade / coarse.bins_per_decade)


def warn_unresolved(features, sigma, n, stacklevel=3, target=False):
    if len(features):
        what = ("range of the target y; it gets [0, 0]. Give it public bounds"
                if target else f"bounds of features {[int(j) for j in features]}; they get "
                f"bounds [0, 0] (dropped). Give them public bounds")
        warnings.warn(f"the budget (noise std {sigma:.3g} per count, n={n}) cannot locate the "
                      f"{what} or more budget", UserWarning, stacklevel=stacklevel)


def histogram_quantiles(noisy, n, level, grid=DEFAULT_GRID, ends=None):
    """Central quantile ``level`` of every noisy histogram (no margin): the bin where
    the noisy cumulative count first reaches ``level * n``, linearly interpolated
    inside it with the noisy counts (0 where it is never reached). The bins are those of
    ``grid``, or end at ``ends`` = (lower ends, upper ends) when given."""
    lo_end, hi_end = grid.bin_ends() if ends is None else ends
    b = noisy_scan(noisy, level * n, 0.0, 0.0, from_top=False)
    noisy = np.atleast_2d(noisy)
    rows = np.arange(noisy.shape[0])
    found = b >= 0
    bb = np.where(found, b, 0)
    before = np.cumsum(noisy, axis=1)[rows, bb] - noisy[rows, bb]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.clip((level * n - before) / noisy[rows, bb], 0.0, 1.0)
    frac = np.where(np.isfinite(frac), frac, 1.0)
    value = lo_end[bb] + frac * (hi_end[bb] - lo_end[bb])
    return np.where(found, value, 0.0)


def private_feature_bounds(X, mu, rng, *, quantiles=DEFAULT_QUANTILES, bounds=None,
                           confidence=DEFAULT_CONFIDENCE, grid=DEFAULT_GRID,
                           bin_confidence=DEFAULT_BIN_CONFIDENCE,
                           fallback=None) -> FeatureBounds:
    """Per-feature private (lower, upper) bounds of X, mu-GDP (module docstring).

    Parameters
    ----------
    X : (n, p) array or scipy sparse matrix, finite.
    mu : float > 0
        Gaussian-DP budget of the whole release (``inf``: exact, not private).
    rng : numpy Generator (all noise is drawn from it).
    quantiles : (q_lo, q_hi), 0 < q_lo < q_hi < 1
        Target levels; the margin of the scan moves the estimates towards the bulk.
    bounds : None or (lower, upper), scalars or length-p arrays
        Public bounds; NaN entries are estimated. Features with both bounds
        given are not released (they cost nothing and do not count in p); a
        feature with one public side is released and its other side estimated.
    confidence : float >= 0, the scan's margin in noise standard deviations.
    grid : SignedLogGrid, the public histogram grid.
    bin_confidence : float > 0 or None, the per-bin threshold of the scan's second
        rule (None: the margin rule only).
    fallback : None or (lower, upper), public
        The range given to a feature whose bounds collapse onto the zero bin; unresolved
        features get [-m, m], m = max(|lower|, |upper|) (module docstring, "Zero-inflated
        columns"). None: such features get [0, 0] (dropped) and unresolved ones a warning.

    Returns
    -------
    FeatureBounds with ``mechanisms == [Gaussian(1 / mu, 1)]`` if anything was
    released, else ``[]``.
    """
    return _matrix_release(X, mu, rng, quantiles=quantiles, bounds=bounds,
                           confidence=confidence, grid=grid, bin_confidence=bin_confidence,
                           fallback=fallback)


def _matrix_release(X, mu, rng, *, grid, **options) -> FeatureBounds:
    """:func:`_bounds_release` of the columns of a checked matrix X, counted on ``grid``."""
    X = check_matrix(X)
    return _bounds_release(lambda columns: feature_histograms(X, columns, grid), X.shape, mu,
                           rng, grid=grid, **options)


def private_bounds_from_counts(counts, n, mu, rng, *, quantiles=DEFAULT_QUANTILES, bounds=None,
                               confidence=DEFAULT_CONFIDENCE, grid=DEFAULT_GRID,
                               bin_confidence=DEFAULT_BIN_CONFIDENCE,
                               fallback=None, quiet=False) -> FeatureBounds:
    """:func:`private_feature_bounds` from exact histograms already counted on ``grid``.

    ``counts``: shape (p, grid.n_bins), the exact (non-private) counts of the n values of
    every feature, e.g. per-chunk :func:`feature_histograms` summed over the chunks of a
    Dask array. The release, its sensitivity, its record and the scan are those of
    :func:`private_feature_bounds` (same noise draws from ``rng``): for counts equal to
    ``feature_histograms(X, range(p))`` the two return the same bounds at the same seed.
    Features with public bounds (``bounds``) are left out of the release. ``quiet``: no
    warning for unresolved features (a caller that keeps an earlier map for them).
    """
    counts = np.asarray(counts, dtype=np.float64)
    if not isinstance(grid, SignedLogGrid):
        raise ValueError(f"grid must be a SignedLogGrid, got {grid!r}")
    if counts.ndim != 2 or counts.shape[1] != grid.n_bins or counts.shape[0] < 1:
        raise ValueError(f"counts must have shape (p, {grid.n_bins}) (the grid's bins), got "
                         f"{counts.shape}")
    n = check_positive_int(n, "n")
    return _bounds_release(lambda columns: counts[columns], (n, counts.shape[0]), mu, rng,
                           quantiles=quantiles, bounds=bounds, confidence=confidence, grid=grid,
                           bin_confidence=bin_confidence, fallback=fallback, quiet=quiet)


def _bounds_release(counts_of, shape, mu, rng, *, quantiles, bounds, confidence, grid,
                    bin_confidence, fallback=None, quiet=False, target=False) -> FeatureBounds:
    """The release and scan shared by the two entry points; ``counts_of(columns)`` gives
    the exact histograms of the released columns."""
    mu = check_mu(mu)
    quantiles = check_quantiles(quantiles)
    confidence = check_scalar(confidence, "confidence", low=0.0)
    if bin_confidence is not None:
        bin_confidence = check_scalar(bin_confidence, "bin_confidence", low=0.0, low_open=True)
    if not isinstance(grid, SignedLogGrid):
        raise ValueError(f"grid must be a SignedLogGrid, got {grid!r}")
    n, p = shape
    pub_lo, pub_hi = check_public_bounds(bounds, p)
    public = ~(np.isnan(pub_lo) | np.isnan(pub_hi))
    columns = np.flatnonzero(~public)
    lower, upper = pub_lo.copy(), pub_hi.copy()
    if columns.size == 0:
        return public_bounds(lower, upper, n, grid)
    noisy, sigma, record = release_counts(counts_of(columns), mu, rng)
    est_lo, est_hi, unresolved = histogram_bounds(noisy, sigma, n, quantiles, confidence, grid,
                                                  bin_confidence)
    fell = np.zeros(p, dtype=bool)
    if fallback is None:
        if not quiet:
            warn_unresolved(columns[unresolved], sigma, n, stacklevel=4,  # the entry point's caller
                            target=target)
    else:
        fb_lo, fb_hi = check_range(fallback, "fallback")
        m = max(abs(fb_lo), abs(fb_hi))
        zero = collapsed_to_zero(est_lo, est_hi) & ~unresolved
        est_lo = np.where(unresolved, -m, np.where(zero, fb_lo, est_lo))
        est_hi = np.where(unresolved, m, np.where(zero, fb_hi, est_hi))
        fell[columns] = unresolved | zero
    lower[columns] = np.where(np.isnan(pub_lo[columns]), est_lo, pub_lo[columns])
    upper[columns] = np.where(np.isnan(pub_hi[columns]), est_hi, pub_hi[columns])
    # a public side wins over an estimate that crosses it
    lower = np.where(np.isnan(pub_lo), np.minimum(lower, upper), lower)
    upper = np.where(np.isnan(pub_hi), np.maximum(lower, upper), upper)
    flags = np.zeros(p, dtype=bool)
    flags[columns] = unresolved
    return FeatureBounds(lower, upper, [record], public, 1.0 / mu, sigma, columns, noisy, n, grid,
                         flags, fell)


def public_bounds(lower, upper, n, grid=DEFAULT_GRID) -> FeatureBounds:
    """The :class:`FeatureBounds` of bounds all given publicly (a scalar or one value per
    feature): nothing is released and nothing read, so there is no record."""
    lower = np.atleast_1d(np.asarray(lower, dtype=np.float64))
    upper = np.atleast_1d(np.asarray(upper, dtype=np.float64))
    return FeatureBounds(lower, upper, [], np.ones(lower.size, dtype=bool), math.inf, 0.0,
                         np.zeros(0, dtype=np.intp), None, n, grid)


def collapsed_to_zero(lower, upper):
    """Features whose estimated bounds are both the exact zero bin (a zero-inflated or
    all-zero column at this budget): ``lower == upper == 0``."""
    return (np.asarray(lower) == 0.0) & (np.asarray(upper) == 0.0)


def private_target_bounds(y, mu, rng, *, quantiles=DEFAULT_QUANTILES, bounds=None,
                          confidence=DEFAULT_CONFIDENCE, grid=DEFAULT_GRID,
                          bin_confidence=DEFAULT_BIN_CONFIDENCE, quiet=False) -> FeatureBounds:
    """Private bounds of a 1-d target: one histogram, L2 sensitivity sqrt(2), mu-GDP.

    ``bounds`` is None or a pair of scalars (NaN = estimate). Returns a
    :class:`FeatureBounds` of length 1 (``lower[0]``, ``upper[0]``). An unresolved range
    is warned about, unless ``quiet`` (the default path, which says in its report what it
    released instead).
    """
    v = np.asarray(y, dtype=np.float64)
    if v.ndim != 1 or v.size < 1:
        raise ValueError(f"y must be a non-empty 1-d array, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("y contains NaN or infinity")
    return _matrix_release(v[:, None], mu, rng, quantiles=quantiles, bounds=bounds,
                           confidence=confidence, grid=grid, bin_confidence=bin_confidence,
                           quiet=quiet, target=True)
