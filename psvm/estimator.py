"""scikit-learn faces of the distributed kernel SVM classifiers: :class:`psvm.SVC` and
:class:`psvm.NuSVC`."""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from sklearn.base import ClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from psvm.faces.fit_input import FitInput, class_weight_vector
from psvm.faces.results import linear_coef, ovr_decision
from psvm.kernel_svm import KernelSVM
from psvm.model import SVCModel
from psvm.probability_face import ProbabilityMixin
from psvm.svc.checkpoint import saved_before_folds


class SVC(ProbabilityMixin, ClassifierMixin, KernelSVM):
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
    kernel : {'linear', 'poly', 'rbf', 'sigmoid', 'precomputed'} or callable, default='rbf'
        Kernel. 'precomputed': X is the (n_samples, n_samples) Gram matrix at
        fit and (n_test, n_samples) at predict, each rank holding its rows; a
        callable ``f(A, B)`` returns K(a_i, b_j): fit computes ``f(X, X)``
        (each rank its rows, ``f(X_rows, X)``) and predict ``f(X_test, X)``.
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
    probability : bool, default=False
        Whether to fit LIBSVM's probability model (``-b 1``): each class pair's Platt
        sigmoid on the decision values of a 5-fold internal cross-validation (about
        six times the training), for :meth:`predict_proba`. The folds are drawn from
        ``random_state`` (numpy's generator, not LIBSVM's ``rand()``).

        .. deprecated:: scikit-learn 1.9
           Passing it warns (``FutureWarning``), as scikit-learn 1.9 does; use
           ``CalibratedClassifierCV(SVC(), ensemble=False)`` instead.
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
        Seeds the shuffle of the probability model's internal folds (rank 0's
        draw is used); otherwise unused: the solver is deterministic (the same
        model for any number of ranks).
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
        Sparse when fitted on sparse X or read from a LIBSVM model file; empty,
        of shape (0, 0), for precomputed and callable kernels (as scikit-learn's).
    n_support_ : ndarray of shape (n_classes,), int32
    dual_coef_ : {ndarray, sparse matrix} of shape (n_classes - 1, n_SV)
        As :class:`sklearn.svm.SVC` (negated LIBSVM ``sv_coef`` for two classes).
    intercept_ : ndarray of shape (n_classes * (n_classes - 1) / 2,)
    coef_ : ndarray of shape (n_classes * (n_classes - 1) / 2, n_features)
        Primal weights; 'linear' kernel only.
    n_iter_ : ndarray of shape (n_classes * (n_classes - 1) / 2,), int32
        Iterations of each binary problem.
    probA_, probB_ : ndarray of shape (n_classes * (n_classes - 1) / 2,)
        Platt's sigmoid of each class pair, ``1 / (1 + exp(probA_ * f + probB_))`` of
        the pair's decision value f (LIBSVM's sign: positive for the pair's first
        class); empty without ``probability=True``. Deprecated as in scikit-learn 1.9.
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

    _own_params = ("C", "class_weight", "decision_function_shape", "break_ties", "random_state")

    def __init__(
        self,
        *,
        C=1.0,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        shrinking=True,
        probability="deprecated",
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
        self.probability = probability
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

    def _train(self, comm, data: FitInput, params, sample_weight, stats, log, checkpoint):
        from psvm.svc.multiclass import fit_ovo  # numba modules: on first fit

        k, probability = data.classes.size, self._fits_probability()
        self.class_weight_ = class_weight_vector(self.class_weight, data.classes, data.class_counts)
        params["class_weight"] = dict(enumerate(self.class_weight_.tolist()))
        shard, codes = data.shard(), np.arange(k, dtype=np.float64)
        model, support = fit_ovo(  # weights always (ones if none given): NuSVC starts
            comm,  # from sum nu C_t, the weighted start of scikit-learn's LIBSVM (state.py)
            shard,
            params,
            codes,
            sample_weight=data.sample_weight,
            stats=stats,
            log=log,
            checkpoint=saved_before_folds(checkpoint) if probability else checkpoint,
        )
        if probability:  # (its folds keep no checkpoint)
            from psvm.svc.platt import add_probability

            seed = check_random_state(self.random_state).randint(np.iinfo("i").max)
            add_probability(
                comm, shard, params, codes, model, seed=seed, sample_weight=data.sample_weight,
                stats=stats, log=log,
            )  # fmt: skip
        model.classes = data.classes
        return model, support

    def _set_model(self, model: SVCModel, support, shape_fit, sparse: bool) -> None:
        """Fitted attributes from an SVCModel whose classes are sorted."""
        super()._set_model(model, support, shape_fit, sparse)
        self.classes_ = model.classes
        coef = model.dual_coef.copy()
        self.intercept_ = -model.rho.copy()
        if self.classes_.size == 2:  # sklearn's sign convention: positive means classes_[1]
            coef *= -1
            self.intercept_ *= -1
        self.dual_coef_ = sp.csr_matrix(coef) if sparse else coef
        self.n_support_ = model.n_support.astype(np.int32)
        self.n_iter_ = np.asarray(model.meta.get("n_iter", [0] * len(model.rho)), dtype=np.int32)
        self._probA = np.asarray(model.meta.get("probA", []), dtype=np.float64)
        self._probB = np.asarray(model.meta.get("probB", []), dtype=np.float64)

    # -- prediction ------------------------------------------------------------------------
    def decision_function(self, X: ArrayLike) -> np.ndarray:
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
        dec = self._values(X)
        if self.classes_.size == 2:
            return -dec[:, 0]
        if self.decision_function_shape == "ovr":
            return ovr_decision(dec, self.classes_.size)
        return dec

    def predict(self, X: ArrayLike) -> np.ndarray:
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
        return self._values(X, "predict")

    def _primal(self):
        """Primal weights of each class pair (scikit-learn's sign for two classes)."""
        return linear_coef(self._model) * (-1.0 if self.classes_.size == 2 else 1.0)

    # -- LIBSVM model files ------------------------------------------------------------------
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
        model, support, shape = cls._read_libsvm_model(path, n_features)
        order = np.sort(model.classes)
        if not np.array_equal(order, model.classes):  # LIBSVM: labels by first appearance
            model, support = model.with_class_order(order), None
        if model.has_probability:  # a -b 1 model: predict_proba works
            params.setdefault("probability", True)
        est = cls._fitted_to(model, support, shape, params)
        est.class_weight_ = np.ones(model.n_classes)
        return est


class NuSVC(SVC):
    """Nu-Support Vector Classification trained by the distributed SMO solver.

    The model of :class:`sklearn.svm.NuSVC` (LIBSVM's nu-SVC, its Solver_NU,
    one-vs-one), trained over the ranks of an MPI communicator as :class:`SVC`
    is, with the same model for every number of ranks. ``nu`` replaces ``C``;
    the other parameters and the attributes are :class:`SVC`'s. As in LIBSVM
    and scikit-learn, ``class_weight`` does not change the nu problem
    (``class_weight_`` is still reported) and ``selection`` is always 'second'.

    Parameters
    ----------
    nu : float, default=0.5
        An upper bound on the fraction of margin errors and a lower bound on
        the fraction of support vectors; in (0, 1]. A value too large for the
        class sizes raises LIBSVM's "specified nu is infeasible".

    Examples
    --------
    >>> import numpy as np, psvm
    >>> X = np.array([[-1, -1], [-2, -1], [1, 1], [2, 1]])
    >>> psvm.NuSVC(kernel="linear").fit(X, [1, 1, 2, 2]).predict([[-0.8, -1]])
    array([1])
    """

    _svm_type = "nu_svc"
    _own_params = ("nu", "class_weight", "decision_function_shape", "break_ties", "random_state")

    def __init__(
        self,
        *,
        nu=0.5,
        kernel="rbf",
        degree=3,
        gamma="scale",
        coef0=0.0,
        shrinking=True,
        probability="deprecated",
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
        super().__init__(
            kernel=kernel,
            degree=degree,
            gamma=gamma,
            coef0=coef0,
            shrinking=shrinking,
            probability=probability,
            tol=tol,
            cache_size=cache_size,
            class_weight=class_weight,
            verbose=verbose,
            max_iter=max_iter,
            decision_function_shape=decision_function_shape,
            break_ties=break_ties,
            random_state=random_state,
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
        del self.C  # SVC's methods, not its C (as scikit-learn's NuSVC has none)
        self.nu = nu
