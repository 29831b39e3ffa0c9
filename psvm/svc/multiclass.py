"""One-vs-one C-SVC and nu-SVC over a sharded data set, as LIBSVM's svm_train does it.

Each class pair is a binary problem over the ranks' rows of those two
classes (still sharded, global order kept by an exscan of local counts), or,
when the pairs are dealt out (:mod:`psvm.svc.pairs`), over all its rows on the
one rank that solves it. The support vectors are then gathered in global row
order and grouped by class, so every rank ends with the same
:class:`~psvm.model.SVCModel` (:func:`psvm.svc.training.gathered_model`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import replace
from functools import partial
from threading import Event
from typing import NamedTuple

import numpy as np

from psvm.kernels import csr_arrays, take_rows
from psvm.model import SVCModel
from psvm.stats import Stats
from psvm.svc.checkpoint import CheckpointConfig
from psvm.svc.pairs import deal, dealt_pairs, pair_sizes, pair_workers, solved_pairs, spread
from psvm.svc.problem import BinaryProblem, BinaryResult
from psvm.svc.solver import Solver
from psvm.svc.state import fill_start, scatter_pair, start_total
from psvm.svc.training import (
    NU_BOUND,
    OVERFLOW,
    TrainingError,
    check_finite,
    check_nu_margin,
    gathered_model,
    kernel_facts,
    open_checkpoint,
    pair_summary,
    solver_config,
    solver_rows,
)


def _prefixed(log: Callable[[str], None], prefix: str, message: str) -> None:
    log(f"{prefix}  {message}")


# LIBSVM checks nu on the whole set only, and trains such a fold to a model without a threshold
FOLD_NU = " on the training rows of a fold; lower nu"


def check_nu_feasible(
    comm, nu: float, C_row: np.ndarray, cls: np.ndarray, k: int, where: str = ""
) -> None:
    """LIBSVM's svm_check_parameter for nu-SVC: every class pair needs
    nu (n_a + n_b) / 2 <= min(n_a, n_b) (n: the classes' summed bounds; collective)."""
    n = [comm.exact_sum(C_row[cls == c]) for c in range(k)]
    for a in range(k):
        for b in range(a + 1, k):
            if nu * (n[a] + n[b]) / 2 > min(n[a], n[b]):
                raise TrainingError(f"specified nu is infeasible{where}")


def nu_start(comm, problem: BinaryProblem, nu: float, weighted: bool) -> None:
    """solve_nu_svc's start: each class filled in global order up to nu l / 2 (weighted:
    half of scikit-learn's sum of nu C_t); p = 0 (collective)."""
    total = start_total(comm, problem.C, nu, problem.n_samples, weighted)
    alpha = np.zeros(problem.y.size)
    for sign in (1.0, -1.0):
        side = problem.y == sign
        alpha[side] = fill_start(comm, problem.C[side], total / 2)
    problem.alpha0, problem.p = alpha, np.zeros(problem.y.size)


def fit_ovo(
    comm,
    shard,
    params: dict,
    classes: np.ndarray,
    *,
    sample_weight: np.ndarray | None = None,
    stats: Stats | None = None,
    log: Callable[[str], None] | None = None,
    checkpoint: CheckpointConfig | None = None,
    alpha0: np.ndarray | None = None,
    fold: bool = False,
    cancel: Event | None = None,
) -> tuple[SVCModel, np.ndarray]:
    """Train one-vs-one C-SVC on a shard; collective, same model on every rank.

    Returns the model and the global row indices of its support vectors.

    ``classes`` fixes the class order (LIBSVM: first appearance; sklearn: sorted).
    ``params`` are validated parameters (:func:`psvm._params.validate_svc_params`).
    ``checkpoint`` saves the solver state now and then and, to resume, reads it
    back (:mod:`psvm.svc.checkpoint`). ``alpha0`` (C-SVC): a feasible start, y alpha over
    the shard's rows in ``dual_coef``'s layout (k - 1 rows: pair (a, b)'s class a in row
    b - 1, class b in row a); default 0. ``fold``: the training rows of a fold (``-v``,
    ``-b 1``), for nu-SVC's error when its nu is infeasible there. ``cancel``: set, the fit
    stops at its next engine return (a fit on a thread of :mod:`psvm.svc.pairs`). Under
    mpiexec the pairs may be dealt out to the ranks, each solved whole by one
    (:func:`psvm.svc.pairs.deal`).
    """
    stats = Stats() if stats is None else stats
    k = len(classes)
    if k < 2:
        raise TrainingError(f"training data has only one class (label {classes[0]:g})")
    cfg = solver_config(comm, shard, params)
    cls = np.full(shard.y.size, -1, dtype=np.int64)
    for c, label in enumerate(classes):
        cls[shard.y == label] = c
    C_row = _row_bounds(comm, cfg, classes, cls, sample_weight, fold)
    pairs = list(itertools.combinations(range(k), 2))
    owner = None
    if checkpoint is None and alpha0 is None and len(pairs) > 1 and comm.size > 1:
        owner = deal(comm, pair_sizes(comm, cls, C_row > 0, pairs), shard)
    run = comm  # the pairs' communicator: each rank alone when they are dealt out
    if owner is not None:  # every rank gets all rows (the bits of one process)
        shard, cls, C_row, run = spread(comm, shard, cls, C_row)
    Xc, X = solver_rows(run, shard.X, cfg.kernel)
    ck = open_checkpoint(comm, checkpoint, shard, C_row, cfg, classes, params["gamma"])
    resumed = 0 if ck is None else len(ck.finished)  # pairs the checkpoint holds solved
    fit = _Fit(log, alpha0, sample_weight is not None, cancel, owner is not None, fold)
    plan = _Pairs(run, shard, cfg, Xc, cls, C_row, pairs, ck, fit)
    results = _PairResults(cls.size, k, plan.nu)
    # closed on any error here too (Ctrl-C included): the pairs still running stop now
    with closing(_solved(comm, plan, owner, stats, log)) as solved:
        for pair, (res, lines) in solved:
            results.add(res, *plan.rows(pair), *pairs[pair])
            for line in lines if log is not None else ():
                log(line)
    meta = {**results.meta(), "heuristic": cfg.heuristic, "reconstruction": cfg.reconstruction}
    fitted = gathered_model(
        run, shard, cfg, X, results.is_sv, results.coef, results.rho, meta, classes, cls
    )
    if ck is not None and ck.cfg.at_end and len(ck.finished) > resumed:  # every pair solved,
        ck.save(len(pairs), {}, {})  # no solver state; last: what follows is the caller's
    return fitted


def _solved(comm, plan: _Pairs, owner: np.ndarray | None, stats: Stats, log) -> Iterator:
    """(pair, (its result, LIBSVM's lines after it)) in pair order: solved on this
    communicator, or, given each pair's ``owner``, dealt out to the ranks (collective)."""
    n_pairs = len(plan.pairs)
    if owner is None:
        workers = pair_workers(comm, plan.ck, n_pairs)
        return solved_pairs(n_pairs, plan.prepare, plan.solve, stats, workers)
    workers = pair_workers(plan.run, None, int(np.count_nonzero(owner == comm.rank)))
    shows = comm.bcast_obj(log is not None)  # (rank 0 logs: its pairs' progress live)
    live = log if comm.rank == 0 else None  # (the others' lines go to rank 0)
    return dealt_pairs(comm, owner, plan.prepare, plan.solve, stats, workers, shows, live)


_FIT_LOG = object()  # a pair's progress lines go to the fit's log


class _Fit(NamedTuple):
    """What fit_ovo's pairs read of its arguments."""

    log: Callable[[str], None] | None
    alpha0: np.ndarray | None  # a start, in dual_coef's layout
    weighted: bool  # sample weights given (nu-SVC's start)
    cancel: Event | None
    dealt: bool  # the pairs dealt out to the ranks
    fold: bool  # a fold's training rows (said in errors)


class _Pairs:
    """fit_ovo's class pairs on communicator ``run``: each one's rows and problem
    (:meth:`prepare`) and its solve (:meth:`solve`), as :mod:`psvm.svc.pairs` runs them.
    Collective: the rows' kernel facts are agreed on making it."""

    def __init__(self, run, shard, cfg, Xc, cls, C_row, pairs, ck, fit: _Fit):
        self.run, self.max_row_nnz, self.cfg, self.Xc = run, shard.max_row_nnz, cfg, Xc
        self.cls, self.C_row, self.pairs, self.ck, self.fit = cls, C_row, pairs, ck, fit
        self.nu = cfg.svm_type == "nu_svc"
        self.arrays = csr_arrays(Xc)
        self.facts = kernel_facts(run, cfg, self.arrays)  # once for every pair
        self.bounded = C_row > 0  # rows of zero weight are left out
        # a prepared pair's (rows, first), for its result; none when the pairs are dealt out
        # (a rank prepares all its pairs before any result)
        self._kept = None if fit.dealt else {}

    def members(self, pair: int) -> tuple[np.ndarray, np.ndarray]:
        """Pair (a, b)'s rows (those with C_t > 0) and which of them are class a."""
        a, b = self.pairs[pair]
        cls = self.cls
        rows = (((cls == a) | (cls == b)) & self.bounded).nonzero()[0]
        return rows, cls[rows] == a

    def rows(self, pair: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`members`, kept from :meth:`prepare` if the pairs are not dealt out."""
        kept = None if self._kept is None else self._kept.pop(pair, None)
        return kept or self.members(pair)

    def prepare(self, pair: int) -> BinaryProblem:
        """The pair's problem (collective under ``run``)."""
        rows, first = self.members(pair)
        if self._kept is not None:
            self._kept[pair] = rows, first
        problem = self._problem(rows, first)
        if self.nu:
            nu_start(self.run, problem, self.cfg.nu, self.fit.weighted)
        elif self.fit.alpha0 is not None:
            a, b = self.pairs[pair]
            alpha0 = self.fit.alpha0
            problem.alpha0 = np.abs(np.where(first, alpha0[b - 1, rows], alpha0[a, rows]))
        return problem

    def _problem(self, rows: np.ndarray, first: np.ndarray) -> BinaryProblem:
        every = rows.size == self.cls.size  # (two classes: the shard itself, not a copy)
        facts, comm = self.facts, self.run
        sq, diag = facts["sq"], facts["diag"]
        return BinaryProblem(
            X=self.arrays if every else take_rows(*self.arrays, rows),
            n_features=self.Xc.shape[1],
            y=np.where(first, 1.0, -1.0),
            C=self.C_row[rows],
            offset=comm.exscan_sum(rows.size),
            n_samples=comm.sum_(int(rows.size)),
            max_row_nnz=self.max_row_nnz,
            sq=sq if every or sq is None else sq[rows],
            diag=diag if every or diag is None else diag[rows],
            exact32=facts["exact32"],
            integral=facts["integral"],
            sq_max=facts["sq_max"],
        )

    def solve(self, pair, problem, pair_stats, stop, workers: int, log=_FIT_LOG) -> tuple:
        """The pair's result and LIBSVM's lines after it (collective under ``run``: every
        rank makes them if any logs)."""
        log = self.fit.log if log is _FIT_LOG else log
        cfg = self.cfg
        if workers > 1:
            cfg = replace(cfg, cache_size=cfg.cache_size / workers)
        stop = self.fit.cancel if stop is None else stop
        res = self._result(pair, problem, cfg, pair_stats, log, stop)
        if log is None and self.run.size == 1:
            return res, []
        scale = _scale(res, self.nu)
        shown = replace(res, rho=res.rho * scale, objective=res.objective * scale * scale)
        note = f"C = {scale:f}" if self.nu else None
        return res, [pair_summary(self.run, problem, shown, note=note)]

    def _result(self, pair: int, problem, cfg, stats, log, cancel) -> BinaryResult:
        """Class pair ``pair``'s result: from the checkpoint if it finished there, else solved
        (and recorded in the checkpoint)."""
        ck, n_pairs = self.ck, len(self.pairs)
        done = None if ck is None else ck.finished_pair(pair, problem.offset, problem.y.size)
        if done is not None:
            return BinaryResult(**done)
        name = f"pair {pair + 1}/{n_pairs}"  # in the progress lines, if more than one
        pair_log = log if log is None or n_pairs == 1 else partial(_prefixed, log, name)
        res = Solver(self.run, problem, cfg, stats, pair_log, ck, pair, cancel).solve()
        where = f"in class pair {pair + 1} of {n_pairs}"
        where += " of a fold's training rows" if self.fit.fold else ""
        check_finite(res, where, NU_BOUND if self.nu else OVERFLOW)
        if self.nu:
            check_nu_margin(res, where)
        if ck is not None:
            scalars = {k: v for k, v in vars(res).items() if k != "alpha"}
            ck.pair_solved(pair, res.alpha, scalars)
        return res


def _scale(res: BinaryResult, nu: bool) -> float:
    """A pair's scale: nu-SVC's 1 / r, as LIBSVM's solve_nu_svc (alpha y / r, rho / r,
    objective / r^2), else 1."""
    return 1.0 / res.r if nu else 1.0


class _PairResults:
    """The class pairs' results, gathered into the model's layout: support vector flags,
    ``dual_coef`` (pair (a, b)'s class a in row b - 1, class b in row a), rho, and the
    statistics of each pair."""

    def __init__(self, n: int, k: int, nu: bool):
        self.nu = nu
        self.is_sv = np.zeros(n, dtype=bool)
        self.coef = np.zeros((k - 1, n))
        self.rho, self.r, self.n_iter, self.objective = [], [], [], []
        self.status, self.approximate = 0, False

    def add(self, res: BinaryResult, rows, first, a: int, b: int) -> None:
        """Record pair (a, b)'s result over its ``rows`` (``first``: of class a), scaled for
        nu-SVC (:func:`_scale`)."""
        scale = _scale(res, self.nu)
        scatter_pair(self.is_sv, self.coef, rows, first, res.alpha, scale, a, b)
        self.rho.append(res.rho * scale)
        self.r.append(res.r)
        self.n_iter.append(res.n_iter)
        self.objective.append(res.objective * scale * scale)
        self.status = max(self.status, res.status)
        self.approximate |= res.approximate

    def meta(self) -> dict:
        return {
            "n_iter": self.n_iter,
            "objective": self.objective,  # nu-SVC: LIBSVM's, over r^2
            **({"r": self.r} if self.nu else {}),
            "status": self.status,
            "approximate": self.approximate,
        }


def _row_bounds(comm, cfg, classes, cls, sample_weight, fold: bool) -> np.ndarray:
    """Each row's upper bound C_t: C times its class weight and sample weight; nu-SVC: 1
    (times the sample weight), as LIBSVM's solve_nu_svc, after its feasibility check."""
    if cfg.svm_type == "nu_svc":
        C_row = np.ones(cls.size) if sample_weight is None else np.array(sample_weight, float)
        check_nu_feasible(comm, cfg.nu, C_row, cls, len(classes), FOLD_NU if fold else "")
        return C_row
    weight = np.array([cfg.C * cfg.class_weight.get(lab, 1.0) for lab in classes])
    return weight[cls] if sample_weight is None else weight[cls] * sample_weight
