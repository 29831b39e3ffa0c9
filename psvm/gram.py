"""Precomputed kernels (LIBSVM's ``-t 4``): kernel values read from the rows of a Gram matrix.

A row holds its serial number in column 0 and K(x, x_j) in column j, LIBSVM's
layout, in files and shards alike. As in LIBSVM's svm.cpp, K(x, z) = x[serial(z)]:
the value in row x at the column named by z's serial number. The engine's column
K(x_i, .) reads the packet's row x_i, scattered once as
:func:`psvm.kernels.column_csr` scatters it, at each window row's serial. A
:class:`psvm.svc.columns.LocalKernel` keeps each row's serial where the other
kernels keep |x|^2 (``sq``), so the engine's arrays and packets keep their shapes.

Weighted sums (the gradient's start and reconstruction) and decision values add
the values in the lanes of :func:`psvm.kernels.kernel_sums` and
:func:`psvm.kernels.decision_values`: a Gram matrix of psvm's own kernel values
gives the explicit kernel's model and predictions bit for bit.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from psvm._params import PRECOMPUTED
from psvm.jit import njit
from psvm.kernels import LANES, csr_arrays, lane_sums
from psvm.kernels.sums import _lane_totals, _weighted_row_sums

__all__ = ["PRECOMPUTED", "gram_column", "gram_decision", "gram_sums", "serial_rows"]

_BLOCK = 1 << 18  # elements of one block of kernel values (2 MB)


@njit(cache=True, nogil=True)
def serial_numbers(indptr, indices, data, out):
    """out[r] = row r's serial number (its column-0 value), -1 when it has no column 0."""
    for r in range(indptr.size - 1):
        s = indptr[r]
        out[r] = data[s] if s < indptr[r + 1] and indices[s] == 0 else -1.0
    return out


@njit(cache=True, nogil=True)
def gram_diag(indptr, indices, data, serial, out):
    """out[r] = K(x_r, x_r): row r's value at the column serial[r] (0 when absent)."""
    for r in range(indptr.size - 1):
        c, lo, hi = np.int64(serial[r]), indptr[r], indptr[r + 1]
        while lo < hi:  # the row's indices ascend: bisect
            mid = (lo + hi) // 2
            if indices[mid] < c:
                lo = mid + 1
            else:
                hi = mid
        out[r] = data[lo] if lo < indptr[r + 1] and indices[lo] == c else 0.0
    return out


@njit(cache=True, nogil=True)
def gram_column(x_idx, x_val, serial, rows, work, out):
    """out[q] = K(x, x_r) = x[serial[r]] for the q-th row r of ``rows``.

    x is scattered into the zeroed ``work`` (longer than every serial) and
    zeroed again on return.
    """
    for p in range(x_idx.size):
        work[x_idx[p]] = x_val[p]
    for q in range(rows.size):
        out[q] = work[np.int64(serial[rows[q]])]
    for p in range(x_idx.size):
        work[x_idx[p]] = 0.0
    return out


@njit(cache=True, nogil=True)
def _gather(indptr, indices, data, r0, cols, work, out):
    """out[q, s] = row r0 + q's value at column cols[s] (0 when absent), for the rows out
    covers; ``work`` zeroed and longer than every index and column."""
    for q in range(out.shape[0]):
        r = r0 + q
        for p in range(indptr[r], indptr[r + 1]):
            work[indices[p]] = data[p]
        for s in range(cols.size):
            out[q, s] = work[cols[s]]
        for p in range(indptr[r], indptr[r + 1]):
            work[indices[p]] = 0.0
    return out


def gram_sums(F: tuple, f_coef: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """acc[q] = sum_s f_coef[s] F_s[cols[q]]: :func:`psvm.kernels.kernel_sums` for a
    precomputed kernel (``cols``: the serial numbers of the rows), the same lanes.

    F is a CSR triple; its rows are taken in chunks that start at multiples of
    ``LANES``, so each term goes to the lane s mod 8 whatever the chunks.
    """
    f_indptr, f_indices, f_data = F
    n_f, cols = f_indptr.size - 1, np.asarray(cols, dtype=np.int64)
    lanes = np.zeros((cols.size, LANES))
    if n_f == 0 or cols.size == 0:
        return np.zeros(cols.size)
    work = np.zeros(max(int(f_indices.max(initial=0)), int(cols.max())) + 1)
    step = max(LANES, _BLOCK // cols.size // LANES * LANES)  # F rows per chunk
    coef = np.ascontiguousarray(f_coef, dtype=np.float64)
    for s0 in range(0, n_f, step):
        s1 = min(n_f, s0 + step)
        # K[q, s] = F_s[cols[q]]: the transpose of F's rows gathered at cols
        Kt = _gather(f_indptr, f_indices, f_data, s0, cols, work, np.empty((s1 - s0, cols.size)))
        _weighted_row_sums(np.ascontiguousarray(Kt.T), coef[s0:s1], lanes)
    return _lane_totals(lanes, np.empty(cols.size))


def gram_block(X, cols: np.ndarray) -> np.ndarray:
    """X[:, cols] as a dense C-contiguous array, for a dense or sparse X (a column past
    X's last reads 0)."""
    cols = np.asarray(cols, dtype=np.int64)
    if not sp.issparse(X):
        X = np.asarray(X, dtype=np.float64)
        if cols.size and cols.max() >= X.shape[1]:
            X = np.hstack((X, np.zeros((X.shape[0], int(cols.max()) + 1 - X.shape[1]))))
        return np.ascontiguousarray(X[:, cols])
    indptr, indices, data = csr_arrays(sp.csr_matrix(X, dtype=np.float64))
    work = np.zeros(max(X.shape[1], int(cols.max(initial=0)) + 1))
    return _gather(indptr, indices, data, 0, cols, work, np.empty((X.shape[0], cols.size)))


def gram_decision(X, cols: np.ndarray, coef: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """dec[r, p] = sum_s coef[p, s] X[r, cols[s]] - rho[p]: the decision values of a
    precomputed-kernel model, X holding K(x, SV s) in column cols[s].

    Added in :func:`psvm.kernels.decision_values`' lanes (s mod 8), so a row's values
    have the same bits as the explicit kernel's when X holds psvm's kernel values.
    """
    coef = np.asarray(coef, dtype=np.float64)
    rho = np.asarray(rho, dtype=np.float64)
    n, m = X.shape[0], rho.size
    dec = np.empty((n, m))
    rows_per = max(1, _BLOCK // max(coef.shape[1], 1))
    for r0 in range(0, n, rows_per):
        K = gram_block(X[r0 : r0 + rows_per], cols)
        for p in range(m):
            dec[r0 : r0 + K.shape[0], p] = lane_sums(K, np.ascontiguousarray(coef[p])) - rho[p]
    return dec


def serial_rows(X: sp.csr_matrix) -> sp.csr_matrix:
    """X's column 0 alone: a precomputed model's support vectors, as LIBSVM stores them."""
    return sp.csr_matrix(sp.csr_matrix(X)[:, :1])
