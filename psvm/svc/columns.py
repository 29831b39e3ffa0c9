"""Kernel values against one rank's rows: columns, single pairs and weighted sums.

A column K(x, local rows) takes the cheapest of three numba paths for each x
(CSR rows, a CSC copy, or a dense feature-major copy when that is at most
1.5x the size of the CSR arrays, or 8x and 32 MB), all bitwise equal; then the
kernel's transcendental part is applied to the contiguous result
(:func:`psvm.kernels.from_pre_flat`). :func:`kernel_column` is that choice, used by
the compiled loop and by :meth:`LocalKernel.column` alike.
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp

from psvm.gram import PRECOMPUTED, gram_column, gram_diag, gram_sums, serial_numbers
from psvm.jit import njit
from psvm.kernels import (
    DENSE_BLOCK,
    RBF,
    all_integers,
    column_csc,
    column_csr,
    column_dense,
    column_table,
    csc_cost,
    csr_arrays,
    dense_column_threads,
    epoch_sums,
    feature_major,
    from_pre_flat,
    from_table,
    is_integral,
    kernel_diag,
    kernel_sums,
    rbf_table,
    row_sq_norms,
    table_column_threads,
    transpose_csr,
)

# empty arrays by (dtype, dimensions), shared: the engine's arguments for the copies a kernel
# does not have (nothing writes into an empty array)
_NONE = {
    (t, d): np.zeros((0,) * d, dtype=t)
    for t in (np.float64, np.float32, np.int8, np.int16, np.int32, np.int64)
    for d in (1, 2)
}
_FEW_ROWS = 32  # up to this many rows, :meth:`LocalKernel.sums` goes through epoch_sums
# a dense column's work per thread (rows x (1 + x's features / 4, or / 16 in int8), about
# 0.5 ns a unit), below which a thread costs more than it saves: on 2 cores a column of
# 8,000 rows of 22 floats took 30 µs in one thread, 17.5 µs in two; 1,000 rows 5.2 and 6.4 µs
THREAD_WORK = 1 << 14
DENSE_BYTES = 32 * 2**20  # a dense copy up to 8x the CSR arrays is kept when this small


def fits_float32(data: np.ndarray) -> bool:
    """Whether every value is exactly a float32 (then a float32 copy loses nothing)."""
    with np.errstate(over="ignore"):
        return bool((data.astype(np.float32) == data).all())


@njit(cache=True, nogil=True, inline="always")
def _parts(work, threads, every, n):
    """Ranges of a dense column of ``work`` (:func:`kernel_column`'s units), one a thread:
    one for part of a column (the rows that rejoined the window) or too little work for two;
    each gets whole blocks of rows."""
    if threads < 2 or not every or work < 2 * THREAD_WORK:
        return 1
    return min(threads, work // THREAD_WORK, (n + DENSE_BLOCK - 1) // DENSE_BLOCK)


@njit(cache=True, nogil=True)
def kernel_column(ker, kp, idx, val, x_sq, rows, out, csr_work):
    """out[q] = K(x, x_r), r the q-th of ``rows`` (window positions): the cheapest path.

    The column-major copies read only x's features (for all rows), CSR the
    non-zeros of ``rows``; estimated costs are in the same units. All paths
    give the same bits. A large full column runs in the rank's threads (``kp``'s last
    entry), each on its range of rows.
    """
    indptr, indices, data, sq, row_nnz, XT, colptr, rowidx, cdata, work, dots, XT32 = ker[:12]
    table, XT8, acc16 = ker[12:]
    kid, gamma, coef0, degree, has_dense, has_csc, threads = kp
    if kid == PRECOMPUTED:  # sq holds the rows' serial numbers
        gram_column(idx, val, sq, rows, work, out)
        return
    n = sq.size
    # rbf on integers (n <= 2 (x_sq + max sq) within the table): exp from the table
    by_table = table.size > 0 and 4.0 * x_sq < table.size and all_integers(val)
    dense = csr_work  # (no dense copy, or an int8 one and x not within the table)
    if has_dense and (by_table or not XT8.size):  # an int8 pass costs a quarter (w8a, a9a)
        dense = idx.size * n // (16 if XT8.size else 4)
    csc = csc_cost(idx, colptr) + n // 2 if has_csc else csr_work
    if dense < min(csc, csr_work):  # one dense copy: XT8 (integers), XT32 or XT (float64)
        parts = _parts(dense + n, threads, rows.size == n, n)
        if XT8.size:
            parts = min(parts, acc16.size // DENSE_BLOCK)  # a scratch block a range
            if parts > 1:
                table_column_threads(idx, val, x_sq, XT8, sq, table, acc16, out, parts)
            else:
                column_table(idx, val, x_sq, XT8, sq, rows, table, acc16, dots, out)
            return
        if parts > 1:
            if XT32.size:
                dense_column_threads(
                    idx, val, x_sq, XT32, sq, kid, gamma, coef0, degree, out, parts
                )
            else:
                dense_column_threads(idx, val, x_sq, XT, sq, kid, gamma, coef0, degree, out, parts)
            return
        if XT32.size:  # (the dense paths end with the kernel values, from_pre_flat's)
            column_dense(idx, val, x_sq, XT32, sq, rows, kid, gamma, coef0, degree, dots, out)
        else:
            column_dense(idx, val, x_sq, XT, sq, rows, kid, gamma, coef0, degree, dots, out)
        return
    if csc < csr_work:
        column_csc(
            idx, val, x_sq, colptr, rowidx, cdata, sq, rows, kid, gamma, coef0, degree, dots, out
        )
    else:
        column_csr(
            idx, val, x_sq, indptr, indices, data, sq, rows, kid, gamma, coef0, degree, work, out
        )
    if by_table:
        from_table(out[: rows.size], table, gamma)
    else:
        from_pre_flat(kid, out[: rows.size])


class LocalKernel:
    """The kernel over a shard ``X`` (CSR, local rows); ``kparams`` = (id, gamma, coef0, degree).

    A precomputed kernel (:mod:`psvm.gram`) keeps each row's serial number in ``sq``
    and builds no column-major copy.
    """

    def __init__(self, X: sp.csr_matrix, kparams: tuple):
        self._build(*csr_arrays(X), X.shape[1], kparams)

    @classmethod
    def of_arrays(
        cls,
        indptr,
        indices,
        data,
        n_features: int,
        kparams: tuple,
        sq=None,
        diag=None,
        exact32: bool | None = None,
        integral: bool | None = None,
        sq_max: float | None = None,
    ) -> LocalKernel:
        """The kernel over CSR arrays (:func:`~psvm.kernels.csr_arrays`' dtypes); the rows'
        squared norms, kernel diagonal, :func:`fits_float32` and whether the values are
        integers (rbf) are computed unless given. ``sq_max``: the largest squared norm of any
        rank's rows, given when they all are integers: the rbf table then covers every
        column of training, which needs no CSC copy next to the int8 one."""
        self = cls.__new__(cls)
        self._build(
            indptr, indices, data, n_features, kparams, sq, diag, exact32, integral, sq_max=sq_max
        )
        return self

    @classmethod
    def of_csr(
        cls, parent: LocalKernel, csr: tuple, sq, diag, dense_memory: np.ndarray | None = None
    ) -> LocalKernel:
        """The kernel over the rows ``csr`` (with their norms and diagonal) by ``parent``'s
        settings: a window's (some of the parent's rows, and rows lent by other ranks), built
        without scipy (a window cut costs tens of microseconds on small problems). Its dense
        copy goes to the start of ``dense_memory`` when that has its type and room (the
        parent's own: pages touched already, where new ones cost the first cuts of a w8a fit
        60 ms of page faults on the Xeon VM)."""
        self = cls.__new__(cls)
        self._build(
            *csr,
            parent.n_features,
            parent.kparams,
            sq,
            diag,
            parent.exact32,
            parent.integral,
            parent.table,
            parent.whole_table,
            dense_memory=dense_memory,
        )
        return self

    def _build(
        self, indptr, indices, data, d, kparams, sq=None, diag=None, exact32=None, integral=None,
        table=None, whole_table=False, sq_max=None, dense_memory=None,
    ):  # fmt: skip
        n = indptr.size - 1
        self.n, self.n_features, self.kparams, self.kid = n, d, kparams, kparams[0]
        self.indptr, self.indices, self.data = indptr, indices, data
        self.row_nnz = indptr[1:] - indptr[:-1]  # np.diff: more Python than work on a window
        self.nnz = int(indptr[-1])
        self.work = np.zeros(d + 1)
        self.dots = np.zeros(n)
        self.XT = self.colptr = None
        self.exact32 = self.integral = False
        self.table = np.zeros(0)  # exp of rbf values by table (integer values)
        self.whole_table = False  # the table covers every rank's rows
        if self.kid == PRECOMPUTED:
            self._build_gram(sq, diag)
            return
        self.sq = row_sq_norms(indptr, data, np.empty(n)) if sq is None else sq
        self.diag = kernel_diag(self.sq, *kparams, np.empty(n)) if diag is None else diag
        # column-major copies for columns of x with few features: dense (vectorised
        # passes) when small, CSC when the data is sparse; each column takes the cheaper.
        # The dense copy is float32 when every value is one (0/1 features, pixels, counts):
        # half the memory traffic of a column, the same products in float64; int8 with an
        # rbf table (integers, |values| < 32): the columns of integer rows by
        # :func:`~psvm.kernels.column_table`.
        self.exact32 = fits_float32(data) if exact32 is None else exact32
        if integral is None:  # (integers past 2**24 are no float32: their table would be huge)
            integral = self.kid == RBF and self.exact32 and is_integral(data)
        self.integral = bool(integral)
        if table is not None:  # a window's: its parent's, whose rows' norms bound its own
            self.table, self.whole_table = table, whole_table
        elif self.integral and n:  # n = |x - x_r|^2 <= 4 max sq for any x with sq <= max sq
            self.table = rbf_table(kparams[1], 4.0 * (self.sq.max() if sq_max is None else sq_max))
            self.whole_table = sq_max is not None and self.table.size > 0
        dtype = np.int8 if self.table.size else np.float32 if self.exact32 else np.float64
        dense_bytes = dtype().itemsize * n * d
        csr_bytes = 12 * self.nnz
        if dense_bytes <= max(1.5 * csr_bytes, min(8 * csr_bytes, DENSE_BYTES)):
            m = dense_memory
            if m is not None and m.dtype == dtype and m.size >= d * n:  # (a window's, lent)
                XT = m[: d * n].reshape(d, n)
                XT.fill(0)
            else:
                XT = np.zeros((d, n), dtype=dtype)
            self.XT = feature_major(indptr, indices, data, XT)
        # sparse (with an int8 copy and a table for every row, CSC would serve no column)
        if 8 * n * d > 1.5 * csr_bytes and not (self.whole_table and self.XT is not None):
            self.colptr, self.rowidx, self.cdata = transpose_csr(indptr, indices, data, d)

    def rebuild_dense(self) -> None:
        """Write the dense copy again (a window's copy was written over it)."""
        if self.XT is not None:
            self.XT.fill(0)
            feature_major(self.indptr, self.indices, self.data, self.XT)

    def _build_gram(self, serial, diag) -> None:
        """Serial numbers in ``sq`` (each within the rows' columns: the compiled reads
        trust them) and the diagonal K(x_r, x_r) = x_r[serial_r]."""
        n = self.n
        if serial is None:
            serial = serial_numbers(self.indptr, self.indices, self.data, np.empty(n))
            bad = np.flatnonzero((serial < 1) | (serial >= self.n_features) | (serial % 1 != 0))
            if bad.size:
                raise ValueError(
                    f"row {bad[0]} of a precomputed kernel has serial number {serial[bad[0]]:g}: "
                    f"expected an integer in [1, {self.n_features - 1}] in column 0"
                )
        self.sq = serial
        self.diag = (
            gram_diag(self.indptr, self.indices, self.data, serial, np.empty(n))
            if diag is None
            else diag
        )

    def engine_arrays(self) -> tuple[tuple, tuple]:
        """The arrays and parameters of :func:`psvm.svc.engine.kernel_column`."""
        threads = numba.get_num_threads()  # of a large dense column (a scratch block each)
        XT = self.XT if self.XT is not None else _NONE[np.float64, 2]
        csc = self.colptr is not None

        def dense(dtype):  # the copy if it has this type, else an empty one
            return XT if XT.dtype == dtype else _NONE[dtype, 2]

        arrays = (
            self.indptr,
            self.indices,
            self.data,
            self.sq,
            self.row_nnz,
            dense(np.float64),
            self.colptr if csc else _NONE[np.int64, 1],
            self.rowidx if csc else _NONE[np.int32, 1],
            self.cdata if csc else _NONE[np.float64, 1],
            self.work,
            self.dots,
            dense(np.float32),
            self.table,
            dense(np.int8),
            np.empty(min(self.n, DENSE_BLOCK) * threads, np.int16)
            if XT.dtype == np.int8
            else _NONE[np.int16, 1],
        )
        kid, gamma, coef0, degree = self.kparams
        params = (
            int(kid),
            float(gamma),
            float(coef0),
            int(degree),
            self.XT is not None,
            self.colptr is not None,
            threads,
        )
        return arrays, params

    def packet_arrays(self) -> tuple:
        """The rows as :func:`psvm.svc.packets.pack` reads them."""
        return self.sq, self.indptr, self.indices, self.data

    def column(
        self, idx, val, x_sq: float, rows: np.ndarray, out: np.ndarray, csr_work: int | None = None
    ) -> np.ndarray:
        """out[q] = K(x, x_r) for the q-th row r of ``rows`` (sorted); returns ``out``.

        ``csr_work`` is the non-zero count of ``rows`` if the caller knows it. The
        compiled loop's own path (:func:`kernel_column`).
        """
        if csr_work is None:
            csr_work = int(self.row_nnz[rows].sum())
        arrays, params = self.engine_arrays()
        idx = np.ascontiguousarray(idx, dtype=np.int32)
        kernel_column(
            arrays,
            params,
            idx,
            np.ascontiguousarray(val, dtype=np.float64),
            float(x_sq),
            np.ascontiguousarray(rows, dtype=np.int64),
            out,
            int(csr_work),
        )
        return out[: rows.size]

    def sums(self, F: tuple, coef: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """sum_s coef[s] K(f_s, x_r) for each r in ``rows``, added in a fixed order; no
        coef[s] is zero (the callers' F holds the variables that moved).

        ``F`` is a CSR triple (:func:`~psvm.kernels.csr_arrays`). A few rows go through
        :meth:`epoch_sums` (each row's x against F as the shard: no feature-major copy of F
        to build), many through :func:`psvm.kernels.kernel_sums`. Both add the same kernel
        values in the same order (:meth:`epoch_sums` skips zero terms, which would shift
        the others' lanes).
        """
        if self.kid == PRECOMPUTED:  # F's rows read at the serial numbers of ``rows``
            return gram_sums(F, coef, self.sq[rows].astype(np.int64))
        coef = np.ascontiguousarray(coef, dtype=np.float64)
        if rows.size <= _FEW_ROWS:
            rows = np.ascontiguousarray(rows, dtype=np.int64)
            return self.epoch_sums(F, coef[:, None], rows, np.zeros(rows.size, dtype=np.int64))
        fi, fx, fd = F
        f_sq = row_sq_norms(fi, fd, np.empty(fi.size - 1))
        x = (self.indptr, self.indices, self.data, self.sq)
        return kernel_sums(fi, fx, fd, f_sq, coef, *x, rows, self.kparams, self.integral)

    def epoch_sums(self, F: tuple, coef: np.ndarray, rows: np.ndarray, epochs: np.ndarray):
        """For each q: :meth:`sums` of ``rows[q]`` over F's rows with a non-zero
        ``coef[:, epochs[q]]``, by those coefficients (the same bits, one call for every
        column of ``coef``; explicit kernels)."""
        fi, fx, fd = F
        f_sq = row_sq_norms(fi, fd, np.empty(fi.size - 1))
        x = (self.indptr, self.indices, self.data, self.sq)
        coef = np.ascontiguousarray(coef, dtype=np.float64)
        return epoch_sums(
            *x, rows, epochs, fi, fx, fd, f_sq, coef, *self.kparams, self.work, np.empty(rows.size)
        )
