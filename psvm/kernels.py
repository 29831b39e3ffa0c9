"""numba kernels: kernel columns, kernel blocks, diagonals and squared row norms.

Contract for every kernel here: CSR arrays ``indptr`` (int64), ``indices``
(int32, 0-based, ascending within a row) and ``data`` (float64); results go
into a preallocated ``out``. One ``kernel_id`` switch selects the kernel, so
each function compiles a single specialization that numba caches on disk.
Row values are computed row by row in a fixed order, so a kernel value does
not depend on which rank computes it.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit, prange

LINEAR, POLY, RBF, SIGMOID = 0, 1, 2, 3
KERNELS = {"linear": LINEAR, "poly": POLY, "rbf": RBF, "sigmoid": SIGMOID}
KERNEL_NAMES = {v: k for k, v in KERNELS.items()}


def csr_arrays(X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (indptr, indices, data) triple with the dtypes the kernels expect."""
    return (
        np.ascontiguousarray(X.indptr, dtype=np.int64),
        np.ascontiguousarray(X.indices, dtype=np.int32),
        np.ascontiguousarray(X.data, dtype=np.float64),
    )


@njit(cache=True, nogil=True, inline="always")
def _k(kernel_id, dot, sq_a, sq_b, gamma, coef0, degree):
    if kernel_id == LINEAR:
        return dot
    if kernel_id == RBF:
        return np.exp(-gamma * (sq_a + sq_b - 2.0 * dot))
    if kernel_id == POLY:
        base = gamma * dot + coef0
        r = 1.0
        for _ in range(degree):  # LIBSVM's powi: the same product for every rank
            r *= base
        return r
    return np.tanh(gamma * dot + coef0)


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
def kernel_diag(indptr, data, sq_norms, kernel_id, gamma, coef0, degree, out):
    """out[r] = K(x_r, x_r), computed by the same formula as a column entry."""
    for r in range(indptr.size - 1):
        out[r] = _k(kernel_id, sq_norms[r], sq_norms[r], sq_norms[r], gamma, coef0, degree)
    return out


@njit(cache=True, nogil=True)
def kernel_column(
    x_idx, x_val, x_sq, indptr, indices, data, sq_norms, rows,
    kernel_id, gamma, coef0, degree, work, out,
):  # fmt: skip
    """out[r] = K(x, x_r) for each local row r in ``rows``.

    x is scattered once into the dense zeroed ``work`` (length n_features) and
    each row reads its non-zeros against it: O(nnz of the rows), no index merge.
    ``work`` is zeroed again on return.
    """
    for p in range(x_idx.size):
        work[x_idx[p]] = x_val[p]
    for q in range(rows.size):
        r = rows[q]
        dot = 0.0
        for p in range(indptr[r], indptr[r + 1]):
            dot += data[p] * work[indices[p]]
        out[r] = _k(kernel_id, dot, x_sq, sq_norms[r], gamma, coef0, degree)
    for p in range(x_idx.size):
        work[x_idx[p]] = 0.0
    return out


@njit(cache=True, nogil=True)
def kernel_column_csc(
    x_idx, x_val, x_sq, colptr, rowidx, cdata, sq_norms, rows,
    kernel_id, gamma, coef0, degree, dots, out,
):  # fmt: skip
    """out[r] = K(x, x_r) for r in ``rows``, through the CSC copy of the local rows.

    Cheaper than :func:`kernel_column` when x's features are rare: it touches
    only the columns where x is non-zero. Every dot product still adds its
    terms in ascending feature order, so results are bitwise equal to the
    CSR path (a skipped zero term does not change a float sum).
    """
    dots[:] = 0.0
    for p in range(x_idx.size):
        f = x_idx[p]
        v = x_val[p]
        for q in range(colptr[f], colptr[f + 1]):
            dots[rowidx[q]] += cdata[q] * v
    for q in range(rows.size):
        r = rows[q]
        out[r] = _k(kernel_id, dots[r], x_sq, sq_norms[r], gamma, coef0, degree)
    return out


@njit(cache=True, nogil=True)
def kernel_column_dense(
    x_idx, x_val, x_sq, XT, sq_norms, rows, kernel_id, gamma, coef0, degree, dots, out,
):  # fmt: skip
    """out[r] = K(x, x_r) for r in ``rows``, through a dense feature-major copy ``XT``.

    For dense, low-dimensional shards (ijcnn1, usps): each of x's features
    adds one contiguous, vectorised pass over all local rows. Terms are added
    in ascending feature order as in the CSR path, so results are bitwise
    equal to it (the extra terms are exact zeros).
    """
    dots[:] = 0.0
    for p in range(x_idx.size):
        xf = XT[x_idx[p]]
        v = x_val[p]
        for t in range(dots.size):
            dots[t] += xf[t] * v
    for q in range(rows.size):
        r = rows[q]
        out[r] = _k(kernel_id, dots[r], x_sq, sq_norms[r], gamma, coef0, degree)
    return out


@njit(cache=True, nogil=True)
def csc_cost(x_idx, colptr):
    """Work of :func:`kernel_column_csc` for x: non-zeros in x's columns."""
    c = 0
    for p in range(x_idx.size):
        c += colptr[x_idx[p] + 1] - colptr[x_idx[p]]
    return c


@njit(cache=True, nogil=True, parallel=True)
def kernel_block(
    a_indptr, a_indices, a_data, a_sq, b_indptr, b_indices, b_data, b_sq,
    n_features, kernel_id, gamma, coef0, degree, out,
):  # fmt: skip
    """out[s, t] = K(a_s, b_t): prediction blocks, threads over rows of a."""
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
                out[s, t] = _k(kernel_id, dot, a_sq[s], b_sq[t], gamma, coef0, degree)
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
    kernel_block(
        *csr_arrays(A), a_sq, *csr_arrays(B), b_sq,
        n_features, kernel_id, float(gamma), float(coef0), int(degree), out,
    )  # fmt: skip
    return out
