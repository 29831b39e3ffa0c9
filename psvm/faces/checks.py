"""One rank's checks of its fit input, before the ranks agree on the errors.

Each function looks at this rank's arguments only and raises ValueError (or
scikit-learn's TypeError); :func:`psvm.faces.agreement.agree_on_input` then
makes every rank raise the lowest failing rank's error.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from psvm.io.shard import MAX_SQUARED_NORM, first_overflowing_row


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
            f"{MAX_SQUARED_NORM:.3g}, so its dot products overflow float64 (largest "
            f"|value| {np.abs(values).max():.3g}); scale the features, e.g. with "
            "StandardScaler"
        )


def widen(X, n_features: int):
    """A sparse X with fewer columns, as CSR of ``n_features`` columns (the rest are zero)."""
    if not sp.issparse(X) or X.shape[1] >= n_features:
        return X
    X = sp.csr_matrix(X)
    return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))


def partial_fit_classes(classes, fitted: np.ndarray | None) -> np.ndarray:
    """The labels of a ``partial_fit``: given on the first call (``fitted`` None), then fixed."""
    if fitted is None:
        if classes is None:
            raise ValueError("classes must be passed on the first call to partial_fit.")
        classes = np.unique(np.asarray(classes))
        if classes.size < 2:
            raise ValueError(f"classes must hold at least two labels, got {classes!r}")
        return classes
    if classes is not None and not np.array_equal(np.unique(classes), fitted):
        raise ValueError(f"classes {classes!r} differ from the first call's {fitted!r}")
    return fitted


def plain_input(X, y) -> bool:
    """Whether ``validate_data`` and ``check_classification_targets`` would take X and y as
    they are: a finite C-ordered float64 ndarray (or float64 CSR matrix) of at least one row
    and column, and 1-D integer (or integral float) labels, one per row. Those two calls cost
    about 0.3 ms (iris), as much as scikit-learn's whole solve; anything else takes them.
    """
    if type(X) is np.ndarray:
        if X.dtype != np.float64 or X.ndim != 2 or not X.flags.c_contiguous:
            return False
        values = X
    elif type(X) is sp.csr_matrix and X.dtype == np.float64:
        values = X.data
    else:
        return False
    if type(y) is not np.ndarray or y.ndim != 1 or y.shape[0] != X.shape[0] or 0 in X.shape:
        return False
    with np.errstate(over="ignore"):
        if not np.isfinite(values.sum()):  # a NaN or inf (or an overflow): the full check
            return False
    if y.dtype.kind in "biu":
        return True
    # scikit-learn's integral test (type_of_target), where its int cast is exact
    return (
        y.dtype.kind == "f"
        and bool(np.isfinite(y.sum()))
        and np.abs(y).max() < 2**53
        and not np.any(y != y.astype(int))
    )


def check_fit_input(
    est, X, y, sample_weight, *, sharded: bool, partial_fit: bool, classes, task: str
):
    """(X, y, sample_weight, classes) of one rank, checked as scikit-learn and psvm need them.

    With ``sharded`` a rank may hold no rows. ``partial_fit``: ``classes`` is
    partial_fit's argument (the labels ``y`` may hold, given on the first
    call); after the first call X keeps ``est.n_features_in_`` columns (a
    narrower sparse X is padded). Otherwise ``classes`` stays None: the
    labels come from ``y`` over all ranks. ``task``: what y holds
    (:data:`psvm.faces.fit_input.TASKS`); 'novelty' ignores it, as scikit-learn's
    OneClassSVM does.
    """
    if task != "classification":
        return _check_unlabelled(est, X, y, sample_weight, sharded, task)
    fitted = getattr(est, "classes_", None) if partial_fit else None
    if fitted is not None:  # a sparse shard may lack the highest feature indices
        X = widen(X, est.n_features_in_)
    plain = fitted is None and plain_input(X, y)
    if plain:  # what validate_data(reset=True) does to them
        est.n_features_in_ = X.shape[1]
        if hasattr(est, "feature_names_in_"):
            del est.feature_names_in_
    else:
        X, y = validate_data(
            est,
            X,
            y,
            accept_sparse="csr",
            dtype=np.float64,
            order="C",
            ensure_min_samples=0 if sharded else 1,
            reset=fitted is None,
        )
    check_finite_rows(X)
    if not plain:
        check_classification_targets(y)
    sample_weight = check_sample_weight(sample_weight, X.shape[0])
    if partial_fit:
        classes = partial_fit_classes(classes, fitted)
        unknown = np.setdiff1d(np.unique(y), classes)
        if unknown.size:
            raise ValueError(f"y holds labels {unknown.tolist()} that are not in classes")
    return X, y, sample_weight, classes


def _check_unlabelled(est, X, y, sample_weight, sharded: bool, task: str):
    """check_fit_input for regression targets (finite numbers) or no y at all."""
    kw = dict(accept_sparse="csr", dtype=np.float64, order="C")
    kw["ensure_min_samples"] = 0 if sharded else 1
    if task == "novelty":
        X = validate_data(est, X, **kw)
        y = np.zeros(X.shape[0])
    else:
        X, y = validate_data(est, X, y, y_numeric=True, **kw)
        y = np.asarray(y, dtype=np.float64)
    check_finite_rows(X)
    return X, y, check_sample_weight(sample_weight, X.shape[0]), None
