"""A fitted kernel SVM of any LIBSVM svm_type, held exactly in LIBSVM's ``svm_model`` layout.

Keeping LIBSVM's layout (``sv_coef``, ``rho``, ``nSV``, labels in model order)
means the text model file is a plain dump, LIBSVM can load what psvm writes,
and prediction can be checked line by line against ``svm_predict_values``.
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from psvm._params import ALL_KERNELS, CLASSIFIERS, REGRESSORS, SVM_TYPES
from psvm.kernels import canonical_csr, columns_right, decision_values

# meta key: the class order of the file a reordered model came from (:meth:`SVCModel.
# with_class_order`), in which its probabilities are coupled, as LIBSVM couples them there
COUPLING_ORDER = "coupling_order"

# svm-predict -b 1 on a model without probability information (its words, typo included)
NO_PROBABILITY = "Model does not support probabiliy estimates"


@dataclass(eq=False)
class SVCModel:
    """A trained SVM in LIBSVM's layout: one-vs-one for the classifiers, and for
    one-class and the regressors one coefficient row and one rho, no labels.

    Parameters
    ----------
    kernel : {"linear", "poly", "rbf", "sigmoid", "precomputed"}
        Kernel name. A precomputed kernel's support vectors hold their serial
        number in column 0 alone (LIBSVM's ``0:serial``, the row's 1-based index
        in the training set), and its inputs hold K(x, x_j) in column j
        (:mod:`psvm.gram`).
    gamma, coef0 : float
        Kernel parameters (unused ones are ignored, as in LIBSVM).
    degree : int
        Degree of the polynomial kernel.
    classes : ndarray of shape (n_classes,)
        Labels in model order (LIBSVM's ``label`` line); empty for the types
        without classes.
    n_support : ndarray of shape (n_classes,)
        Number of support vectors of each class, in ``classes`` order; empty
        for the types without classes.
    support_vectors : csr_matrix of shape (total_sv, n_sv_features)
        Support vectors grouped by class in ``classes`` order; widened to
        ``n_features`` columns when that is known.
    dual_coef : ndarray of shape (n_classes - 1, total_sv)
        LIBSVM's ``sv_coef``: for the pair (i, j), i < j, an SV of class i
        uses row j - 1 and an SV of class j uses row i.
    rho : ndarray of shape (n_classes * (n_classes - 1) // 2,)
        Offsets per pair in order (0,1), (0,2), ..., (0,k-1), (1,2), ...
    n_features : int or None, default=None
        Number of training features, when known. Wider inputs are rejected.
    meta : dict, default={}
        Extra psvm information (for example ``{"n_iter": [...]}``).
    svm_type : str, default="c_svc"
        LIBSVM's name of the type (:data:`SVM_TYPES`).
    gram_offset : int, default=0
        Precomputed kernels: K(x, SV s) is in column ``serial_s - gram_offset`` of
        an input row; 0 for LIBSVM's rows (column 0 holds a serial number), 1 for
        scikit-learn's Gram matrices (column j holds K(x, x_{j+1})).
    index_base : int, default=1
        The model file's feature index of column 0: 1, or 0 for a model of a file
        that holds feature index 0 (svm-train reads such files; column j is index j).
    trusted : bool, default=False
        A model a solver has just built: its support vectors are canonical float64 CSR
        already, and ``validate`` is skipped.

    Raises
    ------
    ValueError
        If the fields are inconsistent with each other (see ``validate``).
    """

    kernel: str
    gamma: float
    coef0: float
    degree: int
    classes: np.ndarray
    n_support: np.ndarray
    support_vectors: sp.csr_matrix
    dual_coef: np.ndarray
    rho: np.ndarray
    n_features: int | None = None
    meta: dict = field(default_factory=dict)
    svm_type: str = "c_svc"
    gram_offset: int = 0
    index_base: int = 1
    trusted: InitVar[bool] = False  # built by a solver: consistent, no need to validate

    def __post_init__(self, trusted: bool = False) -> None:
        self.classes = np.asarray(self.classes)
        self.n_support = np.asarray(self.n_support, dtype=np.int64)
        if not trusted:  # (a solver's support vectors are rows of its canonical CSR input)
            self.support_vectors = canonical_csr(self.support_vectors)
        self.dual_coef = np.ascontiguousarray(self.dual_coef, dtype=np.float64)  # one BLAS path
        self.rho = np.asarray(self.rho, dtype=np.float64)
        if not trusted:
            self.validate()
        sv = self.support_vectors
        if self.n_features is not None and sv.shape[1] < self.n_features:
            # One canonical width, so models equal field by field compare equal.
            self.support_vectors = sp.csr_matrix(
                (sv.data, sv.indices, sv.indptr), shape=(sv.shape[0], self.n_features)
            )

    @property
    def n_classes(self) -> int:
        """LIBSVM's ``nr_class``: 2 for the types without classes."""
        return int(self.classes.shape[0]) if self.is_classifier else 2

    @property
    def is_classifier(self) -> bool:
        return self.svm_type in CLASSIFIERS

    @property
    def kernel_id(self) -> int:
        return ALL_KERNELS[self.kernel]

    @property
    def max_index(self) -> int | None:
        """The largest feature index of the model's inputs, when ``n_features`` is known."""
        return None if self.n_features is None else self.n_features - 1 + self.index_base

    def zero_based(self) -> SVCModel:
        """The model with column j for feature index j (``index_base`` 0): for inputs that
        hold index 0, the support vectors move one column to the right."""
        if self.index_base == 0:
            return self
        width = None if self.n_features is None else self.n_features + 1
        sv = columns_right(self.support_vectors)
        return replace(self, support_vectors=sv, n_features=width, index_base=0)

    def serials(self) -> np.ndarray:
        """A precomputed model's support vectors' serial numbers (their column 0), int64."""
        serial = self.support_vectors[:, :1].toarray().ravel()
        bad = np.flatnonzero((serial < 1) | (serial % 1 != 0))
        if bad.size:
            raise ValueError(
                f"support vector {bad[0]} of a precomputed kernel has no serial number "
                f"(an integer >= 1 in column 0, LIBSVM's 0:serial), got {serial[bad[0]]:g}"
            )
        return serial.astype(np.int64)

    def validate(self) -> None:
        """Check the fields agree with each other; raise ``ValueError`` naming what does not."""
        if self.kernel not in ALL_KERNELS:
            raise ValueError(f"kernel must be one of {sorted(ALL_KERNELS)}, got {self.kernel!r}")
        if self.kernel == "precomputed":
            self.serials()
        for name in ("gamma", "coef0"):
            if not np.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite, got {getattr(self, name)!r}")
        if int(self.degree) != self.degree:
            raise ValueError(f"degree must be an integer, got {self.degree!r}")
        if self.index_base not in (0, 1) or (self.index_base == 0 and self.kernel == "precomputed"):
            raise ValueError(
                f"index_base must be 1, or 0 for an explicit kernel, got {self.index_base!r}"
            )
        self.degree = int(self.degree)
        if self.svm_type not in SVM_TYPES:
            raise ValueError(f"svm_type must be one of {list(SVM_TYPES)}, got {self.svm_type!r}")
        if not self.is_classifier:
            self._validate_single()
            return
        if self.classes.ndim != 1 or self.classes.size == 0:
            raise ValueError(f"classes must be a non-empty 1-D array, got {self.classes!r}")
        k = self.n_classes
        if np.unique(self.classes).size != k:
            raise ValueError(f"classes must be distinct, got {self.classes.tolist()}")
        if self.n_support.shape != (k,):
            raise ValueError(
                f"n_support has shape {self.n_support.shape}, expected ({k},): one per class"
            )
        if np.any(self.n_support < 0):
            raise ValueError(f"n_support must be non-negative, got {self.n_support.tolist()}")
        total_sv = int(self.n_support.sum())
        if self.support_vectors.shape[0] != total_sv:
            raise ValueError(
                f"support_vectors has {self.support_vectors.shape[0]} rows but "
                f"sum(n_support) = {total_sv}"
            )
        if self.dual_coef.shape != (k - 1, total_sv):
            raise ValueError(
                f"dual_coef has shape {self.dual_coef.shape}, expected ({k - 1}, {total_sv}) "
                f"for {k} classes and {total_sv} support vectors"
            )
        n_pairs = k * (k - 1) // 2
        if self.rho.shape != (n_pairs,):
            raise ValueError(
                f"rho has shape {self.rho.shape}, expected ({n_pairs},): one per class pair "
                f"for {k} classes"
            )
        self._validate_common()

    def _validate_single(self) -> None:
        """One-class and regression: no classes, one coefficient row, one rho."""
        if self.classes.size or self.n_support.size:
            raise ValueError(f"a {self.svm_type} model has no classes and no n_support")
        total_sv = self.support_vectors.shape[0]
        if self.dual_coef.shape != (1, total_sv):
            raise ValueError(
                f"dual_coef has shape {self.dual_coef.shape}, expected (1, {total_sv}) "
                f"for {total_sv} support vectors"
            )
        if self.rho.shape != (1,):
            raise ValueError(f"rho has shape {self.rho.shape}, expected (1,)")
        self._validate_common()

    def _validate_common(self) -> None:
        for name, arr in (
            ("dual_coef", self.dual_coef),
            ("rho", self.rho),
            ("support_vectors", self.support_vectors.data),
        ):
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{name} contains non-finite values")
        if self.n_features is not None:
            if int(self.n_features) != self.n_features or self.n_features < 0:
                raise ValueError(f"n_features must be a non-negative int, got {self.n_features!r}")
            self.n_features = int(self.n_features)
            if self.support_vectors.shape[1] > self.n_features:
                raise ValueError(
                    f"support_vectors has {self.support_vectors.shape[1]} columns but "
                    f"n_features = {self.n_features}"
                )

    def decision_function(self, X: Any) -> np.ndarray:
        """LIBSVM's one-vs-one decision values.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples; narrower inputs are padded with zero columns. Wider ones are
            taken as LIBSVM takes them: a feature no support vector has adds
            nothing to a dot product but counts in an RBF row's norm.

        Returns
        -------
        dec : ndarray of shape (n_samples, n_classes * (n_classes - 1) // 2)
            ``sum(coef * K(x, sv)) - rho`` per pair, in ``rho`` order (one
            column for the types without classes).
        """
        if self.kernel == "precomputed":
            from psvm.gram import gram_decision

            cols = self.serials() - self.gram_offset
            return gram_decision(X, cols, self.pair_coef(), self.rho)
        kparams = (self.kernel_id, self.gamma, self.coef0, self.degree)
        return decision_values(X, self.support_vectors, self.pair_coef(), self.rho, kparams)

    def pair_coef(self) -> np.ndarray:
        """Coefficients of each class pair's decision function: shape (n_pairs, total_sv).

        Row p, for the pair (i, j), holds ``sv_coef[j - 1]`` on class i's SVs and
        ``sv_coef[i]`` on class j's (LIBSVM's ``svm_predict_values``), zero elsewhere.
        """
        if not self.is_classifier:  # one decision function: sv_coef as it is
            return self.dual_coef
        k = self.n_classes
        start = np.concatenate(([0], np.cumsum(self.n_support)))
        coef = np.zeros((k * (k - 1) // 2, self.dual_coef.shape[1]))
        for i in range(k):
            for j in range(i + 1, k):
                p = _pair_index(i, j, k)
                coef[p, start[i] : start[i + 1]] = self.dual_coef[j - 1, start[i] : start[i + 1]]
                coef[p, start[j] : start[j + 1]] = self.dual_coef[i, start[j] : start[j + 1]]
        return coef

    def predict(self, X: Any) -> np.ndarray:
        """LIBSVM's ``svm_predict``: labels by one-vs-one voting; +1 or -1 for one-class
        (decision value > 0); the decision value for regression.

        Each pair (i, j) votes for i when its decision value is > 0, else for j;
        ties go to the class that comes first in ``classes``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
            Labels from ``classes``, +-1 (one-class) or values (regression).
        """
        dec = self.decision_function(X)
        if self.svm_type in REGRESSORS:
            return dec[:, 0]
        if self.svm_type == "one_class":
            return np.where(dec[:, 0] > 0, 1.0, -1.0)
        return self.classes[ovo_vote(dec, self.n_classes)]

    @property
    def has_probability(self) -> bool:
        """Whether the model holds a ``-b 1`` probability model: the pairwise sigmoids
        (``probA``/``probB``), the regressors' sigma or one-class density marks."""
        if self.svm_type in REGRESSORS:  # svm_svr_probability's sigma, in probA
            return "probA" in self.meta
        if self.svm_type == "one_class":  # LIBSVM 3.3x's svm_one_class_probability
            return "prob_density_marks" in self.meta
        return self.is_classifier and "probA" in self.meta and "probB" in self.meta

    def predict_proba(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """LIBSVM's ``svm_predict_probability``: (labels, probabilities) of shape (n,) and
        (n, n_classes), columns in ``classes`` order; the label is the most probable class
        (the first on ties), which may differ from :meth:`predict`'s vote. One-class: the
        label of :meth:`predict` and the columns (normal, outlier), from the density marks.

        Raises
        ------
        ValueError
            If the model has no probability information (trained without ``-b 1``).
        """
        from psvm.probability import one_class_probability, pairwise_coupling

        if not self.has_probability:
            raise ValueError(NO_PROBABILITY)
        if self.svm_type == "one_class":
            dec = self.decision_function(X)[:, 0]
            normal = one_class_probability(dec, self.meta["prob_density_marks"])
            return np.where(dec > 0, 1.0, -1.0), np.column_stack((normal, 1 - normal))
        dec, A, B = self.decision_function(X), self.meta["probA"], self.meta["probB"]
        order = self.meta.get(COUPLING_ORDER, self.classes.tolist())
        if order == self.classes.tolist():
            prob = pairwise_coupling(dec, A, B, self.n_classes)
        else:  # LIBSVM's coupling iterates over the classes in order: couple in the file's
            perm = self._permutation(order)  # coupling order -> class index
            pairs, sign = _pairs_in_order(perm)
            A, B = _sigmoids_in_order(A, B, pairs, sign)
            prob = np.empty((dec.shape[0], self.n_classes))
            prob[:, perm] = pairwise_coupling(dec[:, pairs] * sign, A, B, self.n_classes)
        return self.classes[np.argmax(prob, axis=1)], prob

    def _permutation(self, classes: list) -> list[int]:
        """Each of ``classes``' position in ``self.classes`` (-1: not a class)."""
        where = {c: i for i, c in enumerate(self.classes.tolist())}
        return [where.get(c, -1) for c in classes]

    def with_class_order(self, classes: Any) -> SVCModel:
        """The same classifier with its classes listed in the order ``classes``.

        LIBSVM keeps labels in order of first appearance, scikit-learn sorts them.
        Pair (a, b) of the new order is the old pair of the same two classes; when
        their order flips, its ``rho`` and its coefficients change sign (the decision
        value of a pair is positive for its first class). A ``-b 1`` model keeps the
        order it was first in (:data:`COUPLING_ORDER`); ``meta["support"]`` follows
        the support vectors.

        Parameters
        ----------
        classes : array-like of shape (n_classes,)
            A permutation of ``self.classes``.

        Returns
        -------
        model : SVCModel
            A new model; ``self`` is unchanged.
        """
        classes = np.asarray(classes)
        perm = self._permutation(classes.tolist())  # new class index -> old
        k = self.n_classes
        if classes.shape != (k,) or sorted(perm) != list(range(k)):
            raise ValueError(
                f"classes {classes.tolist()} are not a permutation of {self.classes.tolist()}"
            )
        old = np.concatenate(([0], np.cumsum(self.n_support)))
        n_support = self.n_support[perm]
        new = np.concatenate(([0], np.cumsum(n_support)))
        dual_coef = np.zeros_like(self.dual_coef)
        for a in range(k):
            src, dst = slice(old[perm[a]], old[perm[a] + 1]), slice(new[a], new[a + 1])
            for b in range(k):
                if b != a:  # class a's SVs keep their coefficient row for the pair (a, b)
                    sign = 1.0 if (perm[a] < perm[b]) == (a < b) else -1.0
                    dual_coef[_coef_row(a, b), dst] = (
                        sign * self.dual_coef[_coef_row(perm[a], perm[b]), src]
                    )
        pairs, sign = _pairs_in_order(perm)
        rho = sign * self.rho[pairs]
        rows = np.concatenate([np.arange(old[c], old[c + 1]) for c in perm])
        meta = dict(self.meta)
        if "probA" in meta and "probB" in meta:
            A, B = _sigmoids_in_order(meta["probA"], meta["probB"], pairs, sign)
            meta["probA"], meta["probB"] = A.tolist(), B.tolist()
            meta.setdefault(COUPLING_ORDER, self.classes.tolist())  # (the first order)
        if "support" in meta:  # (a model on its way to a file: its rows' global indices)
            meta["support"] = np.asarray(meta["support"])[rows]
        return SVCModel(
            kernel=self.kernel,
            gamma=self.gamma,
            coef0=self.coef0,
            degree=self.degree,
            classes=classes,
            n_support=n_support,
            support_vectors=self.support_vectors[rows],
            dual_coef=dual_coef,
            rho=rho,
            n_features=self.n_features,
            meta=meta,
            svm_type=self.svm_type,
            gram_offset=self.gram_offset,
            index_base=self.index_base,
        )

    @classmethod
    def from_sklearn(cls, svc: Any) -> SVCModel:
        """Build from a fitted ``sklearn.svm.SVC``, whose libsvm keeps the same layout.

        sklearn stores ``intercept_ = -rho``, except for two classes where it flips the
        sign of both ``dual_coef_`` and ``intercept_`` (its decision_function is then
        minus LIBSVM's). ``gamma`` comes from the resolved private ``svc._gamma``.
        A precomputed kernel's support vectors are their serial numbers, ``support_ + 1``
        (scikit-learn keeps none), read from LIBSVM's rows (``gram_offset`` 0).
        """
        if svc.kernel not in ALL_KERNELS:
            raise ValueError(f"kernel must be one of {sorted(ALL_KERNELS)}, got {svc.kernel!r}")
        sign = -1.0 if len(svc.classes_) == 2 else 1.0
        coef = svc.dual_coef_  # sparse when sklearn was fitted on sparse X
        coef = coef.toarray() if sp.issparse(coef) else np.asarray(coef)
        sv, n_features = svc.support_vectors_, int(svc.n_features_in_)
        if svc.kernel == "precomputed":
            serial = np.asarray(svc.support_, dtype=np.float64) + 1
            sv = sp.csr_matrix((serial, np.zeros(serial.size), np.arange(serial.size + 1)))
            n_features += 1
        return cls(
            kernel=svc.kernel,
            gamma=float(svc._gamma),
            coef0=float(svc.coef0),
            degree=int(svc.degree),
            classes=np.asarray(svc.classes_),
            n_support=np.asarray(svc.n_support_),
            support_vectors=sv,
            dual_coef=sign * coef,
            rho=-sign * np.asarray(svc.intercept_),
            n_features=n_features,
        )


def ovo_vote(dec: np.ndarray, k: int) -> np.ndarray:
    """Index of each row's winner among k classes by LIBSVM's one-vs-one vote on ``dec``
    (pairs in ``rho`` order): (i, j) votes for i when its value is > 0, else for j; ties go
    to the class that comes first."""
    votes = np.zeros((dec.shape[0], k), dtype=np.int64)
    for i in range(k):
        for j in range(i + 1, k):
            pos = dec[:, _pair_index(i, j, k)] > 0
            votes[:, i] += pos
            votes[:, j] += ~pos
    return np.argmax(votes, axis=1)  # the first maximum wins


def _coef_row(c: int, other: int) -> int:
    """Row of ``sv_coef`` that class c's SVs use for the pair {c, other} (LIBSVM layout)."""
    return other - 1 if c < other else other


def _pairs_in_order(perm: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """For each class pair (a, b) of the order ``perm`` (new class -> old), the old pair of
    the same classes and its sign: -1 where its order flipped (its values change sign)."""
    k = len(perm)
    pairs, sign = [], []
    for a in range(k):
        for b in range(a + 1, k):
            i, j = perm[a], perm[b]
            pairs.append(_pair_index(min(i, j), max(i, j), k))
            sign.append(-1.0 if i > j else 1.0)
    return np.array(pairs, dtype=np.intp), np.array(sign)


def _sigmoids_in_order(probA, probB, pairs: np.ndarray, sign: np.ndarray) -> tuple:
    """The pairs' sigmoids (A, B) in the order :func:`_pairs_in_order` gives: a flipped
    pair's decision values change sign, so its A stays and its B changes sign."""
    return np.asarray(probA, float)[pairs], sign * np.asarray(probB, float)[pairs]


def _pair_index(i: int, j: int, k: int) -> int:
    """Position of the pair (i, j), i < j, in LIBSVM's order (0,1), (0,2), ..., (1,2), ..."""
    return i * k - i * (i + 1) // 2 + (j - i - 1)
