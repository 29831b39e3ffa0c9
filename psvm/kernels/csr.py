"""CSR arrays as the kernels take them: canonical matrices, psvm's dtypes, rows taken,
transposed or made feature-major, squared row norms (the contract: :mod:`psvm.kernels`).
Python allocates the arrays that the compiled parts fill (allocations: :mod:`psvm.jit`)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from psvm.jit import njit


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


@njit(cache=True, nogil=True)
def row_sq_norms(indptr, data, out):
    """out[r] = |x_r|^2, summed in the row's stored order."""
    for r in range(indptr.size - 1):
        s = 0.0
        for p in range(indptr[r], indptr[r + 1]):
            s += data[p] * data[p]
        out[r] = s
    return out


def take_rows(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR arrays (indptr, indices, data) of ``rows``, in that order."""
    out_ptr = np.empty(rows.size + 1, dtype=np.int64)
    nnz = _row_offsets(indptr, rows, out_ptr)
    out_idx, out_val = np.empty(nnz, dtype=np.int32), np.empty(nnz)
    _copy_rows(indptr, indices, data, rows, out_ptr, out_idx, out_val)
    return out_ptr, out_idx, out_val


def stack_rows(blocks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR arrays of the row blocks ``blocks`` ((indptr, indices, data) each), in order."""
    indptrs, indices, data = zip(*blocks, strict=True)
    ends = np.cumsum([0] + [int(p[-1]) for p in indptrs])
    indptr = np.concatenate([[0]] + [p[1:] + e for p, e in zip(indptrs, ends, strict=False)])
    return indptr.astype(np.int64), np.concatenate(indices), np.concatenate(data)


@njit(cache=True, nogil=True)
def _row_offsets(indptr, rows, out_ptr):
    """out_ptr: the indptr of ``rows``; their number of entries."""
    out_ptr[0] = 0
    for q in range(rows.size):
        out_ptr[q + 1] = out_ptr[q] + indptr[rows[q] + 1] - indptr[rows[q]]
    return out_ptr[rows.size]


@njit(cache=True, nogil=True)
def _copy_rows(indptr, indices, data, rows, out_ptr, out_idx, out_val):
    for q in range(rows.size):  # o in a local: the stores could alias out_ptr, read again each time
        s, o = indptr[rows[q]], out_ptr[q]
        for p in range(out_ptr[q + 1] - o):
            out_idx[o + p] = indices[s + p]
            out_val[o + p] = data[s + p]


def transpose_csr(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, n_cols: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSC arrays (colptr, rowidx, cdata) of CSR rows; rows ascend within each column."""
    nnz = int(indptr[-1])
    colptr, fill = np.zeros(n_cols + 1, dtype=np.int64), np.empty(n_cols, dtype=np.int64)
    rowidx, cdata = np.empty(nnz, dtype=np.int32), np.empty(nnz)
    _transpose(indptr, indices, data, colptr, fill, rowidx, cdata)
    return colptr, rowidx, cdata


@njit(cache=True, nogil=True)
def _transpose(indptr, indices, data, colptr, fill, rowidx, cdata):
    for p in range(indptr[-1]):
        colptr[indices[p] + 1] += 1
    for f in range(fill.size):
        colptr[f + 1] += colptr[f]
        fill[f] = colptr[f]
    for r in range(indptr.size - 1):
        for p in range(indptr[r], indptr[r + 1]):
            q = fill[indices[p]]
            rowidx[q], cdata[q] = r, data[p]
            fill[indices[p]] = q + 1


@njit(cache=True, nogil=True)
def feature_major(indptr, indices, data, XT):
    """XT[f, r] = X[r, f]: the dense feature-major copy of CSR rows (XT zeroed)."""
    for r in range(indptr.size - 1):
        for p in range(indptr[r], indptr[r + 1]):
            XT[indices[p], r] = data[p]
    return XT


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
