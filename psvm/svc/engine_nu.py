"""The compiled loop of the nu types (nu-SVC, nu-SVR): LIBSVM's ``Solver_NU``.

As :func:`psvm.svc.engine.run`, with selection and the step per sign of y: round 1 sends
each sign's best i and best of I_low (four packets), the gap is the larger of the two
signs'; round 2 finds j by the second-order gain against the i of its own sign. A loop of
its own, so that the other types never compile the nu path (seconds at first use).
"""

from __future__ import annotations

import numpy as np

from psvm.comm.compiled import now
from psvm.jit import inner, njit
from psvm.svc import cache as cc
from psvm.svc import window as W
from psvm.svc.engine import (
    BUDGET,
    C_ROUND2,
    C_TIMED,
    CLOCK_FN,
    GAP_OUT,
    ITER_BUDGET,
    M_NEG_OUT,
    M_OUT,
    MINUS_M_NEG_OUT,
    MINUS_M_OUT,
    MPI_ERROR,
    N_ITER,
    NO_PAIR,
    NONE,
    PER_ROW,
    RANK,
    ROW_WIDTH,
    T_KERNEL,
    T_SELECT,
    T_UPDATE,
    TIMED_EVERY,
    _exchange,
    _from_pre1,
    _gather,
    _lap,
    _miss,
    _ready,
    _set_alphas,
    _stop_test,
    shrink,
)
from psvm.svc.packets import (
    DIAG,
    KEY,
    RECV1,
    RECV2,
    REJOINED,
    RKEY,
    ROW_IDX,
    SEND1,
    SEND2,
    Y,
    pack,
    pair_pre,
    pair_step,
)
from psvm.svc.packets import winner as winner_rank
from psvm.svc.passes import (
    best_of_sign_threads,
    best_threads,
    pass_parts,
    second_order_nu_threads,
    update_threads,
)
from psvm.svc.select import best, best_of_sign, bids, second_order_nu
from psvm.svc.update import update_gradient


@njit(cache=True, nogil=True, _nrt=False)
def run_nu(win, loc, ker, kp, cache, mpi, bufs, ctl_i, ctl_f, out, counts, timers, trace, ts):
    """:func:`psvm.svc.engine.run` for the nu types (Solver_NU: selection and step per sign
    of y)."""
    bids(win[W.Y], win[W.ALPHA], win[W.C], win[W.G], win[W.ACTIVE], win[W.UP], win[W.LOW])
    # a large window's passes in the threads (:mod:`psvm.svc.passes`)
    parts = pass_parts(kp[6], win[W.Y].size, ctl_i[PER_ROW], bufs[REJOINED])
    entry = ctl_i[N_ITER]
    event = BUDGET
    while ctl_i[N_ITER] - entry < ctl_i[ITER_BUDGET]:
        timed = ctl_i[N_ITER] % TIMED_EVERY == 0
        counts[C_TIMED] += timed
        event, r_p, r_n = select_nu(
            win, loc, cache, mpi, bufs, ctl_i, ctl_f, out, counts, timers, trace, ts, timed, parts
        )
        if event != NONE:
            break
        if _ready(ctl_i, ctl_f, out[GAP_OUT]):
            shrink(win, ctl_i, out, counts)
        event = step_nu(
            win, loc, ker, kp, cache, mpi, bufs, ctl_i, out, counts, timers, ts, timed, r_p, r_n,
            parts,
        )  # fmt: skip
        if event != NONE:
            break
        ctl_i[N_ITER] += 1
    return BUDGET if event == NONE else event


@inner
def select_nu(
    win, loc, cache, mpi, bufs, ctl_i, ctl_f, out, counts, timers, trace, ts, timed, parts
):
    """Round 1 of Solver_NU: each rank sends its best i and best of I_low for each sign of y
    (four packets, the two i with their rows); the gap is the larger of the two signs'.
    Returns (event or NONE, winning rank of i for y = +1, for y = -1)."""
    rows, _, y, alpha, C, G, QD, act, _, up, low = win[:11]
    gid, vrow = win[W.GID], win[W.VROW]
    send1, recv1, size = bufs[SEND1], bufs[RECV1], bufs[SEND2].size
    width = ctl_i[ROW_WIDTH]
    t = now(ctl_i[CLOCK_FN], ts) if timed else 0.0
    for k, sign in ((0, 1.0), (2, -1.0)):
        m, i, minus_M, j = _best_of_sign(up, low, y, sign, ctl_i[PER_ROW], parts, bufs[REJOINED])
        part = send1[k * size : (k + 1) * size]
        pack(part, m, i, True, width, gid, vrow, y, alpha, G, C, QD, *loc)
        part = send1[(k + 1) * size : (k + 2) * size]
        pack(part, minus_M, j, False, width, gid, vrow, y, alpha, G, C, QD, *loc)
    event, t = _exchange(
        send1, recv1, 4 * size, rows.size, mpi, ctl_i, ctl_f, counts, timers, ts, timed, t
    )
    if event != NONE:
        return event, -1, -1
    r_p, r_n = winner_rank(recv1, 0, True), winner_rank(recv1, 2 * size, True)
    out[M_OUT] = _key(recv1, 0, r_p)
    out[MINUS_M_OUT] = _key(recv1, size, winner_rank(recv1, size, True))
    out[M_NEG_OUT] = _key(recv1, 2 * size, r_n)
    out[MINUS_M_NEG_OUT] = _key(recv1, 3 * size, winner_rank(recv1, 3 * size, True))
    gap = max(out[M_OUT] + out[MINUS_M_OUT], out[M_NEG_OUT] + out[MINUS_M_NEG_OUT])
    event = _stop_test(gap if gap > -np.inf else 0.0, cache, ctl_i, ctl_f, out, counts, trace, ts)
    _lap(timed, ctl_i, ts, timers, T_SELECT, t)
    return event, r_p, r_n


@njit(cache=True, nogil=True, _nrt=False)
def _best_of_sign(up, low, y, sign, per_row, parts, res):
    """:func:`psvm.svc.select.best_of_sign`; with two variables per row (nu-SVR) the
    window's halves are the two signs, so the vectorised :func:`best` over one half. In
    ``parts`` threads when more than one (``res``: their scratch; the scratch of a column's
    rejoined rows, free before the columns)."""
    if per_row == 1:
        if parts > 1:
            return best_of_sign_threads(up, low, y, sign, parts, res)
        return best_of_sign(up, low, y, sign)
    h = y.size // 2
    lo = 0 if sign > 0 else h
    if parts > 1:
        m, i, minus_M, j = best_threads(up[lo : lo + h], low[lo : lo + h], True, parts, res)
    else:
        m, i, minus_M, j = best(up[lo : lo + h], low[lo : lo + h], True)
    return m, i + lo if i >= 0 else -1, minus_M, j + lo if j >= 0 else -1


@njit(cache=True, nogil=True, _nrt=False)
def _key(recv, off, r):
    """The winning packet's key (at column ``off``), -inf when no rank has a candidate."""
    return recv[r, off + KEY] if r >= 0 else -np.inf


@njit(cache=True, nogil=True)
def _column(cache, ker, kp, packet, width, all_pos, idx, part, keep, ctl_i, ts, timers, timed):
    """The slot of ``packet``'s column, computed if missing; ``keep``'s slot stays."""
    _, keys, prev, nxt, table, complete, _, meta = cache[: cc.OLD_POOL]
    gkeys, gtable = cache[cc.GHOST_KEYS], cache[cc.GHOST_TABLE]
    g = np.int64(packet[RKEY])
    s, hit = cc.get_slot(keys, prev, nxt, table, complete, meta, gkeys, gtable, g, keep)
    if not (hit and complete[s]):
        _miss(cache, ker, kp, packet, width, all_pos, idx, part, s, hit, ctl_i, ts, timers, timed)
    return s


@inner
def step_nu(
    win, loc, ker, kp, cache, mpi, bufs, ctl_i, out, counts, timers, ts, timed, r_p, r_n, parts
):
    """Solver_NU's round 2: the columns of both signs' i; j by the second-order gain against
    the i of its own sign; i is then that one; the step and the update as
    :func:`psvm.svc.engine.step` (its passes in ``parts`` threads)."""
    _, _, y, alpha, C, G, QD, act, _, up, low, obj, all_pos, gid, vrow = win
    recv1, send2, recv2 = bufs[RECV1], bufs[SEND2], bufs[RECV2]
    idx, part = bufs[ROW_IDX], bufs[REJOINED]
    pool, width_c = cache[cc.POOL], cache[cc.META][cc.WIDTH]
    size, width = send2.size, ctl_i[ROW_WIDTH]
    t = now(ctl_i[CLOCK_FN], ts) if timed else 0.0
    p_p = recv1[max(r_p, 0), :size]
    p_n = recv1[max(r_n, 0), 2 * size : 3 * size]
    s_p = s_n = -1
    if r_p >= 0:
        s_p = _column(cache, ker, kp, p_p, width, all_pos, idx, part, -1, ctl_i, ts, timers, timed)
    if r_n >= 0:
        s_n = _column(cache, ker, kp, p_n, width, all_pos, idx, part, s_p, ctl_i, ts, timers, timed)
    col_p = cc.column(pool, width_c, s_p if s_p >= 0 else s_n)
    col_n = cc.column(pool, width_c, s_n if s_n >= 0 else s_p)
    t = _lap(timed, ctl_i, ts, timers, T_KERNEL, t)
    m_p, m_n, QD_p, QD_n = out[M_OUT], out[M_NEG_OUT], p_p[DIAG], p_n[DIAG]
    if parts > 1:  # (the scratch of a column's rejoined rows: free between columns)
        key, q = second_order_nu_threads(
            y, low, QD, col_p, col_n, m_p, m_n, QD_p, QD_n, obj, parts, part
        )
    else:
        key, q = second_order_nu(y, low, QD, col_p, col_n, m_p, m_n, QD_p, QD_n, obj)
    pack(send2, key, q, True, width, gid, vrow, y, alpha, G, C, QD, *loc)
    t = _lap(timed, ctl_i, ts, timers, T_SELECT, t)
    counts[C_ROUND2] += 1
    code, t = _gather(mpi, send2, recv2, ctl_i, ts, timers)
    if code != 0:
        return MPI_ERROR
    r_j = winner_rank(recv2, 0, False)
    if r_j < 0:
        out[GAP_OUT] = 0.0
        return NO_PAIR
    p_j = recv2[r_j]
    pos = p_j[Y] > 0
    r_i, s_i = (r_p, s_p) if pos else (r_n, s_n)
    p_i = p_p if pos else p_n
    K_ij = _from_pre1(kp[0], pair_pre(p_i, p_j, width, ker[9], kp[0], kp[1], kp[2], kp[3]))
    a_i, a_j, c_i, c_j = pair_step(p_i, p_j, K_ij)
    s_j = _column(cache, ker, kp, p_j, width, all_pos, idx, part, s_i, ctl_i, ts, timers, timed)
    col_i, col_j = cc.column(pool, width_c, s_i), cc.column(pool, width_c, s_j)
    t = _lap(timed, ctl_i, ts, timers, T_KERNEL, t)
    q_i, q_j = _set_alphas(alpha, ctl_i[RANK], r_i, p_i, a_i, r_j, p_j, a_j)
    if parts > 1:
        update_threads(y, alpha, C, G, act, col_i, col_j, c_i, c_j, up, low, q_i, q_j, parts)
    else:
        update_gradient(y, alpha, C, G, act, col_i, col_j, c_i, c_j, up, low, q_i, q_j)
    _lap(timed, ctl_i, ts, timers, T_UPDATE, t)
    return NONE
