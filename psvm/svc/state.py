"""Whole-shard helpers: numba reductions over the dual state, row gathering, dense X to CSR,
filled arrays.

The compiled functions allocate no array (their callers pass them in), so that a run loads
them without numba's allocator (:mod:`psvm.jit`)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from psvm.jit import njit
from psvm.kernels import csr_of


def filled(shape, value, dtype=np.float64) -> np.ndarray:
    """``np.full``, whose Python costs more than its work on a small problem's arrays (1.3
    against 0.5 µs: a solver makes several for each class pair of an iris fit)."""
    a = np.empty(shape, dtype=dtype)
    a.fill(value)
    return a


def gather_csr(comm, indptr, indices, data) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All ranks' CSR rows stacked in rank order, as arrays, on every rank (collective)."""
    if comm.size == 1:
        return indptr, indices, data
    counts = comm.allgatherv(np.diff(indptr).astype(np.int64))
    indptr = np.concatenate(([0], np.cumsum(counts)))
    return indptr, comm.allgatherv(indices.astype(np.int32)), comm.allgatherv(data)


def dense_csr(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, indices, indptr) of the non-zeros of a C-ordered float64 ``X`` of fewer than
    2^31 entries (int32 indices), each row's in column order, as scipy converts a dense
    matrix."""
    n = X.shape[0]
    indptr = np.empty(n + 1, dtype=np.int64)
    nnz = _dense_counts(X, indptr)
    indices, data = np.empty(nnz + 1, dtype=np.int32), np.empty(nnz + 1)
    _dense_fill(X, indices, data)
    return data[:nnz], indices[:nnz], indptr


@njit(cache=True, nogil=True)
def _dense_counts(X, indptr):
    """indptr of X's non-zeros; their number."""
    n, d = X.shape
    indptr[0] = 0
    for r in range(n):
        k = 0
        for f in range(d):
            k += X[r, f] != 0.0
        indptr[r + 1] = indptr[r] + k
    return indptr[n]


@njit(cache=True, nogil=True)
def _dense_fill(X, indices, data):
    """X's non-zeros into ``indices`` and ``data`` (one slot more than them): branch-free (a
    zero's slot is written over by the next value), 4x faster than with a branch on digits'
    pixels."""
    n, d = X.shape
    p = 0
    for r in range(n):
        for f in range(d):
            v = X[r, f]
            indices[p], data[p] = f, v
            p += v != 0.0


def compact_features(comm, X: sp.csr_matrix) -> sp.csr_matrix:
    """X with its columns renumbered 0..d-1 over the features some rank uses (collective).

    The solver's work vectors and column-major copies are sized by the number
    of columns: without this a valid index near 2^31 would allocate gigabytes
    per rank. The map is monotone, so every dot product adds the same terms
    in the same order and results are unchanged.
    """
    used = used_columns(X.indices, X.shape[1])
    if comm.size > 1:
        used = np.unique(comm.allgatherv(used))
    if used.size in (0, X.shape[1]):
        return X
    dtype = np.int32 if used.size < 2**31 else np.int64
    if X.shape[1] > 4 * X.indices.size + 1024:  # a wide, sparse X: a lookup would be the waste
        return csr_of(
            X.indptr, np.searchsorted(used, X.indices).astype(dtype), X.data,
            (X.shape[0], used.size),
        )  # fmt: skip
    # every local index is used: the map is a lookup (restrict_columns' search: 1.8 ms, digits)
    column = np.zeros(X.shape[1], dtype=dtype)
    column[used] = np.arange(used.size)
    return csr_of(X.indptr, column[X.indices], X.data, (X.shape[0], used.size))


def used_columns(indices: np.ndarray, n_columns: int) -> np.ndarray:
    """The sorted distinct ``indices`` (int64): counted when the columns are few next to the
    entries (digits: 0.1 ms against np.unique's sort, 1.5 ms), else sorted."""
    if n_columns <= 4 * indices.size + 1024:
        return np.bincount(indices, minlength=n_columns).nonzero()[0].astype(np.int64)
    return np.unique(indices).astype(np.int64)


def row_sums(indptr: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's sum and sum of squares, its entries added in stored order: np.bincount's
    arithmetic (the same bits), in one pass."""
    n = indptr.size - 1
    return _row_sums(indptr, data, np.empty(n), np.empty(n))


@njit(cache=True, nogil=True)
def _row_sums(indptr, data, total, square):
    for r in range(indptr.size - 1):
        s = q = 0.0
        for p in range(indptr[r], indptr[r + 1]):
            s += data[p]
            q += data[p] * data[p]
        total[r], square[r] = s, q
    return total, square


def start_total(comm, C: np.ndarray, nu: float, n: int, weighted: bool, bound: float = 1.0):
    """The alpha a nu type or one-class starts with: LIBSVM's bound * nu * l, or with sample
    weights scikit-learn's sum of nu * C_t (collective when weighted)."""
    if not weighted:
        return bound * nu * n
    total = 0.0  # row by row in global order, as scikit-learn's LIBSVM adds them
    for c in comm.allgatherv(np.ascontiguousarray(C, dtype=np.float64)):
        total += nu * c
    return total


def fill_start(comm, C: np.ndarray, total: float) -> np.ndarray:
    """This rank's starting alphas: the rows in global order, each filled up to its bound
    C_t until ``total`` is used (LIBSVM's start of one-class and the nu types).

    The bounds travel whole (8 bytes a row), so every P fills the same way.
    """
    bounds = comm.allgatherv(np.ascontiguousarray(C, dtype=np.float64))
    offset = comm.exscan_sum(C.size)
    alpha = np.zeros(bounds.size)
    for t, c in enumerate(bounds):
        if total <= 0:
            break
        alpha[t] = min(c, total)
        total -= alpha[t]
    return alpha[offset : offset + C.size]


@njit(cache=True, nogil=True)
def bias_terms(rows, y, alpha, C, G, free):
    """LIBSVM's bounds on rho over ``rows``' bound vectors, (ub, lb) of y_t G_t, and the
    y_t G_t of its free ones in ``free[:k]``, in one pass: (ub, lb, k)."""
    ub, lb = np.inf, -np.inf
    k = 0
    for q in range(rows.size):
        t = rows[q]
        yg = y[t] * G[t]
        if alpha[t] >= C[t]:
            if y[t] < 0:
                ub = min(ub, yg)
            else:
                lb = max(lb, yg)
        elif alpha[t] <= 0.0:
            if y[t] > 0:
                ub = min(ub, yg)
            else:
                lb = max(lb, yg)
        else:
            free[k] = yg
            k += 1
    return ub, lb, k


@njit(cache=True, nogil=True)
def scatter_pair(is_sv, coef, rows, first, alpha, scale, a, b):
    """Class pair (a, b)'s ``alpha`` (over its ``rows``; ``first``: of class a) times ``scale``
    into one-vs-one's ``dual_coef`` layout (class a's in row b - 1, class b's negated in row
    a), and its support vectors flagged in ``is_sv``: one call where numpy's masks take six
    (10 µs a pair of iris)."""
    for t in range(rows.size):
        r, v = rows[t], alpha[t] * scale
        if alpha[t] > 0:
            is_sv[r] = True
        if first[t]:
            coef[b - 1, r] = v
        else:
            coef[a, r] = -v


def rho_and_r(comm, rows, y, alpha, C, G, nu: bool) -> tuple[float, float]:
    """LIBSVM's bias over ``rows`` and Solver_NU's r (0 unless ``nu``); collective.

    Solver_NU takes each sign of y apart and averages G itself: rho = (r1 - r2) / 2,
    r = (r1 + r2) / 2.
    """
    if not nu:
        return _side(comm, rows, y, alpha, C, G), 0.0
    ones = np.ones(y.size)
    r1 = _side(comm, rows[y[rows] > 0], ones, alpha, C, G)
    r2 = _side(comm, rows[y[rows] < 0], ones, alpha, C, G)
    return (r1 - r2) / 2, (r1 + r2) / 2


def _side(comm, rows, y, alpha, C, G) -> float:
    """Mean of y_t G_t over the free variables of ``rows`` (all ranks, summed exactly), else
    the midpoint of LIBSVM's bounds from the bound ones."""
    free = np.empty(rows.size)
    ub, lb, k = bias_terms(rows, y, alpha, C, G, free)
    free = free[:k]
    ub, lb = comm.min_(ub), comm.max_(lb)
    nf = comm.sum_(int(free.size))
    return comm.exact_sum(free) / nf if nf > 0 else float((ub + lb) / 2)
