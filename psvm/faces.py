"""Helpers of the scikit-learn faces: fit input over the ranks, face-only parameters.

Under ``mpiexec`` every rank calls ``fit``. With ``distributed='replicated'``
each rank passes the whole data set and keeps a contiguous block of rows
(balanced by non-zeros); with ``'sharded'`` each rank passes only its own rows
and global row indices follow rank order. Input errors are found locally and
agreed (``comm.agree``) before the solver's first collective, so every rank
raises the same error; then one small allgather tells every rank the global
shape, labels and class counts (and, replicated, an exact hash of the input).
Errors decided from those gathered values are :class:`InputError`: every rank
raises them alike, so the face's ``Comm.guard`` lets them through.
"""

from __future__ import annotations

import hashlib
import numbers
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from psvm._params import DEFAULT_HEURISTIC, HEURISTICS, ParameterError, unknown_weight_labels
from psvm.comm import Comm, mpi_worker, world
from psvm.io.shard import (
    MAX_SQUARED_NORM,
    Shard,
    first_overflowing_row,
    nnz_balanced_offsets,
)
from psvm.kernels import canonical_csr

DISTRIBUTED = ("replicated", "sharded")


class InputError(ValueError):
    """Bad fit input, decided from values every rank holds alike (after an allgather)."""

    collective = True  # every rank raises it: Comm.guard lets it through


# -- face-only parameters --------------------------------------------------------------------
def resolve_heuristic(shrinking, heuristic) -> str:
    """``heuristic`` when given, else from ``shrinking``: True -> the default, False -> 'none'."""
    if heuristic is not None:
        return heuristic  # checked against HEURISTICS by validate_svc_params
    if isinstance(shrinking, (bool, np.bool_)):
        return DEFAULT_HEURISTIC if shrinking else "none"
    if isinstance(shrinking, str) and shrinking in HEURISTICS:
        return shrinking
    raise ParameterError(
        f"shrinking must be a bool or one of {list(HEURISTICS)}, got {shrinking!r}"
    )


def check_face_params(*, distributed, decision_function_shape, n_jobs, random_state) -> None:
    """Parameters the solver never sees; each error names the parameter."""
    if distributed not in DISTRIBUTED:
        raise ParameterError(f"distributed must be one of {list(DISTRIBUTED)}, got {distributed!r}")
    if decision_function_shape not in ("ovo", "ovr"):
        raise ParameterError(
            f"decision_function_shape must be 'ovo' or 'ovr', got {decision_function_shape!r}"
        )
    if n_jobs is not None and (
        isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0
    ):
        raise ParameterError(f"n_jobs must be None or a non-zero int, got {n_jobs!r}")
    try:
        check_random_state(random_state)
    except ValueError:
        raise ParameterError(
            f"random_state must be None, an int or a numpy RandomState, got {random_state!r}"
        ) from None


@contextmanager
def numba_threads(n_jobs):
    """Run the block with ``n_jobs`` numba threads (-1: all, -2: all but one), then restore."""
    if n_jobs is None:
        yield
        return
    import numba

    top = numba.config.NUMBA_NUM_THREADS
    n = n_jobs if n_jobs > 0 else top + 1 + n_jobs
    old = numba.get_num_threads()
    numba.set_num_threads(max(1, min(n, top)))
    try:
        yield
    finally:
        numba.set_num_threads(old)


@contextmanager
def fit_comm(comm, distributed: str = "replicated") -> Iterator[Comm]:
    """The Comm of one fit: the world for None, else a duplicate of ``comm``, freed afterwards.

    In a worker process of a rank (joblib's ``n_jobs``, multiprocessing) the
    fit runs as one process, ``comm`` or not: it cannot join the MPI job.
    Replicated data is the whole set there; sharded data would be one rank's
    rows only, so it is refused.
    """
    if mpi_worker():
        if distributed == "sharded":
            raise ParameterError(
                "distributed='sharded' in a worker process of an MPI job (joblib n_jobs, "
                "multiprocessing): the worker cannot join the job and holds one rank's rows "
                "only; use n_jobs=1, or replicated data"
            )
        comm = None
    if comm is None:
        yield world()
        return
    dup = Comm(comm)
    try:
        yield dup
    finally:
        dup.free()


# -- fit input ---------------------------------------------------------------------------------
def agree_on_input(comm, sharded: bool, check: Callable, *args, **kwargs):
    """``check(*args, **kwargs)`` on every rank, its ValueError or TypeError agreed (collective).

    Every rank raises the lowest failing rank's error before any other
    collective; with 'sharded' input the ranks check different rows, so the
    message names that rank. (scikit-learn's checks raise TypeError for some
    bad input, e.g. a string for X.)
    """
    error = result = None
    try:
        result = check(*args, **kwargs)
    except (ValueError, TypeError) as e:
        error = e if comm.size == 1 or not sharded else type(e)(f"rank {comm.rank}: {e}")
    comm.agree(error)
    return result


@dataclass
class FitInput:
    """This rank's rows and the globally agreed facts about the whole training set."""

    X: sp.csr_matrix  # local rows: float64, canonical CSR, n_features columns
    codes: np.ndarray  # class index (into classes) of each local row, float64
    sample_weight: np.ndarray  # of the local rows
    classes: np.ndarray  # sorted distinct labels over all ranks
    class_counts: np.ndarray  # global number of rows of each class
    offset: int  # global index of the first local row
    n_samples: int
    n_features: int
    max_row_nnz: int
    sparse: bool

    def shard(self) -> Shard:
        return Shard(
            X=self.X,
            y=self.codes,
            offset=self.offset,
            n_samples=self.n_samples,
            n_features=self.n_features,
            max_row_nnz=self.max_row_nnz,
        )


def check_sample_weight(sample_weight, n: int) -> np.ndarray:
    """One finite, non-negative weight per sample (None: all ones)."""
    if sample_weight is None:
        return np.ones(n)
    sw = np.asarray(sample_weight, dtype=np.float64)
    if sw.ndim == 0:
        return np.full(n, float(sw))
    if sw.shape != (n,):
        raise ValueError(f"sample_weight has shape {sw.shape}, expected ({n},): one per sample")
    if not np.all(np.isfinite(sw)) or np.any(sw < 0):
        raise ValueError("sample_weight must be finite and non-negative")
    return sw


def check_finite_rows(X) -> None:
    """Raise ValueError naming the first row of X whose squared norm exceeds MAX_SQUARED_NORM.

    Its values are finite, but the kernels add squared norms (RBF: |x|^2 +
    |z|^2 - 2 x.z), and an inf there makes the whole solve NaN.
    """
    row = None
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        row = first_overflowing_row(X.indptr, X.data)
    elif X.size and max(X.max(), -X.min()) > np.sqrt(MAX_SQUARED_NORM / X.shape[1]):
        with np.errstate(over="ignore"):  # some row may be too large: compute them all
            bad = np.flatnonzero(~(np.einsum("ij,ij->i", X, X) <= MAX_SQUARED_NORM))
        row = int(bad[0]) if bad.size else None
    if row is not None:
        values = X[row].data if sp.issparse(X) else X[row]
        raise ValueError(
            f"X row {row}: values too large: its squared norm exceeds "
            f"{MAX_SQUARED_NORM:.3g}, so kernel values overflow float64 (largest "
            f"|value| {np.abs(values).max():.3g}); scale the features, e.g. with "
            "StandardScaler"
        )


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


def agree_replicated(comm, X, y, sample_weight) -> None:
    """With 'replicated' input, raise InputError on every rank unless all hold the same input.

    Collective: one allgather of the shape, the labels and a 16-byte hash
    (nothing with one process).
    """
    if comm.size == 1:
        return
    labels, codes = np.unique(y, return_inverse=True)
    Xc = canonical_csr(X)
    _same_everywhere(comm.allgather_obj((Xc.shape, labels, input_digest(Xc, codes, sample_weight))))


def _same_everywhere(ranks: list) -> None:
    """InputError unless every rank's (shape, labels, digest) equals rank 0's, exactly."""
    shape, labels, digest = ranks[0]
    differ = [
        r
        for r, (s, lab, d) in enumerate(ranks)
        if s != shape or d != digest or not np.array_equal(lab, labels)
    ]
    if differ:
        raise InputError(
            "distributed='replicated' needs the same X, y and sample_weight on every rank, but "
            f"rank(s) {differ} differ from rank 0 (shapes {[r[0] for r in ranks]}); pass "
            "distributed='sharded' to give each rank its own rows"
        )


def _check_fit_input(est, X, y, sample_weight, sharded: bool):
    X, y = validate_data(
        est,
        X,
        y,
        accept_sparse="csr",
        dtype=np.float64,
        order="C",
        ensure_min_samples=0 if sharded else 1,
    )
    check_finite_rows(X)
    check_classification_targets(y)
    return X, y, check_sample_weight(sample_weight, X.shape[0])


def global_width(comm, X, sharded: bool) -> int:
    """The number of features over the ranks' X (collective when ``sharded``).

    A sparse shard may lack the highest feature indices; dense shards must agree.
    """
    if not sharded or comm.size == 1:
        return X.shape[1]
    widths = comm.allgather_obj((X.shape[1], sp.issparse(X)))
    n_features = max(w for w, _ in widths)
    if any(w != n_features and not is_sparse for w, is_sparse in widths):
        raise InputError(
            f"dense X must have the same number of features on every rank, got "
            f"{[w for w, _ in widths]}"
        )
    return n_features


def widen(X, n_features: int):
    """A sparse X with fewer columns, as CSR of ``n_features`` columns (the rest are zero)."""
    if not sp.issparse(X) or X.shape[1] >= n_features:
        return X
    X = sp.csr_matrix(X)
    return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))


def fit_input(est, comm, X, y, sample_weight, distributed: str) -> FitInput:
    """Validate (X, y, sample_weight) on every rank, agree, and keep this rank's rows.

    Collective: one agreement and one small allgather (both free on one process).
    Sets ``est.n_features_in_`` to the global number of features. Errors after
    the allgather are decided from gathered values: :class:`InputError`.
    """
    sharded = distributed == "sharded"
    X, y, sw = agree_on_input(comm, sharded, _check_fit_input, est, X, y, sample_weight, sharded)
    sparse = sp.issparse(X)
    Xc = canonical_csr(X)
    labels, inverse, counts = np.unique(y, return_inverse=True, return_counts=True)
    positive = np.unique(y[sw > 0])
    row_nnz = np.diff(Xc.indptr)
    digest = input_digest(Xc, inverse, sw) if not sharded and comm.size > 1 else ""
    mine = (Xc.shape, sparse, labels, counts, positive, int(row_nnz.max(initial=0)), digest)
    ranks = comm.allgather_obj(mine) if comm.size > 1 else [mine]
    n_features = max(r[0][1] for r in ranks)
    if not sharded:
        _same_everywhere([(r[0], r[2], r[6]) for r in ranks])
    if any(r[0][1] != n_features and not r[1] for r in ranks):
        raise InputError(
            f"dense X must have the same number of features on every rank, got "
            f"{[r[0][1] for r in ranks]}"
        )
    if sharded and sum(r[0][0] for r in ranks) == 0:
        raise InputError("Found array with 0 sample(s) on every rank: fit needs at least one")
    parts = ranks if sharded else [mine]
    classes = np.unique(np.concatenate([r[2] for r in parts if r[2].size]))
    class_counts = np.zeros(classes.size, dtype=np.int64)
    for r in parts:
        class_counts[np.searchsorted(classes, r[2])] += r[3]
    positive = np.unique(np.concatenate([r[4] for r in parts if r[4].size] or [r[4]]))
    if positive.size == 0:
        raise InputError(
            "sample_weight is zero for every sample: at least two classes need "
            "samples of positive weight"
        )
    if classes.size < 2:
        raise InputError(
            f"The number of classes has to be greater than one; got 1 class ({classes[0]!r})"
        )
    if positive.size < 2:
        raise InputError(
            f"all samples with positive sample_weight belong to one class "
            f"({positive[0]!r}); at least two classes are needed"
        )
    if positive.size < classes.size:
        missing = np.setdiff1d(classes, positive).tolist()
        raise InputError(
            f"class {missing} has no sample with positive sample_weight; "
            "remove its samples or give them a weight"
        )
    codes = np.searchsorted(classes, y).astype(np.float64)
    if sharded:
        rows = slice(0, Xc.shape[0])
        offset = sum(r[0][0] for r in ranks[: comm.rank])
        n_samples = sum(r[0][0] for r in ranks)
    else:
        offsets = nnz_balanced_offsets(row_nnz, comm.size)
        rows = slice(int(offsets[comm.rank]), int(offsets[comm.rank + 1]))
        offset, n_samples = rows.start, Xc.shape[0]
    Xl = Xc[rows]
    if Xl.shape[1] < n_features:  # a sparse shard without the highest feature indices
        Xl = sp.csr_matrix((Xl.data, Xl.indices, Xl.indptr), shape=(Xl.shape[0], n_features))
    est.n_features_in_ = n_features
    return FitInput(
        X=Xl,
        codes=codes[rows],
        sample_weight=sw[rows],
        classes=classes,
        class_counts=class_counts,
        offset=offset,
        n_samples=n_samples,
        n_features=n_features,
        max_row_nnz=max(r[5] for r in ranks),
        sparse=sparse,
    )


def class_weight_vector(class_weight, classes: np.ndarray, counts: np.ndarray | None) -> np.ndarray:
    """Weight of each class (scikit-learn's rule for 'balanced': n / (k * count)).

    A dict label that is no class is ignored with LIBSVM's warning (scikit-learn
    raises when it leaves a class unweighted); ``counts`` serves 'balanced' only.
    """
    if class_weight is None:
        return np.ones(classes.size)
    if isinstance(class_weight, str) and class_weight == "balanced":
        return counts.sum() / (classes.size * counts.astype(np.float64))
    if not isinstance(class_weight, dict):
        raise ParameterError(
            f"class_weight must be a dict, 'balanced' or None, got {class_weight!r}"
        )
    for message in unknown_weight_labels(class_weight, classes.tolist()):
        warnings.warn(message, UserWarning, stacklevel=3)
    w = np.ones(classes.size)
    position = {c: k for k, c in enumerate(classes.tolist())}
    for label, value in class_weight.items():
        if label in position:
            w[position[label]] = value
    return w


# -- outputs -----------------------------------------------------------------------------------
def ovr_decision(dec: np.ndarray, k: int) -> np.ndarray:
    """One-vs-rest scores from one-vs-one values, as scikit-learn's SVC computes them.

    Votes (pair (i, j) votes for i when its value is >= 0) plus the summed
    confidences squashed into (-1/3, 1/3), so they only break ties in votes.
    """
    votes = np.zeros((dec.shape[0], k))
    conf = np.zeros((dec.shape[0], k))
    p = 0
    for i in range(k):
        for j in range(i + 1, k):
            conf[:, i] += dec[:, p]
            conf[:, j] -= dec[:, p]
            votes[:, i] += dec[:, p] >= 0
            votes[:, j] += dec[:, p] < 0
            p += 1
    return votes + conf / (3 * (np.abs(conf) + 1))


def fit_report(report: dict, model, data: FitInput) -> dict:
    """The reduced run statistics plus the fit's totals, as plain JSON types."""
    hits, misses = (report["counts"].get(key, 0) for key in ("cache_hits", "cache_misses"))
    report["values"].update(
        n_samples=data.n_samples,
        n_features=data.n_features,
        n_support=int(model.support_vectors.shape[0]),
        objective=model.meta["objective"],
        cache_hit_rate=hits / (hits + misses) if hits + misses else 0.0,
        **{key: model.meta[key] for key in ("heuristic", "reconstruction", "approximate")},
    )
    return jsonable(report)


_PLAIN = frozenset({int, float, str, bool, type(None)})


def jsonable(obj):
    """Plain Python containers and numbers only, so that ``json.dumps`` takes it."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (list, tuple)):
        if all(type(v) in _PLAIN for v in obj):  # a trace: already plain, keep it whole
            return list(obj)
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def linear_coef(model) -> np.ndarray:
    """Primal weights sum_i coef_i x_i of each class pair of a linear-kernel model (LIBSVM sign)."""
    start = np.concatenate(([0], np.cumsum(model.n_support)))
    SV, coef, k = model.support_vectors, model.dual_coef, model.n_classes
    rows = []
    for i in range(k):
        for j in range(i + 1, k):
            si, sj = slice(start[i], start[i + 1]), slice(start[j], start[j + 1])
            rows.append(np.ravel(coef[j - 1, si] @ SV[si] + coef[i, sj] @ SV[sj]))
    return np.array(rows).reshape(len(rows), SV.shape[1])
