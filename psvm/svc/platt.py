"""The probability model's training (``-b 1``): per class pair, LIBSVM's 5-fold internal
cross-validation on the distributed engine, then :func:`psvm.probability.sigmoid_train` on
its decision values (LIBSVM's ``svm_binary_svc_probability``). Each fold is one
distributed training over all ranks' rows (collective), so probA/probB have the same bits
for every P. Also the regressors' Laplace sigma and one-class SVM's density marks.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from psvm.probability import density_marks, sigmoid_train

N_FOLDS = 5  # LIBSVM's nr_fold for probability estimates


def internal_folds(rng: np.random.Generator, n: int) -> np.ndarray:
    """The fold of each of n rows: a shuffle cut into 5 runs, LIBSVM's rule
    (run i holds positions i n / 5 up to (i + 1) n / 5 of the shuffle)."""
    return perm_folds(rng.permutation(n))


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
    set's, resolved (a fold's own 'scale' would differ). ``seed``: of rank 0's shuffle, one
    generator drawn pair after pair; ``perms``: each pair's shuffle instead (tests).
    """
    k = len(classes)
    rng = np.random.default_rng(seed) if comm.rank == 0 and perms is None else None
    cls = np.full(shard.y.size, -1, dtype=np.int64)
    for c, label in enumerate(classes):
        cls[shard.y == label] = c
    keep = np.ones(shard.y.size, bool) if sample_weight is None else sample_weight > 0
    C = params["C"]
    weight = [C * params["class_weight"].get(label, 1.0) for label in classes]
    probA, probB, pair = [], [], 0
    for a in range(k):
        for b in range(a + 1, k):
            rows = np.flatnonzero(((cls == a) | (cls == b)) & keep)
            pos, n = _pair_positions(comm, cls[rows] == a)
            if perms is not None:
                folds = perm_folds(np.asarray(perms[pair]))
            else:
                folds = comm.bcast_obj(internal_folds(rng, n) if comm.rank == 0 else None)
            cw = {1.0: weight[a], -1.0: weight[b]}
            sub = {**params, "gamma": gamma, "C": 1.0, "class_weight": cw}
            y = np.where(cls[rows] == a, 1.0, -1.0)
            sw = None if sample_weight is None else sample_weight[rows]
            dec = _cv_decision_values(comm, shard, rows, y, folds[pos], sub, sw, stats, log)
            A, B = sigmoid_train(
                comm.allgatherv(dec), comm.allgatherv(y)
            )  # global order: same bits for any P
            probA.append(A)
            probB.append(B)
            pair += 1
    return np.array(probA), np.array(probB)


def _pair_positions(comm, first: np.ndarray) -> tuple[np.ndarray, int]:
    """Each local row's position in LIBSVM's pair problem (the first class's rows, then the
    second's, each in global order), and the pair's size (collective)."""
    n_first, n_local = int(first.sum()), first.size
    n_a = comm.sum_(n_first)
    pos = np.empty(n_local, dtype=np.int64)
    pos[first] = comm.exscan_sum(n_first) + np.arange(n_first)
    pos[~first] = n_a + comm.exscan_sum(n_local - n_first) + np.arange(n_local - n_first)
    return pos, n_a + comm.sum_(n_local - n_first)


def _cv_decision_values(comm, shard, rows, y, mine, params, sample_weight, stats, log):
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
        )
        if test.size:
            dec[test] = model.decision_function(shard.X[rows[test]])[:, 0]
    return dec


def fit_svr_sigma(comm, shard, params: dict, gamma: float, *, seed: int = 0, stats=None) -> float:
    """LIBSVM's ``svm_svr_probability``: sigma of the Laplace noise model of a regressor, the
    mean absolute residual of a 5-fold cross-validation after dropping residuals beyond 5
    standard deviations (of a Laplace with that mean: sqrt(2) mae). Collective; the sums are
    correctly rounded, so sigma has the same bits for every P."""
    from functools import partial

    from psvm.cross_validation import cross_validate, single_fit_predict

    fixed = {**params, "gamma": gamma}  # the whole set's gamma in every fold, as LIBSVM
    make = partial(single_fit_predict, params=fixed, stats=stats)
    # every rank on every fold, as fit_probability: the folds' statistics stay in lockstep
    residual = np.abs(shard.y - cross_validate(comm, shard, N_FOLDS, seed, make, parallel=False))
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
