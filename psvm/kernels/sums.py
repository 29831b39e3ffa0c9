"""Weighted kernel sums sum_s coef[s] K(f_s, x_r): decision values and the reconstruction's
gradient sums. Each term goes to lane s mod :data:`LANES`, so a row's sum has the same bits
whatever the chunks, blocks, threads or ranks."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import prange

from psvm.jit import njit
from psvm.kernels.columns import _csr_dots, int_dots
from psvm.kernels.csr import canonical_csr, csr_arrays, restrict_columns, sq_norms_of
from psvm.kernels.values import (
    EXP_TABLE_MAX,
    RBF,
    from_pre_flat,
    is_integral,
    pre_kernel_pass,
    rbf_table,
)

_PARALLEL_WORK = 1 << 20  # multiply-adds below which a block runs in one thread
# the same for :func:`kernel_sums` (reconstruction, a few ms of work): a parallel block waits
# for its slowest thread (on shared cores, for a time slice: make_classification's
# reconstructions took 6 to 55 ms, one thread 8 ms)
_PARALLEL_SUMS = 1 << 24


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


def epoch_sums(
    x_indptr, x_indices, x_data, x_sq, xrows, epochs, indptr, indices, data, sq_norms, coef,
    kernel_id, gamma, coef0, degree, work, out,
) -> np.ndarray:  # fmt: skip
    """out[q] = sum_s coef[s, e] K(f_s, x_r) for r = ``xrows[q]`` and e = ``epochs[q]``, over
    the rows s of F = (indptr, indices, data) with coef[s, e] != 0: each r's values as
    :func:`column_csr` and :func:`from_pre_flat` give them, added as :func:`lane_sums`
    adds them, in one call for all epochs."""
    n_f = indptr.size - 1
    return _epoch_sums(
        x_indptr, x_indices, x_data, x_sq, xrows, epochs, indptr, indices, data, sq_norms,
        coef, kernel_id, gamma, coef0, degree, work, out,
        (np.empty(n_f, dtype=np.int64), np.empty(n_f), np.empty((1, n_f)),
         np.empty((1, LANES)), np.empty(1)),
    )  # fmt: skip


@njit(cache=True, nogil=True)
def _epoch_sums(
    x_indptr, x_indices, x_data, x_sq, xrows, epochs, indptr, indices, data, sq_norms, coef,
    kernel_id, gamma, coef0, degree, work, out, scratch,
):  # fmt: skip
    """:func:`epoch_sums` with its scratch: F's moved rows, their coefficients and kernel
    values, a row's lanes and total."""
    moved, c, K_all, lanes, total = scratch
    n_f = indptr.size - 1
    for e in range(coef.shape[1]):
        m = 0  # F's rows that moved since departure e, in order
        for s in range(n_f):
            if coef[s, e] != 0.0:
                moved[m], c[m] = s, coef[s, e]
                m += 1
        K = K_all[:, :m]
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


@njit(cache=True, nogil=True)
def _feature_major(f_indptr, f_indices, f_data, s0, fmap, FT):
    """FT[fmap[f], s - s0] = F[s, f] for the rows s0.. of F that FT holds (FT zeroed)."""
    for s in range(FT.shape[1]):
        for p in range(f_indptr[s0 + s], f_indptr[s0 + s + 1]):
            FT[fmap[f_indices[p]], s] = f_data[p]
    return FT


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
        at[s] = np.uint16(f_n[s] + b - 2 * np.int64(acc[s]))


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


def _serial_scratch(n_used: int, n_f: int) -> tuple:
    """A row's kernel values, table positions, int16 dot products and features in F's chunk
    (``n_used`` features, ``n_f`` vectors), once per run of rows (a row's own allocations
    cost 5% of ijcnn1's reconstruction sums). From Python for :func:`_sums_block_serial`,
    which so allocates nothing and a small run loads it without numba's allocator
    (:mod:`psvm.jit`); compiled (:func:`_scratch`) inside the threads of
    :func:`_sums_block`, where fresh arrays let LLVM know they alias nothing (a9a's
    predictions took 10% longer with the scratch passed in)."""
    return (
        np.empty((1, n_f)),
        np.empty(n_f, dtype=np.uint16),  # table positions n < 4096: unsigned, as in table_rows
        np.empty(n_f, dtype=np.int16),
        np.empty(n_used, dtype=np.int64),
        np.empty(n_used),
    )


_scratch = njit(cache=True, nogil=True, inline="always")(_serial_scratch)


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
    kernel_id, gamma, coef0, degree, coef, table, lanes, scratch,
):  # fmt: skip
    """:func:`_sums_block` in this thread, for little work (one row, a small model), with
    :func:`_serial_scratch`."""
    k, at, acc, ks, vs = scratch
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
            args = (
                rows, r0, indptr, indices, data, sq, fmap, FT, FT8, f_sq[s0:s1], f_n,
                kid, gamma, coef0, degree, c, table, lanes,
            )  # fmt: skip
            if work >= parallel:
                _sums_block(*args)
            else:
                _sums_block_serial(*args, _serial_scratch(u.size, s1 - s0))
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
