"""Per-rank LRU cache of the local segments of kernel columns (LIBSVM's ``-m``)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np


class ColumnCache:
    """Columns K(x_g, local rows) keyed by global index g, sized in MB.

    A column may have been computed over the active rows only; ``complete``
    records whether every local row is valid (needed for ``G_bar`` updates).
    At least two columns always fit, so column i survives computing column j.
    """

    def __init__(self, n_local: int, n_global: int, cache_mb: float):
        per_col = max(8 * n_local, 1)
        n_slots = int(cache_mb * 2**20 // per_col)
        self.n_slots = max(2, min(n_slots, max(n_global, 2)))
        self.store = np.empty((self.n_slots, n_local))
        self.complete = np.zeros(self.n_slots, dtype=bool)
        self._slot: OrderedDict[int, int] = OrderedDict()
        self._free = list(range(self.n_slots - 1, -1, -1))
        self.hits = 0
        self.misses = 0

    def get(self, gidx: int) -> tuple[np.ndarray, bool, bool]:
        """Return (column, hit, complete); on a miss the column must be filled."""
        slot = self._slot.get(gidx)
        if slot is not None:
            self._slot.move_to_end(gidx)
            self.hits += 1
            return self.store[slot], True, bool(self.complete[slot])
        self.misses += 1
        if self._free:
            slot = self._free.pop()
        else:
            _, slot = self._slot.popitem(last=False)
        self._slot[gidx] = slot
        self.complete[slot] = False
        return self.store[slot], False, False

    def mark_complete(self, gidx: int) -> None:
        self.complete[self._slot[gidx]] = True

    def clear(self) -> None:
        """Forget every column (after rows are reactivated, entries are stale)."""
        self._slot.clear()
        self._free = list(range(self.n_slots - 1, -1, -1))
