"""One-class -b 1: LIBSVM 3.3x's density marks against libsvm-official 3.37 (the same marks
from the same decision values, the same probabilities, svm-predict -b 1's file, the models
each side reads). Debian's svm-train (3.24) has no marks, so libsvm-official is the
reference here."""

from __future__ import annotations

import numpy as np
import pytest
from libsvm.svmutil import svm_load_model, svm_predict, svm_read_problem, svm_save_model, svm_train

from psvm.comm import world
from psvm.io.model_file import ModelFormatError, read_model, write_model
from psvm.io.shard import Shard
from psvm.probability import density_marks, one_class_probability
from psvm.svc.platt import fit_density_marks
from tests._svm import load_head, run_cli, write_head

TRAIN, PREDICT = "psvm.cli.train", "psvm.cli.predict"


def libsvm_b1_output(y, x, model) -> str:
    """svm-predict 3.37 -b 1's file for a one-class model: its header, then per row the
    label and P(normal), P(outlier), all %g (from libsvm-official's svm_predict)."""
    labels, _, prob = svm_predict(y, x, model, "-b 1 -q")
    rows = "".join(f"{v:g} {p:g} {q:g}\n" for v, (p, q) in zip(labels, prob, strict=True))
    return "label normal outlier\n" + rows


@pytest.fixture(scope="module")
def heart(shared_data, tmp_path_factory):
    path = write_head(shared_data / "heart_scale.xz", tmp_path_factory.mktemp("h") / "heart")
    y, x = svm_read_problem(path)
    return path, y, x


def test_marks_of_libsvms_model_are_libsvms(heart, tmp_path):
    """LIBSVM's one-class model read by psvm: fit_density_marks on the training rows gives
    LIBSVM's marks (the same decision values, the same order statistics)."""
    path, y, x = heart
    lib = svm_train(y, x, "-s 2 -b 1 -q")
    svm_save_model(str(tmp_path / "lib"), lib)
    model = read_model(tmp_path / "lib")
    X, _ = load_head(path)
    shard = Shard(
        X=X,
        y=np.asarray(y),
        offset=0,
        n_samples=len(y),
        n_features=X.shape[1],
        max_row_nnz=int(np.diff(X.indptr).max()),
        classes=np.zeros(0),
    )
    ours = fit_density_marks(world(), shard, model)
    np.testing.assert_allclose(ours, model.meta["prob_density_marks"], rtol=1e-12, atol=1e-12)
    _, prob = model.predict_proba(X)
    ref = np.array(svm_predict(y, x, lib, "-b 1 -q")[2])
    np.testing.assert_array_equal(prob, ref)  # predict_one_class_probability's bins


def test_bins_as_predict_one_class_probability():
    marks = np.arange(10.0) - 4.5  # -4.5 ... 4.5
    dec = np.array([-9.0, -4.5, -4.0, -3.5, 0.0, 4.0, 4.5, 5.0, np.nan])
    expected = [0.001, 0.1, 0.1, 0.2, 0.5, 0.9, 0.0, 0.999, 0.0]  # 4.5: LIBSVM's loop finds none
    np.testing.assert_array_equal(one_class_probability(dec, marks), expected)


def test_marks_need_five_rows_on_each_side():
    """LIBSVM's rule: fewer than 5 negative or 5 non-negative values give no marks; the
    negative side counts 0 when no value is >= 0 (its neg_counter)."""
    assert density_marks(np.r_[-np.arange(1.0, 5.0), np.arange(6.0)]) is None
    assert density_marks(-np.arange(1.0, 20.0)) is None
    assert density_marks(np.arange(20.0)) is None
    dec = np.r_[-np.arange(1.0, 6.0), np.arange(5.0)]
    # bins: 5 values each side; edges -5 .. -1, 0, then 0 .. 4 (offset by neg_counter - 1)
    edges = np.array([-5, -4, -3, -2, -1, 0, 0, 1, 2, 3, 4], dtype=float)
    np.testing.assert_array_equal(density_marks(dec[::-1]), (edges[:-1] + edges[1:]) / 2)


def test_cli_one_class_models_read_both_ways(heart, tmp_path):
    """psvm-predict -b 1 on LIBSVM 3.37's one-class -b 1 model writes svm-predict -b 1's
    file; LIBSVM reads psvm-train -s 2 -b 1's model (prob_density_marks in LIBSVM's place)
    and predicts what psvm-predict writes."""
    path, y, x = heart
    lib, ours = tmp_path / "lib.model", tmp_path / "ours.model"
    svm_save_model(str(lib), svm_train(y, x, "-s 2 -b 1 -q"))
    r = run_cli(PREDICT, ["-b", "1", path, lib, tmp_path / "a"], None)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "a").read_text() == libsvm_b1_output(y, x, svm_load_model(str(lib)))
    assert r.stdout.startswith("Accuracy = ")
    r = run_cli(TRAIN, ["-q", "-s", "2", "-b", "1", path, ours], None)
    assert r.returncode == 0, r.stderr
    keys = [line.split()[0] for line in ours.read_text().split("\nSV\n")[0].splitlines()]
    assert keys == [line.split()[0] for line in lib.read_text().split("\nSV\n")[0].splitlines()]
    assert keys[-1] == "prob_density_marks"
    loaded = svm_load_model(str(ours))
    assert loaded.is_probability_model()
    r = run_cli(PREDICT, ["-b", "1", path, ours, tmp_path / "b"], None)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "b").read_text() == libsvm_b1_output(y, x, loaded)
    r = run_cli(PREDICT, [path, ours, tmp_path / "c"], None)
    assert "Model supports probability estimates, but disabled in prediction." in r.stdout


def test_too_few_rows_warn_and_write_no_marks(tmp_path):
    """As svm-train 3.37: the warning (also under -q), a model without marks, which -b 1
    prediction then refuses; a file of one label trains, as one-class files often are."""
    rows = "".join(f"1 1:{v} 2:{v * v}\n" for v in np.linspace(-1, 1, 8))  # one label
    data = tmp_path / "tiny"
    data.write_text(rows)
    y, x = svm_read_problem(str(data))
    assert not svm_train(y, x, "-s 2 -b 1 -q").is_probability_model()  # LIBSVM: no marks
    r = run_cli(TRAIN, ["-q", "-s", "2", "-b", "1", data, tmp_path / "m"], None)
    assert r.returncode == 0, r.stderr
    assert (  # svm-train 3.37's words
        "WARNING: number of positive or negative decision values <5; too few to do a "
        "probability estimation.\n"
    ) in r.stderr
    assert "prob_density_marks" not in (tmp_path / "m").read_text()
    r = run_cli(PREDICT, ["-b", "1", data, tmp_path / "m", tmp_path / "out"], None)
    assert r.returncode == 1 and "Model does not support probabiliy estimates" in r.stderr


def test_model_file_keeps_ten_marks(heart, tmp_path):
    path, y, x = heart
    svm_save_model(str(tmp_path / "lib"), svm_train(y, x, "-s 2 -b 1 -q"))
    model = read_model(tmp_path / "lib")
    write_model(tmp_path / "back", model)
    assert read_model(tmp_path / "back").meta == model.meta
    lines = (tmp_path / "lib").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("prob_density_marks"))
    lines[at] = lines[at].rsplit(" ", 1)[0]
    (tmp_path / "bad").write_text("\n".join(lines) + "\n")
    with pytest.raises(ModelFormatError, match=rf"bad:{at + 1}: prob_density_marks has 9 values"):
        read_model(tmp_path / "bad")
