"""Dense kernel matrices K(A, B) (tests, Gram matrices of psvm's own values); prediction
goes through :func:`psvm.kernels.sums.decision_values` instead."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import prange

from psvm.jit import njit
from psvm.kernels.csr import csr_arrays, restrict_columns, sq_norms_of
from psvm.kernels.values import from_pre, pre_kernel


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
