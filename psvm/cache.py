"""Per-rank LRU cache of the local segments of kernel columns (LIBSVM's ``-m``)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np


class ColumnCache:
    """Columns K(x_g, local rows) keyed by global index g, sized in MB.

    A column may have been computed over the active rows only; ``complete``
    records whether every local row is valid (needed for ``G_bar`` updates).
    When eliminated rows come back (:meth:`revive`), an incomplete column lacks
    them: :meth:`get` returns those rows so the caller fills in just them,
    rather than the cache being thrown away. At least two columns always fit,
    so column i survives computing column j.
    """

    def __init__(self, n_local: int, n_global: int, cache_mb: float):
        per_col = max(8 * n_local, 1)
        n_slots = int(cache_mb * 2**20 // per_col)
        self.n_slots = max(2, min(n_slots, max(n_global, 2)))
        self.store = np.empty((self.n_slots, n_local))
        self.complete = np.zeros(self.n_slots, dtype=bool)
        self.epoch = np.zeros(self.n_slots, dtype=np.int64)
        self._revived: list[np.ndarray] = []
        self._slot: OrderedDict[int, int] = OrderedDict()
        self._free = list(range(self.n_slots - 1, -1, -1))
        self.hits = 0
        self.misses = 0

    def get(self, gidx: int) -> tuple[np.ndarray, bool, bool, np.ndarray | None]:
        """Return (column, hit, complete, missing rows); on a miss the column must be filled.

        ``missing rows`` (hits on incomplete columns only) were revived since the
        column was computed; fill them, then call :meth:`refresh`.
        """
        slot = self._slot.get(gidx)
        if slot is not None:
            self._slot.move_to_end(gidx)
            self.hits += 1
            complete = bool(self.complete[slot])
            missing = None
            if not complete and self.epoch[slot] < len(self._revived):
                missing = np.concatenate(self._revived[self.epoch[slot] :])
            return self.store[slot], True, complete, missing
        self.misses += 1
        if self._free:
            slot = self._free.pop()
        else:
            _, slot = self._slot.popitem(last=False)
        self._slot[gidx] = slot
        self.complete[slot] = False
        self.epoch[slot] = len(self._revived)
        return self.store[slot], False, False, None

    def mark_complete(self, gidx: int) -> None:
        self.complete[self._slot[gidx]] = True

    def refresh(self, gidx: int) -> None:
        """The column now holds every row revived so far."""
        self.epoch[self._slot[gidx]] = len(self._revived)

    def revive(self, rows: np.ndarray) -> None:
        """Rows (local indices) rejoin the active set: incomplete columns lack them."""
        self._revived.append(np.asarray(rows, dtype=np.int64))
