"""Per-rank LRU cache of kernel columns over the solver's window (LIBSVM's ``-m``), in numba.

A column K(x_g, window rows) is keyed by the global index g and holds the
window's rows in window order, so it costs 8 bytes per window row: when the
window shrinks, more columns fit, as in LIBSVM, whose shrinking frees cache
for the columns still in use. The arrays (a pool of equal slots, a hash
table from g to slot, a doubly linked LRU list) live in one tuple that the
compiled solver loop reads and writes; :class:`ColumnCache` holds it.

When the window changes (:meth:`ColumnCache.relayout`), the cache starts
empty over the new window and keeps the previous window's columns beside it
(``OLD_*``). A column asked for and found only there moves to the new
positions then (:func:`carry`), and only if it is used: moving every column
at a cut would copy the whole budget each time (0.65 s on a9a). Rows that
rejoined the window are missing from a moved column: the loop computes
just those (``MISSING``). The previous window's columns that were not asked
for are dropped at the next change (moving them into free slots then cost
a9a 0.3 s for fewer hits than it paid for), so the columns of the two
windows together hold at most twice the budget.
"""

from __future__ import annotations

import numpy as np

from psvm.jit import inner, njit
from psvm.svc.state import filled

# meta fields; LIMIT: the slots in use at most now (grows with ghost hits up to SLOTS);
# GHEAD: the next ghost to overwrite; GHOST_HITS: ghost hits since LIMIT last grew
HEAD, TAIL, USED, WIDTH, SLOTS, MASK, HITS, MISSES, LIMIT, GHEAD, GHOST_HITS, N_META = range(12)
POOL, KEYS, PREV, NEXT, TABLE, COMPLETE, MISSING, META = range(8)
# the previous window's columns, and each new row's position in that window (-1: rejoined)
OLD_POOL, OLD_KEYS, OLD_NEXT, OLD_TABLE, OLD_COMPLETE, OLD_META, OLD_POS = range(8, 15)
# the keys of recently evicted columns (a ring) and their hash table: kept across windows
GHOST_KEYS, GHOST_TABLE = 15, 16
START_BYTES = 8 * 2**20  # the columns a cache starts with
# then a slot more per this many ghost hits: one per hit took twice the memory (a9a, w8a, ijcnn1,
# skin_nonskin, a9a C = 100) for no time saved, and this VM charges 2.4 ms a MB first touched
GHOSTS_PER_SLOT = 16


def _slots(budget: int, width: int, n_global: int) -> int:
    """Columns that fit: at least two, at most one per global row."""
    return int(max(2, min(budget // max(width, 1), max(n_global, 1))))


def _table_size(n: int) -> int:
    """The power of two >= 2 n: a hash table's size for n keys."""
    return 1 << (2 * max(n, 1) - 1).bit_length()


_NO_POSITIONS = np.zeros(0, dtype=np.int64)  # (the engine never writes to it)


def new_cache(
    width: int,
    n_slots: int,
    memory: np.ndarray | None = None,
    limit: int | None = None,
    missing: np.ndarray = _NO_POSITIONS,
) -> tuple:
    """An empty cache of up to ``n_slots`` columns of ``width``, ``limit`` of them at first
    (default: :data:`START_BYTES`' worth); its pool is the start of ``memory`` when that is
    long enough (pages already touched), else new. ``missing``: the positions that columns
    carried from the previous window lack."""
    size = _table_size(n_slots)
    meta = np.zeros(N_META, dtype=np.int64)
    meta[HEAD] = meta[TAIL] = -1
    meta[WIDTH], meta[SLOTS], meta[MASK] = width, n_slots, size - 1
    if limit is None:
        limit = START_BYTES // 8 // max(width, 1)
    meta[LIMIT] = max(2, min(limit, n_slots))
    need = n_slots * max(width, 1)
    pool = memory[:need] if memory is not None and memory.size >= need else np.empty(need)
    links = filled((3, n_slots), -1, np.int64)
    return (
        pool,  # untouched pages cost no memory
        links[0],  # keys
        links[1],  # prev (towards the most recent)
        links[2],  # next (towards the least recent)
        filled(size, -1, np.int64),  # table: hash -> slot
        np.zeros(n_slots, dtype=np.bool_),  # complete
        missing,  # the positions incomplete columns lack
        meta,
    )


def _with_old(new: tuple, old: tuple, pos: np.ndarray) -> tuple:
    """``new``'s arrays, then the previous window's columns and the map to them (the
    ghosts, :data:`GHOST_KEYS` on, go after)."""
    return new + (old[POOL], old[KEYS], old[NEXT], old[TABLE], old[COMPLETE], old[META], pos)


@inner(_nrt=False)
def _hash(g, mask):
    return (g * 2654435761) & mask  # a bijection on the low bits: consecutive g spread


@inner(_nrt=False)
def lookup(keys, table, mask, g):
    """Slot of column g, or -1."""
    h = _hash(g, mask)
    while table[h] >= 0:
        if keys[table[h]] == g:
            return table[h]
        h = (h + 1) & mask
    return -1


@inner
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


@inner(_nrt=False)
def _unlink(prev, nxt, meta, s):
    if prev[s] >= 0:
        nxt[prev[s]] = nxt[s]
    else:
        meta[HEAD] = nxt[s]
    if nxt[s] >= 0:
        prev[nxt[s]] = prev[s]
    else:
        meta[TAIL] = prev[s]


@inner(_nrt=False)
def _push_front(prev, nxt, meta, s):
    prev[s], nxt[s] = -1, meta[HEAD]
    if meta[HEAD] >= 0:
        prev[meta[HEAD]] = s
    meta[HEAD] = s
    if meta[TAIL] < 0:
        meta[TAIL] = s


@inner(_nrt=False)
def _insert(keys, table, mask, s):
    """Put slot s (holding ``keys[s]``) into the hash table."""
    h = _hash(keys[s], mask)
    while table[h] >= 0:
        h = (h + 1) & mask
    table[h] = s


@inner(_nrt=False)
def _ghost_take(gkeys, gtable, g):
    """Whether column g was evicted lately (it is then forgotten)."""
    mask = gtable.size - 1
    r = lookup(gkeys, gtable, mask, g)
    if r < 0:
        return False
    _unhash(gkeys, gtable, mask, r)
    gkeys[r] = -1
    return True


@inner(_nrt=False)
def _ghost_put(gkeys, gtable, meta, g):
    """Remember that column g was evicted, forgetting the oldest ghost."""
    mask, r = gtable.size - 1, meta[GHEAD]
    if gkeys[r] >= 0:
        _unhash(gkeys, gtable, mask, r)
    gkeys[r] = g
    _insert(gkeys, gtable, mask, r)
    meta[GHEAD] = (r + 1) % gkeys.size


# inlined (numba) into the loop: the call, eight arrays on the stack, cost more than a hit
@inner(_nrt=False, inline="always")
def get_slot(keys, prev, nxt, table, complete, meta, gkeys, gtable, g, keep):
    """(slot, hit) of column g; on a miss the slot is new (fill it). Slot ``keep`` is
    never evicted (the other column of the step). The arrays are a cache's, unpacked.

    The cache starts small and takes a slot more per :data:`GHOSTS_PER_SLOT` columns
    evicted lately and asked for again (*ghost* hits: a larger cache would have kept
    them), up to its budget: columns used once, the common case of SVR, do not fill the
    budget with pages that cost more to touch than the columns cost to compute.
    """
    mask = meta[MASK]
    s = lookup(keys, table, mask, g)
    if s >= 0:
        meta[HITS] += 1
        _unlink(prev, nxt, meta, s)
        _push_front(prev, nxt, meta, s)
        return s, True
    meta[MISSES] += 1
    if gkeys.size and _ghost_take(gkeys, gtable, g) and meta[LIMIT] < meta[SLOTS]:
        meta[GHOST_HITS] += 1
        if meta[GHOST_HITS] == GHOSTS_PER_SLOT:
            meta[LIMIT] += 1
            meta[GHOST_HITS] = 0
    if meta[USED] < meta[LIMIT]:
        s = meta[USED]
        meta[USED] += 1
    else:
        s = meta[TAIL]
        if s == keep:
            s = prev[s]
        _unlink(prev, nxt, meta, s)
        _unhash(keys, table, mask, s)
        if gkeys.size:
            _ghost_put(gkeys, gtable, meta, keys[s])
    keys[s] = g
    complete[s] = True
    _insert(keys, table, mask, s)
    _push_front(prev, nxt, meta, s)
    return s, False


@njit(cache=True, nogil=True)
def get(c, g, keep):
    """:func:`get_slot` on the cache tuple ``c``."""
    return get_slot(
        c[KEYS], c[PREV], c[NEXT], c[TABLE], c[COMPLETE], c[META], c[GHOST_KEYS], c[GHOST_TABLE],
        g, keep,
    )  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def column(pool, width, s):
    return pool[s * width : s * width + width]


@njit(cache=True, nogil=True)
def carry(c, s, g):
    """Fill the new slot s with column g of the previous window if it is there and
    complete: (found, complete now). Incomplete: the rows in ``MISSING`` are left to fill."""
    o = lookup(c[OLD_KEYS], c[OLD_TABLE], c[OLD_META][MASK], g)
    if o < 0 or not c[OLD_COMPLETE][o]:
        return False, False
    pos = c[OLD_POS]
    src = column(c[OLD_POOL], c[OLD_META][WIDTH], o)
    dst = column(c[POOL], c[META][WIDTH], s)
    for q in range(pos.size):
        if pos[q] >= 0:
            dst[q] = src[pos[q]]
    c[OLD_COMPLETE][o] = False  # moved: the old copy is not needed again
    complete = c[MISSING].size == 0
    c[COMPLETE][s] = complete
    return True, complete


# no previous window (a new cache): an empty cache that nothing writes (a column is carried
# only when found there), shared by every solver
_NO_OLD = _with_old((), new_cache(0, 2), np.zeros(0, dtype=np.int64))


class ColumnCache:
    """The cache's arrays (:attr:`arrays`) for a window of all ``n_local`` rows, within
    ``cache_mb`` MB."""

    def __init__(self, n_local: int, n_global: int, cache_mb: float):
        self.n_global = n_global
        n = max(n_local, 1)
        self._cap = int(cache_mb * 2**20 // 8)
        self.budget = max(2 * n, min(self._cap, n * max(n_global, 1)))
        self._memory = [np.empty(self.budget)]  # the pools' memory: two, used in turn
        slots = _slots(self.budget, n_local, n_global)
        ghosts = (filled(slots, -1, np.int64), filled(_table_size(slots), -1, np.int64))
        self.arrays = new_cache(n_local, slots, self._memory[0]) + _NO_OLD + ghosts

    @property
    def hits(self) -> int:
        return int(self.arrays[META][HITS])

    @property
    def misses(self) -> int:
        return int(self.arrays[META][MISSES])

    @property
    def n_columns(self) -> int:
        return int(self.arrays[META][USED])

    def holds(self, n: int) -> bool:
        """Whether n columns fit at once: a window of n rows then evicts none."""
        return int(self.arrays[META][LIMIT]) >= n

    @property
    def used(self) -> int:
        """Floats held by the columns of the current window."""
        return self.n_columns * int(self.arrays[META][WIDTH])

    def get(self, gidx: int, keep: int = -1) -> tuple[np.ndarray, bool, np.ndarray | None]:
        """(column, hit, missing positions) of ``gidx``, the column a view into the pool. The
        caller fills the column on a miss, or its missing positions (None: none) on a hit."""
        c = self.arrays
        s, hit = get(c, gidx, keep)
        if not hit:
            hit, complete = carry(c, s, gidx)
            if hit:
                c[META][HITS] += 1
                c[META][MISSES] -= 1
        missing = None if c[COMPLETE][s] else c[MISSING]
        c[COMPLETE][s] = True
        return column(c[POOL], c[META][WIDTH], s), hit, missing

    def relayout(self, pos: np.ndarray) -> None:
        """The window changes: new row q was at position ``pos[q]`` of the old one (-1: new)."""
        pos = np.ascontiguousarray(pos, dtype=np.int64)
        # rows borrowed from other ranks (psvm.svc.balance) can widen a window past the rank's
        # own rows, whose kernel matrix bounded the budget: a rank owning few rows would cache
        # two of its borrowed window's columns
        self.budget = max(self.budget, min(self._cap, pos.size * max(self.n_global, 1)))
        # the new pool takes the memory of the one dropped now (two windows ago): its pages
        # are touched already, where fresh ones cost a page fault and zeroing each (cadata
        # epsilon-SVR, 20 cuts, -m 200: 1.16 -> 0.92 s of system time; 0.40 s without cuts)
        if len(self._memory) == 1:
            self._memory.append(np.empty(self.budget))
        else:
            self._memory.reverse()
            if self._memory[1].size < self.budget:  # (the budget grew)
                self._memory[1] = np.empty(self.budget)
        old = self.arrays
        o = old[META]
        limit = o[LIMIT] * max(o[WIDTH], 1) // max(pos.size, 1)  # the same memory
        slots = _slots(self.budget, pos.size, self.n_global)
        new = new_cache(pos.size, slots, self._memory[1], limit, (pos < 0).nonzero()[0])
        meta = new[META]
        for k in (HITS, MISSES, GHEAD, GHOST_HITS):
            meta[k] = o[k]
        self.arrays = _with_old(new, old, pos) + old[GHOST_KEYS:]
