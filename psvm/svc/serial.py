"""The compiled SMO loop of one process: :func:`psvm.svc.engine.run`'s iterations, bit for bit.

With one process the winners are the window's own candidates: :func:`run_serial` reads i and
I_low's best from the window (:func:`select_serial`), K_ij from column i (:func:`step_serial`),
and needs no packets, copies or winner searches, which were half of a small window's
iteration. It tests the same events in the same order, with the engine's helpers. A small
window's columns come from a block after their first use (:func:`_serial_column`), and its
iterations between those that test an event, sample or eliminate run in a loop of their own
(:func:`_quiet`).
"""

from __future__ import annotations

from psvm.comm.compiled import now
from psvm.jit import inner, njit
from psvm.svc import cache as cc
from psvm.svc import window as W
from psvm.svc.elimination import NEVER
from psvm.svc.engine import (
    BUDGET,
    C_TIMED,
    CK_ITERS,
    CLOCK,
    CLOCK_FN,
    FIRST_ORDER,
    GAP_OUT,
    INFO_ACTIVE,
    INFO_CLOCK,
    ITER_BUDGET,
    M_NEG_OUT,
    M_OUT,
    MAX_ITER_,
    MINUS_M_NEG_OUT,
    MINUS_M_OUT,
    N_ACTIVE,
    N_ITER,
    N_KEEP,
    NEXT_GAP,
    NO_PAIR,
    NONE,
    PER_ROW,
    PERIOD,
    READY,
    ROW_WIDTH,
    START,
    T_KERNEL,
    T_SELECT,
    T_UPDATE,
    TIMED_EVERY,
    TOL,
    TRACE_EVERY,
    _clock,
    _events,
    _lap,
    _miss,
    _ready,
    _stop_test,
    shrink,
)
from psvm.svc.packets import BLOCK, HAVE, RECV1, REJOINED, ROW_IDX, SEND2, pack
from psvm.svc.passes import best_threads, pass_parts, second_order_threads, update_threads
from psvm.svc.select import best, bids, second_order_inlined
from psvm.svc.update import two_variable_step, update_gradient


@njit(cache=True, nogil=True, _nrt=False)
def run_serial(win, loc, ker, kp, cache, mpi, bufs, ctl_i, ctl_f, out, counts, timers, trace, ts):
    """:func:`psvm.svc.engine.run` for one process (``mpi`` unused): the same iterations, bit
    for bit, with the candidates read from the window instead of packets and no collective.
    The packets, their copies and the winner searches were half of a small window's iteration
    (iris-poly's 10-row window: 199 -> 103 ns). A small window's plain iterations, between
    those that test events, sample or eliminate, run in :func:`_quiet`."""
    bids(win[W.Y], win[W.ALPHA], win[W.C], win[W.G], win[W.ACTIVE], win[W.UP], win[W.LOW])
    # a large window's passes in the threads (:mod:`psvm.svc.passes`)
    parts = pass_parts(kp[6], win[W.Y].size, ctl_i[PER_ROW], bufs[REJOINED])
    entry = ctl_i[N_ITER]
    event = BUDGET
    small = bufs[BLOCK].shape[0] > 0  # a block for the window's columns (_serial_column)
    quiet = False  # plain runs may follow: a small window, no elimination test last (a cut may)
    while True:
        if quiet:
            _quiet(win, cache, bufs, ctl_i, ctl_f, out, _plain_until(ctl_i, entry))
        if ctl_i[N_ITER] - entry >= ctl_i[ITER_BUDGET]:
            break
        timed = ctl_i[N_ITER] % TIMED_EVERY == 0
        counts[C_TIMED] += timed
        event, i, j = select_serial(
            win, cache, bufs, ctl_i, ctl_f, out, counts, timers, trace, ts, timed, parts
        )
        if event != NONE:
            break
        ready = _ready(ctl_i, ctl_f, out[GAP_OUT])
        if ready:
            shrink(win, ctl_i, out, counts)
        quiet = small and not ready
        event = step_serial(
            win, loc, ker, kp, cache, bufs, ctl_i, out, timers, ts, timed, i, j, parts
        )
        if event != NONE:
            break
        ctl_i[N_ITER] += 1
    return BUDGET if event == NONE else event


@njit(cache=True, nogil=True, inline="always")
def select_serial(win, cache, bufs, ctl_i, ctl_f, out, counts, timers, trace, ts, timed, parts):
    """:func:`psvm.svc.engine.select` of one process: its best i and I_low are the winners,
    and the events are tested in the same order on the same values. Returns (event or NONE,
    i, j)."""
    rows, up, low = win[W.ROWS], win[W.UP], win[W.LOW]
    t = now(ctl_i[CLOCK_FN], ts) if timed else 0.0
    with_j = ctl_i[FIRST_ORDER] != 0
    if parts > 1:
        m, i, minus_M, j = best_threads(up, low, with_j, parts, bufs[REJOINED])
    else:
        m, i, minus_M, j = best(up, low, with_j)
    event = _serial_events(bufs, ctl_i, ctl_f, rows.size, timed, t)
    if event != NONE:
        return event, -1, -1
    gap = m + minus_M if i >= 0 and j >= 0 else 0.0
    out[M_OUT], out[MINUS_M_OUT] = m, minus_M
    out[M_NEG_OUT], out[MINUS_M_NEG_OUT] = m, minus_M
    event = _stop_test(gap, cache, ctl_i, ctl_f, out, counts, trace, ts)
    _lap(timed, ctl_i, ts, timers, T_SELECT, t)
    return event, i, j


@inner(_nrt=False)
def _serial_events(bufs, ctl_i, ctl_f, window, timed, t):
    """:func:`psvm.svc.engine._exchange`'s events of one process; a CLOCK event leaves the
    INFO block in ``recv1`` as the Allgather would (the solver reads the clock flag and the
    active rows)."""
    clock = _clock(ctl_f, t) if timed else 0.0
    event = _events(ctl_i, ctl_f, clock, float(ctl_i[N_KEEP]), float(window))
    if event == CLOCK:
        info = bufs[RECV1][0, 2 * bufs[SEND2].size :]
        info[INFO_CLOCK], info[INFO_ACTIVE] = clock, ctl_i[N_ACTIVE]
    return event


@njit(cache=True, nogil=True, inline="always")
def step_serial(win, loc, ker, kp, cache, bufs, ctl_i, out, timers, ts, timed, i, j, parts):
    """:func:`psvm.svc.engine.step` of one process, on window positions i and j (j: the first-order
    partner; second order finds its own), its passes in ``parts`` threads. NONE or NO_PAIR."""
    QD, low, obj = win[W.QD], win[W.LOW], win[W.OBJ]
    t = now(ctl_i[CLOCK_FN], ts) if timed else 0.0
    col_i, s_i = _serial_column(win, loc, ker, kp, cache, bufs, ctl_i, ts, timers, timed, i, -1)
    t = _lap(timed, ctl_i, ts, timers, T_KERNEL, t)
    if ctl_i[FIRST_ORDER] == 0:
        if parts > 1:
            # (the scratch of a column's rejoined rows is free between columns)
            _, j = second_order_threads(
                low, QD, col_i, out[M_OUT], QD[i], obj, parts, bufs[REJOINED]
            )
        else:
            _, j = second_order_inlined(low, QD, col_i, out[M_OUT], QD[i], obj)
        t = _lap(timed, ctl_i, ts, timers, T_SELECT, t)
        if j < 0:
            out[GAP_OUT] = 0.0
            return NO_PAIR
    step = _pair_step(win, i, j, col_i)
    col_j, _ = _serial_column(win, loc, ker, kp, cache, bufs, ctl_i, ts, timers, timed, j, s_i)
    t = _lap(timed, ctl_i, ts, timers, T_KERNEL, t)
    _pair_update(win, i, j, step, col_i, col_j, parts)
    _lap(timed, ctl_i, ts, timers, T_UPDATE, t)
    return NONE


@inner(_nrt=False, inline="always")
def _pair_step(win, i, j, col_i):
    """The two-variable step of window positions i and j: (a_i, a_j, c_i, c_j), c the change
    of y alpha (:func:`step_serial` and :func:`_quiet`)."""
    y, alpha, C, G, QD = win[W.Y], win[W.ALPHA], win[W.C], win[W.G], win[W.QD]
    a_i, a_j = two_variable_step(
        y[i], y[j], alpha[i], alpha[j], G[i], G[j], C[i], C[j], QD[i], QD[j], col_i[j % col_i.size]
    )
    return a_i, a_j, y[i] * (a_i - alpha[i]), y[j] * (a_j - alpha[j])


@inner(_nrt=False, inline="always")
def _pair_update(win, i, j, step, col_i, col_j, parts):
    """Set the step's alphas and update the window's gradient and bids (in ``parts``
    threads)."""
    _, _, y, alpha, C, G, _, act, _, up, low = win[:11]
    a_i, a_j, c_i, c_j = step
    alpha[i], alpha[j] = a_i, a_j
    if parts > 1:
        update_threads(y, alpha, C, G, act, col_i, col_j, c_i, c_j, up, low, i, j, parts)
    else:
        update_gradient(y, alpha, C, G, act, col_i, col_j, c_i, c_j, up, low, i, j)


@njit(cache=True, nogil=True, inline="always")
def _serial_column(win, loc, ker, kp, cache, bufs, ctl_i, ts, timers, timed, q, keep):
    """(column of window position q, its cache slot or -1). With a block (``BLOCK``, a row
    per kernel row of a small window; ``HAVE``, the rows it holds) a column is copied there
    at its first use and read from there after, the hit counted as the cache counts it: the
    cache's look-up and LRU move were 12 of the 82 ns of a 10-row window's iteration. A block
    is made only when the cache holds all the window's columns, so it evicts none and the
    counts are the cache's (:meth:`psvm.svc.solver.Solver._block`)."""
    block, have, k = bufs[BLOCK], bufs[HAVE], win[W.VROW][q]
    small = block.shape[0] > 0
    if small and have[k]:
        cache[cc.META][cc.HITS] += 1
        return block[k], -1
    s = _serial_slot(win, loc, ker, kp, cache, bufs, ctl_i, ts, timers, timed, q, keep)
    col = cc.column(cache[cc.POOL], cache[cc.META][cc.WIDTH], s)
    if small:
        row = block[k]
        for t in range(row.size):  # (a slice assignment may allocate: no NRT here)
            row[t] = col[t]
        have[k] = True
    return col, s


@njit(cache=True, nogil=True, inline="always")
def _serial_slot(win, loc, ker, kp, cache, bufs, ctl_i, ts, timers, timed, q, keep):
    """The cache slot of window position q's column, filled on a miss from q's packet
    (packed then only, into ``send2``)."""
    pool, keys, prev, nxt, table, complete, _, meta = cache[: cc.OLD_POOL]
    _, _, y, alpha, C, G, QD, _, _, _, _, _, all_pos, gid, vrow = win
    width = ctl_i[ROW_WIDTH]
    s, hit = cc.get_slot(
        keys, prev, nxt, table, complete, meta, cache[cc.GHOST_KEYS], cache[cc.GHOST_TABLE],
        loc[0][vrow[q]], keep,
    )  # fmt: skip
    if not (hit and complete[s]):
        packet, idx, part = bufs[SEND2], bufs[ROW_IDX], bufs[REJOINED]
        pack(packet, 0.0, q, True, width, gid, vrow, y, alpha, G, C, QD, *loc)
        _miss(cache, ker, kp, packet, width, all_pos, idx, part, s, hit, ctl_i, ts, timers, timed)
    return s


@njit(cache=True, nogil=True, _nrt=False)
def _plain_until(ctl_i, entry):
    """The first iteration from N_ITER on that may need more than a plain step: a timed one
    (the clock is read only there), a trace sample, an elimination test, a checkpoint by
    iterations, the iteration limit or the budget's end. A cut can only follow an
    elimination test and all rows back only a call's start, both full iterations; the stop
    test and a missing partner :func:`_quiet` tests itself."""
    n = ctl_i[N_ITER]
    until = min(entry + ctl_i[ITER_BUDGET], ctl_i[MAX_ITER_])
    until = min(until, _next_multiple(n, TIMED_EVERY), _next_multiple(n, ctl_i[TRACE_EVERY]))
    if ctl_i[READY] != NEVER:
        until = min(until, _next_multiple(max(n, ctl_i[START]), ctl_i[PERIOD]))
    if ctl_i[CK_ITERS] > 0:
        until = min(until, _next_multiple(n, ctl_i[CK_ITERS]))
    return until


@inner(_nrt=False, inline="always")
def _next_multiple(n, k):
    """The first multiple of k from n on."""
    return (n + k - 1) // k * k


@inner(_nrt=False, inline="always")
def _quiet(win, cache, bufs, ctl_i, ctl_f, out, until):
    """Plain iterations of a small window up to ``until`` (:func:`_plain_until`): those of
    :func:`select_serial` and :func:`step_serial` when no event is due and both columns are
    in the block, and nothing else. It stops before an iteration that needs more (the stop
    test holds, no partner, a column not yet in the block), which the full one then makes.
    Inlined: a call passing the window, cache and buffers cost more than it saved. On
    iris-poly's last 10-row window the full iterations ran at one of two speeds set by where
    a process loaded the code (72-79 or 97-168 ns); this loop at 65-73 ns in 30 of 32 loads."""
    QD, up, low, obj, vrow = win[W.QD], win[W.UP], win[W.LOW], win[W.OBJ], win[W.VROW]
    block, have = bufs[BLOCK], bufs[HAVE]
    first_order, tol, next_gap = ctl_i[FIRST_ORDER] != 0, ctl_f[TOL], ctl_f[NEXT_GAP]
    start = n = ctl_i[N_ITER]
    last = (0.0, 0.0, 0.0)  # the last step's (gap, m, -M): those select_serial leaves
    while n < until:
        m, i, minus_M, j = best(up, low, first_order)
        gap = m + minus_M
        # (the stop test negated: a NaN gap goes to the full iteration, as it stops there)
        if i < 0 or j < 0 or not (gap >= tol and gap >= next_gap) or not have[vrow[i]]:
            break
        col_i = block[vrow[i]]
        if not first_order:
            _, j = second_order_inlined(low, QD, col_i, m, QD[i], obj)
            if j < 0:
                break
        if not have[vrow[j]]:
            break
        _pair_update(win, i, j, _pair_step(win, i, j, col_i), col_i, block[vrow[j]], 1)
        last = (gap, m, minus_M)
        n += 1
    if n > start:  # the block's hits counted as the cache counts them
        out[GAP_OUT], out[M_OUT], out[MINUS_M_OUT] = last
        out[M_NEG_OUT], out[MINUS_M_NEG_OUT] = last[1], last[2]
        cache[cc.META][cc.HITS] += 2 * (n - start)
        ctl_i[N_ITER] = n
