"""LIBSVM text model files: round trips, LIBSVM compatibility, errors, atomic writes."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import itertools
import os
import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from libsvm import svmutil

import psvm.io.model_file as model_file
from psvm.io.model_file import ModelFormatError, read_model, write_model
from psvm.model import SVCModel

OPTS = {
    "rbf": "-t 2 -c 1 -g 0.05 -q",
    "linear": "-t 0 -c 1 -q",
    "poly": "-t 1 -c 1 -g 0.05 -r 1 -d 3 -q",
    "sigmoid": "-t 3 -c 1 -g 0.01 -r 0.5 -q",
    "usps": "-t 2 -c 1 -g 0.005 -q",
}


def _libsvm_file(y, X, opts: str, path) -> str:
    svmutil.svm_save_model(str(path), svmutil.svm_train(y, X, opts))
    return str(path)


@pytest.fixture(scope="module")
def heart_file(heart, tmp_path_factory):
    y, X = heart
    return _libsvm_file(y, X, OPTS["rbf"], tmp_path_factory.mktemp("m") / "heart.model")


def assert_models_equal(a: SVCModel, b: SVCModel) -> None:
    """Bitwise equality of every field LIBSVM's format carries."""
    assert (a.kernel, a.n_features, a.meta) == (b.kernel, b.n_features, b.meta)
    if a.kernel != "linear":
        assert a.gamma == b.gamma
    if a.kernel in ("poly", "sigmoid"):
        assert a.coef0 == b.coef0
    if a.kernel == "poly":
        assert a.degree == b.degree
    for name in ("classes", "n_support", "dual_coef", "rho"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(
            getattr(a.support_vectors, name), getattr(b.support_vectors, name), err_msg=name
        )
    assert a.support_vectors.shape == b.support_vectors.shape


def _libsvm_predict(path: str, X):
    labels, _, dec = svmutil.svm_predict(
        np.zeros(X.shape[0]), X, svmutil.svm_load_model(path), "-q"
    )
    return np.asarray(labels), np.asarray(dec)


@pytest.mark.parametrize(
    "problem, kernel", [("heart", k) for k in OPTS if k != "usps"] + [("usps", "usps")]
)
def test_round_trip_of_libsvm_model(heart, usps, problem, kernel, tmp_path):
    y, X = heart if problem == "heart" else usps
    src = _libsvm_file(y, X, OPTS[kernel], tmp_path / "libsvm.model")
    first = read_model(src)
    ours = str(tmp_path / "psvm.model")
    write_model(ours, first)
    assert_models_equal(first, read_model(ours))
    labels, dec = _libsvm_predict(ours, X)  # LIBSVM reading psvm's file
    np.testing.assert_array_equal(first.predict(X), labels)
    np.testing.assert_allclose(first.decision_function(X), dec, rtol=0, atol=1e-9)


def test_probability_lines_kept(heart, tmp_path):
    y, X = heart
    src = _libsvm_file(y, X, OPTS["rbf"] + " -b 1", tmp_path / "prob.model")
    model = read_model(src)
    assert set(model.meta) == {"probA", "probB"} and len(model.meta["probA"]) == 1
    out = tmp_path / "out.model"
    write_model(out, model)
    assert read_model(out).meta == model.meta
    assert svmutil.svm_load_model(str(out)).is_probability_model()


def _random_model(rng, k: int = 4, n_features: int = 9) -> SVCModel:
    """Values spanning many magnitudes, so a lossy number format would show."""
    n_support = rng.integers(1, 4, size=k)
    total = int(n_support.sum())
    sv = sp.random(total, n_features, density=0.5, random_state=rng, format="csr")
    sv.data = rng.standard_normal(sv.nnz) * 10.0 ** rng.integers(-300, 300, size=sv.nnz)
    return SVCModel(
        kernel="rbf",
        gamma=1 / 3,
        coef0=0.0,
        degree=3,
        classes=np.array([3, -7, 0, 12]),
        n_support=n_support,
        support_vectors=sv,
        dual_coef=rng.standard_normal((k - 1, total)) / 3,
        rho=rng.standard_normal(k * (k - 1) // 2) * 1e-20,
        n_features=n_features + 2,
        meta={
            "approximate": False,
            "n_iter": [10, 20],
            "note": "a:b %3A c\\u003a",
            "nested": {"x:y": [1.5, None]},
        },
    )


def test_round_trip_is_bitwise_exact_and_trailer_has_no_colon(tmp_path):
    model = _random_model(np.random.default_rng(0))
    path = tmp_path / "exact.model"
    write_model(path, model)
    back = read_model(path)
    assert_models_equal(model, back)
    lines = path.read_text().splitlines()
    tail = lines[lines.index("SV") + 1 + model.support_vectors.shape[0] :]
    assert tail and all(line.startswith("#") and ":" not in line for line in tail)


def test_models_of_files_with_index_0(tmp_path):
    """A model of a file that holds feature index 0 (index_base 0) writes its support
    vectors' indices as read (0:... where one holds feature 0) and reads back equal; without
    a support vector on feature 0 too, by psvm's trailer; LIBSVM's own models by their 0s."""
    model = dataclasses.replace(_random_model(np.random.default_rng(1)), index_base=0)
    assert (model.support_vectors.indices == 0).any()
    write_model(tmp_path / "zero.model", model)
    assert " 0:" in (tmp_path / "zero.model").read_text()
    back = read_model(tmp_path / "zero.model")
    assert back.index_base == 0 and back.max_index == model.max_index == 10
    assert_models_equal(model, back)
    sv = model.support_vectors.tolil()
    sv[:, 0] = 0  # no support vector on feature 0
    none = dataclasses.replace(model, support_vectors=sv.tocsr())
    write_model(tmp_path / "none.model", none)
    text = (tmp_path / "none.model").read_text()
    assert " 0:" not in text and "#psvm index_base 0" in text
    back = read_model(tmp_path / "none.model")
    assert back.index_base == 0 and back.max_index == none.max_index
    assert_models_equal(none, back)
    # without psvm's trailer (LIBSVM reads and writes none): a 1-based model, one column less
    bare = read_model(_without_trailer(tmp_path / "none.model", tmp_path / "bare.model"))
    assert bare.index_base == 1 and bare.n_features is None
    X = sp.random(5, 11, density=0.6, random_state=2, format="csr")
    X = X.multiply(np.arange(11) > 0).tocsr()  # column 0 (feature 0) empty: the same inputs
    Xb = sp.csr_matrix(X[:, 1:])  # for the 1-based model, columns from feature 1
    np.testing.assert_array_equal(none.decision_function(X), bare.decision_function(Xb))
    np.testing.assert_array_equal(bare.zero_based().decision_function(X), none.decision_function(X))


def _without_trailer(src, dst):
    """``src`` without psvm's ``#psvm`` lines, as LIBSVM writes models."""
    lines = [ln for ln in src.read_text().splitlines(True) if not ln.startswith("#psvm")]
    dst.write_text("".join(lines))
    return dst


@pytest.mark.parametrize("parts", [1, 2, 3, 7, 200])
def test_sv_lines_in_parts_make_the_whole_file(heart_file, tmp_path, parts):
    """psvm-train's ranks each format a share of the SV lines (more ranks than support
    vectors leave some empty): joined, they are the lines of one writer, and the file reads
    back the same. A precomputed model's lines hold serial numbers."""
    model = read_model(heart_file)
    n = model.support_vectors.shape[0]
    serials = sp.csr_matrix(np.arange(1.0, n + 1)[:, None])
    gram = dataclasses.replace(model, kernel="precomputed", gamma=0.0, support_vectors=serials)
    for m in (model, gram):
        whole = model_file.sv_lines(m)
        assert len(whole.splitlines()) == n
        split = [n * r // parts for r in range(parts + 1)]
        joined = "".join(model_file.sv_lines(m, lo, hi) for lo, hi in itertools.pairwise(split))
        assert joined == whole
        path = tmp_path / f"{m.kernel}.model"
        write_model(path, m, joined)
        assert_models_equal(read_model(path), m)


def test_libsvm_loads_file_with_trailer(usps, tmp_path):
    y, X = usps
    model = read_model(_libsvm_file(y, X, OPTS["usps"].replace("-t 2", "-t 1"), tmp_path / "a"))
    model.n_features = 256
    model.meta = {"approximate": False, "solver": "psvm: smo"}
    path = str(tmp_path / "b.model")
    write_model(path, model)
    assert open(path).read().count("#psvm") == 2
    labels, dec = _libsvm_predict(path, X)
    np.testing.assert_array_equal(model.predict(X), labels)
    np.testing.assert_allclose(model.decision_function(X), dec, rtol=0, atol=1e-9)


def test_non_integer_label_is_refused_before_writing(tmp_path):
    model = _random_model(np.random.default_rng(1))
    model.classes = np.array([1.0, 2.5, 3.0, 4.0])
    with pytest.raises(ValueError, match="integer labels only, got label 2.5"):
        write_model(tmp_path / "m.model", model)
    assert os.listdir(tmp_path) == []


# ---- errors: every one names the file and the line ------------------------------


def _line_of(lines: list[str], key: str) -> int:
    return next(i for i, line in enumerate(lines, 1) if line.split()[0] == key)


def _replace_key(lines, key, text):
    lines[_line_of(lines, key) - 1] = text
    return lines


def _before_sv(lines, new):
    at = _line_of(lines, "SV") - 1
    return lines[:at] + new + lines[at:]


def _at(key):
    """Expected error line: the line of ``key`` in the edited file."""
    return lambda lines: _line_of(lines, key)


@pytest.mark.parametrize(
    "fn, where, match",
    [
        (
            lambda ls: ls[:-3],
            lambda ls: len(ls) + 1,
            r"file ends after \d+ SV lines, but total_sv is",
        ),
        (
            lambda ls: ls[:20] + [ls[20].replace(":", ":0.5x", 1)] + ls[21:],
            lambda ls: 21,
            r"bad number '0.5x\S*' for feature",
        ),
        (
            lambda ls: _replace_key(ls, "nr_sv", "nr_sv 1 2"),
            _at("nr_sv"),
            r"nr_sv sums to 3 but total_sv is",
        ),
        (
            lambda ls: _replace_key(ls, "kernel_type", "kernel_type gauss"),
            _at("kernel_type"),
            "unknown or unsupported kernel_type 'gauss'",
        ),
        (
            lambda ls: _replace_key(ls, "kernel_type", "kernel_type precomputed"),
            lambda ls: _line_of(ls, "SV") + 1,
            "a precomputed kernel's SV line must give 0:serial_number",
        ),
        (
            lambda ls: _replace_key(ls, "rho", "rho 0.1 0.2"),
            _at("rho"),
            "rho has 2 values, expected 1 for nr_class 2",
        ),
        (lambda ls: _replace_key(ls, "rho", "rho nan"), _at("rho"), "non-finite value 'nan'"),
        (
            lambda ls: _replace_key(ls, "svm_type", "svm_type nu_svm"),
            _at("svm_type"),
            "unknown svm_type 'nu_svm'; expected one of",
        ),
        (
            lambda ls: _replace_key(ls, "label", "label 1 1"),
            _at("label"),
            "labels are not distinct",
        ),
        (
            lambda ls: _replace_key(ls, "label", "label 1 4294967297"),
            _at("label"),
            "label 4294967297 is outside LIBSVM's 32-bit integers",
        ),
        (  # one sigmoid a class pair: a wrong count gave every pair the first one, silently
            lambda ls: _before_sv(ls, ["probA 1 2", "probB 0.5"]),
            _at("probA"),
            "probA has 2 values, expected 1 for nr_class 2",
        ),
        (
            lambda ls: ls[:2] + ["weights 1 2"] + ls[2:],
            _at("weights"),
            "unknown header field 'weights'",
        ),
        (
            lambda ls: [x for x in ls if not x.startswith("nr_sv")],
            _at("SV"),
            "missing header field 'nr_sv'",
        ),
        (  # svm_save_model writes the fields its kernel reads; LIBSVM reads garbage without
            lambda ls: [x for x in ls if not x.startswith("gamma")],
            _at("SV"),
            "missing header field 'gamma'",
        ),
        (lambda ls: ls + [ls[-1]], len, "more SV lines than total_sv"),
        (
            lambda ls: ls[:20] + [ls[20] + " 1:0.5"] + ls[21:],
            lambda ls: 21,
            r"feature index 1 is not in \(\d+, ",
        ),
        (lambda ls: ls + ["#psvm n_features 5"], len, "n_features 5 is less than the largest"),
        (
            lambda ls: ls[:20] + ["#psvm n_features 13"] + ls[20:],
            lambda ls: 21,
            "expected SV line 12 of \\d+, got a comment",
        ),
        (lambda ls: [], lambda ls: 1, "empty model file"),  # (no 'SV' line to speak of)
    ],
    ids=[
        "truncated",
        "bad-number",
        "nr_sv-sum",
        "kernel",
        "precomputed",
        "rho-count",
        "rho-nan",
        "svm_type",
        "labels",
        "wide-label",
        "probA-count",
        "unknown-field",
        "missing-field",
        "missing-gamma",
        "extra-sv",
        "descending",
        "narrow-n_features",
        "comment-in-sv",
        "empty",
    ],
)
def test_format_errors_name_file_and_line(heart_file, tmp_path, fn, where, match):
    path = tmp_path / "bad.model"
    edited = fn(open(heart_file).read().splitlines())
    path.write_text("\n".join(edited) + "\n")
    with pytest.raises(ModelFormatError, match=match) as info:
        read_model(path)
    err, line = info.value, where(edited)
    assert (err.path, err.line) == (str(path), line)
    assert str(err).startswith(f"{path}:{line}: ")


def test_model_format_error_pickles():
    err = ModelFormatError("/x/m.model", 7, "bad number 'q' for rho")
    err.collective = True  # (set by Comm.agree: an error gathered from a rank keeps it)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is ModelFormatError and back.collective is True
    assert (back.path, back.line, back.reason, str(back)) == (
        "/x/m.model",
        7,
        "bad number 'q' for rho",
        "/x/m.model:7: bad number 'q' for rho",
    )


# ---- atomic writes ---------------------------------------------------------------


@pytest.mark.parametrize("where", ["write", "fsync"])
def test_failed_write_leaves_old_file_and_no_temp(heart_file, tmp_path, monkeypatch, where):
    model = read_model(heart_file)
    path = tmp_path / "m.model"
    write_model(path, model)
    before = path.read_bytes()
    model.rho = model.rho + 1.0  # a different model, so a partial overwrite would show
    if where == "write":  # the disk fills after the header
        real = model_file.write_atomic

        @contextlib.contextmanager
        def failing(*args, **kwargs):
            with real(*args, **kwargs) as f:
                yield _FullAfterHeader(f)

        monkeypatch.setattr(model_file, "write_atomic", failing)
    else:

        def failing(fd):
            raise OSError("fsync failed")

        monkeypatch.setattr(model_file.os, "fsync", failing)
    with pytest.raises((RuntimeError, OSError)):
        write_model(path, model)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["m.model"]
    assert path.read_bytes() == before
    write_model(path, model)  # and a later write succeeds
    np.testing.assert_array_equal(read_model(path).rho, model.rho)


class _FullAfterHeader:
    """A file whose second write fails, as on a full disk."""

    def __init__(self, f):
        self.f, self.writes = f, 0

    def write(self, text: str) -> int:
        self.writes += 1
        if self.writes == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.f.write(text)


def test_single_types_round_trip_and_errors(tmp_path):
    """One-class and the regressors: no label/nr_sv lines, one coefficient, one rho."""
    sv = sp.csr_matrix(np.array([[0.5, 0.0], [0.0, -1.0]]))
    for svm_type in ("one_class", "epsilon_svr", "nu_svr"):
        model = SVCModel(
            svm_type=svm_type,
            kernel="rbf",
            gamma=0.5,
            coef0=0.0,
            degree=3,
            classes=np.zeros(0),
            n_support=np.zeros(0, dtype=np.int64),
            support_vectors=sv,
            dual_coef=np.array([[0.25, -0.75]]),
            rho=np.array([0.125]),
            n_features=2,
        )
        path = tmp_path / f"{svm_type}.model"
        write_model(path, model)
        text = path.read_text()
        assert text.startswith(f"svm_type {svm_type}\n") and "\nlabel" not in text
        back = read_model(path)
        assert back.svm_type == svm_type and back.dual_coef.tolist() == [[0.25, -0.75]]
        np.testing.assert_array_equal(back.decision_function(sv), model.decision_function(sv))
    lines = text.splitlines()
    bad = tmp_path / "bad.model"
    bad.write_text("\n".join([*lines[:5], "label 1 -1", *lines[5:]]) + "\n")
    with pytest.raises(ModelFormatError, match=r"bad.model:6: label is for c_svc and nu_svc"):
        read_model(bad)
    bad.write_text("\n".join(line.replace("nr_class 2", "nr_class 3") for line in lines) + "\n")
    with pytest.raises(ModelFormatError, match="nr_class must be 2 for nu_svr, got 3"):
        read_model(bad)
