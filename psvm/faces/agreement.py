"""What the ranks agree on before a fit: errors in their input, and the whole training set.

Under ``mpiexec`` every rank calls ``fit``. Input errors are found locally and
agreed (``comm.agree``) before the solver's first collective, so every rank
raises the same error; then one small allgather tells every rank the global
shape, labels and class counts (and, replicated, an exact hash of the input).
Errors decided from those gathered values are :class:`InputError`: every rank
raises them alike, so the face's ``Comm.guard`` lets them through.
"""

from __future__ import annotations

import functools
import hashlib
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp


class InputError(ValueError):
    """Bad fit input, decided from values every rank holds alike (after an allgather)."""

    collective = True  # every rank raises it: Comm.guard lets it through


# parameters that may differ between ranks: they change no bit of the model
PER_RANK_PARAMS = frozenset({"comm", "n_threads", "n_jobs", "verbose", "cache_size"})


def agree_on_params(comm, est) -> None:
    """Every rank's estimator has the same parameters (collective; nothing on one process).

    A rank with another C solved another problem without a word, one with another SGD
    period ended the job in an MPI error; now every rank raises one :class:`InputError`.
    """
    if comm.size == 1:
        return
    mine = {
        k: repr(_canonical(v))
        for k, v in est.get_params(deep=False).items()
        if k not in PER_RANK_PARAMS
    }
    ranks = comm.allgather_obj(mine)
    differ = sorted(k for k in mine if any(r.get(k) != mine[k] for r in ranks))
    if differ:
        k = differ[0]
        values = ", ".join(f"rank {i}: {r.get(k)}" for i, r in enumerate(ranks))
        raise InputError(
            f"parameters differ between ranks: {differ} ({k}: {values}); every rank must "
            "fit with the same parameters"
        )


def _canonical(value):
    """A parameter as ranks can compare it: numbers by value (1 and 1.0 are one C), dicts by
    their items, callables by name and arguments, no object addresses."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Real):
        try:
            return float(value)
        except OverflowError:  # (an int past float's range, which validation refuses)
            return repr(value)
    if isinstance(value, dict):
        return sorted((repr(_canonical(k)), repr(_canonical(v))) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, np.random.RandomState):
        return "a RandomState"
    if isinstance(value, functools.partial):
        return [_canonical(value.func), _canonical(value.args), _canonical(value.keywords)]
    if callable(value):
        name = getattr(value, "__qualname__", type(value).__qualname__)
        return f"{getattr(value, '__module__', '')}.{name}"
    return value if isinstance(value, str) or value is None else repr(value)


def agree_on_input(comm, sharded: bool, check: Callable, /, *args, **kwargs):
    """``check(*args, **kwargs)`` on every rank, its ValueError or TypeError agreed (collective).

    Every rank raises the lowest failing rank's error before any other
    collective; the message names that rank where the ranks check different rows ('sharded')
    or only some ranks failed (replicated copies that differ: the others' are fine).
    (scikit-learn's checks raise TypeError for some bad input, e.g. a string for X.)
    """
    error = result = None
    try:
        result = check(*args, **kwargs)
    except (ValueError, TypeError) as e:
        error = e
    comm.agree(error, lambda failed: sharded or not all(failed))
    return result


def input_digest(X: sp.csr_matrix, codes: np.ndarray, sample_weight: np.ndarray) -> str:
    """An exact hash of (X, y, sample_weight): equal iff replicated ranks hold the same input.

    X is canonical CSR; explicit zeros do not count. ``codes`` are the labels'
    indices into the (separately compared) sorted labels.
    """
    if X.nnz and not X.data.all():
        X = X.copy()
        X.eliminate_zeros()
    h = hashlib.blake2b(np.array(X.shape, dtype=np.int64).tobytes(), digest_size=16)
    for a, dtype in (
        (X.indptr, np.int64),
        (X.indices, np.int64),
        (X.data, np.float64),
        (codes, np.int64),
        (sample_weight, np.float64),
    ):
        for k in range(0, a.size, 1 << 20):  # in pieces: no full copy of a converted array
            h.update(np.ascontiguousarray(a[k : k + (1 << 20)], dtype=dtype).tobytes())
        h.update(b"|")
    return h.hexdigest()


class RankInput(NamedTuple):
    """What one rank tells the others about its input (one allgather)."""

    shape: tuple[int, int]
    sparse: bool
    labels: np.ndarray  # sorted distinct labels of its y
    counts: np.ndarray  # rows of each of those labels
    positive: np.ndarray  # labels with a sample of positive weight
    max_row_nnz: int
    digest: str  # input_digest, replicated input on several ranks only
    classes: np.ndarray | None  # partial_fit's classes
    feature_names: tuple | None  # a DataFrame's columns (scikit-learn's feature_names_in_)


@dataclass(frozen=True)
class TrainingSet:
    """The facts of the whole training set, the same on every rank."""

    classes: np.ndarray  # sorted labels over all ranks (partial_fit: its classes)
    class_counts: np.ndarray  # rows of each class over all ranks
    n_samples: int
    n_features: int
    rows_before: int  # rows of the ranks before this one ('sharded'; 0 when 'replicated')
    max_row_nnz: int
    feature_names: tuple | None  # X's column names, agreed (:func:`same_feature_names`)


def agree_on_training_set(
    comm,
    X: sp.csr_matrix,
    y: np.ndarray,
    sample_weight: np.ndarray,
    *,
    sparse: bool,
    sharded: bool,
    classes: np.ndarray | None = None,
    every_class_weighted: bool = True,
    labelled: bool = True,
    feature_names: np.ndarray | None = None,
) -> TrainingSet:
    """The global facts of the checked input (X canonical CSR); collective: one allgather.

    Raises :class:`InputError` on every rank alike: replicated copies that
    differ, dense shards of other widths, X's columns named otherwise than on rank 0
    (``feature_names``: scikit-learn's ``feature_names_in_``, None without names), no
    rows at all, and the class rules of :func:`check_classes`. ``classes``: partial_fit's
    labels, then the same on every rank; None: the labels of y over all ranks. Not
    ``labelled`` (regression, novelty): no classes, and y's bits go into the digest.
    """
    digested = not sharded and comm.size > 1
    names = None if feature_names is None else tuple(feature_names.tolist())
    mine = _rank_input(X, y, sample_weight, sparse, classes, labelled, digested, names)
    ranks = comm.allgather_obj(mine) if comm.size > 1 else [mine]
    if not sharded and len(ranks) > 1:
        same_everywhere(ranks)
    names = same_feature_names(ranks)
    given = classes is not None
    if given:
        same_classes(ranks)
    n_features = max(r.shape[1] for r in ranks)
    if any(r.shape[1] != n_features and not r.sparse for r in ranks):
        raise InputError(
            f"dense X must have the same number of features on every rank, got "
            f"{[r.shape[1] for r in ranks]}"
        )
    if sharded and labelled:
        same_label_type(ranks)
    rows = [r.shape[0] for r in ranks] if sharded else [X.shape[0]]
    if sum(rows) == 0:
        raise InputError("Found array with 0 sample(s) on every rank: fit needs at least one")
    classes, class_counts, positive = _all_classes(ranks if sharded else [mine], classes)
    check_classes(classes, positive, given=given or not labelled, every=every_class_weighted)
    return TrainingSet(
        classes=classes,
        class_counts=class_counts,
        n_samples=sum(rows),
        n_features=n_features,
        rows_before=sum(rows[: comm.rank]) if sharded else 0,
        max_row_nnz=max(r.max_row_nnz for r in ranks),
        feature_names=names,
    )


def _rank_input(X, y, sample_weight, sparse, classes, labelled, digested, names) -> RankInput:
    """This rank's facts; ``digested``: with a digest of its rows (replicated input)."""
    if labelled:
        labels, counts = label_counts(y)
        weighted = sample_weight > 0
        positive = labels if weighted.all() else np.unique(y[weighted])
    else:
        labels, counts = np.zeros(0), np.zeros(0, dtype=np.int64)
        positive = np.ones(int(np.any(sample_weight > 0)))
    digest = ""
    if digested:
        if labelled:  # (labels of any type: strings too)
            codes = np.searchsorted(labels, y)
        else:
            codes = np.ascontiguousarray(y, dtype=np.float64).view(np.int64)
        digest = input_digest(X, codes, sample_weight)
    return RankInput(
        shape=X.shape,
        sparse=sparse,
        labels=labels,
        counts=counts,
        positive=positive,
        max_row_nnz=int((X.indptr[1:] - X.indptr[:-1]).max(initial=0)),
        digest=digest,
        classes=classes,
        feature_names=names,
    )


def _all_classes(parts: list[RankInput], classes: np.ndarray | None):
    """(classes, their counts, the labels with positive weight) over the ranks' ``parts``;
    ``classes`` given (partial_fit) are kept."""
    mine = parts[0]
    if len(parts) == 1 and classes is None and mine.labels.size:  # sorted labels: all there is
        return mine.labels, mine.counts, mine.positive
    if classes is None:  # (a rank without rows has labels of another dtype: leave them out)
        classes = np.unique(np.concatenate([r.labels for r in parts if r.labels.size] or [[]]))
    class_counts = np.zeros(classes.size, dtype=np.int64)
    for r in parts:
        class_counts[np.searchsorted(classes, r.labels)] += r.counts
    positive = np.unique(np.concatenate([r.positive for r in parts if r.positive.size] or [[]]))
    return classes, class_counts, positive


def label_counts(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(y, return_counts=True)``; small non-negative integer labels are counted
    (a quarter of np.unique's cost on iris)."""
    if y.dtype.kind in "iu" and y.size and y.min() >= 0 and y.max() <= 4 * y.size + 1024:
        counts = np.bincount(y)
        labels = counts.nonzero()[0]
        return labels.astype(y.dtype), counts[labels]
    return np.unique(y, return_counts=True)


def same_everywhere(ranks: list[RankInput]) -> None:
    """InputError unless every rank's shape, labels and digest equal rank 0's, exactly."""
    first = ranks[0]
    differ = [
        k
        for k, r in enumerate(ranks)
        if r.shape != first.shape
        or r.digest != first.digest
        or not np.array_equal(r.labels, first.labels)
    ]
    if differ:
        raise InputError(
            "distributed='replicated' needs the same X, y and sample_weight on every rank, but "
            f"rank(s) {differ} differ from rank 0 (shapes {[r.shape for r in ranks]}); pass "
            "distributed='sharded' to give each rank its own rows"
        )


def _label_type(labels: np.ndarray) -> str:
    strings = labels.dtype.kind in "US" or (
        labels.dtype.kind == "O" and any(isinstance(v, str) for v in labels)
    )
    return "strings" if strings else "numbers"


def same_label_type(ranks: list[RankInput]) -> None:
    """InputError where one rank's labels are strings and another's numbers: their union
    would be a class per spelling ('1' and 1), a model of twice the classes without a word
    (scikit-learn refuses such a y: 'Mix of label input types')."""
    kinds = [(k, _label_type(r.labels)) for k, r in enumerate(ranks) if r.labels.size]
    other = next(((k, t) for k, t in kinds if t != kinds[0][1]), None)
    if other is not None:
        raise InputError(
            f"y's labels are {kinds[0][1]} on rank {kinds[0][0]} and {other[1]} on rank "
            f"{other[0]}: every rank must give labels of one type (Mix of label input types)"
        )


def same_feature_names(ranks: list[RankInput]) -> tuple | None:
    """The column names of every rank's X, or an InputError where they differ: the ranks
    would train on columns in different orders, and keep different ``feature_names_in_``.
    A rank without rows and without names (an empty array beside DataFrames) takes the
    others' names."""
    named = [(k, r) for k, r in enumerate(ranks) if r.shape[0] or r.feature_names is not None]
    k0, first = named[0] if named else (0, ranks[0])
    differ = [k for k, r in named if r.feature_names != first.feature_names]
    if differ:
        raise InputError(
            f"X's feature names differ between ranks: rank {k0} {_names(first.feature_names)}, "
            f"rank {differ[0]} {_names(ranks[differ[0]].feature_names)}; every rank must give "
            "the same columns in the same order (DataFrames with the same columns, or arrays)"
        )
    return first.feature_names


def _names(names: tuple | None) -> str:
    if names is None:
        return "has none (no DataFrame)"
    return f"has {list(names[:4])}" + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def same_classes(ranks: list[RankInput]) -> None:
    """InputError unless every rank passed partial_fit rank 0's classes."""
    first = ranks[0].classes
    differ = [k for k, r in enumerate(ranks) if not np.array_equal(r.classes, first)]
    if differ:
        raise InputError(
            f"partial_fit needs the same classes on every rank, but rank(s) {differ} differ "
            f"from rank 0 ({first.tolist()})"
        )


def check_classes(classes: np.ndarray, positive: np.ndarray, *, given: bool, every: bool) -> None:
    """The class rules, as InputError: some sample of positive weight; unless the classes are
    ``given`` (partial_fit), two classes at least; with ``every``, a sample of positive weight
    in every class (LIBSVM leaves zero-weight samples out, so a class without one is gone)."""
    if positive.size == 0:
        reason = "nothing to learn from"
        if every:
            reason = "at least two classes need samples of positive weight"
        raise InputError(f"sample_weight is zero for every sample: {reason}")
    if given:
        return
    if classes.size < 2:
        raise InputError(
            "The number of classes has to be greater than one; "
            f"got 1 class ({classes.tolist()[0]!r})"
        )
    if not every:
        return
    if positive.size < 2:
        raise InputError(
            f"all samples with positive sample_weight belong to one class "
            f"({positive.tolist()[0]!r}); at least two classes are needed"
        )
    if positive.size < classes.size:
        missing = np.setdiff1d(classes, positive).tolist()
        raise InputError(
            f"class {missing} has no sample with positive sample_weight; "
            "remove its samples or give them a weight"
        )
