"""scikit-learn face of one-class SVM on the distributed engine: :class:`psvm.OneClassSVM`."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import OutlierMixin

from psvm.kernel_svm import SingleModelSVM


class OneClassSVM(OutlierMixin, SingleModelSVM):
    """Unsupervised outlier detection by LIBSVM's one-class SVM, on the distributed solver.

    The model of :class:`sklearn.svm.OneClassSVM`, trained over the ranks of an
    MPI communicator as :class:`psvm.SVC` is: under ``mpiexec -n P`` every rank
    calls :meth:`fit` and ends with the same model, bit for bit, whatever P.

    Parameters
    ----------
    kernel, degree, gamma, coef0, tol, cache_size, verbose, max_iter
        As :class:`psvm.SVC`.
    nu : float, default=0.5
        An upper bound on the fraction of training errors and a lower bound on
        the fraction of support vectors; in (0, 1].
    shrinking, heuristic, reconstruction, selection, n_threads, n_jobs, comm, \
distributed, checkpoint, checkpoint_seconds, checkpoint_iters, resume
        As :class:`psvm.SVC`.

    Attributes
    ----------
    support_, support_vectors_, coef_, n_support_, n_iter_, fit_status_, shape_fit_, \
n_features_in_, fit_stats_
        As :class:`psvm.SVR`.
    dual_coef_ : {ndarray, sparse matrix} of shape (1, n_SV)
        alpha of each support vector.
    intercept_ : ndarray of shape (1,)
        -rho.
    offset_ : ndarray of shape (1,)
        rho: ``decision_function = score_samples - offset_``.

    Examples
    --------
    >>> import numpy as np, psvm
    >>> X = np.array([[0.0], [0.44], [0.45], [0.46], [1.0]])
    >>> psvm.OneClassSVM().fit(X).predict([[0.45], [2.0]])
    array([ 1, -1])
    """

    _svm_type = "one_class"
    _task = "novelty"
    _own_params = ("nu",)

    def __init__(
        self,
        *,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        tol=1e-3,
        nu=0.5,
        shrinking=True,
        cache_size=200,
        verbose=False,
        max_iter=-1,
        heuristic=None,
        reconstruction="single",
        selection="second",
        n_threads=None,
        n_jobs=None,
        comm=None,
        distributed="replicated",
        checkpoint=None,
        checkpoint_seconds=600.0,
        checkpoint_iters=0,
        resume=False,
    ):
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.nu = nu
        self.shrinking = shrinking
        self.cache_size = cache_size
        self.verbose = verbose
        self.max_iter = max_iter
        self.heuristic = heuristic
        self.reconstruction = reconstruction
        self.selection = selection
        self.n_threads = n_threads
        self.n_jobs = n_jobs
        self.comm = comm
        self.distributed = distributed
        self.checkpoint = checkpoint
        self.checkpoint_seconds = checkpoint_seconds
        self.checkpoint_iters = checkpoint_iters
        self.resume = resume

    def _set_model(self, model, support, shape_fit, sparse: bool) -> None:
        super()._set_model(model, support, shape_fit, sparse)
        self.offset_ = model.rho.copy()

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Signed distance to the separating surface: positive for inliers.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        dec : ndarray of shape (n_samples,)
        """
        return self._values(X)[:, 0]

    def score_samples(self, X: ArrayLike) -> np.ndarray:
        """The raw scoring function, ``decision_function(X) + offset_``."""
        return self.decision_function(X) + self.offset_

    def predict(self, X: ArrayLike) -> np.ndarray:
        """+1 for inliers and -1 for outliers (LIBSVM: decision value > 0).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,), int
        """
        return np.where(self.decision_function(X) > 0, 1, -1)
