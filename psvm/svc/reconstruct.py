"""Bring the gradient of stale rows up to date, and find eliminated rows that violate.

A row leaves the solver's window with an exact G. Later only the variables
that changed since matter: G_t += y_t sum_s y_s (a_s - a_s^then) K(x_s, x_t),
so only their rows travel (one Allgatherv), then each rank evaluates the
kernel between them and its own stale rows. The sum runs over the changed
variables in global order, so the result does not depend on the number of ranks.
"""

from __future__ import annotations

import numpy as np

from psvm.gram import PRECOMPUTED
from psvm.jit import njit
from psvm.kernels import take_rows
from psvm.svc.select import best_of_sign, bids, candidates
from psvm.svc.state import filled, gather_csr

# up to this many kernel values (stale variables x changed rows), one compiled call brings the
# stale rows up to date; past it, the blocked and threaded sums of each departure pay
EPOCH_SUMS_VALUES = 1 << 16


@njit(cache=True, nogil=True)
def violators(rows, y, alpha, C, G, m, M, m_neg, M_neg, out):
    """Rows of ``rows`` that may join a violating pair given the global m and M (of the
    rows with y = -1: m_neg, M_neg; the nu types keep the signs apart, the others not).

    The negation of the elimination rule: free rows, rows in I_up with
    -y_t G_t > M, rows in I_low with -y_t G_t < m. Returns the count written to ``out``.
    """
    k = 0
    for q in range(rows.size):
        t = rows[q]
        v = -y[t] * G[t]
        pos = y[t] > 0
        up = alpha[t] < C[t] if pos else alpha[t] > 0.0
        low = alpha[t] > 0.0 if pos else alpha[t] < C[t]
        if (up and v > (M if pos else M_neg)) or (low and v < (m if pos else m_neg)):
            out[k] = t
            k += 1
    return k


class Departures:
    """The alpha of the moment each stale row left the window.

    Every rank records each departure (a window cut, the same iteration for
    every P), so all ranks hold the same number of snapshots. A snapshot is a
    copy of the local alpha: the rows' own ranks know which of their
    variables changed since, and how much.
    """

    def __init__(self, n: int) -> None:
        self.epoch = filled(n, -1, np.int64)  # snapshot of each stale row
        self.alphas: list[np.ndarray] = []

    def __len__(self) -> int:
        return len(self.alphas)

    def leave(self, rows: np.ndarray, alpha: np.ndarray) -> None:
        """``rows`` leave the window now (their G is exact at ``alpha``)."""
        self.epoch[rows] = len(self.alphas)
        self.alphas.append(alpha.copy())

    def changes(self, y: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Local variables that changed since some departure, and y_s (a_s - a_s^then)
        for each departure (one column per snapshot)."""
        then = np.array(self.alphas).T  # (n, snapshots)
        changed = np.flatnonzero((then != alpha[:, None]).any(axis=1))
        coef = y[changed, None] * (alpha[changed, None] - then[changed])
        return changed, np.ascontiguousarray(coef)

    def reset(self, rows: np.ndarray, alpha: np.ndarray) -> None:
        """The stale ``rows`` are up to date at ``alpha``: one snapshot serves them all."""
        self.clear()
        self.leave(rows, alpha)

    def clear(self) -> None:
        """No row is stale any more (on every rank): no snapshot is needed."""
        self.epoch[:] = -1
        self.alphas = []


class Reconstruction:
    """:class:`~psvm.svc.solver.Solver`'s methods that bring the stale rows' G up to date and
    revive the eliminated rows that violate (LIBSVM's ``reconstruct_gradient`` and unshrink),
    and decide when: at the stop test, at 'multi''s gaps and at the policy's unshrink gap; and
    G = p + Q alpha0 for a start away from 0."""

    def _gather_rows(self, local: np.ndarray, coef: np.ndarray) -> tuple[tuple, np.ndarray]:
        """The rows of the local variables ``local`` of every rank, each once, in global row
        order, and ``coef`` (a row per variable, a column per sum) added per row: an SVR row's
        two variables share x, so its kernel values are computed once (collective). Sums over
        them add the same terms in the same order for every P."""
        rows = self.row_of[local]
        if self.per_row > 1:  # a row's first variable, then its second (``local`` is sorted)
            rows, inv = np.unique(rows, return_inverse=True)
            acc = np.zeros((rows.size, coef.shape[1]))
            np.add.at(acc, inv, coef)
            coef = acc
        K, width = self.K, coef.shape[1]
        F = gather_csr(self.comm, *take_rows(K.indptr, K.indices, K.data, rows))
        return F, self.comm.allgatherv(np.ascontiguousarray(coef).ravel()).reshape(-1, width)

    def _start_gradient(self) -> None:
        """G = p + Q alpha0 for a start away from 0 (one-class, the nu types); collective.

        The rows of the non-zero alphas travel (global order), and each rank sums
        their kernel values against its rows: the same terms, in the same order, for every P.
        """
        nz = np.flatnonzero(self.alpha)
        F, coef = self._gather_rows(nz, (self.y[nz] * self.alpha[nz])[:, None])
        moved = np.flatnonzero(coef[:, 0])  # nu-SVR: a row's a and a* cancel at the start
        if moved.size and self.K.n:
            K = self.K
            acc = K.sums(take_rows(*F, moved), coef[moved, 0], np.arange(K.n, dtype=np.int64))
            self.G += self.y * acc[self.row_of]  # in place: the full window's arrays see it

    def _refresh_stale(self) -> None:
        """Bring G of the stale rows up to date with the variables changed since they left
        (collective; local state must be synced)."""
        dep = self.departures
        if not len(dep):
            return
        changed, coef = dep.changes(self.y, self.alpha)
        F, coef = self._gather_rows(changed, coef)
        stale = np.flatnonzero(~self.in_window)
        epoch = dep.epoch[stale]
        if self.K.kid != PRECOMPUTED and stale.size * (F[0].size - 1) <= EPOCH_SUMS_VALUES:
            # few rows: every departure's sums in one compiled call (the same terms, in the
            # same order, as the loop below, whose Python cost a departure was most of it)
            moved = (coef != 0).any(axis=0)[epoch]  # unchanged since departure: no term
            var, since = stale[moved], epoch[moved]
            if self.per_row == 1:
                acc = self.K.epoch_sums(F, coef, var, since)
            else:  # a row's two variables left together: one sum a row
                rows, first, inv = np.unique(
                    self.row_of[var], return_index=True, return_inverse=True
                )
                acc = self.K.epoch_sums(F, coef, rows, since[first])[inv]
            self.G[var] += self.y[var] * acc
            dep.reset(stale, self.alpha)
            return
        for e in np.unique(epoch):
            var = stale[epoch == e]
            moved = np.flatnonzero(coef[:, e])  # unchanged since departure e: no term
            if not moved.size:
                continue
            F_e, coef_e = take_rows(*F, moved), coef[moved, e]
            if self.per_row == 1:  # each variable its own row, and ``var`` sorted
                acc = self.K.sums(F_e, coef_e, var)
            else:
                rows, inv = np.unique(self.row_of[var], return_inverse=True)
                acc = self.K.sums(F_e, coef_e, rows)[inv]
            self.G[var] += self.y[var] * acc
        dep.reset(stale, self.alpha)

    def _can_reconstruct(self) -> bool:
        """Whether any rank has eliminated rows that a reconstruction could revive."""
        return self.exact and self.eliminated_any_global()

    def _thresholds_crossed(self, gap: float) -> bool:
        """'multi' reconstruction points and LIBSVM's single unshrink, crossed now."""
        tol = self.cfg.tol
        hit = False
        while self._gaps and gap < self._gaps[0] * tol:
            self._gaps.pop(0)
            hit = True
        return hit and self.eliminated_any_global()

    def eliminated_any_global(self) -> bool:
        # (rows out of the window are stale, eliminated, or lent)
        return bool(self.comm.max_(int(self.n_active < self.y.size - self._lent.size)))

    def _unshrink_due(self, gap: float) -> bool:
        u = self.policy.unshrink_gap
        if u is not None and not self._unshrunk and gap <= u * self.cfg.tol:
            self._unshrunk = True
            return True
        return False

    def _reconstruct(self, all_rows: bool) -> float:
        """Rebuild G of the stale rows, then revive every violator (or every row).

        Rows eliminated but still in the window have exact G already. Returns
        the gap m - M over all rows.
        """
        st = self.stats
        with st.timer("reconstruct"):
            st.add("n_reconstruct")
            self._sync()
            lent = self._parts is not None
            old = self._home(relayout=False)  # (the window is set below: once)
            self._refresh_stale()
            everyone = np.ones(self.y.size, dtype=bool)
            up, low = self._up[: everyone.size], self._low[: everyone.size]  # (may be longer)
            args = (self.y, self.alpha, self.C, self.G, everyone, up, low)
            if self.nu:
                bids(*args)
                ext = [best_of_sign(up, low, self.y, s) for s in (1.0, -1.0)]
                local = [ext[0][0], ext[0][2], ext[1][0], ext[1][2]]
            else:
                m, _, minus_M, _ = candidates(*args)
                local = [m, minus_M, m, minus_M]
            m, minus_M, m_neg, minus_M_neg = self.comm.max_(np.array(local))
            out = np.flatnonzero(~self.active)
            scratch = np.empty(out.size, dtype=np.int64)
            n_bad = violators(
                out, self.y, self.alpha, self.C, self.G, m, -minus_M, m_neg, -minus_M_neg, scratch
            )
            st.add("n_false_positive", n_bad)  # eliminated rows that violate after all
            back = out if all_rows else scratch[:n_bad]
            self.active[back] = True
            self.streak[back] = 0
            if lent or not self.in_window[back].all():
                self.in_window[back] = True
                rows = np.flatnonzero(self._pairs(self.in_window))
                self._relayout(rows, old[rows])
            else:  # all in the window already: just the flags
                self.window.revive(back)
                self._count_active()
        gap = max(m + minus_M, m_neg + minus_M_neg)
        return float(gap) if gap > -np.inf else 0.0
