"""Rebuild the gradient of eliminated rows: G_t = G_bar_t - 1 + sum_free y_t y_s a_s K(x_s, x_t).

G_bar_t holds the contribution of every variable at its upper bound, so only
the *free* support vectors travel: one Allgatherv of their rows and
coefficients, then each rank evaluates K(free SVs, its own eliminated rows).
The sum runs over the free vectors in global order, so the result does not
depend on the number of ranks. :class:`DeferredGBar` keeps G_bar of
eliminated rows up to date in batches.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from psvm.kernels import _k


@njit(cache=True, nogil=True, parallel=True)
def add_kernel_sums(
    f_indptr, f_indices, f_data, f_sq, f_coef, indptr, indices, data, sq, y, base, shift, rows,
    n_features, kernel_id, gamma, coef0, degree, out,
):  # fmt: skip
    """out[t] = base[t] + shift + y[t] * sum_s f_coef[s] K(f_s, x_t) for t in ``rows``.

    ``f_*`` is a CSR block of vectors (free SVs, or variables that changed
    bound) in global order. Each row has one writer, so threads do not change
    the result.
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
            out[t] = base[t] + shift + y[t] * acc
            for p in range(indptr[t], indptr[t + 1]):
                work[indices[p]] = 0.0
    return out


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


class DeferredGBar:
    """Bound changes not yet applied to the G_bar of eliminated rows.

    A variable entering or leaving its upper bound changes G_bar on every
    row. Active rows take the change at once from the columns the step
    already has; eliminated rows would need a full kernel column per change.
    Instead the changes are logged and applied in one batch (:meth:`flush`)
    before rows are eliminated or reconstructed. A variable that leaves and
    re-enters its bound in between cancels exactly and costs nothing.
    Every rank sees every change (the packets carry the rows), so the log
    needs no communication.
    """

    def __init__(self) -> None:
        self.coef: dict[int, float] = {}
        self.rows: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}

    def record(self, gidx: int, c: float, idx: np.ndarray, val: np.ndarray, sq: float) -> None:
        """G_bar_t += y_t c K(x, x_t) is due on every eliminated row t."""
        self.coef[gidx] = self.coef.get(gidx, 0.0) + c
        if gidx not in self.rows:
            self.rows[gidx] = (idx.copy(), val.copy(), sq)

    def flush(self, rows, indptr, indices, data, sq, y, n_features, kparams, G_bar) -> int:
        """Apply the logged changes to G_bar on ``rows``; returns how many were non-zero."""
        keys = sorted(g for g, c in self.coef.items() if c != 0.0)
        if keys and rows.size:
            lens = np.array([self.rows[g][0].size for g in keys], dtype=np.int64)
            f_indptr = np.concatenate(([0], np.cumsum(lens)))
            f_idx = np.concatenate([self.rows[g][0] for g in keys]).astype(np.int32)
            f_val = np.concatenate([self.rows[g][1] for g in keys])
            f_sq = np.array([self.rows[g][2] for g in keys])
            f_coef = np.array([self.coef[g] for g in keys])
            add_kernel_sums(
                f_indptr, f_idx, f_val, f_sq, f_coef, indptr, indices, data, sq, y, G_bar,
                0.0, rows, n_features, *kparams, G_bar,
            )  # fmt: skip
        self.coef.clear()
        self.rows.clear()
        return len(keys)
