"""scikit-learn face of the parallel SGD linear SVM: :class:`psvm.SGDSVC`."""

from __future__ import annotations

import os
import warnings
from contextlib import contextmanager

import numba
import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from psvm._params import ParameterError, check_bool, validate_sgd_params
from psvm.faces.agreement import InputError, agree_on_input, agree_on_params
from psvm.faces.fit_input import FitInput, class_weight_vector, fit_input, refusable
from psvm.faces.params import SharedComm, check_distributed, fit_comm
from psvm.sgd.model import LinearModel
from psvm.sgd.msf import make_policy
from psvm.sgd.problem import (
    SPARSE_INTERCEPT_DECAY,
    SGDState,
    check_model_memory,
    class_shares,
    held_out,
    make_problem,
)
from psvm.sgd.trainer import SGDTrainer
from psvm.stats import Stats, progress_log, reduce_stats
from psvm.threads import check_threads, rank_threads


class SGDSVC(ClassifierMixin, SharedComm, BaseEstimator):
    """Linear SVM trained by parallel SGD with model averaging over MPI ranks.

    Minimises ``alpha/2 |w|^2 + 1/n sum_t c_t max(0, 1 - y_t (w.x_t + b))``
    (the bias is not regularised); one-vs-rest for more than two classes.
    Each rank runs SGD on its block of rows and the ranks average their
    models every ``sync_every`` local samples. ``alpha`` is lambda; the
    :class:`sklearn.svm.LinearSVC` with the same solution has ``C = 1 / (n alpha)``.
    Outside ``mpiexec`` it runs as one process: the sequential algorithm.

    Parameters
    ----------
    alpha : float, default=1e-4
        Regularisation strength lambda; must be > 0.
    learning_rate : {'optimal', 'pegasos', 'constant', 'epoch'}, default='optimal'
        Step size at local step t: 'optimal' ``1 / (alpha (t0 + t - 1))`` with
        scikit-learn's t0 (Bottou's heuristic), 'pegasos' ``1 / (alpha t)``,
        'constant' ``eta0``, 'epoch' ``1 / (alpha * epoch)`` (the schedule of
        the MSF paper's code, for reproduction; its first epoch restarts w at
        every step since ``eta alpha = 1``).
    eta0 : float, default=0.01
        Step size of the 'constant' schedule.
    sync_every : int or 'auto', default='auto'
        Local samples between model averages (one Allreduce each). 'auto'
        measures the cost of a step and of an average, keeps averages under
        ``msf_target`` of the time, and syncs more often when the averaged
        model's objective gets worse between epochs.
    msf_target : float, default=0.1
        Target share of the time spent averaging models with 'auto'.
    max_iter : int, default=1000
        Maximum number of epochs (passes over the data).
    tol : float or None, default=1e-3
        Stop when the primal objective (on all training rows) has not
        improved by ``tol`` for ``n_iter_no_change`` epochs; None: never.
    n_iter_no_change : int, default=5
    early_stopping : bool, default=False
        :meth:`fit` holds out ``validation_fraction`` of the rows and stops when their
        accuracy has not improved by ``tol`` for ``n_iter_no_change`` epochs, as
        :class:`~sklearn.linear_model.SGDClassifier`. The split is stratified, as its
        StratifiedShuffleSplit's, its rows drawn by a hash of their global index, so they
        are the same for every P; their accuracy is weighted by ``sample_weight``.
        :meth:`partial_fit` ignores it.
    validation_fraction : float, default=0.1
        The share of rows held out with ``early_stopping``, in (0, 1).
    shuffle : bool, default=True
        Shuffle rows once, then visit blocks of rows in a fresh order each epoch.
    random_state : int, RandomState instance or None, default=None
        Seed of the shuffles (rank r uses the stream ``(seed, r)``).
    average : bool or int, default=True
        Return the average of the iterates, each weighted by its step number
        (early, far-off iterates count little); an int n starts averaging at
        local step n. False returns the last iterate.
    class_weight : dict, 'balanced' or None, default=None
        Weight of each class in the hinge loss (one-vs-rest: of the positive class).
        :meth:`partial_fit` refuses 'balanced', as SGDClassifier does.
    warm_start : bool, default=False
        :meth:`fit` starts from the last fit's ``coef_`` and ``intercept_`` (the
        same classes and features); the step count and the average restart, as in
        :class:`~sklearn.linear_model.SGDClassifier`.
    fit_intercept : bool, default=True
    verbose : int, default=0
        Print per-epoch progress on rank 0.
    n_threads : int, default=None
        numba threads of each rank during :meth:`fit` and :meth:`partial_fit`.
        None or 0: the ranks on one node share its cores (``cores // ranks on
        the node`` threads each, at least one), so they never run more threads
        than cores; a positive int is used as given, within numba's pool
        (``NUMBA_NUM_THREADS``).
    comm : mpi4py communicator, default=None
        None: the world communicator under ``mpiexec``, else one process.
    distributed : {'replicated', 'sharded'}, default='replicated'
        'replicated': every rank passes the whole data set and trains on its
        block of rows; 'sharded': every rank passes only its own rows.

    Attributes
    ----------
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    classes_ : ndarray of shape (n_classes,)
    n_iter_ : int
        Epochs run by the last call (1 after :meth:`partial_fit`), as scikit-learn's.
    t_ : int
        Local SGD steps taken on rank 0 since the last :meth:`fit` (partial_fit adds its own).
    fit_status_ : int
        0 if the tolerance rule stopped training, 1 if ``max_iter`` did.
    sync_every_ : int
        The last sync period used (the tuned one with 'auto'), in local samples: at most the
        largest rank's rows (one sync an epoch; with one process, no sync at all).
    fit_stats_ : dict
        Run statistics (:func:`psvm.stats.reduce_stats`): counts ``n_sync``,
        ``bytes_sync``, ``n_steps``; seconds ``compute``, ``comm``,
        ``objective``; per-epoch traces; ``values["msf"]``, the policy's choices.
    n_features_in_ : int

    See Also
    --------
    psvm.SVC : kernel SVM by a distributed SMO solver.
    sklearn.linear_model.SGDClassifier : the sequential counterpart.

    References
    ----------
    V. Abeykoon, G. Fox, M. Kim. Performance Optimization on Model
    Synchronization in Parallel Stochastic Gradient Descent Based SVM.
    arXiv:1905.01219, 2019.

    Examples
    --------
    >>> from psvm import SGDSVC
    >>> X = [[0.0, 1.0], [1.0, 0.0], [0.1, 0.9], [0.9, 0.2]]
    >>> clf = SGDSVC(alpha=0.01, random_state=0).fit(X, [1, 0, 1, 0])
    >>> clf.predict([[0.0, 2.0]]).tolist()
    [1]
    """

    def __init__(
        self,
        *,
        alpha=1e-4,
        learning_rate="optimal",
        eta0=0.01,
        sync_every="auto",
        msf_target=0.1,
        max_iter=1000,
        tol=1e-3,
        n_iter_no_change=5,
        early_stopping=False,
        validation_fraction=0.1,
        shuffle=True,
        random_state=None,
        average=True,
        class_weight=None,
        warm_start=False,
        fit_intercept=True,
        verbose=0,
        n_threads=None,
        comm=None,
        distributed="replicated",
    ):
        self.alpha = alpha
        self.learning_rate = learning_rate
        self.eta0 = eta0
        self.sync_every = sync_every
        self.msf_target = msf_target
        self.max_iter = max_iter
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.shuffle = shuffle
        self.random_state = random_state
        self.average = average
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.fit_intercept = fit_intercept
        self.verbose = verbose
        self.n_threads = n_threads
        self.comm = comm
        self.distributed = distributed

    # -- fitting ----------------------------------------------------------------
    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> SGDSVC:
        """Fit the model by SGD epochs; collective when ``comm`` has several ranks."""
        with self._comm() as comm, refusable(self):  # refused or stopped: the model as it was
            data = fit_input(
                self, comm, X, y, sample_weight, self.distributed, every_class_weighted=False
            )
            cfg, cw = self._settings(data, data.classes)
            start, seed = self._warm_start(data), self._seed(comm)
            held = self._held_out(comm, data, cfg, seed) if cfg.early_stopping else None
            self._cfg = cfg
            self._setup(comm, data, seed, start)
            self._train(comm, data, cw, self.max_iter, stop_on_tol=True, held=held)
        return self

    def partial_fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        classes: ArrayLike | None = None,
        sample_weight: ArrayLike | None = None,
    ) -> SGDSVC:
        """One epoch over (X, y), continuing the model and the step-size schedule.

        ``classes`` (all labels of the problem) is needed on the first call. A call refused
        (bad input or parameters, a model too large) changes nothing; a later call stopped
        during its epoch (Ctrl-C) keeps ``coef_`` of the calls before it, while the running
        state, as scikit-learn's, holds the part of the epoch done.
        """
        first = not hasattr(self, "classes_")
        with self._comm() as comm:  # (the ranks' parameters agreed: they all raise alike)
            if isinstance(self.class_weight, str) and self.class_weight == "balanced":
                raise ParameterError(
                    "class_weight='balanced' is not supported for partial_fit: one batch's "
                    "class counts are not the data's; pass a dict, e.g. from "
                    "sklearn.utils.class_weight.compute_class_weight (as SGDClassifier says)"
                )
            with refusable(self):  # (and the first call's epoch: no model before it)
                data = fit_input(
                    self,
                    comm,
                    X,
                    y,
                    sample_weight,
                    self.distributed,
                    partial_fit=True,
                    classes=classes,
                    every_class_weighted=False,
                )
                # this call's parameters (set_params between calls counts, as in scikit-learn)
                cfg, cw = self._settings(data, data.classes if first else self.classes_)
                policy = (cfg.sync_every, cfg.msf_target)
                renew = not first and policy != (self._cfg.sync_every, self._cfg.msf_target)
                self._cfg = cfg
                if first:
                    self._setup(comm, data, self._seed(comm))
                    self._train(comm, data, cw, 1, stop_on_tol=False)
                elif renew:
                    self._policy = make_policy(*policy)
            if not first:  # in place, as scikit-learn's: no copy of the model each call
                self._train(comm, data, cw, 1, stop_on_tol=False)
        return self

    @contextmanager
    def _comm(self):
        """The Comm of one fit (:func:`psvm.faces.params.fit_comm`), guarded, with its threads."""
        with fit_comm(self.comm, self.distributed) as comm, comm.guard("psvm.SGDSVC.fit"):
            agree_on_params(comm, self)  # first: a value one rank alone refused would hang
            check_distributed(self.distributed)
            agree_on_input(comm, False, check_threads, self.n_threads)  # (may differ)
            with rank_threads(self.n_threads, comm):
                yield comm

    def _settings(self, data: FitInput, classes) -> tuple:
        """The validated settings of a fit and the class weights (raising changes nothing)."""
        cfg = validate_sgd_params(
            alpha=self.alpha,
            learning_rate=self.learning_rate,
            eta0=self.eta0,
            sync_every=self.sync_every,
            msf_target=self.msf_target,
            max_iter=self.max_iter,
            tol=self.tol,
            n_iter_no_change=self.n_iter_no_change,
            early_stopping=self.early_stopping,
            validation_fraction=self.validation_fraction,
            shuffle=self.shuffle,
            average=self.average,
            fit_intercept=self.fit_intercept,
            intercept_decay=SPARSE_INTERCEPT_DECAY if data.sparse else 1.0,
            verbose=self.verbose,
        )
        return cfg, class_weight_vector(self.class_weight, classes, data.class_counts, zero_ok=True)

    def _warm_start(self, data: FitInput) -> tuple | None:
        """The last fit's (coef_, intercept_) to start from, checked against ``data`` (the
        same on every rank: the classes and the width are global); None for a cold start."""
        if not check_bool("warm_start", self.warm_start) or not hasattr(self, "coef_"):
            return None
        if not np.array_equal(data.classes, self.classes_):
            raise InputError(
                f"warm_start: y has classes {data.classes.tolist()}, the last fit "
                f"{self.classes_.tolist()}; fit with warm_start=False to start afresh"
            )
        if data.n_features != self.coef_.shape[1]:
            raise InputError(
                f"warm_start: X has {data.n_features} features, the last fit "
                f"{self.coef_.shape[1]}; fit with warm_start=False to start afresh"
            )
        return self.coef_, self.intercept_

    def _seed(self, comm) -> int:
        """The fit's seed, drawn from ``random_state`` on rank 0 (collective)."""
        try:
            rng = check_random_state(self.random_state)
        except ValueError as e:  # every rank raises it alike
            raise ParameterError(f"random_state: {e}") from None
        return comm.bcast_obj(int(rng.randint(np.iinfo(np.int32).max)))

    @staticmethod
    def _held_out(comm, data: FitInput, cfg, seed: int) -> np.ndarray:
        """early_stopping's validation rows among this rank's (a mask; collective), stratified
        as StratifiedShuffleSplit's: ceil(fraction n) rows, each class its share
        (:func:`psvm.sgd.problem.class_shares`), the same rows for every P
        (:func:`psvm.sgd.problem.held_out`). Refused as there: a class of one row, or a part
        with fewer rows than classes."""
        counts, k = data.class_counts.astype(np.int64), data.classes.size
        fraction = cfg.validation_fraction
        if counts.min() < 2:
            raise InputError(
                f"early_stopping: class {data.classes.tolist()[int(np.argmin(counts))]!r} "
                "has only 1 row; each class needs 2 to be split"
            )
        n_held = int(np.ceil(fraction * data.n_samples))
        if min(n_held, data.n_samples - n_held) < k:
            raise InputError(
                f"early_stopping: validation_fraction={fraction} holds out {n_held} of "
                f"{data.n_samples} rows; each part needs at least {k} (the classes)"
            )
        share = class_shares(counts, n_held)
        return held_out(comm, seed, data.offset, data.codes, share)

    def _setup(self, comm, data: FitInput, seed: int, start: tuple | None = None) -> None:
        """Start a model (zero, or ``start``'s weights and biases) and a fresh MSF policy
        (``_cfg`` set)."""
        n_models = 1 if data.classes.size == 2 else data.classes.size
        check_model_memory(comm, n_models, data.n_features, f"X has {data.n_features} features")
        self.classes_ = data.classes
        self._state = SGDState.zeros(n_models, data.n_features, seed, comm.rank)
        if start is not None:  # (without an intercept now, the last one is dropped)
            self._state.V[:] = start[0]
            self._state.b[:] = start[1] if self._cfg.fit_intercept else 0.0
        self._policy = make_policy(self._cfg.sync_every, self._cfg.msf_target)

    def _train(self, comm, data: FitInput, cw, n_epochs, *, stop_on_tol, held=None) -> None:
        X, codes, sw, validation = data.X, data.codes, data.sample_weight, None
        if held is not None:  # early stopping scores the held-out rows, trains on the rest
            keep = ~held
            validation = X[held], codes[held], sw[held]  # scored by weight, as scikit-learn
            X, codes, sw = X[keep], codes[keep], sw[keep]
        prob = make_problem(
            comm, X, codes, self.classes_.size, sample_weight=sw, class_weight=cw,
            validation=validation,
        )  # fmt: skip
        stats = Stats()
        log = progress_log(self.verbose and comm.rank == 0)
        trainer = SGDTrainer(comm, prob, self._cfg, self._state, self._policy, stats, log)
        done = trainer.run(n_epochs, stop_on_tol=stop_on_tol)
        W, w0 = trainer.weights()
        self.coef_, self.intercept_ = W.copy(), w0.copy()
        self.n_iter_ = done  # this call's epochs, as SGDClassifier's (t_ counts on)
        self.t_ = int(self._state.st[0])
        self.sync_every_ = int(min(trainer.period, max(prob.n_local_max, 1)))  # (what it was)
        self.fit_status_ = 0 if trainer.converged or not stop_on_tol else 1
        self.fit_stats_ = reduce_stats(comm, stats)
        self.fit_stats_["values"].update(
            msf=self._policy.state(), n_samples=prob.n_samples, n_threads=numba.get_num_threads()
        )
        if stop_on_tol and self._cfg.tol is not None and not trainer.converged:
            warnings.warn(
                f"Maximum number of epochs ({self.max_iter}) reached before the "
                f"{'validation accuracy' if self._cfg.early_stopping else 'objective'} "
                "stopped improving; consider increasing max_iter.",
                ConvergenceWarning,
                stacklevel=3,
            )

    # -- prediction ---------------------------------------------------------------
    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Signed scores: (n_samples,) for two classes (positive: classes_[1]), else per class."""
        check_is_fitted(self, "coef_")  # (a refused fit may have read X's shape, not fitted)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        scores = np.asarray(X @ self.coef_.T) + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Class labels: the sign of the score for two classes, else its argmax."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.intp)]
        return self.classes_[np.argmax(scores, axis=1)]

    def to_liblinear_model(self, path: str | os.PathLike) -> None:
        """Write the model in LIBLINEAR's text format (psvm-predict and LIBLINEAR's predict
        read it), atomically; as :meth:`psvm.SVC.to_libsvm_model`, not collective: call it
        on one rank under ``mpiexec``. Labels must be 32-bit integers (LIBLINEAR's ``%d``)."""
        from psvm.io.linear_model_file import write_linear_model

        write_linear_model(path, self.to_linear_model())

    def to_linear_model(self) -> LinearModel:
        """The fitted model in LIBLINEAR's class order (see :mod:`psvm.sgd.model`)."""
        check_is_fitted(self)
        if self.classes_.size == 2:
            return LinearModel(self.coef_, self.intercept_, self.classes_[::-1])
        return LinearModel(self.coef_, self.intercept_, self.classes_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
