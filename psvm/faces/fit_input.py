"""The fit input of both faces: checked, agreed over the ranks, cut to this rank's rows.

With ``distributed='replicated'`` each rank passes the whole data set and
keeps a contiguous block of rows (balanced by non-zeros); with ``'sharded'``
each rank passes only its own rows (possibly none) and global row indices
follow rank order.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from psvm._params import ParameterError, check_class_weights, unknown_weight_labels
from psvm.faces.agreement import agree_on_input, agree_on_training_set
from psvm.faces.checks import check_fit_input, widen
from psvm.io.shard import Shard, nnz_balanced_offsets
from psvm.kernels import canonical_csr, csr_of
from psvm.svc.state import dense_csr

TASKS = ("classification", "regression", "novelty")  # what y holds: labels, targets, nothing


@contextmanager
def refusable(est) -> Iterator[None]:
    """A fit refused or stopped inside the block (bad input or parameters, a problem that
    cannot be trained, Ctrl-C) leaves ``est``'s attributes as they were, so a fitted model
    still predicts and an unfitted one stays unfitted: validating X set ``n_features_in_``,
    a fit sets ``class_weight_`` and a callable kernel's training X before the solver runs."""
    kept = dict(est.__dict__)
    try:
        yield
    except BaseException:
        est.__dict__.clear()
        est.__dict__.update(kept)
        raise


@dataclass
class FitInput:
    """This rank's rows and the globally agreed facts about the whole training set."""

    X: sp.csr_matrix  # local rows: float64, canonical CSR, n_features columns (a Gram
    # matrix's rows: one more, LIBSVM's serial numbers first, psvm.faces.gram_input)
    codes: np.ndarray  # class index (into classes) of each local row, or its target; float64
    sample_weight: np.ndarray  # of the local rows
    classes: np.ndarray  # sorted distinct labels over all ranks
    class_counts: np.ndarray  # global number of rows of each class
    offset: int  # global index of the first local row
    n_samples: int
    n_features: int
    max_row_nnz: int
    sparse: bool  # X was passed sparse (on this rank)

    def shard(self) -> Shard:
        return Shard(
            X=self.X,
            y=self.codes,
            offset=self.offset,
            n_samples=self.n_samples,
            n_features=self.X.shape[1],
            max_row_nnz=self.max_row_nnz,
        )


def fit_input(
    est,
    comm,
    X,
    y,
    sample_weight,
    distributed: str,
    *,
    partial_fit: bool = False,
    classes=None,
    every_class_weighted: bool = True,
    task: str = "classification",
) -> FitInput:
    """Validate (X, y, sample_weight) on every rank, agree, and keep this rank's rows.

    Collective: one agreement and one small allgather (both free on one process).
    Sets ``est.n_features_in_`` to the global number of features. Errors after
    the allgather are decided from gathered values: :class:`InputError`.

    ``partial_fit``: ``classes`` is partial_fit's argument, needed on the
    first call (while ``est`` has no ``classes_``) and fixed afterwards.
    ``every_class_weighted``: each class needs a sample of positive weight
    (the kernel solver leaves zero-weight samples out; SGD steps over them).
    ``task`` (:data:`TASKS`): with 'regression' the codes are the targets and
    there are no classes; with 'novelty' y is ignored (zeros).
    """
    labelled = task == "classification"
    sharded = distributed == "sharded"
    X, y, sw, classes = agree_on_input(
        comm,
        sharded,
        check_fit_input,
        est,
        X,
        y,
        sample_weight,
        sharded=sharded,
        partial_fit=partial_fit,
        classes=classes,
        task=task,
    )
    Xc = as_csr(X)
    facts = agree_on_training_set(
        comm,
        Xc,
        y,
        sw,
        sparse=sp.issparse(X),
        sharded=sharded,
        classes=classes,
        every_class_weighted=every_class_weighted,
        labelled=labelled,
        feature_names=getattr(est, "feature_names_in_", None),
    )
    if sharded or comm.size == 1:
        rows = slice(0, Xc.shape[0])
    else:  # the whole set on every rank: keep a block of similar work
        offsets = nnz_balanced_offsets(np.diff(Xc.indptr), comm.size)
        rows = slice(int(offsets[comm.rank]), int(offsets[comm.rank + 1]))
    est.n_features_in_ = facts.n_features
    if facts.feature_names is not None:  # (a rank without rows may have passed an array)
        est.feature_names_in_ = np.asarray(facts.feature_names, dtype=object)
    mine = Xc if rows == slice(0, Xc.shape[0]) else Xc[rows]  # (scipy copies every row)
    return FitInput(
        X=widen(mine, facts.n_features),  # a sparse shard may lack the last features
        codes=np.searchsorted(facts.classes, y[rows]).astype(np.float64) if labelled else y[rows],
        sample_weight=sw[rows],
        classes=facts.classes,
        class_counts=facts.class_counts,
        offset=facts.rows_before + rows.start,
        n_samples=facts.n_samples,
        n_features=facts.n_features,
        max_row_nnz=facts.max_row_nnz,
        sparse=sp.issparse(X),
    )


def as_csr(X) -> sp.csr_matrix:
    """:func:`~psvm.kernels.canonical_csr` of checked X; a dense X is converted in one compiled
    pass (:func:`~psvm.svc.state.dense_csr`), to the same arrays at a quarter of scipy's cost
    (digits: 0.4 ms against 1.5 ms)."""
    if sp.issparse(X) or not X.flags.writeable or X.size >= 2**31:  # (read-only: another
        return canonical_csr(X)  # numba specialisation; 2^31 entries: 64-bit indices)
    data, indices, indptr = dense_csr(X)
    Xc = csr_of(indptr, indices, data, X.shape)
    Xc.has_canonical_format = True  # sorted columns, no duplicates
    return Xc


def class_weight_vector(
    class_weight, classes: np.ndarray, counts: np.ndarray | None, zero_ok: bool = False
) -> np.ndarray:
    """Weight of each class (scikit-learn's rule for 'balanced': n / (k * count)).

    A dict label that is no class is ignored with LIBSVM's warning (scikit-learn
    raises when it leaves a class unweighted); ``counts`` serves 'balanced'
    only, and a class without rows (a partial_fit batch) counts as one.
    """
    if class_weight is None:
        return np.ones(classes.size)
    if isinstance(class_weight, str) and class_weight == "balanced":
        return counts.sum() / (classes.size * np.maximum(counts, 1).astype(np.float64))
    if not isinstance(class_weight, dict):
        raise ParameterError(
            f"class_weight must be a dict, 'balanced' or None, got {class_weight!r}"
        )
    for message in unknown_weight_labels(class_weight, classes.tolist()):
        warnings.warn(message, UserWarning, stacklevel=3)
    w = np.ones(classes.size)
    position = {c: k for k, c in enumerate(classes.tolist())}
    check_class_weights(class_weight, zero_ok)
    for label, value in class_weight.items():
        if label in position:
            w[position[label]] = value
    return w
