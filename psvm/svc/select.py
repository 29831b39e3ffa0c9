"""numba working-set selection over a rank's window of rows (Fan, Chen and Lin, 2005).

With I_up = {t: a_t < C_t, y_t = +1 or a_t > 0, y_t = -1} and I_low the
mirror set, i maximises -y_t G_t over I_up (m) and M is the minimum of
-y_t G_t over I_low. Only *active* rows (``act``) bid. The passes are
branch-free over contiguous arrays, so numba vectorises them, and the best
bid is found by :func:`argmax_first`: the first occurrence, so ties go
to the smaller position, hence (the window is sorted) to the smaller local
and global index once ranks compare candidates: the choice does not depend on P.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from psvm.jit import inner, njit

TAU = 1e-12


@njit(cache=True, nogil=True, inline="always")
def bid(y_t, a_t, C_t, g_t, act_t):
    """Row t's bid for i (-y_t G_t in I_up) and for M (y_t G_t in I_low); -inf if none.
    Full passes (a run's start, an elimination) and the step's two rows: the gradient update
    keeps every other row's sets."""
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


BLOCK = 512  # positions per block of the argmax passes (4 KB: in L1)


@intrinsic
def _maxnum(typingctx, a, b):
    """LLVM's ``maxnum`` without NaNs: loops of it vectorise as one ``vmaxpd`` a vector.
    Finite data give no NaN; a kernel overflow can (G inf or NaN), and then the solve is
    refused anyway (the gap test, the finite checks of rho). max(-0.0, 0.0) may give either
    zero: positions are found with ``==``, and -M's sign of zero reaches only compares."""

    def codegen(context, builder, signature, args):
        double = ir.DoubleType()
        fnty = ir.FunctionType(double, [double, double])
        fn = builder.module.declare_intrinsic("llvm.maxnum", [double], fnty)
        return builder.call(fn, args, fastmath=("nnan", "nsz"))

    return types.float64(types.float64, types.float64), codegen


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _block_max(a, sign):
    """max of ``sign * a`` (-inf when empty), vectorised (numba's ``max`` or a compare and
    select stay scalar: eight running maxima of them were 3x slower). Callers pass slices:
    loops over a slice vectorise where loops between bounds did not."""
    m = -np.inf
    for t in range(a.size):
        m = _maxnum(m, sign * a[t])
    return m


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _first_equal(a, sign, m):
    """First t with sign * a[t] == m (0 if none)."""
    for t in range(a.size):
        if sign * a[t] == m:
            return t
    return 0


SUB = 64  # positions per sub-block of the final scan


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _first_max(a, sign, bm, bb, be):
    """First position of ``bm``, the maximum of ``sign * a`` over the block [bb, be): the
    first sub-block whose (vectorised) maximum is ``bm``, then a scan of it alone (a
    scalar scan of the whole block cost digits a fifth of its loop time)."""
    if be - bb > SUB:  # (a block of one sub-block has bm for its maximum)
        for lo in range(bb, be, SUB):
            hi = min(lo + SUB, be)
            if _block_max(a[lo:hi], sign) == bm:
                return lo + _first_equal(a[lo:hi], sign, bm)
    return bb + _first_equal(a[bb : bb + BLOCK], sign, bm)  # (NaN in ``a``: a plain scan)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _scan_first(a, sign):
    """:func:`argmax_first` by one scalar pass (the same position: the first maximum)."""
    bm, i = -np.inf, 0
    for t in range(a.size):
        v = sign * a[t]
        if v > bm:
            bm, i = v, t
    return i


@njit(cache=True, nogil=True, _nrt=False)
def argmax_first(a, sign):
    """First position of the maximum of ``sign * a`` (sign +-1; a non-empty, no NaN).

    Each block's maximum by :func:`_block_max` (numba's ``argmax`` makes one
    dependent compare per element, 5x slower), the first block holding the
    largest kept, then a scan of that block alone: two passes' worth of reads
    become one, wherever the maximum lies, and the position is the same.
    """
    if a.size <= SUB:  # a small window: one scalar pass beats the passes' set-up
        return _scan_first(a, sign)
    bm, bb = -np.inf, 0
    for lo in range(0, a.size, BLOCK):
        m = _block_max(a[lo : lo + BLOCK], sign)
        if m > bm:  # strictly: a later block with an equal maximum is not first
            bm, bb = m, lo
    return _first_max(a, sign, bm, bb, min(bb + BLOCK, a.size))


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def argmax_first_inlined(a, sign):
    """:func:`argmax_first` with a small window's scalar pass inlined into the caller: a call
    passes each array as seven words on the stack, a sizeable share of a 10-row iteration."""
    return _scan_first(a, sign) if a.size <= SUB else argmax_first(a, sign)


@inner(_nrt=False)
def best(up, low, with_j):
    """(m, i, -M, j) from the bids; an index is -1 when its set is empty. ``argmax`` takes
    the first maximum: ties go to the smaller position. Without ``with_j`` (second-order
    selection reads only -M of I_low) j is 0 when I_low is not empty: no position search."""
    if up.size == 0:
        return -np.inf, -1, -np.inf, -1
    i = argmax_first_inlined(up, 1.0)
    if with_j:
        j = argmax_first_inlined(low, 1.0)
        minus_M = low[j]
    else:
        j, minus_M = 0, _block_max(low, 1.0)
    m = up[i]
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
    return best(up, low, True)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _gain(grad_diff, QD_i, QD_t, K_it):
    """-(m + y_t G_t)^2 / (K_ii + K_tt - 2 K_it), the quadratic term at least TAU: the
    objective of the pair (i, t) (LIBSVM's select_working_set)."""
    quad = QD_i + QD_t - 2.0 * K_it
    quad = quad if quad > 0.0 else TAU
    return -(grad_diff * grad_diff) / quad


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _objectives(low, QD, K, m, QD_i, obj):
    """obj[t] = -(m + y_t G_t)^2 / (K_ii + K_tt - 2 K_it) for t in I_low and active
    (``low[t]`` = y_t G_t, else -inf) with m + y_t G_t > 0 (a violating pair with i),
    else inf; the block's maximum of -obj."""
    for t in range(low.size):
        grad_diff = m + low[t]
        o = _gain(grad_diff, QD_i, QD[t], K[t])
        obj[t] = o if grad_diff > 0.0 else np.inf
    return _block_max(obj, -1.0)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _objectives_nu(y, low, QD, K_p, K_n, m_p, m_n, QD_p, QD_n, obj):
    """:func:`_objectives` pairing each row with the i of its own sign (Solver_NU)."""
    for t in range(low.size):
        pos = y[t] > 0
        grad_diff = (m_p if pos else m_n) + low[t]
        o = _gain(grad_diff, QD_p if pos else QD_n, QD[t], K_p[t] if pos else K_n[t])
        obj[t] = o if grad_diff > 0.0 else np.inf
    return _block_max(obj, -1.0)


@njit(cache=True, nogil=True, _nrt=False)
def second_order(low, QD, K_i, m, QD_i, obj):
    """Local j by the second-order gain: (objective, j), j = -1 when no row qualifies.

    ``low``: the bids for M (:func:`bid`: y_t G_t in active I_low, else -inf),
    current after every gradient update and elimination. ``K_i`` holds a value
    per kernel row of the window; with two variables per row (SVR) the window
    holds each row's first variables, then its second ones, in the same row
    order, so both halves read it. The objectives are computed block by block
    and each block's minimum taken while it is in cache (:func:`argmax_first`).
    """
    h = max(K_i.size, 1)
    if low.size <= SUB:  # a small window: one scalar pass, dividing only where t qualifies
        return _second_order_scan(low, QD, K_i, m, QD_i, h)
    bm, bb, be = -np.inf, 0, 0
    for off in range(0, low.size, h):
        for lo in range(off, off + h, BLOCK):
            hi, k = min(lo + BLOCK, off + h), lo - off
            b = _objectives(low[lo:hi], QD[lo:hi], K_i[k : k + hi - lo], m, QD_i, obj[lo:hi])
            if b > bm:
                bm, bb, be = b, lo, hi
    return _lowest(obj, bm, bb, be)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def second_order_inlined(low, QD, K_i, m, QD_i, obj):
    """:func:`second_order` with a small window's scalar pass inlined into the caller (see
    :func:`argmax_first_inlined`)."""
    if low.size <= SUB:
        return _second_order_scan(low, QD, K_i, m, QD_i, max(K_i.size, 1))
    return second_order(low, QD, K_i, m, QD_i, obj)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _second_order_scan(low, QD, K_i, m, QD_i, h):
    """:func:`second_order` by one scalar pass: the same objectives (:func:`_gain`) and the
    same j, the first smallest."""
    best, j = np.inf, -1
    for off in range(0, low.size, h):  # (two halves of an SVR window read one column)
        for k in range(min(h, low.size - off)):
            grad_diff = m + low[off + k]
            if grad_diff > 0.0:
                o = _gain(grad_diff, QD_i, QD[off + k], K_i[k])
                if o < best:
                    best, j = o, off + k
    return best, j


@njit(cache=True, nogil=True, _nrt=False)
def second_order_nu(y, low, QD, K_p, K_n, m_p, m_n, QD_p, QD_n, obj):
    """Solver_NU's j: each row is paired with the i of its own sign (column K_p or K_n,
    extreme m_p or m_n); (objective, j) as :func:`second_order`. With two variables per
    row (nu-SVR) each half of the window is one sign: the plain objectives of that sign."""
    h = max(K_p.size, 1)
    halves = low.size > h
    bm, bb, be = -np.inf, 0, 0
    for off in range(0, low.size, h):
        pos = y[off] > 0 if low.size else True
        for lo in range(off, off + h, BLOCK):
            hi, k = min(lo + BLOCK, off + h), lo - off
            n = hi - lo
            if halves:
                b = _objectives(
                    low[lo:hi],
                    QD[lo:hi],
                    (K_p if pos else K_n)[k : k + n],
                    m_p if pos else m_n,
                    QD_p if pos else QD_n,
                    obj[lo:hi],
                )
            else:
                b = _objectives_nu(
                    y[lo:hi], low[lo:hi], QD[lo:hi], K_p[k : k + n], K_n[k : k + n], m_p,
                    m_n, QD_p, QD_n, obj[lo:hi],
                )  # fmt: skip
            if b > bm:
                bm, bb, be = b, lo, hi
    return _lowest(obj, bm, bb, be)


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def _lowest(obj, bm, bb, be):
    """(objective, j) of the first smallest objective, from the best block's maximum of
    -obj (``bm``) and its bounds [bb, be); (inf, -1) when none is finite."""
    if bm == -np.inf:
        return np.inf, -1
    j = _first_max(obj, -1.0, bm, bb, be)
    return obj[j], j
