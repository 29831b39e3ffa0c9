"""The probability model's training (``-b 1``): per class pair, LIBSVM's 5-fold internal
cross-validation on the distributed engine, then :func:`psvm.probability.sigmoid_train` on
its decision values (LIBSVM's ``svm_binary_svc_probability``). Each fold is one
distributed training over all ranks' rows (collective), or, with the class pairs dealt to
the ranks, a training by the pair's rank alone; either way probA/probB have the same bits
for every P. Also the regressors' Laplace sigma and one-class SVM's density marks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from contextlib import closing

import numpy as np

from psvm.probability import density_marks, sigmoid_train
from psvm.stats import Stats

N_FOLDS = 5  # LIBSVM's nr_fold for probability estimates


def perm_folds(perm: np.ndarray) -> np.ndarray:
    """The folds of a given shuffle ``perm`` (row perm[j] sits at position j)."""
    n = perm.size
    starts = np.arange(N_FOLDS + 1) * n // N_FOLDS
    folds = np.empty(n, dtype=np.int64)
    folds[perm] = np.searchsorted(starts, np.arange(n), side="right") - 1
    return folds


def fit_probability(
    comm,
    shard,
    params: dict,
    classes: np.ndarray,
    gamma: float,
    *,
    seed=0,
    perms: list | None = None,
    sample_weight: np.ndarray | None = None,
    stats=None,
    log: Callable[[str], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """probA and probB of every class pair, as LIBSVM's ``svm_binary_svc_probability``
    (collective; the same bits on every rank and for every P).

    For the pair (a, b), its rows (a: +1, b: -1) are cut into 5 folds; each fold's decision
    values come from C-SVC or nu-SVC trained on the other four with bounds Cp and Cn (the
    pair's weighted C), and :func:`sigmoid_train` fits them. ``gamma``: the full training
    set's, resolved (a fold's own 'scale' would differ). ``seed``: of rank 0's shuffles, one
    generator drawn pair after pair; ``perms``: each pair's shuffle instead (tests). Under
    mpiexec the pairs may be dealt to the ranks, each pair's folds trained by one rank alone
    (:func:`psvm.svc.pairs.deal`), else every fold is trained by all ranks together.
    """
    from psvm.svc.pairs import deal, dealt_pairs, pair_sizes, pair_workers, solved_pairs, spread

    k = len(classes)
    cls = np.full(shard.y.size, -1, dtype=np.int64)
    for c, label in enumerate(classes):
        cls[shard.y == label] = c
    keep = np.ones(shard.y.size, bool) if sample_weight is None else sample_weight > 0
    pairs = list(itertools.combinations(range(k), 2))
    sizes = pair_sizes(comm, cls, keep, pairs)
    if perms is None:  # rank 0's, the same folds whatever numpy each rank runs (int8: small)
        rng = np.random.default_rng(seed) if comm.rank == 0 else None
        folds = [perm_folds(rng.permutation(n)).astype(np.int8) for n in sizes] if rng else None
        folds = comm.bcast_obj(folds)
    else:
        folds = [perm_folds(np.asarray(perm)) for perm in perms]
    weight = [params["C"] * params["class_weight"].get(label, 1.0) for label in classes]
    owner = deal(comm, sizes, shard)
    run = comm  # the folds' communicator: each rank alone when the pairs are dealt out
    if owner is not None:  # every rank gets all rows (the bits of one process)
        sw = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        shard, cls, keep, sample_weight, run = spread(comm, shard, cls, keep, sw)

    def solve(pair: int, _, pair_stats, cancel, workers: int, pair_log=log) -> tuple:
        """(probA, probB) of the pair (collective under ``run``), and no lines after."""
        a, b = pairs[pair]
        rows = np.flatnonzero(((cls == a) | (cls == b)) & keep)
        pos, _ = _pair_positions(run, cls[rows] == a)
        cw = {1.0: weight[a], -1.0: weight[b]}
        sub = {**params, "gamma": gamma, "C": 1.0, "class_weight": cw}
        sub["cache_size"] = params["cache_size"] / workers  # (pairs on threads: a share)
        y = np.where(cls[rows] == a, 1.0, -1.0)
        sw = None if sample_weight is None else sample_weight[rows]
        mine = folds[pair][pos]
        dec = _cv_decision_values(run, shard, rows, y, mine, sub, sw, pair_stats, pair_log, cancel)
        # global order: the same bits for any P
        return sigmoid_train(run.allgatherv(dec), run.allgatherv(y)), []

    def solve_one(pair: int, _, pair_stats, cancel, workers: int) -> tuple:
        """:func:`solve`, a pair's lines collected on a thread (``cancel`` given: the pairs
        on threads log in pair order), else logged as they come."""
        lines = []
        collect = lines.append if log is not None and cancel is not None else log
        return solve(pair, None, pair_stats, cancel, workers, collect)[0], lines

    stats = Stats() if stats is None else stats
    if owner is None:  # in one process: the pairs on threads if they are worth it
        workers = pair_workers(comm, None, len(pairs))
        solved = solved_pairs(len(pairs), lambda pair: None, solve_one, stats, workers)
    else:
        workers = pair_workers(run, None, int(np.count_nonzero(owner == comm.rank)))
        shows = comm.bcast_obj(log is not None)  # (rank 0 logs)
        solved = dealt_pairs(comm, owner, lambda pair: None, solve, stats, workers, shows)
    probA, probB = np.zeros(len(pairs)), np.zeros(len(pairs))
    with closing(solved):  # (an error here stops the pairs on threads)
        for pair, ((A, B), lines) in solved:  # lines: the folds', unless logged already
            probA[pair], probB[pair] = A, B
            for line in lines if log is not None else ():
                log(line)
    return probA, probB


def _pair_positions(comm, first: np.ndarray) -> tuple[np.ndarray, int]:
    """Each local row's position in LIBSVM's pair problem (the first class's rows, then the
    second's, each in global order), and the pair's size (collective)."""
    n_first, n_local = int(first.sum()), first.size
    n_a = comm.sum_(n_first)
    pos = np.empty(n_local, dtype=np.int64)
    pos[first] = comm.exscan_sum(n_first) + np.arange(n_first)
    pos[~first] = n_a + comm.exscan_sum(n_local - n_first) + np.arange(n_local - n_first)
    return pos, n_a + comm.sum_(n_local - n_first)


def _cv_decision_values(comm, shard, rows, y, mine, params, sample_weight, stats, log, cancel):
    """Decision values (positive: +1) of a pair's local rows, each from the model trained
    without its fold; a fold whose training rows hold one class gets that class's sign."""
    from psvm.io.shard import Shard
    from psvm.svc.multiclass import fit_ovo

    dec = np.zeros(rows.size)
    for f in range(N_FOLDS):
        train, test = np.flatnonzero(mine != f), np.flatnonzero(mine == f)
        n_pos, n_neg = comm.sum_(np.array([np.sum(y[train] > 0), np.sum(y[train] < 0)]))
        if n_pos == 0 or n_neg == 0:  # LIBSVM: +1, -1, or 0 with no training rows at all
            dec[test] = 1.0 if n_pos else (-1.0 if n_neg else 0.0)
            continue
        fold = Shard(
            X=shard.X[rows[train]],
            y=y[train],
            offset=comm.exscan_sum(train.size),
            n_samples=comm.sum_(int(train.size)),
            n_features=shard.n_features,
            max_row_nnz=shard.max_row_nnz,
            classes=np.array([1.0, -1.0]),
        )
        sw = None if sample_weight is None else sample_weight[train]
        model, _ = fit_ovo(
            comm,
            fold,
            params,
            np.array([1.0, -1.0]),
            sample_weight=sw,
            stats=stats,
            log=log,
            fold=True,
            cancel=cancel,
        )
        if test.size:
            dec[test] = model.decision_function(shard.X[rows[test]])[:, 0]
    return dec


def add_probability(
    comm, shard, params: dict, classes, model, *, seed=0, sample_weight=None, stats=None, log=None
) -> None:
    """``-b 1`` for a C-SVC or nu-SVC ``model`` trained on ``shard``: its pairs' sigmoids
    (:func:`fit_probability`, at the model's gamma) into its meta (collective)."""
    probA, probB = fit_probability(
        comm, shard, params, classes, model.gamma, seed=seed, sample_weight=sample_weight,
        stats=stats, log=log,
    )  # fmt: skip
    model.meta.update(probA=probA.tolist(), probB=probB.tolist())


def fit_svr_sigma(
    comm, shard, params: dict, gamma: float, n_folds: int = N_FOLDS, *, seed=0, stats=None, log=None
) -> float:
    """LIBSVM's ``svm_svr_probability``: sigma of the Laplace noise model of a regressor, the
    mean absolute residual of an ``n_folds``-fold cross-validation (LIBSVM's 5, at most the
    rows: :func:`psvm.cross_validation.fold_count`) after dropping residuals beyond 5
    standard deviations (of a Laplace with that mean: sqrt(2) mae). Collective; the sums are
    correctly rounded, so sigma has the same bits for every P. ``log`` (rank 0's) gets the
    folds' lines, as svm-train prints them."""
    from functools import partial

    from psvm.cross_validation import cross_validate, single_fit_predict

    fixed = {**params, "gamma": gamma}  # the whole set's gamma in every fold, as LIBSVM
    make = partial(single_fit_predict, params=fixed, stats=stats)
    # every rank on every fold: the folds' statistics stay in lockstep
    target = cross_validate(comm, shard, n_folds, seed, make, log=log, parallel=False)
    residual = np.abs(shard.y - target)
    n = shard.n_samples
    mae = comm.exact_sum(residual) / n
    outlier = residual > 5 * np.sqrt(2 * mae * mae)
    kept = n - comm.sum_(int(np.count_nonzero(outlier)))
    return comm.exact_sum(residual[~outlier]) / kept


def fit_density_marks(comm, shard, model) -> np.ndarray | None:
    """LIBSVM 3.3x's ``svm_one_class_probability`` for a one-class ``model`` trained on
    ``shard``: :func:`psvm.probability.density_marks` of every training row's decision
    value (collective). A row's decision value has the same bits on any rank, and the marks
    are order statistics, so they have the same bits for every P."""
    dec = model.decision_function(shard.X)[:, 0]
    return density_marks(comm.allgatherv(dec))
