"""Kernel columns K(x, x_r) over a shard's rows, the solver's main work: through the rows'
CSR arrays, their CSC copy, a dense feature-major copy (float64, float32 or int8), in one
thread or several. Every path gives the same bits."""

from __future__ import annotations

import numpy as np
from numba import prange

from psvm.jit import njit
from psvm.kernels.values import from_pre_flat, pre_kernel, pre_kernel_pass


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
        # then the look-ups alone (one loop of both was scalar: 20% slower), by unsigned
        # positions (n >= 0), which skip numba's negative-index test: w8a 0.86 -> 0.73 ns a value
        # (not by a view of d: a cached loop with one loads numba's array module at start)
        for t in range(m):
            o[t] = table[np.uint16(d[t])]


# -- a whole column in threads: each thread its range of blocks, by the serial functions
# -- above (written inline in a prange body, the loops lost their vector code: 2.5-3x slower)


@njit(cache=True, nogil=True, inline="always")
def block_range(n, p, parts, block):
    """Rows lo..hi-1 of part p of ``parts`` of n rows: whole blocks of ``block`` rows, as even
    as they can be (a thread's range; also the solver's passes, :mod:`psvm.svc.passes`)."""
    blocks = (n + block - 1) // block
    return blocks * p // parts * block, min(n, blocks * (p + 1) // parts * block)


@njit(cache=True, nogil=True, parallel=True)
def dense_column_threads(
    x_idx, x_val, x_sq, XT, sq_norms, kernel_id, gamma, coef0, degree, out, parts,
):  # fmt: skip
    """:func:`column_dense` of every row into out[:n] in ``parts`` ranges run by numba's
    threads: the same values (a row's arithmetic does not depend on its block or thread).
    ``out`` may be longer than the n rows (a cache's part column)."""
    n = sq_norms.size
    for p in prange(parts):
        lo, hi = block_range(n, p, parts, DENSE_BLOCK)
        dense_rows(x_idx, x_val, x_sq, XT, sq_norms, kernel_id, gamma, coef0, degree, out, lo, hi)
    return out


@njit(cache=True, nogil=True, parallel=True)
def table_column_threads(x_idx, x_val, x_sq, XT8, sq_norms, table, acc, out, parts):
    """:func:`column_table` of every row into out[:n] in ``parts`` ranges run by numba's
    threads (``acc``: int16 scratch of ``parts`` blocks)."""
    n = sq_norms.size
    for p in prange(parts):
        lo, hi = block_range(n, p, parts, DENSE_BLOCK)
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
