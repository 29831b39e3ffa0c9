"""The probability face of the classifiers (``probability=True``, ``predict_proba``), as
scikit-learn 1.9 has it: deprecated there, so psvm warns alike (code moves between the two
unchanged). The probability model is :mod:`psvm.probability` and :mod:`psvm.svc.platt`."""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike
from sklearn.exceptions import NotFittedError
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from psvm._params import ParameterError

DEPRECATION = (
    "The `probability` parameter was deprecated in scikit-learn 1.9, which will remove it "
    "in 1.11; psvm follows. Use `CalibratedClassifierCV({name}(), ensemble=False)` "
    "instead of `{name}(probability=True)`, or psvm-train -b 1 for LIBSVM model files"
)


class ProbabilityMixin:
    """``probability``, ``probA_``, ``probB_``, ``predict_proba`` and ``predict_log_proba``
    of :class:`psvm.SVC` and :class:`psvm.NuSVC`."""

    def _checked_params(self) -> tuple[dict, object]:
        """The other parameters' checks, after ``probability``'s type."""
        if self._given() and not isinstance(self.probability, (bool, np.bool_)):
            raise ParameterError(f"probability must be a bool, got {self.probability!r}")
        return super()._checked_params()

    def _deprecations(self) -> list[str]:
        """scikit-learn 1.9 warns when ``probability`` is given at all, False too."""
        mine = [DEPRECATION.format(name=type(self).__name__)] if self._given() else []
        return super()._deprecations() + mine

    def _given(self) -> bool:
        return not (isinstance(self.probability, str) and self.probability == "deprecated")

    def _fits_probability(self) -> bool:
        """Whether to fit the probability model (``probability`` checked)."""
        return self._given() and bool(self.probability)

    @property
    def probA_(self) -> np.ndarray:
        """Platt's A per class pair (see the class docstring); deprecated as in scikit-learn."""
        warnings.warn(_attr_deprecation("probA_"), FutureWarning, stacklevel=2)
        return self._probA

    @property
    def probB_(self) -> np.ndarray:
        """Platt's B per class pair (see the class docstring); deprecated as in scikit-learn."""
        warnings.warn(_attr_deprecation("probB_"), FutureWarning, stacklevel=2)
        return self._probB

    def _check_proba(self) -> bool:
        if isinstance(self.probability, str) or not self.probability:
            raise AttributeError("predict_proba is not available when probability=False")
        return True

    @available_if(_check_proba)
    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Probability of each class (LIBSVM's ``svm_predict_probability``; local).

        Pairwise coupling of the class pairs' sigmoids (Wu, Lin and Weng's second
        method); with two classes, the pair's sigmoid. The probability model comes
        from internal cross-validation, so its argmax may differ from :meth:`predict`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        T : ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        check_is_fitted(self)
        if self._probA.size == 0 or self._probB.size == 0:
            raise NotFittedError(
                "predict_proba is not available when fitted with probability=False"
            )
        return self._values(X, "predict_proba")[1]

    @available_if(_check_proba)
    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """The log of :meth:`predict_proba`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        T : ndarray of shape (n_samples, n_classes)
        """
        return np.log(self.predict_proba(X))


def _attr_deprecation(name: str) -> str:
    return (
        f"Attribute `{name}` was deprecated in version 1.9 and will be removed in 1.11 as "
        "the `probability=True` option for SVC and NuSVC was deprecated and will be removed "
        "in 1.11 (scikit-learn's deprecation, which psvm follows)."
    )
