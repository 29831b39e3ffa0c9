"""psvm-train -b 1 under mpiexec: the internal folds run on the distributed engine and the
model file, probA/probB (or one-class density marks) included, has the same bits for
P = 1, 2 and 3 (#18)."""

import numpy as np
import pytest
from libsvm.svmutil import svm_predict, svm_read_problem, svm_train

from psvm.io.model_file import read_model
from tests._svm import run_cli, write_head


def _same_bits(tmp_path, data, train_args: list) -> str:
    """psvm-train ``train_args`` at P = 1, 2 and 3 gives the same model file, and
    psvm-predict -b 1 at P = 1 and 3 the same output, which it returns."""
    files = {}
    for n in (1, 2, 3):
        model = tmp_path / f"m{n}"
        r = run_cli("psvm.cli.train", ["-q", *train_args, data, model], n, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        files[n] = model.read_bytes()
    assert files[2] == files[1] and files[3] == files[1]
    out = {}
    for n in (1, 3):
        r = run_cli("psvm.cli.predict", ["-b", "1", data, tmp_path / "m1", tmp_path / f"o{n}"], n)
        assert r.returncode == 0, r.stderr[-3000:]
        out[n] = (tmp_path / f"o{n}").read_text()
    assert out[3] == out[1]
    return out[1]


def test_probability_model_same_bits_for_every_p(shared_data, tmp_path):
    data = write_head(shared_data / "usps.t.xz", tmp_path / "usps", 600)  # 10 classes: 45 pairs
    out = _same_bits(tmp_path, data, ["-b", "1", "-g", "0.01"])
    assert len(read_model(tmp_path / "m1").meta["probB"]) == 45
    assert out.startswith("labels ")


@pytest.mark.parametrize(("name", "rows"), [("heart_scale", None), ("a9a", 3000)])
def test_one_class_marks_same_bits_for_every_p(shared_data, tmp_path, name, rows):
    """psvm-train -s 2 -b 1: the density marks have the same bits for P = 1, 2 and 3 and
    are close to libsvm-official 3.37's (whose one-class model agrees to about 1e-3: rows
    at the margin can change sides, moving a mark to a neighbouring order statistic)."""
    data = write_head(shared_data / f"{name}.xz", tmp_path / name, rows)
    out = _same_bits(tmp_path, data, ["-s", "2", "-b", "1"])
    assert out.startswith("label normal outlier\n")

    y, x = svm_read_problem(data)
    lib = svm_train(y, x, "-s 2 -b 1 -q")
    dec = np.array(svm_predict(y, x, lib, "-q")[2])[:, 0]
    ours = np.array(read_model(tmp_path / "m1").meta["prob_density_marks"])
    spread = np.abs(ours - lib.prob_density_marks[:10]).max() / np.ptp(dec)
    assert spread < 5e-3, spread  # measured: 1.8e-3 (heart_scale), 1.1e-4 (a9a 3k)
    prob = np.array([line.split()[1] for line in out.splitlines()[1:]], dtype=float)
    ref = np.array(svm_predict(y, x, lib, "-b 1 -q")[2])[:, 0]
    assert np.abs(prob - ref).max() <= 0.1 + 1e-12  # at most one bin apart
    assert np.mean(prob == ref) >= 0.98  # measured: 99.3%, 99.9%


def test_one_class_too_few_rows_with_more_ranks_than_rows(tmp_path):
    """Three rows on five ranks: LIBSVM's warning once, the same model (no marks) as P = 1."""
    data = tmp_path / "tiny"
    data.write_text("1 1:0.5\n1 1:-0.25 2:1\n1 2:0.75\n")
    files = {}
    for n in (1, 5):
        r = run_cli("psvm.cli.train", ["-s", "2", "-b", "1", data, tmp_path / f"m{n}"], n)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stderr.count("WARNING: number of positive or negative decision values") == 1
        files[n] = (tmp_path / f"m{n}").read_bytes()
    assert files[5] == files[1] and b"prob_density_marks" not in files[1]
