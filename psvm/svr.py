"""scikit-learn faces of the regressors on the distributed engine: :class:`psvm.SVR`
(epsilon-SVR) and :class:`psvm.NuSVR`."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import RegressorMixin

from psvm.kernel_svm import SingleModelSVM


class SVR(RegressorMixin, SingleModelSVM):
    """Epsilon-Support Vector Regression trained by the distributed SMO solver.

    The model of :class:`sklearn.svm.SVR` (LIBSVM's epsilon-SVR dual, 2l
    variables over l rows), trained over the ranks of an MPI communicator as
    :class:`psvm.SVC` is: under ``mpiexec -n P`` every rank calls :meth:`fit`
    and ends with the same model, bit for bit, whatever P.

    Parameters
    ----------
    kernel, degree, gamma, coef0, tol, cache_size, verbose, max_iter
        As :class:`psvm.SVC`.
    C : float, default=1.0
        Regularization parameter; ``C * sample_weight[i]`` bounds sample i.
    epsilon : float, default=0.1
        Width of the tube in which errors cost nothing; >= 0.
    reconstruction : {'single', 'multi', 'approximate'}, default='multi'
        As :class:`psvm.SVC`; 'multi' by default: a sample eliminated by
        mistake and found only at the end makes a regression's long end game
        run again (docs/performance.md).
    shrinking, heuristic, selection, n_threads, n_jobs, comm, distributed, \
checkpoint, checkpoint_seconds, checkpoint_iters, resume
        As :class:`psvm.SVC`.

    Attributes
    ----------
    support_ : ndarray of shape (n_SV,), int32
        Global row indices of the support vectors.
    support_vectors_ : {ndarray, sparse matrix} of shape (n_SV, n_features)
    dual_coef_ : {ndarray, sparse matrix} of shape (1, n_SV)
        alpha - alpha* of each support vector (LIBSVM's ``sv_coef``).
    intercept_ : ndarray of shape (1,)
        -rho.
    coef_ : {ndarray, sparse matrix} of shape (1, n_features)
        Primal weights, 'linear' kernel only; read-only, sparse when
        ``support_vectors_`` is.
    n_support_ : ndarray of shape (1,), int32
    n_iter_ : int
    fit_status_ : int
    shape_fit_ : tuple of int
    n_features_in_ : int
    fit_stats_ : dict

    Examples
    --------
    >>> import numpy as np, psvm
    >>> X = np.arange(10.0).reshape(-1, 1)
    >>> reg = psvm.SVR(kernel="linear", C=10).fit(X, 2 * X.ravel())
    >>> round(float(reg.predict([[4.5]])[0]), 1)
    9.0
    """

    _svm_type = "epsilon_svr"
    _task = "regression"
    _own_params = ("C", "epsilon")

    def __init__(
        self,
        *,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        tol=1e-3,
        C=1.0,
        epsilon=0.1,
        shrinking=True,
        cache_size=200,
        verbose=False,
        max_iter=-1,
        heuristic=None,
        reconstruction="multi",
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
        self.C = C
        self.epsilon = epsilon
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

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Predicted targets: sum_i coef_i K(x_i, x) - rho (local to the calling rank).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        return self._values(X, "predict")


class NuSVR(SVR):
    """Nu-Support Vector Regression trained by the distributed SMO solver.

    The model of :class:`sklearn.svm.NuSVR` (LIBSVM's nu-SVR and its Solver_NU),
    trained over the ranks of an MPI communicator as :class:`SVR` is. ``nu``
    replaces ``epsilon``, which the solver finds; the other parameters and the
    attributes are :class:`SVR`'s.

    Parameters
    ----------
    nu : float, default=0.5
        An upper bound on the fraction of training errors and a lower bound on
        the fraction of support vectors; in (0, 1].
    C : float, default=1.0
        Regularization parameter; ``C * sample_weight[i]`` bounds sample i.

    Examples
    --------
    >>> import numpy as np, psvm
    >>> X = np.arange(10.0).reshape(-1, 1)
    >>> reg = psvm.NuSVR(kernel="linear", C=10).fit(X, 2 * X.ravel())
    >>> round(float(reg.predict([[4.5]])[0]), 1)
    9.0
    """

    _svm_type = "nu_svr"
    _own_params = ("C", "nu")

    def __init__(
        self,
        *,
        nu=0.5,
        C=1.0,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        shrinking=True,
        tol=1e-3,
        cache_size=200,
        verbose=False,
        max_iter=-1,
        heuristic=None,
        reconstruction="multi",
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
        super().__init__(
            C=C,
            kernel=kernel,
            degree=degree,
            gamma=gamma,
            coef0=coef0,
            shrinking=shrinking,
            tol=tol,
            cache_size=cache_size,
            verbose=verbose,
            max_iter=max_iter,
            heuristic=heuristic,
            reconstruction=reconstruction,
            selection=selection,
            n_threads=n_threads,
            n_jobs=n_jobs,
            comm=comm,
            distributed=distributed,
            checkpoint=checkpoint,
            checkpoint_seconds=checkpoint_seconds,
            checkpoint_iters=checkpoint_iters,
            resume=resume,
        )
        del self.epsilon
        self.nu = nu
