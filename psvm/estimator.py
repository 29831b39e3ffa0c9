"""scikit-learn face of the distributed kernel SVM: :class:`psvm.SVC`."""

from __future__ import annotations

import copy
import dataclasses
import numbers
import os
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, validate_data

from psvm._params import ParameterError, validate_svc_params
from psvm.faces import (
    check_face_params,
    class_weight_vector,
    fit_comm,
    fit_input,
    fit_report,
    linear_coef,
    numba_threads,
    ovr_decision,
    resolve_heuristic,
)
from psvm.model import SVCModel
from psvm.stats import Stats, reduce_stats
from psvm.svc.checkpoint import make_checkpoint_config
from psvm.threads import check_threads, rank_threads


class SVC(ClassifierMixin, BaseEstimator):
    """C-Support Vector Classification trained by a distributed SMO solver.

    The model of :class:`sklearn.svm.SVC` (LIBSVM's C-SVC dual, one-vs-one for
    several classes), trained over the ranks of an MPI communicator. Under
    ``mpiexec -n P`` every rank calls :meth:`fit` (a collective) and ends with
    the same fitted estimator; outside ``mpiexec`` it runs as one process.
    :meth:`predict` and :meth:`decision_function` are local to the calling rank.

    Parameters
    ----------
    C : float, default=1.0
        Regularization parameter; strictly positive. Sample ``i`` of class ``c``
        gets the bound ``C * class_weight[c] * sample_weight[i]``.
    kernel : {'linear', 'poly', 'rbf', 'sigmoid'}, default='rbf'
        Kernel ('precomputed' and callables are not supported).
    degree : int, default=3
        Degree of the 'poly' kernel, from 0 to 2**31 - 1 (LIBSVM's int). The
        power is LIBSVM's ``powi`` (repeated squaring): the same kernel values.
    gamma : {'scale', 'auto'} or float, default='scale'
        Kernel coefficient of 'rbf', 'poly' and 'sigmoid': 'scale' is
        ``1 / (n_features * X.var())`` over the whole training set, 'auto' is
        ``1 / n_features``.
    coef0 : float, default=0.0
        Independent term of the 'poly' and 'sigmoid' kernels.
    shrinking : bool or str, default=True
        Whether to eliminate bound samples during training: True uses
        ``heuristic='frequent'``, False ``'none'``; a heuristic name is also
        accepted. Ignored when ``heuristic`` is given.
    tol : float, default=1e-3
        Stop when the maximal violation ``m - M`` is below ``tol``.
    cache_size : float, default=200
        Kernel column cache of each rank, in MB.
    class_weight : dict or 'balanced', default=None
        Multiply C of class ``c`` by ``class_weight[c]``; 'balanced' uses
        ``n_samples / (n_classes * np.bincount(y))`` over all ranks.
    verbose : bool, default=False
        Print LIBSVM-style progress lines on rank 0.
    max_iter : int, default=-1
        Iteration limit per binary problem, -1 for none.
    decision_function_shape : {'ovo', 'ovr'}, default='ovr'
        Shape of :meth:`decision_function` with more than two classes.
    break_ties : bool, default=False
        With 'ovr' and more than two classes, predict the argmax of
        :meth:`decision_function` instead of the one-vs-one vote winner.
    random_state : int, RandomState instance or None, default=None
        Accepted for scikit-learn compatibility and otherwise unused: the
        solver is deterministic (the same model for any number of ranks).
    heuristic : str, default=None
        Sample elimination policy: one of 'none', 'earliest', 'frequent',
        'percent-1', 'percent-5', 'percent-10', 'libsvm', 'streak-3',
        'gap-triggered', 'lazy'. None takes it from ``shrinking``; when given, it wins.
    reconstruction : {'single', 'multi', 'approximate'}, default='single'
        When eliminated samples are re-checked: once at the end, also at gap
        thresholds, or never ('approximate': the model may not be optimal).
    selection : {'second', 'first'}, default='second'
        Working-set selection: LIBSVM's second-order gain, or the maximal
        violating pair.
    n_threads : int, default=None
        numba threads of each rank. None or 0: during :meth:`fit`, the ranks
        on one node share its cores (``cores // ranks on the node`` threads
        each, at least one), so they never run more threads than cores.
        A positive int is used as given, within numba's pool
        (``NUMBA_NUM_THREADS``). :meth:`predict` and :meth:`decision_function`
        (local to a rank) use it too; by default they share the cores by the
        count of ranks on the node that mpiexec reports.
    n_jobs : int, default=None
        The older knob: numba threads inside each rank during fit and predict
        (-1: all, -2: all but one); used only when ``n_threads`` is None.
        Giving both is an error.
    comm : mpi4py.MPI.Comm, default=None
        Communicator to train over; None is the world under ``mpiexec`` and
        one process otherwise. It is not pickled: a loaded estimator has
        ``comm=None``. :func:`~sklearn.base.clone` passes it by reference.
    distributed : {'replicated', 'sharded'}, default='replicated'
        'replicated': every rank passes the same whole data set and trains on
        a block of its rows; 'sharded': every rank passes only its own rows.
    checkpoint : str or path-like, default=None
        File where rank 0 saves the solver state during :meth:`fit`
        (atomically), so a killed fit can resume; None: no checkpoints.
    checkpoint_seconds : float, default=600.0
        Seconds between checkpoints (rank 0's clock); 0 turns the clock off.
    checkpoint_iters : int, default=0
        Also save every that many solver iterations; 0: off.
    resume : bool, default=False
        Continue from ``checkpoint`` if the file exists (with any number of
        ranks), else start afresh. A checkpoint of other data or parameters
        is refused. The result is the model of an uninterrupted fit.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Sorted class labels, over all ranks.
    class_weight_ : ndarray of shape (n_classes,)
        Weight of each class.
    support_ : ndarray of shape (n_SV,), int32
        Global row indices of the support vectors, grouped by class; with
        'sharded' they index the concatenation of the ranks' rows in rank order.
    support_vectors_ : {ndarray, sparse matrix} of shape (n_SV, n_features)
        Sparse when fitted on sparse X or read from a LIBSVM model file.
    n_support_ : ndarray of shape (n_classes,), int32
    dual_coef_ : {ndarray, sparse matrix} of shape (n_classes - 1, n_SV)
        As :class:`sklearn.svm.SVC` (negated LIBSVM ``sv_coef`` for two classes).
    intercept_ : ndarray of shape (n_classes * (n_classes - 1) / 2,)
    coef_ : ndarray of shape (n_classes * (n_classes - 1) / 2, n_features)
        Primal weights; 'linear' kernel only.
    n_iter_ : ndarray of shape (n_classes * (n_classes - 1) / 2,), int32
        Iterations of each binary problem.
    fit_status_ : int
        0 when every problem converged, 1 when ``max_iter`` stopped one.
    shape_fit_ : tuple of int
        Global (n_samples, n_features) of the training data.
    n_features_in_ : int
    fit_stats_ : dict
        Run statistics, JSON-serialisable: iterations, time split, elimination
        and reconstruction counts, communication per verb, cache hit rate.

    See Also
    --------
    sklearn.svm.SVC : the single-process reference.
    sklearn.calibration.CalibratedClassifierCV : probabilities, via
        ``CalibratedClassifierCV(psvm.SVC(), ensemble=False)``.

    Notes
    -----
    Inside GridSearchCV or cross_val_score under ``mpiexec``, keep joblib's
    ``n_jobs=1`` and ``distributed='replicated'`` so every rank runs the same
    fits in the same order. In a joblib worker (``n_jobs=2``) or another process
    a rank forked or spawned, :meth:`fit` runs as one process (such a process
    cannot join the MPI job); ``distributed='sharded'`` is refused there.

    Examples
    --------
    >>> import numpy as np, psvm
    >>> X = np.array([[-1, -1], [-2, -1], [1, 1], [2, 1]])
    >>> clf = psvm.SVC(kernel="linear").fit(X, [1, 1, 2, 2])
    >>> clf.predict([[-0.8, -1]])
    array([1])
    """

    def __init__(
        self,
        C=1.0,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        shrinking=True,
        tol=1e-3,
        cache_size=200,
        class_weight=None,
        verbose=False,
        max_iter=-1,
        decision_function_shape="ovr",
        break_ties=False,
        random_state=None,
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
        self.C = C
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.shrinking = shrinking
        self.tol = tol
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.verbose = verbose
        self.max_iter = max_iter
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.random_state = random_state
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

    def fit(self, X, y, sample_weight=None):
        """Fit the SVM; collective over ``comm`` (every rank must call it).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training vectors: the whole set ('replicated') or this rank's rows
            ('sharded', possibly none).
        y : array-like of shape (n_samples,)
            Class labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample multipliers of C; samples of weight 0 are left out.

        Returns
        -------
        self : object
            The fitted estimator, the same on every rank.
        """
        check_face_params(
            distributed=self.distributed,
            n_jobs=self.n_jobs,
            decision_function_shape=self.decision_function_shape,
            random_state=self.random_state,
        )
        if check_threads(self.n_threads) is not None and self.n_jobs is not None:
            raise ParameterError(
                f"n_threads={self.n_threads!r} and n_jobs={self.n_jobs!r}: "
                "give one of them (n_jobs is the older name)"
            )
        cw = self.class_weight
        params = validate_svc_params(
            C=self.C,
            kernel=self.kernel,
            degree=self.degree,
            gamma=self.gamma,
            coef0=self.coef0,
            tol=self.tol,
            cache_size=self.cache_size,
            max_iter=self.max_iter,
            selection=self.selection,
            heuristic=resolve_heuristic(self.shrinking, self.heuristic),
            reconstruction=self.reconstruction,
            verbose=self.verbose,
            class_weight=cw if isinstance(cw, dict) else None,
        )
        checkpoint = make_checkpoint_config(
            self.checkpoint, self.checkpoint_seconds, self.checkpoint_iters, self.resume
        )
        with (
            fit_comm(self.comm, self.distributed) as comm,
            comm.guard("psvm.SVC.fit"),
            self._threads(comm),
        ):
            self._fit(comm, params, checkpoint, X, y, sample_weight)
        if self.fit_status_:
            warnings.warn(
                f"Solver terminated early (max_iter={self.max_iter}). Consider "
                "pre-processing your data with StandardScaler or MinMaxScaler.",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def _threads(self, comm):
        """The thread count of one fit, or of a prediction (``comm`` None): n_threads (default:
        the node's share), else n_jobs."""
        if check_threads(self.n_threads) is None and self.n_jobs is not None:
            return numba_threads(self.n_jobs)
        return rank_threads(self.n_threads, comm)

    def _fit(self, comm, params: dict, checkpoint, X, y, sample_weight) -> None:
        import numba

        from psvm.io.atomic import agree_writable
        from psvm.svc.multiclass import fit_ovo, scale_hint  # numba modules: on first fit

        agree_writable(comm, {"the checkpoint file": self.checkpoint})
        data = fit_input(self, comm, X, y, sample_weight, self.distributed)
        k = data.classes.size
        self.class_weight_ = class_weight_vector(self.class_weight, data.classes, data.class_counts)
        params["class_weight"] = dict(enumerate(self.class_weight_.tolist()))
        stats = Stats()
        stats.values["n_threads"] = numba.get_num_threads()
        log = print if self.verbose and comm.rank == 0 else None
        shard = data.shard()
        hint = scale_hint(comm, shard.X, params)
        if hint is not None:
            warnings.warn(hint, UserWarning, stacklevel=3)
        with stats.timer("train"):
            model, support = fit_ovo(
                comm,
                shard,
                params,
                np.arange(k, dtype=np.float64),
                sample_weight=data.sample_weight,
                stats=stats,
                log=log,
                checkpoint=checkpoint,
            )
        model.classes = data.classes
        self.fit_stats_ = fit_report(reduce_stats(comm, stats), model, data)
        self._set_model(model, support, (data.n_samples, data.n_features), data.sparse)

    def _set_model(self, model: SVCModel, support, shape_fit, sparse: bool) -> None:
        """Fitted attributes from an SVCModel whose classes are sorted."""
        self._model = model
        self._gamma = model.gamma
        self.classes_ = model.classes
        self.support_ = np.asarray(support, dtype=np.int32)
        SV = model.support_vectors
        coef = model.dual_coef.copy()
        self.intercept_ = -model.rho.copy()
        if self.classes_.size == 2:  # sklearn's sign convention: positive means classes_[1]
            coef *= -1
            self.intercept_ *= -1
        self.support_vectors_ = SV.copy() if sparse else SV.toarray()
        self.dual_coef_ = sp.csr_matrix(coef) if sparse else coef
        self.n_support_ = model.n_support.astype(np.int32)
        self.n_iter_ = np.asarray(model.meta.get("n_iter", [0] * len(model.rho)), dtype=np.int32)
        self.fit_status_ = int(model.meta.get("status", 0))
        self.shape_fit_ = tuple(int(s) for s in shape_fit)
        self.n_features_in_ = int(shape_fit[1])

    # -- prediction ------------------------------------------------------------------------
    def _ovo(self, X, method: str = "decision_function") -> np.ndarray:
        """LIBSVM's one-vs-one values (or its vote) for validated X."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        with self._threads(None):  # local: the node's share by the launcher's rank count
            return getattr(self._model, method)(X)

    def decision_function(self, X):
        """Signed distances to the separating hyperplanes (local to the calling rank).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        dec : ndarray of shape (n_samples,), (n_samples, n_classes) or \
(n_samples, n_classes * (n_classes - 1) / 2)
            Two classes: positive values mean ``classes_[1]``. Otherwise the
            'ovr' scores or LIBSVM's 'ovo' values, per ``decision_function_shape``.
        """
        dec = self._ovo(X)
        if self.classes_.size == 2:
            return -dec[:, 0]
        if self.decision_function_shape == "ovr":
            return ovr_decision(dec, self.classes_.size)
        return dec

    def predict(self, X):
        """Class labels by LIBSVM's one-vs-one vote (or the ``break_ties`` argmax).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        if self.break_ties and self.decision_function_shape == "ovo":
            raise ValueError("break_ties must be False when decision_function_shape is 'ovo'")
        if self.break_ties and self.classes_.size > 2:
            return self.classes_[np.argmax(self.decision_function(X), axis=1)]
        return self._ovo(X, "predict")

    @property
    def coef_(self) -> np.ndarray:
        """Primal weights of each class pair, for ``kernel='linear'`` only."""
        if self.kernel != "linear":
            raise AttributeError("coef_ is only available when using a linear kernel")
        check_is_fitted(self)
        return linear_coef(self._model) * (-1.0 if self.classes_.size == 2 else 1.0)

    # -- LIBSVM model files ------------------------------------------------------------------
    def to_libsvm_model(self, path: str | os.PathLike) -> None:
        """Write the model in LIBSVM's text format (``svm_load_model`` reads it).

        Not collective: the calling process writes the file (atomically), so
        under ``mpiexec`` call it on one rank, e.g. ``if rank == 0``. psvm's
        extras (``support_``, ``n_iter_``...) go to comment lines LIBSVM skips.

        Parameters
        ----------
        path : str or path-like

        Raises
        ------
        ValueError
            If the labels are not integers (LIBSVM stores them as ints).
        """
        from psvm.io.model_file import write_model

        check_is_fitted(self)
        meta = {**self._model.meta, "support": self.support_, "n_samples": self.shape_fit_[0]}
        write_model(path, dataclasses.replace(self._model, meta=meta))

    @classmethod
    def from_libsvm_model(
        cls, path: str | os.PathLike, n_features: int | None = None, **params
    ) -> SVC:
        """A fitted estimator from a LIBSVM (or psvm) C-SVC model file.

        Parameters
        ----------
        path : str or path-like
        n_features : int, default=None
            Width of the X that :meth:`predict` will get (``n_features_in_``).
            Default: the width the file states (psvm-train), else the largest
            SV feature index. A wider X than the training data is taken as
            LIBSVM takes it: a feature no SV has counts in an RBF row's norm.
        **params
            Other estimator parameters (e.g. ``decision_function_shape``);
            the kernel parameters come from the file.

        Returns
        -------
        svc : SVC
            Sparse ``support_vectors_``; ``support_`` is -1 (unknown) unless psvm
            wrote the file.

        Raises
        ------
        ValueError
            If ``n_features`` is below the largest SV feature index.
        """
        from psvm.io.model_file import read_model

        model = read_model(path)
        if n_features is not None:
            model = _with_width(model, n_features)
        support = model.meta.pop("support", None)
        n_samples = int(model.meta.pop("n_samples", -1))
        order = np.sort(model.classes)
        if not np.array_equal(order, model.classes):  # LIBSVM: labels by first appearance
            model, support = model.with_class_order(order), None
        n_sv = model.support_vectors.shape[0]
        if support is None or len(support) != n_sv:
            support = np.full(n_sv, -1)
        est = cls(
            kernel=model.kernel, gamma=model.gamma, coef0=model.coef0, degree=model.degree, **params
        )
        est._set_model(model, support, (n_samples, model.support_vectors.shape[1]), sparse=True)
        est.class_weight_ = np.ones(model.n_classes)
        return est

    # -- scikit-learn protocol ---------------------------------------------------------------
    def __getstate__(self):
        state = super().__getstate__()
        if state.get("comm") is not None:  # an MPI handle: not meaningful in another process
            state = {**state, "comm": None}
        return state

    def __sklearn_clone__(self):
        if self.comm is None:
            return super().__sklearn_clone__()
        shallow = copy.copy(self)  # through __getstate__: comm=None
        new = shallow.__sklearn_clone__()
        new.comm = self.comm  # one communicator, shared by reference
        return new

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def _with_width(model: SVCModel, n_features) -> SVCModel:
    """``model`` for inputs of ``n_features`` columns (narrower than the file's: no SV uses the
    columns cut; wider: LIBSVM's decision values, unseen features in the RBF norm)."""
    sv = model.support_vectors
    used = int(sv.indices.max()) + 1 if sv.nnz else 0
    if isinstance(n_features, bool) or not isinstance(n_features, numbers.Integral):
        raise ValueError(f"n_features must be an integer, got {n_features!r}")
    if n_features < max(used, 1):
        raise ValueError(
            f"n_features={n_features} is less than the largest support vector feature index {used}"
        )
    sv = sp.csr_matrix((sv.data, sv.indices, sv.indptr), shape=(sv.shape[0], int(n_features)))
    return dataclasses.replace(model, support_vectors=sv, n_features=int(n_features))
