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
from numba import njit


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
    """Bound changes not yet applied to the G_bar of stale rows.

    A variable entering or leaving its upper bound changes G_bar on every
    row. Rows in the solver's window need no G_bar (their G is exact; G_bar
    is derived from it when they leave); stale rows would need a full kernel
    column per change. Instead the net change per variable is logged (every
    rank sees every change in the packets, so the log is the same everywhere
    and needs no communication) and applied to the stale rows in one batch
    before a reconstruction or a checkpoint. A variable that leaves and
    re-enters its bound in between adds nothing. Rows that go stale while
    the log is not empty already hold its changes: they are taken out of them
    at once (``sign`` -1), so one flush serves rows that left at any time.
    """

    def __init__(self) -> None:
        self.pos: dict[int, int] = {}  # global index -> entry, in order of first change
        self.coef = np.zeros(64)
        self.sq = np.zeros(64)  # squared norms of the entries' rows
        self.indptr = np.zeros(65, dtype=np.int64)  # the entries' rows, CSR
        self.indices = np.zeros(1024, dtype=np.int32)
        self.data = np.zeros(1024)

    def __len__(self) -> int:
        return len(self.pos)

    def record(self, gidx: int, c: float, idx: np.ndarray, val: np.ndarray, sq: float) -> None:
        """G_bar_t += y_t c K(x, x_t) is due on every eliminated row t (``sq`` = |x|^2)."""
        k = self.pos.get(gidx)
        if k is None:
            k = len(self.pos)
            self.pos[gidx] = k
            if k == self.coef.size:
                self.coef, self.sq = _grown(self.coef, 2 * k), _grown(self.sq, 2 * k)
                self.indptr = _grown(self.indptr, 2 * k + 1)
            s = self.indptr[k]
            e = self.indptr[k + 1] = s + idx.size
            if e > self.data.size:
                self.indices = _grown(self.indices, 2 * e)
                self.data = _grown(self.data, 2 * e)
            self.indices[s:e], self.data[s:e] = idx, val
            self.sq[k] = sq
        self.coef[k] += c

    def apply(self, rows: np.ndarray, y: np.ndarray, kernel, G_bar: np.ndarray,
              sign: float) -> None:  # fmt: skip
        """G_bar_t += sign y_t sum_g c_g K(x_g, x_t) on ``rows``, through ``kernel``
        (:class:`~psvm.svc.columns.LocalKernel`), over the entries in their order."""
        n = len(self.pos)
        if n and rows.size:
            F = (self.indptr[: n + 1], self.indices, self.data)
            acc = kernel.sums(F, self.coef[:n], rows, self.sq[:n])
            G_bar[rows] += sign * y[rows] * acc

    def clear(self) -> None:
        self.coef[: len(self.pos)] = 0.0
        self.pos.clear()


def _grown(a: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=a.dtype)
    out[: a.size] = a
    return out
