"""The fit input of a precomputed or callable kernel: this rank's rows of the Gram matrix.

scikit-learn's rules: ``kernel='precomputed'`` takes the (n, n) Gram matrix K(X, X)
(dense: a sparse one is refused, as scikit-learn does); ``kernel=f`` computes it as
f(X, X) from any X that f accepts (a list of strings too), and predictions as
f(X_test, X). Each rank holds only its rows of the Gram matrix: with 'replicated'
a block of the whole matrix's rows (a callable computes just those, f(X_block, X)),
with 'sharded' the rows it passed (a callable's X is gathered first: f needs every
row as its second argument). The solver reads them as LIBSVM's ``-t 4`` rows: the
serial number (global row index + 1) in column 0, then K(x, x_j) in column j.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_consistent_length

from psvm.faces.agreement import InputError, agree_on_input
from psvm.faces.fit_input import FitInput, fit_input
from psvm.io.shard import nnz_balanced_offsets
from psvm.kernels import canonical_csr


def gram_fit_input(est, comm, X, y, sample_weight, distributed: str, **kwargs) -> FitInput:
    """This rank's Gram rows with their serial numbers; collective. A callable kernel's
    training X (all ranks' rows), which its predictions need, goes to ``est._Xfit``.

    ``kwargs`` go to :func:`~psvm.faces.fit_input.fit_input` (``task``...).
    """
    X_fit = None
    if callable(est.kernel):
        X, y, sample_weight, X_fit = _callable_rows(est, comm, X, y, sample_weight, distributed)
        distributed = "sharded"  # each rank now holds its own rows of the Gram matrix
    else:
        agree_on_input(comm, distributed == "sharded", _dense_gram, X)
    data = fit_input(est, comm, X, y, sample_weight, distributed, **kwargs)
    if data.n_features != data.n_samples:  # agreed values: every rank raises alike
        raise InputError(
            "Precomputed matrix must be a square matrix. Input is a "
            f"{data.n_samples}x{data.n_features} matrix."
        )
    if callable(est.kernel):
        est._Xfit = X_fit
        if hasattr(est, "n_features_in_"):
            del est.n_features_in_  # any X goes to a callable: scikit-learn counts no features
    return with_serials(data)


def _dense_gram(X) -> None:
    if sp.issparse(X):
        raise TypeError("Sparse precomputed kernels are not supported.")  # scikit-learn's


def with_serials(data: FitInput) -> FitInput:
    """``data`` with LIBSVM's column 0, each row's serial number (global index + 1), before
    its Gram values (column j: K(x, x_j))."""
    serial = data.offset + 1.0 + np.arange(data.X.shape[0])
    X = sp.hstack([sp.csr_matrix(serial[:, None]), data.X], format="csr")
    return dataclasses.replace(data, X=canonical_csr(X), max_row_nnz=data.max_row_nnz + 1)


def _n_samples(X) -> int:
    return X.shape[0] if hasattr(X, "shape") else len(X)


def _rows(X, start: int, stop: int):
    """Rows start..stop-1 of any X a kernel may take (arrays, sparse matrices, lists, frames)."""
    return X.iloc[start:stop] if hasattr(X, "iloc") else X[start:stop]


def _gathered(parts: list):
    """The ranks' X joined in rank order."""
    if all(sp.issparse(p) for p in parts):
        return sp.vstack(parts, format="csr")
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts)
    if all(isinstance(p, (list, tuple)) for p in parts):
        return [row for p in parts for row in p]
    raise TypeError(
        "distributed='sharded' with a callable kernel takes X as arrays, sparse matrices "
        f"or lists on every rank, got {sorted({type(p).__name__ for p in parts})}"
    )


def _callable_rows(est, comm, X, y, sample_weight, distributed: str):
    """(this rank's Gram rows f(X_rows, X_all), its y, its sample weights, X_all)."""
    sharded = distributed == "sharded"

    def lengths():
        check_consistent_length(*(a for a in (X, y, sample_weight) if a is not None))

    agree_on_input(comm, sharded, lengths)
    if sharded:
        # the same parts on every rank, so the same error: agreed, it ends the fit cleanly
        X_all = (
            agree_on_input(comm, False, _gathered, comm.allgather_obj(X)) if comm.size > 1 else X
        )
        start = comm.exscan_sum(_n_samples(X))
        mine, n_mine = X, _n_samples(X)
    else:
        X_all, n = X, _n_samples(X)
        offsets = nnz_balanced_offsets(np.zeros(n, dtype=np.int64), comm.size)
        start, stop = int(offsets[comm.rank]), int(offsets[comm.rank + 1])
        mine = X if comm.size == 1 else _rows(X, start, stop)  # one process: f(X, X) itself
        n_mine = stop - start
        y = None if y is None else np.asarray(y)[start:stop]
        if sample_weight is not None and np.ndim(sample_weight):
            sample_weight = np.asarray(sample_weight)[start:stop]
    n_all = _n_samples(X_all)

    def gram():
        if n_mine == 0:  # a rank without rows: kernels such as rbf_kernel refuse empty input
            return np.zeros((0, n_all))
        K = est.kernel(mine, X_all)
        K = np.asarray(K.toarray() if sp.issparse(K) else K, dtype=np.float64)
        if K.shape != (n_mine, n_all):
            raise ValueError(
                f"X.shape[0] should be equal to X.shape[1]: the kernel returned a "
                f"{'x'.join(map(str, K.shape))} matrix for {n_mine} x {n_all} samples"
            )
        return K

    return agree_on_input(comm, sharded, gram), y, sample_weight, X_all
