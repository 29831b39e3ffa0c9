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

from psvm.jit import inner

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


@njit(cache=True, nogil=True, _nrt=False)
def bids(y, alpha, C, G, act, up, low):
    """Every row's two bids (see :func:`bid`) into ``up`` and ``low``."""
    for t in range(y.size):
        up[t], low[t] = bid(y[t], alpha[t], C[t], G[t], act[t])


@njit(cache=True, nogil=True, _nrt=False)
def argmax_first(a, sign):
    """First position of the maximum of ``sign * a`` (sign +-1; a non-empty, no NaN).

    Eight running maxima, then a scan for the first equal entry: 5x faster than
    numba's ``argmax`` (one dependent compare per element), and the same position.
    """
    n = a.size
    if n < 64:  # short windows: one pass
        k, m = 0, sign * a[0]
        for t in range(1, n):
            if sign * a[t] > m:
                k, m = t, sign * a[t]
        return k
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = -np.inf
    n8 = n - n % 8
    for t in range(0, n8, 8):
        v0, v1, v2, v3 = sign * a[t], sign * a[t + 1], sign * a[t + 2], sign * a[t + 3]
        v4, v5, v6, v7 = sign * a[t + 4], sign * a[t + 5], sign * a[t + 6], sign * a[t + 7]
        m0, m1, m2, m3 = max(m0, v0), max(m1, v1), max(m2, v2), max(m3, v3)
        m4, m5, m6, m7 = max(m4, v4), max(m5, v5), max(m6, v6), max(m7, v7)
    m = max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))
    for t in range(n8, n):
        m = max(m, sign * a[t])
    for t in range(n):
        if sign * a[t] == m:
            return t
    return 0


@inner(_nrt=False)
def best(up, low):
    """(m, i, -M, j) from the bids; an index is -1 when its set is empty. ``argmax`` takes
    the first maximum: ties go to the smaller position."""
    if up.size == 0:
        return -np.inf, -1, -np.inf, -1
    i, j = argmax_first(up, 1.0), argmax_first(low, 1.0)
    m, minus_M = up[i], low[j]
    return m, (i if m > -np.inf else -1), minus_M, (j if minus_M > -np.inf else -1)


@njit(cache=True, nogil=True, _nrt=False)
def best_of_sign(up, low, y, sign):
    """(m, i, -M, j) over the rows with y_t = sign (LIBSVM's Solver_NU keeps the two signs
    apart); an index is -1 when its set is empty; ties go to the smaller position."""
    m, i, minus_M, j = -np.inf, -1, -np.inf, -1
    for t in range(y.size):
        if y[t] == sign:
            if up[t] > m:
                m, i = up[t], t
            if low[t] > minus_M:
                minus_M, j = low[t], t
    return m, i, minus_M, j


@njit(cache=True, nogil=True)
def candidates(y, alpha, C, G, act, up, low):
    """Local (m, i) over active I_up and (-M, j) over active I_low (``up``, ``low``: scratch)."""
    bids(y, alpha, C, G, act, up, low)
    return best(up, low)


@njit(cache=True, nogil=True, _nrt=False)
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


@inner(_nrt=False)
def second_order_nu(y, alpha, C, G, QD, act, K_p, K_n, m_p, m_n, QD_p, QD_n, obj):
    """Solver_NU's j: each row is paired with the i of its own sign (column K_p or K_n,
    extreme m_p or m_n); (objective, j) as :func:`second_order`."""
    for t in range(y.size):
        pos = y[t] > 0
        low = (alpha[t] > 0.0) if pos else (alpha[t] < C[t])
        grad_diff = (m_p if pos else m_n) + y[t] * G[t]
        quad = (QD_p + QD[t] - 2.0 * K_p[t]) if pos else (QD_n + QD[t] - 2.0 * K_n[t])
        quad = quad if quad > 0.0 else TAU
        o = -(grad_diff * grad_diff) / quad
        obj[t] = o if (act[t] and low and grad_diff > 0.0) else np.inf
    if obj.size == 0:
        return np.inf, -1
    j = argmax_first(obj, -1.0)
    return (obj[j], j) if obj[j] < np.inf else (np.inf, -1)


@njit(cache=True, nogil=True, _nrt=False)
def second_order(y, alpha, C, G, QD, act, K_i, m, QD_i, obj):
    """Local j by the second-order gain: (objective, j), j = -1 when no row qualifies."""
    _second_order_objectives(y, alpha, C, G, QD, act, K_i, m, QD_i, obj)
    if obj.size == 0:
        return np.inf, -1
    j = argmax_first(obj, -1.0)
    return (obj[j], j) if obj[j] < np.inf else (np.inf, -1)
