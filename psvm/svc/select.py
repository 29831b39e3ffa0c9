"""numba working-set selection over a shard's active rows (Fan, Chen and Lin, 2005).

With I_up = {t: a_t < C_t, y_t = +1 or a_t > 0, y_t = -1} and I_low the
mirror set, i maximises -y_t G_t over I_up (m) and M is the minimum of
-y_t G_t over I_low. Ties go to the smaller local index, hence to the smaller
global index once ranks compare candidates: the choice does not depend on P.
"""

from __future__ import annotations

import numpy as np
from numba import njit

TAU = 1e-12


@njit(cache=True, nogil=True, inline="always")
def offer(t, y_t, a_t, C_t, yg, m, i, minus_M, j):
    """Row t's bid for i (max -y_t G_t over I_up) and for M (max y_t G_t over I_low)."""
    up = a_t < C_t
    low = a_t > 0.0
    if (up if y_t > 0 else low) and -yg > m:
        m, i = -yg, t
    if (low if y_t > 0 else up) and yg > minus_M:
        minus_M, j = yg, t
    return m, i, minus_M, j


@njit(cache=True, nogil=True)
def select_candidates(rows, y, alpha, C, G):
    """Local (m, i) over I_up and (-M, j) over I_low; index -1 when the set is empty.

    Returns m = max -y_t G_t over I_up and minus_M = max y_t G_t over I_low.
    """
    m, i, minus_M, j = -np.inf, -1, -np.inf, -1
    for q in range(rows.size):
        t = rows[q]
        m, i, minus_M, j = offer(t, y[t], alpha[t], C[t], y[t] * G[t], m, i, minus_M, j)
    return m, i, minus_M, j


@njit(cache=True, nogil=True)
def select_second_order(rows, y, alpha, C, G, QD, K_i, m, QD_i):
    """Local j in I_low minimising -(m + y_t G_t)^2 / (K_ii + K_tt - 2 K_it).

    Only t with m + y_t G_t > 0 qualify (a violating pair). Returns
    (obj_diff, j), j = -1 when no local row qualifies.
    """
    best, j = np.inf, -1
    for q in range(rows.size):
        t = rows[q]
        if not ((alpha[t] > 0.0) if y[t] > 0 else (alpha[t] < C[t])):
            continue
        grad_diff = m + y[t] * G[t]
        if grad_diff > 0.0:
            quad = QD_i + QD[t] - 2.0 * K_i[t]
            if quad <= 0.0:
                quad = TAU
            obj = -(grad_diff * grad_diff) / quad
            if obj < best:
                best, j = obj, t
    return best, j
