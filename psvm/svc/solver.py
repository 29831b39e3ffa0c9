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
their owner's state (:mod:`psvm.svc.balance`).
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
from psvm.gram import PRECOMPUTED
from psvm.jit import compile_first_on_one_rank
from psvm.kernels import take_rows
from psvm.kernels.csr import stack_rows
from psvm.stats import Stats
from psvm.svc import balance, serial
from psvm.svc import engine as E
from psvm.svc.cache import ColumnCache
from psvm.svc.checkpoint import Checkpoint
from psvm.svc.columns import LocalKernel
from psvm.svc.elimination import MULTI_GAPS, make_policy
from psvm.svc.packets import ROW
from psvm.svc.problem import BinaryProblem, BinaryResult
from psvm.svc.reconstruct import Departures, violators
from psvm.svc.select import best_of_sign, bids, candidates
from psvm.svc.state import filled, gather_csr, rho_and_r
from psvm.svc.window import Window

# up to this many kernel values (stale variables x changed rows), one compiled call brings the
# stale rows up to date; past it, the blocked and threaded sums of each departure pay
EPOCH_SUMS_VALUES = 1 << 16
MAX_DEPARTURES = 16  # alpha snapshots kept for stale rows before they are brought up to date
RELAYOUT = 0.75  # cut the window to the active rows when they are this share of it or less
# one process reads the columns of a window of at most this many kernel rows from a block
# (:func:`psvm.svc.serial._serial_column`): 128 KB at most
BLOCK_ROWS = 128
_NO_BLOCK = np.zeros((0, 0)), np.zeros(0, dtype=bool)
PROGRESS_SECONDS = 5.0  # between two progress lines
CALL_SECONDS = 0.05  # an engine call's budget grows until a call takes about this long
# a solve's trace keeps at most this many samples: the engine's buffer holds one more, and
# when that one comes it thins them (:func:`psvm.svc.engine._record`)
TRACE_POINTS = 500
TRACES = ("iter", "gap", "active", "cache_misses", "seconds")
FIRST_CALL_ROWS = 10**7  # the first engine call's iterations times the variables, about
ENGINE_TIMERS = (  # the engine's sampled phase timers, as the statistics name them
    ("select", E.T_SELECT),
    ("kernel", E.T_KERNEL),
    ("update", E.T_UPDATE),
)


def sampled_seconds(timers: np.ndarray, n_iter: int, timed: int, engine_seconds: float) -> dict:
    """The engine's phase times: select, kernel and update sampled on one iteration in
    ``TIMED_EVERY`` and scaled to all ``n_iter`` iterations; comm (the Allgathers) and the
    column fills (misses, columns carried over or completed, added to kernel) timed on every
    call. A stall of the machine in a timed iteration counts ``TIMED_EVERY`` times (a w8a fit
    once read 1.55 s of kernel in 0.89 s of training): the sampled sum is then cut, in
    proportion, to the rest of the engine calls' own time."""
    t = timers.tolist()  # (Python floats: cheaper than numpy scalars on a small solve)
    scale = max(n_iter, 1) / max(timed, 1)
    seconds = {name: t[k] * scale for name, k in ENGINE_TIMERS}
    comm, fills = t[E.T_COMM], t[E.T_FILLS]
    rest, total = max(engine_seconds - comm - fills, 0.0), sum(seconds.values())
    if total > rest:
        seconds = {name: v * rest / total for name, v in seconds.items()}
    seconds["kernel"] += fills
    seconds["comm"] = comm
    return seconds


def _add_solve(
    samples: list, t_start: float, end: tuple | None, times: tuple, seconds: dict, traces: dict
) -> None:
    """A solve's record (:meth:`Solver._record`): its trace samples (the clock from the
    solve's start) and ``end``, the final state if the samples lack it, appended to
    ``traces``; its phase times (:func:`sampled_seconds` of ``times``) added to ``seconds``."""
    samples = [*samples[:-1], samples[-1] - t_start]
    for k, name in enumerate(TRACES):
        trace = traces[name]
        trace.extend(samples[k].tolist())
        if end is not None:
            trace.append(end[k])
    for name, v in sampled_seconds(*times).items():
        seconds[name] += v


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


TRACE_TYPES = (np.int64, float, np.int64, np.int64, float)  # of TRACES' samples


class Cancelled(Exception):
    """A solve stopped because the fit ended (another pair's error, Ctrl-C)."""


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
        # rows lent across ranks (:mod:`psvm.svc.balance`): the ranks' deal while rows are
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

    def _to_file(self, a: np.ndarray) -> np.ndarray:
        """Per-variable values (a row each, or a value each) in row-major order (a row's
        variables together), so the ranks' pieces concatenate in global order for every P
        (checkpoints)."""
        if self.per_row == 1:
            return a
        tail = a.shape[1:]
        return a.reshape(self.per_row, -1, *tail).swapaxes(0, 1).reshape(-1, *tail)

    def _from_file(self, a):
        if self.per_row == 1 or not isinstance(a, np.ndarray) or a.ndim == 0:
            return a
        tail = a.shape[1:]
        return a.reshape(-1, self.per_row, *tail).swapaxes(0, 1).reshape(-1, *tail)

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
        self.bufs = (*self.bufs[:6], *self._block(kernel.n))

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
        return E.run_nu if self.nu else serial.run_serial if self.comm.size == 1 else E.run

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

    # -- lent rows: windows balanced across ranks (:mod:`psvm.svc.balance`) -----------
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
            self.bufs = (*self.bufs[:5], np.empty(n + 2 * k), *self.bufs[6:])

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
        flag = int(self.bufs[1][0, self.info_at + E.INFO_CLOCK])
        ck = self.checkpoint
        if ck is not None and ck.due(n_iter, flag & 1):
            self._save(n_iter)
        if self.log is not None and flag & 2:
            self._last_progress = time.perf_counter()
            active = int(self.bufs[1][:, self.info_at + E.INFO_ACTIVE].sum())
            self.log(
                f"iter {n_iter}  m-M {self.out[E.GAP_OUT]:.4g}  active {active}"
                f"  elapsed {self._last_progress - self._t_start:.1f}s"
            )

    def _result(self, status: int, gap: float) -> BinaryResult:
        """Statistics, rho and the objective at the end of the loop."""
        n_iter = int(self.ctl_i[E.N_ITER])
        self._record(n_iter, gap)
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
        st.later(partial(_add_solve, samples, self._t_start, end, times))
        if self.comm.size > 1:
            rounds = int(self.counts[E.C_ROUND1]), int(self.counts[E.C_ROUND2])
            nbytes = rounds[0] * self.bufs[0].nbytes + rounds[1] * self.bufs[2].nbytes
            self.comm.record("allgather", sum(rounds), nbytes, float(self.timers[E.T_COMM]))

    # -- checkpoints -------------------------------------------------------
    def _save(self, n_iter: int) -> None:
        """Write the state between two iterations (collective)."""
        with self.stats.timer("checkpoint"):
            self._sync()  # (stale rows keep their G and departures: a save changes no value)
            self._home()
            gap0 = float(self.ctl_f[E.GAP0])
            dep = self.departures
            arrays = {
                "alpha": self.alpha,
                "G": self.G,
                "active": self.active.astype(np.int8),
                "streak": self.streak,
                "window": self.in_window.astype(np.int8),
                "epoch": dep.epoch,
            }
            if len(dep):
                arrays["snapshots"] = np.stack(dep.alphas, axis=1)
            scalars = {
                "n_iter": n_iter,
                "gap0": None if np.isnan(gap0) else gap0,
                "gaps": self._gaps,
                "unshrunk": self._unshrunk,
            }
            arrays = {k: self._to_file(v) for k, v in arrays.items()}
            self.checkpoint.save(self.pair, arrays, scalars)
        self.stats.add("n_checkpoint")

    def _restore(self, s: dict) -> None:
        self.alpha[:], self.G[:] = s["alpha"], s["G"]
        self.active[:] = s["active"] != 0
        self.streak[:] = s["streak"]
        self._relayout(np.flatnonzero(self._pairs(s["window"] != 0)))
        if "snapshots" in s:  # the stale rows' departures, as the saving run held them
            self.departures.epoch[:] = s["epoch"]
            self.departures.alphas = [np.array(a) for a in s["snapshots"].T]
        elif s.get("departed"):  # an older file: stale rows saved up to date
            self.departures.reset(np.flatnonzero(~self.in_window), self.alpha)
        self._gaps, self._unshrunk = list(s["gaps"]), bool(s["unshrunk"])
        self.ctl_i[E.N_ITER] = self.ctl_i[E.CLOCK_DONE] = int(s["n_iter"])
        self.ctl_f[E.GAP0] = np.nan if s["gap0"] is None else s["gap0"]
        self.stats.values["resumed_at_iter"] = int(s["n_iter"])

    # -- elimination and reconstruction ------------------------------------
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
