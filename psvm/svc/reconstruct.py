"""Bring the gradient of stale rows up to date, and find eliminated rows that violate.

A row leaves the solver's window with an exact G. Later only the variables
that changed since matter: G_t += y_t sum_s y_s (a_s - a_s^then) K(x_s, x_t),
so only their rows travel (one Allgatherv), then each rank evaluates the
kernel between them and its own stale rows. The sum runs over the changed
variables in global order, so the result does not depend on the number of ranks.
"""

from __future__ import annotations

import numpy as np

from psvm.jit import njit
from psvm.svc.state import filled


@njit(cache=True, nogil=True)
def violators(rows, y, alpha, C, G, m, M, m_neg, M_neg, out):
    """Rows of ``rows`` that may join a violating pair given the global m and M (of the
    rows with y = -1: m_neg, M_neg; the nu types keep the signs apart, the others not).

    The negation of the elimination rule: free rows, rows in I_up with
    -y_t G_t > M, rows in I_low with -y_t G_t < m. Returns the count written to ``out``.
    """
    k = 0
    for q in range(rows.size):
        t = rows[q]
        v = -y[t] * G[t]
        pos = y[t] > 0
        up = alpha[t] < C[t] if pos else alpha[t] > 0.0
        low = alpha[t] > 0.0 if pos else alpha[t] < C[t]
        if (up and v > (M if pos else M_neg)) or (low and v < (m if pos else m_neg)):
            out[k] = t
            k += 1
    return k


class Departures:
    """The alpha of the moment each stale row left the window.

    Every rank records each departure (a window cut, the same iteration for
    every P), so all ranks hold the same number of snapshots. A snapshot is a
    copy of the local alpha: the rows' own ranks know which of their
    variables changed since, and how much.
    """

    def __init__(self, n: int) -> None:
        self.epoch = filled(n, -1, np.int64)  # snapshot of each stale row
        self.alphas: list[np.ndarray] = []

    def __len__(self) -> int:
        return len(self.alphas)

    def leave(self, rows: np.ndarray, alpha: np.ndarray) -> None:
        """``rows`` leave the window now (their G is exact at ``alpha``)."""
        self.epoch[rows] = len(self.alphas)
        self.alphas.append(alpha.copy())

    def changes(self, y: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Local variables that changed since some departure, and y_s (a_s - a_s^then)
        for each departure (one column per snapshot)."""
        then = np.array(self.alphas).T  # (n, snapshots)
        changed = np.flatnonzero((then != alpha[:, None]).any(axis=1))
        coef = y[changed, None] * (alpha[changed, None] - then[changed])
        return changed, np.ascontiguousarray(coef)

    def reset(self, rows: np.ndarray, alpha: np.ndarray) -> None:
        """The stale ``rows`` are up to date at ``alpha``: one snapshot serves them all."""
        self.clear()
        self.leave(rows, alpha)

    def clear(self) -> None:
        """No row is stale any more (on every rank): no snapshot is needed."""
        self.epoch[:] = -1
        self.alphas = []
