"""The copy of a dense float64 matrix into the kernels' Fortran-ordered design, with the
magnitude checks of :class:`dpopt.data.Problem` done on the values while they pass.

One pass instead of NumPy's copy (a transposition for C-ordered input, which NumPy does
element by element with a stride of 8 p bytes on one side) followed by separate passes for
``abs``, ``max`` and the smallest non-zero magnitude. A C-ordered input is read in blocks
of :func:`block_rows` rows (a block of about 1 MiB stays in cache while its columns are
written out as contiguous runs). The values are copied, not computed: the design is the
input bit for bit. The checks run on the values' bits without the sign, which order the
magnitudes of doubles as integers do (+inf above every finite value, NaN above +inf): an
integer maximum and a minimum over the non-zero ones, reductions that vectorize.
"""

import numpy as np
from numba import njit

from dpopt.kernels.binning import INF_BITS
from dpopt.kernels.vecmath import _bits_to_float
from dpopt.kernels.vecmath import _float_to_bits as _float_bits

#: Above the bits of every magnitude but NaN's: "no non-zero value seen".
_NO_NONZERO = INF_BITS + 1

#: Bytes of a block of rows of a C-ordered input (about the size of a core's L2 cache).
BLOCK_BYTES = 1 << 20


def block_rows(p):
    """Rows per block of a C-ordered input of p columns: about :data:`BLOCK_BYTES`, between
    8 and 1024 rows (longer runs per column on the output side bring nothing more)."""
    return int(min(1024, max(8, BLOCK_BYTES // (8 * max(p, 1)))))


@njit(cache=True, nogil=True)
def copy_rows_to_fortran(src, out, block):
    """out[:, :p] = src (n, p), ``block`` rows at a time (a C-ordered src: a block stays in
    cache while each of its columns is written; a Fortran-ordered one: ``block = n``, column
    by column); returns :func:`magnitude_stats` of src."""
    n, p = src.shape
    top, low = 0, _NO_NONZERO
    for i0 in range(0, n, block):
        i1 = min(i0 + block, n)
        for j in range(p):
            for i in range(i0, i1):
                v = src[i, j]
                out[i, j] = v
                a = _float_bits(v) & 0x7FFFFFFFFFFFFFFF
                top = max(top, a)
                low = min(low, a if a != 0 else _NO_NONZERO)
    return _stats(top, low)


@njit(cache=True, nogil=True)
def _stats(top, low):
    """(max |x|, min non-zero |x|, 1 if a NaN was seen else 0) from the largest and the
    smallest non-zero of the values' bits without the sign."""
    big = _bits_to_float(min(top, INF_BITS))
    small = np.inf if low == _NO_NONZERO else _bits_to_float(low)
    return big, small, 1 if top > INF_BITS else 0


@njit(cache=True, nogil=True)
def magnitude_stats(X):
    """(max |x|, min non-zero |x|, #NaN > 0) of a Fortran-ordered X, column by column (the
    checks of a design that needs no copy). On the bits without the sign, which order the
    magnitudes of doubles as integers do (NaN above +inf): an integer maximum and minimum,
    which vectorize. With a NaN the first number is not the largest magnitude (the caller
    reports the bad values anyway)."""
    n, p = X.shape
    top, low = 0, _NO_NONZERO
    for j in range(p):
        for i in range(n):
            a = _float_bits(X[i, j]) & 0x7FFFFFFFFFFFFFFF
            top = max(top, a)
            low = min(low, a if a != 0 else _NO_NONZERO)
    return _stats(top, low)
