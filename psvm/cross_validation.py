"""n-fold cross-validation over sharded rows, as LIBSVM's ``svm_cross_validation``.

The folds follow LIBSVM's rules (:func:`fold_ids`); the shuffle is numpy's, seeded, not
C's ``rand()``, so the folds (and the accuracy, within the spread that shuffles give)
differ from LIBSVM's. Every rank takes part in every fold: a fold's training set is each
rank's own rows outside the fold, in global order, so its model, and the result, have the
same bits for every number of ranks (docs/cli.md says why this design).

What is trained is a callable, ``fit_predict(train, test)``, taking boolean masks over the
local rows and returning the predictions of the local test rows; :func:`svc_fit_predict`
makes C-SVC's. Other svm types plug in their own and their result lines
(:func:`result_lines`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

FitPredict = Callable[[np.ndarray, np.ndarray], np.ndarray]

LOO_WARNING = (
    "WARNING: # folds > # data. Will use # folds = # data instead "
    "(i.e., leave-one-out cross validation)"
)


def fold_ids(y: np.ndarray, n_folds: int, seed: int, classes=None) -> np.ndarray:
    """The fold (0 .. n_folds - 1) of every row, by LIBSVM's rules.

    With ``classes`` (classification, in LIBSVM's class order) and ``n_folds < len(y)``,
    the folds are stratified: each class's rows are shuffled and cut into ``n_folds``
    runs, run i holding positions ``i * count // n_folds`` up to ``(i + 1) * count //
    n_folds``. Otherwise (regression, or one row per fold) all rows are shuffled and cut
    the same way. Requires ``2 <= n_folds <= len(y)``.
    """
    y = np.asarray(y)
    rng = np.random.default_rng(seed)
    if classes is not None and n_folds < y.size:
        groups = [np.flatnonzero(y == c) for c in classes]
    else:
        groups = [np.arange(y.size)]
    folds = np.empty(y.size, dtype=np.int64)
    for members in groups:
        shuffled = members[rng.permutation(members.size)]
        starts = np.arange(n_folds + 1) * members.size // n_folds
        folds[shuffled] = np.searchsorted(starts, np.arange(members.size), side="right") - 1
    return folds


def cross_validate(
    comm,
    y_local: np.ndarray,
    offset: int,
    n_folds: int,
    seed: int,
    fit_predict: FitPredict,
    classes=None,
) -> np.ndarray:
    """The prediction of every local row by the model trained without its fold (collective).

    Rank 0 draws the folds from the gathered labels and sends them out, so every rank
    uses the same folds whatever numpy each one runs. ``classes``: see :func:`fold_ids`.
    """
    y = comm.gatherv(np.asarray(y_local, dtype=np.float64))
    folds = fold_ids(y, n_folds, seed, classes) if comm.rank == 0 else None
    folds = comm.bcast_obj(folds)[offset : offset + y_local.size]
    target = np.empty(y_local.size)
    for k in range(n_folds):
        test = folds == k
        target[test] = fit_predict(~test, test)
    return target


def result_lines(comm, y_local: np.ndarray, target: np.ndarray, regression: bool = False):
    """LIBSVM's svm-train result lines (collective): the accuracy, or for regression the
    mean squared error and the squared correlation coefficient (sums correctly rounded,
    so the same bits for every P)."""
    n = comm.sum_(int(y_local.size))
    if not regression:
        correct = comm.sum_(int(np.count_nonzero(target == y_local)))
        return [f"Cross Validation Accuracy = {100.0 * correct / n:g}%"]
    v, y = np.asarray(target, dtype=np.float64), np.asarray(y_local, dtype=np.float64)
    sv, sy, svv, syy, svy, err = (
        comm.exact_sum(t) for t in (v, y, v * v, y * y, v * y, (v - y) ** 2)
    )
    num = (n * svy - sv * sy) ** 2
    den = (n * svv - sv * sv) * (n * syy - sy * sy)
    scc = num / den if den else float("nan")  # LIBSVM prints nan (0/0) too
    return [
        f"Cross Validation Mean squared error = {err / n:g}",
        f"Cross Validation Squared correlation coefficient = {scc:g}",
    ]


def svc_fit_predict(
    comm, shard, params: dict, classes: np.ndarray, *, stats=None, log=None
) -> FitPredict:
    """C-SVC's ``fit_predict`` over ``shard`` (one-vs-one, :func:`psvm.svc.multiclass.fit_ovo`).

    A fold's classes keep ``classes``' order; a training set of one class predicts it, as
    LIBSVM's one-class model does. ``log`` gets LIBSVM's lines of each fold.
    """
    from psvm.io.shard import Shard
    from psvm.svc.multiclass import fit_ovo

    def fit_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        y = shard.y[train]
        counts = comm.sum_(np.array([np.count_nonzero(y == c) for c in classes], np.int64))
        present = np.asarray(classes)[counts > 0]
        if present.size == 1:
            return np.full(np.count_nonzero(test), present[0], dtype=np.float64)
        rows = np.flatnonzero(train)
        fold = Shard(
            X=shard.X[rows],
            y=y,
            offset=comm.exscan_sum(rows.size),
            n_samples=comm.sum_(int(rows.size)),
            n_features=shard.n_features,
            max_row_nnz=shard.max_row_nnz,
            classes=present,
        )
        model, _ = fit_ovo(comm, fold, params, present, stats=stats, log=log)
        if log is not None:
            log(f"Total nSV = {model.support_vectors.shape[0]}")
        X_test = shard.X[np.flatnonzero(test)]
        return model.predict(X_test) if X_test.shape[0] else np.empty(0)

    return fit_predict
