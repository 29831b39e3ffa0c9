"""The solver's rows lent across ranks (:mod:`psvm.svc.balance` deals them out).

At a window cut, when the ranks' new windows are uneven, the ranks deal their rows out again
and lend rows to each other: a borrowed row's state (and its sparse row, norm and diagonal)
joins the borrower's local arrays after its own. The lent rows go home before anything needs
their owner's state: a reconstruction, a checkpoint, the result.
"""

from __future__ import annotations

import numpy as np

from psvm.kernels import take_rows
from psvm.svc import balance
from psvm.svc.packets import REJOINED


class Lending:
    """:class:`~psvm.svc.solver.Solver`'s methods for lent rows. Its attributes: ``_parts``,
    the ranks' deal while rows are lent (None: none are); ``_lent``, the own variables lent
    out, in global order; ``_borrowed``, the borrowed rows' (sparse rows, norms, diagonal);
    ``_store``, memory for the state of both across cuts."""

    def _lend(self, rows: np.ndarray, old: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Deal the ranks' new windows (``rows``: own, active, in global order) out again if
        they are uneven (collective). Returns the rows this rank works on, its own and those
        it borrows, in global order, and their positions in its window before (-1: none)."""
        if self.comm.size == 1 or self.per_row > 1:  # (SVR's two variables a row: not lent)
            return rows, old[rows]
        K = self.K
        mine = np.array([rows.size, K.exact32, K.integral, K.table.size and not K.whole_table])
        every = self.comm.allgatherv(mine).reshape(-1, mine.size)
        # a lent row must fit its borrower's column copies (float32; int8 and an rbf table,
        # which covers only the rank's own rows unless it covers every rank's)
        fits = (every[:, 1:3] == every[0, 1:3]).all() and not every[:, 3].any()
        parts = balance.deal(every[:, 0]) if fits else None
        if parts is None:
            return rows, old[rows]
        rank = self.comm.rank
        dest = balance.destinations(parts, rank)
        out = dest != rank
        lent = rows[out]
        records = np.column_stack(
            (self.gid[lent], self.y[lent], self.C[lent], self.QD[lent], K.sq[lent],
             self.alpha[lent], self.G[lent], self.streak[lent], K.row_nnz[lent])
        )  # fmt: skip
        csr = take_rows(K.indptr, K.indices, K.data, lent)
        got, g_csr = balance.lend(self.comm, dest[out], records, csr)
        self._adopt(got)
        self._borrowed = (g_csr, got[:, balance.SQ], got[:, balance.DIAG])
        self._parts, self._lent = parts, lent
        self.stats.add("rows_lent", int(lent.size))
        guests = self.n_own + np.arange(got.shape[0])
        lower, kept = int(parts[:rank, rank].sum()), rows[~out]  # from lower ranks: before
        none = np.full(guests.size, -1)
        new = np.concatenate((guests[:lower], kept, guests[lower:]))
        return new, np.concatenate((none[:lower], old[kept], none[lower:]))

    def _adopt(self, got: np.ndarray) -> None:
        """The borrowed rows' state joins the local arrays after the own. The arrays keep
        room for it across cuts (new pages cost this VM 2.4 ms a MB)."""
        B, n, k = balance, self.n_own, got.shape[0]
        g = got[:, B.GID].astype(np.int64)
        fields = {
            "y": got[:, B.Y], "C": got[:, B.BOUND], "QD": got[:, B.DIAG],
            "gid": g, "grow": g, "row_of": np.arange(n, n + k), "alpha": got[:, B.ALPHA],
            "G": got[:, B.GRAD], "active": np.ones(k), "streak": got[:, B.STREAK],
            "in_window": np.zeros(k),
        }  # fmt: skip
        store = self._store
        if store is None or store["y"].size < n + k:
            store = self._store = {f: np.empty(n + 2 * k, getattr(self, f).dtype) for f in fields}
            for f, a in store.items():
                a[:n] = getattr(self, f)[:n]
        for f, v in fields.items():
            store[f][n : n + k] = v
            setattr(self, f, store[f][: n + k])
        if self._up.size < n + k:  # the selection passes' scratch, a column's rejoined rows
            self._up, self._low, self._obj = (np.empty(n + 2 * k) for _ in range(3))
            b = self.bufs
            self.bufs = (*b[:REJOINED], np.empty(n + 2 * k), *b[REJOINED + 1 :])

    def _home(self, relayout: bool = True) -> np.ndarray:
        """Lent rows go home: the borrowed rows' state goes back to their owners, which put
        them in their windows again (collective; state synced). Returns the window position
        each own variable had (-1: none)."""
        if self._parts is None:
            return self.window.pos
        n = self.n_own
        state = np.column_stack((self.alpha[n:], self.G[n:], self.active[n:], self.streak[n:]))
        back = balance.send_home(self.comm, self._parts, state)
        old = self.window.pos[:n]
        for f in self._store:
            setattr(self, f, getattr(self, f)[:n])
        lent = self._lent
        self.alpha[lent], self.G[lent] = back[:, 0], back[:, 1]
        self.active[lent], self.streak[lent] = back[:, 2] != 0, back[:, 3]
        self.in_window[lent] = True
        self._parts, self._borrowed, self._lent = None, None, self._lent[:0]
        if relayout:
            rows = np.flatnonzero(self.in_window)
            self._relayout(rows, old[rows])
        return old
