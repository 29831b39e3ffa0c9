"""psvm-train -t 4 and psvm-predict on precomputed kernels (LIBSVM's ``0:serial`` rows, #18
item 3): the explicit kernel's model bit for bit for every P, LIBSVM's model files both ways,
-v and -b 1, and line-numbered errors on every rank."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp

from psvm._params import KERNELS
from psvm.io.model_file import read_model
from psvm.kernels import kernel_matrix
from tests._svm import load_head, run_cli, run_cli_batch, write_head

TRAIN, PREDICT = "psvm.cli.train", "psvm.cli.predict"
GAMMA = 0.2
N_TRAIN = 200  # heart_scale's first rows train, the other 70 test


def write_gram(path, K: np.ndarray, y: np.ndarray, serial: bool = True) -> str:
    """LIBSVM's -t 4 rows: ``label 0:serial 1:K(x,x_1) ... l:K(x,x_l)``, exact values
    (a test file's column 0 is any number: 0 here)."""
    with open(path, "w") as f:
        for i, (row, label) in enumerate(zip(K, y, strict=True)):
            cells = " ".join(f"{j}:{v!r}" for j, v in enumerate(row.tolist(), 1))
            f.write(f"{label:g} 0:{i + 1 if serial else 0} {cells}\n")
    return str(path)


@pytest.fixture(scope="module")
def heart(shared_data, tmp_path_factory):
    """Explicit train/test files of heart_scale and their -t 4 twins, by psvm's own kernel."""
    d = tmp_path_factory.mktemp("heart")
    X, y = load_head(shared_data / "heart_scale.xz")
    X = sp.csr_matrix(X)
    files = {"train": write_head(shared_data / "heart_scale.xz", d / "train", N_TRAIN)}
    with open(d / "test", "w") as f:  # the rows after the training ones
        lines = open(write_head(shared_data / "heart_scale.xz", d / "all")).readlines()
        f.writelines(lines[N_TRAIN:])
    files["test"] = str(d / "test")
    for kernel in ("linear", "rbf"):
        K = kernel_matrix(X, X[:N_TRAIN], KERNELS[kernel], GAMMA, 0.0, 3)
        files[kernel, "train"] = write_gram(d / f"{kernel}.train", K[:N_TRAIN], y[:N_TRAIN])
        files[kernel, "test"] = write_gram(d / f"{kernel}.test", K[N_TRAIN:], y[N_TRAIN:], False)
    return files


def _train(args, n=None):
    r = run_cli(TRAIN, ["-q", *map(str, args)], n)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _predict(args, n=None):
    r = run_cli(PREDICT, list(map(str, args)), n)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


@pytest.mark.parametrize("kernel, svm_type", [("rbf", "0"), ("linear", "0"), ("rbf", "3")])
def test_same_model_as_the_explicit_kernel_for_every_p(heart, tmp_path, kernel, svm_type):
    t = str(KERNELS[kernel])
    explicit = tmp_path / "explicit.model"
    files = {n: tmp_path / f"pre{n}.model" for n in (1, 2, 3)}
    outs = {name: tmp_path / name for name in ("explicit", "pre1", "pre3")}
    train = ["train", "-q", "-s", svm_type]
    runs = {  # P -> its runs, one launch each (pre3 predicts with the P = 1 model)
        1: [
            [*train, "-t", t, "-g", GAMMA, heart["train"], explicit],
            [*train, "-t", "4", heart[kernel, "train"], files[1]],
            ["predict", heart["test"], explicit, outs["explicit"]],
            ["predict", heart[kernel, "test"], files[1], outs["pre1"]],
        ],
        2: [[*train, "-t", "4", heart[kernel, "train"], files[2]]],
        3: [
            [*train, "-t", "4", heart[kernel, "train"], files[3]],
            ["predict", heart[kernel, "test"], files[1], outs["pre3"]],
        ],
    }
    for n, batch in runs.items():
        run_cli_batch(tmp_path, n, batch)
    assert files[2].read_bytes() == files[1].read_bytes() == files[3].read_bytes()
    a, b = read_model(explicit), read_model(files[1])
    assert b.kernel == "precomputed" and "kernel_type precomputed" in files[1].read_text()
    np.testing.assert_array_equal(a.dual_coef, b.dual_coef)  # bit for bit
    np.testing.assert_array_equal(a.rho, b.rho)
    X, _ = load_head(heart["train"])
    support = b.serials() - 1  # the SVs' rows, by serial number
    assert (sp.csr_matrix(X)[support] != a.support_vectors[:, : X.shape[1]]).nnz == 0
    outs = {name: path.read_bytes() for name, path in outs.items()}
    assert outs["pre1"] == outs["explicit"] == outs["pre3"]


def test_libsvm_reads_psvm_models_and_psvm_reads_libsvm_models(heart, tmp_path, libsvm_tools):
    """svm-train -t 4 and psvm-train -t 4 models, each predicted by svm-predict and
    psvm-predict: the same predictions; the two trainings reach the same objective."""
    import subprocess

    train, test = heart["rbf", "train"], heart["rbf", "test"]
    lib, ours = tmp_path / "lib.model", tmp_path / "psvm.model"
    lib_run = subprocess.run(
        [libsvm_tools["svm-train"], "-t", "4", train, lib], capture_output=True, text=True
    )
    assert lib_run.returncode == 0, lib_run.stderr
    psvm_run = run_cli(TRAIN, ["-t", "4", train, ours], 2)
    assert psvm_run.returncode == 0, psvm_run.stderr[-2000:]
    objective = [float(re.search(r"obj = (\S+),", r.stdout).group(1)) for r in (lib_run, psvm_run)]
    assert abs(objective[0] - objective[1]) <= 1e-3 * abs(objective[0]), objective
    assert read_model(lib).kernel == "precomputed"  # psvm reads LIBSVM's 0:serial lines
    for model in (lib, ours):
        mine, theirs = tmp_path / "mine", tmp_path / "theirs"
        _predict([test, model, mine], 2)
        r = subprocess.run(
            [libsvm_tools["svm-predict"], test, model, theirs], capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr
        np.testing.assert_array_equal(np.loadtxt(mine), np.loadtxt(theirs))
    np.testing.assert_allclose(read_model(ours).rho, read_model(lib).rho, atol=1e-3)


def test_probability_model_read_both_ways(heart, tmp_path, libsvm_tools):
    """-b 1 -t 4: the explicit kernel's probA/probB bit for bit; svm-predict -b 1 reads
    psvm's model and agrees with psvm-predict -b 1."""
    import subprocess

    explicit, pre = tmp_path / "e.model", tmp_path / "p.model"
    _train(["-b", "1", "-t", "2", "-g", GAMMA, heart["train"], explicit])
    _train(["-b", "1", "-t", "4", heart["rbf", "train"], pre], 2)
    a, b = read_model(explicit), read_model(pre)
    assert a.meta["probA"] == b.meta["probA"] and a.meta["probB"] == b.meta["probB"]
    test = heart["rbf", "test"]
    _predict(["-b", "1", test, pre, tmp_path / "mine"])
    svm_predict = libsvm_tools["svm-predict"]
    r = subprocess.run([svm_predict, "-b", "1", test, pre, tmp_path / "theirs"], text=True)
    assert r.returncode == 0
    mine = (tmp_path / "mine").read_text().splitlines()
    theirs = (tmp_path / "theirs").read_text().splitlines()
    assert mine[0] == theirs[0]  # labels 1 -1
    np.testing.assert_allclose(
        np.loadtxt(mine[1:]), np.loadtxt(theirs[1:]), atol=1e-5
    )  # %g of the same values


def test_cross_validation_matches_the_explicit_kernel(heart):
    """-v 5 -t 4: the folds keep the serial numbers, so each fold's model is the explicit
    kernel's and the result line is the same, for every P."""
    ref = _train(["-v", "5", "-t", "2", "-g", GAMMA, heart["train"]]).stdout
    assert ref.startswith("Cross Validation Accuracy = ")
    for n in (1, 3):
        assert _train(["-v", "5", "-t", "4", heart["rbf", "train"]], n).stdout == ref


@pytest.mark.parametrize(
    "edit, line, message",
    [
        (lambda rows: rows[:5] + [rows[5].replace("0:6 ", "", 1)] + rows[6:], 6, "first column"),
        (
            lambda rows: rows[:7] + [rows[7].replace("0:8 ", "0:999 ", 1)] + rows[8:],
            8,
            "sample_serial_number out of range",
        ),
        (
            lambda rows: rows[:9] + [re.sub(r" 3:\S+", "", rows[9], count=1)] + rows[10:],
            10,
            "column 4 follows 2",
        ),
        (lambda rows: rows[:150] + [rows[150].rsplit(" ", 1)[0]] + rows[151:], 151, "ends at"),
    ],
    ids=["no-serial", "serial-range", "gap", "short"],
)
def test_bad_rows_name_the_line_on_every_rank(heart, tmp_path, edit, line, message):
    rows = open(heart["rbf", "train"]).read().splitlines()
    bad = tmp_path / "bad"
    bad.write_text("\n".join(edit(rows)) + "\n")
    r = run_cli(TRAIN, ["-t", "4", bad, tmp_path / "m"], 2, timeout=120)
    assert r.returncode != 0
    assert f"{bad}:{line}: " in r.stderr and message in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "m").exists()


def test_bad_test_rows_are_refused(heart, tmp_path):
    """A test row must reach the model's largest serial number and start with 0:?."""
    model = tmp_path / "m"
    _train(["-t", "4", heart["rbf", "train"], model])
    rows = open(heart["rbf", "test"]).read().splitlines()
    bad = tmp_path / "t"
    for row, message in (
        (" ".join(rows[3].split()[:50]), "4: the row ends at column 48"),
        (rows[3].replace(" 0:0 ", " ", 1), "4: first column must be 0:?"),
    ):
        bad.write_text("\n".join(rows[:3] + [row] + rows[4:]) + "\n")
        r = run_cli(PREDICT, [bad, model, tmp_path / "out"], 2, timeout=120)
        assert r.returncode != 0 and f"{bad}:{message}" in r.stderr, r.stderr
