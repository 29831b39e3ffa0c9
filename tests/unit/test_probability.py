"""Probability estimates (-b 1) against LIBSVM: Platt's sigmoids with the same internal
folds, pairwise coupling, svm-predict -b 1's output and the models each side reads."""

from __future__ import annotations

import subprocess
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.svm import SVC as SkSVC

from psvm._params import ParameterError, validate_svc_params
from psvm.comm import world
from psvm.io.model_file import read_model
from psvm.io.shard import Shard
from psvm.probability import pairwise_coupling, sigmoid_train
from psvm.svc.platt import fit_probability
from tests._svm import load_head, run_cli, write_head

TRAIN, PREDICT = "psvm.cli.train", "psvm.cli.predict"


def sklearn_perm(seed: int, n: int) -> np.ndarray:
    """scikit-learn's LIBSVM shuffle of n rows: std::mt19937(seed) (numpy's legacy seeding is
    the same init_genrand) and its tweaked Lemire bounded integers, Fisher-Yates."""
    mt = np.random.RandomState(seed)
    perm = np.arange(n)
    for i in range(n):
        r = n - i
        threshold = (2**32 - r) % r
        while True:
            m = int(mt.randint(0, 2**32, dtype=np.uint64)) * r
            if (m & 0xFFFFFFFF) >= threshold:
                break
        j = i + (m >> 32)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def sklearn_reference(X, y, gamma: float, C: float = 1.0):
    """scikit-learn's LIBSVM with probability=True (random_state=0) and, for each class
    pair, the shuffle of its internal folds (every pair's inner trainings reseed)."""
    est = SkSVC(C=C, gamma=gamma)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        est.set_params(probability=True, random_state=0).fit(X.toarray(), y)
        probA, probB = est.probA_, est.probB_
    seed = np.random.RandomState(0).randint(np.iinfo("i").max)
    classes = est.classes_
    sizes = [
        int(np.sum(y == classes[a]) + np.sum(y == classes[b]))
        for a in range(classes.size)
        for b in range(a + 1, classes.size)
    ]
    return est, probA, probB, [sklearn_perm(seed, n) for n in sizes]


def psvm_probability(X, y, gamma: float, perms=None, C: float = 1.0):
    classes = np.unique(y)
    shard = Shard(
        X=sp.csr_matrix(X),
        y=y,
        offset=0,
        n_samples=y.size,
        n_features=X.shape[1],
        max_row_nnz=int(np.diff(X.indptr).max()),
        classes=classes,
    )
    params = validate_svc_params(svm_type="c_svc", C=C, kernel="rbf", gamma=gamma)
    params["class_weight"] = params["class_weight"] or {}
    return fit_probability(world(), shard, params, classes, gamma, perms=perms)


@pytest.mark.parametrize(
    ("name", "rows", "gamma"), [("heart_scale", None, 0.1), ("a9a", 3000, 0.05)]
)
def test_probA_probB_match_libsvm_with_its_folds(shared_data, name, rows, gamma):
    X, y = load_head(shared_data / f"{name}.xz", rows)
    _, refA, refB, perms = sklearn_reference(X, y, gamma)
    A, B = psvm_probability(X, y, gamma, perms)
    np.testing.assert_allclose(A, refA, atol=1e-3)
    np.testing.assert_allclose(B, refB, atol=1e-3)


def test_sigmoid_train_is_platts_fit():
    """Against scikit-learn's own Platt fit (the same prior-corrected targets, another
    minimiser), and Platt's targets: A < 0 when positives have larger values."""
    from sklearn.calibration import _sigmoid_calibration

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400) * 2 - 1
    dec = 1.5 * y + rng.normal(size=400)
    A, B = sigmoid_train(dec, y)
    a, b = _sigmoid_calibration(dec, y > 0)
    assert A < 0
    np.testing.assert_allclose([A, B], [a, b], atol=1e-4)


def test_multiclass_probabilities_match_libsvm(shared_data):
    """usps.t (10 classes, 2,007 rows): with LIBSVM's folds, psvm's probabilities sum to
    1 and agree with LIBSVM's within 0.02."""
    X, y = load_head(shared_data / "usps.t.xz")
    gamma = 1.0 / X.shape[1]
    est, refA, refB, perms = sklearn_reference(X, y, gamma)
    A, B = psvm_probability(X, y, gamma, perms)
    np.testing.assert_allclose(A, refA, atol=1e-2)
    np.testing.assert_allclose(B, refB, atol=1e-2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ref = est.predict_proba(X.toarray())
    est.set_params(decision_function_shape="ovo")
    dec = est.decision_function(X.toarray())
    prob = pairwise_coupling(dec, A, B, est.classes_.size)
    np.testing.assert_allclose(prob.sum(axis=1), 1.0, atol=1e-12)
    assert np.abs(prob - ref).max() < 0.02


def _svm_predict_b1(tools, test, model, out):
    r = subprocess.run(
        [tools["svm-predict"], "-b", "1", test, model, out],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return open(out).read()


def test_cli_models_read_both_ways(shared_data, tmp_path, libsvm_tools):
    """psvm-predict -b 1 writes svm-predict -b 1's file on LIBSVM's model, and svm-predict
    -b 1 reads psvm's -b 1 model with psvm-predict's output; without probA it is LIBSVM's
    error."""
    data = write_head(shared_data / "heart_scale.xz", tmp_path / "heart")
    lib, ours = str(tmp_path / "lib.model"), str(tmp_path / "ours.model")
    subprocess.run([libsvm_tools["svm-train"], "-q", "-b", "1", data, lib], check=True)
    r = run_cli(PREDICT, ["-b", "1", data, lib, tmp_path / "a"], None)
    assert r.returncode == 0, r.stderr
    assert open(tmp_path / "a").read() == _svm_predict_b1(
        libsvm_tools, data, lib, str(tmp_path / "b")
    )
    assert open(tmp_path / "a").read().startswith("labels 1 -1\n")
    r = run_cli(TRAIN, ["-q", "-b", "1", data, ours], None)
    assert r.returncode == 0, r.stderr
    assert len(read_model(ours).meta["probA"]) == 1
    r = run_cli(PREDICT, ["-b", "1", data, ours, tmp_path / "c"], None)
    assert r.returncode == 0, r.stderr
    assert open(tmp_path / "c").read() == _svm_predict_b1(
        libsvm_tools, data, ours, str(tmp_path / "d")
    )
    r = run_cli(PREDICT, [data, ours, tmp_path / "e"], None)
    assert "Model supports probability estimates, but disabled in prediction." in r.stdout
    subprocess.run([libsvm_tools["svm-train"], "-q", data, lib], check=True)
    r = run_cli(PREDICT, ["-b", "1", data, lib, tmp_path / "f"], None)
    assert r.returncode == 1 and "Model does not support probabiliy estimates" in r.stderr


def _brier(path: str, y: np.ndarray) -> float:
    lines = open(path).read().split("\n")
    labels = np.array(lines[0].split()[1:], dtype=float)
    prob = np.loadtxt(lines[1:], ndmin=2)[:, 1:]
    return float(np.mean(np.sum((prob - (y[:, None] == labels)) ** 2, axis=1)))


def test_brier_score_as_libsvm(shared_data, tmp_path, libsvm_tools):
    """a9a (first 2,000 rows; test: a9a.t's first 2,000): psvm-train -b 1 and LIBSVM's,
    each with its own folds, give Brier scores within 0.005."""
    train = write_head(shared_data / "a9a.xz", tmp_path / "train", 2000)
    test = write_head(shared_data / "a9a.t.xz", tmp_path / "test", 2000)
    _, y = load_head(test, n_features=123)
    flags = ["-q", "-b", "1", "-g", "0.05"]
    subprocess.run([libsvm_tools["svm-train"], *flags, train, tmp_path / "lib.model"], check=True)
    _svm_predict_b1(libsvm_tools, test, str(tmp_path / "lib.model"), str(tmp_path / "lib.out"))
    r = run_cli(TRAIN, [*flags, train, tmp_path / "ours.model"], None)
    assert r.returncode == 0, r.stderr
    r = run_cli(PREDICT, ["-b", "1", test, tmp_path / "ours.model", tmp_path / "ours.out"], None)
    assert r.returncode == 0, r.stderr
    ours, lib = _brier(str(tmp_path / "ours.out"), y), _brier(str(tmp_path / "lib.out"), y)
    assert abs(ours - lib) < 0.005, (ours, lib)


def test_class_order_keeps_probabilities(shared_data, tmp_path, libsvm_tools):
    """A LIBSVM model with labels in first-appearance order, sorted: the same probabilities
    (probB changes sign with a pair's order)."""
    from psvm.model import SVCModel

    X, y = load_head(shared_data / "usps.t.xz", 300)
    keep = np.isin(y, [1, 2, 3])
    X, y = X[keep], 4 - y[keep]  # first appearance is not sorted order
    data = tmp_path / "d"
    from sklearn.datasets import dump_svmlight_file

    dump_svmlight_file(X, y, str(data), zero_based=False)
    subprocess.run([libsvm_tools["svm-train"], "-q", "-b", "1", data, tmp_path / "m"], check=True)
    model = read_model(tmp_path / "m")
    order = np.sort(model.classes)
    _, prob = model.predict_proba(X)
    moved: SVCModel = model.with_class_order(order)
    _, prob2 = moved.predict_proba(X)
    cols = [list(model.classes).index(c) for c in order]
    np.testing.assert_allclose(prob2, prob[:, cols], rtol=0, atol=1e-12)  # (coupled alike)


def _fit_proba(est, X, y):
    with pytest.warns(FutureWarning, match="probability.+parameter.+deprecated"):
        return est.set_params(probability=True, random_state=0).fit(X, y)


@pytest.mark.parametrize("name", ["SVC", "NuSVC"])
def test_estimator_probabilities(shared_data, name):
    """predict_proba: columns in classes_ order (the second grows with decision_function),
    rows sum to 1, log as predict_log_proba, close to scikit-learn's (other folds)."""
    from sklearn import svm

    import psvm

    X, y = load_head(shared_data / "heart_scale.xz")
    labels = np.where(y > 0, "yes", "no")
    est = _fit_proba(getattr(psvm, name)(gamma=0.1), X, labels)
    prob = est.predict_proba(X)
    assert list(est.classes_) == ["no", "yes"]
    order = np.argsort(est.decision_function(X))
    assert np.all(np.diff(prob[order, 1]) >= 0)
    np.testing.assert_allclose(prob.sum(axis=1), 1.0)
    np.testing.assert_allclose(np.log(prob), est.predict_log_proba(X))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ref = getattr(svm, name)(gamma=0.1, probability=True, random_state=0).fit(X, labels)
        assert np.abs(ref.predict_proba(X) - prob).mean() < 0.03  # other folds: about 0.015
    with pytest.warns(FutureWarning, match="Attribute `probA_` was deprecated"):
        assert est.probA_.shape == (1,) and est.probA_[0] < 0


def test_estimator_without_probability():
    import psvm

    X, y = np.array([[0.0], [1.0], [2.0], [3.0]]), [0, 0, 1, 1]
    assert not hasattr(psvm.SVC().fit(X, y), "predict_proba")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = psvm.SVC(probability=False).fit(X, y)
    # once a fit (it came twice), at the caller's line (a frame count it depended on)
    [w] = [w for w in caught if "probability` parameter" in str(w.message)]
    assert w.category is FutureWarning and w.filename == __file__
    with pytest.raises(ParameterError, match="probability must be a bool, got 'yes'"):
        psvm.SVC(probability="yes").fit(X[:, :0], y)  # the parameters before X
    assert not hasattr(est, "predict_proba")
    with pytest.warns(FutureWarning, match="Attribute `probB_` was deprecated"):
        assert est.probB_.size == 0


def test_estimator_model_files(shared_data, tmp_path, libsvm_tools):
    """psvm.SVC's -b 1 model gives svm-predict -b 1 its probabilities, and the estimator
    read from LIBSVM's -b 1 model gives svm-predict's."""
    import psvm

    data = write_head(shared_data / "heart_scale.xz", tmp_path / "heart")
    X, y = load_head(data)
    est = _fit_proba(psvm.SVC(gamma=0.1), X, y)
    est.to_libsvm_model(tmp_path / "ours")
    theirs = _svm_predict_b1(libsvm_tools, data, str(tmp_path / "ours"), str(tmp_path / "o"))
    lines = theirs.split("\n")
    assert lines[0] == "labels -1 1"  # psvm's sorted classes
    np.testing.assert_allclose(np.loadtxt(lines[1:])[:, 1:], est.predict_proba(X), atol=2e-6)
    subprocess.run([libsvm_tools["svm-train"], "-q", "-b", "1", data, tmp_path / "lib"], check=True)
    lib = psvm.SVC.from_libsvm_model(tmp_path / "lib")  # labels 1 -1: sorted on reading
    lines = _svm_predict_b1(libsvm_tools, data, str(tmp_path / "lib"), str(tmp_path / "l")).split(
        "\n"
    )
    expected = np.loadtxt(lines[1:])[:, [2, 1]]
    np.testing.assert_allclose(lib.predict_proba(X), expected, atol=2e-6)


def test_loaded_multiclass_model_couples_in_its_file_order(tmp_path):
    """LIBSVM couples the pairs' probabilities by an iteration over its classes in order; a
    -b 1 model whose labels are not sorted (first appearance 2, 1, 0) is sorted on reading,
    and its probabilities are still coupled in the file's order: svm_predict's, not the
    sorted order's (1e-3 apart)."""
    from libsvm.svmutil import svm_predict, svm_save_model, svm_train
    from sklearn.datasets import load_iris

    import psvm
    from psvm.model import COUPLING_ORDER

    X, y = load_iris(return_X_y=True)
    order = np.argsort(-y, kind="stable")
    X, y = X[order][::3], y[order][::3]  # labels 2, then 1, then 0
    rows = [{j + 1: float(v) for j, v in enumerate(x)} for x in X]
    model = svm_train(y.tolist(), rows, "-b 1 -c 2 -q")
    svm_save_model(str(tmp_path / "m"), model)
    _, _, expected = svm_predict(y.tolist(), rows, model, "-b 1 -q")
    est = psvm.SVC.from_libsvm_model(tmp_path / "m")
    assert est.classes_.tolist() == [0, 1, 2]
    prob = est.predict_proba(X)
    np.testing.assert_allclose(prob[:, ::-1], expected, rtol=0, atol=1e-9)
    sorted_order = psvm.SVC.from_libsvm_model(tmp_path / "m")
    sorted_order._model.meta.pop(COUPLING_ORDER)  # (what the model gave before)
    assert np.abs(sorted_order.predict_proba(X) - prob).max() > 1e-5
    est.to_libsvm_model(tmp_path / "again")  # written in the file's order, coupled there
    assert "label 2 1 0\n" in (tmp_path / "again").read_text()
    again = psvm.SVC.from_libsvm_model(tmp_path / "again").predict_proba(X)
    np.testing.assert_array_equal(again, prob)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # (scikit-learn 1.9's deprecation)
def test_estimator_checkpoint_holds_every_pair_before_the_folds(tmp_path):
    """probability=True with a checkpoint: the class pairs are saved once solved (the folds
    after them keep none), and a resumed fit reads them back to the same model."""
    from sklearn.datasets import load_iris

    import psvm

    X, y = load_iris(return_X_y=True)
    ckpt = tmp_path / "c.ckpt"
    kw = dict(probability=True, random_state=0, checkpoint=ckpt)
    first = psvm.SVC(**kw).fit(X, y)
    with np.load(ckpt) as z:  # three pairs, solved: no solver state
        assert int(z["pair"]) == 3 and "pair2_alpha" in z.files and "state_alpha" not in z.files
    again = psvm.SVC(**kw, resume=True).fit(X, y)
    pairs = sum(first._model.meta["n_iter"])  # the resume solves the folds alone
    assert again.fit_stats_["counts"]["n_iter"] == first.fit_stats_["counts"]["n_iter"] - pairs
    np.testing.assert_array_equal(again.dual_coef_, first.dual_coef_)
    np.testing.assert_array_equal(again.probA_, first.probA_)
    np.testing.assert_array_equal(again.predict_proba(X), first.predict_proba(X))
