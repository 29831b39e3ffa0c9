"""n-fold cross-validation over sharded rows, as LIBSVM's ``svm_cross_validation``.

The folds follow LIBSVM's rules (:func:`fold_ids`); the shuffle is numpy's, seeded, not
C's ``rand()``, so the folds (and the accuracy, within the spread that shuffles give)
differ from LIBSVM's. A fold's training set is the rows outside it in global order, so its
model, and the result, have the same bits for every number of ranks and either design:

- *fold-parallel*: when there are no more ranks than folds and the data set is small
  (:func:`psvm.io.shard.replicable`), every rank gets a copy of all rows and trains folds
  ``rank, rank + P, ...`` alone, with no collective per iteration;
- *every rank*: otherwise each fold is one distributed training over all ranks' rows.

docs/cli.md gives the measurements behind the choice. What is trained is a factory,
``make_fit_predict(comm, shard, log)``, returning ``fit_predict(train, test)``: boolean masks
over the shard's rows in, the predictions of the test rows out. :func:`svc_fit_predict`
makes C-SVC's and nu-SVC's, :func:`single_fit_predict` the other types'; :func:`result_lines`
prints LIBSVM's lines for either.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

FitPredict = Callable[[np.ndarray, np.ndarray], np.ndarray]
MakeFitPredict = Callable[..., FitPredict]  # (comm, shard, log) -> fit_predict

LOO_WARNING = (
    "WARNING: # folds > # data. Will use # folds = # data instead "
    "(i.e., leave-one-out cross validation)"
)


def fold_count(comm, n_folds: int, n_samples: int) -> int:
    """svm_cross_validation's folds: ``n_folds``, or one a row (leave-one-out) with its
    warning on rank 0's stderr, even under -q, when the rows are fewer (-v and -b 1's)."""
    if n_folds <= n_samples:
        return n_folds
    if comm.rank == 0:
        print(LOO_WARNING, file=sys.stderr, flush=True)
    return n_samples


def fold_ids(y: np.ndarray, n_folds: int, seed: int, classes=None) -> np.ndarray:
    """The fold (0 .. n_folds - 1) of every row, by LIBSVM's rules.

    With ``classes`` (classification, in LIBSVM's class order) and ``n_folds < len(y)``,
    the folds are stratified: each class's rows are shuffled and cut into ``n_folds``
    runs, run i holding positions ``i * count // n_folds`` up to ``(i + 1) * count //
    n_folds``. Otherwise (``classes=None``: regression and one-class, as LIBSVM; or one row
    per fold) all rows are shuffled and cut the same way. Requires ``2 <= n_folds <= len(y)``.
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


def fold_parallel(comm, shard, n_folds: int) -> bool:
    """Whether each rank should train whole folds alone (collective): more than one rank,
    no more ranks than folds, and a copy of the data per rank of a node
    (:func:`psvm.io.shard.replicable`)."""
    from psvm.io.shard import replicable

    return 1 < comm.size <= n_folds and replicable(comm, shard)


def cross_validate(
    comm,
    shard,
    n_folds: int,
    seed: int,
    make_fit_predict: MakeFitPredict,
    classes=None,
    *,
    log=None,
    parallel: bool | None = None,
) -> np.ndarray:
    """The prediction of every local row by the model trained without its fold (collective).

    Rank 0 draws the folds from the gathered labels and sends them out, so every rank
    uses the same folds whatever numpy each one runs. ``classes``: see :func:`fold_ids`.
    ``parallel``: the design (default :func:`fold_parallel`). ``log`` (rank 0's) gets each
    fold's lines, in fold order.
    """
    y = comm.gatherv(np.asarray(shard.y, dtype=np.float64))
    folds = comm.bcast_obj(fold_ids(y, n_folds, seed, classes) if comm.rank == 0 else None)
    if parallel is None:
        parallel = fold_parallel(comm, shard, n_folds)
    if parallel:
        return _fold_parallel(comm, shard, folds, n_folds, make_fit_predict, log)
    mine = folds[shard.offset : shard.offset + shard.n_local]
    fit_predict = make_fit_predict(comm, shard, log)
    target = np.empty(shard.n_local)
    for k in range(n_folds):
        test = mine == k
        target[test] = fit_predict(~test, test)
    return target


def _fold_parallel(comm, shard, folds, n_folds, make_fit_predict, log) -> np.ndarray:
    """Every row on every rank; rank r trains folds r, r + P, ... alone; predictions and
    lines gathered. An error agreed over ranks stops them all alike."""
    from psvm.comm import alone

    whole = shard.whole(comm)
    owner = folds % comm.size
    my_folds = folds[owner == comm.rank]  # of my rows, in global order
    lines: dict[int, list[str]] = {}
    pred = np.empty(my_folds.size)
    error = None
    try:
        for k in range(comm.rank, n_folds, comm.size):
            lines[k] = []
            fit_predict = make_fit_predict(alone(comm), whole, lines[k].append)
            test = folds == k
            pred[my_folds == k] = fit_predict(~test, test)
    except Exception as e:  # one rank's agreed error (e.g. not finite): every rank raises it
        if not getattr(e, "collective", False):
            raise
        error = e
    comm.agree(error)
    for part in comm.allgather_obj(lines):
        lines.update(part)
    if log is not None:
        for k in sorted(lines):
            for line in lines[k]:
                log(line)
    order = np.concatenate([np.flatnonzero(owner == r) for r in range(comm.size)])
    target = np.empty(shard.n_samples)
    target[order] = comm.allgatherv(pred)
    return target[shard.offset : shard.offset + shard.n_local]


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


def training_shard(comm, shard, train: np.ndarray, classes=None):
    """The shard of a fold's training rows (mask ``train`` of this rank's rows), global order
    kept (collective: the ranks' counts)."""
    from psvm.io.shard import Shard

    rows = np.flatnonzero(train)
    return Shard(
        X=shard.X[rows],
        y=shard.y[rows],
        offset=comm.exscan_sum(rows.size),
        n_samples=comm.sum_(int(rows.size)),
        n_features=shard.n_features,
        max_row_nnz=shard.max_row_nnz,
        classes=classes,
    )


def svc_fit_predict(
    comm,
    shard,
    log=None,
    *,
    params: dict,
    classes: np.ndarray,
    stats=None,
    probability: Callable | None = None,
) -> FitPredict:
    """C-SVC's ``fit_predict`` over ``shard`` (one-vs-one, :func:`psvm.svc.multiclass.fit_ovo`).

    A fold's classes keep ``classes``' order; a training set of one class predicts it, as
    LIBSVM's one-class model does. ``log`` gets LIBSVM's lines of each fold. With
    ``probability`` (``-b 1``: :func:`psvm.svc.platt.add_probability`, its seed bound) each
    fold's model also fits its pairwise sigmoids and a row's prediction is its most probable
    class, as LIBSVM's ``svm_cross_validation`` predicts by ``svm_predict_probability`` then.
    """
    from psvm.svc.multiclass import fit_ovo

    def fit_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        y = shard.y[train]
        counts = comm.sum_(np.array([np.count_nonzero(y == c) for c in classes], np.int64))
        present = np.asarray(classes)[counts > 0]
        if present.size == 1:
            return np.full(np.count_nonzero(test), present[0], dtype=np.float64)
        fold = training_shard(comm, shard, train, classes=present)
        model, _ = fit_ovo(comm, fold, params, present, stats=stats, log=log, fold=True)
        if probability is not None:
            probability(comm, fold, params, present, model, stats=stats, log=log)
        if log is not None:  # (last, as svm_train prints it)
            log(f"Total nSV = {model.support_vectors.shape[0]}")
        X_test = shard.X[np.flatnonzero(test)]
        if not X_test.shape[0]:
            return np.empty(0)
        return model.predict(X_test) if probability is None else model.predict_proba(X_test)[0]

    return fit_predict


def single_fit_predict(comm, shard, log=None, *, params: dict, stats=None) -> FitPredict:
    """``fit_predict`` of one-class, epsilon-SVR and nu-SVR over ``shard``
    (:func:`psvm.svc.single.fit_single`): +-1 or the predicted values of the test rows."""
    from psvm.svc.single import fit_single

    def fit_predict(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        model, _ = fit_single(
            comm, training_shard(comm, shard, train), params, stats=stats, log=log
        )
        X_test = shard.X[np.flatnonzero(test)]
        return model.predict(X_test) if X_test.shape[0] else np.empty(0)

    return fit_predict
