"""SVCModel: validation, and predictions against LIBSVM and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from libsvm import svmutil
from sklearn.svm import SVC

import psvm
from psvm.io.model_file import read_model, write_model
from psvm.model import SVCModel

OPTS = {
    "heart": {
        "rbf": "-t 2 -c 1 -g 0.05 -q",
        "linear": "-t 0 -c 1 -q",
        "poly": "-t 1 -c 1 -g 0.05 -r 1 -d 3 -q",
        "sigmoid": "-t 3 -c 1 -g 0.01 -r 0 -q",
    },
    "usps": {
        "rbf": "-t 2 -c 1 -g 0.005 -q",
        "linear": "-t 0 -c 1 -q",
        "poly": "-t 1 -c 1 -g 0.005 -r 1 -d 3 -q",
    },
}


@pytest.fixture(scope="module")
def libsvm_file(heart, usps, tmp_path_factory):
    """LIBSVM's own model file for (problem, kernel), trained once per module."""
    cache: dict = {}

    def get(problem: str, kernel: str) -> str:
        if (problem, kernel) not in cache:
            y, X = heart if problem == "heart" else usps
            path = str(tmp_path_factory.mktemp("m") / f"{problem}-{kernel}.model")
            svmutil.svm_save_model(path, svmutil.svm_train(y, X, OPTS[problem][kernel]))
            cache[problem, kernel] = path
        return cache[problem, kernel]

    return get


def _libsvm_check(path: str, X) -> SVCModel:
    """psvm's predictions on LIBSVM's file against LIBSVM's own on the same file."""
    ours = read_model(path)
    labels, _, dec = svmutil.svm_predict(
        np.zeros(X.shape[0]), X, svmutil.svm_load_model(path), "-q"
    )
    np.testing.assert_array_equal(ours.predict(X), np.asarray(labels))
    np.testing.assert_allclose(ours.decision_function(X), np.asarray(dec), rtol=0, atol=1e-6)
    return ours


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly", "sigmoid"])
def test_matches_libsvm_binary(heart, libsvm_file, kernel):
    model = _libsvm_check(libsvm_file("heart", kernel), heart[1])
    assert model.kernel == kernel
    assert model.classes.tolist() == [1, -1]  # LIBSVM's order: first seen


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly"])
def test_matches_libsvm_multiclass(usps, libsvm_file, kernel):
    model = _libsvm_check(libsvm_file("usps", kernel), usps[1])
    assert model.n_classes == 10
    assert model.rho.shape == (45,)
    assert model.dual_coef.shape == (9, model.support_vectors.shape[0])


def _dense_3class(usps):
    y, X = usps
    keep = np.isin(y, [1, 2, 3])
    return y[keep], X[keep]


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize(
    "params",
    [
        dict(kernel="rbf", gamma=0.05),
        dict(kernel="linear"),
        dict(kernel="poly", gamma=0.1, coef0=1.0, degree=2),
    ],
    ids=["rbf", "linear", "poly"],
)
@pytest.mark.parametrize("problem", ["heart", "usps3"])
def test_matches_sklearn(heart, usps, problem, params, dense):
    y, X = heart if problem == "heart" else _dense_3class(usps)
    svc = SVC(C=1.0, decision_function_shape="ovo", **params)
    X_fit = X.toarray() if dense else X
    svc.fit(X_fit, y)
    model = SVCModel.from_sklearn(svc)
    np.testing.assert_array_equal(model.predict(X), svc.predict(X_fit))
    sk_dec = svc.decision_function(X_fit)
    if problem == "heart":
        sk_dec = -sk_dec[:, None]  # sklearn's binary decision is minus LIBSVM's
    np.testing.assert_allclose(model.decision_function(X), sk_dec, rtol=0, atol=1e-8)


def _tiny(k: int = 3, **over) -> dict:
    """Fields of a k-class model with one SV per class and zero coefficients."""
    fields = dict(
        kernel="linear",
        gamma=0.0,
        coef0=0.0,
        degree=3,
        classes=np.arange(k) * 10 + 5,
        n_support=np.ones(k, dtype=int),
        support_vectors=sp.csr_matrix(np.eye(k)),
        dual_coef=np.zeros((k - 1, k)),
        rho=np.zeros(k * (k - 1) // 2),
        n_features=k,
    )
    fields.update(over)
    return fields


@pytest.mark.parametrize(
    "rho, expected",
    [
        ([-1.0, 1.0, -1.0], 5),  # dec (+, -, +): one vote each, the first class wins
        ([1.0, 1.0, -1.0], 15),  # dec (-, -, +): class 1 gets two votes
        ([0.0, 0.0, 0.0], 25),  # dec 0 votes for the second class of each pair
        ([1.0, -1.0, 1.0], 5),  # dec (-, +, -): one vote each again
    ],
)
def test_voting_ties_like_libsvm(rho, expected, tmp_path):
    model = SVCModel(**_tiny(rho=rho))
    X = sp.csr_matrix(np.ones((2, 3)))
    assert model.predict(X).tolist() == [expected, expected]
    path = str(tmp_path / "tie.model")
    write_model(path, model)
    labels, _, _ = svmutil.svm_predict([0, 0], X, svmutil.svm_load_model(path), "-q")
    assert labels == [expected, expected]


def test_binary_zero_decision_goes_to_second_class():
    model = SVCModel(**_tiny(2, classes=np.array([1, -1])))
    assert model.predict(sp.csr_matrix((1, 2))).tolist() == [-1]


def test_decision_bits_do_not_depend_on_blocks_or_threads(usps, libsvm_file, monkeypatch):
    """Each row's decision values are the same bits alone, in any block of rows, with any
    chunk of SVs and thread count: so every rank of psvm-predict writes the same labels."""
    import numba

    import psvm.kernels.sums as pk

    X = usps[1][:300]
    model = read_model(libsvm_file("usps", "rbf"))
    full = model.decision_function(X)
    rows = np.vstack([model.decision_function(X[r : r + 1]) for r in (0, 17, 299)])
    np.testing.assert_array_equal(rows, full[[0, 17, 299]])
    old = numba.get_num_threads()
    monkeypatch.setattr(pk, "_FT_TILE", 3000)  # SV chunks of 8 rows: 256 features each
    monkeypatch.setattr(pk, "_LANE_LIMIT", 45 * 8 * 7)  # lanes of 7 rows at a time
    monkeypatch.setattr(pk, "_PARALLEL_WORK", 0)  # the parallel path even for small blocks
    try:
        for threads in (1, numba.config.NUMBA_NUM_THREADS):
            numba.set_num_threads(threads)
            np.testing.assert_array_equal(model.decision_function(X), full)
    finally:
        numba.set_num_threads(old)
    assert model.decision_function(X[:0]).shape == (0, 45)


def test_feature_count(heart, libsvm_file):
    X = heart[1]
    model = read_model(libsvm_file("heart", "rbf"))
    model.n_features = 13
    narrow = X[:, :10]
    padded = sp.hstack([narrow, sp.csr_matrix((X.shape[0], 3))]).tocsr()
    np.testing.assert_array_equal(model.decision_function(narrow), model.decision_function(padded))
    # an unseen feature of value 1 (as LIBSVM): |x - sv|^2 grows by 1, so every K by e^-gamma
    wide = sp.hstack([X, sp.csr_matrix(np.ones((X.shape[0], 1)))]).tocsr()
    expected = (model.decision_function(X) + model.rho) * np.exp(-model.gamma) - model.rho
    np.testing.assert_allclose(model.decision_function(wide), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    "over, match",
    [
        (dict(kernel="gauss"), "kernel must be one of"),
        (
            dict(n_support=np.array([1, 1, 2])),
            r"support_vectors has 3 rows but sum\(n_support\) = 4",
        ),
        (dict(n_support=np.array([1, 2])), r"n_support has shape \(2,\), expected \(3,\)"),
        (dict(rho=np.zeros(2)), r"rho has shape \(2,\), expected \(3,\)"),
        (dict(dual_coef=np.zeros((3, 3))), r"dual_coef has shape \(3, 3\), expected \(2, 3\)"),
        (dict(classes=np.array([1, 2, 1])), "classes must be distinct"),
        (dict(rho=np.array([0.0, np.nan, 0.0])), "rho contains non-finite"),
        (dict(n_features=2), "support_vectors has 3 columns but n_features = 2"),
    ],
)
def test_validation_errors(over, match):
    with pytest.raises(ValueError, match=match):
        SVCModel(**_tiny(**over))


def test_one_class_model_predicts_its_label():
    model = SVCModel(**_tiny(1))
    assert model.predict(sp.csr_matrix((2, 1))).tolist() == [5, 5]
    assert model.decision_function(sp.csr_matrix((2, 1))).shape == (2, 0)


# -- the polynomial kernel: LIBSVM's powi ------------------------------------------------------


@pytest.mark.parametrize("degree", [4, 5, 7, 9])
def test_poly_values_are_libsvms_powi(degree, tmp_path):
    """A two-SV model: each decision value is one or two kernel values, so a power taken
    another way than svm.cpp's powi shows (a running product was 2e-14 off at degree 5)."""
    rng = np.random.default_rng(degree)
    model = SVCModel(
        **_tiny(
            2,
            kernel="poly",
            gamma=0.7,
            coef0=1.3,
            degree=degree,
            classes=np.array([1, -1]),
            dual_coef=np.array([[0.5, -0.5]]),
            support_vectors=sp.csr_matrix(rng.normal(size=(2, 2))),
            rho=np.array([0.1]),
        )
    )
    path = str(tmp_path / "poly.model")
    write_model(path, model)
    X = sp.csr_matrix(rng.normal(size=(2000, 2)))
    _, _, dec = svmutil.svm_predict(np.zeros(2000), X, svmutil.svm_load_model(path), "-q")
    ours = read_model(path).decision_function(X)
    np.testing.assert_allclose(ours, np.asarray(dec), rtol=4 * np.finfo(float).eps, atol=0)


def test_degree_5_model_decision_values_within_1e12_of_libsvm(tmp_path):
    """A psvm-trained degree-5 model, predicted by LIBSVM from its file (the sums of many
    kernel values differ in their order of addition only)."""
    from sklearn.datasets import load_digits

    X, y = load_digits(n_class=3, return_X_y=True)
    X = sp.csr_matrix(X / 16.0)
    svc = psvm.SVC(kernel="poly", degree=5, gamma=0.05, coef0=1.0, tol=1e-6).fit(X, y)
    path = str(tmp_path / "poly5.model")
    write_model(path, SVCModel.from_sklearn(svc))
    model = read_model(path)
    _, _, dec = svmutil.svm_predict(np.zeros(X.shape[0]), X, svmutil.svm_load_model(path), "-q")
    dec = np.asarray(dec)
    assert np.abs(model.decision_function(X) - dec).max() <= 1e-12 * np.abs(dec).max()


@pytest.mark.parametrize("problem", ["a9a", "usps"])
def test_decision_values_equal_libsvm_on_real_data(problem, usps, shared_data, tmp_path):
    """LIBSVM's own model, predicted by LIBSVM and by psvm's compiled path: the same labels,
    and decision values within the rounding of sums of thousands of terms."""
    from tests._svm import libsvm_problem

    if problem == "a9a":  # 1,316 SVs
        y, X = libsvm_problem(shared_data / "a9a.xz", tmp_path / "a9a", 3000)
        y_test, X_test = libsvm_problem(shared_data / "a9a.t.xz", tmp_path / "a9a.t", 2000)
        opts = "-t 2 -c 1 -g 0.0081 -q"
    else:  # ten classes, 45 pairs
        y, X = usps[0][:400], usps[1][:400]
        y_test, X_test = usps[0][400:], usps[1][400:]
        opts = "-t 2 -c 10 -g 0.005 -q"
    path = str(tmp_path / f"{problem}.model")
    svmutil.svm_save_model(path, svmutil.svm_train(y, X, opts))
    labels, _, dec = svmutil.svm_predict(y_test, X_test, svmutil.svm_load_model(path), "-q")
    model = read_model(path)
    np.testing.assert_array_equal(model.predict(X_test), labels)
    scale = np.abs(model.dual_coef).sum(axis=1).max()  # a bound on the sum of |terms|
    np.testing.assert_allclose(model.decision_function(X_test), dec, rtol=0, atol=1e-13 * scale)
