"""Per-rank LRU cache of kernel columns over the solver's window (LIBSVM's ``-m``), in numba.

A column K(x_g, window rows) is keyed by the global index g and holds the
window's rows in window order, so it costs 8 bytes per window row: when the
window shrinks, more columns fit, as in LIBSVM, whose shrinking frees cache
for the columns still in use. The arrays (a pool of equal slots, a hash
table from g to slot, a doubly linked LRU list) live in one tuple that the
compiled solver loop reads and writes; :class:`ColumnCache` holds it.

When the window changes (:func:`relayout`), every cached column moves to the
new positions at once. Rows that rejoin the window are missing from the
columns that survive: those columns are marked incomplete and the loop
fills the missing positions (``MISSING``) on their next use. A column still
incomplete at the next change is dropped.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# meta fields
HEAD, TAIL, USED, WIDTH, SLOTS, MASK, HITS, MISSES, N_META = range(9)
POOL, KEYS, PREV, NEXT, TABLE, COMPLETE, MISSING, META = range(8)


def _slots(budget: int, width: int, n_global: int) -> int:
    """Columns that fit: at least two, at most one per global row."""
    return int(max(2, min(budget // max(width, 1), max(n_global, 1))))


def new_cache(width: int, n_slots: int) -> tuple:
    size = 1 << int(np.ceil(np.log2(2 * n_slots)))
    meta = np.zeros(N_META, dtype=np.int64)
    meta[HEAD] = meta[TAIL] = -1
    meta[WIDTH], meta[SLOTS], meta[MASK] = width, n_slots, size - 1
    return (
        np.empty(n_slots * max(width, 1)),  # pool: untouched pages cost no memory
        np.full(n_slots, -1, dtype=np.int64),  # keys
        np.full(n_slots, -1, dtype=np.int64),  # prev (towards the most recent)
        np.full(n_slots, -1, dtype=np.int64),  # next (towards the least recent)
        np.full(size, -1, dtype=np.int64),  # table: hash -> slot
        np.zeros(n_slots, dtype=np.bool_),  # complete
        np.zeros(0, dtype=np.int64),  # missing positions of incomplete columns
        meta,
    )


@njit(cache=True, nogil=True, inline="always")
def _hash(g, mask):
    return (g * 2654435761) & mask  # a bijection on the low bits: consecutive g spread


@njit(cache=True, nogil=True, inline="always")
def lookup(keys, table, mask, g):
    """Slot of column g, or -1."""
    h = _hash(g, mask)
    while table[h] >= 0:
        if keys[table[h]] == g:
            return table[h]
        h = (h + 1) & mask
    return -1


@njit(cache=True, nogil=True)
def _unhash(keys, table, mask, s):
    """Remove slot s from the table (linear probing, backward-shift deletion)."""
    i = _hash(keys[s], mask)
    while table[i] != s:
        i = (i + 1) & mask
    table[i] = -1
    j = i
    while True:
        j = (j + 1) & mask
        if table[j] < 0:
            return
        k = _hash(keys[table[j]], mask)
        stays = (i < k <= j) if i <= j else (k > i or k <= j)
        if not stays:
            table[i], table[j] = table[j], -1
            i = j


@njit(cache=True, nogil=True, inline="always")
def _unlink(prev, nxt, meta, s):
    if prev[s] >= 0:
        nxt[prev[s]] = nxt[s]
    else:
        meta[HEAD] = nxt[s]
    if nxt[s] >= 0:
        prev[nxt[s]] = prev[s]
    else:
        meta[TAIL] = prev[s]


@njit(cache=True, nogil=True, inline="always")
def _push_front(prev, nxt, meta, s):
    prev[s], nxt[s] = -1, meta[HEAD]
    if meta[HEAD] >= 0:
        prev[meta[HEAD]] = s
    meta[HEAD] = s
    if meta[TAIL] < 0:
        meta[TAIL] = s


@njit(cache=True, nogil=True)
def get_slot(keys, prev, nxt, table, complete, meta, g, keep):
    """(slot, hit) of column g; on a miss the slot is new (fill it). Slot ``keep`` is
    never evicted (the other column of the step). The arrays are a cache's, unpacked."""
    mask = meta[MASK]
    s = lookup(keys, table, mask, g)
    if s >= 0:
        meta[HITS] += 1
        _unlink(prev, nxt, meta, s)
        _push_front(prev, nxt, meta, s)
        return s, True
    meta[MISSES] += 1
    if meta[USED] < meta[SLOTS]:
        s = meta[USED]
        meta[USED] += 1
    else:
        s = meta[TAIL]
        if s == keep:
            s = prev[s]
        _unlink(prev, nxt, meta, s)
        _unhash(keys, table, mask, s)
    keys[s] = g
    complete[s] = True
    h = _hash(g, mask)
    while table[h] >= 0:
        h = (h + 1) & mask
    table[h] = s
    _push_front(prev, nxt, meta, s)
    return s, False


@njit(cache=True, nogil=True)
def get(c, g, keep):
    """:func:`get_slot` on the cache tuple ``c``."""
    return get_slot(c[KEYS], c[PREV], c[NEXT], c[TABLE], c[COMPLETE], c[META], g, keep)


@njit(cache=True, nogil=True, inline="always")
def column(pool, width, s):
    return pool[s * width : s * width + width]


@njit(cache=True, nogil=True)
def _move(old, new, pos):
    """Carry old's columns, most recent first, to new's window (``pos``: new row -> old
    position, -1: rejoined); incomplete columns are dropped (their missing rows would be
    another change's)."""
    rejoined = False
    for q in range(pos.size):
        rejoined |= pos[q] < 0
    meta = new[META]
    hits, misses = old[META][HITS], old[META][MISSES]
    order = np.empty(old[META][USED], dtype=np.int64)
    n, s = 0, old[META][HEAD]
    while s >= 0:
        order[n] = s
        n += 1
        s = old[NEXT][s]
    w_old, w_new = old[META][WIDTH], meta[WIDTH]
    for k in range(n - 1, -1, -1):  # least recent first, so the most recent ends in front
        s = order[k]
        if k >= meta[SLOTS] or not old[COMPLETE][s]:
            continue
        t, _ = get(new, old[KEYS][s], -1)
        src, dst = column(old[POOL], w_old, s), column(new[POOL], w_new, t)
        for q in range(pos.size):
            if pos[q] >= 0:
                dst[q] = src[pos[q]]
        new[COMPLETE][t] = not rejoined
    meta[HITS], meta[MISSES] = hits, misses


class ColumnCache:
    """The cache's arrays (:attr:`arrays`) for a window of all ``n_local`` rows, within
    ``cache_mb`` MB."""

    def __init__(self, n_local: int, n_global: int, cache_mb: float):
        self.n_global = n_global
        n = max(n_local, 1)
        self.budget = max(2 * n, min(int(cache_mb * 2**20 // 8), n * max(n_global, 1)))
        self.arrays = new_cache(n_local, _slots(self.budget, n_local, n_global))

    @property
    def hits(self) -> int:
        return int(self.arrays[META][HITS])

    @property
    def misses(self) -> int:
        return int(self.arrays[META][MISSES])

    @property
    def n_columns(self) -> int:
        return int(self.arrays[META][USED])

    @property
    def used(self) -> int:
        """Floats held by the columns."""
        return self.n_columns * int(self.arrays[META][WIDTH])

    def get(self, gidx: int, keep: int = -1) -> tuple[np.ndarray, bool, np.ndarray | None]:
        """(column, hit, missing positions) of ``gidx``, the column a view into the pool. The
        caller fills the column on a miss, or its missing positions (None: none) on a hit."""
        c = self.arrays
        s, hit = get(c, gidx, keep)
        missing = None if c[COMPLETE][s] else c[MISSING]
        c[COMPLETE][s] = True
        return column(c[POOL], c[META][WIDTH], s), hit, missing

    def relayout(self, pos: np.ndarray) -> None:
        """The window changes: new row q was at position ``pos[q]`` of the old one (-1: new)."""
        pos = np.ascontiguousarray(pos, dtype=np.int64)
        new = new_cache(pos.size, _slots(self.budget, pos.size, self.n_global))
        _move(self.arrays, new, pos)
        self.arrays = new[:MISSING] + (np.flatnonzero(pos < 0),) + new[MISSING + 1 :]
