"""Precomputed and callable kernels (#18 item 3): psvm.gram's kernels against brute force and
against the explicit kernel's code, and the estimators' scikit-learn behaviour."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import cross_val_score

import psvm
from psvm._params import KERNELS
from psvm.gram import gram_column, gram_decision, gram_diag, gram_sums, serial_numbers
from psvm.kernels import csr_arrays, decision_values, kernel_matrix, kernel_sums, sq_norms_of

ESTIMATORS = (psvm.SVC, psvm.NuSVC, psvm.SVR, psvm.NuSVR, psvm.OneClassSVM)
rng = np.random.default_rng(0)


def psvm_gram(A, B, kernel="rbf", gamma=0.3):
    """psvm's own kernel values K(A, B)."""
    A, B = sp.csr_matrix(A), sp.csr_matrix(B)
    return kernel_matrix(A, B, KERNELS[kernel], gamma, 0.0, 3)


def linear_kernel(A, B):  # a module-level callable: estimators using it pickle
    return psvm_gram(A, B, "linear")


def with_serials(K):
    """LIBSVM's -t 4 rows of K: the serial number in column 0."""
    return sp.csr_matrix(np.hstack([np.arange(1.0, K.shape[0] + 1)[:, None], K]))


@pytest.fixture(scope="module")
def data():
    X = rng.normal(size=(60, 5))
    y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, 1, 2)
    return X[:45], y[:45], X[45:], y[45:]


def targets(Est, y, X):
    return {"regression": X[:, 0], "novelty": None}.get(Est._task, y)


# -- kernels ------------------------------------------------------------------------------------
def test_columns_diagonal_and_serials_read_the_gram_rows():
    K = rng.normal(size=(7, 7))
    K[2, 3] = 0.0
    G = with_serials(K)
    G.eliminate_zeros()  # a missing entry reads 0
    indptr, indices, data = csr_arrays(G)
    serial = serial_numbers(indptr, indices, data, np.empty(7))
    np.testing.assert_array_equal(serial, np.arange(1, 8))
    diag = gram_diag(indptr, indices, data, serial, np.empty(7))
    np.testing.assert_array_equal(diag, K.diagonal())
    rows = np.array([0, 3, 5, 6])
    for i in range(7):  # column i: row x_i read at each row's serial number (LIBSVM's K(i, j))
        x = slice(indptr[i], indptr[i + 1])
        out = gram_column(indices[x], data[x], serial, rows, np.zeros(9), np.empty(4))
        np.testing.assert_array_equal(out, K[i, rows])


def test_sums_and_decision_values_are_the_explicit_kernels_bits():
    X = sp.csr_matrix(rng.normal(size=(40, 6)))
    K = psvm_gram(X, X)
    coef = rng.normal(size=37)
    F = csr_arrays(X[3:40])  # the changed vectors
    rows = np.arange(0, 40, 3)
    kparams = (KERNELS["rbf"], 0.3, 0.0, 3)
    ref = kernel_sums(*F, sq_norms_of(X[3:40]), coef, *csr_arrays(X), sq_norms_of(X), rows, kparams)
    got = gram_sums(csr_arrays(with_serials(K)[3:40]), coef, rows + 1)  # F's rows, read at serials
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_allclose(got, K[3:40][:, rows].T @ coef, rtol=1e-12)
    T = sp.csr_matrix(rng.normal(size=(9, 6)))
    sv = np.array([1, 4, 5, 9, 20, 33])
    c, rho = rng.normal(size=(2, sv.size)), np.array([0.5, -0.25])
    ref = decision_values(T, X[sv], c, rho, kparams)
    Kt = psvm_gram(T, X)
    np.testing.assert_array_equal(gram_decision(Kt, sv, c, rho), ref)  # dense, bare Gram
    Kt = with_serials(Kt)  # LIBSVM's rows: column 0 first
    np.testing.assert_array_equal(gram_decision(Kt, sv + 1, c, rho), ref)


# -- estimators ---------------------------------------------------------------------------------
@pytest.mark.parametrize("Est", ESTIMATORS)
@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_gram_and_callable_give_the_explicit_model(data, Est, kernel):
    X, y, T, _ = data
    y = targets(Est, y, X)
    explicit = Est(kernel=kernel, gamma=0.3).fit(X, y)
    pre = Est(kernel="precomputed").fit(psvm_gram(X, X, kernel), y)
    fn = Est(kernel=lambda A, B: psvm_gram(A, B, kernel)).fit(X, y)
    method = "predict" if Est._task == "regression" else "decision_function"
    for est, test in ((pre, psvm_gram(T, X, kernel)), (fn, T)):
        np.testing.assert_array_equal(est.dual_coef_, explicit.dual_coef_)
        np.testing.assert_array_equal(est.intercept_, explicit.intercept_)
        np.testing.assert_array_equal(est.support_, explicit.support_)
        ref = getattr(explicit, method)(T)
        np.testing.assert_array_equal(getattr(est, method)(test), ref)
        assert est.support_vectors_.shape == (0, 0) and est._gamma == 0.0  # scikit-learn's


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_numpy_gram_agrees_with_sklearn_and_the_explicit_kernel(data, kernel):
    """A Gram matrix from numpy (BLAS dot products, scikit-learn's exp) differs from psvm's
    kernel in its last bits; the SMO steps then part, and each solution is within the stop
    tolerance: objectives agree to 1e-6, predictions exactly."""
    from sklearn.svm import SVC

    X, y, T, yt = data
    if kernel == "linear":
        K, Kt = X @ X.T, T @ X.T
    else:
        K, Kt = rbf_kernel(X, X, gamma=0.3), rbf_kernel(T, X, gamma=0.3)
    ours = psvm.SVC(kernel="precomputed").fit(K, y)
    sk = SVC(kernel="precomputed").fit(K, y)
    explicit = psvm.SVC(kernel=kernel, gamma=0.3).fit(X, y)

    def objective(est):
        c, s = est.dual_coef_.ravel(), est.support_
        return 0.5 * c @ K[np.ix_(s, s)] @ c - np.abs(c).sum()

    for other in (sk, explicit):
        np.testing.assert_allclose(objective(ours), objective(other), rtol=1e-6)
        np.testing.assert_array_equal(ours.predict(Kt), sk.predict(Kt))
    np.testing.assert_allclose(ours.decision_function(Kt), sk.decision_function(Kt), atol=1e-2)
    assert ours.score(Kt, yt) == sk.score(Kt, yt)


def test_sklearn_errors_and_attributes(data):
    X, y, T, _ = data
    K = psvm_gram(X, X)
    with pytest.raises(TypeError, match="Sparse precomputed kernels are not supported"):
        psvm.SVC(kernel="precomputed").fit(sp.csr_matrix(K), y)
    with pytest.raises(ValueError, match="must be a square matrix. Input is a 45x40 matrix"):
        psvm.SVC(kernel="precomputed").fit(K[:, :40], y)
    est = psvm.SVC(kernel="precomputed").fit(K, y)
    with pytest.raises(ValueError, match="X has 44 features, but SVC is expecting 45"):
        est.predict(K[:, :44])
    assert est.shape_fit_ == (45, 45) and est.n_features_in_ == 45
    tags = est.__sklearn_tags__().input_tags
    assert tags.pairwise and not tags.sparse
    with pytest.raises(AttributeError, match="linear kernel"):
        est.coef_  # noqa: B018
    fn = psvm.SVC(kernel=linear_kernel).fit(X, y)
    assert fn.shape_fit_ == X.shape and not hasattr(fn, "n_features_in_")
    sparse = psvm.SVC(kernel=lambda A, B: sp.csr_matrix(linear_kernel(A, B))).fit(X, y)
    np.testing.assert_array_equal(sparse.decision_function(T), fn.decision_function(T))
    assert not fn.__sklearn_tags__().input_tags.pairwise
    again = pickle.loads(pickle.dumps(fn))
    np.testing.assert_array_equal(again.predict(T), fn.predict(T))
    bad = psvm.SVR(kernel=lambda A, B: np.array([[1.0]]))
    with pytest.raises(ValueError, match="X.shape\\[0\\] should be equal to X.shape\\[1\\]"):
        bad.fit(X, X[:, 0])  # psvm checks the kernel's output at fit (scikit-learn at predict)


def test_callable_takes_any_input(data):
    """scikit-learn's test_custom_kernel_not_array_input, for every type: a kernel on strings."""
    words = ["A A", "A", "B", "B B", "A B"]
    counts = np.array([[2, 0], [1, 0], [0, 1], [0, 2], [1, 1]], dtype=float)

    def string_kernel(A, B):
        a = np.array([[w.count("A"), w.count("B")] for w in A], dtype=float)
        b = np.array([[w.count("A"), w.count("B")] for w in B], dtype=float)
        return psvm_gram(a, b, "linear")

    y = np.array([1, 1, 2, 2, 1])
    for Est in ESTIMATORS:
        yy = targets(Est, y, counts)
        a = Est(kernel=string_kernel).fit(words, yy)
        b = Est(kernel="linear").fit(counts, yy)
        np.testing.assert_array_equal(a.predict(words), b.predict(counts))


def test_cross_val_score_cuts_the_gram_matrix_both_ways(data):
    """The pairwise tag: scikit-learn's cross-validation takes K[train][:, train] for fit and
    K[test][:, train] for predict, so the scores are the explicit kernel's."""
    X, y, _, _ = data
    K = psvm_gram(X, X)
    pre = cross_val_score(psvm.SVC(kernel="precomputed"), K, y, cv=3)
    explicit = cross_val_score(psvm.SVC(gamma=0.3), X, y, cv=3)
    np.testing.assert_array_equal(pre, explicit)
    clone(psvm.SVC(kernel=linear_kernel))  # callables clone as parameters


def test_model_files_with_libsvm(data, tmp_path):
    """to_libsvm_model writes LIBSVM's 0:serial lines, which libsvm's svm_predict reads; a
    LIBSVM -t 4 model loads with support_ from its serial numbers."""
    from libsvm.svmutil import (
        svm_load_model,
        svm_parameter,
        svm_predict,
        svm_problem,
        svm_save_model,
        svm_train,
    )

    X, y, T, yt = data
    K, Kt = psvm_gram(X, X), psvm_gram(T, X)
    est = psvm.SVC(kernel="precomputed").fit(K, y)
    path = tmp_path / "m.model"
    est.to_libsvm_model(path)
    assert "kernel_type precomputed" in path.read_text() and " 0:" in path.read_text()
    rows = [{0: 0.0, **{j + 1: v for j, v in enumerate(r)}} for r in Kt.tolist()]
    pred, _, _ = svm_predict(yt.tolist(), rows, svm_load_model(str(path)), "-q")
    np.testing.assert_array_equal(pred, est.predict(Kt))
    train = [{0: i + 1.0, **{j + 1: v for j, v in enumerate(r)}} for i, r in enumerate(K.tolist())]
    lib = svm_train(svm_problem(y.tolist(), train, isKernel=True), svm_parameter("-t 4 -q"))
    svm_save_model(str(tmp_path / "lib.model"), lib)
    loaded = psvm.SVC.from_libsvm_model(tmp_path / "lib.model", n_features=45)
    largest = int(max(loaded.support_)) + 1  # narrower rows would miss SV columns: refused
    with pytest.raises(
        ValueError, match=f"n_features={largest - 1} must be an integer >= {largest}"
    ):
        psvm.SVC.from_libsvm_model(tmp_path / "lib.model", n_features=largest - 1)
    np.testing.assert_array_equal(np.sort(loaded.support_), np.sort(est.support_))
    lib_pred, _, _ = svm_predict(yt.tolist(), rows, lib, "-q")
    np.testing.assert_array_equal(loaded.predict(Kt), lib_pred)
