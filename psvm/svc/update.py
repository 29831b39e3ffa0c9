"""numba two-variable SMO step and gradient updates (LIBSVM's Solver::Solve)."""

from __future__ import annotations

import numpy as np

from psvm.jit import inner, njit
from psvm.svc.select import TAU, bid


@njit(cache=True, nogil=True)
def two_variable_step(y_i, y_j, a_i, a_j, G_i, G_j, C_i, C_j, QD_i, QD_j, K_ij):
    """New (a_i, a_j) minimising the dual along y_i a_i + y_j a_j = const, clipped to the box."""
    quad = QD_i + QD_j - 2.0 * K_ij
    if quad <= 0.0:
        quad = TAU
    if y_i != y_j:
        delta = (-G_i - G_j) / quad
        diff = a_i - a_j
        a_i += delta
        a_j += delta
        if diff > 0:
            if a_j < 0:
                a_j = 0.0
                a_i = diff
        elif a_i < 0:
            a_i = 0.0
            a_j = -diff
        if diff > C_i - C_j:
            if a_i > C_i:
                a_i = C_i
                a_j = C_i - diff
        elif a_j > C_j:
            a_j = C_j
            a_i = C_j + diff
    else:
        delta = (G_i - G_j) / quad
        total = a_i + a_j
        a_i -= delta
        a_j += delta
        if total > C_i:
            if a_i > C_i:
                a_i = C_i
                a_j = total - C_i
        elif a_j < 0:
            a_j = 0.0
            a_i = total
        if total > C_j:
            if a_j > C_j:
                a_j = C_j
                a_i = total - C_j
        elif a_i < 0:
            a_i = 0.0
            a_j = total
    return a_i, a_j


@inner(_nrt=False, inline="always")
def _update(y, G, K_i, K_j, c_i, c_j, up, low):
    for t in range(y.size):
        yt = y[t]
        g = G[t] + yt * (c_i * K_i[t] + c_j * K_j[t])
        G[t] = g
        yg = yt * g
        up[t] = -np.inf if up[t] == -np.inf else -yg  # still in I_up (and active)
        low[t] = -np.inf if low[t] == -np.inf else yg  # (a NaN bid stays NaN, as bid gives)


@njit(cache=True, nogil=True, _nrt=False)
def update_rows(y, G, K_i, K_j, c_i, c_j, up, low):
    """:func:`update_gradient`'s pass over some rows, called (a part of a large window in a
    thread, :func:`psvm.svc.passes.update_threads`, which then bids the step's two rows)."""
    _update(y, G, K_i, K_j, c_i, c_j, up, low)


# inlined (numba) into the loop: a call passing nine arrays cost more than a small window's pass
@inner(_nrt=False, inline="always")
def update_gradient(y, alpha, C, G, act, K_i, K_j, c_i, c_j, up, low, q_i, q_j):
    """G_t += y_t (c_i K_it + c_j K_jt) on every row (c = y * delta_alpha), writing each
    row's bids for the next iteration in the same pass: those :func:`psvm.svc.select.bid`
    would give.

    ``up`` and ``low`` must hold the bids of the state before the step (the engine bids
    every row when a run starts and when rows are eliminated). Only positions q_i and q_j
    (-1: not this rank's) changed alpha since, so every other row keeps its sets: a bid
    that was -inf stays -inf, the others take the new G. Reading the old bids instead of
    alpha, C and the active flags halves the pass (0.8 against 1.7 ns a row on a 1,500-row
    window); q_i and q_j are bid anew.

    Eliminated rows of the window are updated too: their G stays exact. The
    columns hold a value per kernel row: with two variables per row (SVR) both
    parts of the window read them (:func:`psvm.svc.select.second_order`).
    """
    h = K_i.size
    for k in range(0, y.size, max(h, 1)):
        e = k + h
        _update(y[k:e], G[k:e], K_i, K_j, c_i, c_j, up[k:e], low[k:e])
    for q in (q_i, q_j):
        if q >= 0:
            up[q], low[q] = bid(y[q], alpha[q], C[q], G[q], act[q])
