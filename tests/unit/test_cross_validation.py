"""Cross-validation (psvm-train -v): LIBSVM's fold rules, its result lines, and per-fold
models equal to LIBSVM's on folds both share."""

import re
from functools import partial

import numpy as np
import pytest
import scipy.sparse as sp

from psvm.comm import Comm
from psvm.cross_validation import fold_ids, result_lines, svc_fit_predict, training_shard
from psvm.io.shard import Shard
from tests._svm import libsvm_problem, load_head, pair_objectives, write_head


def test_folds_are_libsvm_s_stratified_runs():
    rng = np.random.default_rng(5)
    y = rng.choice([3.0, -1.0, 7.0], size=103, p=[0.6, 0.3, 0.1])
    classes = [3.0, -1.0, 7.0]
    folds = fold_ids(y, 5, seed=1, classes=classes)
    assert folds.shape == y.shape and set(folds) == set(range(5))
    for c in classes:  # fold i holds (i+1)*count//5 - i*count//5 of class c, as svm.cpp
        count = int(np.sum(y == c))
        want = [(i + 1) * count // 5 - i * count // 5 for i in range(5)]
        assert [int(np.sum((folds == i) & (y == c))) for i in range(5)] == want
    assert (fold_ids(y, 5, seed=1, classes=classes) == folds).all()  # seeded
    assert (fold_ids(y, 5, seed=2, classes=classes) != folds).any()


def test_one_row_per_fold_is_leave_one_out_unstratified():
    y = np.array([1.0, 1.0, 1.0, -1.0])
    for classes in (None, [1.0, -1.0]):  # n_folds == l: LIBSVM's plain shuffle
        assert sorted(fold_ids(y, 4, seed=0, classes=classes)) == [0, 1, 2, 3]
    folds = fold_ids(np.arange(10.0), 3, seed=0)  # regression: runs of 3, 3, 4
    assert np.bincount(folds).tolist() == [3, 3, 4]


def test_result_lines_are_libsvm_s():
    comm = Comm()
    y = np.array([1.0] * 224 + [-1.0] * 46)
    assert result_lines(comm, y, np.ones(270)) == ["Cross Validation Accuracy = 82.963%"]
    v, z = np.array([1.0, 2.0, 4.0]), np.array([1.5, 2.0, 3.0])
    r = np.corrcoef(v, z)[0, 1]
    mse, scc = result_lines(comm, z, v, regression=True)
    assert mse == f"Cross Validation Mean squared error = {np.mean((v - z) ** 2):g}"
    assert scc == f"Cross Validation Squared correlation coefficient = {r * r:g}"
    assert result_lines(comm, z, np.ones(3), regression=True)[1].endswith("= nan")


def test_a_fold_of_one_class_predicts_it():
    X = sp.csr_matrix(np.eye(4))
    shard = Shard(
        X=X, y=np.array([1.0, 1.0, 1.0, 2.0]), offset=0, n_samples=4, n_features=4, max_row_nnz=1
    )
    from psvm._params import validate_svc_params

    fit_predict = svc_fit_predict(
        Comm(), shard, params=validate_svc_params(), classes=np.array([1.0, 2.0])
    )
    test = np.array([False, False, False, True])
    assert fit_predict(~test, test).tolist() == [1.0]


def test_probability_folds_predict_the_most_probable_class(shared_data, tmp_path):
    """-v with -b 1, as LIBSVM's svm_cross_validation: each fold's model with its pairwise
    sigmoids (the seed's folds), each held-out row its most probable class, which differs
    from the vote on some rows."""
    from psvm._params import validate_svc_params
    from psvm.svc.multiclass import fit_ovo
    from psvm.svc.platt import add_probability

    X, y = load_head(write_head(shared_data / "usps.t.xz", tmp_path / "u", 300))
    shard = Shard(
        X=X, y=y, offset=0, n_samples=300, n_features=X.shape[1], max_row_nnz=X.getnnz(1).max()
    )
    params, classes = validate_svc_params(gamma=1 / 256), np.unique(y)
    test = np.arange(300) % 5 == 0
    sigmoids = partial(add_probability, seed=3)
    got = svc_fit_predict(Comm(), shard, params=params, classes=classes, probability=sigmoids)
    proba = got(~test, test)
    fold = training_shard(Comm(), shard, ~test, classes=classes)
    model, _ = fit_ovo(Comm(), fold, params, classes, fold=True)
    add_probability(Comm(), fold, params, classes, model, seed=3)
    expected, prob = model.predict_proba(X[test])
    np.testing.assert_array_equal(proba, expected)
    np.testing.assert_array_equal(expected, classes[np.argmax(prob, axis=1)])
    votes = svc_fit_predict(Comm(), shard, params=params, classes=classes)(~test, test)
    np.testing.assert_array_equal(votes, model.predict(X[test]))
    assert np.any(votes != proba)


@pytest.mark.parametrize("svm_type", ["1", "2", "3", "4"])
def test_probability_folds_of_every_type(shared_data, tmp_path, capsys, svm_type):
    """-v 5 -b 1 runs for every type: nu-SVC predicts by its probability model (a result of
    its own), the others' predictions do not change with -b 1, as in LIBSVM."""
    from psvm.cli import train

    data = write_head(shared_data / "heart_scale.xz", tmp_path / "h", 120)
    out = {}
    for b in ("0", "1"):
        assert train.main(["-q", "-s", svm_type, "-v", "5", "-b", b, data]) == 0
        out[b] = capsys.readouterr().out.strip().splitlines()
    assert out["0"][0].startswith("Cross Validation")
    if svm_type == "1":
        assert out["1"][0].startswith("Cross Validation Accuracy = ")
    else:
        assert out["1"] == out["0"]


@pytest.mark.parametrize(
    "name, rows, C, gamma",
    [
        ("heart_scale", None, 1.0, 1 / 13),
        ("a9a", 3000, 1.0, 1 / 123),
        ("usps.t", 600, 4.0, 1 / 256),
    ],
)
def test_per_fold_models_match_libsvm_on_shared_folds(tmp_path, shared_data, name, rows, C, gamma):
    """The same folds for both: each fold's pair objectives within 1e-3 of LIBSVM's, and the
    held-out predictions agree."""
    from libsvm import svmutil

    from psvm._params import validate_svc_params
    from psvm.io.model_file import read_model

    y, X = libsvm_problem(shared_data / f"{name}.xz", tmp_path / "d.txt", rows)
    X = sp.csr_matrix(X, dtype=np.float64)
    X.indices = X.indices.astype(np.int32)
    opts = f"-c {C!r} -g {gamma!r} -q"
    _, first = np.unique(y, return_index=True)
    classes = y[np.sort(first)]
    shard = Shard(
        X=X,
        y=y,
        offset=0,
        n_samples=X.shape[0],
        n_features=X.shape[1],
        max_row_nnz=int(np.diff(X.indptr).max()),
        classes=classes,
    )
    lines: list[str] = []
    params = validate_svc_params(C=C, gamma=gamma)
    fit_predict = svc_fit_predict(Comm(), shard, lines.append, params=params, classes=classes)
    folds = fold_ids(y, 5, seed=3, classes=classes)
    ours, theirs = np.empty(y.size), np.empty(y.size)
    for k in range(5):
        test = folds == k
        del lines[:]
        ours[test] = fit_predict(~test, test)
        obj_ours = [float(m) for m in re.findall(r"obj = (\S+),", "\n".join(lines))]
        model = svmutil.svm_train(y[~test], X[~test], opts)
        svmutil.svm_save_model(str(tmp_path / "m"), model)
        ref = read_model(tmp_path / "m")
        obj_ref = pair_objectives(ref.dual_coef, ref.support_vectors, ref.n_support, "rbf", gamma)
        pairs = [(a, b) for i, a in enumerate(ref.classes) for b in ref.classes[i + 1 :]]
        by_pair = dict(zip(map(frozenset, pairs), obj_ref, strict=True))
        ours_pairs = [(a, b) for i, a in enumerate(classes) for b in classes[i + 1 :]]
        want = [by_pair[frozenset(p)] for p in ours_pairs]
        np.testing.assert_allclose(obj_ours, want, rtol=1e-3)
        theirs[test] = svmutil.svm_predict(y[test], X[test], model, "-q")[0]
    assert np.mean(ours == theirs) >= 0.99
    assert abs(np.mean(ours == y) - np.mean(theirs == y)) <= 0.01
