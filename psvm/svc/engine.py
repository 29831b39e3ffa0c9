"""The compiled SMO loop: selection, collectives, kernel columns, step and update in numba.

One call of :func:`run` performs SMO iterations (LIBSVM's ``Solver::Solve``
loop) until an *event* that needs Python: an iteration budget, the stop test,
a window cut, the clock (checkpoint or progress line), the iteration limit.
Events are rare (a handful per solve, plus one per budget), so no Python runs
per iteration. Every event is decided from values all ranks share (the
gathered packets, the iteration count), so all ranks return on the same
iteration and Python's collective handling of it stays in step. Only
:data:`BUDGET` may differ between ranks: its handling is local.

One iteration (see :mod:`psvm.svc.solver` for the algorithm):

- select: each rank packs its best i and best of I_low (:func:`pack`); one
  Allgather; every rank picks the same winners (:func:`winner_rank`) and
  checks the events and the stop test;
- eliminate: the policy's test, now and then (:func:`_ready`, :func:`eliminate`);
- the column K(x_i, window) from the cache, carried over from the previous
  window, or computed (:func:`_miss`);
- second-order j: local best by the gain (:func:`second_order`), one Allgather;
- the two-variable step from the two packets (:func:`pair_step`), the column
  of j, and the gradient update of the window, which also finds the next
  candidates (:func:`update_gradient`, :func:`best`).

The timers are sampled on every 16th iteration (a clock read costs about
20 ns); :class:`psvm.svc.solver.Solver` scales them to the whole run.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from psvm.comm.compiled import allgather, now
from psvm.elimination import GAP_FRACTION, NEAR_TOL, NEVER, eliminate
from psvm.kernels import RBF, SIGMOID, exp
from psvm.svc import cache as cc
from psvm.svc.columns import kernel_column
from psvm.svc.packets import (
    DIAG,
    GIDX,
    KEY,
    NNZ,
    ROW,
    SQ,
    column_total,
    pack,
    pair_pre,
    pair_step,
)
from psvm.svc.packets import winner as winner_rank
from psvm.svc.select import best, bids, second_order
from psvm.svc.update import update_gradient

# events: why :func:`run` returned
BUDGET, GAP, MAX_ITER, NO_PAIR, CUT, CLOCK, ALL_BACK, MPI_ERROR = range(8)
# integer controls (``ctl_i``)
(MAX_ITER_, ITER_BUDGET, FIRST_ORDER, PERIOD, NEED, READY, OFFSET, N_SAMPLES, N_ITER, N_ACTIVE,
 ROW_WIDTH, CK_ITERS, CLOCK_DONE, HAS_DEPARTURES, TRACE_EVERY, LAST_TRACE, RANK, CLOCK_FN,
 START, N_CTL_I) = range(20)  # fmt: skip
# float controls (``ctl_f``)
TOL, NEXT_GAP, DEADLINE, PROGRESS_AT, GAP0, THETA, RELAYOUT, N_CTL_F = range(8)
# outputs (``out``): the gap and the extremes at the last test
GAP_OUT, M_OUT, MINUS_M_OUT, N_OUT = range(4)
# counters (``counts``) and sampled timers (``timers``)
C_ELIMINATED, C_TIMED, C_TRACE, C_ROUND1, C_ROUND2, N_COUNTS = range(6)
T_SELECT, T_COMM, T_KERNEL, T_UPDATE, N_TIMERS = range(5)
# the INFO block after the two packets of round 1
INFO_CLOCK, INFO_ACTIVE, INFO_WINDOW, INFO = range(4)
TIMED_EVERY = 16  # iterations per timed one


@njit(cache=True, nogil=True, fastmath={"contract"})
def _finish1(kernel_id, v):
    """:func:`psvm.kernels.finish` of one value (the same arithmetic: compiled on its own,
    with :func:`psvm.kernels.finish_flat`'s flags, not inlined into the loop)."""
    if kernel_id == RBF:
        return exp(v)
    if kernel_id == SIGMOID:
        return math.tanh(v)
    return v


@njit(cache=True, nogil=True)
def _miss(cache, ker, kp, packet, row_width, all_pos, idx, part, s, hit):
    """Fill slot s (a miss, or a hit on an incomplete column): carry the column over from
    the previous window if it is there, then compute the rows it still lacks, or all."""
    if not hit:
        hit, complete = cc.carry(cache, s, np.int64(packet[GIDX]))
        if hit:  # a hit of the cache, which moved the column
            cache[cc.META][cc.HITS] += 1
            cache[cc.META][cc.MISSES] -= 1
            if complete:
                return
    _compute(cache, ker, kp, packet, row_width, all_pos, idx, part, s, hit)


@njit(cache=True, nogil=True)
def _compute(cache, ker, kp, packet, row_width, all_pos, idx, part, s, hit):
    """Fill slot s's column from the packet's row: rows that rejoined the window (a hit
    on an incomplete column), or all of them (a miss)."""
    col = cc.column(cache[cc.POOL], cache[cc.META][cc.WIDTH], s)
    nnz = np.int64(packet[NNZ])
    for p in range(nnz):
        idx[p] = np.int32(packet[ROW + p])
    val = packet[ROW + row_width : ROW + row_width + nnz]
    if hit:
        missing, row_nnz = cache[cc.MISSING], ker[4]
        work = 0
        for q in range(missing.size):
            work += row_nnz[missing[q]]
        kernel_column(ker, kp, idx[:nnz], val, packet[SQ], missing, part, work)
        for q in range(missing.size):
            col[missing[q]] = part[q]
        cache[cc.COMPLETE][s] = True
    else:
        kernel_column(ker, kp, idx[:nnz], val, packet[SQ], all_pos, col, ker[0][-1])


@njit(cache=True, nogil=True, _nrt=False)
def _ready(ctl_i, ctl_f, n_iter, gap):
    mode = ctl_i[READY]
    if mode == NEVER or n_iter < ctl_i[START] or n_iter % ctl_i[PERIOD] != 0:
        return False
    if mode == GAP_FRACTION:
        return gap < ctl_f[THETA] * ctl_f[GAP0]
    if mode == NEAR_TOL:
        return gap < 100.0 * ctl_f[TOL]
    return True


@njit(cache=True, nogil=True, _nrt=False)
def run(win, loc, ker, kp, cache, mpi, bufs, ctl_i, ctl_f, out, counts, timers, trace, ts):
    """SMO iterations until an event (returned); state, counters and traces updated in place.

    ``win``: the window's (rows, pos, y, alpha, C, G, QD, active, streak, up,
    low, obj, all_pos); ``loc``: the local rows (sq, indptr, indices, data)
    for packets; ``ker``, ``kp``: the window's kernel arrays and parameters
    (:func:`psvm.svc.columns.kernel_column`); ``cache``: :mod:`psvm.svc.cache`'s arrays;
    ``mpi``: :meth:`psvm.comm.Comm.compiled`; ``bufs``: (send1, recv1,
    send2, recv2, idx, part); ``trace``: (iter, gap, active, misses, clock).
    """
    rows, pos, y, alpha, C, G, QD, act, streak, up, low, obj, all_pos = win
    send1, recv1, send2, recv2, idx, part = bufs
    l_sq, l_indptr, l_indices, l_data = loc
    kid, gamma, coef0, degree = kp[0], kp[1], kp[2], kp[3]
    work = ker[9]
    S = send2.size
    W = ctl_i[ROW_WIDTH]
    offset = ctl_i[OFFSET]
    first_order = ctl_i[FIRST_ORDER] != 0
    clock_fn = ctl_i[CLOCK_FN]
    n_iter, n_active = ctl_i[N_ITER], ctl_i[N_ACTIVE]
    entry = n_iter
    send_i, send_j, info = send1[:S], send1[S : 2 * S], send1[2 * S :]
    tr_iter, tr_gap, tr_active, tr_misses, tr_clock = trace
    pool, keys, prev, nxt, table, complete, _, meta = cache[: cc.OLD_POOL]
    width = meta[cc.WIDTH]
    bids(y, alpha, C, G, act, up, low)
    m, i, minus_M, j = best(up, low)
    t0 = t1 = 0.0
    event = BUDGET
    while True:
        if n_iter - entry >= ctl_i[ITER_BUDGET] or counts[C_TRACE] >= tr_iter.size:
            break
        timed = n_iter % TIMED_EVERY == 0
        if timed:
            counts[C_TIMED] += 1
            t0 = now(clock_fn, ts)
        # round 1: candidates i and the best of I_low, with the counts the events need
        pack(send_i, m, i, True, W, rows, offset, y, alpha, G, C, QD, l_sq, l_indptr, l_indices,
             l_data)  # fmt: skip
        pack(send_j, minus_M, j, first_order, W, rows, offset, y, alpha, G, C, QD, l_sq, l_indptr,
             l_indices, l_data)  # fmt: skip
        info[INFO_CLOCK] = 0.0  # rank 0's clock: 1 a checkpoint is due, 2 a progress line
        if ctl_i[RANK] == 0 and timed:
            info[INFO_CLOCK] = (t0 >= ctl_f[DEADLINE]) + 2.0 * (t0 >= ctl_f[PROGRESS_AT])
        info[INFO_ACTIVE], info[INFO_WINDOW] = n_active, rows.size
        if timed:
            t1 = now(clock_fn, ts)
            timers[T_SELECT] += t1 - t0
        counts[C_ROUND1] += 1
        if allgather(mpi, send1, recv1) != 0:
            event = MPI_ERROR
            break
        if timed:
            t0 = now(clock_fn, ts)
            timers[T_COMM] += t0 - t1
        ck = ctl_i[CK_ITERS]
        if n_iter != ctl_i[CLOCK_DONE] and (
            recv1[0, 2 * S + INFO_CLOCK] > 0 or (ck > 0 and n_iter > 0 and n_iter % ck == 0)
        ):
            event = CLOCK
            break
        n_active_all = column_total(recv1, 2 * S + INFO_ACTIVE)
        n_window_all = column_total(recv1, 2 * S + INFO_WINDOW)
        if ctl_i[HAS_DEPARTURES] and n_window_all == ctl_i[N_SAMPLES]:
            event = ALL_BACK
            break
        if n_active_all < n_window_all and n_active_all <= ctl_f[RELAYOUT] * n_window_all:
            event = CUT
            break
        r_i, r_j = winner_rank(recv1, 0, True), winner_rank(recv1, S, True)
        m_all, minus_M_all = recv1[r_i, KEY], recv1[r_j, S + KEY]
        gap = m_all + minus_M_all if r_i >= 0 and r_j >= 0 else 0.0
        if math.isnan(ctl_f[GAP0]):
            ctl_f[GAP0] = gap
        out[GAP_OUT], out[M_OUT], out[MINUS_M_OUT] = gap, m_all, minus_M_all
        if n_iter % ctl_i[TRACE_EVERY] == 0 and n_iter != ctl_i[LAST_TRACE]:
            k = counts[C_TRACE]
            tr_iter[k], tr_gap[k], tr_active[k] = n_iter, gap, n_active
            tr_misses[k], tr_clock[k] = meta[cc.MISSES], now(clock_fn, ts)
            counts[C_TRACE] = k + 1
            ctl_i[LAST_TRACE] = n_iter
        if gap < ctl_f[TOL] or gap < ctl_f[NEXT_GAP]:
            event = GAP
            break
        if n_iter >= ctl_i[MAX_ITER_]:
            event = MAX_ITER
            break
        if _ready(ctl_i, ctl_f, n_iter, gap):
            gone = eliminate(y, alpha, C, G, act, m_all, -minus_M_all, streak, ctl_i[NEED])
            n_active -= gone
            counts[C_ELIMINATED] += gone
        p_i = recv1[r_i, :S]
        if timed:
            t1 = now(clock_fn, ts)
            timers[T_SELECT] += t1 - t0
        # the cache's arrays one by one: taking them out of its tuple in the loop would cost
        # a reference count each, every iteration
        s_i, hit = cc.get_slot(keys, prev, nxt, table, complete, meta, np.int64(p_i[GIDX]), -1)
        if not (hit and complete[s_i]):
            _miss(cache, ker, kp, p_i, W, all_pos, idx, part, s_i, hit)
        col_i = cc.column(pool, width, s_i)
        if timed:
            t0 = now(clock_fn, ts)
            timers[T_KERNEL] += t0 - t1
        if first_order:
            p_j = recv1[r_j, S : 2 * S]
        else:  # round 2: the partner j by the second-order gain
            key, q = second_order(y, alpha, C, G, QD, act, col_i, m_all, p_i[DIAG], obj)
            pack(send2, key, q, True, W, rows, offset, y, alpha, G, C, QD, l_sq, l_indptr,
                 l_indices, l_data)  # fmt: skip
            if timed:
                t1 = now(clock_fn, ts)
                timers[T_SELECT] += t1 - t0
            counts[C_ROUND2] += 1
            if allgather(mpi, send2, recv2) != 0:
                event = MPI_ERROR
                break
            if timed:
                t0 = now(clock_fn, ts)
                timers[T_COMM] += t0 - t1
            r2 = winner_rank(recv2, 0, False)
            if r2 < 0:  # no violating partner for i on any rank
                out[GAP_OUT] = 0.0
                event = NO_PAIR
                break
            p_j = recv2[r2]
        K_ij = _finish1(kid, pair_pre(p_i, p_j, W, work, kid, gamma, coef0, degree))
        a_i, a_j, c_i, c_j = pair_step(p_i, p_j, K_ij)
        s_j, hit = cc.get_slot(keys, prev, nxt, table, complete, meta, np.int64(p_j[GIDX]), s_i)
        if not (hit and complete[s_j]):  # the slot of column i stays
            _miss(cache, ker, kp, p_j, W, all_pos, idx, part, s_j, hit)
        col_j = cc.column(pool, width, s_j)
        if timed:
            t1 = now(clock_fn, ts)
            timers[T_KERNEL] += t1 - t0
        for g, new in ((p_i[GIDX], a_i), (p_j[GIDX], a_j)):
            lidx = np.int64(g) - offset
            if 0 <= lidx < pos.size:
                alpha[pos[lidx]] = new
        update_gradient(y, alpha, C, G, act, col_i, col_j, c_i, c_j, up, low)
        m, i, minus_M, j = best(up, low)
        n_iter += 1
        if timed:
            timers[T_UPDATE] += now(clock_fn, ts) - t1
    ctl_i[N_ITER], ctl_i[N_ACTIVE] = n_iter, n_active
    return event
