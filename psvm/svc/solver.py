"""The distributed SMO loop for one binary C-SVC problem.

Solves min_a 1/2 a'Qa - e'a subject to 0 <= a_t <= C_t and y'a = 0, with
Q_st = y_s y_t K(x_s, x_t), rows sharded contiguously over the ranks. Every
rank runs the same loop; per iteration the ranks exchange two fixed-size
*packets* (candidate key, global index, the candidate's state and its sparse
row) in two Allgathers:

1. each rank offers its best i (max -y_t G_t over I_up) and its best of
   I_low; every rank picks the same winners (ties: smaller global index),
   checks m - M < tol, and now holds row x_i;
2. each rank computes its local column K(x_i, .), offers its best j by the
   second-order gain, and every rank picks the same j, holding row x_j.

Every rank then computes the same two-variable step and updates G on its own
rows with columns i and j. The first-order (maximal violating pair) mode
takes j from round 1 and skips round 2. Results do not depend on P: each
kernel value and gradient entry is computed by the same arithmetic whichever
rank owns it, and every choice is an exact max/min with a fixed tie-break.

The window. The per-row state the loop touches (y, alpha, C, G, the kernel
diagonal, the active flags) is kept in compact *window* arrays, so every pass
is contiguous and vectorised. The window holds the active rows and the rows
eliminated since the last cut (whose G is still updated, so stays exact).
When the active rows fall to ``RELAYOUT`` of the window (counted over all
ranks, so the same iteration for every P) the window is cut to them; the rows
that leave go *stale* with an exact G, and reconstruction brings them up to
date with the variables that changed since (:mod:`psvm.svc.reconstruct`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from psvm._params import FIRST_ORDER, SVCConfig
from psvm.cache import ColumnCache
from psvm.elimination import MULTI_GAPS, eliminate, make_policy
from psvm.kernels import csr_arrays, finish
from psvm.stats import Stats
from psvm.svc.checkpoint import Checkpoint
from psvm.svc.columns import LocalKernel
from psvm.svc.packets import (
    DIAG,
    GIDX,
    KEY,
    NNZ,
    ROW,
    SQ,
    column_total,
    pack,
    pair_pre,
    pair_step,
    winner,
)
from psvm.svc.reconstruct import Departures, violators
from psvm.svc.select import candidates, second_order
from psvm.svc.state import bias_terms, dual_objective_terms, gather_rows
from psvm.svc.update import update_and_select

# After the two packets of round 1, each rank's INFO block: rank 0's clock says
# a checkpoint is due; the rank's active rows; the rank's window rows.
CLOCK, N_ACTIVE, N_WINDOW, INFO = range(4)
MAX_DEPARTURES = 16  # alpha snapshots kept for stale rows before they are brought up to date
RELAYOUT = 0.75  # cut the window to the active rows when they are this share of it or less


@dataclass
class BinaryProblem:
    """One rank's share of a binary problem: local rows, labels +-1 and bounds C_t."""

    X: sp.csr_matrix
    y: np.ndarray
    C: np.ndarray
    offset: int
    n_samples: int
    max_row_nnz: int


@dataclass
class BinaryResult:
    alpha: np.ndarray  # local rows
    rho: float
    objective: float
    gap: float
    n_iter: int
    status: int  # 0 converged, 1 stopped at max_iter
    approximate: bool = False  # eliminated rows were never re-checked


class Solver:
    """SMO over a sharded binary problem; see the module docstring."""

    def __init__(
        self,
        comm,
        problem: BinaryProblem,
        config: SVCConfig,
        stats: Stats | None = None,
        log: Callable[[str], None] | None = None,
        checkpoint: Checkpoint | None = None,
        pair: int = 0,
    ):
        self.comm, self.cfg = comm, config
        self.stats = Stats() if stats is None else stats
        self.log = log
        self.offset, self.n_samples = problem.offset, problem.n_samples
        kp = (config.kernel_id, config.gamma, config.coef0, config.degree)
        self.K = LocalKernel(problem.X, kp)
        self.indptr, self.indices, self.data = self.K.indptr, self.K.indices, self.K.data
        # local-order state: every row's home; the window arrays are the live copies
        self.y = np.ascontiguousarray(problem.y, dtype=np.float64)
        self.C = np.ascontiguousarray(problem.C, dtype=np.float64)
        n = self.y.size
        self.alpha = np.zeros(n)
        self.G = -np.ones(n)
        self.active = np.ones(n, dtype=bool)
        self.streak = np.zeros(n, dtype=np.int64)
        self.in_window = np.ones(n, dtype=bool)
        self.policy = make_policy(config.heuristic)
        # whether stale rows are ever brought up to date ('approximate': never)
        self.exact = self.policy.active and config.reconstruction != "approximate"
        self.departures = Departures(n)
        self._unshrunk = False
        multi = config.reconstruction == "multi" and self.policy.active
        self._gaps = sorted(
            set(MULTI_GAPS if multi else ())
            | ({self.policy.unshrink_gap} if self.policy.unshrink_gap and self.exact else set()),
            reverse=True,
        )
        self.trace_every = max(1, min(100, self.n_samples // 20))
        self.cache = ColumnCache(n, self.n_samples, config.cache_size)
        self.W = max(problem.max_row_nnz, 1)
        size = ROW + 2 * self.W
        self.S = size
        self.send1 = np.zeros(2 * size + INFO)
        self.recv1 = np.zeros((comm.size, 2 * size + INFO))
        self.send2 = np.zeros(size)
        self.recv2 = np.zeros((comm.size, size))
        self._idx = np.zeros(self.W, dtype=np.int32)  # a packet row's indices, as ints
        self._kij = np.zeros(1)
        self._up, self._low = np.empty(n), np.empty(n)  # scratch of the selection passes
        self.checkpoint, self.pair = checkpoint, pair
        self._start = (0, None)  # (n_iter, gap0)
        self._set_window(np.arange(n, dtype=np.int64))
        state = None if checkpoint is None else checkpoint.solver_state(pair, self.offset, n)
        if state is not None:
            self._restore(state)

    # -- the window --------------------------------------------------------
    def _set_window(self, rows: np.ndarray) -> None:
        """Make ``rows`` (sorted local rows) the window: gather its arrays from local order."""
        self.win = rows
        self.pos = np.full(self.y.size, -1, dtype=np.int64)  # local row -> window position
        self.pos[rows] = np.arange(rows.size)
        self.in_window[:] = False
        self.in_window[rows] = True
        full = rows.size == self.y.size  # then the window arrays are the local ones
        take = (lambda a: a) if full else (lambda a: a[rows])
        self.wy, self.wC, self.wQD = take(self.y), take(self.C), take(self.K.diag)
        self.walpha, self.wG = take(self.alpha), take(self.G)
        self.wact, self.wstreak = take(self.active), take(self.streak)
        # the kernel over the window's rows alone: columns cost O(window), contiguously
        self.KW = self.K if full else LocalKernel(self._local_rows(rows), self.K.kparams)
        self.wall = np.arange(rows.size, dtype=np.int64)
        self.n_active = int(np.count_nonzero(self.wact))
        self._up_w, self._low_w = self._up[: rows.size], self._low[: rows.size]
        self._pack_args = (self.W, rows, self.offset, self.wy, self.walpha, self.wG, self.wC,
                           self.wQD, self.K.sq, self.indptr, self.indices, self.data)  # fmt: skip

    def _sync(self) -> None:
        """Write the window's live state back to local order."""
        if self.win.size < self.y.size:
            w = self.win
            self.alpha[w], self.G[w] = self.walpha, self.wG
            self.active[w], self.streak[w] = self.wact, self.wstreak

    def _relayout(self, rows: np.ndarray) -> None:
        """Make ``rows`` the window (state synced first); cached columns follow lazily."""
        old = self.pos
        self._set_window(rows)
        self.cache.relayout(old[rows])
        self.stats.add("n_relayout")

    def _shrink_window(self) -> None:
        """Cut the window to its active rows; the others go stale with an exact G (collective)."""
        self._sync()
        if self.exact:
            if len(self.departures) >= MAX_DEPARTURES:  # bounds the snapshots' memory
                with self.stats.timer("reconstruct"):
                    self._refresh_stale()
            self.departures.leave(self.win[~self.wact], self.alpha)
        self._relayout(self.win[self.wact])

    def _refresh_stale(self) -> None:
        """Bring G of the stale rows up to date with the variables changed since they left
        (collective; local state must be synced)."""
        dep = self.departures
        if not len(dep):
            return
        changed, coef = dep.changes(self.y, self.alpha)
        F = gather_rows(self.comm, self._local_rows(changed))
        coef = self.comm.allgatherv(coef.ravel()).reshape(-1, len(dep))
        stale = np.flatnonzero(~self.in_window)
        epoch = dep.epoch[stale]
        for e in np.unique(epoch):
            rows = stale[epoch == e]
            moved = np.flatnonzero(coef[:, e])  # unchanged since departure e: no term
            if moved.size:
                acc = self.K.sums(csr_arrays(F[moved]), coef[moved, e], rows)
                self.G[rows] += self.y[rows] * acc
        dep.reset(stale, self.alpha)

    # -- packets -----------------------------------------------------------
    def _pack(self, buf: np.ndarray, key: float, q: int, with_row: bool) -> None:
        """Window position ``q``'s candidate (q < 0: none) with its state and row."""
        pack(buf, key, q, with_row, *self._pack_args)

    def _row(self, packet: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        nnz = int(packet[NNZ])
        idx = self._idx[:nnz]
        idx[:] = packet[ROW : ROW + nnz]
        return idx, packet[ROW + self.W : ROW + self.W + nnz]

    # -- kernel columns ----------------------------------------------------
    def _column(self, packet: np.ndarray) -> np.ndarray:
        """K(x, window rows) for the packet's row x, from the cache when possible."""
        col, hit, missing = self.cache.get(int(packet[GIDX]))
        if hit and missing is None:
            return col
        idx, val = self._row(packet)
        with self.stats.timer("kernel"):
            if hit:  # rows that rejoined the window since: fill in just those
                part = np.empty(missing.size)
                self.KW.column(idx, val, packet[SQ], missing, part)
                col[missing] = part
            else:
                self.KW.column(idx, val, packet[SQ], self.wall, col, self.KW.nnz)
        return col

    def _kernel_ij(self, p_i: np.ndarray, p_j: np.ndarray) -> float:
        """K(x_i, x_j), equal to the entry of either column bitwise."""
        kp = self.K.kparams
        self._kij[0] = pair_pre(p_i, p_j, self.W, self.K.work, *kp)
        return float(finish(kp[0], self._kij)[0])

    def _candidates(self) -> tuple:
        return candidates(self.wy, self.walpha, self.wC, self.wG, self.wact,
                          self._up_w, self._low_w)  # fmt: skip

    # -- the loop ----------------------------------------------------------
    def solve(self) -> BinaryResult:
        cfg, comm, st = self.cfg, self.comm, self.stats
        first_order = cfg.selection_id == FIRST_ORDER
        max_iter = cfg.max_iter if cfg.max_iter > 0 else max(10_000_000, 100 * self.n_samples)
        S, status, gap = self.S, 0, 0.0
        send_i, send_j, info = self.send1[:S], self.send1[S : 2 * S], self.send1[2 * S :]
        # each rank's packets in the receive buffers, as views made once
        recv_i = [row[:S] for row in self.recv1]
        recv_j = [row[S : 2 * S] for row in self.recv1]
        recv_2 = list(self.recv2)
        n_iter, gap0 = self._start
        ck = self.checkpoint
        self._t_start = t_start = time.perf_counter()
        with st.timer("select"):
            cand = self._candidates()
        while True:
            m, i, minus_M, j = cand
            with st.timer("select"):
                self._pack(send_i, m, i, True)
                self._pack(send_j, minus_M, j, first_order)
                info[CLOCK] = 0.0 if ck is None else ck.clock_flag()
                info[N_ACTIVE], info[N_WINDOW] = self.n_active, self.win.size
            comm.allgather_into(self.send1, self.recv1)
            if ck is not None and n_iter > self._start[0] and ck.due(
                n_iter, self.recv1[0, 2 * S + CLOCK]
            ):
                self._save(n_iter, gap0)
            n_active = column_total(self.recv1, 2 * S + N_ACTIVE)
            n_window = column_total(self.recv1, 2 * S + N_WINDOW)
            if len(self.departures) and n_window == self.n_samples:
                self.departures.clear()  # every row is back in the window
            if n_active < n_window and n_active <= RELAYOUT * n_window:
                self._shrink_window()
            r_i = winner(self.recv1, 0, True)
            r_j = winner(self.recv1, S, True)
            p_i = recv_i[r_i]
            m_all, minus_M_all = float(p_i[KEY]), float(recv_j[r_j][KEY])  # over all ranks
            gap = m_all + minus_M_all if r_i >= 0 and r_j >= 0 else 0.0
            gap0 = gap if gap0 is None else gap0
            if n_iter % self.trace_every == 0:
                self._trace(n_iter, gap)
            if gap < cfg.tol or self._thresholds_crossed(gap):
                if not self._can_reconstruct():
                    break
                gap, cand = self._reconstruct(all_rows=self._unshrink_due(gap))
                if gap < cfg.tol:
                    break
                continue
            if n_iter >= max_iter:
                status = 1
                break
            if self.policy.check_now(n_iter, self.n_samples, gap, gap0, cfg.tol):
                self._eliminate(m_all, -minus_M_all)
            col_i = self._column(p_i)
            if first_order:
                p_j = recv_j[r_j]
            else:
                with st.timer("select"):
                    obj, j = second_order(
                        self.wy, self.walpha, self.wC, self.wG, self.wQD, self.wact,
                        col_i, m_all, p_i[DIAG], self._up_w,
                    )  # fmt: skip
                    self._pack(self.send2, obj, j, True)
                comm.allgather_into(self.send2, self.recv2)
                r_j = winner(self.recv2, 0, False)
                if r_j < 0:  # no violating partner for i on any rank
                    gap = 0.0
                    if not self._can_reconstruct():
                        break
                    gap, cand = self._reconstruct(all_rows=False)
                    if gap < cfg.tol:
                        break
                    continue
                p_j = recv_2[r_j]
            cand = self._step(p_i, p_j, col_i)
            n_iter += 1
            if self.log is not None and n_iter % 1000 == 0:
                el = time.perf_counter() - t_start
                self.log(f"iter {n_iter}  m-M {gap:.4g}  active {self.n_active}"
                         f"  elapsed {el:.1f}s")  # fmt: skip
        self._trace(n_iter, gap)
        self._sync()
        st.add("n_iter", n_iter)
        st.add("cache_hits", self.cache.hits)
        st.add("cache_misses", self.cache.misses)
        # 'approximate' leaves stale gradients: LIBSVM's rho uses active rows only
        approximate = cfg.reconstruction == "approximate" and self.eliminated_any_global()
        rows = np.flatnonzero(self.active if approximate else np.ones(self.y.size, dtype=bool))
        rho = self._rho(rows)
        obj = 0.5 * comm.sum_(float(dual_objective_terms(self.alpha, self.G)))
        return BinaryResult(self.alpha, rho, obj, float(gap), n_iter, status, approximate)

    # -- checkpoints -------------------------------------------------------
    def _save(self, n_iter: int, gap0: float | None) -> None:
        """Write the state between two iterations (collective)."""
        with self.stats.timer("checkpoint"):
            self._sync()
            self._refresh_stale()  # G exact on every row: the file needs no snapshots
            arrays = {"alpha": self.alpha, "G": self.G,
                      "active": self.active.astype(np.int8), "streak": self.streak,
                      "window": self.in_window.astype(np.int8)}  # fmt: skip
            scalars = {"n_iter": n_iter, "gap0": gap0, "gaps": self._gaps,
                       "unshrunk": self._unshrunk,
                       "departed": len(self.departures) > 0}  # fmt: skip
            self.checkpoint.save(self.pair, arrays, scalars)
        self.stats.add("n_checkpoint")

    def _restore(self, s: dict) -> None:
        self.alpha[:], self.G[:] = s["alpha"], s["G"]
        self.active[:] = s["active"] != 0
        self.streak[:] = s["streak"]
        self._relayout(np.flatnonzero(s.get("window", s["active"]) != 0))
        if s.get("departed"):  # stale rows were saved up to date, as the saving run left them
            self.departures.reset(np.flatnonzero(~self.in_window), self.alpha)
        self._gaps, self._unshrunk = list(s["gaps"]), bool(s["unshrunk"])
        self._start = (int(s["n_iter"]), s["gap0"])
        self.stats.values["resumed_at_iter"] = int(s["n_iter"])

    # -- elimination and reconstruction ------------------------------------
    def _trace(self, n_iter: int, gap: float) -> None:
        tr = self.stats.traces
        tr["iter"].append(n_iter)
        tr["gap"].append(float(gap))
        tr["active"].append(self.n_active)
        tr["seconds"].append(time.perf_counter() - self._t_start)
        tr["cache_misses"].append(self.cache.misses)

    def _eliminate(self, m: float, M: float) -> None:
        """Clear the active flag of the rows the policy's rule selects (they stay in the window)."""
        with self.stats.timer("select"):
            gone = eliminate(self.wy, self.walpha, self.wC, self.wG, self.wact, m, M,
                             self.wstreak, self.policy.need)  # fmt: skip
        if gone:
            self.n_active -= gone
            self.stats.add("n_eliminated", gone)

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
        return bool(self.comm.max_(int(self.n_active < self.y.size)))

    def _unshrink_due(self, gap: float) -> bool:
        u = self.policy.unshrink_gap
        if u is not None and not self._unshrunk and gap <= u * self.cfg.tol:
            self._unshrunk = True
            return True
        return False

    def _reconstruct(self, all_rows: bool) -> tuple[float, tuple]:
        """Rebuild G of the stale rows, then revive every violator (or every row).

        Rows eliminated but still in the window have exact G already. Returns
        the gap m - M over all rows and the local candidates over the new
        active set.
        """
        st = self.stats
        with st.timer("reconstruct"):
            st.add("n_reconstruct")
            self._sync()
            self._refresh_stale()
            everyone = np.ones(self.y.size, dtype=bool)
            m, _, minus_M, _ = candidates(self.y, self.alpha, self.C, self.G, everyone,
                                          self._up, self._low)  # fmt: skip
            m, minus_M = self.comm.max_(np.array([m, minus_M]))
            out = np.flatnonzero(~self.active)
            scratch = np.empty(out.size, dtype=np.int64)
            n_bad = violators(out, self.y, self.alpha, self.C, self.G, m, -minus_M, scratch)
            st.add("n_false_positive", n_bad)  # eliminated rows that violate after all
            back = out if all_rows else scratch[:n_bad]
            self.active[back] = True
            self.streak[back] = 0
            if not self.in_window[back].all():
                self.in_window[back] = True
                self._relayout(np.flatnonzero(self.in_window))
            else:  # all in the window already: just the flags
                self.wact[self.pos[back]] = True
                self.wstreak[self.pos[back]] = 0
                self.n_active = int(np.count_nonzero(self.wact))
            cand = self._candidates()
        return float(m + minus_M), cand

    def _local_rows(self, rows: np.ndarray) -> sp.csr_matrix:
        return sp.csr_matrix((self.data, self.indices, self.indptr),
                             shape=(self.y.size, self.K.n_features))[rows]  # fmt: skip

    def _step(self, p_i: np.ndarray, p_j: np.ndarray, col_i: np.ndarray) -> tuple:
        """The two-variable update, identical on every rank, then the window's gradients.

        Returns the local candidates of the next iteration (found in the same pass).
        """
        a_i, a_j, c_i, c_j = pair_step(p_i, p_j, self._kernel_ij(p_i, p_j))
        col_j = self._column(p_j)  # col_i stays valid even if the cache evicts it
        with self.stats.timer("update"):
            for g, new in ((p_i[GIDX], a_i), (p_j[GIDX], a_j)):
                lidx = int(g) - self.offset
                if 0 <= lidx < self.y.size:
                    self.walpha[self.pos[lidx]] = new
            cand = update_and_select(self.wy, self.walpha, self.wC, self.wG, self.wact, col_i,
                                     col_j, c_i, c_j, self._up_w, self._low_w)  # fmt: skip
        return cand

    def _rho(self, rows: np.ndarray) -> float:
        """LIBSVM's bias: mean of y_t G_t over free vectors, else the midpoint."""
        ub, lb, s, nf = bias_terms(rows, self.y, self.alpha, self.C, self.G)
        ub, lb = self.comm.min_(ub), self.comm.max_(lb)
        s, nf = self.comm.sum_(np.array([s, float(nf)]))
        return float(s / nf) if nf > 0 else float((ub + lb) / 2)
