"""One-vs-one C-SVC over a sharded data set, as LIBSVM's svm_train does it.

Each class pair is a binary problem over the ranks' rows of those two
classes (still sharded, global order kept by an exscan of local counts), or,
when the pairs are dealt out (:mod:`psvm.svc.pairs`), over all its rows on the
one rank that solves it. The support vectors are then gathered in global row
order and grouped by class, so every rank ends with the same
:class:`~psvm.model.SVCModel`.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable
from contextlib import closing
from dataclasses import replace
from functools import cache, partial
from threading import Event

import numpy as np
import scipy.sparse as sp

from psvm._params import SVCConfig, make_svc_config
from psvm.gram import serial_rows
from psvm.kernels import (
    arithmetic_probe,
    csr_arrays,
    csr_of,
    is_integral,
    kernel_diag,
    row_sq_norms,
    take_rows,
)
from psvm.model import SVCModel
from psvm.stats import Stats
from psvm.svc.checkpoint import Checkpoint, CheckpointConfig, fingerprint
from psvm.svc.columns import fits_float32
from psvm.svc.pairs import deal, dealt_pairs, pair_sizes, pair_workers, solved_pairs, spread
from psvm.svc.problem import BinaryProblem, BinaryResult
from psvm.svc.solver import Solver
from psvm.svc.state import (
    compact_features,
    fill_start,
    gather_csr,
    row_sums,
    scatter_pair,
    start_total,
)


class TrainingError(ValueError):
    """The training data cannot define a classifier (e.g. a single class)."""

    collective = True  # decided from globally agreed values, so raised on every rank


def pair_summary(
    comm,
    problem: BinaryProblem,
    res: BinaryResult,
    coef=None,
    with_nu: bool = True,
    note: str | None = None,
) -> str:
    """LIBSVM's lines after a solve (its ``nu`` only when every C_t agrees); collective: the
    counts are global. ``coef``: the model's coefficient per row (default: alpha), whose
    magnitude LIBSVM counts against the row's C. ``note``: the nu types' line in its place
    (``C = 1/r``, ``epsilon = -r``)."""
    coef = res.alpha if coef is None else np.abs(coef)
    C = problem.C[: coef.size]
    counts = [np.count_nonzero(coef > 0), np.count_nonzero(coef >= C), coef.sum()]
    n_sv, n_bsv, total = comm.sum_(np.array(counts, dtype=np.float64))
    c_min, c_max = comm.min_(C.min(initial=np.inf)), comm.max_(C.max(initial=-np.inf))
    lines = ["WARNING: reaching max number of iterations"] if res.status else []
    lines.append(f"optimization finished, #iter = {res.n_iter}")
    if note is not None:
        lines.append(note)
    elif with_nu and c_min == c_max:
        lines.append(f"nu = {total / (c_max * problem.n_samples):f}")
    lines.append(f"obj = {res.objective:f}, rho = {res.rho:f}")
    lines.append(f"nSV = {int(n_sv)}, nBSV = {int(n_bsv)}")
    return "\n".join(lines)


def _prefixed(log: Callable[[str], None], prefix: str, message: str) -> None:
    log(f"{prefix}  {message}")


UNSCALED = 100.0  # |feature value| above which an RBF problem gets the scaling hint


def scale_hint(comm, X: sp.csr_matrix, params: dict) -> str | None:
    """A hint when an RBF problem's features are far from the unit scale, else None (collective).

    Unscaled features make a fixed gamma useless (skin_nonskin, values 0-255, trains in 236 s
    with the default gamma against 2 s at gamma 0.001, and predicts worse). gamma='scale'
    adapts to the data, so it gets no hint.
    """
    if params.get("kernel") != "rbf" or params.get("gamma") == "scale":
        return None
    top = comm.max_(float(np.abs(X.data).max(initial=0.0)))
    if top <= UNSCALED:
        return None
    return (
        f"feature values reach {top:g}; the RBF kernel works best on features scaled to "
        "[-1, 1] or [0, 1] (LIBSVM's svm-scale, scikit-learn's MinMaxScaler or "
        "StandardScaler): unscaled, training can take far longer and predict worse"
    )


@cache
def _arithmetic_digest() -> str:
    """This process's probe hash: its arithmetic does not change between fits."""
    return hashlib.sha256(arithmetic_probe()).hexdigest()


def check_same_arithmetic(comm) -> None:
    """Refuse to train when the ranks' kernel arithmetic differs (mixed CPUs or builds):
    their steps would part silently (:func:`psvm.kernels.arithmetic_probe`)."""
    if len(set(comm.allgather_obj(_arithmetic_digest()))) > 1:
        raise TrainingError(
            "the ranks compute exp or tanh with different bits (mixed CPUs or "
            "numba/numpy builds); psvm needs the same arithmetic on every rank; "
            "run on one kind of node"
        )


def global_variance(comm, X: sp.csr_matrix, n_samples: int, n_features: int) -> float:
    """Var of all n_samples * n_features entries (zeros included), as X.var() in sklearn.

    Each row's sums are added in the row's own order, then the rows exactly
    (:meth:`psvm.comm.Comm.exact_sum`): gamma='scale' has the same bits for every P.
    """
    total, square = (comm.exact_sum(v) for v in row_sums(*csr_arrays(X)[::2]))
    n = float(n_samples) * n_features
    return float(square / n - (total / n) ** 2) if n else 0.0


OVERFLOW = (
    "the kernel overflows float64 on this data; scale the features (svm-scale, StandardScaler) "
    "or lower gamma, coef0 or degree"
)
# nu-SVC's rho is infinite when every variable of a class sits at a bound (no free one)
NU_BOUND = "nu leaves a class no free variable (lower nu), or " + OVERFLOW
# one-class SVM: nu = 1 puts every alpha at its bound, and rho (LIBSVM's too) is then infinite
NU_ALL_BOUND = "nu leaves no free variable (nu = 1 bounds every alpha: lower nu), or " + OVERFLOW


def check_finite(res: BinaryResult, where: str, cause: str = OVERFLOW) -> None:
    """Refuse a NaN or inf result: a kernel value overflowed, and NaN fails every stop test.

    gap, rho and the objective are agreed values, so every rank raises alike.
    """
    if not all(math.isfinite(v) for v in (res.gap, res.rho, res.objective)):
        raise TrainingError(
            f"the solver's values are not finite {where} "
            f"(gap m - M {res.gap:g}, rho {res.rho:g}, objective {res.objective:g}): {cause}"
        )


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


def solver_config(comm, shard, params: dict) -> SVCConfig:
    """The solver's settings for ``shard`` (gamma resolved over all ranks), after checking
    that the ranks compute kernels with the same bits (collective)."""
    if comm.size > 1:
        check_same_arithmetic(comm)
    x_var = 0.0  # only gamma='scale' reads it (every rank has the same params)
    if params["gamma"] == "scale" and params["kernel"] != "precomputed":
        x_var = global_variance(comm, shard.X, shard.n_samples, shard.n_features)
    return make_svc_config(params, shard.n_features, x_var)


def solver_rows(comm, X: sp.csr_matrix, kernel: str) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """The solver's copy of the rows and the rows a model keeps (collective).

    Feature vectors: the features in use renumbered (:func:`compact_features`), and the
    rows as given. A precomputed kernel reads columns by serial number, so its rows stay
    as they are, and a model keeps their serial numbers only, as LIBSVM's.
    """
    if kernel == "precomputed":
        return X, serial_rows(X)
    return compact_features(comm, X), X


def open_checkpoint(comm, config, shard, C_row, cfg, classes, gamma) -> Checkpoint | None:
    """The run's checkpoint (None without ``config``), identified by its data and settings."""
    if config is None:
        return None
    return Checkpoint(comm, config, fingerprint(comm, shard, C_row, cfg, classes, gamma))


def _solve_pair(
    comm, problem, cfg, stats, log, ck, pair: int, n_pairs: int, cancel: Event | None = None
) -> BinaryResult:
    """Class pair ``pair``'s result: from the checkpoint if it finished there, else solved
    (and recorded in the checkpoint)."""
    done = None if ck is None else ck.finished_pair(pair, problem.offset, problem.y.size)
    if done is not None:
        return BinaryResult(**done)
    name = f"pair {pair + 1}/{n_pairs}"  # in the progress lines, if more than one
    pair_log = log if log is None or n_pairs == 1 else partial(_prefixed, log, name)
    res = Solver(comm, problem, cfg, stats, pair_log, ck, pair, cancel).solve()
    check_finite(
        res,
        f"in class pair {pair + 1} of {n_pairs}",
        NU_BOUND if cfg.svm_type == "nu_svc" else OVERFLOW,
    )
    if ck is not None:
        scalars = {k: v for k, v in vars(res).items() if k != "alpha"}
        ck.pair_solved(pair, res.alpha, scalars)
    return res


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
    y, k = shard.y, len(classes)
    if k < 2:
        raise TrainingError(f"training data has only one class (label {classes[0]:g})")
    cfg = solver_config(comm, shard, params)
    cls = np.full(y.size, -1, dtype=np.int64)
    for c, label in enumerate(classes):
        cls[y == label] = c
    nu = cfg.svm_type == "nu_svc"
    C_row = _row_bounds(comm, cfg, classes, cls, sample_weight, fold)
    pairs = list(itertools.combinations(range(k), 2))
    n_pairs = len(pairs)
    owner = None
    if checkpoint is None and alpha0 is None and n_pairs > 1 and comm.size > 1:
        owner = deal(comm, pair_sizes(comm, cls, C_row > 0, pairs), shard)
    run = comm  # the pairs' communicator: each rank alone when they are dealt out
    if owner is not None:  # every rank gets all rows (the bits of one process)
        shard, cls, C_row, run = spread(comm, shard, cls, C_row)
    Xc, X = solver_rows(run, shard.X, cfg.kernel)
    members, problem_of = _pair_rows(run, shard, cfg, Xc, cls, C_row)
    ck = open_checkpoint(comm, checkpoint, shard, C_row, cfg, classes, params["gamma"])
    results = _PairResults(cls.size, k, nu)
    rows_of = {}  # a prepared pair's (rows, first), for its result (not dealt: a few at once)

    def prepare(pair: int) -> BinaryProblem:
        a, b = pairs[pair]
        rows, first = members(a, b)
        if owner is None:  # (dealt out, a rank prepares all its pairs before their results)
            rows_of[pair] = rows, first
        problem = problem_of(rows, first)
        if nu:
            nu_start(run, problem, cfg.nu, sample_weight is not None)
        elif alpha0 is not None:
            problem.alpha0 = np.abs(np.where(first, alpha0[b - 1, rows], alpha0[a, rows]))
        return problem

    def solve(pair, problem, pair_stats, stop, workers: int, pair_log=log) -> tuple:
        """The pair's result and LIBSVM's lines after it (collective under ``run``: every
        rank makes them if any logs)."""
        pair_cfg = cfg if workers == 1 else replace(cfg, cache_size=cfg.cache_size / workers)
        stop = cancel if stop is None else stop
        res = _solve_pair(run, problem, pair_cfg, pair_stats, pair_log, ck, pair, n_pairs, stop)
        if pair_log is None and run.size == 1:
            return res, []
        scale = _scale(res, nu)
        shown = replace(res, rho=res.rho * scale, objective=res.objective * scale * scale)
        return res, [pair_summary(run, problem, shown, note=f"C = {scale:f}" if nu else None)]

    if owner is None:
        solved = solved_pairs(n_pairs, prepare, solve, stats, pair_workers(comm, ck, n_pairs))
    else:
        workers = pair_workers(run, None, int(np.count_nonzero(owner == comm.rank)))
        shows = comm.bcast_obj(log is not None)  # (rank 0 logs: its pairs' progress live)
        live = log if comm.rank == 0 else None  # (the others' lines go to rank 0)
        solved = dealt_pairs(comm, owner, prepare, solve, stats, workers, shows, live)
    # closed on any error here too (Ctrl-C included): the pairs still running stop now
    with closing(solved):
        for pair, (res, lines) in solved:
            a, b = pairs[pair]
            results.add(res, *(rows_of.pop(pair, None) or members(a, b)), a, b)
            for line in lines if log is not None else ():
                log(line)
    meta = {**results.meta(), "heuristic": cfg.heuristic, "reconstruction": cfg.reconstruction}
    return gathered_model(
        run, shard, cfg, X, results.is_sv, results.coef, results.rho, meta, classes, cls
    )


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


def kernel_facts(comm, cfg: SVCConfig, arrays: tuple) -> dict:
    """This rank's rows' norms and kernel diagonal, whether their values are float32s and
    integers, and, when every rank's are integers (rbf), the largest norm of any rank's rows:
    the rbf table then covers every row, which rows lent across ranks need
    (:mod:`psvm.svc.balance`). None for a precomputed kernel, whose serial numbers and
    diagonal are each problem's. Collective for rbf."""
    if cfg.kernel == "precomputed":
        return dict(sq=None, diag=None, exact32=None, integral=None, sq_max=None)
    indptr, _, data = arrays
    sq = row_sq_norms(indptr, data, np.empty(indptr.size - 1))
    diag = kernel_diag(sq, cfg.kernel_id, cfg.gamma, cfg.coef0, cfg.degree, np.empty(sq.size))
    exact32 = fits_float32(data)
    integral = cfg.kernel == "rbf" and exact32 and is_integral(data)
    sq_max = None
    if cfg.kernel == "rbf" and comm.min_(int(integral)):
        sq_max = comm.max_(float(sq.max(initial=0.0)))
    return dict(sq=sq, diag=diag, exact32=exact32, integral=integral, sq_max=sq_max)


def _pair_rows(comm, shard, cfg, Xc, cls, C_row):
    """Two functions: of a class pair (a, b), its rows (those with C_t > 0) and which of them
    are class a; of those, the pair's :class:`BinaryProblem` (collective)."""
    Xc_arrays = csr_arrays(Xc)
    facts = kernel_facts(comm, cfg, Xc_arrays)  # once for every pair
    sq, diag = facts["sq"], facts["diag"]

    bounded = C_row > 0  # rows of zero weight are left out

    def members(a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        rows = (((cls == a) | (cls == b)) & bounded).nonzero()[0]
        return rows, cls[rows] == a

    def problem_of(rows: np.ndarray, first: np.ndarray) -> BinaryProblem:
        every = rows.size == cls.size  # (two classes: the shard itself, not a copy)
        return BinaryProblem(
            X=Xc_arrays if every else take_rows(*Xc_arrays, rows),
            n_features=Xc.shape[1],
            y=np.where(first, 1.0, -1.0),
            C=C_row[rows],
            offset=comm.exscan_sum(rows.size),
            n_samples=comm.sum_(int(rows.size)),
            max_row_nnz=shard.max_row_nnz,
            sq=sq if every or sq is None else sq[rows],
            diag=diag if every or diag is None else diag[rows],
            exact32=facts["exact32"],
            integral=facts["integral"],
            sq_max=facts["sq_max"],
        )

    return members, problem_of


def gathered_model(comm, shard, cfg, X, is_sv, coef, rho, meta, classes=(), cls=None):
    """The model on every rank: the support vectors (``is_sv``, with their rows of ``coef``)
    gathered in global row order, grouped by class (``cls``) for the classifiers, and their
    global row indices (collective)."""
    local = is_sv.nonzero()[0]
    sv_gidx = comm.allgatherv(local.astype(np.int64) + shard.offset)
    m = coef.shape[0]
    sv_coef = comm.allgatherv(coef[:, local].T.ravel()).reshape(-1, m)  # a row per SV
    sv_rows = gather_csr(comm, *take_rows(*csr_arrays(X), local))
    k = len(classes)
    if k:
        sv_cls = comm.allgatherv(cls[local])
        order = np.argsort(sv_cls, kind="stable")
        sv_rows, sv_coef, sv_gidx = take_rows(*sv_rows, order), sv_coef[order], sv_gidx[order]
    model = SVCModel(
        svm_type=cfg.svm_type,
        kernel=cfg.kernel,
        gamma=cfg.gamma,
        coef0=cfg.coef0,
        degree=cfg.degree,
        classes=np.asarray(classes) if k else np.zeros(0),
        n_support=np.bincount(sv_cls, minlength=k).astype(np.int64) if k else np.zeros(0, int),
        support_vectors=csr_of(*sv_rows, (sv_gidx.size, shard.n_features)),
        dual_coef=sv_coef.T,
        rho=np.array(rho),
        n_features=shard.n_features,
        meta=meta,
        trusted=True,
    )
    return model, sv_gidx
