"""psvm.SVC as a scikit-learn estimator, in one process.

scikit-learn's estimator checks, meta-estimators (GridSearchCV, Pipeline,
CalibratedClassifierCV, clone), persistence, LIBSVM model files, and agreement
with sklearn.svm.SVC on breast_cancer, digits and a9a.
"""

from __future__ import annotations

import copy
import json
import pickle
import re
import warnings
from pathlib import Path

import joblib
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn import svm
from sklearn.base import clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_breast_cancer, load_digits, load_iris
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import psvm
from psvm._params import DEFAULT_HEURISTIC
from tests._svm import load_head, write_head

DOCS = Path(__file__).resolve().parents[2] / "docs" / "estimator_checks.md"
# Listed with their reasons in docs/estimator_checks.md (a test below keeps the two in step).
EXPECTED_FAILED_CHECKS = {
    "check_sample_weight_equivalence_on_dense_data": (
        "sample_weight is not equivalent to removing/repeating samples."
    ),
    "check_sample_weight_equivalence_on_sparse_data": (
        "sample_weight is not equivalent to removing/repeating samples."
    ),
}

# scikit-learn declares this one for its own NuSVC too
NU_SVC_FAILED_CHECKS = {"check_class_weight_classifiers": "class_weight is ignored."}


def _dense(a):
    return a.toarray() if sp.issparse(a) else np.asarray(a)


@pytest.fixture(scope="module")
def breast_cancer():
    return load_breast_cancer(return_X_y=True)


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


# -- scikit-learn's estimator checks --------------------------------------------------------------
@parametrize_with_checks(
    [
        psvm.SVC(),
        psvm.SVC(kernel="linear", heuristic="earliest", reconstruction="multi"),
        psvm.NuSVC(),
        psvm.SVR(),
        psvm.NuSVR(),
        psvm.OneClassSVM(),
    ],
    expected_failed_checks=lambda est: {
        **EXPECTED_FAILED_CHECKS,
        **(NU_SVC_FAILED_CHECKS if isinstance(est, psvm.NuSVC) else {}),
    },
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_expected_failures_are_documented():
    text = DOCS.read_text()
    documented = set(re.findall(r"^\| `(check_\w+)` \|", text, flags=re.M))
    assert documented == set(EXPECTED_FAILED_CHECKS) | set(NU_SVC_FAILED_CHECKS)


# -- meta-estimators ------------------------------------------------------------------------------
def test_pipeline_in_grid_search_matches_sklearn(breast_cancer):
    X, y = breast_cancer
    grid = {"svc__C": [0.1, 1.0, 10.0], "svc__gamma": ["scale", 0.01]}
    ours = GridSearchCV(make_pipeline(StandardScaler(), psvm.SVC()), grid, cv=3).fit(X, y)
    ref = GridSearchCV(make_pipeline(StandardScaler(), svm.SVC()), grid, cv=3).fit(X, y)
    assert ours.best_params_ == ref.best_params_
    np.testing.assert_allclose(
        ours.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"], atol=0.01
    )
    assert np.mean(ours.predict(X) == ref.predict(X)) >= 0.999


def test_clone_keeps_params_and_drops_the_fit(breast_cancer):
    X, y = breast_cancer
    est = psvm.SVC(C=3.0, heuristic="lazy", reconstruction="multi", n_jobs=1).fit(X, y)
    new = clone(est)
    assert new.get_params() == est.get_params()
    assert not hasattr(new, "support_")


@pytest.mark.parametrize("Estimator", [psvm.SVC, psvm.SGDSVC])  # (SGDSVC's failed: a trial)
def test_clone_and_pickle_with_a_communicator(breast_cancer, Estimator):
    from mpi4py import MPI

    assert pickle.loads(pickle.dumps(Estimator(comm=MPI.COMM_WORLD))).comm is None
    comm = MPI.COMM_SELF.Dup()  # user communicators cannot be pickled or deep-copied
    try:
        est = Estimator(comm=comm)
        assert clone(est).comm is comm
        est.fit(*breast_cancer)
        copied = copy.deepcopy(est)  # the fit copied, the communicator shared
        assert copied.comm is comm and copied.classes_ is not est.classes_
        np.testing.assert_array_equal(
            copied.predict(breast_cancer[0]), est.predict(breast_cancer[0])
        )
        loaded = pickle.loads(pickle.dumps(est))
        assert loaded.comm is None and est.comm is comm
        np.testing.assert_array_equal(
            loaded.predict(breast_cancer[0]), est.predict(breast_cancer[0])
        )
    finally:
        comm.Free()


def test_calibrated_probabilities(breast_cancer):
    X, y = breast_cancer
    ours = CalibratedClassifierCV(make_pipeline(StandardScaler(), psvm.SVC()), ensemble=False)
    ref = CalibratedClassifierCV(make_pipeline(StandardScaler(), svm.SVC()), ensemble=False)
    p = ours.fit(X, y).predict_proba(X)
    assert p.shape == (len(y), 2)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    np.testing.assert_allclose(p, ref.fit(X, y).predict_proba(X), atol=0.02)


# -- persistence ----------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["pickle", "joblib"])
def test_persistence_predicts_identically(tmp_path, digits, how):
    X, y = digits
    est = psvm.SVC(C=10).fit(X[:500], y[:500])
    if how == "pickle":
        loaded = pickle.loads(pickle.dumps(est))
    else:
        joblib.dump(est, tmp_path / "m.joblib")
        loaded = joblib.load(tmp_path / "m.joblib")
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    np.testing.assert_array_equal(loaded.decision_function(X), est.decision_function(X))
    assert loaded.fit_stats_ == est.fit_stats_


def test_fit_stats_are_json(breast_cancer):
    est = psvm.SVC().fit(*breast_cancer)
    stats = json.loads(json.dumps(est.fit_stats_))
    assert stats["schema"] == 1 and stats["ranks"] == 1
    assert stats["counts"]["n_iter"] == est.n_iter_.sum()
    assert stats["values"]["heuristic"] == DEFAULT_HEURISTIC


# -- LIBSVM model files ---------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["digits", "a9a"])
def test_libsvm_model_round_trip(tmp_path, shared_data, digits, case):
    from libsvm import svmutil

    if case == "digits":
        X, y = digits
        est = psvm.SVC(C=10, kernel="poly", coef0=1.0).fit(X[:400], y[:400])
    else:
        X, y = load_head(shared_data / "a9a.xz", 1000)
        est = psvm.SVC().fit(X, y)
    path = tmp_path / "m.model"
    est.to_libsvm_model(path)
    loaded = psvm.SVC.from_libsvm_model(path)
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))
    np.testing.assert_array_equal(loaded.decision_function(X), est.decision_function(X))
    for name in ("support_", "n_support_", "intercept_", "n_iter_", "shape_fit_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(est, name), err_msg=name)
    np.testing.assert_array_equal(_dense(loaded.dual_coef_), _dense(est.dual_coef_))
    theirs, _, _ = svmutil.svm_predict(
        np.zeros(X.shape[0]), sp.csr_matrix(X), svmutil.svm_load_model(str(path)), "-q"
    )
    np.testing.assert_array_equal(np.asarray(theirs), est.predict(X))


@pytest.mark.parametrize("name, n_rows", [("heart_scale.xz", None), ("usps.t.xz", 600)])
def test_model_trained_by_libsvm(tmp_path, shared_data, name, n_rows):
    """Labels in LIBSVM's first-appearance order come back sorted, with the same values."""
    from libsvm import svmutil

    data = write_head(shared_data / name, tmp_path / "train.txt", n_rows)
    y, x = svmutil.svm_read_problem(data, return_scipy=True)
    m = svmutil.svm_train(y, x, "-c 2 -g 0.1 -q")
    svmutil.svm_save_model(str(tmp_path / "l.model"), m)
    theirs, _, dec = svmutil.svm_predict(y, x, m, "-q")
    est = psvm.SVC.from_libsvm_model(tmp_path / "l.model", decision_function_shape="ovo")
    assert list(est.classes_) == sorted(m.get_labels())
    assert (est.support_ == -1).all()
    X = sp.csr_matrix(x)[:, : est.n_features_in_]
    np.testing.assert_array_equal(est.predict(X), np.asarray(theirs))
    if len(est.classes_) == 2:  # positive means classes_[1]; LIBSVM's means its first label
        sign = 1.0 if m.get_labels()[0] == est.classes_[1] else -1.0
        np.testing.assert_allclose(est.decision_function(X), sign * np.ravel(dec), atol=1e-9)


def test_libsvm_model_with_a_wider_X(tmp_path, shared_data):
    """scikit-learn's n_features_in_ check stands; n_features= declares a wider X, which then
    gets LIBSVM's decision values (the features no SV has count in the RBF norm)."""
    from libsvm import svmutil

    data = write_head(shared_data / "heart_scale.xz", tmp_path / "h")
    y, X = svmutil.svm_read_problem(data, return_scipy=True)
    m = svmutil.svm_train(y, X, "-c 2 -g 0.1 -q")
    svmutil.svm_save_model(str(tmp_path / "h.model"), m)
    extra = np.random.default_rng(0).uniform(-1, 1, size=(X.shape[0], 2))
    wide = sp.hstack([X, sp.csr_matrix(extra)]).tocsr()  # features 14 and 15: no SV has them
    theirs, _, dec = svmutil.svm_predict(y, wide, m, "-q")
    est = psvm.SVC.from_libsvm_model(tmp_path / "h.model")
    assert est.n_features_in_ == 13
    with pytest.raises(ValueError, match="X has 15 features, but SVC is expecting 13"):
        est.predict(wide)
    est = psvm.SVC.from_libsvm_model(tmp_path / "h.model", n_features=15)
    assert est.n_features_in_ == 15
    np.testing.assert_array_equal(est.predict(wide), theirs)
    sign = 1.0 if m.get_labels()[0] == est.classes_[1] else -1.0
    np.testing.assert_allclose(est.decision_function(wide), sign * np.ravel(dec), atol=1e-12)
    narrow = psvm.SVC.from_libsvm_model(tmp_path / "h.model").decision_function(X)
    assert np.abs(narrow - est.decision_function(wide)).mean() > 1e-2  # the extra norm counts
    with pytest.raises(ValueError, match="n_features=12 is less than the 13 columns the support"):
        psvm.SVC.from_libsvm_model(tmp_path / "h.model", n_features=12)


def test_libsvm_model_of_one_class_without_support_vectors(tmp_path):
    """svm-train on a file of one class writes nr_class 1 and no SV lines: the file tells
    no width, so the model predicts its label for X of any width (as psvm-predict does),
    unless n_features fixes one."""
    path = tmp_path / "one.model"
    path.write_text(
        "svm_type c_svc\nkernel_type rbf\ngamma 0.5\nnr_class 1\ntotal_sv 0\nrho\n"
        "label 7\nnr_sv 0\nSV\n"
    )
    est = psvm.SVC.from_libsvm_model(path)
    assert not hasattr(est, "n_features_in_")
    for width in (1, 3):
        np.testing.assert_array_equal(est.predict(np.ones((2, width))), [7, 7])
    fixed = psvm.SVC.from_libsvm_model(path, n_features=2)
    assert fixed.n_features_in_ == 2
    np.testing.assert_array_equal(fixed.predict(np.ones((1, 2))), [7])
    with pytest.raises(ValueError, match="expecting 2 features"):
        fixed.predict(np.ones((1, 3)))


@pytest.mark.parametrize(
    "labels, match",
    [
        (("no", "yes"), "integer labels only, got label 'no'"),
        # svm_load_model would read 2**31 as -2**31: another label
        ((-1, 2**31), "32-bit integer labels only \\(read with %d\\), got label 2147483648"),
    ],
)
def test_labels_libsvm_cannot_read_back_stay_out_of_model_files(
    tmp_path, breast_cancer, labels, match
):
    X, y = breast_cancer
    est = psvm.SVC().fit(X, np.where(y == 1, labels[1], labels[0]))
    with pytest.raises(ValueError, match=match):
        est.to_libsvm_model(tmp_path / "m.model")
    assert not (tmp_path / "m.model").exists()
    psvm.SVC().fit(X, np.where(y == 1, -(2**31), 2**31 - 1)).to_libsvm_model(tmp_path / "m.model")
    assert "label -2147483648 2147483647" in (tmp_path / "m.model").read_text()


# -- agreement with sklearn.svm.SVC ---------------------------------------------------------------
@pytest.mark.parametrize("shape", ["ovr", "ovo"])
@pytest.mark.parametrize("dataset", ["breast_cancer", "digits"])
def test_matches_sklearn(request, dataset, shape):
    X, y = request.getfixturevalue(dataset)
    kw = dict(decision_function_shape=shape)
    ours, ref = psvm.SVC(**kw).fit(X, y), svm.SVC(**kw).fit(X, y)
    assert np.mean(ours.predict(X) == ref.predict(X)) >= 0.999
    assert ours._gamma == pytest.approx(ref._gamma, rel=1e-12)
    np.testing.assert_array_equal(ours.classes_, ref.classes_)
    # decision values, once both solvers are converged well below 1e-3
    ours, ref = psvm.SVC(tol=1e-5, **kw).fit(X, y), svm.SVC(tol=1e-5, **kw).fit(X, y)
    assert ours.decision_function(X).shape == ref.decision_function(X).shape
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=1e-3)
    np.testing.assert_array_equal(ours.support_, ref.support_)
    np.testing.assert_allclose(ours.dual_coef_, ref.dual_coef_, atol=1e-3)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=1e-3)


def test_matches_sklearn_on_a9a(shared_data):
    X, y = load_head(shared_data / "a9a.xz", 3000)
    Xt, _ = load_head(shared_data / "a9a.t.xz", 2000, n_features=X.shape[1])
    ours, ref = psvm.SVC().fit(X, y), svm.SVC().fit(X, y)
    assert np.mean(ours.predict(Xt) == ref.predict(Xt)) >= 0.999
    assert sp.issparse(ours.support_vectors_) and sp.issparse(ours.dual_coef_)
    ours, ref = psvm.SVC(tol=1e-5).fit(X, y), svm.SVC(tol=1e-5).fit(X, y)
    np.testing.assert_allclose(ours.decision_function(Xt), ref.decision_function(Xt), atol=1e-3)


def test_sample_weight_matches_sklearn(breast_cancer):
    X, y = breast_cancer
    X = StandardScaler().fit_transform(X)
    sw = np.random.default_rng(0).uniform(0, 2, size=y.size)
    sw[::7] = 0.0
    ours = psvm.SVC(tol=1e-5).fit(X, y, sample_weight=sw)
    ref = svm.SVC(tol=1e-5).fit(X, y, sample_weight=sw)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=1e-3)
    # sklearn's support_ indexes the rows left after dropping zero weights; psvm's indexes X
    np.testing.assert_array_equal(ours.support_, np.flatnonzero(sw > 0)[ref.support_])


@pytest.mark.parametrize("class_weight", ["balanced", {0: 3.0, 7: 0.5}])
def test_class_weight_matches_sklearn(digits, class_weight):
    X, y = digits
    rows = np.flatnonzero((y != 0) | (np.arange(y.size) % 4 == 0))  # class 0 rarer
    X, y = X[rows], y[rows]
    ours = psvm.SVC(tol=1e-5, class_weight=class_weight).fit(X, y)
    ref = svm.SVC(tol=1e-5, class_weight=class_weight).fit(X, y)
    np.testing.assert_allclose(ours.class_weight_, ref.class_weight_, rtol=1e-12)
    np.testing.assert_array_equal(ours.predict(X), ref.predict(X))
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X), atol=1e-3)


def test_class_weight_of_a_missing_class_warns_as_libsvm(breast_cancer):
    """A weight for a label not in y is ignored with LIBSVM's warning, not an error."""
    X, y = breast_cancer
    with pytest.warns(UserWarning, match="^class label 7 specified in weight is not found$"):
        ours = psvm.SVC(class_weight={1: 2.0, 7: 3.0}).fit(X, y)
    ref = psvm.SVC(class_weight={1: 2.0}).fit(X, y)
    np.testing.assert_array_equal(ours.class_weight_, [1.0, 2.0])
    np.testing.assert_array_equal(ours.dual_coef_, ref.dual_coef_)


@pytest.mark.parametrize("dataset", ["breast_cancer", "digits"])
def test_linear_coef_matches_sklearn(request, dataset):
    X, y = request.getfixturevalue(dataset)
    X = StandardScaler().fit_transform(X)[:300]
    y = y[:300]
    ours = psvm.SVC(kernel="linear", tol=1e-5).fit(X, y)
    ref = svm.SVC(kernel="linear", tol=1e-5).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=1e-3)
    with pytest.raises(AttributeError, match="linear kernel"):
        _ = psvm.SVC().fit(X, y).coef_


# -- parameters -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "params, expected",
    [
        ({}, DEFAULT_HEURISTIC),
        ({"shrinking": False}, "none"),
        ({"shrinking": "earliest"}, "earliest"),
        ({"shrinking": False, "heuristic": "lazy"}, "lazy"),  # heuristic wins
        ({"shrinking": True, "heuristic": "none"}, "none"),
    ],
)
def test_shrinking_and_heuristic(breast_cancer, params, expected):
    X, y = breast_cancer
    est = psvm.SVC(**params).fit(X, y)
    assert est.fit_stats_["values"]["heuristic"] == expected
    np.testing.assert_array_equal(est.predict(X), psvm.SVC().fit(X, y).predict(X))


def test_random_state_and_n_jobs_do_not_change_the_model(digits):
    import numba

    X, y = digits[0][:400], digits[1][:400]
    a = psvm.SVC(random_state=0).fit(X, y)
    threads = numba.get_num_threads()
    b = psvm.SVC(random_state=np.random.RandomState(1), n_jobs=1).fit(X, y)
    assert numba.get_num_threads() == threads  # restored after fit
    np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


@pytest.mark.parametrize(
    "params, name",
    [
        (dict(C=-1.0), "C"),
        (dict(C="big"), "C"),
        (dict(kernel="gauss"), "kernel"),
        (dict(degree=-1), "degree"),
        (dict(degree=2**31), "degree"),
        (dict(degree=3.0), "degree"),
        (dict(gamma="bad"), "gamma"),
        (dict(gamma=-1.0), "gamma"),
        (dict(coef0=np.inf), "coef0"),
        (dict(shrinking="maybe"), "shrinking"),
        (dict(heuristic="fast"), "heuristic"),
        (dict(reconstruction="often"), "reconstruction"),
        (dict(selection="third"), "selection"),
        (dict(tol=0.0), "tol"),
        (dict(cache_size=0), "cache_size"),
        (dict(max_iter=-2), "max_iter"),
        (dict(max_iter=1.5), "max_iter"),
        (dict(class_weight="auto"), "class_weight"),
        (dict(class_weight={0: -1.0}), "class_weight"),
        (dict(decision_function_shape="ovx"), "decision_function_shape"),
        (dict(n_jobs=0), "n_jobs"),
        (dict(n_threads=-1), "n_threads"),
        (dict(random_state="seed"), "random_state"),
        (dict(distributed="scattered"), "distributed"),
        (dict(break_ties="no"), "break_ties"),  # a str was truthy: ties broken
        (dict(verbose="loud"), "verbose"),
        (dict(verbose=-1), "verbose"),
        (dict(resume="y", checkpoint="c.npz"), "resume"),
    ],
)
def test_bad_params_are_named(params, name):
    X, y = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]), np.array([0, 1, 1, 0])
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        psvm.SVC(**params).fit(X, y)


def test_bad_fit_and_predict_inputs(breast_cancer):
    X, y = breast_cancer
    with pytest.raises(ValueError, match="sample_weight"):
        psvm.SVC().fit(X, y, sample_weight=-np.ones(y.size))
    with pytest.raises(ValueError, match="sample_weight has shape"):
        psvm.SVC().fit(X, y, sample_weight=np.ones(3))
    sw = np.where(y == 0, 0.0, 1.0)
    with pytest.raises(ValueError, match="one class"):
        psvm.SVC().fit(X, y, sample_weight=sw)
    y3 = y + (np.arange(y.size) % 5 == 0) * 2  # a third class, given zero weight below
    with pytest.raises(ValueError, match=r"class \[2\] has no sample with positive"):
        psvm.SVC().fit(X, y3, sample_weight=(y3 != 2).astype(float))
    est = psvm.SVC(decision_function_shape="ovo", break_ties=True).fit(X, y)
    with pytest.raises(ValueError, match="break_ties"):
        est.predict(X)


def input_attributes(est) -> tuple:
    names = getattr(est, "feature_names_in_", None)
    return getattr(est, "n_features_in_", None), None if names is None else names.tolist()


def cube(A, B):  # (x.z)^3, LIBSVM's poly kernel at gamma 1, coef0 0: as a callable
    return (A @ B.T) ** 3


@pytest.mark.parametrize("kernel", ["poly", cube])
def test_a_refused_fit_leaves_the_fitted_model_as_it_was(breast_cancer, kernel):
    """A fit refused after X was validated (one class; a kernel that overflows) keeps the
    previous fit's attributes (n_features_in_, feature_names_in_, class_weight_) and a
    callable kernel's training X: the model still predicts what it did. A first fit refused
    by the solver leaves the estimator unfitted."""
    from sklearn.exceptions import NotFittedError

    pd = pytest.importorskip("pandas")
    X, y = breast_cancer[0][:100], breast_cancer[1][:100]
    names = [f"f{i}" for i in range(X.shape[1])]
    est = psvm.SVC(kernel=kernel, gamma=1.0).fit(pd.DataFrame(X, columns=names), y)
    before = est.decision_function(pd.DataFrame(X[:40], columns=names))
    kept = input_attributes(est)
    assert kept[0] == (None if callable(kernel) else X.shape[1])  # (as scikit-learn's)
    other = pd.DataFrame(1e110 * X[:, :3], columns=["a", "b", "c"])
    with pytest.raises(ValueError, match="classes has to be greater than one"):
        est.fit(other / 1e110, np.zeros(y.size))  # refused by the input checks
    with pytest.raises(ValueError, match="not finite in class pair 1 of 3|infinity"):
        est.fit(other, np.where(np.arange(y.size) % 3, y, 2))  # three classes, refused by
        # the solver (poly), by the input checks (the callable's Gram matrix overflows)
    assert input_attributes(est) == kept
    assert est.class_weight_.tolist() == [1.0, 1.0]
    got = est.decision_function(pd.DataFrame(X[:40], columns=names))
    np.testing.assert_array_equal(got, before)
    fresh = psvm.SVC(kernel="poly", gamma=1.0)
    with pytest.raises(ValueError, match="not finite"):
        fresh.fit(1e110 * X, y)
    with pytest.raises(NotFittedError):
        fresh.predict(X)


@pytest.mark.parametrize("make", [psvm.SVC, lambda: psvm.SGDSVC(random_state=0)])
@pytest.mark.parametrize("sparse", [False, True])
def test_values_too_large_name_the_row(make, sparse):
    # finite values whose squares overflow: an input error, not a rank mismatch or a NaN solve
    X = np.finfo(float).max * np.random.default_rng(0).uniform(size=(10, 2))
    X[:3] = 1.0
    y = np.arange(10) % 2
    with pytest.raises(ValueError, match=r"^X row 3: values too large: its squared norm"):
        make().fit(sp.csr_matrix(X) if sparse else X, y)
    X[3:] = 1.3e154  # each square is finite, |x|^2 + |z|^2 is not
    with pytest.raises(ValueError, match=r"^X row 3: values too large"):
        make().fit(sp.csr_matrix(X) if sparse else X, y)


def test_unwritable_checkpoint_fails_before_training(tmp_path, monkeypatch, breast_cancer):
    import psvm.svc.multiclass

    def train(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(psvm.svc.multiclass, "fit_ovo", train)
    X, y = breast_cancer
    path = tmp_path / "missing" / "c.ckpt"
    with pytest.raises(OSError, match=r"^cannot write the checkpoint file .*c\.ckpt': folder"):
        psvm.SVC(checkpoint=path).fit(X, y)
    with pytest.raises(OSError, match=r"^cannot write the checkpoint file .*: it is a folder"):
        psvm.SVC(checkpoint=tmp_path).fit(X, y)


def test_kernel_overflow_is_a_clear_error():
    # rows of moderate norm, but (gamma x.z)^3 overflows: NaN must not pass for convergence
    X = 1e110 * np.random.default_rng(1).uniform(-1, 1, size=(60, 2))
    y = (X[:, 0] > 0).astype(int)
    with pytest.raises(ValueError, match=r"not finite in class pair 1 of 1 .* scale the features"):
        psvm.SVC(kernel="poly", gamma=1.0).fit(X, y)


def test_break_ties_predicts_the_ovr_argmax(digits):
    X, y = digits
    est = psvm.SVC(break_ties=True).fit(X[:500], y[:500])
    np.testing.assert_array_equal(
        est.predict(X), est.classes_[np.argmax(est.decision_function(X), axis=1)]
    )
    ref = svm.SVC(break_ties=True).fit(X[:500], y[:500])
    assert np.mean(est.predict(X) == ref.predict(X)) >= 0.999


def test_unscaled_rbf_features_warn_once_unless_gamma_adapts():
    X, y = load_iris(return_X_y=True)
    with pytest.warns(UserWarning, match=r"feature values reach 790.*StandardScaler"):
        psvm.SVC(gamma=0.1).fit(X * 100, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        psvm.SVC().fit(X * 100, y)  # gamma='scale' adapts to the data
        psvm.SVC(gamma=0.1).fit(X, y)
        psvm.SVC(kernel="linear").fit(X * 100, y)  # products: only past 1e6


def test_features_past_1e6_warn_for_every_kernel():
    """A linear problem with a feature of 1e14 ran to max_iter, silently (a helper's trial)."""
    X, y = load_iris(return_X_y=True)
    X = X.copy()
    X[0, 0] = 1e14
    with pytest.warns(UserWarning, match=r"feature values reach 1e\+14; the linear kernel"):
        psvm.SVC(kernel="linear", max_iter=1000).fit(X, y)


@pytest.mark.parametrize("cls", [psvm.SVC, psvm.NuSVC, psvm.SVR, psvm.NuSVR, psvm.OneClassSVM])
def test_parameters_are_keyword_only(cls):
    """As scikit-learn's: ``SVC(2.0)`` is a TypeError, not C = 2 by position."""
    with pytest.raises(TypeError, match="positional argument"):
        cls(0.5)
