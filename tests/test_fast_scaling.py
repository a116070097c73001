"""The compiled passes of the default path's scaling give what the NumPy expressions give.

The feature-bound release's privacy argument is about its counts, so the compiled
histograms (:mod:`dpopt.kernels.binning`) must give exactly the counts of
``np.bincount(grid.bin_index(column))``; the feature map, its column sums
(:mod:`dpopt.kernels.clipscale`) and the design copy (:mod:`dpopt.kernels.design`) must give
the values of the NumPy code they replace. Checked on random and adversarial inputs: values
exactly on bin edges and one ulp either side, signed zeros, subnormals, overflow bins, any
layout, sparse matrices, and NaN / infinity refused as before.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from dpopt.data import Problem
from dpopt.kernels.binning import grid_lookup
from dpopt.preprocessing import private_feature_bounds
from dpopt.preprocessing._bounds import DEFAULT_GRID, SignedLogGrid, feature_histograms
from dpopt.preprocessing.feature_maps import Scaling

GRIDS = [DEFAULT_GRID, SignedLogGrid(-2, 3, 1), SignedLogGrid(-6, 12, 16),
         SignedLogGrid(-300, 300, 3)]


def numpy_counts(X, columns, grid):
    """The reference: one np.bincount of grid.bin_index per column (the former code)."""
    n = X.shape[0]
    out = np.zeros((len(columns), grid.n_bins))
    for row, j in enumerate(columns):
        if sp.issparse(X):
            X = sp.csc_matrix(X)
            values = X.data[X.indptr[j]:X.indptr[j + 1]]
            out[row, grid.zero_bin] += n - values.size
        else:
            values = X[:, j]
        out[row] += np.bincount(grid.bin_index(values), minlength=grid.n_bins)
    return out


def adversarial_values(grid, rng, size):
    """Edges, their neighbours one ulp away, signed zeros, subnormals, huge values."""
    e = grid.edges
    special = np.concatenate([e, np.nextafter(e, 0), np.nextafter(e, np.inf),
                              [0.0, -0.0, 5e-324, 1e-310, 1e-300, 1e300, 1.7e308,
                               np.finfo(float).tiny, 1.0, 10.0]])
    special = np.concatenate([special, -special])
    return rng.choice(special, size=size)


@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g.min_decade}_{g.max_decade}_{g.bins_per_decade}")
def test_lookup_table_gives_the_searchsorted_count(grid):
    padded, table, first, steps = grid_lookup(grid.edges)
    rng = np.random.default_rng(1)
    values = np.abs(np.concatenate([adversarial_values(grid, rng, 4000),
                                    10.0 ** rng.uniform(-320, 308, 4000)]))
    X = values[:, None]
    got = feature_histograms(X, [0], grid)
    np.testing.assert_array_equal(got, numpy_counts(X, [0], grid))
    assert padded[-1] == np.inf and steps >= 1 and table[0] == 0


@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g.min_decade}_{g.max_decade}_{g.bins_per_decade}")
@pytest.mark.parametrize("order", ["C", "F", "strided"])
def test_histograms_equal_numpy_on_adversarial_dense_input(grid, order):
    rng = np.random.default_rng(2)
    X = np.column_stack([adversarial_values(grid, rng, 3000),
                         rng.standard_normal(3000) * 10.0 ** rng.uniform(-8, 12, 3000),
                         np.zeros(3000), rng.integers(0, 2, 3000).astype(float),
                         -np.abs(rng.standard_cauchy(3000))])
    if order == "F":
        X = np.asfortranarray(X)
    elif order == "strided":
        X = np.repeat(X, 2, axis=1)[::2, ::2]
    columns = [4, 0, 2, 0]  # any order, repeats allowed
    np.testing.assert_array_equal(feature_histograms(X, columns, grid),
                                  numpy_counts(X, columns, grid))


def test_histograms_equal_numpy_on_sparse_and_integer_input():
    rng = np.random.default_rng(3)
    dense = rng.standard_normal((500, 6)) * (rng.random((500, 6)) < 0.1)
    dense[:5, 0] = DEFAULT_GRID.edges[:5]
    for X in (sp.csc_matrix(dense), sp.csr_matrix(dense), sp.coo_matrix(dense)):
        np.testing.assert_array_equal(feature_histograms(X, range(6)),
                                      numpy_counts(X, range(6), DEFAULT_GRID))
    ints = rng.integers(-1000, 1000, (200, 3))
    np.testing.assert_array_equal(feature_histograms(ints, range(3)),
                                  numpy_counts(ints.astype(float), range(3), DEFAULT_GRID))


def test_explicit_zeros_of_a_sparse_matrix_count_as_zeros():
    X = sp.csc_matrix((np.array([0.0, -0.0, 2.0]), np.array([0, 1, 2]), np.array([0, 3])),
                      shape=(10, 1))
    counts = feature_histograms(X, [0])
    assert counts[0, DEFAULT_GRID.zero_bin] == 9 and counts.sum() == 10


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_infinity_are_refused_as_before(bad):
    X = np.ones((50, 3))
    X[7, 1] = bad
    with pytest.raises(ValueError, match="NaN or infinity"):
        private_feature_bounds(X, 1.0, np.random.default_rng(0))


def test_private_bounds_unchanged_against_the_numpy_counts():
    """The release from the compiled counts is the release from the NumPy counts (same
    noise draws), so every bound is the same."""
    from dpopt.preprocessing import private_bounds_from_counts

    rng = np.random.default_rng(4)
    X = rng.lognormal(0, 2, (4000, 5)) * np.where(rng.random((4000, 5)) < 0.5, -1, 1)
    got = private_feature_bounds(X, 0.5, np.random.default_rng(9))
    ref = private_bounds_from_counts(numpy_counts(X, range(5), DEFAULT_GRID), 4000, 0.5,
                                     np.random.default_rng(9))
    np.testing.assert_array_equal(got.lower, ref.lower)
    np.testing.assert_array_equal(got.upper, ref.upper)
    np.testing.assert_array_equal(got.noisy_counts, ref.noisy_counts)


# ---------------------------------------------------------------- the feature map


def scalings(p, rng):
    lo = rng.standard_normal(p) - 1.0
    hi = lo + rng.random(p) * 3.0
    lo[0], hi[0] = -0.0, 0.0  # collapsed at zero: scale 0, signed zeros at the bounds
    if p > 2:
        hi[1] = lo[1]  # collapsed elsewhere
    base = [Scaling.from_bounds(lo, hi, shift=shift, sparse=False) for shift in (True, False)]
    return base + [s.centered(rng.random(p)) for s in base]


@pytest.mark.parametrize("shape", [(1, 2), (5, 2), (7, 3), (300, 1), (2000, 40), (3, 50)])
def test_transform_and_column_sums_equal_numpy(shape):
    rng = np.random.default_rng(5)
    X = rng.standard_normal(shape) * 2.0
    X[rng.random(shape) < 0.2] = -0.0
    X[rng.random(shape) < 0.1] = 0.0
    for scaling in scalings(shape[1], rng):
        inv = np.divide(1.0, scaling.scale, out=np.zeros_like(scaling.scale),
                        where=scaling.scale > 0)
        for Z in (X, np.asfortranarray(X), X[:, ::-1].copy()[:, ::-1]):
            ref = (np.clip(Z, scaling.lower, scaling.upper) - scaling.offset) * inv
            got = scaling.transform(Z)
            np.testing.assert_array_equal(got, ref)  # -0.0 == 0.0 (module docstring)
            assert got.flags.c_contiguous == ref.flags.c_contiguous
            np.testing.assert_array_equal(scaling.column_sums(Z), ref.sum(axis=0))


@pytest.mark.parametrize("grid", GRIDS[:3])
def test_histograms_of_the_map_equal_those_of_its_output(grid):
    """The fused pass (clip, scale and bin without storing the map) counts exactly what
    binning the stored transform counts, for C and Fortran layouts and row subsets."""
    from dpopt.data.rows import RowSubset
    from dpopt.preprocessing._bounds import scaled_feature_histograms

    rng = np.random.default_rng(11)
    X = rng.standard_normal((1500, 7)) * 10.0 ** rng.uniform(-3, 4, 7)
    X[rng.random(X.shape) < 0.1] = -0.0
    X[:50] = adversarial_values(grid, rng, (50, 7))
    rows = np.sort(rng.permutation(1500)[:1100])
    columns = [0, 3, 6, 2]
    for scaling in scalings(7, rng):
        for Z in (X, np.asfortranarray(X), RowSubset(X, rows)):
            ref = numpy_counts(scaling.transform(np.asarray(Z)), columns, grid)
            np.testing.assert_array_equal(scaled_feature_histograms(Z, scaling, columns, grid),
                                          ref)


def test_transform_keeps_numpys_errors_and_dtypes():
    scaling = Scaling.from_bounds(np.zeros(3), np.ones(3), shift=True, sparse=False)
    with pytest.raises(ValueError):
        scaling.transform(np.ones((4, 2)))  # wrong width: NumPy's broadcasting error
    ints = np.arange(12).reshape(4, 3)
    np.testing.assert_array_equal(scaling.transform(ints), np.clip(ints, 0.0, 1.0))


# ---------------------------------------------------------------- the design copy


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("intercept", [True, False])
def test_problem_design_is_the_input_bit_for_bit(order, intercept):
    rng = np.random.default_rng(6)
    X = np.array(rng.standard_normal((2500, 7)) * 10.0 ** rng.uniform(-100, 100, 7), order=order)
    X[0, 0], X[1, 1] = -0.0, 0.0
    problem = Problem(X, np.sign(rng.standard_normal(2500)), "logistic",
                      fit_intercept=intercept)
    design = problem.X
    assert design.flags.f_contiguous and design.shape == (2500, 7 + intercept)
    np.testing.assert_array_equal(design[:, :7].view(np.int64), X.view(np.int64))
    if intercept:
        assert np.all(design[:, 7] == 1.0)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("bad,match", [(np.nan, "NaN or infinity"), (np.inf, "NaN or infinity"),
                                       (1e200, "overflow"), (1e-200, "underflow")])
def test_problem_design_refuses_bad_values_as_before(order, bad, match):
    X = np.array(np.ones((40, 3)), order=order)
    X[17, 2] = bad
    with pytest.raises(ValueError, match=match):
        Problem(X, np.ones(40), fit_intercept=True)


# ---------------------------------------------------------------- rows read in place


def test_row_subset_gives_what_the_copy_gives():
    from dpopt.data.rows import RowSubset

    rng = np.random.default_rng(7)
    X = rng.standard_normal((3000, 6)) * 10.0 ** rng.uniform(-3, 5, 6)
    rows = np.sort(rng.permutation(3000)[:2100])
    sub, copy = RowSubset(X, rows), X[rows]
    np.testing.assert_array_equal(np.asarray(sub), copy)
    np.testing.assert_array_equal(sub[:, 2], copy[:, 2])
    np.testing.assert_array_equal(feature_histograms(sub, range(6)),
                                  numpy_counts(copy, range(6), DEFAULT_GRID))
    for scaling in scalings(6, rng):
        np.testing.assert_array_equal(scaling.transform(sub), scaling.transform(copy))
        np.testing.assert_array_equal(scaling.column_sums(sub), scaling.transform(copy).sum(0))
        design = scaling.design(sub, intercept=True)
        np.testing.assert_array_equal(design, scaling.transform(copy))
        problem = Problem(design, np.ones(2100), fit_intercept=True)
        assert np.shares_memory(problem.X, design) and np.all(problem.X[:, 6] == 1.0)


@pytest.mark.filterwarnings("ignore:the budget:UserWarning")
def test_row_subset_refuses_bad_rows_and_checks_its_own_rows():
    from dpopt.data.rows import RowSubset

    X = np.ones((10, 2))
    with pytest.raises(ValueError, match="row indices"):
        RowSubset(X, [0, 10])
    with pytest.raises(ValueError, match="C-ordered float64"):
        RowSubset(np.ones((10, 2), order="F"), [0])
    X[3, 1] = np.nan
    private_feature_bounds(RowSubset(X, [0, 1, 2, 4]), 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="NaN or infinity"):
        private_feature_bounds(RowSubset(X, [0, 3]), 1.0, np.random.default_rng(0))


def test_default_fit_is_the_same_with_the_training_rows_copied(monkeypatch):
    """The held-out split reads the training rows in place; with the former copies
    (X[train], X[val]) the default fit releases the same numbers, bit for bit."""
    import warnings

    import dpopt
    from dpopt.data.rows import RowSubset

    rng = np.random.default_rng(8)
    X = rng.standard_normal((4000, 5)) * [1.0, 10.0, 0.1, 3.0, 1.0]
    y = (X @ [1.0, 0.1, -5.0, 0.2, 0.0] + rng.standard_normal(4000) > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = dpopt.DPLogisticRegression(epsilon=1.0, random_state=3).fit(X, y)
        monkeypatch.setattr(RowSubset, "of", classmethod(lambda cls, Z, rows: Z[rows]))
        copied = dpopt.DPLogisticRegression(epsilon=1.0, random_state=3).fit(X, y)
    np.testing.assert_array_equal(fast.coef_, copied.coef_)
    np.testing.assert_array_equal(fast.intercept_, copied.intercept_)
    assert fast.fit_result_.params["auto"]["selection"] == \
        copied.fit_result_.params["auto"]["selection"]


@pytest.mark.parametrize("order", ["C", "F"])
def test_design_of_a_whole_array_is_the_transform_with_a_column_of_ones(order):
    rng = np.random.default_rng(10)
    X = np.array(rng.standard_normal((500, 4)) * 3.0, order=order)
    for scaling in scalings(4, rng):
        design = scaling.design(X, intercept=True)
        np.testing.assert_array_equal(design, scaling.transform(X))
        assert design.flags.f_contiguous and np.all(design.base[:, 4] == 1.0)
        np.testing.assert_array_equal(scaling.design(X, intercept=False), scaling.transform(X))


@pytest.mark.parametrize("bad,match", [(np.nan, "NaN or infinity"), (-np.inf, "NaN or infinity"),
                                       (1e200, "overflow"), (-1e-200, "underflow")])
def test_a_prepared_design_is_checked_like_a_copied_one(bad, match):
    """A design laid out by Scaling.design (a column of ones after p columns, Fortran
    order) is taken without a copy, after the same magnitude checks."""
    base = np.ones((30, 4), order="F")
    base[:, :3] = np.random.default_rng(11).standard_normal((30, 3))
    base[0, 1] = 0.0
    assert Problem(base[:, :3], np.ones(30), fit_intercept=True).X is base
    base[12, 2] = bad
    with pytest.raises(ValueError, match=match):
        Problem(base[:, :3], np.ones(30), fit_intercept=True)
    base[12, 2], base[5, 3] = 0.5, 2.0  # not a column of ones: copied as before
    assert Problem(base[:, :3], np.ones(30), fit_intercept=True).X is not base


def test_threaded_passes_give_the_serial_results():
    """Above PARALLEL_MIN_SIZE values the counting passes and the design write run on
    Numba's threads, each chunk of rows on its own: the counts (integers) and the design
    (an element-wise map) are exactly those of one thread and of the NumPy reference."""
    import numba

    from dpopt.data.rows import RowSubset
    from dpopt.kernels.vecmath import PARALLEL_MIN_SIZE
    from dpopt.preprocessing._bounds import scaled_feature_histograms

    rng = np.random.default_rng(12)
    p = 40
    n = PARALLEL_MIN_SIZE // p + 7  # just above the threshold, an uneven split
    X = rng.standard_normal((n, p)) * 10.0 ** rng.uniform(-3, 4, p)
    X[:100] = adversarial_values(DEFAULT_GRID, rng, (100, p))
    rows = np.sort(rng.permutation(n)[: n - 3])  # a RowSubset still above the threshold
    columns = np.arange(p)
    scaling = scalings(p, rng)[0]
    before = numba.get_num_threads()
    out = {}
    try:
        for threads in sorted({1, numba.config.NUMBA_NUM_THREADS, 2} - {0}):
            if threads > numba.config.NUMBA_NUM_THREADS:
                continue
            numba.set_num_threads(threads)
            out[threads] = (feature_histograms(X, columns),
                            feature_histograms(RowSubset(X, rows), columns),
                            scaled_feature_histograms(RowSubset(X, rows), scaling, columns),
                            np.asarray(scaling.design(RowSubset(X, rows), True)))
    finally:
        numba.set_num_threads(before)
    ref = (numpy_counts(X, columns, DEFAULT_GRID), numpy_counts(X[rows], columns, DEFAULT_GRID),
           numpy_counts(scaling.transform(X[rows]), columns, DEFAULT_GRID),
           scaling.transform(X[rows]))
    for got in out.values():
        for a, b in zip(got, ref):
            np.testing.assert_array_equal(a, b)
