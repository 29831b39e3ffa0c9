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
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from psvm._params import FIRST_ORDER, SVCConfig
from psvm.cache import ColumnCache
from psvm.elimination import MULTI_GAPS, eliminate_rows, make_policy
from psvm.kernels import (
    csc_cost,
    csr_arrays,
    kernel_column,
    kernel_column_csc,
    kernel_column_dense,
    kernel_diag,
    row_sq_norms,
)
from psvm.stats import Stats
from psvm.svc.checkpoint import Checkpoint
from psvm.svc.reconstruct import DeferredGBar, add_kernel_sums, violators
from psvm.svc.select import select_candidates, select_second_order
from psvm.svc.state import bias_terms, dual_objective_terms, gather_rows
from psvm.svc.update import (
    two_variable_step,
    update_gradient_and_select,
    update_gradient_bar,
)

# Packet layout (float64): header fields, then W indices, then W values.
# FLAG (rank 0, first slot): its clock says a checkpoint is due.
KEY, GIDX, Y, ALPHA, GRAD, CAP, DIAG, SQ, NNZ, FLAG, ROW = range(11)


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
        self.indptr, self.indices, self.data = csr_arrays(problem.X)
        self.y = np.ascontiguousarray(problem.y, dtype=np.float64)
        self.C = np.ascontiguousarray(problem.C, dtype=np.float64)
        n = self.y.size
        self.alpha = np.zeros(n)
        self.G = -np.ones(n)
        self.G_bar = np.zeros(n)  # sum over upper-bound variables; only reconstruction reads it
        self.sq = row_sq_norms(self.indptr, self.data, np.empty(n))
        kp = (config.kernel_id, config.gamma, config.coef0, config.degree)
        self.kparams = kp
        self.QD = kernel_diag(self.indptr, self.data, self.sq, *kp, np.empty(n))
        # A second, column-major copy for columns of x with few features: dense
        # when it is at most 1.5x the size of the CSR arrays (12 bytes per non-zero)
        n_feat = problem.X.shape[1]
        self.XT = None
        if 8 * n * n_feat <= 18 * problem.X.nnz:
            self.XT = np.ascontiguousarray(problem.X.T.toarray())
        else:
            Xc = problem.X.tocsc()
            Xc.sort_indices()
            self.colptr, self.rowidx, self.cdata = csr_arrays(Xc)  # same dtypes as CSR
        self.dots = np.zeros(n)
        self.row_nnz = np.diff(self.indptr)
        self.nnz_total = self.active_nnz = int(self.indptr[-1])
        self.all_rows = np.arange(n, dtype=np.int64)
        self.active_rows = self.all_rows
        self.active_mask = np.ones(n, dtype=bool)
        self.policy = make_policy(config.heuristic)
        self.keep_g_bar = self.policy.active and config.reconstruction != "approximate"
        self.pending = DeferredGBar()
        self.streak = np.zeros(n, dtype=np.int64)
        self._scratch = np.empty(n, dtype=np.int64)
        self._unshrunk = False
        multi = config.reconstruction == "multi" and self.policy.active
        self._gaps = sorted(
            set(MULTI_GAPS if multi else ())
            | ({self.policy.unshrink_gap} if self.policy.unshrink_gap else set()),
            reverse=True,
        )
        self.trace_every = max(1, min(1000, self.n_samples // 20))
        self.cache = ColumnCache(n, self.n_samples, config.cache_size)
        self.W = max(problem.max_row_nnz, 1)
        self.work = np.zeros(problem.X.shape[1] + 1)
        size = ROW + 2 * self.W
        self.S = size
        self.send1 = np.zeros(2 * size)
        self.recv1 = np.zeros((comm.size, 2 * size))
        self.send2 = np.zeros(size)
        self.recv2 = np.zeros((comm.size, size))
        self._idx = np.zeros((2, self.W), dtype=np.int32)
        self._pair_indptr = np.zeros(2, dtype=np.int64)
        self._one = np.zeros(1, dtype=np.int64)
        self._kij = np.zeros(1)
        self.checkpoint, self.pair = checkpoint, pair
        self._start = (0, None)  # (n_iter, gap0)
        state = None if checkpoint is None else checkpoint.solver_state(pair, self.offset, n)
        if state is not None:
            self._restore(state)

    # -- packets -----------------------------------------------------------
    def _pack(self, buf: np.ndarray, key: float, lidx: int, with_row: bool) -> None:
        buf[KEY] = key
        if lidx < 0:
            buf[GIDX] = -1.0
            return
        buf[GIDX] = self.offset + lidx
        buf[Y], buf[ALPHA], buf[GRAD] = self.y[lidx], self.alpha[lidx], self.G[lidx]
        buf[CAP], buf[DIAG], buf[SQ] = self.C[lidx], self.QD[lidx], self.sq[lidx]
        if with_row:
            s, e = self.indptr[lidx], self.indptr[lidx + 1]
            nnz = e - s
            buf[NNZ] = nnz
            buf[ROW : ROW + nnz] = self.indices[s:e]
            buf[ROW + self.W : ROW + self.W + nnz] = self.data[s:e]

    def _row(self, packet: np.ndarray, slot: int) -> tuple[np.ndarray, np.ndarray]:
        nnz = int(packet[NNZ])
        idx = self._idx[slot, :nnz]
        idx[:] = packet[ROW : ROW + nnz]
        return idx, packet[ROW + self.W : ROW + self.W + nnz]

    @staticmethod
    def _winner(recv: np.ndarray, off: int, maximise: bool) -> int:
        """Rank whose candidate wins: best key, ties to the smaller global index."""
        best = -1
        for r in range(recv.shape[0]):
            g = recv[r, off + GIDX]
            if g < 0:
                continue
            if best < 0:
                best, bk, bg = r, recv[r, off + KEY], g
                continue
            k = recv[r, off + KEY]
            if (k > bk if maximise else k < bk) or (k == bk and g < bg):
                best, bk, bg = r, k, g
        return best

    # -- kernel columns ----------------------------------------------------
    def _column(self, packet: np.ndarray, slot: int) -> np.ndarray:
        """K(x, active local rows) for the packet's row x, from the cache when possible."""
        gidx = int(packet[GIDX])
        col, hit, complete, missing = self.cache.get(gidx)
        if hit:
            if missing is not None:  # rows revived since: fill in just those
                idx, val = self._row(packet, slot)
                with self.stats.timer("kernel"):
                    kernel_column(
                        idx, val, packet[SQ], self.indptr, self.indices, self.data, self.sq,
                        missing, *self.kparams, self.work, col,
                    )  # fmt: skip
                self.cache.refresh(gidx)
            return col
        idx, val = self._row(packet, slot)
        rows, csr_work, n = self.active_rows, self.active_nnz, self.y.size
        with self.stats.timer("kernel"):
            # the column-major copy reads only x's features (all rows, dense: vectorised);
            # CSR reads the non-zeros of the active rows
            if self.XT is not None and idx.size * n // 4 < csr_work:
                kernel_column_dense(
                    idx, val, packet[SQ], self.XT, self.sq, rows, *self.kparams, self.dots, col
                )
            elif self.XT is None and csc_cost(idx, self.colptr) + n // 2 < csr_work:
                kernel_column_csc(
                    idx, val, packet[SQ], self.colptr, self.rowidx, self.cdata, self.sq, rows,
                    *self.kparams, self.dots, col,
                )  # fmt: skip
            else:
                kernel_column(
                    idx, val, packet[SQ], self.indptr, self.indices, self.data, self.sq, rows,
                    *self.kparams, self.work, col,
                )  # fmt: skip
        if rows.size == n:
            self.cache.mark_complete(gidx)
        return col

    def _kernel_ij(self, p_i: np.ndarray, p_j: np.ndarray) -> float:
        """K(x_i, x_j) by the column formula, so it equals the owner's cached value."""
        idx_i, val_i = self._row(p_i, 0)
        idx_j, val_j = self._row(p_j, 1)
        self._pair_indptr[1] = idx_j.size
        kernel_column(
            idx_i, val_i, p_i[SQ], self._pair_indptr, idx_j, val_j, p_j[SQ:SQ + 1], self._one,
            *self.kparams, self.work, self._kij,
        )  # fmt: skip
        return float(self._kij[0])

    # -- the loop ----------------------------------------------------------
    def solve(self) -> BinaryResult:
        cfg, comm, st = self.cfg, self.comm, self.stats
        first_order = cfg.selection_id == FIRST_ORDER
        max_iter = cfg.max_iter if cfg.max_iter > 0 else max(10_000_000, 100 * self.n_samples)
        S, status, gap = self.S, 0, 0.0
        n_iter, gap0 = self._start
        ck = self.checkpoint
        t_start = time.perf_counter()
        with st.timer("select"):
            cand = select_candidates(self.active_rows, self.y, self.alpha, self.C, self.G)
        while True:
            m, i, minus_M, j = cand
            with st.timer("select"):
                self._pack(self.send1[:S], m, i, True)
                self._pack(self.send1[S:], minus_M, j, first_order)
                self.send1[FLAG] = 0.0 if ck is None else ck.clock_flag()
            comm.allgather_into(self.send1, self.recv1)
            if ck is not None and n_iter > self._start[0] and ck.due(n_iter, self.recv1[0, FLAG]):
                self._save(n_iter, gap0)
            r_i = self._winner(self.recv1, 0, True)
            r_j = self._winner(self.recv1, S, True)
            p_i = self.recv1[r_i, :S]
            gap = p_i[KEY] + self.recv1[r_j, S + KEY] if r_i >= 0 and r_j >= 0 else 0.0
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
                self._eliminate(p_i[KEY], -self.recv1[r_j, S + KEY])
            col_i = self._column(p_i, 0)
            if first_order:
                p_j = self.recv1[r_j, S:]
            else:
                with st.timer("select"):
                    obj, j = select_second_order(
                        self.active_rows, self.y, self.alpha, self.C, self.G, self.QD,
                        col_i, p_i[KEY], p_i[DIAG],
                    )  # fmt: skip
                    self._pack(self.send2, obj, j, True)
                comm.allgather_into(self.send2, self.recv2)
                r_j = self._winner(self.recv2, 0, False)
                if r_j < 0:  # no violating partner for i on any rank
                    gap = 0.0
                    if not self._can_reconstruct():
                        break
                    gap, cand = self._reconstruct(all_rows=False)
                    if gap < cfg.tol:
                        break
                    continue
                p_j = self.recv2[r_j]
            cand = self._step(p_i, p_j, col_i)
            n_iter += 1
            if self.log is not None and n_iter % 1000 == 0:
                el = time.perf_counter() - t_start
                self.log(f"iter {n_iter}  m-M {gap:.4g}  active {self.active_rows.size}"
                         f"  elapsed {el:.1f}s")  # fmt: skip
        self._trace(n_iter, gap)
        st.add("n_iter", n_iter)
        st.add("cache_hits", self.cache.hits)
        st.add("cache_misses", self.cache.misses)
        # 'approximate' leaves eliminated gradients stale: LIBSVM's rho uses active rows only
        approximate = cfg.reconstruction == "approximate" and self.eliminated_any_global()
        rho = self._rho(self.active_rows if approximate else self.all_rows)
        obj = 0.5 * comm.sum_(float(dual_objective_terms(self.alpha, self.G)))
        return BinaryResult(self.alpha, rho, obj, float(gap), n_iter, status, approximate)

    # -- checkpoints -------------------------------------------------------
    def _save(self, n_iter: int, gap0: float | None) -> None:
        """Write the state between two iterations (collective)."""
        with self.stats.timer("checkpoint"):
            self._flush_g_bar()
            active = self.active_mask.astype(np.int8)
            arrays = {"alpha": self.alpha, "G": self.G, "G_bar": self.G_bar, "active": active,
                      "streak": self.streak}  # fmt: skip
            scalars = {"n_iter": n_iter, "gap0": gap0, "gaps": self._gaps,
                       "unshrunk": self._unshrunk}  # fmt: skip
            self.checkpoint.save(self.pair, arrays, scalars)
        self.stats.add("n_checkpoint")

    def _restore(self, s: dict) -> None:
        self.alpha[:], self.G[:], self.G_bar[:] = s["alpha"], s["G"], s["G_bar"]
        self.active_mask[:] = s["active"] != 0
        self.streak[:] = s["streak"]
        self._set_active(np.flatnonzero(self.active_mask))
        self._gaps, self._unshrunk = list(s["gaps"]), bool(s["unshrunk"])
        self._start = (int(s["n_iter"]), s["gap0"])
        self.stats.values["resumed_at_iter"] = int(s["n_iter"])

    # -- elimination and reconstruction ------------------------------------
    def _trace(self, n_iter: int, gap: float) -> None:
        tr = self.stats.traces
        tr["iter"].append(n_iter)
        tr["gap"].append(float(gap))
        tr["active"].append(int(self.active_rows.size))

    def _eliminate(self, m: float, M: float) -> None:
        """Drop the rows the policy's rule selects, keeping ``active_rows`` sorted."""
        with self.stats.timer("reconstruct"):
            self._flush_g_bar()  # rows eliminated earlier; the new ones are up to date
        with self.stats.timer("select"):
            rows = self.active_rows
            n_keep = eliminate_rows(
                rows, self.y, self.alpha, self.C, self.G, m, M, self.streak,
                self.policy.need, self._scratch,
            )  # fmt: skip
            if n_keep < rows.size:
                self.active_mask[self._scratch[n_keep : rows.size]] = False
                self.stats.add("n_eliminated", rows.size - n_keep)
                self._set_active(self._scratch[:n_keep].copy())

    def _set_active(self, rows: np.ndarray) -> None:
        """The sorted active rows (``active_mask`` already says the same)."""
        self.active_rows = rows
        self.active_nnz = int(self.row_nnz[rows].sum())

    def _can_reconstruct(self) -> bool:
        """Whether any rank has eliminated rows that a reconstruction could revive."""
        return self.keep_g_bar and self.eliminated_any_global()

    def _thresholds_crossed(self, gap: float) -> bool:
        """'multi' reconstruction points and LIBSVM's single unshrink, crossed now."""
        tol = self.cfg.tol
        hit = False
        while self._gaps and gap < self._gaps[0] * tol:
            self._gaps.pop(0)
            hit = True
        return hit and self.eliminated_any_global()

    def eliminated_any_global(self) -> bool:
        return bool(self.comm.max_(int(self.active_rows.size < self.y.size)))

    def _unshrink_due(self, gap: float) -> bool:
        u = self.policy.unshrink_gap
        if u is not None and not self._unshrunk and gap <= u * self.cfg.tol:
            self._unshrunk = True
            return True
        return False

    def _reconstruct(self, all_rows: bool) -> tuple[float, tuple]:
        """Rebuild G of eliminated rows, then revive every violator (or every row).

        Returns the gap m - M over all rows and the local candidates over the new
        active set.
        """
        st = self.stats
        with st.timer("reconstruct"):
            st.add("n_reconstruct")
            self._flush_g_bar()
            out = np.flatnonzero(~self.active_mask)
            free = np.flatnonzero((self.alpha > 0) & (self.alpha < self.C))
            F = gather_rows(self.comm, self._local_rows(free))
            f_coef = self.comm.allgatherv(self.y[free] * self.alpha[free])
            fi, fx, fd = csr_arrays(F)
            f_sq = row_sq_norms(fi, fd, np.empty(F.shape[0]))
            add_kernel_sums(
                fi, fx, fd, f_sq, f_coef, self.indptr, self.indices, self.data, self.sq,
                self.y, self.G_bar, -1.0, out, self.work.size, *self.kparams, self.G,
            )  # fmt: skip
            m, _, minus_M, _ = select_candidates(self.all_rows, self.y, self.alpha, self.C, self.G)
            m, minus_M = self.comm.max_(np.array([m, minus_M]))
            n_bad = violators(out, self.y, self.alpha, self.C, self.G, m, -minus_M, self._scratch)
            st.add("n_false_positive", n_bad)  # eliminated rows that violate after all
            back = out if all_rows else self._scratch[:n_bad].copy()
            if back.size:
                self.active_mask[back] = True
                self.streak[back] = 0
                self._set_active(np.flatnonzero(self.active_mask))
                self.cache.revive(back)
            cand = select_candidates(self.active_rows, self.y, self.alpha, self.C, self.G)
        return float(m + minus_M), cand

    def _local_rows(self, rows: np.ndarray) -> sp.csr_matrix:
        return sp.csr_matrix((self.data, self.indices, self.indptr),
                             shape=(self.y.size, self.work.size - 1))[rows]  # fmt: skip

    def _step(self, p_i: np.ndarray, p_j: np.ndarray, col_i: np.ndarray) -> tuple:
        """The two-variable update, identical on every rank, then local gradient updates.

        Returns the local candidates of the next iteration (found in the same pass).
        """
        K_ij = self._kernel_ij(p_i, p_j)
        y_i, y_j = p_i[Y], p_j[Y]
        old_i, old_j, C_i, C_j = p_i[ALPHA], p_j[ALPHA], p_i[CAP], p_j[CAP]
        a_i, a_j = two_variable_step(
            y_i, y_j, old_i, old_j, p_i[GRAD], p_j[GRAD], C_i, C_j, p_i[DIAG], p_j[DIAG], K_ij
        )
        col_j = self._column(p_j, 1)  # LRU keeps col_i: at least two columns fit
        with self.stats.timer("update"):
            for p, new in ((p_i, a_i), (p_j, a_j)):
                lidx = int(p[GIDX]) - self.offset
                if 0 <= lidx < self.y.size:
                    self.alpha[lidx] = new
            cand = update_gradient_and_select(
                self.active_rows, self.y, self.alpha, self.C, self.G, col_i, col_j,
                y_i * (a_i - old_i), y_j * (a_j - old_j),
            )  # fmt: skip
            if self.keep_g_bar:
                self._update_g_bar(p_i, old_i, a_i, col_i, 0)
                self._update_g_bar(p_j, old_j, a_j, col_j, 1)
        return cand

    def _update_g_bar(self, p, old: float, new: float, col: np.ndarray, slot: int) -> None:
        """A bound change: G_bar of active rows now, of eliminated rows at the next flush."""
        was_upper, is_upper = old >= p[CAP], new >= p[CAP]
        if was_upper == is_upper:
            return
        c = (-1.0 if was_upper else 1.0) * p[CAP] * p[Y]
        update_gradient_bar(self.active_rows, self.y, self.G_bar, col, c)
        if self.active_rows.size < self.y.size:
            self.pending.record(int(p[GIDX]), c, *self._row(p, slot), p[SQ])

    def _flush_g_bar(self) -> None:
        """Bring G_bar of the eliminated rows up to date (local; no communication)."""
        if not self.pending.coef:
            return  # nothing logged: skip the O(n) scan (earliest checks every iteration)
        out = np.flatnonzero(~self.active_mask)
        self.pending.flush(
            out, self.indptr, self.indices, self.data, self.sq, self.y, self.work.size,
            self.kparams, self.G_bar,
        )  # fmt: skip

    def _rho(self, rows: np.ndarray) -> float:
        """LIBSVM's bias: mean of y_t G_t over free vectors, else the midpoint."""
        ub, lb, s, nf = bias_terms(rows, self.y, self.alpha, self.C, self.G)
        ub, lb = self.comm.min_(ub), self.comm.max_(lb)
        s, nf = self.comm.sum_(np.array([s, float(nf)]))
        return float(s / nf) if nf > 0 else float((ub + lb) / 2)
