"""numba kernels: kernel columns, kernel blocks, diagonals and squared row norms.

Contract for every kernel here: CSR arrays ``indptr`` (int64), ``indices``
(int32, 0-based, ascending within a row) and ``data`` (float64); results go
into a preallocated ``out``. One ``kernel_id`` switch selects the kernel, so
each function compiles a single specialization that numba caches on disk.

Every kernel value is computed in two steps: numba writes the argument of
the transcendental part (:func:`pre_kernel`: ``-gamma |a - b|^2`` for rbf,
``gamma a.b + coef0`` for sigmoid, the final value for linear and poly), and
:func:`from_pre` applies exp or tanh to the whole contiguous buffer. exp is
:func:`exp`, plain arithmetic that numba vectorises (libm's, called once per
value, is 2.5x slower) and that gives each element the same bits wherever
it sits in the buffer. Dot products add their terms in ascending feature order and skip
only exact zeros, so a kernel value does not depend on which rank, path or
block computes it.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from llvmlite import ir
from numba import prange, types
from numba.extending import intrinsic

from psvm._params import KERNELS
from psvm.jit import njit

LINEAR, POLY, RBF, SIGMOID = (KERNELS[k] for k in ("linear", "poly", "rbf", "sigmoid"))
_PARALLEL_WORK = 1 << 20  # multiply-adds below which a block runs in one thread
# the same for :func:`kernel_sums` (reconstruction, a few ms of work): a parallel block waits
# for its slowest thread (on shared cores, for a time slice: make_classification's
# reconstructions took 6 to 55 ms, one thread 8 ms)
_PARALLEL_SUMS = 1 << 24


def canonical_csr(X) -> sp.csr_matrix:
    """CSR float64 with sorted, summed indices (the kernels' input contract); the caller's
    arrays are never modified."""
    X = sp.csr_matrix(X, dtype=np.float64)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X


def columns_right(X: sp.csr_matrix) -> sp.csr_matrix:
    """X with every column one to the right, behind a new empty column 0 (rows read 1-based
    put beside rows of a file that holds feature index 0)."""
    return sp.csr_matrix((X.data, X.indices + 1, X.indptr), shape=(X.shape[0], X.shape[1] + 1))


def csr_of(indptr, indices, data, shape: tuple[int, int]) -> sp.csr_matrix:
    """scipy's CSR over valid CSR arrays that psvm made (kept, not copied), 32-bit indices
    where they fit: the matrix scipy makes of 64-bit ones, which it checks value by value
    before it converts them.

    With 32-bit indices and float64 data the matrix is assembled from a template of scipy's
    own (:func:`_bare_csr`): scipy's constructor costs 85-110 µs each in an iris fit, which
    makes two (7% of the fit), against 1 µs."""
    if max(shape, default=0) < 2**31 and (indptr.size == 0 or indptr[-1] < 2**31):
        indptr, indices = indptr.astype(np.int32, copy=False), indices.astype(np.int32, copy=False)
        if _BARE_CSR and data.dtype == np.float64 and indptr.size == shape[0] + 1:
            ends = indptr[-1] == indices.size == data.size and not indptr[0]
            if ends and indices.ndim == data.ndim == 1:
                return _bare_csr(indptr, indices, data, shape)
    return sp.csr_matrix((data, indices, indptr), shape=shape)


def _bare_csr(indptr, indices, data, shape: tuple[int, int]) -> sp.csr_matrix:
    """What ``sp.csr_matrix((data, indices, indptr), shape)`` holds when its arrays are int32
    and float64 and valid, without its checks: the attributes of a matrix scipy built, with
    these arrays and shape."""
    X = sp.csr_matrix.__new__(sp.csr_matrix)
    X.__dict__.update(_CSR_TEMPLATE)  # scipy's attributes in scipy's order (pickles alike)
    shape = (int(shape[0]), int(shape[1]))
    X.__dict__.update(_shape=shape, indptr=indptr, indices=indices, data=data)
    return X


def _bare_csr_matches() -> bool:
    """Whether :func:`_bare_csr` gives what scipy's constructor gives (this scipy's attributes,
    compared on a small matrix): else psvm uses the constructor."""
    args = np.array([1.0, 2.0]), np.array([1, 0], np.int32), np.array([0, 1, 1, 2], np.int32)
    built = sp.csr_matrix(args, shape=(3, 2))
    bare = _bare_csr(*args[::-1], (3, 2))
    want, got = vars(built), vars(bare)
    return (
        set(want) == {"_shape", "maxprint", "indptr", "indices", "data"}
        and list(got) == list(want)
        and all(type(got[k]) is type(want[k]) for k in want)
        and got["_shape"] == want["_shape"]
        and all(got[k] is args[i] for i, k in enumerate(("data", "indices", "indptr")))
        and (bare != built).nnz == 0
    )


_EMPTY = np.zeros(0), np.zeros(0, np.int32), np.zeros(1, np.int32)
_CSR_TEMPLATE = dict(vars(sp.csr_matrix(_EMPTY, shape=(0, 0))))  # as the constructor leaves it
_BARE_CSR = _bare_csr_matches()


def csr_arrays(X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (indptr, indices, data) triple with the dtypes the kernels expect, writable (numba
    compiles read-only arrays as another type)."""
    return (
        _kernel_array(X.indptr, np.int64),
        _kernel_array(X.indices, np.int32),
        _kernel_array(X.data, np.float64),
    )


def _kernel_array(a: np.ndarray, dtype) -> np.ndarray:
    """``np.require(a, dtype, ["C", "W"])`` without its Python (5 us a call, 9 calls an iris
    fit): ``a`` itself when it is such an array, else a copy."""
    if a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable:
        return a
    return np.array(a, dtype=dtype, order="C")


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


def from_pre(kernel_id: int, v: np.ndarray) -> np.ndarray:
    """Turn :func:`pre_kernel` values into kernel values, in place (``v`` C-contiguous)."""
    from_pre_flat(kernel_id, v.reshape(-1))
    return v


@njit(cache=True, nogil=True)
def row_sq_norms(indptr, data, out):
    """out[r] = |x_r|^2, summed in the row's stored order."""
    for r in range(indptr.size - 1):
        s = 0.0
        for p in range(indptr[r], indptr[r + 1]):
            s += data[p] * data[p]
        out[r] = s
    return out


@njit(cache=True, nogil=True)
def _diag_pre(sq_norms, kernel_id, gamma, coef0, degree, out):
    for r in range(sq_norms.size):
        out[r] = pre_kernel(kernel_id, sq_norms[r], sq_norms[r], sq_norms[r], gamma, coef0, degree)


def kernel_diag(sq_norms, kernel_id, gamma, coef0, degree, out):
    """out[r] = K(x_r, x_r), computed by the same formula as a column entry."""
    _diag_pre(sq_norms, kernel_id, gamma, coef0, degree, out)
    return from_pre(kernel_id, out)


@njit(cache=True, nogil=True)
def column_csr(
    x_idx, x_val, x_sq, indptr, indices, data, sq_norms, rows,
    kernel_id, gamma, coef0, degree, work, out,
):  # fmt: skip
    """out[q] = pre-K(x, x_r) for the q-th row r of ``rows`` (then :func:`from_pre`).

    x is scattered once into the dense zeroed ``work`` (length n_features) and
    each row reads its non-zeros against it: O(nnz of the rows), no index merge.
    ``work`` is zeroed again on return.
    """
    _csr_dots(
        x_idx, x_val, 0, x_idx.size, x_sq, indptr, indices, data, sq_norms, rows,
        kernel_id, gamma, coef0, degree, work, out,
    )  # fmt: skip
    return out


@njit(cache=True, nogil=True, inline="always")
def _csr_dots(
    x_idx, x_val, lo, hi, x_sq, indptr, indices, data, sq_norms, rows,
    kernel_id, gamma, coef0, degree, work, out,
):  # fmt: skip
    """:func:`column_csr` of x = (x_idx, x_val)[lo:hi] (:func:`epoch_sums` too)."""
    for p in range(lo, hi):
        work[x_idx[p]] = x_val[p]
    for q in range(rows.size):
        r = rows[q]
        dot = 0.0
        for p in range(indptr[r], indptr[r + 1]):
            dot += data[p] * work[indices[p]]
        out[q] = pre_kernel(kernel_id, dot, x_sq, sq_norms[r], gamma, coef0, degree)
    for p in range(lo, hi):
        work[x_idx[p]] = 0.0


@njit(cache=True, nogil=True)
def column_csc(
    x_idx, x_val, x_sq, colptr, rowidx, cdata, sq_norms, rows,
    kernel_id, gamma, coef0, degree, dots, out,
):  # fmt: skip
    """:func:`column_csr` through the CSC copy of the local rows.

    Cheaper when x's features are rare: it touches only the columns where x
    is non-zero. Terms still come in ascending feature order, so results are
    bitwise equal to the CSR path (a skipped zero term does not change a float sum).
    """
    for t in range(dots.size):  # a loop: no slice-assignment checks to compile
        dots[t] = 0.0
    for p in range(x_idx.size):
        f = x_idx[p]
        v = x_val[p]
        for q in range(colptr[f], colptr[f + 1]):
            dots[rowidx[q]] += cdata[q] * v
    for q in range(rows.size):
        r = rows[q]
        out[q] = pre_kernel(kernel_id, dots[r], x_sq, sq_norms[r], gamma, coef0, degree)
    return out


DENSE_BLOCK = 1024  # rows per block of :func:`column_dense`: its dot products stay in L1


@njit(cache=True, nogil=True)
def column_dense(
    x_idx, x_val, x_sq, XT, sq_norms, rows, kernel_id, gamma, coef0, degree, dots, out,
):  # fmt: skip
    """The kernel values K(x, x_r) (:func:`column_csr`, then :func:`from_pre_flat`) through a
    dense feature-major copy ``XT`` (``rows`` sorted).

    For dense, low-dimensional shards (ijcnn1, usps): x's features add
    contiguous, vectorised passes (four features each) over a block of rows,
    whose dot products stay in L1 (2x faster than one whole-length pass a
    feature on cadata).
    Terms are added in ascending feature order as in the CSR path, so results
    are bitwise equal to it (the extra terms are exact zeros).
    """
    n = dots.size
    if rows.size == n:  # sorted, so every row in order: values go straight into ``out``
        dense_rows(x_idx, x_val, x_sq, XT, sq_norms, kernel_id, gamma, coef0, degree, out, 0, n)
        return out
    for b0 in range(0, n, DENSE_BLOCK):
        d = dots[b0 : min(b0 + DENSE_BLOCK, n)]
        _dense_block(x_idx, x_val, x_sq, XT, sq_norms, kernel_id, gamma, coef0, degree, d, b0)
    for q in range(rows.size):
        out[q] = dots[rows[q]]
    from_pre_flat(kernel_id, out[: rows.size])
    return out


@njit(cache=True, nogil=True)
def dense_rows(x_idx, x_val, x_sq, XT, sq_norms, kernel_id, gamma, coef0, degree, acc, lo, hi):
    """:func:`column_dense`'s kernel values of rows lo..hi-1 into ``acc``: a function of its
    own, which a thread calls on its range (lo a multiple of :data:`DENSE_BLOCK` keeps the
    blocks aligned; the values do not depend on it). exp runs on each block while it is in
    L1."""
    for b0 in range(lo, hi, DENSE_BLOCK):
        d = acc[b0 : min(b0 + DENSE_BLOCK, hi)]
        _dense_block(x_idx, x_val, x_sq, XT, sq_norms, kernel_id, gamma, coef0, degree, d, b0)
        from_pre_flat(kernel_id, d)


@njit(cache=True, nogil=True, inline="always")
def _dense_block(x_idx, x_val, x_sq, XT, sq_norms, kernel_id, gamma, coef0, degree, d, b0):
    """The pre-kernel values of the block of rows b0..b0 + d.size - 1 into ``d``."""
    nf, m = x_idx.size, d.size
    for t in range(m):  # a loop: no slice-assignment checks to compile
        d[t] = 0.0
    p = 0
    while p + 4 <= nf:  # four features a pass: the same additions, a quarter of the trips
        x0, x1 = XT[x_idx[p], b0 : b0 + m], XT[x_idx[p + 1], b0 : b0 + m]
        x2, x3 = XT[x_idx[p + 2], b0 : b0 + m], XT[x_idx[p + 3], b0 : b0 + m]
        v0, v1, v2, v3 = x_val[p], x_val[p + 1], x_val[p + 2], x_val[p + 3]
        for t in range(m):
            s = d[t] + x0[t] * v0
            s = s + x1[t] * v1
            s = s + x2[t] * v2
            d[t] = s + x3[t] * v3
        p += 4
    for q in range(p, nf):
        xf = XT[x_idx[q], b0 : b0 + m]
        v = x_val[q]
        for t in range(m):
            d[t] += xf[t] * v
    pre_kernel_pass(kernel_id, d, x_sq, sq_norms[b0 : b0 + m], gamma, coef0, degree)


@njit(cache=True, nogil=True, inline="always")
def int_dots(d, XT8, feats, vals, nf, b0):
    """d[t] = sum_p vals[p] XT8[feats[p], b0 + t] for t < d.size, p < nf, in int16 (the
    caller bounds the sums), four features a pass as :func:`column_dense`."""
    m = d.size
    for t in range(m):
        d[t] = 0
    p = 0
    while p + 4 <= nf:
        x0, x1 = XT8[feats[p], b0 : b0 + m], XT8[feats[p + 1], b0 : b0 + m]
        x2, x3 = XT8[feats[p + 2], b0 : b0 + m], XT8[feats[p + 3], b0 : b0 + m]
        v0, v1 = np.int16(vals[p]), np.int16(vals[p + 1])
        v2, v3 = np.int16(vals[p + 2]), np.int16(vals[p + 3])
        for t in range(m):  # (the casts keep the arithmetic in int16 lanes)
            s = d[t] + v0 * np.int16(x0[t]) + v1 * np.int16(x1[t])
            d[t] = np.int16(s + v2 * np.int16(x2[t]) + v3 * np.int16(x3[t]))
        p += 4
    for q in range(p, nf):
        xf, v = XT8[feats[q], b0 : b0 + m], np.int16(vals[q])
        for t in range(m):
            d[t] = np.int16(d[t] + v * np.int16(xf[t]))


@njit(cache=True, nogil=True)
def column_table(x_idx, x_val, x_sq, XT8, sq_norms, rows, table, acc, dots, out):
    """rbf's column (after :func:`from_pre`) when x and the rows are integers within the
    ``table`` (:func:`rbf_table`): :func:`column_dense`'s passes in int16 over the int8
    copy ``XT8``, then table[n], n = |x|^2 + |x_r|^2 - 2 x.x_r, an exact integer.

    Exact as :func:`_table_row` (norms below 1024), so the values are those of the float
    paths and :func:`from_table`, with a quarter of a float32 copy's memory traffic.
    ``acc``: int16 scratch of min(n, :data:`DENSE_BLOCK`) (the engine's loop allocates
    nothing)."""
    n = dots.size
    every = rows.size == n
    o = out if every else dots
    table_rows(x_idx, x_val, x_sq, XT8, sq_norms, table, acc, o, 0, n)
    if not every:
        for q in range(rows.size):
            out[q] = dots[rows[q]]
    return out


@njit(cache=True, nogil=True)
def table_rows(x_idx, x_val, x_sq, XT8, sq_norms, table, acc, out, lo, hi):
    """:func:`column_table`'s values of rows lo..hi-1 into ``out`` (``acc``: int16 scratch of
    a block), as :func:`dense_rows`."""
    b = np.int32(x_sq)
    for b0 in range(lo, hi, DENSE_BLOCK):
        m = min(DENSE_BLOCK, hi - b0)
        d = acc[:m]
        int_dots(d, XT8, x_idx, x_val, x_idx.size, b0)
        o = out[b0 : b0 + m]
        sq = sq_norms[b0 : b0 + m]
        for t in range(m):  # the table's positions n < table.size <= 4096, in int16: vector code
            d[t] = np.int16(b + np.int32(sq[t]) - 2 * np.int32(d[t]))
        for t in range(m):  # then the look-ups alone (one loop of both was scalar: 20% slower)
            o[t] = table[d[t]]


# -- a whole column in threads: each thread its range of blocks, by the serial functions
# -- above (written inline in a prange body, the loops lost their vector code: 2.5-3x slower)


@njit(cache=True, nogil=True, inline="always")
def _part(n, p, parts):
    """Rows lo..hi-1 of part p of ``parts``: whole blocks, as even as they can be."""
    blocks = (n + DENSE_BLOCK - 1) // DENSE_BLOCK
    lo = blocks * p // parts * DENSE_BLOCK
    return lo, min(n, blocks * (p + 1) // parts * DENSE_BLOCK)


@njit(cache=True, nogil=True, parallel=True)
def dense_column_threads(
    x_idx, x_val, x_sq, XT, sq_norms, kernel_id, gamma, coef0, degree, out, parts,
):  # fmt: skip
    """:func:`column_dense` of every row into out[:n] in ``parts`` ranges run by numba's
    threads: the same values (a row's arithmetic does not depend on its block or thread).
    ``out`` may be longer than the n rows (a cache's part column)."""
    n = sq_norms.size
    for p in prange(parts):
        lo, hi = _part(n, p, parts)
        dense_rows(x_idx, x_val, x_sq, XT, sq_norms, kernel_id, gamma, coef0, degree, out, lo, hi)
    return out


@njit(cache=True, nogil=True, parallel=True)
def table_column_threads(x_idx, x_val, x_sq, XT8, sq_norms, table, acc, out, parts):
    """:func:`column_table` of every row into out[:n] in ``parts`` ranges run by numba's
    threads (``acc``: int16 scratch of ``parts`` blocks)."""
    n = sq_norms.size
    for p in prange(parts):
        lo, hi = _part(n, p, parts)
        scratch = acc[p * DENSE_BLOCK : (p + 1) * DENSE_BLOCK]
        table_rows(x_idx, x_val, x_sq, XT8, sq_norms, table, scratch, out, lo, hi)
    return out


@njit(cache=True, nogil=True)
def csc_cost(x_idx, colptr):
    """Work of :func:`column_csc` for x: non-zeros in x's columns."""
    c = 0
    for p in range(x_idx.size):
        c += colptr[x_idx[p] + 1] - colptr[x_idx[p]]
    return c


@njit(cache=True, nogil=True, inline="always")
def _chunk_features(r, indptr, indices, data, fmap, ks, vs):
    """Row r's features that F's chunk uses, as FT's rows (``ks``) and values (``vs``); how
    many."""
    m = 0
    for p in range(indptr[r], indptr[r + 1]):
        f = indices[p]
        k = fmap[f] if f < fmap.size else -1
        if k >= 0:
            ks[m], vs[m] = k, data[p]
            m += 1
    return m


@njit(cache=True, nogil=True, inline="always")
def _block_row(
    r, indptr, indices, data, sq, fmap, FT, f_sq, kernel_id, gamma, coef0, degree, o, ks, vs
):  # fmt: skip
    """Row r's pre-kernel values against F's chunk (feature-major ``FT``) into ``o``: x_r's
    features that F uses (into ``ks``, ``vs``: FT's rows, scratch), then four of them a pass
    over the f_s, as :func:`column_dense` (the same additions; make_classification's blocks
    1.5 -> 0.93 ms)."""
    n_f = FT.shape[1]
    m = _chunk_features(r, indptr, indices, data, fmap, ks, vs)
    for s in range(n_f):
        o[s] = 0.0
    p = 0
    while p + 4 <= m:
        x0, x1, x2, x3 = FT[ks[p]], FT[ks[p + 1]], FT[ks[p + 2]], FT[ks[p + 3]]
        v0, v1, v2, v3 = vs[p], vs[p + 1], vs[p + 2], vs[p + 3]
        for s in range(n_f):
            t = o[s] + v0 * x0[s]
            t = t + v1 * x1[s]
            t = t + v2 * x2[s]
            o[s] = t + v3 * x3[s]
        p += 4
    for e in range(p, m):
        v, ft = vs[e], FT[ks[e]]
        for s in range(n_f):
            o[s] += v * ft[s]
    pre_kernel_pass(kernel_id, o, sq[r], f_sq, gamma, coef0, degree)


LANES = 8  # partial sums of a weighted kernel sum: s goes to lane s mod LANES


@njit(cache=True, nogil=True)
def _weighted_row_sums(K, coef, lanes):
    """lanes[q, s % LANES] += coef[s] K[q, s], s in order (K's first column is lane 0).

    Eight independent chains: a single running sum would wait for each addition.
    """
    n = K.shape[1]
    n8 = n - n % LANES
    for q in range(K.shape[0]):
        a0, a1, a2, a3 = lanes[q, 0], lanes[q, 1], lanes[q, 2], lanes[q, 3]
        a4, a5, a6, a7 = lanes[q, 4], lanes[q, 5], lanes[q, 6], lanes[q, 7]
        for s in range(0, n8, LANES):
            a0 += coef[s] * K[q, s]
            a1 += coef[s + 1] * K[q, s + 1]
            a2 += coef[s + 2] * K[q, s + 2]
            a3 += coef[s + 3] * K[q, s + 3]
            a4 += coef[s + 4] * K[q, s + 4]
            a5 += coef[s + 5] * K[q, s + 5]
            a6 += coef[s + 6] * K[q, s + 6]
            a7 += coef[s + 7] * K[q, s + 7]
        lanes[q, 0], lanes[q, 1], lanes[q, 2], lanes[q, 3] = a0, a1, a2, a3
        lanes[q, 4], lanes[q, 5], lanes[q, 6], lanes[q, 7] = a4, a5, a6, a7
        for s in range(n8, n):
            lanes[q, s - n8] += coef[s] * K[q, s]
    return lanes


@njit(cache=True, nogil=True)
def _lane_totals(lanes, out):
    """out[q] = the lanes of row q added pairwise, in a fixed tree."""
    for q in range(lanes.shape[0]):
        a = lanes[q]
        out[q] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
    return out


def lane_sums(K: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """sum_s coef[s] K[q, s] for each row q, added as :func:`kernel_sums` adds them."""
    lanes = _weighted_row_sums(K, coef, np.zeros((K.shape[0], LANES)))
    return _lane_totals(lanes, np.empty(K.shape[0]))


@njit(cache=True, nogil=True)
def epoch_sums(
    x_indptr, x_indices, x_data, x_sq, xrows, epochs, indptr, indices, data, sq_norms, coef,
    kernel_id, gamma, coef0, degree, work, out,
):  # fmt: skip
    """out[q] = sum_s coef[s, e] K(f_s, x_r) for r = ``xrows[q]`` and e = ``epochs[q]``, over
    the rows s of F = (indptr, indices, data) with coef[s, e] != 0: each r's values as
    :func:`column_csr` and :func:`from_pre_flat` give them, added as :func:`lane_sums`
    adds them, in one call for all epochs."""
    n_f = indptr.size - 1
    moved = np.empty(n_f, dtype=np.int64)
    c = np.empty(n_f)
    lanes, total = np.empty((1, LANES)), np.empty(1)
    for e in range(coef.shape[1]):
        m = 0  # F's rows that moved since departure e, in order
        for s in range(n_f):
            if coef[s, e] != 0.0:
                moved[m], c[m] = s, coef[s, e]
                m += 1
        K = np.empty((1, m))
        for q in range(xrows.size):
            if epochs[q] != e:
                continue
            r = xrows[q]
            _csr_dots(
                x_indices, x_data, x_indptr[r], x_indptr[r + 1], x_sq[r], indptr, indices,
                data, sq_norms, moved[:m], kernel_id, gamma, coef0, degree, work, K[0],
            )  # fmt: skip
            from_pre_flat(kernel_id, K[0])
            lanes[:] = 0.0
            _weighted_row_sums(K, c[:m], lanes)
            out[q] = _lane_totals(lanes, total)[0]
    return out


def arithmetic_probe() -> bytes:
    """The bits of exp and tanh, as the solver computes them, on fixed arguments.

    Every rank recomputes K_ij and the two-variable step from the same packets, so
    ranks must agree bitwise on the kernel's arithmetic. That fails across CPUs
    whose code uses fused multiply-adds differently, or builds whose tanh differ.
    """
    x = np.linspace(-60.0, 2.0, 4093)
    return from_pre(RBF, x.copy()).tobytes() + from_pre(SIGMOID, x / 8.0).tobytes()


@njit(cache=True, nogil=True)
def take_rows(indptr, indices, data, rows):
    """CSR arrays (indptr, indices, data) of ``rows``, in that order."""
    out_ptr = np.empty(rows.size + 1, dtype=np.int64)
    out_ptr[0] = 0
    for q in range(rows.size):
        out_ptr[q + 1] = out_ptr[q] + indptr[rows[q] + 1] - indptr[rows[q]]
    out_idx = np.empty(out_ptr[rows.size], dtype=np.int32)
    out_val = np.empty(out_ptr[rows.size], dtype=np.float64)
    for q in range(rows.size):  # o in a local: the stores could alias out_ptr, read again each time
        s, o = indptr[rows[q]], out_ptr[q]
        for p in range(out_ptr[q + 1] - o):
            out_idx[o + p] = indices[s + p]
            out_val[o + p] = data[s + p]
    return out_ptr, out_idx, out_val


@njit(cache=True, nogil=True)
def transpose_csr(indptr, indices, data, n_cols):
    """The CSC arrays (colptr, rowidx, cdata) of CSR rows; rows ascend within each column."""
    colptr = np.zeros(n_cols + 1, dtype=np.int64)
    for p in range(indptr[-1]):
        colptr[indices[p] + 1] += 1
    for f in range(n_cols):
        colptr[f + 1] += colptr[f]
    fill = colptr[:-1].copy()
    rowidx = np.empty(indptr[-1], dtype=np.int32)
    cdata = np.empty(indptr[-1], dtype=np.float64)
    for r in range(indptr.size - 1):
        for p in range(indptr[r], indptr[r + 1]):
            q = fill[indices[p]]
            rowidx[q], cdata[q] = r, data[p]
            fill[indices[p]] = q + 1
    return colptr, rowidx, cdata


@njit(cache=True, nogil=True)
def feature_major(indptr, indices, data, XT):
    """XT[f, r] = X[r, f]: the dense feature-major copy of CSR rows (XT zeroed)."""
    for r in range(indptr.size - 1):
        for p in range(indptr[r], indptr[r + 1]):
            XT[indices[p], r] = data[p]
    return XT


@njit(cache=True, nogil=True)
def _feature_major(f_indptr, f_indices, f_data, s0, fmap, FT):
    """FT[fmap[f], s - s0] = F[s, f] for the rows s0.. of F that FT holds (FT zeroed)."""
    for s in range(FT.shape[1]):
        for p in range(f_indptr[s0 + s], f_indptr[s0 + s + 1]):
            FT[fmap[f_indices[p]], s] = f_data[p]
    return FT


@njit(cache=True, nogil=True, parallel=True)
def _matrix_pre(
    a_indptr, a_indices, a_data, a_sq, b_indptr, b_indices, b_data, b_sq,
    n_features, kernel_id, gamma, coef0, degree, out,
):  # fmt: skip
    """out[s, t] = pre-K(a_s, b_t): prediction blocks, threads over rows of a."""
    n_a = a_indptr.size - 1
    n_b = b_indptr.size - 1
    chunk = 64
    for c in prange((n_a + chunk - 1) // chunk):
        work = np.zeros(n_features, dtype=np.float64)
        for s in range(c * chunk, min(n_a, (c + 1) * chunk)):
            for p in range(a_indptr[s], a_indptr[s + 1]):
                work[a_indices[p]] = a_data[p]
            for t in range(n_b):
                dot = 0.0
                for p in range(b_indptr[t], b_indptr[t + 1]):
                    dot += b_data[p] * work[b_indices[p]]
                out[s, t] = pre_kernel(kernel_id, dot, a_sq[s], b_sq[t], gamma, coef0, degree)
            for p in range(a_indptr[s], a_indptr[s + 1]):
                work[a_indices[p]] = 0.0
    return out


def sq_norms_of(X: sp.csr_matrix) -> np.ndarray:
    indptr, _, data = csr_arrays(X)
    return row_sq_norms(indptr, data, np.empty(X.shape[0]))


def restrict_columns(X: sp.csr_matrix, used: np.ndarray) -> sp.csr_matrix:
    """X's entries in the columns ``used`` (sorted), renumbered 0..len(used)-1; O(nnz log d)."""
    pos = np.minimum(np.searchsorted(used, X.indices), max(used.size - 1, 0))
    keep = used[pos] == X.indices if used.size else np.zeros(X.indices.size, dtype=bool)
    row = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    counts = np.bincount(row[keep], minlength=X.shape[0])
    indptr = np.concatenate(([0], np.cumsum(counts)))
    return sp.csr_matrix((X.data[keep], pos[keep], indptr), shape=(X.shape[0], used.size))


def kernel_matrix(
    A: sp.csr_matrix, B: sp.csr_matrix, kernel_id: int, gamma: float, coef0: float, degree: int
) -> np.ndarray:
    """Dense K(A, B); ``B`` is the short side (support vectors).

    Only B's features take part in dot products: when they are few next to
    the feature range, both sides are cut to them, so the work vectors stay
    small even for indices near 2^31 (norms come from the whole rows).
    """
    a_sq, b_sq = sq_norms_of(A), sq_norms_of(B)
    n_features = max(A.shape[1], B.shape[1])
    used = np.unique(B.indices)
    if used.size < n_features // 2:
        A, B = restrict_columns(sp.csr_matrix(A), used), restrict_columns(B, used)
        n_features = used.size
    out = np.empty((A.shape[0], B.shape[0]))
    _matrix_pre(
        *csr_arrays(A),
        a_sq,
        *csr_arrays(B),
        b_sq,
        n_features,
        kernel_id,
        float(gamma),
        float(coef0),
        int(degree),
        out,
    )
    return from_pre(kernel_id, out)


# -- weighted kernel sums: decision values (sum_s coef[p, s] K(sv_s, x) - rho[p]) and
# -- reconstruction (sum_s coef[s] K(f_s, x_r) over stale rows) ------------------------------

_LANE_LIMIT = 1 << 22  # elements of the lane sums of one super-block of rows (32 MB)
# a chunk of F (SVs, changed vectors): at most _SV_TILE vectors (a row's kernel values, 16 KB,
# stay in L1) and _FT_TILE elements of its feature-major copy (32 MB). Many features (rcv1-like)
# make chunks of few vectors, each of which costs every row a scan of its features.
_SV_TILE = 2048
_FT_TILE = 1 << 22
# the arrays of the path not taken (:func:`_sums_row`)
_NO_FT, _NO_FT8, _NO_N = np.zeros((0, 0)), np.zeros((0, 0), dtype=np.int8), np.zeros(0, np.int64)


@njit(cache=True, nogil=True, inline="always")
def _table_row(r, indptr, indices, data, sq, fmap, FT8, f_n, at, acc, ks, vs):
    """Where row r's rbf values against F's chunk sit in the ``table`` when every value is
    an integer (:func:`_sums_table`): the dot products in int16 over the chunk's int8 copy
    ``FT8``, then at[s] = n = |f_s|^2 + |x_r|^2 - 2 x_r.f_s (``f_n``: the |f_s|^2).

    Exact: the table's norms are below 2048, so |values| < 46 and every partial sum
    |x.f| < 2048. The dot products, hence n and the values, are those of :func:`_block_row`
    and :func:`from_table`, at half their cost (8x less of the chunk to read)."""
    m = _chunk_features(r, indptr, indices, data, fmap, ks, vs)
    n_f = FT8.shape[1]
    int_dots(acc[:n_f], FT8, ks, vs, m, 0)
    b = np.int64(sq[r])
    for s in range(n_f):
        at[s] = f_n[s] + b - 2 * np.int64(acc[s])


@njit(cache=True, nogil=True, inline="always")
def _table_lane_sums(at, table, coef, lanes):
    """:func:`_weighted_row_sums` of one row whose values are table[at[s]]: the same terms in
    the same lanes, read from the table as they are added (no row of values written and read
    back: a9a's reconstruction sums 2.1-2.4 -> 1.2-1.7 ns a value). Keep it in step with
    :func:`_weighted_row_sums` (the table tests compare the two paths' bits)."""
    n = at.size
    n8 = n - n % LANES
    a0, a1, a2, a3 = lanes[0], lanes[1], lanes[2], lanes[3]
    a4, a5, a6, a7 = lanes[4], lanes[5], lanes[6], lanes[7]
    for s in range(0, n8, LANES):
        a0 += coef[s] * table[at[s]]
        a1 += coef[s + 1] * table[at[s + 1]]
        a2 += coef[s + 2] * table[at[s + 2]]
        a3 += coef[s + 3] * table[at[s + 3]]
        a4 += coef[s + 4] * table[at[s + 4]]
        a5 += coef[s + 5] * table[at[s + 5]]
        a6 += coef[s + 6] * table[at[s + 6]]
        a7 += coef[s + 7] * table[at[s + 7]]
    lanes[0], lanes[1], lanes[2], lanes[3] = a0, a1, a2, a3
    lanes[4], lanes[5], lanes[6], lanes[7] = a4, a5, a6, a7
    for s in range(n8, n):
        lanes[s - n8] += coef[s] * table[at[s]]


@njit(cache=True, nogil=True, inline="always")
def _sums_row(
    r, lane_rows, k, at, acc, ks, vs, indptr, indices, data, sq, fmap, FT, FT8, f_sq, f_n,
    kernel_id, gamma, coef0, degree, coef, table,
):  # fmt: skip
    """Row r's kernel values against F's chunk (:func:`_block_row` and :func:`from_pre_flat`,
    or with a ``table`` :func:`_table_row`), added into its lanes (``lane_rows``: one per
    output p) (:func:`_weighted_row_sums`, :func:`_table_lane_sums`); ``k``, ``at``, ``acc``,
    ``ks``, ``vs``: scratch (:func:`_scratch`)."""
    if table.size:
        _table_row(r, indptr, indices, data, sq, fmap, FT8, f_n, at, acc, ks, vs)
        for p in range(coef.shape[0]):
            _table_lane_sums(at, table, coef[p], lane_rows[p])
        return
    _block_row(
        r, indptr, indices, data, sq, fmap, FT, f_sq, kernel_id, gamma, coef0, degree,
        k[0], ks, vs,
    )  # fmt: skip
    from_pre_flat(kernel_id, k[0])
    for p in range(coef.shape[0]):
        _weighted_row_sums(k, coef[p], lane_rows[p : p + 1])


@njit(cache=True, nogil=True, inline="always")
def _scratch(n_used, n_f):
    """A row's kernel values, table positions, int16 dot products and features in F's chunk
    (``n_used`` features, ``n_f`` vectors), once per run of rows (a row's own allocations
    cost 5% of ijcnn1's reconstruction sums)."""
    return (
        np.empty((1, n_f)),
        np.empty(n_f, dtype=np.int64),
        np.empty(n_f, dtype=np.int16),
        np.empty(n_used, dtype=np.int64),
        np.empty(n_used),
    )


@njit(cache=True, nogil=True, parallel=True)
def _sums_block(
    rows, q0, indptr, indices, data, sq, fmap, FT, FT8, f_sq, f_n,
    kernel_id, gamma, coef0, degree, coef, table, lanes,
):  # fmt: skip
    """lanes[q, p, s % LANES] += coef[p, s] K(f_s, x_r) for r = rows[q0 + q], q < lanes'
    length, F's chunk feature-major in ``FT`` (or, with a ``table``, ``FT8``); threads over
    rows, each with its own row of kernel values."""
    chunk = 8
    n = lanes.shape[0]
    n_used, n_f = max(FT.shape[0], FT8.shape[0]), max(FT.shape[1], FT8.shape[1])
    for c in prange((n + chunk - 1) // chunk):
        k, at, acc, ks, vs = _scratch(n_used, n_f)
        for q in range(c * chunk, min(n, (c + 1) * chunk)):
            _sums_row(
                rows[q0 + q], lanes[q], k, at, acc, ks, vs, indptr, indices, data, sq, fmap, FT,
                FT8, f_sq, f_n, kernel_id, gamma, coef0, degree, coef, table,
            )  # fmt: skip
    return lanes


@njit(cache=True, nogil=True)
def _sums_block_serial(
    rows, q0, indptr, indices, data, sq, fmap, FT, FT8, f_sq, f_n,
    kernel_id, gamma, coef0, degree, coef, table, lanes,
):  # fmt: skip
    """:func:`_sums_block` in this thread, for little work (one row, a small model)."""
    n_used, n_f = max(FT.shape[0], FT8.shape[0]), max(FT.shape[1], FT8.shape[1])
    k, at, acc, ks, vs = _scratch(n_used, n_f)
    for q in range(lanes.shape[0]):
        _sums_row(
            rows[q0 + q], lanes[q], k, at, acc, ks, vs, indptr, indices, data, sq, fmap, FT, FT8,
            f_sq, f_n, kernel_id, gamma, coef0, degree, coef, table,
        )  # fmt: skip
    return lanes


def _feature_chunks(f_indptr: np.ndarray, f_indices: np.ndarray) -> list:
    """(s0, s1, used features) of F's rows s0..s1-1: at most :data:`_SV_TILE` rows whose
    feature-major copy has at most :data:`_FT_TILE` elements (or 8 rows); s0 a multiple of
    ``LANES``, so that a term's lane does not depend on the chunks."""
    chunks, n_f, s0 = [], f_indptr.size - 1, 0
    while s0 < n_f:
        s1 = min(n_f, s0 + _SV_TILE)
        while True:
            used = np.unique(f_indices[f_indptr[s0] : f_indptr[s1]])
            if used.size * (s1 - s0) <= _FT_TILE or s1 - s0 <= LANES:
                break
            s1 = s0 + max(LANES, (s1 - s0) // 2 // LANES * LANES)
        chunks.append((s0, s1, used))
        s0 = s1
    return chunks


def decision_values(
    X: sp.csr_matrix, sv: sp.csr_matrix, coef: np.ndarray, rho: np.ndarray, kparams
) -> np.ndarray:
    """dec[r, p] = sum_s coef[p, s] K(sv_s, x_r) - rho[p]: any LIBSVM model's decision values.

    ``coef`` has one row per output (a class pair of C-SVC; the one function of
    SVR or one-class), ``kparams`` is (kernel_id, gamma, coef0, degree). Kernel
    values are training's (:func:`_block_row`, :func:`from_pre_flat`) and each
    output adds them in eight lanes (s mod 8), so a row's values have the same
    bits whatever the other rows, the blocks, the threads or the rank. As in
    LIBSVM, a feature of x that no SV has adds nothing to a dot product but
    counts in x's norm (rbf). Features are renumbered to those of the SVs
    first, so indices near 2^31 cost no memory.
    """
    X, sv = canonical_csr(X), canonical_csr(sv)
    coef = np.asarray(coef, dtype=np.float64)
    rho = np.asarray(rho, dtype=np.float64)
    n, m = X.shape[0], rho.size
    if coef.shape != (m, sv.shape[0]) or rho.shape != (m,):
        raise ValueError(
            f"coef has shape {coef.shape} and rho {rho.shape} for {sv.shape[0]} support "
            f"vectors: expected (m, {sv.shape[0]}) and (m,)"
        )
    if n == 0 or m == 0:
        return np.empty((n, m))
    sq, f_sq = sq_norms_of(X), sq_norms_of(sv)  # whole rows: unseen features count (LIBSVM)
    used = np.unique(sv.indices)
    X = (*csr_arrays(restrict_columns(X, used)), sq)
    F = (*csr_arrays(restrict_columns(sv, used)), f_sq)
    every = np.arange(n, dtype=np.int64)
    x_integral = int(kparams[0]) == RBF and is_integral(X[2])  # (the table's: rbf only)
    dec = _weighted_sums(X, every, F, coef, kparams, _PARALLEL_WORK, x_integral)
    dec -= rho
    return dec


def _weighted_sums(
    X: tuple, rows: np.ndarray, F: tuple, coef: np.ndarray, kparams, parallel: int,
    x_integral: bool = False,
) -> np.ndarray:  # fmt: skip
    """out[q, p] = sum_s coef[p, s] K(f_s, x_r), r = rows[q]: X and F as (indptr, indices,
    data, sq), ``rows`` int64.

    F goes in chunks (:data:`_SV_TILE`, :data:`_FT_TILE`) copied feature-major, the rows in
    super-blocks whose lanes fit :data:`_LANE_LIMIT`; each term goes to lane s mod
    ``LANES`` and the lanes are added pairwise, so a row's sums have the same bits
    whatever the other rows, the chunks, the threads or the rank. Blocks of at least
    ``parallel`` multiply-adds run in threads. Rows of integers (``x_integral``) against
    vectors of integers take their dot products in integers and exp from a table
    (:func:`_sums_table`, :func:`_table_row`): the same bits.
    """
    indptr, indices, data, sq = X
    f_indptr, f_indices, f_data, f_sq = F
    kid, gamma, coef0, degree = (
        int(kparams[0]),
        float(kparams[1]),
        float(kparams[2]),
        int(kparams[3]),
    )
    n, m = rows.size, coef.shape[0]
    out = np.empty((n, m))
    table = _sums_table(kid, gamma, sq[rows], F, x_integral)
    chunks = _feature_chunks(f_indptr, f_indices)
    fmap = np.full(int(f_indices.max(initial=0)) + 1, -1, dtype=np.int64)  # feature -> FT row
    rows_per = max(1, _LANE_LIMIT // (m * LANES))
    for r0 in range(0, n, rows_per):
        r1 = min(n, r0 + rows_per)
        lanes = np.zeros((r1 - r0, m, LANES))
        for s0, s1, u in chunks:
            fmap[u] = np.arange(u.size)
            FT = np.zeros((u.size, s1 - s0), dtype=np.int8 if table.size else np.float64)
            _feature_major(f_indptr, f_indices, f_data, s0, fmap, FT)
            FT, FT8 = (_NO_FT, FT) if table.size else (FT, _NO_FT8)
            f_n = f_sq[s0:s1].astype(np.int64) if table.size else _NO_N
            c = np.ascontiguousarray(coef[:, s0:s1])
            work = (r1 - r0) * (FT.size + FT8.size + c.size)
            block = _sums_block if work >= parallel else _sums_block_serial
            block(
                rows, r0, indptr, indices, data, sq, fmap, FT, FT8, f_sq[s0:s1], f_n,
                kid, gamma, coef0, degree, c, table, lanes,
            )  # fmt: skip
            fmap[u] = -1
        _lane_totals(lanes.reshape(-1, LANES), out[r0:r1].reshape(-1))
    return out


def _sums_table(kid: int, gamma: float, x_sq: np.ndarray, F: tuple, x_integral: bool):
    """The rbf table (:func:`rbf_table`) for F, (indptr, indices, data, sq), against rows of
    squared norms ``x_sq`` whose values are integers (``x_integral``): when F's values and
    every norm are integers too, sq_f + sq_x - 2 f.x is an exact integer n <= 2 (sq_f + sq_x)
    (the norms may count features the data omit: prediction's)."""
    if kid != RBF or not x_integral or x_sq.size == 0 or F[0].size == 1:
        return np.zeros(0)
    max_n = 2.0 * (x_sq.max() + F[3].max())
    if not max_n < EXP_TABLE_MAX or not all(is_integral(a) for a in (x_sq, F[3], F[2])):
        return np.zeros(0)
    return rbf_table(gamma, max_n)


def is_integral(a: np.ndarray) -> bool:
    """Whether every value of ``a`` is an integer (numpy: no compiled entry for Python)."""
    return bool(np.array_equal(np.floor(a), a))


def kernel_sums(
    f_indptr, f_indices, f_data, f_sq, f_coef, indptr, indices, data, sq, rows, kparams,
    x_integral: bool = False,
) -> np.ndarray:  # fmt: skip
    """acc[q] = sum_s f_coef[s] K(f_s, x_r) for the q-th local row r of ``rows``.

    F (CSR arrays: vectors whose alpha changed) against the rows, as prediction adds
    a model's terms (:func:`_weighted_sums`): each term goes to lane s mod ``LANES``
    whatever the chunks, blocks and threads, so the sum does not depend on the number
    of ranks. ``x_integral``: every value of the local rows is an integer (the rbf table).
    """
    if f_indptr.size == 1 or rows.size == 0:
        return np.zeros(rows.size)
    coef = np.ascontiguousarray(f_coef, dtype=np.float64).reshape(1, -1)
    F = (f_indptr, f_indices, f_data, f_sq)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    X = (indptr, indices, data, sq)
    return _weighted_sums(X, rows, F, coef, kparams, _PARALLEL_SUMS, x_integral)[:, 0]
