"""Rebuild the gradient of eliminated rows: G_t = G_bar_t - 1 + sum_free y_t y_s a_s K(x_s, x_t).

G_bar_t already holds the contribution of every variable at its upper bound,
so only the *free* support vectors travel: one Allgatherv of their rows and
coefficients, then each rank evaluates K(free SVs, its own eliminated rows).
The sum runs over the free vectors in global order, so the result does not
depend on the number of ranks.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from psvm.kernels import _k


@njit(cache=True, nogil=True, parallel=True)
def reconstruct_gradient(
    f_indptr, f_indices, f_data, f_sq, f_coef, indptr, indices, data, sq, y, G_bar, rows,
    n_features, kernel_id, gamma, coef0, degree, G,
):  # fmt: skip
    """G[t] = G_bar[t] - 1 + y[t] * sum_s f_coef[s] K(f_s, x_t) for t in ``rows``.

    ``f_*`` is the CSR block of the free vectors with ``f_coef = y_s a_s``.
    Each row has one writer, so threads do not change the result.
    """
    n_f = f_indptr.size - 1
    chunk = 64
    for c in prange((rows.size + chunk - 1) // chunk):
        work = np.zeros(n_features, dtype=np.float64)
        for q in range(c * chunk, min(rows.size, (c + 1) * chunk)):
            t = rows[q]
            for p in range(indptr[t], indptr[t + 1]):
                work[indices[p]] = data[p]
            acc = 0.0
            for s in range(n_f):
                dot = 0.0
                for p in range(f_indptr[s], f_indptr[s + 1]):
                    dot += f_data[p] * work[f_indices[p]]
                acc += f_coef[s] * _k(kernel_id, dot, f_sq[s], sq[t], gamma, coef0, degree)
            G[t] = G_bar[t] - 1.0 + y[t] * acc
            for p in range(indptr[t], indptr[t + 1]):
                work[indices[p]] = 0.0
    return G


@njit(cache=True, nogil=True)
def violators(rows, y, alpha, C, G, m, M, out):
    """Rows of ``rows`` that may join a violating pair given the global m and M.

    The negation of the elimination rule: free rows, rows in I_up with
    -y_t G_t > M, rows in I_low with -y_t G_t < m. Returns the count written to ``out``.
    """
    k = 0
    for q in range(rows.size):
        t = rows[q]
        v = -y[t] * G[t]
        up = alpha[t] < C[t] if y[t] > 0 else alpha[t] > 0.0
        low = alpha[t] > 0.0 if y[t] > 0 else alpha[t] < C[t]
        if (up and v > M) or (low and v < m):
            out[k] = t
            k += 1
    return k
