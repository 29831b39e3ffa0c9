"""scikit-learn face of the distributed kernel SVM: :class:`psvm.SVC`."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from psvm._params import validate_svc_params
from psvm.comm import Comm, world
from psvm.io.shard import Shard, nnz_balanced_offsets
from psvm.stats import Stats, reduce_stats
from psvm.svc.multiclass import fit_ovo


def _comm_of(comm) -> Comm:
    return world() if comm is None else Comm(comm)


def local_block(comm: Comm, X: sp.csr_matrix, distributed: str):
    """This rank's (rows slice, offset, n_samples) for replicated or sharded input."""
    if distributed == "replicated":
        offsets = nnz_balanced_offsets(np.diff(X.indptr), comm.size)
        lo, hi = int(offsets[comm.rank]), int(offsets[comm.rank + 1])
        return slice(lo, hi), lo, X.shape[0]
    n_local = X.shape[0]
    return slice(0, n_local), comm.exscan_sum(n_local), comm.sum_(n_local)


class SVC(ClassifierMixin, BaseEstimator):
    """C-Support Vector Classification trained by a distributed SMO solver.

    The same model as :class:`sklearn.svm.SVC` (LIBSVM's dual, one-vs-one
    for several classes), trained over the ranks of an MPI communicator.
    Outside ``mpiexec`` it runs as one process.

    Parameters
    ----------
    C : float, default=1.0
        Regularization parameter; must be strictly positive.
    kernel : {'linear', 'poly', 'rbf', 'sigmoid'}, default='rbf'
    degree : int, default=3
        Degree of the 'poly' kernel.
    gamma : {'scale', 'auto'} or float, default='scale'
        Kernel coefficient: 'scale' is 1 / (n_features * X.var()), 'auto' 1 / n_features.
    coef0 : float, default=0.0
        Independent term of the 'poly' and 'sigmoid' kernels.
    tol : float, default=1e-3
        Stop when the maximal violation m - M falls below ``tol``.
    cache_size : float, default=200
        Kernel column cache per rank, in MB.
    class_weight : dict or 'balanced', default=None
        Multiply C by the weight of each class.
    verbose : bool, default=False
        Print solver progress on rank 0.
    max_iter : int, default=-1
        Iteration limit per binary problem, -1 for none.
    decision_function_shape : {'ovo', 'ovr'}, default='ovr'
    break_ties : bool, default=False
        With 'ovr' and more than two classes, predict by the argmax of
        ``decision_function`` instead of one-vs-one votes.
    selection : {'second', 'first'}, default='second'
        Working-set selection: second-order gain (LIBSVM) or maximal violating pair.
    n_jobs : int, default=None
        numba threads inside each rank (prediction); None leaves numba's default.
    comm : mpi4py communicator, default=None
        None: the world communicator under ``mpiexec``, else one process.
    distributed : {'replicated', 'sharded'}, default='replicated'
        'replicated': every rank passes the whole data set and trains on its
        block of rows; 'sharded': every rank passes only its own rows.

    Attributes
    ----------
    classes_, support_, support_vectors_, dual_coef_, intercept_, n_support_,
    n_iter_, fit_status_, shape_fit_, n_features_in_ : as :class:`sklearn.svm.SVC`
        (``support_`` holds global row indices; in 'sharded' mode they index
        the concatenation of the ranks' rows in rank order).
    fit_stats_ : dict
        Run statistics: iterations, time split, communication, cache hit rate.
    """

    def __init__(
        self,
        C=1.0,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        tol=1e-3,
        cache_size=200,
        class_weight=None,
        verbose=False,
        max_iter=-1,
        decision_function_shape="ovr",
        break_ties=False,
        selection="second",
        n_jobs=None,
        comm=None,
        distributed="replicated",
    ):
        self.C = C
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.verbose = verbose
        self.max_iter = max_iter
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.selection = selection
        self.n_jobs = n_jobs
        self.comm = comm
        self.distributed = distributed

    def fit(self, X, y, sample_weight=None):
        """Fit the model on (X, y); collective when ``comm`` has several ranks."""
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, order="C")
        check_classification_targets(y)
        if self.decision_function_shape not in ("ovo", "ovr"):
            raise ValueError(
                "decision_function_shape must be 'ovo' or 'ovr', "
                f"got {self.decision_function_shape!r}"
            )
        if self.distributed not in ("replicated", "sharded"):
            raise ValueError(
                f"distributed must be 'replicated' or 'sharded', got {self.distributed!r}"
            )
        comm = _comm_of(self.comm)
        self._sparse = sp.issparse(X)
        Xc = sp.csr_matrix(X, dtype=np.float64)
        Xc.sort_indices()
        y = np.asarray(y)
        if self.distributed == "sharded":
            classes = np.unique(np.concatenate(comm.allgather_obj(np.unique(y))))
        else:
            classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(
                f"The number of classes has to be greater than one; got {classes.size} class"
            )
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64)
        params = validate_svc_params(
            C=self.C, kernel=self.kernel, degree=self.degree, gamma=self.gamma,
            coef0=self.coef0, tol=self.tol, cache_size=self.cache_size,
            max_iter=self.max_iter, selection=self.selection,
            class_weight=self._class_weights(classes, y), verbose=self.verbose,
        )  # fmt: skip
        self._set_threads()
        rows, offset, n_samples = local_block(comm, Xc, self.distributed)
        codes = np.searchsorted(classes, y).astype(np.float64)
        Xl = Xc[rows]
        shard = Shard(
            X=Xl,
            y=codes[rows],
            offset=offset,
            n_samples=n_samples,
            n_features=Xc.shape[1],
            max_row_nnz=comm.max_(int(np.diff(Xl.indptr).max(initial=0))),
        )
        stats = Stats()
        log = print if self.verbose and comm.rank == 0 else None
        with stats.timer("train"):
            model, support = fit_ovo(
                comm, shard, params, np.arange(classes.size, dtype=np.float64),
                sample_weight=sw[rows], stats=stats, log=log,
            )  # fmt: skip
        self.fit_stats_ = reduce_stats(comm, stats)
        self.classes_ = classes
        self._model = model
        self._gamma = model.gamma
        self.support_ = support.astype(np.int32)
        SV = model.support_vectors
        self.support_vectors_ = SV if self._sparse else SV.toarray()
        self.n_support_ = model.n_support.astype(np.int32)
        self.dual_coef_ = model.dual_coef.copy()
        self.intercept_ = -model.rho.copy()
        if classes.size == 2:  # sklearn's sign convention: positive means classes_[1]
            self.dual_coef_ *= -1
            self.intercept_ *= -1
        self.n_iter_ = np.asarray(model.meta["n_iter"], dtype=np.int32)
        self.fit_status_ = int(model.meta["status"])
        self.shape_fit_ = X.shape
        if self.fit_status_:
            import warnings

            warnings.warn(
                f"Solver terminated early (max_iter={self.max_iter}). Consider "
                "pre-processing your data with StandardScaler or MinMaxScaler.",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def _class_weights(self, classes, y) -> dict:
        """Class weights keyed by class code (0..k-1), as the solver sees the labels."""
        cw = self.class_weight
        if cw is None:
            return {}
        if cw == "balanced":
            w = compute_class_weight("balanced", classes=classes, y=y)
            return dict(enumerate(w))
        if not isinstance(cw, dict):
            raise ValueError(f"class_weight must be a dict, 'balanced' or None, got {cw!r}")
        unknown = [c for c in cw if c not in classes]
        if unknown:
            raise ValueError(f"class_weight has labels {unknown} that are not in y")
        return {int(np.searchsorted(classes, c)): w for c, w in cw.items()}

    def _set_threads(self) -> None:
        if self.n_jobs is not None:
            import numba

            n = numba.config.NUMBA_NUM_THREADS if self.n_jobs == -1 else int(self.n_jobs)
            numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))

    def _validate_X(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sort_indices()
        return X

    def _ovo(self, X) -> np.ndarray:
        return self._model.decision_function(self._validate_X(X))

    def decision_function(self, X):
        """Signed distances: (n_samples,) for two classes, else 'ovo' or 'ovr' columns."""
        dec = self._ovo(X)
        if self.classes_.size == 2:
            return -dec[:, 0]
        if self.decision_function_shape == "ovr":
            from sklearn.utils.multiclass import _ovr_decision_function

            return _ovr_decision_function(dec < 0, -dec, self.classes_.size)
        return dec

    def predict(self, X):
        """Class labels by LIBSVM's one-vs-one vote (or ``break_ties`` argmax)."""
        if self.break_ties and self.decision_function_shape == "ovo":
            raise ValueError(
                "break_ties must be False when decision_function_shape is 'ovo'"
            )
        if self.break_ties and self.decision_function_shape == "ovr" and self.classes_.size > 2:
            return self.classes_[np.argmax(self.decision_function(X), axis=1)]
        codes = self._model.predict(self._validate_X(X))
        return self.classes_[codes.astype(np.intp)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
