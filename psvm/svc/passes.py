"""A large window's passes split over the rank's threads: the same values, the same winners.

A process takes its share of the node's cores (:mod:`psvm.threads`), but until session 53 only
a large column and the reconstruction's sums used them: the selection and gradient passes ran
in one thread, while the second core waited (skin_nonskin at P = 1 trained without elimination
in 1.43 s on two threads, 1.37 s on one, and in 0.57 s as two ranks). Here each pass runs over
whole blocks of rows in each thread, by the serial functions (called, not inlined: inlined in a
``prange`` body, loops lose their vector code), and the parts' winners combine as one pass finds
them: the first greatest bid, the first smallest objective. Every value is computed as in one
thread, so the model keeps its bits for any number of threads (and of ranks).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from psvm.jit import inner, njit
from psvm.kernels.columns import block_range
from psvm.svc.select import BLOCK, best, best_of_sign, bid, second_order, second_order_nu
from psvm.svc.update import update_rows

# rows a thread below which a pass stays in one: a parallel region's start and wait cost a
# few microseconds, a pass 0.2-1 ns a row. Timed on 2 cores (session 53, random arrays; µs a
# pass, one thread against two): at 16,384 rows the selection's 3.7 against 4.3, the second
# order's 9.8 against 7.6, the update's 12.1 against 8.8; at 8,192 rows 17.1 against 16.9 in all
PASS_ROWS = 1 << 13


@njit(cache=True, nogil=True, _nrt=False)
def pass_parts(threads, n_vars, per_row, scratch):
    """Parts for the passes over a window of ``n_vars`` variables, ``per_row`` a kernel row
    (two: each half of the window in as many), their winners kept in ``scratch`` (4 floats
    a part: the rejoined rows' scratch, as long as the rank's own variables, which a
    borrowing rank's window may outgrow)."""
    return max(1, min(threads, n_vars // per_row // PASS_ROWS, scratch.size // 4))


@njit(cache=True, nogil=True, parallel=True)
def best_threads(up, low, with_j, parts, res):
    """:func:`psvm.svc.select.best` of the whole window, the parts in ``parts`` threads
    (``res``: scratch of 4 ``parts`` floats; the engine's loop allocates nothing)."""
    n = up.size
    for p in prange(parts):
        lo, hi = block_range(n, p, parts, BLOCK)
        _keep_best(res, p, lo, best(up[lo:hi], low[lo:hi], with_j))
    m, i, minus_M, j = _first_greatest(res, parts)
    if not with_j and j >= 0:
        j = 0  # (best's flag for a non-empty I_low, no position)
    return m, i, minus_M, j


@njit(cache=True, nogil=True, parallel=True)
def best_of_sign_threads(up, low, y, sign, parts, res):
    """:func:`psvm.svc.select.best_of_sign` of the whole window (the nu types: the rows of one
    sign of y), the parts in ``parts`` threads (``res``: scratch of 4 ``parts`` floats)."""
    n = up.size
    for p in prange(parts):
        lo, hi = block_range(n, p, parts, BLOCK)
        _keep_best(res, p, lo, best_of_sign(up[lo:hi], low[lo:hi], y[lo:hi], sign))
    return _first_greatest(res, parts)


@inner(_nrt=False, inline="always")
def _keep_best(res, p, lo, found):
    """Part p's (m, i, -M, j), its positions from ``lo``, into ``res``."""
    m, i, minus_M, j = found
    res[4 * p], res[4 * p + 1] = m, i + lo if i >= 0 else -1
    res[4 * p + 2], res[4 * p + 3] = minus_M, j + lo if j >= 0 else -1


@inner(_nrt=False)
def _first_greatest(res, parts):
    """The parts' (m, i, -M, j) as one pass finds them: strictly greater, so of equal maxima
    the first part's."""
    m, i, minus_M, j = -np.inf, -1, -np.inf, -1
    for p in range(parts):
        if res[4 * p + 1] >= 0 and (i < 0 or res[4 * p] > m):
            m, i = res[4 * p], int(res[4 * p + 1])
        if res[4 * p + 3] >= 0 and (j < 0 or res[4 * p + 2] > minus_M):
            minus_M, j = res[4 * p + 2], int(res[4 * p + 3])
    return m, i, minus_M, j


@njit(cache=True, nogil=True, parallel=True)
def second_order_threads(low, QD, K_i, m, QD_i, obj, parts, res):
    """:func:`psvm.svc.select.second_order` of the whole window, each of its halves (K_i: a
    value a kernel row; with two variables a row, SVR, both halves read it) in ``parts``
    parts over the threads (``res``: scratch of 2 ``parts`` floats a half)."""
    h = max(K_i.size, 1)
    for p in prange(parts * (low.size // h)):
        off, (lo, hi) = p // parts * h, block_range(h, p % parts, parts, BLOCK)
        a, b = off + lo, off + hi
        o, j = second_order(low[a:b], QD[a:b], K_i[lo:hi], m, QD_i, obj[a:b])
        res[2 * p], res[2 * p + 1] = o, j + a if j >= 0 else -1
    return _first_smallest(res, parts * (low.size // h))


@njit(cache=True, nogil=True, parallel=True)
def second_order_nu_threads(y, low, QD, K_p, K_n, m_p, m_n, QD_p, QD_n, obj, parts, res):
    """:func:`psvm.svc.select.second_order_nu` of the whole window, each of its halves in
    ``parts`` parts over the threads (``res``: scratch of 2 ``parts`` floats a half): nu-SVC's
    rows each paired with the i of its own sign; nu-SVR's halves each one sign, paired with
    that sign's i (K_p, K_n: a value a kernel row)."""
    h = max(K_p.size, 1)
    halves = low.size // h
    for p in prange(parts * halves):
        off, (lo, hi) = p // parts * h, block_range(h, p % parts, parts, BLOCK)
        a, b = off + lo, off + hi
        if halves > 1:  # (as second_order_nu: the half's sign, read from its first row)
            pos = y[off] > 0
            K, m, QD_i = (K_p, m_p, QD_p) if pos else (K_n, m_n, QD_n)
            o, j = second_order(low[a:b], QD[a:b], K[lo:hi], m, QD_i, obj[a:b])
        else:
            o, j = second_order_nu(
                y[a:b], low[a:b], QD[a:b], K_p[lo:hi], K_n[lo:hi], m_p, m_n, QD_p, QD_n,
                obj[a:b],
            )  # fmt: skip
        res[2 * p], res[2 * p + 1] = o, j + a if j >= 0 else -1
    return _first_smallest(res, parts * halves)


@inner(_nrt=False)
def _first_smallest(res, parts):
    """The parts' (objective, j) as one pass finds them: strictly smaller, so of equal
    objectives the first part's."""
    best_o, best_j = np.inf, -1
    for p in range(parts):
        if res[2 * p + 1] >= 0 and (best_j < 0 or res[2 * p] < best_o):
            best_o, best_j = res[2 * p], int(res[2 * p + 1])
    return best_o, best_j


@njit(cache=True, nogil=True, parallel=True)
def update_threads(y, alpha, C, G, act, K_i, K_j, c_i, c_j, up, low, q_i, q_j, parts):
    """:func:`psvm.svc.update.update_gradient`: its gradient and bids pass over each half of
    the window (one, or two with two variables a row) in ``parts`` parts over the threads,
    then positions q_i and q_j (-1: not this rank's) bid anew."""
    h = max(K_i.size, 1)
    for p in prange(parts * (y.size // h)):
        off, (lo, hi) = p // parts * h, block_range(h, p % parts, parts, BLOCK)
        a, b = off + lo, off + hi
        update_rows(y[a:b], G[a:b], K_i[lo:hi], K_j[lo:hi], c_i, c_j, up[a:b], low[a:b])
    for q in (q_i, q_j):
        if q >= 0:
            up[q], low[q] = bid(y[q], alpha[q], C[q], G[q], act[q])
