"""The fixed-size packets the ranks exchange each iteration, packed and read in numba.

A packet (float64) holds a candidate's key, global variable index, the global
index of its row (the cache's key: an SVR row's two variables share one
column), its window position and its state, then its sparse row: ``width``
indices, then ``width`` values (the longest row of any rank). An iteration
packs three of them, picks three winners and takes K_ij and the two-variable
step from two, all inside the compiled loop (:mod:`psvm.svc.engine`).
"""

from __future__ import annotations

from psvm.gram import PRECOMPUTED
from psvm.jit import inner, njit
from psvm.kernels import pre_kernel
from psvm.svc.update import two_variable_step

# Packet layout: header fields, then ``width`` indices, then ``width`` values.
KEY, GIDX, RKEY, POS, Y, ALPHA, GRAD, BOUND, DIAG, SQ, NNZ, ROW = range(12)
# the positions in the engine's ``bufs`` (:meth:`psvm.svc.solver.Solver._init_buffers`): round
# 1's packets (with the INFO block) sent and received, round 2's, a packet row's indices as
# ints, a column's rows that rejoined the window, a small window's block of columns and its flags
SEND1, RECV1, SEND2, RECV2, ROW_IDX, REJOINED, BLOCK, HAVE = range(8)


@njit(cache=True, nogil=True, _nrt=False)
def pack(
    buf, key, q, with_row, width, gid, vrow, y, alpha, G, C, QD, rkey, sq, indptr, indices, data
):
    """Window position ``q``'s candidate (q < 0: none) with its state, and its row if asked.

    ``gid``: the window's global variable indices; ``vrow``: their rows in the row arrays
    (``rkey`` and the CSR: the window kernel's); ``rkey``: those rows' global indices, the
    cache's keys."""
    buf[KEY] = key
    if q < 0:
        buf[GIDX] = -1.0
        return
    t = vrow[q]
    buf[GIDX], buf[RKEY], buf[POS] = gid[q], rkey[t], q
    buf[Y], buf[ALPHA], buf[GRAD] = y[q], alpha[q], G[q]
    buf[BOUND], buf[DIAG], buf[SQ] = C[q], QD[q], sq[t]
    if with_row:
        s = indptr[t]
        nnz = indptr[t + 1] - s
        buf[NNZ] = nnz
        for p in range(nnz):
            buf[ROW + p] = indices[s + p]
            buf[ROW + width + p] = data[s + p]


@njit(cache=True, nogil=True, _nrt=False)
def winner(recv, off, maximise):
    """Rank whose packet (at column ``off``) wins: best key, ties to the smaller global
    index; -1 when no rank has a candidate."""
    best, bk, bg = -1, 0.0, 0.0
    for r in range(recv.shape[0]):
        g = recv[r, off + GIDX]
        if g < 0:
            continue
        k = recv[r, off + KEY]
        if best < 0 or (k > bk if maximise else k < bk) or (k == bk and g < bg):
            best, bk, bg = r, k, g
    return best


@inner(_nrt=False)
def column_total(recv, col):
    """Sum over ranks of ``recv[:, col]`` (exact for the integer counts it carries)."""
    s = 0.0
    for r in range(recv.shape[0]):
        s += recv[r, col]
    return s


@njit(cache=True, nogil=True, _nrt=False)
def pair_pre(p_i, p_j, width, work, kernel_id, gamma, coef0, degree):
    """pre-K(x_i, x_j) from two packets, by the arithmetic of
    :func:`psvm.kernels.column_csr` (x_i scattered, x_j's terms in order), so after
    :func:`psvm.kernels.from_pre` it equals the column entry bitwise. A precomputed
    kernel reads x_i at x_j's serial number (its ``SQ``), as :func:`psvm.gram.gram_column`."""
    n_i, n_j = int(p_i[NNZ]), int(p_j[NNZ])
    for p in range(n_i):
        work[int(p_i[ROW + p])] = p_i[ROW + width + p]
    if kernel_id == PRECOMPUTED:
        v = work[int(p_j[SQ])]
        for p in range(n_i):
            work[int(p_i[ROW + p])] = 0.0
        return v
    dot = 0.0
    for p in range(n_j):
        dot += p_j[ROW + width + p] * work[int(p_j[ROW + p])]
    for p in range(n_i):
        work[int(p_i[ROW + p])] = 0.0
    return pre_kernel(kernel_id, dot, p_i[SQ], p_j[SQ], gamma, coef0, degree)


@inner(_nrt=False)
def pair_step(p_i, p_j, K_ij):
    """The two-variable step for the packets' candidates: (a_i, a_j, y_i da_i, y_j da_j)."""
    a_i, a_j = two_variable_step(
        p_i[Y],
        p_j[Y],
        p_i[ALPHA],
        p_j[ALPHA],
        p_i[GRAD],
        p_j[GRAD],
        p_i[BOUND],
        p_j[BOUND],
        p_i[DIAG],
        p_j[DIAG],
        K_ij,
    )
    return a_i, a_j, p_i[Y] * (a_i - p_i[ALPHA]), p_j[Y] * (a_j - p_j[ALPHA])
