"""The fitted linear SVM: a LIBLINEAR-style linear classifier (its file format:
:mod:`psvm.io.linear_model_file`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

SOLVER_TYPE = "L2R_L1LOSS_SVC_DUAL"  # LIBLINEAR's -s 3: the problem psvm's SGD solves
LOGISTIC = ("L2R_LR", "L1R_LR", "L2R_LR_DUAL")  # LIBLINEAR's models with probabilities


def to_width(X, n_features: int):
    """X with ``n_features`` columns, as LIBLINEAR's predict reads a row: features beyond the
    model's are ignored, and those a file's rows lack are zero."""
    X = sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else np.asarray(X, float)
    if X.shape[1] > n_features:
        return X[:, :n_features]
    if X.shape[1] < n_features:
        X = sp.csr_matrix(X)
        return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))
    return X


@dataclass(eq=False)
class LinearModel:
    """A linear classifier: ``coef`` (n_models, n_features), ``intercept`` (n_models,).

    ``classes`` are the labels in model order: with one model (two classes)
    the model's positive class is ``classes[0]``; with k models, model c
    scores ``classes[c]`` and the prediction is the argmax.
    """

    coef: np.ndarray
    intercept: np.ndarray
    classes: np.ndarray
    solver_type: str = SOLVER_TYPE
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.coef = np.atleast_2d(np.asarray(self.coef, dtype=np.float64))
        self.intercept = np.asarray(self.intercept, dtype=np.float64).reshape(-1)
        self.classes = np.asarray(self.classes)
        k = self.coef.shape[0]
        if self.intercept.size != k:
            raise ValueError(f"intercept has {self.intercept.size} values for {k} models")
        expected = 2 if k == 1 and self.solver_type != "MCSVM_CS" else k
        if self.classes.size != expected:
            raise ValueError(f"{k} model(s) need {expected} classes, got {self.classes.size}")

    @property
    def n_features(self) -> int:
        return self.coef.shape[1]

    def decision_function(self, X) -> np.ndarray:
        """(n_samples, n_models) scores of X at the model's width (:func:`to_width`)."""
        return np.asarray(to_width(X, self.n_features) @ self.coef.T) + self.intercept

    def predict(self, X) -> np.ndarray:
        return self._labels(self.decision_function(X))

    def _labels(self, dec: np.ndarray) -> np.ndarray:
        if dec.shape[1] == 1:
            return np.where(dec[:, 0] > 0, self.classes[0], self.classes[1])
        return self.classes[np.argmax(dec, axis=1)]

    @property
    def has_probability(self) -> bool:
        """Whether LIBLINEAR's ``predict -b 1`` gives probabilities: logistic regression."""
        return self.solver_type in LOGISTIC

    def predict_proba(self, X) -> tuple[np.ndarray, np.ndarray]:
        """LIBLINEAR's ``predict_probability``: (labels, probabilities), columns in ``classes``
        order. Each model's sigmoid 1 / (1 + exp(-dec)); two classes take the second as 1
        minus the first, more are divided by their sum (one-vs-rest)."""
        if not self.has_probability:
            raise ValueError("probability output is only supported for logistic regression")
        dec = self.decision_function(X)
        with np.errstate(over="ignore"):  # exp(-dec) = inf: probability 0, as LIBLINEAR's
            prob = 1.0 / (1.0 + np.exp(-dec))
        if dec.shape[1] == 1:
            prob = np.column_stack((prob[:, 0], 1.0 - prob[:, 0]))
        else:
            prob /= prob.sum(axis=1, keepdims=True)
        return self._labels(dec), prob
