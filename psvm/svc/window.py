"""The solver's window: the rows the SMO loop works on, and their state in compact arrays.

The window holds the active rows and the rows eliminated since the last cut (whose G the loop
still updates, so it stays exact). Its arrays (y, C, QD, alpha, G, the active flags and the
elimination streaks) are contiguous copies of the solver's local ones, so that every pass of
the engine runs over the window alone; a full window (every own row, in order, none borrowed)
uses the local arrays themselves. Its kernel covers its rows only, so a column costs
O(window). The solver makes a new window at each cut, at a reconstruction that brings rows
back into it and when lent rows go home (:meth:`psvm.svc.solver.Solver._set_window`), and
writes its state back with :meth:`sync`. A window refers to the solver's arrays as they were
when it was made: after they change (rows borrowed or sent home), a new one must be made.
"""

from __future__ import annotations

import numpy as np

from psvm.svc.columns import LocalKernel
from psvm.svc.state import filled

# the positions in the engine's ``win`` (:attr:`Window.arrays`)
ROWS, POS, Y, ALPHA, C, G, QD, ACTIVE, STREAK, UP, LOW, OBJ, ALL_POS, GID, VROW = range(15)


class Window:
    """The window of local variables ``rows`` (sorted, or with borrowed rows in global order;
    with two variables a row, both of each row: the rows' first variables, then their second
    ones, in the same order).

    ``local``: the solver, whose arrays (``y``, ``C``, ``QD``, ``alpha``, ``G``, ``active``,
    ``streak``, ``gid``, ``per_row``) the window copies, or uses when ``full``. ``kernel``:
    over the window's rows (``vrow``: each variable's row in it; ``keys``: the rows' global
    indices, the cache's keys). ``scratch``: the selection passes' (up, low, obj), at least
    as long as the window.
    """

    def __init__(
        self,
        local,
        rows: np.ndarray,
        full: bool,
        kernel: LocalKernel,
        vrow: np.ndarray,
        keys: np.ndarray,
        scratch: tuple[np.ndarray, np.ndarray, np.ndarray],
    ):
        self.rows, self.full, self.kernel = rows, full, kernel
        if full:
            self.pos = np.arange(rows.size, dtype=np.int64)  # local variable -> position
        else:
            self.pos = filled(local.y.size, -1, np.int64)
            self.pos[rows] = np.arange(rows.size)
        take = (lambda a: a) if full else (lambda a: a[rows])
        self.y, self.C, self.QD = take(local.y), take(local.C), take(local.QD)
        self.alpha, self.G = take(local.alpha), take(local.G)
        self.active, self.streak = take(local.active), take(local.streak)
        self.loc = (keys, *kernel.packet_arrays())  # the rows that packets read
        w = rows.size
        up, low, obj = scratch
        # the engine's ``win`` (:func:`psvm.svc.engine.run`)
        self.arrays = (
            rows,
            self.pos,
            self.y,
            self.alpha,
            self.C,
            self.G,
            self.QD,
            self.active,
            self.streak,
            up[:w],
            low[:w],
            obj[:w],
            self.pos if full and local.per_row == 1 else np.arange(kernel.n, dtype=np.int64),
            take(local.gid),
            vrow,
        )
        self.kernel_arrays, self.kernel_params = kernel.engine_arrays()

    def sync(self, local) -> None:
        """Write the live state back to ``local``'s arrays (a full window's are theirs)."""
        if not self.full:
            r = self.rows
            local.alpha[r], local.G[r] = self.alpha, self.G
            local.active[r], local.streak[r] = self.active, self.streak

    def revive(self, variables: np.ndarray) -> None:
        """The local ``variables`` (in the window) are active again, with no streak."""
        q = self.pos[variables]
        self.active[q] = True
        self.streak[q] = 0
