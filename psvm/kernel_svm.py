"""What psvm's kernel SVM estimators share: the collective fit, threads, pickling and
LIBSVM model files. :class:`psvm.SVC`, :class:`psvm.SVR` and :class:`psvm.OneClassSVM`
add their parameters, their solver call and their fitted attributes."""

from __future__ import annotations

import dataclasses
import numbers
import os
import warnings

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.validation import check_is_fitted, validate_data

from psvm._params import ParameterError, validate_svc_params
from psvm.faces.agreement import agree_on_input, agree_on_params
from psvm.faces.fit_input import FitInput, fit_input, refusable
from psvm.faces.gram_input import gram_fit_input
from psvm.faces.params import (
    FACE_PARAMS,
    SharedComm,
    check_face_params,
    fit_comm,
    resolve_heuristic,
)
from psvm.faces.results import fit_report
from psvm.model import SVCModel
from psvm.stats import Stats, progress_log, reduce_stats
from psvm.svc.checkpoint import make_checkpoint_config
from psvm.threads import check_threads, numba_threads, rank_threads


class KernelSVM(SharedComm, BaseEstimator):
    """Base of the kernel SVM estimators (not for direct use).

    Subclasses set ``_svm_type`` (LIBSVM's name) and ``_task`` (what y holds,
    :data:`psvm.faces.fit_input.TASKS`) and implement :meth:`_train` and
    :meth:`_set_model`.
    """

    _svm_type = "c_svc"
    _task = "classification"
    # the type's parameters beyond the shared ones: its solver's (C, nu, epsilon, class_weight;
    # those it lacks take validate_svc_params' defaults) and its face's (FACE_PARAMS)
    _own_params: tuple[str, ...] = ()

    def fit(
        self, X: ArrayLike, y: ArrayLike | None = None, sample_weight: ArrayLike | None = None
    ) -> KernelSVM:
        """Fit the model; collective over ``comm`` (every rank must call it).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training vectors: the whole set ('replicated') or this rank's rows
            ('sharded', possibly none). With ``kernel='precomputed'``, the rows of
            the (n_samples, n_samples) Gram matrix (dense); with a callable kernel,
            anything the callable accepts.
        y : array-like of shape (n_samples,)
            Class labels or targets (ignored by :class:`psvm.OneClassSVM`).
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample multipliers of the bound C_t.

        Returns
        -------
        self : object
            The fitted estimator, the same on every rank.
        """
        with fit_comm(self.comm, self.distributed) as comm:  # (checked in _checked_params)
            with comm.guard(f"psvm.{type(self).__name__}.fit"):
                agree_on_params(comm, self)  # first: a value one rank alone refused would hang
                # the others; n_threads and n_jobs may differ, so their errors are agreed
                params, checkpoint = agree_on_input(comm, False, self._checked_params)
                for message in self._deprecations():  # scikit-learn's, warned alike
                    warnings.warn(message, FutureWarning, stacklevel=2)
                with self._threads(comm), refusable(self):
                    self._fit(comm, params, checkpoint, X, y, sample_weight)
        if self.fit_status_:
            warnings.warn(
                f"Solver terminated early (max_iter={self.max_iter}). Consider "
                "pre-processing your data with StandardScaler or MinMaxScaler.",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def _checked_params(self) -> tuple[dict, object]:
        """The solver's parameters and the checkpoint settings, validated (each error names
        its parameter)."""
        own = {name: getattr(self, name) for name in self._own_params}
        face = {name: own.pop(name) for name in FACE_PARAMS if name in own}
        check_face_params(distributed=self.distributed, n_jobs=self.n_jobs, **face)
        if check_threads(self.n_threads) is not None and self.n_jobs is not None:
            raise ParameterError(
                f"n_threads={self.n_threads!r} and n_jobs={self.n_jobs!r}: "
                "give one of them (n_jobs is the older name)"
            )
        cw = own.pop("class_weight", None)
        params = validate_svc_params(
            svm_type=self._svm_type,
            **own,
            kernel="precomputed" if callable(self.kernel) else self.kernel,
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
        return params, checkpoint

    def _deprecations(self) -> list[str]:
        """The deprecation warnings of this fit's parameters (scikit-learn's)."""
        return []

    def _threads(self, comm):
        """The thread count of one fit, or of a prediction (``comm`` None): n_threads (default:
        the node's share), else n_jobs."""
        if check_threads(self.n_threads) is None and self.n_jobs is not None:
            return numba_threads(self.n_jobs, comm)
        return rank_threads(self.n_threads, comm)

    def _fit(self, comm, params: dict, checkpoint, X, y, sample_weight) -> None:
        import numba

        from psvm.io.atomic import agree_writable
        from psvm.svc.training import scale_hint  # numba modules: on first fit

        agree_writable(comm, {"the checkpoint file": self.checkpoint})
        labelled = self._task == "classification"  # else no classes to weigh
        self._Xfit = None  # a callable kernel's training X (gram_fit_input sets it)
        read = gram_fit_input if self._gram else fit_input
        data = read(
            self,
            comm,
            X,
            y,
            sample_weight,
            self.distributed,
            task=self._task,
            every_class_weighted=labelled,
        )
        stats = Stats()
        stats.values["n_threads"] = numba.get_num_threads()
        log = progress_log(self.verbose and comm.rank == 0)
        hint = scale_hint(comm, data.X, params)
        if hint is not None:
            warnings.warn(hint, UserWarning, stacklevel=3)
        given = None if sample_weight is None else data.sample_weight
        with stats.timer("train"):
            model, support = self._train(comm, data, params, given, stats, log, checkpoint)
        shape = (data.n_samples, data.n_features)
        if comm.size > 1:  # a collective: now, on every rank
            self._fit_stats = fit_report(reduce_stats(comm, stats), model, *shape)
        else:  # one process: built when first read (0.04 ms, 5% of an iris fit)
            self._fit_stats = (stats, shape)
        if callable(self.kernel):  # scikit-learn's: the shape of the X given, if it has one
            shape = getattr(self._Xfit, "shape", (data.n_samples,))
        self._set_model(model, support, shape, data.sparse)

    @property
    def fit_stats_(self) -> dict:
        """Run statistics, JSON-serialisable: iterations, time split, elimination and
        reconstruction counts, communication per verb, cache hit rate."""
        report = self.__dict__.get("_fit_stats")
        if report is None:
            raise AttributeError(f"{type(self).__name__} has no fit_stats_: it is not fitted")
        if isinstance(report, tuple):  # one process's raw statistics
            stats, shape = report
            report = self._fit_stats = fit_report(reduce_stats(None, stats), self._model, *shape)
        return report

    def _train(self, comm, data: FitInput, params, sample_weight, stats, log, checkpoint):
        """The solver call: (model, global indices of the support vectors)."""
        from psvm.svc.single import fit_single

        return fit_single(
            comm,
            data.shard(),
            params,
            sample_weight=sample_weight,
            stats=stats,
            log=log,
            checkpoint=checkpoint,
        )

    @property
    def _gram(self) -> bool:
        """Whether X is the Gram matrix (precomputed) or becomes it (a callable kernel)."""
        return callable(self.kernel) or self.kernel == "precomputed"

    def _set_model(self, model: SVCModel, support, shape_fit, sparse: bool) -> None:
        """The fitted attributes every type has (scikit-learn's names and layout)."""
        self._model = model
        self._gamma = model.gamma
        self.support_ = np.asarray(support, dtype=np.int32)
        SV = model.support_vectors
        self.support_vectors_ = SV.copy() if sparse else SV.toarray()
        if model.kernel == "precomputed":  # scikit-learn keeps none; X's columns: K(x, x_j)
            self.support_vectors_ = np.empty((0, 0))
            self._model = dataclasses.replace(model, gram_offset=1)
        self.fit_status_ = int(model.meta.get("status", 0))
        self.shape_fit_ = tuple(int(s) for s in shape_fit)
        # scikit-learn counts no features of a callable's X; a LIBSVM file without support
        # vectors does not tell its width (0), and its model reads X of any width
        if not callable(self.kernel) and shape_fit[1] > 0:
            self.n_features_in_ = int(shape_fit[1])

    def _values(self, X, method: str = "decision_function") -> np.ndarray:
        """The model's decision values (or predictions) for validated X (local to a rank)."""
        check_is_fitted(self)
        if callable(self.kernel):  # scikit-learn's: the Gram matrix against the whole X_fit
            K = self.kernel(X, self._Xfit)
            X = np.asarray(K.toarray() if sp.issparse(K) else K, dtype=np.float64)
            if X.ndim != 2 or X.shape[1] != self.shape_fit_[0]:
                raise ValueError(
                    f"X.shape[1] = {X.shape[-1]} should be equal to {self.shape_fit_[0]}, "
                    "the number of samples at training time"
                )
        else:
            X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        with self._threads(None):  # local: the node's share by the launcher's rank count
            return getattr(self._model, method)(X)

    @property
    def coef_(self) -> np.ndarray | sp.csr_matrix:
        """Primal weights, for ``kernel='linear'`` only.

        Sparse when ``support_vectors_`` is, and read-only, as scikit-learn's: it
        is computed on each access, so writing to it would change nothing.
        """
        if self.kernel != "linear":
            raise AttributeError("coef_ is only available when using a linear kernel")
        check_is_fitted(self)
        coef = self._primal()
        if sp.issparse(self.support_vectors_) and not sp.issparse(coef):
            coef = sp.csr_matrix(coef)
        (coef.data if sp.issparse(coef) else coef).flags.writeable = False
        return coef

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
            If a label is not a 32-bit integer (LIBSVM reads labels as C ints).
        """
        from psvm.io.model_file import write_model
        from psvm.model import COUPLING_ORDER

        check_is_fitted(self)
        meta = {**self._model.meta, "support": self.support_, "n_samples": self.shape_fit_[0]}
        model = dataclasses.replace(self._model, meta=meta)
        if COUPLING_ORDER in meta:  # a LIBSVM -b 1 model's classes: in the order of its file,
            model = model.with_class_order(meta[COUPLING_ORDER])  # where they are coupled
        write_model(path, model)

    @classmethod
    def _fitted_to(cls, model: SVCModel, support, shape: tuple, params: dict) -> KernelSVM:
        """An estimator with ``model``'s kernel and ``params``, fitted to ``model``."""
        kernel = dict(kernel=model.kernel, gamma=model.gamma, coef0=model.coef0)
        est = cls(**kernel, degree=model.degree, **params)
        est._set_model(model, known_support(model, support), shape, sparse=True)
        return est

    @classmethod
    def _read_libsvm_model(
        cls, path: str | os.PathLike, n_features: int | None = None
    ) -> tuple[SVCModel, np.ndarray, tuple]:
        """(model, support or None, shape_fit_) from a model file of this type, for inputs of
        ``n_features`` columns if given (a precomputed kernel: the training rows, the width
        of its Gram matrices; default: psvm's count, else the largest serial number)."""
        from psvm.io.model_read import read_model

        model = read_model(path)
        gram = model.kernel == "precomputed"
        if n_features is not None and not gram:
            model = _with_width(model, n_features)
        if model.svm_type != cls._svm_type:
            raise ValueError(
                f"{os.fspath(path)}: svm_type {model.svm_type!r}; {cls.__name__} reads "
                f"{cls._svm_type!r} models"
            )
        support = model.meta.pop("support", None)
        n_samples = int(model.meta.pop("n_samples", -1))
        if not gram:
            return model, support, (n_samples, model.support_vectors.shape[1])
        largest = int(model.serials().max(initial=0))
        if n_features is None:
            n_features = n_samples if n_samples >= 0 else largest
        elif not _is_int(n_features) or n_features < max(largest, 1):
            # narrower Gram rows would read 0 for the columns of the support vectors past them
            raise ValueError(
                f"n_features={n_features!r} must be an integer >= {largest}, the largest serial "
                "number of the support vectors (the training rows of the Gram matrix)"
            )
        return model, support, (int(n_features), int(n_features))

    # -- scikit-learn protocol ---------------------------------------------------------------
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self.kernel != "precomputed"
        tags.input_tags.pairwise = self.kernel == "precomputed"  # cross-validation cuts both axes
        return tags


class SingleModelSVM(KernelSVM):
    """The types with one decision value: one-class and the regressors."""

    def _set_model(self, model: SVCModel, support, shape_fit, sparse: bool) -> None:
        super()._set_model(model, support, shape_fit, sparse)
        coef = model.dual_coef.copy()
        self.dual_coef_ = sp.csr_matrix(coef) if sparse else coef
        self.intercept_ = -model.rho.copy()
        self.n_support_ = np.array([model.support_vectors.shape[0]], dtype=np.int32)
        self.n_iter_ = int(model.meta.get("n_iter", [0])[0])

    @classmethod
    def from_libsvm_model(cls, path: str | os.PathLike, n_features: int | None = None, **params):
        """A fitted estimator from a LIBSVM (or psvm) model file of this type.

        ``n_features`` as :meth:`psvm.SVC.from_libsvm_model`; ``support_`` is -1
        (unknown) unless psvm wrote the file.
        """
        return cls._fitted_to(*cls._read_libsvm_model(path, n_features), params)

    def _primal(self):
        """w = sum_i coef_i x_i (linear kernel): one row."""
        return safe_sparse_dot(self.dual_coef_, self.support_vectors_)


def known_support(model: SVCModel, support) -> np.ndarray:
    """support_ of a model read from a file: psvm's, else a precomputed kernel's serial
    numbers less one (the rows' indices), else -1 (unknown)."""
    n_sv = model.support_vectors.shape[0]
    if support is not None and len(support) == n_sv:
        return np.asarray(support)
    return model.serials() - 1 if model.kernel == "precomputed" else np.full(n_sv, -1)


def _with_width(model: SVCModel, n_features) -> SVCModel:
    """``model`` for inputs of ``n_features`` columns (narrower than the file's: no SV uses the
    columns cut; wider: LIBSVM's decision values, unseen features in the RBF norm)."""
    sv = model.support_vectors
    used = int(sv.indices.max()) + 1 if sv.nnz else 0
    if not _is_int(n_features):
        raise ValueError(f"n_features must be an integer, got {n_features!r}")
    if n_features < max(used, 1):
        largest = used - 1 + model.index_base  # (the file's index of the last column used)
        raise ValueError(
            f"n_features={n_features} is less than the {used} columns the support vectors use "
            f"(largest feature index {largest})"
        )
    sv = sp.csr_matrix((sv.data, sv.indices, sv.indptr), shape=(sv.shape[0], int(n_features)))
    return dataclasses.replace(model, support_vectors=sv, n_features=int(n_features))


def _is_int(n) -> bool:
    return isinstance(n, numbers.Integral) and not isinstance(n, bool)
