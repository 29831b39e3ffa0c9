"""The distributed SMO solver for one binary C-SVC problem.

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

The iterations run in compiled code (:mod:`psvm.svc.engine`), collectives
included; this class sets up the problem, handles the engine's rare events
(the stop test and reconstruction, window cuts, checkpoints, progress) and
reads the result. :meth:`Solver.solve` reads like LIBSVM's ``Solver::Solve``.

The window (:class:`~psvm.svc.window.Window`). The per-row state the loop touches
(y, alpha, C, G, the kernel diagonal, the active flags) is kept in compact window
arrays, so every pass is contiguous and vectorised. The window holds the active rows
and the rows eliminated since the last cut (whose G is still updated, so stays exact).
When the active rows fall to ``RELAYOUT`` of the window (counted over all
ranks, so the same iteration for every P) the window is cut to them; the rows
that leave go *stale* with an exact G, and reconstruction brings them up to
date with the variables that changed since (:mod:`psvm.svc.reconstruct`).
At a cut, when the ranks' new windows are uneven, the ranks deal their rows out
again and lend rows to each other; the lent rows go home before anything needs
their owner's state (:mod:`psvm.svc.balance`, :mod:`psvm.svc.lending`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from functools import partial

import numpy as np

from psvm._params import FIRST_ORDER, SVCConfig
from psvm.comm.compiled import CLOCK_FN
from psvm.comm.process import Terminated
from psvm.jit import compile_first_on_one_rank
from psvm.kernels import take_rows
from psvm.kernels.csr import stack_rows
from psvm.stats import Stats
from psvm.svc import engine as E
from psvm.svc import engine_nu, serial
from psvm.svc.cache import ColumnCache
from psvm.svc.checkpoint import Checkpoint
from psvm.svc.columns import LocalKernel
from psvm.svc.elimination import MULTI_GAPS, make_policy
from psvm.svc.lending import Lending
from psvm.svc.packets import BLOCK, RECV1, ROW, SEND1, SEND2
from psvm.svc.problem import BinaryProblem, BinaryResult
from psvm.svc.reconstruct import Departures, Reconstruction
from psvm.svc.resume import Resumable
from psvm.svc.state import filled, rho_and_r
from psvm.svc.traces import TRACE_POINTS, TRACE_TYPES, add_solve
from psvm.svc.window import Window

MAX_DEPARTURES = 16  # alpha snapshots kept for stale rows before they are brought up to date
RELAYOUT = 0.75  # cut the window to the active rows when they are this share of it or less
# one process reads the columns of a window of at most this many kernel rows from a block
# (:func:`psvm.svc.serial._serial_column`): 128 KB at most
BLOCK_ROWS = 128
_NO_BLOCK = np.zeros((0, 0)), np.zeros(0, dtype=bool)
PROGRESS_SECONDS = 5.0  # between two progress lines
CALL_SECONDS = 0.05  # an engine call's budget grows until a call takes about this long
FIRST_CALL_ROWS = 10**7  # the first engine call's iterations times the variables, about
_add_solve = add_solve  # (the statistics' records in pickles made before traces.py)
NO_LIMIT = np.iinfo(np.int64).max  # (np.iinfo costs microseconds a call)


def max_iterations(max_iter: int | None, n: int) -> int:
    """The iteration limit of a problem of n variables: ``max_iter``; none for -1
    (scikit-learn's); svm-train's max(10^7, 100 n) for None (psvm-train's default)."""
    if max_iter is None:
        return max(10_000_000, 100 * n)
    return max_iter if max_iter >= 0 else NO_LIMIT


def first_budget(n: int) -> int:
    """The first engine call's iteration budget: about 10 ms of work, at least 1000
    iterations (small problems: fewer calls into the engine, each with its Python around)."""
    return int(min(1 << 16, max(1000, FIRST_CALL_ROWS // max(n, 1))))


class Cancelled(Exception):
    """A solve stopped because the fit ended (another pair's error, Ctrl-C)."""


class Solver(Lending, Reconstruction, Resumable):
    """SMO over a sharded binary problem; see the module docstring. Its parts in modules of
    their own: lent rows (:mod:`psvm.svc.lending`), reconstruction
    (:mod:`psvm.svc.reconstruct`), the state in a checkpoint (:mod:`psvm.svc.resume`)."""

    def __init__(
        self,
        comm,
        problem: BinaryProblem,
        config: SVCConfig,
        stats: Stats | None = None,
        log: Callable[[str], None] | None = None,
        checkpoint: Checkpoint | None = None,
        pair: int = 0,
        cancel: threading.Event | None = None,
    ):
        self.comm, self.cfg = comm, config
        self.cancel = cancel  # set: stop at the next engine return (:mod:`psvm.svc.pairs`)
        # LIBSVM's Solver_NU: selection, stop test, elimination and rho per sign of y
        self.nu = config.svm_type in ("nu_svc", "nu_svr")
        self.stats = Stats() if stats is None else stats
        self.log = log
        self.offset, self.n_samples = problem.offset, problem.n_samples
        kp = (config.kernel_id, config.gamma, config.coef0, config.degree)
        self.K = LocalKernel.of_arrays(
            *problem.X,
            problem.n_features,
            kp,
            problem.sq,
            problem.diag,
            problem.exact32,
            problem.integral,
            problem.sq_max,
        )
        self._init_state(problem)
        self._init_elimination(config)
        self.cache = ColumnCache(self.K.n, self.n_samples, config.cache_size)  # keyed by row
        self._init_buffers(problem)
        self.checkpoint, self.pair = checkpoint, pair
        self._controls(config)
        self._set_window(np.arange(self.y.size, dtype=np.int64))
        state = None
        if checkpoint is not None:
            state = checkpoint.solver_state(pair, self.per_row * self.offset, self.y.size)
        if state is not None:
            self._restore({k: self._from_file(v) for k, v in state.items()})
        elif problem.alpha0 is not None:
            self._start_gradient()

    def _init_state(self, problem: BinaryProblem) -> None:
        """The local-order state: every variable's home (the window arrays are its live
        copies)."""
        self.y = np.ascontiguousarray(problem.y, dtype=np.float64)
        self.C = np.ascontiguousarray(problem.C, dtype=np.float64)
        n = self.y.size
        self.per_row, self.n_vars = problem.per_row, problem.n_samples * problem.per_row
        self.row_of = np.arange(n, dtype=np.int64)  # variable -> local row
        if self.per_row > 1:
            self.row_of %= max(self.K.n, 1)
        self.gid = problem.global_index()
        self.QD = self.K.diag[self.row_of]
        self.p = filled(n, -1.0) if problem.p is None else np.asarray(problem.p, dtype=np.float64)
        self.alpha = np.zeros(n) if problem.alpha0 is None else np.array(problem.alpha0, float)
        self.G = self.p.copy()
        self.active = filled(n, True, bool)
        self.streak = np.zeros(n, dtype=np.int64)
        self.in_window = filled(n, True, bool)
        self.grow = self.offset + np.arange(self.K.n)  # local row -> global row (cache key)
        # rows lent across ranks (:mod:`psvm.svc.lending`): the ranks' deal while rows are
        # lent, the own variables lent out (in global order), the rows borrowed (sparse rows,
        # norms, diagonal; local rows past the own ones), memory for the state of both
        self.n_own = n
        self._parts: np.ndarray | None = None
        self._lent = np.zeros(0, dtype=np.int64)
        self._borrowed: tuple | None = None
        self._store: dict | None = None

    def _init_elimination(self, config: SVCConfig) -> None:
        """The policy, the stale rows' departures, and the gaps that trigger a reconstruction."""
        self.policy = make_policy(config.heuristic)
        # whether stale rows are ever brought up to date ('approximate': never)
        self.exact = self.policy.active and config.reconstruction != "approximate"
        self.departures = Departures(self.y.size)
        self._unshrunk = False
        multi = config.reconstruction == "multi" and self.policy.active
        self._gaps = sorted(
            set(MULTI_GAPS if multi else ())
            | ({self.policy.unshrink_gap} if self.policy.unshrink_gap and self.exact else set()),
            reverse=True,
        )

    def _init_buffers(self, problem: BinaryProblem) -> None:
        """The collectives' packets and the selection passes' scratch."""
        n = self.y.size
        self.row_width = max(problem.max_row_nnz, 1)
        self.packet_size = size = ROW + 2 * self.row_width
        self.info_at = (4 if self.nu else 2) * size  # round 1's packets, then its INFO block
        self.bufs = (
            np.zeros(self.info_at + E.INFO),
            np.zeros((self.comm.size, self.info_at + E.INFO)),
            np.zeros(size),
            np.zeros((self.comm.size, size)),
            np.zeros(self.row_width, dtype=np.int32),  # a packet row's indices, as ints
            np.empty(n),  # a column's rows that rejoined the window
            *_NO_BLOCK,  # a small window's columns (:meth:`_block`)
        )
        self._block_memory: np.ndarray | None = None
        self._up, self._low = np.empty(n), np.empty(n)  # scratch of the selection passes
        self._obj = np.empty(n)
        self._dense_lent = False  # a window's dense copy overwrote the shard's (_set_window)

    def _controls(self, cfg: SVCConfig) -> None:
        """The engine's control arrays: settings, the policy as integers, counters, traces."""
        ci = self.ctl_i = np.zeros(E.N_CTL_I, dtype=np.int64)
        cf = self.ctl_f = np.zeros(E.N_CTL_F)
        policy = self.policy
        n = self.n_vars
        ci[E.MAX_ITER_] = max_iterations(cfg.max_iter, n)
        ci[E.ITER_BUDGET] = first_budget(self.n_samples * self.per_row)
        ci[E.FIRST_ORDER] = cfg.selection_id == FIRST_ORDER and not self.nu  # NU: second only
        ci[E.PERIOD], ci[E.NEED], ci[E.READY] = policy.period(n), policy.need, policy.readiness
        ci[E.START], ci[E.PER_ROW] = policy.start(n), self.per_row
        ci[E.N_SAMPLES], ci[E.ROW_WIDTH] = n, self.row_width
        ci[E.CK_ITERS] = 0 if self.checkpoint is None else self.checkpoint.cfg.iters
        ci[E.CLOCK_DONE], ci[E.LAST_TRACE] = 0, -1  # no checkpoint at the starting iteration
        ci[E.TRACE_EVERY] = max(1, min(100, n // 20))
        ci[E.RANK], ci[E.CLOCK_FN] = self.comm.rank, CLOCK_FN
        cf[E.TOL], cf[E.GAP0], cf[E.THETA], cf[E.RELAYOUT] = cfg.tol, np.nan, policy.theta, RELAYOUT
        self.out = np.zeros(E.N_OUT)
        self.counts = np.zeros(E.N_COUNTS, dtype=np.int64)
        self.timers = np.zeros(E.N_TIMERS)
        self._ts = np.zeros(2, dtype=np.int64)
        # the engine's trace samples, across its calls (then :meth:`_record`)
        self.trace = tuple(np.empty(TRACE_POINTS + 1, dtype=t) for t in TRACE_TYPES)
        self._ran_out = self._slow = False  # the last engine call's: ran out of its budget, slow
        self._engine_seconds = 0.0  # in engine calls (bounds the sampled timers' sum)

    # -- the window --------------------------------------------------------
    def _set_window(self, rows: np.ndarray) -> None:
        """Make ``rows`` (sorted local variables, or with borrowed rows in global order; with two
        per row, both of each row) the window (:class:`~psvm.svc.window.Window`)."""
        # every own variable, in order: the window's arrays are the local ones
        full = rows.size == self.y.size and self._borrowed is None
        self.in_window[:] = full
        if not full:
            self.in_window[rows] = True
        kernel, vrow, keys = self._window_kernel(rows, full)
        self.window = Window(self, rows, full, kernel, vrow, keys, (self._up, self._low, self._obj))
        self._count_active()
        self.bufs = (*self.bufs[:BLOCK], *self._block(kernel.n))

    def _block(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """A window of n kernel rows: the block for its columns and its flags
        (:func:`psvm.svc.serial._serial_column`). ``run_serial`` alone reads one, and only
        when the cache, laid out for the window, holds all its columns: then the cache evicts
        none and the counts of hits and misses are the same with the block. Its memory serves
        the smaller windows after it (new memory is new pages at each cut)."""
        if self._engine() is not serial.run_serial or n > BLOCK_ROWS or not self.cache.holds(n):
            return _NO_BLOCK
        if self._block_memory is None or self._block_memory.size < n * n:
            self._block_memory = np.empty(n * n)
        return self._block_memory[: n * n].reshape(n, n), np.zeros(n, dtype=bool)

    def _engine(self):
        """The compiled loop: per sign of y (the nu types), one process's, or the packets'."""
        return engine_nu.run_nu if self.nu else serial.run_serial if self.comm.size == 1 else E.run

    def _window_kernel(self, rows: np.ndarray, full: bool) -> tuple:
        """The kernel over the window's rows, each once (an SVR window's two halves read one
        column, as LIBSVM's ``SVR_Q``), each variable's row in it, and the rows' cache keys."""
        if full:
            if self._dense_lent:
                self.K.rebuild_dense()
                self._dense_lent = False
            return self.K, self.row_of, self.grow
        # the shard's dense copy is only read through a full window: lend its memory
        k_rows = self.row_of[rows[: rows.size // self.per_row]]
        memory = None if self.K.XT is None else self.K.XT.reshape(-1)
        kernel = LocalKernel.of_csr(self.K, *self._rows(k_rows), memory)
        self._dense_lent = memory is not None
        vrow = np.arange(k_rows.size)
        if self.per_row > 1:  # (np.tile costs 3 µs a cut even for one copy)
            vrow = np.tile(vrow, self.per_row)
        return kernel, vrow, self.grow[k_rows]

    def _rows(self, k_rows: np.ndarray) -> tuple[tuple, np.ndarray, np.ndarray]:
        """The sparse rows, norms and diagonal of local rows ``k_rows``: own rows, and
        borrowed ones (past the own: a block before them and one after, in global order)."""
        K, b = self.K, self._borrowed
        own = (K.indptr, K.indices, K.data), K.sq, K.diag
        if b is None or not k_rows.size:
            return take_rows(*own[0], k_rows), K.sq[k_rows], K.diag[k_rows]
        blocks = []
        for m in np.split(k_rows, np.flatnonzero(np.diff(k_rows < K.n)) + 1):
            (csr, sq, diag), m = (own, m) if m[0] < K.n else (b, m - K.n)
            blocks.append((take_rows(*csr, m), sq[m], diag[m]))
        csr, sq, diag = zip(*blocks, strict=True)
        return stack_rows(csr), np.concatenate(sq), np.concatenate(diag)

    def _pairs(self, mask: np.ndarray) -> np.ndarray:
        """``mask`` (over local variables or window positions) closed over rows: with two
        variables per row, a row's both variables when either is set."""
        if self.per_row == 1:
            return mask
        h = mask.size // 2
        row = mask[:h] | mask[h:]
        return np.concatenate((row, row))

    def _count_active(self) -> None:
        """The engine's counts of the window's active variables and of those a cut keeps."""
        act = self.window.active
        n = self.ctl_i[E.N_ACTIVE] = np.count_nonzero(act)
        self.ctl_i[E.N_KEEP] = n if self.per_row == 1 else np.count_nonzero(self._pairs(act))

    @property
    def n_active(self) -> int:
        return int(self.ctl_i[E.N_ACTIVE])

    def _sync(self) -> None:
        """Write the window's live state back to local order."""
        self.window.sync(self)

    def _relayout(self, rows: np.ndarray, old: np.ndarray | None = None) -> None:
        """Make ``rows`` the window (state synced first); cached columns move with it.
        ``old``: each new variable's position in the window before (default: the window's)."""
        old = self.window.pos[rows] if old is None else old
        self.cache.relayout(old[: rows.size // self.per_row])  # by kernel row
        self._set_window(rows)
        self.stats.add("n_relayout")

    def _shrink_window(self) -> None:
        """Cut the window to its active rows; the others go stale with an exact G. Then the
        ranks deal their windows' rows out again if they are uneven (collective)."""
        self._sync()
        old = self._home(relayout=False)  # lent rows are cut or kept by their owners
        members = np.flatnonzero(self.in_window)
        keep = self._pairs(self.active[members])
        if self.exact:
            if len(self.departures) >= MAX_DEPARTURES:  # bounds the snapshots' memory
                with self.stats.timer("reconstruct"):
                    self._refresh_stale()
            self.departures.leave(members[~keep], self.alpha)
        with self.stats.timer("cut"):  # the new window's arrays and kernel, the cache's layout
            self._relayout(*self._lend(members[keep], old))

    # -- the loop ----------------------------------------------------------
    def solve(self) -> BinaryResult:
        """Iterate to the stop test (or ``max_iter``); the result's rho and objective."""
        cfg, status = self.cfg, 0
        self._t_start = self._last_progress = time.perf_counter()
        # Ctrl-C: every rank stops at one call; SIGTERM: after saving the checkpoint there
        with self.comm.deferred_interrupts(alone=self.checkpoint is not None):
            while True:
                event = self._run()
                gap = float(self.out[E.GAP_OUT])
                if event == E.CUT:
                    self._shrink_window()
                elif event == E.ALL_BACK:
                    self.departures.clear()  # every row is back in the window
                elif event == E.CLOCK:
                    self._on_clock()
                elif event == E.MAX_ITER:  # as LIBSVM: stale G rebuilt for rho and the objective
                    status = 1
                    if self.exact:
                        self._sync()
                        self._home()
                        with self.stats.timer("reconstruct"):
                            self._refresh_stale()
                    break
                elif event in (E.GAP, E.NO_PAIR):
                    if math.isnan(gap):  # an overflowed kernel: fit_ovo refuses the result
                        break
                    if event == E.GAP and gap >= cfg.tol and not self._thresholds_crossed(gap):
                        continue  # a threshold passed with nothing eliminated
                    if not self._can_reconstruct():
                        break
                    gap = self._reconstruct(all_rows=event == E.GAP and self._unshrink_due(gap))
                    if gap < cfg.tol:
                        break
                elif event == E.MPI_ERROR:
                    raise RuntimeError("MPI_Allgather failed in the solver loop")
        return self._result(status, gap)

    def _run(self) -> int:
        """One engine call. Its budget grows until a call lasts about CALL_SECONDS, on every
        rank alike (no rank's call was slow): every event, BUDGET too, then comes on the
        same iteration everywhere, and the collective check for Ctrl-C stays in step."""
        ci, cf = self.ctl_i, self.ctl_f
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled
        try:
            any_slow = self.comm.check_interrupt(vote=self._slow)
        except Terminated as e:  # (on every rank alike, at this call)
            if self.checkpoint is not None:
                e.checkpoint = int(self.ctl_i[E.N_ITER])
                self._save(e.checkpoint)
            raise
        if self._ran_out and not any_slow:
            ci[E.ITER_BUDGET] = min(2 * ci[E.ITER_BUDGET], 1 << 24)
        cf[E.NEXT_GAP] = self._gaps[0] * self.cfg.tol if self._gaps else -np.inf
        cf[E.DEADLINE], cf[E.PROGRESS_AT] = self._deadlines()
        ci[E.HAS_DEPARTURES] = len(self.departures) > 0
        t0 = time.perf_counter()
        engine = self._engine()
        w = self.window
        args = (
            w.arrays,
            w.loc,
            w.kernel_arrays,
            w.kernel_params,
            self.cache.arrays,
            self.comm.compiled(),
            self.bufs,
            ci,
            cf,
            self.out,
            self.counts,
            self.timers,
            self.trace,
            self._ts,
        )
        compile_first_on_one_rank(self.comm, engine, args)
        t1 = time.perf_counter()
        event = engine(*args)
        self._engine_seconds += time.perf_counter() - t1
        self._ran_out = event == E.BUDGET  # (the same iteration on every rank)
        self._slow = time.perf_counter() - t0 >= CALL_SECONDS / 2
        return event

    def _deadlines(self) -> tuple[float, float]:
        """Rank 0's monotonic times of the next checkpoint and progress line (inf: none)."""
        ck = self.checkpoint
        ck_at = ck.next_save() if ck is not None else np.inf
        return ck_at, self._last_progress + PROGRESS_SECONDS if self.log is not None else np.inf

    def _on_clock(self) -> None:
        """A checkpoint or a progress line is due (every rank, the same iteration)."""
        n_iter = int(self.ctl_i[E.N_ITER])
        self.ctl_i[E.CLOCK_DONE] = n_iter
        flag = int(self.bufs[RECV1][0, self.info_at + E.INFO_CLOCK])
        ck = self.checkpoint
        if ck is not None and ck.due(n_iter, flag & 1):
            self._save(n_iter)
        if self.log is not None and flag & 2:
            self._last_progress = time.perf_counter()
            active = int(self.bufs[RECV1][:, self.info_at + E.INFO_ACTIVE].sum())
            self.log(
                f"iter {n_iter}  m-M {self.out[E.GAP_OUT]:.4g}  active {active}"
                f"  elapsed {self._last_progress - self._t_start:.1f}s"
            )

    def _result(self, status: int, gap: float) -> BinaryResult:
        """Statistics, rho and the objective at the end of the loop."""
        n_iter = int(self.ctl_i[E.N_ITER])
        self._record(n_iter, gap)
        if status:  # max_iter reached (psvm-train warns on stderr, the estimators warn)
            self.stats.add("n_max_iter")
        # 'approximate' leaves stale gradients: LIBSVM's rho uses active rows only
        approximate = self.cfg.reconstruction == "approximate" and self.eliminated_any_global()
        self._sync()
        self._home(relayout=False)  # (no window after the loop: the rows' state only)
        rows = np.flatnonzero(self.active) if approximate else np.arange(self.y.size)
        rho, r = rho_and_r(self.comm, rows, self.y, self.alpha, self.C, self.G, self.nu)
        sv = np.flatnonzero(self.alpha)  # 1/2 a'Qa + p'a = 1/2 sum_t a_t (G_t + p_t)
        obj = 0.5 * self.comm.exact_sum(self.alpha[sv] * (self.G[sv] + self.p[sv]))
        return BinaryResult(self.alpha, rho, obj, float(gap), n_iter, status, approximate, r)

    def _record(self, n_iter: int, gap: float) -> None:
        """The solve's counts; its trace, final state included, and its phase times when the
        statistics are read (:meth:`~psvm.stats.Stats.later`)."""
        st, n = self.stats, int(self.counts[E.C_TRACE])
        st.add("n_iter", n_iter)
        st.add("cache_hits", self.cache.hits)
        st.add("cache_misses", self.cache.misses)
        st.add("n_eliminated", int(self.counts[E.C_ELIMINATED]))
        end = None  # the final state, unless the engine's last sample is it
        if not (n and self.trace[0][n - 1] == n_iter):
            seconds = time.perf_counter() - self._t_start
            end = (n_iter, float(gap), self.n_active, self.cache.misses, seconds)
        samples = [a[:n].copy() for a in self.trace]  # (copies: not the whole buffers kept)
        timed = int(self.counts[E.C_TIMED])
        times = (self.timers.copy(), n_iter, timed, self._engine_seconds)
        st.later(partial(add_solve, samples, self._t_start, end, times))
        if self.comm.size > 1:
            rounds = int(self.counts[E.C_ROUND1]), int(self.counts[E.C_ROUND2])
            nbytes = rounds[0] * self.bufs[SEND1].nbytes + rounds[1] * self.bufs[SEND2].nbytes
            self.comm.record("allgather", sum(rounds), nbytes, float(self.timers[E.T_COMM]))
