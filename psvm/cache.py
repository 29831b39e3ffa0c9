"""Per-rank LRU cache of kernel columns over the solver's window of rows (LIBSVM's ``-m``)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np


class ColumnCache:
    """Columns K(x_g, window rows) keyed by global index g, within a budget in MB.

    A column holds the rows of the window it was computed for, in window
    order, so it costs 8 bytes per window row: as the window shrinks, more
    columns fit (as in LIBSVM, whose shrinking frees cache for the columns
    that are still used). When the window changes (:meth:`relayout`), cached
    columns are carried over lazily: the first :meth:`get` after the change
    moves a column's values to the new positions and reports the rows it
    lacks (rows that rejoined the window), for the caller to fill. A column
    handed out stays valid after its eviction (the caller holds it).
    """

    def __init__(self, n_local: int, n_global: int, cache_mb: float):
        # at least two columns' worth, and never more than every row's column; a column
        # costs at least 1, so an empty window does not gather one entry per column asked for
        n = max(n_local, 1)
        self.budget = max(2 * n, min(int(cache_mb * 2**20 // 8), n * n_global))
        self.used = 0  # floats held
        self.size = n_local  # rows in the current window
        self.version = 0  # of the window
        # version -> (positions in that window of the current rows, -1: absent; absent positions)
        self._maps: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._cols: OrderedDict[int, tuple[np.ndarray, int]] = OrderedDict()  # LRU first
        self.hits = 0
        self.misses = 0

    def get(self, gidx: int) -> tuple[np.ndarray, bool, np.ndarray | None]:
        """(column, hit, missing positions): on a miss fill the column; on a hit fill
        the missing positions (None: nothing missing)."""
        entry = self._cols.get(gidx)
        if entry is not None:
            self._cols.move_to_end(gidx)
            self.hits += 1
            col, v = entry
            if v == self.version:
                return col, True, None
            pos, missing = self._maps[v]
            if missing.size:  # absent rows: filled by the caller
                new = np.empty(pos.size)
                new[pos >= 0] = col[pos[pos >= 0]]
            else:
                new = col[pos]
            self.used += _cost(new) - _cost(col)
            self._cols[gidx] = (new, self.version)
            self._evict(0, keep=1)  # a column that grew may push the others out
            return new, True, missing if missing.size else None
        self.misses += 1
        self._evict(max(self.size, 1), keep=0)
        col = np.empty(self.size)
        self._cols[gidx] = (col, self.version)
        self.used += _cost(col)
        return col, False, None

    def _evict(self, extra: int, keep: int) -> None:
        """Drop least recently used columns until ``extra`` more fits; keep the last ``keep``."""
        while len(self._cols) > keep and self.used + extra > self.budget:
            _, (old, _) = self._cols.popitem(last=False)
            self.used -= _cost(old)

    def relayout(self, pos: np.ndarray) -> None:
        """The window changes: new row q was at position ``pos[q]`` of the old one (-1: new)."""
        live = {v for _, v in self._cols.values()}
        maps = {}
        for v in live:
            if v == self.version:
                p = pos
            else:  # compose with the map of v's columns to the window being left
                p = np.full(pos.size, -1, dtype=np.int64)
                p[pos >= 0] = self._maps[v][0][pos[pos >= 0]]
            maps[v] = (p, np.flatnonzero(p < 0))
        self._maps = maps
        self.version += 1
        self.size = pos.size


def _cost(col: np.ndarray) -> int:
    return max(col.size, 1)
