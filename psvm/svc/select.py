"""numba working-set selection over a rank's window of rows (Fan, Chen and Lin, 2005).

With I_up = {t: a_t < C_t, y_t = +1 or a_t > 0, y_t = -1} and I_low the
mirror set, i maximises -y_t G_t over I_up (m) and M is the minimum of
-y_t G_t over I_low. Only *active* rows (``act``) bid. The passes are
branch-free over contiguous arrays, so numba vectorises them, and the best
bid is found by ``np.argmax``/``np.argmin``: the first occurrence, so ties go
to the smaller position, hence (the window is sorted) to the smaller local
and global index once ranks compare candidates: the choice does not depend on P.
"""

from __future__ import annotations

import numpy as np
from numba import njit

TAU = 1e-12


@njit(cache=True, nogil=True, inline="always")
def bid(y_t, a_t, C_t, g_t, act_t):
    """Row t's bid for i (-y_t G_t in I_up) and for M (y_t G_t in I_low); -inf if none."""
    yg = y_t * g_t
    below = a_t < C_t
    above = a_t > 0.0
    up = -yg if act_t and (below if y_t > 0 else above) else -np.inf
    low = yg if act_t and (above if y_t > 0 else below) else -np.inf
    return up, low


@njit(cache=True, nogil=True)
def bids(y, alpha, C, G, act, up, low):
    """Every row's two bids (see :func:`bid`) into ``up`` and ``low``."""
    for t in range(y.size):
        up[t], low[t] = bid(y[t], alpha[t], C[t], G[t], act[t])


@njit(cache=True, nogil=True, inline="always")
def best(up, low):
    """(m, i, -M, j) from the bids; an index is -1 when its set is empty. ``argmax`` takes
    the first maximum: ties go to the smaller position."""
    if up.size == 0:
        return -np.inf, -1, -np.inf, -1
    i, j = up.argmax(), low.argmax()
    m, minus_M = up[i], low[j]
    return m, (i if m > -np.inf else -1), minus_M, (j if minus_M > -np.inf else -1)


@njit(cache=True, nogil=True)
def candidates(y, alpha, C, G, act, up, low):
    """Local (m, i) over active I_up and (-M, j) over active I_low (``up``, ``low``: scratch)."""
    bids(y, alpha, C, G, act, up, low)
    return best(up, low)


@njit(cache=True, nogil=True)
def _second_order_objectives(y, alpha, C, G, QD, act, K_i, m, QD_i, obj):
    """obj[t] = -(m + y_t G_t)^2 / (K_ii + K_tt - 2 K_it) for active t in I_low
    with m + y_t G_t > 0 (a violating pair with i), else inf."""
    for t in range(y.size):
        yt = y[t]
        low = (alpha[t] > 0.0) if yt > 0 else (alpha[t] < C[t])
        grad_diff = m + yt * G[t]
        quad = QD_i + QD[t] - 2.0 * K_i[t]
        quad = quad if quad > 0.0 else TAU
        o = -(grad_diff * grad_diff) / quad
        obj[t] = o if (act[t] and low and grad_diff > 0.0) else np.inf


@njit(cache=True, nogil=True, inline="always")
def second_order(y, alpha, C, G, QD, act, K_i, m, QD_i, obj):
    """Local j by the second-order gain: (objective, j), j = -1 when no row qualifies."""
    _second_order_objectives(y, alpha, C, G, QD, act, K_i, m, QD_i, obj)
    if obj.size == 0:
        return np.inf, -1
    j = obj.argmin()
    return (obj[j], j) if obj[j] < np.inf else (np.inf, -1)
