"""Per-rank LRU cache of kernel columns over the solver's window of rows (LIBSVM's ``-m``)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np


class ColumnCache:
    """Columns K(x_g, window rows) keyed by global index g, sized in MB.

    A column holds the rows of the window it was computed for, in window
    order. When the window changes (:meth:`relayout`), cached columns are
    carried over lazily: the first :meth:`get` after the change moves a
    column's values to the new positions and reports the rows it lacks
    (rows that rejoined the window), for the caller to fill. At least two
    columns always fit, so column i survives computing column j.
    """

    def __init__(self, n_local: int, n_global: int, cache_mb: float):
        per_col = max(8 * n_local, 1)
        n_slots = int(cache_mb * 2**20 // per_col)
        self.n_slots = max(2, min(n_slots, max(n_global, 2)))
        self.store = np.empty((self.n_slots, max(n_local, 1)))
        self.size = n_local  # rows in the current window
        self.version = 0  # of the window
        self.slot_version = np.zeros(self.n_slots, dtype=np.int64)
        # version -> (positions in that window of the current rows, -1: absent; absent positions)
        self._maps: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._slot: OrderedDict[int, int] = OrderedDict()
        self._free = list(range(self.n_slots - 1, -1, -1))
        self.hits = 0
        self.misses = 0

    def get(self, gidx: int) -> tuple[np.ndarray, bool, np.ndarray | None]:
        """(column, hit, missing positions): on a miss fill the column; on a hit fill
        the missing positions (None: nothing missing)."""
        slot = self._slot.get(gidx)
        col = self.store[slot if slot is not None else 0, : self.size]
        if slot is not None:
            self._slot.move_to_end(gidx)
            self.hits += 1
            v = self.slot_version[slot]
            if v == self.version:
                return col, True, None
            pos, missing = self._maps[v]
            col[:] = self.store[slot, pos]  # absent rows read a stale value: filled by the caller
            self.slot_version[slot] = self.version
            return col, True, missing if missing.size else None
        self.misses += 1
        if self._free:
            slot = self._free.pop()
        else:
            _, slot = self._slot.popitem(last=False)
        self._slot[gidx] = slot
        self.slot_version[slot] = self.version
        return self.store[slot, : self.size], False, None

    def relayout(self, pos: np.ndarray) -> None:
        """The window changes: new row q was at position ``pos[q]`` of the old one (-1: new)."""
        live = {int(self.slot_version[s]) for s in self._slot.values()}
        maps = {}
        for v in live:
            p = pos if v == self.version else np.where(pos >= 0, self._maps[v][0][pos], -1)
            maps[v] = (p, np.flatnonzero(p < 0))
        self._maps = maps
        self.version += 1
        self.size = pos.size
