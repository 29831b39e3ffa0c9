"""Windows balanced across ranks: at a cut, ranks lend active rows to their neighbours.

Rows are eliminated unevenly, so a rank's window can come to hold twice another's (w8a at
P = 2: from iteration 1,600 on, rank 0 keeps 1.7-2x rank 1's rows), and every iteration waits
for the largest. At a cut, when the largest new window exceeds the mean by :data:`BALANCE`,
the windows' rows, taken in global order, are dealt out again in equal contiguous parts: a
rank lends its first rows to the ranks before it and its last rows to those after it.

A lent row travels with its state and its sparse row. Its borrower updates it by the same
arithmetic as its owner would, and holds it in global order among its own rows, so every
choice still ties to the smaller global index: the model's bits do not change. The owner
keeps the row's place; the row goes home at the next cut, reconstruction, checkpoint and at
the end, where the owner's departures and sums need it.
"""

from __future__ import annotations

import numpy as np

BALANCE = 1.1  # deal the rows out again when the largest window exceeds the mean by this
# a lent row's record: global index, y, C, K_tt, |x_t|^2 (a precomputed kernel: its serial
# number), alpha, G, elimination streak, non-zeros (its p stays home: only the objective reads it)
GID, Y, BOUND, DIAG, SQ, ALPHA, GRAD, STREAK, NNZ, FIELDS = range(10)
# what goes home: alpha, G, whether active, streak
HOME = 4


def deal(sizes: np.ndarray, balance: float = BALANCE) -> np.ndarray | None:
    """``parts[r, q]``: how many of rank r's window rows rank q works on, when the windows of
    ``sizes`` rows are uneven; None when they are even enough, or fewer than the ranks (a part
    of none would gain nothing). Rank q's part is rows [q T / P, (q + 1) T / P) of the T rows
    in global order, so each rank lends its first rows to lower ranks and its last ones to
    higher ranks, and keeps the middle."""
    sizes = np.asarray(sizes, dtype=np.int64)
    n_ranks, total = sizes.size, int(sizes.sum())
    if total < n_ranks or sizes.max() * n_ranks <= balance * total:
        return None
    start = np.concatenate(([0], np.cumsum(sizes)))
    bound = np.arange(n_ranks + 1) * total // n_ranks
    lo = np.maximum(start[:-1, None], bound[None, :-1])
    hi = np.minimum(start[1:, None], bound[None, 1:])
    return np.maximum(hi - lo, 0)


def destinations(parts: np.ndarray, rank: int) -> np.ndarray:
    """The rank each of ``rank``'s window rows (in global order) goes to: itself for those
    it keeps."""
    return np.repeat(np.arange(parts.shape[1]), parts[rank])


def lend(comm, dest: np.ndarray, records: np.ndarray, csr: tuple) -> tuple[np.ndarray, tuple]:
    """Send the lent rows (``records``, (rows, FIELDS), and their sparse rows ``csr``, in
    global order) to the ranks ``dest``; returns the rows this rank borrows, their records
    and CSR in global order (from lower ranks, then from higher ones) (collective)."""
    indptr, indices, data = csr
    nnz = indptr[1:] - indptr[:-1]
    counts = np.bincount(dest, minlength=comm.size)
    nnz_counts = np.bincount(dest, weights=nnz, minlength=comm.size).astype(np.int64)
    got = comm.alltoallv(np.ascontiguousarray(records).ravel(), FIELDS * counts)
    got = got.reshape(-1, FIELDS)
    g_indices = comm.alltoallv(indices, nnz_counts)
    g_data = comm.alltoallv(data, nnz_counts)
    g_indptr = np.zeros(got.shape[0] + 1, dtype=indptr.dtype)
    g_indptr[1:] = np.cumsum(got[:, NNZ])
    return got, (g_indptr, g_indices, g_data)


def send_home(comm, parts: np.ndarray, state: np.ndarray) -> np.ndarray:
    """The borrowed rows' ``state`` (rows, HOME) back to their owners; returns the state of
    this rank's lent rows, in their global order (collective)."""
    borrowed = parts[:, comm.rank].copy()
    borrowed[comm.rank] = 0
    return comm.alltoallv(np.ascontiguousarray(state).ravel(), HOME * borrowed).reshape(-1, HOME)
