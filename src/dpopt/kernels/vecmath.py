"""Vectorizable scalar math for the kernels' inner loops.

Numba compiles ``math.exp`` to a call into the C library, which stops LLVM
from vectorizing a loop; without Intel's SVML there is no vector exp. The
logistic kernels need one exponential per sample and step, so this module
gives an ``exp`` written with arithmetic only, which LLVM turns into SIMD code:
t = k ln 2 + r with k = round(t / ln 2) obtained by the add-and-subtract trick
with 1.5 * 2^52 (k is then also read from the low bits of the sum, so no
float-to-integer conversion is needed), a degree-12 Taylor polynomial on
|r| <= ln(2)/2 (truncation error (ln(2)/2)^13 / 13! < 2e-16), and 2^k built in
the exponent bits. Relative error is below
4e-16 for |t| <= 50 and below 3e-14 up to |t| = 708 (checked against
``numpy.exp`` in the tests); the input is clamped to [-708, 708], so the
result is always finite and positive.

``FASTMATH`` is the set of LLVM fast-math flags the kernels use: it allows
re-association (vectorized sums), contraction (FMA) and reciprocal
approximations, but NOT ``nnan``/``ninf``: comparisons with infinity (an
infinite clipping threshold) and the min/max of the clipping keep their exact
IEEE meaning, so clipping is enforced element by element exactly as written.
Re-association only changes the rounding of sums of already-clipped terms.
"""

import numba
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

FASTMATH = {"contract", "reassoc", "nsz", "arcp"}

#: Values (rows x columns) from which a dense pass uses Numba's threads (the greedy-CD
#: gradient, the histogram counts, the design write); below, starting the threads costs
#: more than it saves.
PARALLEL_MIN_SIZE = 1 << 21


def threads_for(n_values):
    """Numba's thread count for a pass over ``n_values`` values: 1 below
    :data:`PARALLEL_MIN_SIZE` (or with one thread configured)."""
    threads = numba.get_num_threads()
    return threads if threads > 1 and n_values >= PARALLEL_MIN_SIZE else 1

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10


@intrinsic
def _bits_to_float(typingctx, x):
    """Reinterpret the bits of an int64 as a float64 (an LLVM bitcast)."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return sig, codegen


def _prefetch_codegen(context, builder, signature, args):
    aryty = signature.args[0]
    ary = context.make_array(aryty)(context, builder, args[0])
    idx = [context.cast(builder, a, t, types.intp)
           for a, t in zip(args[1:], signature.args[1:])]
    ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
    i8p = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
    # read access, high temporal locality, data cache
    builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                      ir.Constant(i32, 1)])
    return context.get_dummy_value()


@intrinsic
def prefetch2d(typingctx, arr, i, j):
    """Hint the CPU to fetch the cache line holding ``arr[i, j]`` (no effect on results;
    the index must be in bounds)."""
    return types.void(arr, i, j), _prefetch_codegen


@intrinsic
def prefetch1d(typingctx, arr, i):
    """Hint the CPU to fetch the cache line holding ``arr[i]`` (index in bounds)."""
    return types.void(arr, i), _prefetch_codegen


# No "reassoc" here: it would fold (s - 1.5 * 2^52) back into t log2(e) and merge the
# two-constant (Cody-Waite) reduction below into one multiplication by a rounded ln 2.
# Not inlined by Numba (which would give the body the caller's flags); LLVM still inlines
# and vectorizes it.
_EXP_FLAGS = {"contract", "nsz", "arcp"}


@intrinsic
def _float_to_bits(typingctx, x):
    """Reinterpret the bits of a float64 as an int64 (an LLVM bitcast)."""
    sig = types.int64(types.float64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return sig, codegen


_ROUNDER = 6755399441055744.0  # 1.5 * 2^52: x + _ROUNDER - _ROUNDER rounds x to an integer


@njit(cache=True, nogil=True, fastmath=_EXP_FLAGS, error_model="numpy")
def vexp(t):
    """exp(t) for t clamped to [-708, 708], vectorizable (module docstring)."""
    t = min(max(t, -708.0), 708.0)
    s = t * _LOG2E + _ROUNDER  # |t log2(e)| < 1022: the low bits of s hold round(t log2(e))
    k = s - _ROUNDER
    r = (t - k * _LN2_HI) - k * _LN2_LO
    q = 1.0 / 479001600.0
    q = q * r + 1.0 / 39916800.0
    q = q * r + 1.0 / 3628800.0
    q = q * r + 1.0 / 362880.0
    q = q * r + 1.0 / 40320.0
    q = q * r + 1.0 / 5040.0
    q = q * r + 1.0 / 720.0
    q = q * r + 1.0 / 120.0
    q = q * r + 1.0 / 24.0
    q = q * r + 1.0 / 6.0
    q = q * r + 0.5
    q = q * r + 1.0
    q = q * r + 1.0
    ki = _float_to_bits(s) - _float_to_bits(_ROUNDER)
    return q * _bits_to_float((ki + 1023) << 52)


@njit(cache=True, nogil=True, fastmath=_EXP_FLAGS, error_model="numpy")
def logistic_deriv(z, y):
    """d/dz log(1 + exp(-y z)) = -y / (1 + exp(y z)), vectorizable and overflow free."""
    return -y / (1.0 + vexp(y * z))


@njit(cache=True, nogil=True, fastmath=FASTMATH, error_model="numpy")
def vexp_array(t):
    """:func:`vexp` on an array (for tests and benchmarks)."""
    out = np.empty(t.shape[0])
    for i in range(t.shape[0]):
        out[i] = vexp(t[i])
    return out
