"""Kernel values from dot products: the pre-kernel arithmetic, psvm's exp, the rbf table of
integer rows, the kernel's diagonal. Every path of :mod:`psvm.kernels` ends here, so a
value's bits do not depend on the path."""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from psvm._params import KERNELS
from psvm.jit import njit

LINEAR, POLY, RBF, SIGMOID = (KERNELS[k] for k in ("linear", "poly", "rbf", "sigmoid"))


@njit(cache=True, nogil=True, inline="always")
def pre_kernel(kernel_id, dot, sq_a, sq_b, gamma, coef0, degree):
    """The kernel value before :func:`from_pre`."""
    if kernel_id == LINEAR:
        return dot
    if kernel_id == RBF:
        return -gamma * (sq_a + sq_b - 2.0 * dot)
    if kernel_id == POLY:
        return _powi(gamma * dot + coef0, degree)
    return gamma * dot + coef0


@njit(cache=True, nogil=True, inline="always")
def pre_kernel_pass(kernel_id, d, x_sq, sq, gamma, coef0, degree):
    """d[t] = :func:`pre_kernel` of the dot product d[t] with a row of squared norm sq[t]. The
    kernel is chosen once, outside the loops (each loop's constant choice folds away): chosen
    inside, it kept them from vector code (ijcnn1's columns in L2: 0.5 ns a row of about 3.5)."""
    if kernel_id == RBF:
        for t in range(d.size):
            d[t] = pre_kernel(RBF, d[t], x_sq, sq[t], gamma, coef0, degree)
    elif kernel_id == POLY:
        for t in range(d.size):
            d[t] = pre_kernel(POLY, d[t], x_sq, sq[t], gamma, coef0, degree)
    elif kernel_id == SIGMOID:
        for t in range(d.size):
            d[t] = pre_kernel(SIGMOID, d[t], x_sq, sq[t], gamma, coef0, degree)


@njit(cache=True, nogil=True, inline="always")
def _powi(base, times):
    """base**times by LIBSVM's powi (svm.cpp): repeated squaring, so the same bits as LIBSVM's
    kernel and O(log times) steps (a loop of ``times`` products never ends for -d 1e9)."""
    tmp = base
    ret = 1.0
    t = times
    while t > 0:
        if t % 2 == 1:
            ret *= tmp
        tmp = tmp * tmp
        t //= 2
    return ret


@intrinsic
def _as_float64(typingctx, bits):
    """The float64 whose IEEE bits are the int64 ``bits``."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@intrinsic
def _bits_of(typingctx, x):
    """The IEEE bits of the float64 ``x``, as an int64."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 in two parts: k * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_BIAS = 4503599627371519.0  # 2**52 + 1023: k + _BIAS holds k + 1023 in its low bits


@njit(cache=True, nogil=True, inline="always")
def exp(x):
    """e**x within 1 ulp by plain arithmetic (no libm), so that numba vectorises loops of it.

    x = k ln 2 + r with |r| <= ln 2 / 2; e**r by its Taylor series to r**13
    (truncation below 1e-17 relative), times 2**k built from its bits. The
    same operations for every element, vectorised or not: the bits of a
    kernel value do not depend on where it sits in a buffer. Callers compile
    with ``fastmath={"contract"}`` (fused multiply-adds), all of them alike. Below -708 it
    gives 0 (no subnormals), above 709 about 8e307.
    """
    tiny = x < -708.0
    x = min(max(x, -708.0), 709.0)
    k = np.floor(x * _LOG2E + 0.5)  # a float: math.floor's int64 is scalar code on AVX2
    r = (x - k * _LN2_HI) - k * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    return 0.0 if tiny else p * _as_float64(_bits_of(k + _BIAS) << 52)


@njit(cache=True, nogil=True, fastmath={"contract"})
def from_pre_flat(kernel_id, v):
    """:func:`from_pre` of a 1-D array, callable from compiled loops.

    ``contract`` lets LLVM fuse :func:`exp`'s multiply-adds (0.98 ns a value instead of
    1.7): fused in the vectorised body and the scalar remainder alike, so a value's bits
    still do not depend on its position. Every caller of :func:`exp` must have it (it is
    inlined and takes its caller's flags)."""
    if kernel_id == RBF:
        for t in range(v.size):
            v[t] = exp(v[t])
    elif kernel_id == SIGMOID:
        for t in range(v.size):
            v[t] = math.tanh(v[t])
    return v


# -- exp by table: rbf on integer-valued rows (0/1 features, counts) --------------------------
# There |x - z|^2 = sq_x + sq_z - 2 x.z is an exact integer n, so pre-K is -gamma * n and its
# exp one of a few values: a table of them, made by :func:`from_pre_flat` from the same
# products, gives exp's bits (a9a: 1.7 -> 0.9 ns a value).
EXP_TABLE_MAX = 4096  # entries (32 KB): a larger table would not stay in L1


def rbf_table(gamma: float, max_n: float) -> np.ndarray:
    """exp(-gamma n) for n = 0..max_n, as :func:`pre_kernel` and :func:`from_pre_flat` give
    it; empty (no table) when max_n reaches :data:`EXP_TABLE_MAX` or gamma is not positive."""
    if not (gamma > 0.0 and 0.0 <= max_n < EXP_TABLE_MAX):
        return np.zeros(0)
    return from_pre_flat(RBF, -gamma * np.arange(int(max_n) + 1, dtype=np.float64))


@njit(cache=True, nogil=True, inline="always")
def from_table(v, table, gamma):
    """:func:`from_pre_flat` (rbf) of pre-K values -gamma * n, n an integer that indexes
    ``table`` (:func:`rbf_table`): n = v / -gamma to within a few ulps, rounded."""
    c = -1.0 / gamma
    for t in range(v.size):
        v[t] = table[np.int64(v[t] * c + 0.5)]
    return v


@njit(cache=True, nogil=True, inline="always")
def all_integers(values):
    """Whether every value is an integer (a row whose kernel values the table may give)."""
    for p in range(values.size):
        if values[p] != math.floor(values[p]):
            return False
    return True


def is_integral(a: np.ndarray) -> bool:
    """:func:`all_integers` for Python callers (numpy: no compiled entry for Python)."""
    return bool(np.array_equal(np.floor(a), a))


def from_pre(kernel_id: int, v: np.ndarray) -> np.ndarray:
    """Turn :func:`pre_kernel` values into kernel values, in place (``v`` C-contiguous)."""
    from_pre_flat(kernel_id, v.reshape(-1))
    return v


@njit(cache=True, nogil=True)
def _diag_pre(sq_norms, kernel_id, gamma, coef0, degree, out):
    for r in range(sq_norms.size):
        out[r] = pre_kernel(kernel_id, sq_norms[r], sq_norms[r], sq_norms[r], gamma, coef0, degree)


def kernel_diag(sq_norms, kernel_id, gamma, coef0, degree, out):
    """out[r] = K(x_r, x_r), computed by the same formula as a column entry."""
    _diag_pre(sq_norms, kernel_id, gamma, coef0, degree, out)
    return from_pre(kernel_id, out)


def arithmetic_probe() -> bytes:
    """The bits of exp and tanh, as the solver computes them, on fixed arguments.

    Every rank recomputes K_ij and the two-variable step from the same packets, so
    ranks must agree bitwise on the kernel's arithmetic. That fails across CPUs
    whose code uses fused multiply-adds differently, or builds whose tanh differ.
    """
    x = np.linspace(-60.0, 2.0, 4093)
    return from_pre(RBF, x.copy()).tobytes() + from_pre(SIGMOID, x / 8.0).tobytes()
