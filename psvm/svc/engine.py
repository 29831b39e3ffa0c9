"""The compiled SMO loop: selection, collectives, kernel columns, step and update in numba.

One call of :func:`run` performs SMO iterations (LIBSVM's ``Solver::Solve``
loop) until an *event* that needs Python: an iteration budget, the stop test,
a window cut, the clock (checkpoint or progress line), the iteration limit.
Events are rare (a handful per solve, plus one per budget), so no Python runs
per iteration. Every event is decided from values all ranks share (the
gathered packets, the iteration count), so all ranks return on the same
iteration and Python's collective handling of it stays in step. :data:`BUDGET` too:
the ranks grow the budget together (:meth:`psvm.svc.solver.Solver._run`). The nu types
run :func:`psvm.svc.engine_nu.run_nu`, one process the loop of :mod:`psvm.svc.serial`.

One iteration (see :mod:`psvm.svc.solver` for the algorithm), as in LIBSVM's
``Solver::Solve``, each part a function:

- :func:`select`: each rank packs its best i and best of I_low (:func:`pack`);
  one Allgather; every rank picks the same winners (:func:`winner_rank`) and
  checks the events and the stop test;
- :func:`shrink`: the policy's elimination test, now and then (:func:`_ready`);
- :func:`step`: the column K(x_i, window) from the cache, carried over from
  the previous window, or computed (:func:`_miss`); second-order j, local best
  by the gain (:func:`second_order`), one Allgather; the two-variable step
  from the two packets (:func:`pair_step`), the column of j, and the gradient
  update of the window, which also writes the next bids
  (:func:`update_gradient`).

One process runs :func:`psvm.svc.serial.run_serial`: the same iterations without packets,
with this module's events, stop test, trace, elimination test and column fills.

:func:`select` and :func:`step` are inlined into :func:`run` (a call passing
the window's arrays costs 0.2 µs), and so are the cache look-up, the gradient
update and the Allgather (each array travels as seven words on the stack: on
iris-poly's 10-row window these calls cost a third of an iteration); the loop
and its helpers are compiled without reference counting (``_nrt=False``: they
allocate nothing), which cost a third of a small problem's time. With one
process K_ij is read from column i (the packets give the same bits).

The phase timers are sampled on every 64th iteration (a timed iteration reads
the clock a few times, 20 ns a read: every 16th cost iris-poly 5% of its time);
:class:`psvm.svc.solver.Solver` scales them to the whole run. Filling a column (a
miss, or a column carried over or completed: :func:`_miss`) and the Allgathers
(:func:`_gather`) are timed every time instead: their costs vary most (new memory,
a column over every row; a wait for the other ranks), and one slow call sampled
counted 64 times.
"""

from __future__ import annotations

import math

import numpy as np

from psvm.comm.compiled import allgather, now
from psvm.jit import inner, njit
from psvm.kernels import RBF, SIGMOID, exp
from psvm.svc import cache as cc
from psvm.svc import window as W
from psvm.svc.columns import kernel_column
from psvm.svc.elimination import GAP_FRACTION, NEAR_TOL, NEVER
from psvm.svc.packets import (
    DIAG,
    KEY,
    NNZ,
    POS,
    RECV1,
    RECV2,
    REJOINED,
    RKEY,
    ROW,
    ROW_IDX,
    SEND1,
    SEND2,
    SQ,
    column_total,
    pack,
    pair_pre,
    pair_step,
)
from psvm.svc.packets import winner as winner_rank
from psvm.svc.select import best, bids, second_order_inlined
from psvm.svc.update import update_gradient

# events: why :func:`run` returned
BUDGET, GAP, MAX_ITER, NO_PAIR, CUT, CLOCK, ALL_BACK, MPI_ERROR = range(8)
NONE = -1  # no event: the iteration goes on
# integer controls (``ctl_i``)
(MAX_ITER_, ITER_BUDGET, FIRST_ORDER, PERIOD, NEED, READY, N_SAMPLES, N_ITER, N_ACTIVE,
 ROW_WIDTH, CK_ITERS, CLOCK_DONE, HAS_DEPARTURES, TRACE_EVERY, LAST_TRACE, RANK, CLOCK_FN,
 START, PER_ROW, N_KEEP, N_CTL_I) = range(21)  # fmt: skip
# N_KEEP: the window's variables a cut keeps (SVR: both variables of a row with an active one)
# float controls (``ctl_f``)
TOL, NEXT_GAP, DEADLINE, PROGRESS_AT, GAP0, THETA, RELAYOUT, N_CTL_F = range(8)
# outputs (``out``): the gap and the extremes at the last test (those of the rows with
# y = -1 apart: the nu types' Solver_NU; the same values otherwise)
GAP_OUT, M_OUT, MINUS_M_OUT, M_NEG_OUT, MINUS_M_NEG_OUT, N_OUT = range(6)
# counters (``counts``); sampled timers, the Allgathers' and the column fills' times (``timers``)
C_ELIMINATED, C_TIMED, C_TRACE, C_ROUND1, C_ROUND2, N_COUNTS = range(6)
T_SELECT, T_COMM, T_KERNEL, T_UPDATE, T_FILLS, N_TIMERS = range(6)
# the INFO block after the two packets of round 1
INFO_CLOCK, INFO_ACTIVE, INFO_KEEP, INFO_WINDOW, INFO = range(5)
TIMED_EVERY = 64  # iterations per timed one


@njit(cache=True, nogil=True, fastmath={"contract"})
def _from_pre1(kernel_id, v):
    """:func:`psvm.kernels.from_pre` of one value (the same arithmetic: compiled on its own,
    with :func:`psvm.kernels.from_pre_flat`'s flags, not inlined into the loop)."""
    if kernel_id == RBF:
        return exp(v)
    if kernel_id == SIGMOID:
        return math.tanh(v)
    return v


@inner
def _miss(cache, ker, kp, packet, row_width, all_pos, idx, part, s, hit, ctl_i, ts, timers, timed):
    """:func:`_fill`, its time added to ``timers[T_FILLS]`` (every fill, not sampled) and, on
    a timed iteration, taken out of the sampled kernel lap that holds it."""
    t = now(ctl_i[CLOCK_FN], ts)
    _fill(cache, ker, kp, packet, row_width, all_pos, idx, part, s, hit)
    d = now(ctl_i[CLOCK_FN], ts) - t
    timers[T_FILLS] += d
    if timed:
        timers[T_KERNEL] -= d


@inner
def _fill(cache, ker, kp, packet, row_width, all_pos, idx, part, s, hit):
    """Fill slot s (a miss, or a hit on an incomplete column): carry the column over from
    the previous window if it is there, then compute the rows it still lacks, or all."""
    if not hit:
        hit, complete = cc.carry(cache, s, np.int64(packet[RKEY]))
        if hit:  # a hit of the cache, which moved the column
            cache[cc.META][cc.HITS] += 1
            cache[cc.META][cc.MISSES] -= 1
            if complete:
                return
    _compute(cache, ker, kp, packet, row_width, all_pos, idx, part, s, hit)


@inner
def _compute(cache, ker, kp, packet, row_width, all_pos, idx, part, s, hit):
    """Fill slot s's column from the packet's row: rows that rejoined the window (a hit
    on an incomplete column), or all of them (a miss). A column holds a value per
    kernel row of the window (an SVR row's two variables share it)."""
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


@inner(_nrt=False, inline="always")
def _gather(mpi, send, recv, ctl_i, ts, timers):
    """The Allgather, its time added to ``timers[T_COMM]`` on every call (a rank's wait for
    the others' jitter has a long tail, which sampling counted 64 times); returns MPI's code
    and the time after it (the next lap's start)."""
    t = now(ctl_i[CLOCK_FN], ts)
    code = allgather(mpi, send, recv)
    end = now(ctl_i[CLOCK_FN], ts)
    timers[T_COMM] += end - t
    return code, end


@inner(_nrt=False)
def _lap(timed, ctl_i, ts, timers, k, since):
    """On a timed iteration, add the time since ``since`` to timer k; returns the time now."""
    if not timed:
        return 0.0
    t = now(ctl_i[CLOCK_FN], ts)
    timers[k] += t - since
    return t


@njit(cache=True, nogil=True, _nrt=False)
def run(win, loc, ker, kp, cache, mpi, bufs, ctl_i, ctl_f, out, counts, timers, trace, ts):
    """SMO iterations until an event (returned); state, counters and traces updated in place.

    ``win``: the window's (variables, pos, y, alpha, C, G, QD, active, streak, up,
    low, obj, all_pos, gid, vrow): its local variables, then per window position
    their state, and their global indices and rows in ``loc`` (``all_pos``: the window
    kernel's rows; with two variables per row, the window holds both variables of
    its rows: the first ones, then the second ones, in ``all_pos``'s order);
    ``loc``: the window kernel's rows (global row, sq, indptr, indices, data) for packets;
    ``ker``, ``kp``: the window's kernel arrays and parameters
    (:func:`psvm.svc.columns.kernel_column`); ``cache``: :mod:`psvm.svc.cache`'s
    arrays; ``mpi``: :meth:`psvm.comm.Comm.compiled`; ``bufs``: (send1, recv1, send2,
    recv2, idx, part, block, have: :data:`psvm.svc.packets.SEND1` and on); ``trace``:
    (iter, gap, active, misses, clock).
    """
    # every row's bids: Python may have changed alpha or the flags; the update keeps them
    bids(win[W.Y], win[W.ALPHA], win[W.C], win[W.G], win[W.ACTIVE], win[W.UP], win[W.LOW])
    entry = ctl_i[N_ITER]
    event = BUDGET
    while ctl_i[N_ITER] - entry < ctl_i[ITER_BUDGET]:
        timed = ctl_i[N_ITER] % TIMED_EVERY == 0
        counts[C_TIMED] += timed
        event, r_i, r_j = select(
            win, loc, cache, mpi, bufs, ctl_i, ctl_f, out, counts, timers, trace, ts, timed
        )
        if event != NONE:
            break
        if _ready(ctl_i, ctl_f, out[GAP_OUT]):
            shrink(win, ctl_i, out, counts)
        event = step(
            win, loc, ker, kp, cache, mpi, bufs, ctl_i, out, counts, timers, ts, timed, r_i, r_j
        )
        if event != NONE:
            break
        ctl_i[N_ITER] += 1
    return BUDGET if event == NONE else event  # the loop ran out of its budget


@njit(cache=True, nogil=True, inline="always")
def select(win, loc, cache, mpi, bufs, ctl_i, ctl_f, out, counts, timers, trace, ts, timed):
    """Round 1: every rank sends its best i and best of I_low with the counts the events
    need; all pick the same winners and test the events and the stop test, in order.
    Returns (event or NONE, winning rank of i, of I_low); the gap and extremes in ``out``."""
    rows, _, y, alpha, C, G, QD, act, _, up, low = win[:11]
    gid, vrow = win[W.GID], win[W.VROW]
    send1, recv1, send2 = bufs[SEND1], bufs[RECV1], bufs[SEND2]
    size, width = send2.size, ctl_i[ROW_WIDTH]
    t = now(ctl_i[CLOCK_FN], ts) if timed else 0.0
    with_row = ctl_i[FIRST_ORDER] != 0  # first order: the best of I_low is j, row and all
    m, i, minus_M, j = best(up, low, with_row)  # else only -M: j is any of I_low
    pack(send1[:size], m, i, True, width, gid, vrow, y, alpha, G, C, QD, *loc)
    pack(
        send1[size : 2 * size],
        minus_M,
        j,
        with_row,
        width,
        gid,
        vrow,
        y,
        alpha,
        G,
        C,
        QD,
        *loc,
    )
    event, t = _exchange(
        send1, recv1, 2 * size, rows.size, mpi, ctl_i, ctl_f, counts, timers, ts, timed, t
    )
    if event != NONE:
        return event, -1, -1
    r_i, r_j = winner_rank(recv1, 0, True), winner_rank(recv1, size, True)
    m_all, minus_M_all = recv1[r_i, KEY], recv1[r_j, size + KEY]
    gap = m_all + minus_M_all if r_i >= 0 and r_j >= 0 else 0.0
    out[M_OUT], out[MINUS_M_OUT] = m_all, minus_M_all
    out[M_NEG_OUT], out[MINUS_M_NEG_OUT] = m_all, minus_M_all
    event = _stop_test(gap, cache, ctl_i, ctl_f, out, counts, trace, ts)
    _lap(timed, ctl_i, ts, timers, T_SELECT, t)
    return event, r_i, r_j


@njit(cache=True, nogil=True, inline="always")
def _exchange(send1, recv1, base, window, mpi, ctl_i, ctl_f, counts, timers, ts, timed, t):
    """Round 1's INFO block (at ``base``), the Allgather, and the events every rank reads
    from it (checkpoint or progress clock, all rows back, a window cut): (event, time).
    ``window``: this rank's window size."""
    info = send1[base:]
    info[INFO_CLOCK] = _clock(ctl_f, t) if ctl_i[RANK] == 0 and timed else 0.0  # rank 0's
    info[INFO_ACTIVE], info[INFO_KEEP], info[INFO_WINDOW] = ctl_i[N_ACTIVE], ctl_i[N_KEEP], window
    t = _lap(timed, ctl_i, ts, timers, T_SELECT, t)
    counts[C_ROUND1] += 1
    code, t = _gather(mpi, send1, recv1, ctl_i, ts, timers)
    if code != 0:
        return MPI_ERROR, t
    n_keep = column_total(recv1, base + INFO_KEEP)
    n_window = column_total(recv1, base + INFO_WINDOW)
    return _events(ctl_i, ctl_f, recv1[0, base + INFO_CLOCK], n_keep, n_window), t


@inner(_nrt=False)
def _clock(ctl_f, t):
    """Rank 0's clock flag at time t: 1 a checkpoint is due, 2 a progress line (3 both)."""
    return (t >= ctl_f[DEADLINE]) + 2.0 * (t >= ctl_f[PROGRESS_AT])


@inner(_nrt=False)
def _events(ctl_i, ctl_f, clock, n_keep, n_window):
    """The events of round 1, in order: the clock (rank 0's flag, or every CK_ITERS
    iterations), all rows back, a window cut (``n_keep`` of ``n_window`` variables over all
    ranks, as floats); NONE."""
    n_iter, ck = ctl_i[N_ITER], ctl_i[CK_ITERS]
    if n_iter != ctl_i[CLOCK_DONE] and (clock > 0 or (ck > 0 and n_iter > 0 and n_iter % ck == 0)):
        return CLOCK
    if ctl_i[HAS_DEPARTURES] and n_window == ctl_i[N_SAMPLES]:
        return ALL_BACK
    if n_keep < n_window and n_keep <= ctl_f[RELAYOUT] * n_window:
        return CUT
    return NONE


@njit(cache=True, nogil=True, inline="always")
def _stop_test(gap, cache, ctl_i, ctl_f, out, counts, trace, ts):
    """Record the gap (and a trace sample when due); GAP, MAX_ITER or NONE."""
    n_iter = ctl_i[N_ITER]
    if math.isnan(ctl_f[GAP0]):
        ctl_f[GAP0] = gap
    out[GAP_OUT] = gap
    if n_iter % ctl_i[TRACE_EVERY] == 0 and n_iter != ctl_i[LAST_TRACE]:
        _record(trace, counts, ctl_i, cache[cc.META][cc.MISSES], gap, ts)
    if gap < ctl_f[TOL] or gap < ctl_f[NEXT_GAP] or gap != gap:  # NaN: stop, Python refuses it
        return GAP
    if n_iter >= ctl_i[MAX_ITER_]:
        return MAX_ITER
    return NONE


@inner(_nrt=False)
def _record(trace, counts, ctl_i, misses, gap, ts):
    """One trace sample: iteration, gap, local active rows, cache misses, clock. A full buffer
    keeps the samples on twice the stride, which the next ones follow: the trace stays
    bounded whatever the iteration count with no return to Python, and every rank thins at
    the same iterations."""
    k = counts[C_TRACE]
    trace[0][k], trace[1][k], trace[2][k] = ctl_i[N_ITER], gap, ctl_i[N_ACTIVE]
    trace[3][k], trace[4][k] = misses, now(ctl_i[CLOCK_FN], ts)
    k += 1
    if k == trace[0].size:
        ctl_i[TRACE_EVERY] *= 2
        k = _thin(trace, k, ctl_i[TRACE_EVERY])
    counts[C_TRACE] = k
    ctl_i[LAST_TRACE] = ctl_i[N_ITER]


@inner(_nrt=False)
def _thin(trace, k, stride):
    """Keep the first ``k`` samples whose iteration is a multiple of ``stride``, in order;
    their number."""
    kept = 0
    for t in range(k):
        if trace[0][t] % stride == 0:
            trace[0][kept], trace[1][kept], trace[2][kept] = trace[0][t], trace[1][t], trace[2][t]
            trace[3][kept], trace[4][kept] = trace[3][t], trace[4][t]
            kept += 1
    return kept


@inner(_nrt=False)
def _ready(ctl_i, ctl_f, gap):
    """Whether the policy tests the elimination rule at this iteration."""
    n_iter, mode = ctl_i[N_ITER], ctl_i[READY]
    if mode == NEVER or n_iter < ctl_i[START] or n_iter % ctl_i[PERIOD] != 0:
        return False
    if mode == GAP_FRACTION:
        return gap < ctl_f[THETA] * ctl_f[GAP0]
    if mode == NEAR_TOL:
        return gap < 100.0 * ctl_f[TOL]
    return True


@njit(cache=True, nogil=True, _nrt=False)
def eliminate(y, alpha, C, G, act, m, M, m_neg, M_neg, streak, need):
    """Clear ``act`` of the active rows that the rule selects; returns how many left.

    A row leaves when the rule has held at ``need`` consecutive checks
    (``streak`` counts them per row; ``need`` = 1 acts at once). Rows with y = -1
    are tested against m_neg and M_neg (Solver_NU's be_shrunk; the same as m, M otherwise).
    """
    n_out = 0
    for t in range(y.size):
        if not act[t]:
            continue
        v = -y[t] * G[t]
        if alpha[t] >= C[t]:
            rule = v > m if y[t] > 0 else v < M_neg
        elif alpha[t] <= 0.0:
            rule = v < M if y[t] > 0 else v > m_neg
        else:
            rule = False
        streak[t] = streak[t] + 1 if rule else 0
        if streak[t] >= need:
            act[t] = False
            n_out += 1
    return n_out


@inner(_nrt=False)
def shrink(win, ctl_i, out, counts):
    """The policy's elimination test against the gathered extremes (LIBSVM's do_shrinking)."""
    _, _, y, alpha, C, G, _, act, streak, up, low = win[:11]
    m, M, m_neg, M_neg = out[M_OUT], -out[MINUS_M_OUT], out[M_NEG_OUT], -out[MINUS_M_NEG_OUT]
    gone = eliminate(y, alpha, C, G, act, m, M, m_neg, M_neg, streak, ctl_i[NEED])
    ctl_i[N_ACTIVE] -= gone
    counts[C_ELIMINATED] += gone
    if gone:  # the rows that left bid no more (second_order and the next update read them)
        bids(y, alpha, C, G, act, up, low)
    if ctl_i[PER_ROW] == 1:
        ctl_i[N_KEEP] = ctl_i[N_ACTIVE]
    elif gone:
        ctl_i[N_KEEP] = kept_pairs(act)


@inner(_nrt=False)
def kept_pairs(act):
    """The window variables a cut keeps with two variables per row (the window's first
    variables, then its second ones): both of each row with an active one."""
    h, n = act.size // 2, 0
    for t in range(h):
        n += act[t] or act[h + t]
    return 2 * n


@inner(_nrt=False)
def _set_alphas(alpha, rank, r_i, p_i, a_i, r_j, p_j, a_j):
    """The owners set the new alphas (every rank has the step); their window positions,
    -1 where another rank owns the variable."""
    q_i = np.int64(p_i[POS]) if r_i == rank else -1
    q_j = np.int64(p_j[POS]) if r_j == rank else -1
    if q_i >= 0:
        alpha[q_i] = a_i
    if q_j >= 0:
        alpha[q_j] = a_j
    return q_i, q_j


@njit(cache=True, nogil=True, inline="always")
def step(win, loc, ker, kp, cache, mpi, bufs, ctl_i, out, counts, timers, ts, timed, r_i, r_j):
    """Column i; round 2, the partner j by the second-order gain (or I_low's best, first
    order); the two-variable step; column j; the gradient update. NONE or an event."""
    _, _, y, alpha, C, G, QD, act, _, up, low, obj, all_pos, gid, vrow = win
    recv1, send2, recv2 = bufs[RECV1], bufs[SEND2], bufs[RECV2]
    idx, part = bufs[ROW_IDX], bufs[REJOINED]
    pool, keys, prev, nxt, table, complete, _, meta = cache[: cc.OLD_POOL]
    gkeys, gtable = cache[cc.GHOST_KEYS], cache[cc.GHOST_TABLE]
    size, width = send2.size, ctl_i[ROW_WIDTH]
    t = now(ctl_i[CLOCK_FN], ts) if timed else 0.0
    p_i = recv1[r_i, :size]
    # the cache's arrays one by one: the tuple's would cost a look-up each, every iteration
    s_i, hit = cc.get_slot(
        keys, prev, nxt, table, complete, meta, gkeys, gtable, np.int64(p_i[RKEY]), -1
    )
    if not (hit and complete[s_i]):
        _miss(cache, ker, kp, p_i, width, all_pos, idx, part, s_i, hit, ctl_i, ts, timers, timed)
    col_i = cc.column(pool, meta[cc.WIDTH], s_i)
    t = _lap(timed, ctl_i, ts, timers, T_KERNEL, t)
    if ctl_i[FIRST_ORDER] != 0:
        p_j = recv1[r_j, size : 2 * size]
    else:  # r_j becomes the rank of round 2's winner
        key, q = second_order_inlined(low, QD, col_i, out[M_OUT], p_i[DIAG], obj)
        pack(send2, key, q, True, width, gid, vrow, y, alpha, G, C, QD, *loc)
        t = _lap(timed, ctl_i, ts, timers, T_SELECT, t)
        counts[C_ROUND2] += 1
        code, t = _gather(mpi, send2, recv2, ctl_i, ts, timers)
        if code != 0:
            return MPI_ERROR
        r_j = winner_rank(recv2, 0, False)
        if r_j < 0:  # no violating partner for i on any rank
            out[GAP_OUT] = 0.0
            return NO_PAIR
        p_j = recv2[r_j]
    if mpi[3] == 1:  # one process: column i holds K_ij, with the packets' bits
        K_ij = col_i[np.int64(p_j[POS]) % col_i.size]  # (an SVR row's two variables: one)
    else:
        K_ij = _from_pre1(kp[0], pair_pre(p_i, p_j, width, ker[9], kp[0], kp[1], kp[2], kp[3]))
    a_i, a_j, c_i, c_j = pair_step(p_i, p_j, K_ij)
    s_j, hit = cc.get_slot(
        keys, prev, nxt, table, complete, meta, gkeys, gtable, np.int64(p_j[RKEY]), s_i
    )
    if not (hit and complete[s_j]):  # the slot of column i stays
        _miss(cache, ker, kp, p_j, width, all_pos, idx, part, s_j, hit, ctl_i, ts, timers, timed)
    col_j = cc.column(pool, meta[cc.WIDTH], s_j)
    t = _lap(timed, ctl_i, ts, timers, T_KERNEL, t)
    q_i, q_j = _set_alphas(alpha, ctl_i[RANK], r_i, p_i, a_i, r_j, p_j, a_j)
    update_gradient(y, alpha, C, G, act, col_i, col_j, c_i, c_j, up, low, q_i, q_j)
    _lap(timed, ctl_i, ts, timers, T_UPDATE, t)
    return NONE
