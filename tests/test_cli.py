"""psvm-train / psvm-predict: LIBSVM flags, bad input and bad options under mpiexec."""

import io
import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from psvm.cli._common import SWITCH, WEIGHTS, UsageError, parse_options, usage
from psvm.cli.train import parse_args
from tests._helpers import mpiexec, run_mpi
from tests._svm import run_cli

TRAIN = "psvm.cli.train"
PREDICT = "psvm.cli.predict"
BUFFERED = {"PYTHONUNBUFFERED": ""}  # empty: Python buffers a pipe, as without the variable
GOOD = "1 1:0.5 3:1\n-1 1:-0.5 2:1\n1 2:0.25 3:0.5\n-1 1:-1 3:-0.5\n"

BAD_FILES = {
    # name: (content, expected message fragment, line)
    "malformed": (GOOD + "1 1:0.5 3:x\n", "3:x", 5),
    "negative index": (GOOD + "1 -1:1\n", "feature index -1 is negative", 5),
    "descending": ("1 2:1 1:1\n" + GOOD, "ascending", 1),
    "nan value": (GOOD + "-1 1:nan\n", "NaN", 5),
    "inf value": ("1 2:inf\n" + GOOD, "inf", 1),
    "missing colon": (GOOD + "1 1 0.5\n", "", 5),
    "one class": ("1 1:1\n1 2:1\n1 1:0.5\n", "only one class", None),
    # finite, but its squared norm overflows; in rank 1's half, after a comment and a blank line
    "values too large": (GOOD * 2 + "# c\n\n1 1:1e200 2:1\n" + GOOD, "values too large", 11),
    "empty": ("", "empty", None),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_training_file_fails_cleanly_on_every_rank(tmp_path, case):
    n = 3 if case in ("malformed", "one class") else 2
    content, fragment, line = BAD_FILES[case]
    data = tmp_path / "bad.txt"
    data.write_text(content)
    model = tmp_path / "out.model"
    r = run_cli(TRAIN, ["-q", data, model], n, timeout=60)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr, r.stderr
    errors = [s for s in r.stderr.splitlines() if s.startswith("psvm-train: error:")]
    assert len(errors) == 1, r.stderr  # reported once, by rank 0
    assert str(data) in errors[0] and fragment.lower() in errors[0].lower()
    if line is not None:
        assert f"{data}:{line}:" in errors[0]
    assert not model.exists()
    assert list(tmp_path.iterdir()) == [data]  # no temporary model file either


def test_kernel_overflow_stops_every_rank_with_one_line(tmp_path):
    # each row's norm is fine, but (gamma x.z)^3 overflows: the solve's values are not finite
    data = tmp_path / "big.txt"
    data.write_text(
        "".join(f"{1 - 2 * (k % 2)} 1:{(-1) ** k * (k + 1)}e110 2:1e110\n" for k in range(12))
    )
    r = run_cli(TRAIN, ["-q", "-t", "1", "-g", "1", data, tmp_path / "m"], 2, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("psvm-train: error:") == 1, r.stderr
    assert "not finite" in r.stderr and "scale the features" in r.stderr
    assert list(tmp_path.iterdir()) == [data]


def _unwritable_folder(tmp_path) -> Path:
    """A folder where this process cannot create files: mode 555, or /sys for root."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    for folder in (ro, Path("/sys")):
        try:
            (folder / "probe").touch()
        except OSError:
            return folder
        (folder / "probe").unlink()
    pytest.skip("no folder this process cannot write to")


@pytest.mark.parametrize(
    "case",
    [
        "missing folder",
        "model is a folder",
        "read-only folder",
        "stats in a missing folder",
        "checkpoint is a folder",
    ],
)
def test_unwritable_output_fails_before_training(tmp_path, case):
    data, model = tmp_path / "d.txt", tmp_path / "d.model"
    data.write_text(GOOD * 3)
    (tmp_path / "adir").mkdir()
    args, what, path = [], "the model file", model
    reason = f"folder {str(tmp_path / 'missing')!r} does not exist"
    if case == "missing folder":
        path = tmp_path / "missing" / "d.model"
    elif case == "model is a folder":
        path, reason = tmp_path / "adir", "it is a folder"
    elif case == "read-only folder":
        path, reason = _unwritable_folder(tmp_path) / "d.model", ""
    elif case == "stats in a missing folder":
        args, what = ["--stats", tmp_path / "missing" / "s.json"], "the --stats file"
    else:
        args, what = ["--checkpoint", tmp_path / "adir"], "the --checkpoint file"
        reason = "it is a folder"
    target = path if what == "the model file" else args[1]
    r = run_cli(TRAIN, [*args, data, path], 2, timeout=60)
    assert r.returncode == 1, r.stderr
    assert r.stdout == ""  # no training: not even a progress line
    errors = [s for s in r.stderr.splitlines() if s.startswith("psvm-train: error:")]
    assert errors == [s for s in r.stderr.splitlines() if s], r.stderr  # one line, no traceback
    assert len(errors) == 1 and errors[0].startswith(
        f"psvm-train: error: cannot write {what} {str(target)!r}: {reason}"
    ), errors
    if case == "read-only folder":
        assert "takes no new file (Permission denied)" in errors[0] or (
            "(Read-only file system)" in errors[0]
        ), errors
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "ro") == ["adir", "d.txt"]
    assert os.listdir(tmp_path / "adir") == []


@pytest.mark.parametrize(
    "module, rank1",
    [
        (TRAIN, ["-c", "2"]),
        (TRAIN, ["-s", "9"]),
        (TRAIN, ["-o", "abc"]),  # (-o N is a rank's own; a bad value is not)
        (PREDICT, ["-b", "1"]),
        (PREDICT, ["-o", "2"]),  # (psvm-predict has no -o)
    ],
)
def test_ranks_given_other_arguments_are_one_error(tmp_path, module, rank1):
    """mpiexec's MPMD form gives rank 1 other options: another C trained a mixed model without
    a word, an option only rank 1 refused left rank 0 waiting. Now one line, exit 1 on every
    rank, no output; psvm-train's -o N (tests/mpi/run_threads.py) and /dev/fd/N's number
    may differ (test_a_descriptor_psvm_did_not_inherit_is_refused)."""
    data, model, out = tmp_path / "d.txt", tmp_path / "d.model", tmp_path / "out"
    data.write_text(GOOD * 3)
    if module == PREDICT:
        assert run_cli(TRAIN, ["-q", data, model], None, timeout=60).returncode == 0
    files = [str(data), str(model)] + ([str(out)] if module == PREDICT else [])
    one = [sys.executable, "-m", module, "-q"]
    cmd = [mpiexec(), "-n", "1", *one, *files, ":", "-n", "1", *one, *rank1, *files]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stdout == "", r.stderr
    prog = "psvm-train" if module == TRAIN else "psvm-predict"
    aside = "; -o N may differ" if module == TRAIN else ""
    assert r.stderr.strip() == (
        f"{prog}: error: the ranks' command lines differ from word 2 on: rank 1 has "
        f"'{' '.join(rank1 + files)}', rank 0 '{' '.join(files)}'; every rank needs the same "
        f"arguments{aside}"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["d.txt"] + (["d.model"] if module == PREDICT else [])
    )


def test_predict_to_a_missing_folder_is_one_line(tmp_path):
    data, model = tmp_path / "d.txt", tmp_path / "d.model"
    data.write_text(GOOD)
    assert run_cli(TRAIN, ["-q", data, model], None, timeout=60).returncode == 0
    out = tmp_path / "missing" / "out"
    r = run_cli(PREDICT, [data, model, out], 2, timeout=60)
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert r.stderr.strip() == (
        f"psvm-predict: error: cannot write the output file {str(out)!r}: "
        f"folder {str(out.parent)!r} does not exist"
    )


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("n", [None, 2])
def test_a_full_disk_at_the_end_is_one_line(tmp_path, n):
    """A write that fails after training (a full disk: /dev/full takes no byte) is one line
    and exit 1 for the model, --stats and the predictions, in both solvers (a user's trial
    found a traceback, and under mpiexec an abort)."""
    data, model = tmp_path / "d.txt", tmp_path / "d.model"
    data.write_text(GOOD)
    assert run_cli(TRAIN, ["-q", data, model], None, timeout=60).returncode == 0
    full = "No space left on device"
    for module, args in (
        (TRAIN, ["-q", data, "/dev/full"]),
        (TRAIN, ["-q", "--solver", "sgd", data, "/dev/full"]),
        (TRAIN, ["-q", "--stats", "/dev/full", data, tmp_path / "m2"]),
        (PREDICT, [data, model, "/dev/full"]),
    ):
        r = run_cli(module, args, n, timeout=120)
        assert r.returncode == 1, (args, r.stderr[-2000:])
        lines = r.stderr.strip().splitlines()
        assert lines == [lines[0]] and lines[0].endswith(f"'/dev/full': {full}"), (args, lines)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_standard_output_full_or_closed(tmp_path):
    """Standard output or error on a full disk: the run writes its model or predictions and
    exits 120, without a traceback (a user's trial found `unexpected error`, exit 1, no
    model); with nothing printed (-q) it succeeds. Closed (`>&-`, `2>&-`): the output goes
    nowhere and the run succeeds, as svm-train's."""
    data, model, out = tmp_path / "d.txt", tmp_path / "d.model", tmp_path / "d.out"
    data.write_text(GOOD)
    runs = [  # (command, its arguments, what it writes, whether -q leaves a line: -v's)
        (TRAIN, [data, model], model, False),
        (TRAIN, ["--solver", "sgd", data, model], model, False),
        (TRAIN, ["-v", "2", data], None, True),
        (PREDICT, [data, model, out], out, False),
    ]
    for (module, args, made, prints), quiet in itertools.product(runs, (False, True)):
        cmd = [sys.executable, "-m", module, *(["-q"] if quiet else []), *map(str, args)]
        for stdout, code in (("/dev/full", 0 if quiet and not prints else 120), ("&-", 0)):
            if made is not None and module == TRAIN:
                made.unlink(missing_ok=True)
            shell = f"exec {' '.join(cmd)} >{stdout}"
            r = subprocess.run(shell, shell=True, stderr=subprocess.PIPE, text=True, timeout=120)
            assert (r.returncode, r.stderr) == (code, ""), (shell, r.stderr[-2000:])
            assert made is None or made.stat().st_size > 0, shell
    # a warning on a full standard error (class 5 is missing): the model, then 120
    shell = f"exec {sys.executable} -m {TRAIN} -q -w5 2 {data} {model} 2>/dev/full"
    r = subprocess.run(shell, shell=True, timeout=120)
    assert r.returncode == 120 and model.stat().st_size > 0
    # both streams closed: nothing to say, and nothing fails
    r = subprocess.run(f"exec {sys.executable} -m {TRAIN} {data} {model} >&- 2>&-", shell=True)
    assert r.returncode == 0 and model.stat().st_size > 0
    # /dev/stdout on a closed stdout is refused as svm-predict's fopen fails (the review of the
    # fix found it written to /dev/null, exit 0: /dev/fd's listing had counted its own fd 1)
    for module, args in ((PREDICT, [data, model]), (TRAIN, ["-q", data])):
        shell = f"exec {' '.join([sys.executable, '-m', module, *map(str, args)])} /dev/stdout >&-"
        r = subprocess.run(shell, shell=True, stderr=subprocess.PIPE, text=True, timeout=120)
        assert r.returncode == 1 and "descriptor 1 was not open when the command started" in (
            r.stderr
        ), (shell, r.stderr[-2000:])


def test_missing_file(tmp_path):
    r = run_cli(TRAIN, ["-q", tmp_path / "nope.txt", tmp_path / "m"], 2, timeout=60)
    assert r.returncode != 0 and "nope.txt" in r.stderr
    assert r.stderr.count("psvm-train: error:") == 1


def test_test_file_with_more_features_than_the_model(tmp_path):
    data, test = tmp_path / "train.txt", tmp_path / "test.txt"
    data.write_text(GOOD)
    test.write_text("1 1:1\n-1 7:1\n")
    r = run_cli(TRAIN, ["-q", data, tmp_path / "m"], 2, timeout=60)
    assert r.returncode == 0, r.stderr
    r = run_cli(PREDICT, ["--strict-features", test, tmp_path / "m", tmp_path / "out"], 2, 60)
    assert r.returncode != 0
    assert f"{test}:2:" in r.stderr and "7" in r.stderr
    assert not (tmp_path / "out").exists()
    test.write_text("1 1:1\n-1 1:1e300\n")
    r = run_cli(PREDICT, [test, tmp_path / "m", tmp_path / "out"], 2, timeout=60)
    assert r.returncode == 1 and r.stderr.count("psvm-predict: error:") == 1, r.stderr
    assert f"{test}:2: values too large" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()
    # by default as LIBSVM: the unseen feature 7 counts in the RBF norm of row 2
    from libsvm import svmutil

    from psvm.io.model_file import read_model

    test.write_text("1 1:1\n-1 7:1\n")
    r = run_cli(PREDICT, [test, tmp_path / "m", tmp_path / "out"], 2, timeout=60)
    assert r.returncode == 0, r.stderr
    y, x = svmutil.svm_read_problem(str(test))
    labels, _, dec = svmutil.svm_predict(y, x, svmutil.svm_load_model(str(tmp_path / "m")), "-q")
    assert np.loadtxt(tmp_path / "out").tolist() == labels
    X = sp.csr_matrix(([1.0, 1.0], [0, 6], [0, 1, 2]), shape=(2, 7))
    ours = read_model(tmp_path / "m").decision_function(X)[:, 0]
    np.testing.assert_allclose(ours, [d[0] for d in dec], rtol=1e-12)


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["-c", "abc", "f"], "-c expects a number"),
        (["-c", "-1", "f"], "C must be > 0"),
        (["-g", "-0.5", "f"], "gamma must be >= 0"),
        (["-t", "7", "f"], "kernel_type"),
        (["-m", "0", "f"], "cache_size must be > 0"),
        (["-e", "0", "f"], "tol must be > 0"),
        (["--heuristic", "eager", "f"], "heuristic must be one of"),
        (["-s", "5", "f"], "svm_type must be 0, 1, 2, 3 or 4"),
        (["-x", "1", "f"], "unknown option -x"),
        ([], "expected training_set_file"),
        (["f", "m", "-c", "10"], "options go before the file names: '-c' came after"),
    ],
)
def test_bad_options_name_the_parameter(tmp_path, argv, fragment):
    (tmp_path / "f").write_text(GOOD)
    n = 2 if argv[:1] == ["-c"] else None  # ranks validate alike: one MPI case is enough
    r = run_cli(TRAIN, argv, n, timeout=60, cwd=tmp_path)
    assert r.returncode != 0
    assert fragment in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_flags_map_to_parameters():
    o = parse_args(
        [
            "-t",
            "1",
            "-d",
            "2",
            "-g",
            "0.5",
            "-r",
            "1",
            "-c",
            "3",
            "-e",
            "0.01",
            "-m",
            "50",
            "-w1",
            "2",
            "-w-1",
            "0.5",
            "-h",
            "0",
            "-q",
            "tr",
            "out",
        ]
    )
    assert o["kernel"] == "poly" and o["degree"] == 2 and o["gamma"] == 0.5 and o["coef0"] == 1
    assert o["C"] == 3 and o["tol"] == 0.01 and o["cache_size"] == 50
    assert o["class_weight"] == {1.0: 2.0, -1.0: 0.5} and o["heuristic"] == "none"
    assert o["quiet"] and (o["train"], o["model"]) == ("tr", "out")
    assert parse_args(["dir/a9a"])["model"] == "a9a.model"  # LIBSVM's default name


def test_help_as_the_last_word():
    """`-h` or `--help` after the files asks for the usage (a user's trial got a model file
    named `-h`, as svm-train would write); `-h 0` before them stays shrinking."""
    from psvm.cli._common import HelpRequested
    from psvm.cli.predict import parse_args as predict_args

    for last in ("-h", "--help"):
        for parse, argv in (
            (parse_args, ["data", last]),
            (parse_args, ["-c", "2", "data", "model", last]),
            (parse_args, ["--solver", "sgd", "data", last]),
            (predict_args, ["test", "model", last]),
        ):
            with pytest.raises(HelpRequested):
                parse(argv)
    assert parse_args(["-h", "0", "data"])["heuristic"] == "none"
    assert predict_args(["t", "m", "o"])["output"] == "o"


def test_option_table_kinds():
    """One table row per option: valued, switch (no value) and LIBSVM's -w<label> <weight>."""
    flags = {
        "--every": ("every", int, "period"),
        "--resume": ("resume", SWITCH, "continue"),
        "-wi": ("class_weight", WEIGHTS, "weight of class i"),
        "-q": ("quiet", SWITCH, "quiet mode"),
    }
    opts, rest = parse_options(["--resume", "-w2", "0.5", "--every", "3", "f", "-q"], flags)
    assert opts == {"resume": True, "quiet": False, "class_weight": {2.0: 0.5}, "every": 3}
    assert rest == ["f", "-q"]  # options end at the first positional
    assert usage("Usage: x", flags).splitlines() == [
        "Usage: x",
        "options:",
        "--every every: period",
        "--resume : continue",
        "-wi weight: weight of class i",
        "-q : quiet mode",
    ]
    bad = {
        "--every": "--every needs a value",
        "-w 1": "unknown option -w",
        "-wx 1": "-wx expects a number, got 'x'",
        "-w1.5 2": "option -w1.5: class labels are integers, got '1.5'",
        "-winf 2": "option -winf: class labels are integers, got 'inf'",
    }
    for argv, message in bad.items():
        with pytest.raises(UsageError, match=message):
            parse_options(argv.split(), flags)


def test_train_and_predict_in_one_process(tmp_path):
    data = tmp_path / "d.txt"
    data.write_text(GOOD)
    r = run_cli(TRAIN, [data, tmp_path / "m"], None)
    assert r.returncode == 0 and "optimization finished" in r.stdout
    r = run_cli(PREDICT, [data, tmp_path / "m", tmp_path / "p"], None)
    assert r.returncode == 0 and r.stdout.startswith("Accuracy = 100% (4/4)")
    assert np.loadtxt(tmp_path / "p").tolist() == [1, -1, 1, -1]
    for quiet in ([], ["-q"]):  # LIBSVM's warning: on stderr, also under -q, as svm-train's
        r = run_cli(TRAIN, [*quiet, "--max-iter", "1", data, tmp_path / "m"], None)
        assert r.returncode == 0 and "reaching max" not in r.stdout
        assert r.stderr.count("WARNING: reaching max number of iterations") == 1


def test_max_iter_warning_under_mpiexec_once_on_stderr(tmp_path):
    """svm-train prints LIBSVM's max_iter warning to stderr whatever -q says: psvm-train once a
    run, rank 0, also when another rank's folds (fold-parallel -v) reached the limit."""
    data = tmp_path / "d.txt"
    data.write_text(GOOD * 3)
    runs = {
        2: ["-q", "--max-iter", "1", data, tmp_path / "m"],
        3: ["-q", "--max-iter", "1", "-v", "3", "--cv-parallel", "folds", data],
    }
    for n, args in runs.items():
        r = run_cli(TRAIN, args, n)
        assert r.returncode == 0, r.stderr
        assert r.stderr.count("WARNING: reaching max number of iterations") == 1, r.stderr


def test_huge_feature_indices_cost_no_memory(tmp_path):
    """A valid index near 2^31: work vectors follow the features in use, not the index range."""
    import resource

    data, model, out = tmp_path / "d.txt", tmp_path / "d.model", tmp_path / "d.out"
    data.write_text("1 1:0.5 2000000000:1\n-1 3:1 7:0.25\n1 2:1 2000000000:0.5\n-1 1:1 5:2\n")
    r = run_cli("psvm.cli.train", ["-q", data, model], 2, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "2000000000:1" in model.read_text()  # support vectors keep their indices
    r = run_cli("psvm.cli.predict", [data, model, out], None, timeout=120)
    assert r.returncode == 0 and "Accuracy = " in r.stdout, r.stderr
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert peak_mb < 2000, peak_mb  # was 10.9 GB with dense work vectors of 2^31


@pytest.mark.parametrize("solver", ["smo", "sgd"])
def test_weight_of_a_missing_class_warns_as_libsvm(tmp_path, solver):
    """-w5 on a file without class 5: LIBSVM's warning once, then the model without it."""
    data = tmp_path / "d.txt"
    data.write_text(GOOD)
    flags = ["--solver", solver, "-q", "-w1", "2"]
    if solver == "sgd":  # a fixed period: 'auto' times the ranks, so two runs may differ
        flags += ["--sync-every", "8"]
    r = run_cli(TRAIN, [*flags, "-w5", "3", data, tmp_path / "with"], 2, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == ["WARNING: class label 5 specified in weight is not found"]
    r = run_cli(TRAIN, [*flags, data, tmp_path / "without"], 2, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "with").read_text() == (tmp_path / "without").read_text()


def test_huge_poly_degree_takes_log_steps(tmp_path):
    """-d at its bound: LIBSVM's powi squares its way there (a running product took ~1 s a
    kernel value, minutes in all), and the run stays well under the timeout."""
    data = tmp_path / "d.txt"
    data.write_text(GOOD * 5)
    r = run_cli(
        TRAIN, ["-q", "-t", "1", "-d", "2147483647", data, tmp_path / "m"], None, timeout=100
    )
    assert r.returncode == 0, r.stderr
    assert "degree 2147483647" in (tmp_path / "m").read_text()


def test_default_model_name_drops_the_compression_suffix(tmp_path):
    """svm-train names the model after the training file; NAME.xz is NAME, as psvm reads it."""
    import lzma

    from psvm.cli._common import default_model_name

    names = {
        "dir/a9a": "a9a.model",
        "a9a.xz": "a9a.model",
        "/d/a9a.t.bz2": "a9a.t.model",
        "a9a.t.gz": "a9a.t.model",
        "a9a.txt": "a9a.txt.model",
        ".xz": ".xz.model",
        "A9A.XZ": "A9A.model",  # the reader decompresses it too
    }
    assert {name: default_model_name(name) for name in names} == names
    with lzma.open(tmp_path / "d.xz", "wt") as f:
        f.write(GOOD)
    r = run_cli(TRAIN, ["-q", "d.xz"], None, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.model", "d.xz"]


def test_pair_summary_is_libsvm_s(tmp_path):
    """After each class pair, LIBSVM's lines: #iter, nu, obj and rho, nSV and nBSV."""
    data = tmp_path / "d.txt"
    data.write_text(GOOD)
    r = run_cli(TRAIN, ["-c", "1", "-g", "0.5", data, tmp_path / "m"], None)
    lines = r.stdout.splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.startswith("optimization finished, #iter = "))
    assert lines[k + 1].startswith("nu = ") and float(lines[k + 1][5:]) > 0
    assert lines[k + 2].startswith("obj = ") and ", rho = " in lines[k + 2]
    n_sv, n_bsv = (int(p.split("=")[1]) for p in lines[k + 3].split(","))
    assert lines[k + 3].startswith("nSV = ") and n_bsv <= n_sv <= 4


def test_unscaled_rbf_features_get_the_svm_scale_hint(tmp_path):
    data = tmp_path / "d.txt"
    data.write_text("1 1:255 2:10\n-1 1:3 2:200\n1 1:250 2:20\n-1 1:7 2:180\n")
    r = run_cli(TRAIN, [data, tmp_path / "m"], None)
    assert r.returncode == 0 and r.stderr.count("feature values reach 255") == 1, r.stderr
    assert "svm-scale" in r.stderr
    r = run_cli(TRAIN, ["-t", "0", data, tmp_path / "m"], None)  # linear: no hint
    assert r.returncode == 0 and "svm-scale" not in r.stderr, r.stderr
    data.write_text("1 1:1e14 2:1\n-1 1:3 2:200\n1 1:250 2:20\n-1 1:7 2:180\n")
    r = run_cli(TRAIN, ["-t", "0", "--max-iter", "1000", data, tmp_path / "m"], None)
    assert "feature values reach 1e+14; the linear kernel works best" in r.stderr, r.stderr


def test_console_exit_flushes_and_keeps_the_code():
    """A console run ends by C's ``exit`` (no interpreter teardown): what it printed, unflushed,
    still reaches a pipe, and the exit code is the protocol's; output that cannot be written
    (a full disk) fails a run that succeeded (CPython's 120), as the interpreter's exit did."""
    code = (
        "import sys\n"
        "from psvm.cli._common import run_main\n"
        "def body(argv):\n"
        "    print('out', argv, end='')\n"
        "    sys.stderr.write('err')\n"
        "    return int(argv[0])\n"
        "run_main('prog', 'usage', body, None)\n"
        "print('not reached')\n"
    )
    env = {**os.environ, **BUFFERED}

    def run(rc, **kw):
        cmd = [sys.executable, "-c", code, str(rc)]
        return subprocess.run(cmd, text=True, timeout=60, env=env, **kw)

    r = run(3, capture_output=True)
    assert r.returncode == 3
    assert r.stdout == "out ['3']" and r.stderr == "err"
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            assert run(0, stdout=full, stderr=subprocess.DEVNULL).returncode == 120
            assert run(3, stdout=full, stderr=subprocess.DEVNULL).returncode == 3


@pytest.mark.parametrize("code", [0, 3])
def test_console_exit_under_mpiexec_keeps_every_rank(code):
    """Under ``mpiexec -n 4`` every rank's output arrives and the job exits with the ranks' code:
    ending by ``os._exit`` after MPI_Finalize let MPICH's process manager kill a rank (exit 9)
    in about one run in three. Ten runs."""
    for _ in range(10):
        r = run_mpi("run_console_exit.py", [code], 4, env=BUFFERED, mpi4py_runner=False)
        assert r.returncode == code, r.stdout + r.stderr
        assert sorted(r.stdout.split(";")[:-1]) == [f"rank {k} of 4" for k in range(4)]


@pytest.mark.parametrize(
    "argv, expected",
    [
        ([], dict(gamma="auto", max_iter=None, C=1.0, degree=3)),  # svm-train's defaults
        (["-g", "0"], dict(gamma="auto")),  # svm-train: 0 is the default, 1/num_features
        (["-t", "0", "-g", "-1", "-d", "-2"], dict(gamma="auto", degree=3)),  # unused: unchecked
        (["-t", "1", "-g", "0.5", "-d", "2"], dict(gamma=0.5, degree=2)),
        (["-s", "1", "-c", "-1"], dict(C=1.0)),  # nu-SVC has no C
        (["-s", "2", "-c", "0"], dict(C=1.0)),  # nor has one-class
        (["-w1", "2", "-w1", "3", "-w2", "0.5"], dict(class_weight={1.0: 6.0, 2.0: 0.5})),
        (["--max-iter", "-1"], dict(max_iter=-1)),  # none
    ],
)
def test_parameters_read_as_svm_train_reads_them(argv, expected):
    """LIBSVM's svm-train reads -g 0 as its default, checks gamma, degree and C only where
    the kernel or the type uses them, multiplies a class's repeated weights, and stops a
    solve at max(10^7, 100 l) iterations (None here; -1: no limit)."""
    from psvm.cli.train import svc_params

    params = svc_params(parse_args([*argv, "train.txt"]))
    assert {k: params[k] for k in expected} == expected


def test_a_file_that_cannot_be_opened_is_named(tmp_path):
    """As svm-train's "can't open input file": the path and the reason, one line, no errno."""
    data = tmp_path / "d.txt"
    data.write_text(GOOD)
    cases = [
        (TRAIN, [tmp_path / "nosuch.txt"], 2, "nosuch.txt"),
        (PREDICT, [data, tmp_path / "nosuch.model", tmp_path / "p"], None, "nosuch.model"),
    ]
    for module, argv, n, name in cases:
        r = run_cli(module, argv, n, timeout=60)
        line = f"error: cannot open {str(tmp_path / name)!r}: No such file or directory"
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and line in r.stderr, r.stderr


def _gamma(model_text: str) -> float:
    (line,) = [ln for ln in model_text.splitlines() if ln.startswith("gamma ")]
    return float(line.split()[1])


def test_feature_index_0_is_read_as_svm_train_reads_it(tmp_path, libsvm_tools):
    """scikit-learn's dump_svmlight_file writes 0-based files, and svm-train reads index 0 as
    a feature. psvm-train does too: svm-train's gamma (1 / the largest index), the same model
    at every P (index 0 in one rank's lines only), svm-predict's predictions for 0- and
    1-based models and test files in every combination; LIBLINEAR's path still refuses it."""
    from sklearn.datasets import dump_svmlight_file, load_iris

    X, y = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(150)
    train, test = order[:100], order[100:]
    files = {}
    for name, rows, zero in [
        ("train0", train, True),
        ("test0", test, True),
        ("test1", test, False),
    ]:
        files[name] = tmp_path / f"{name}.txt"
        dump_svmlight_file(X[rows], y[rows], str(files[name]), zero_based=zero)
    # 1-based but for the last line, which holds index 0 (another rank's lines at P = 3)
    dump_svmlight_file(X[train], y[train], str(tmp_path / "late.txt"), zero_based=False)
    lines = (tmp_path / "late.txt").read_text().splitlines()
    label, rest = lines[-1].split(" ", 1)
    files["late0"] = tmp_path / "late0.txt"
    files["late0"].write_text("\n".join([*lines[:-1], f"{label} 0:0.5 {rest}"]) + "\n")
    models = {}
    for data in ("train0", "late0"):
        run = subprocess.run(
            [libsvm_tools["svm-train"], "-q", files[data], tmp_path / f"lib.{data}"]
        )
        assert run.returncode == 0
        models[f"lib.{data}"] = tmp_path / f"lib.{data}"
        for n in (1, 3):
            out = tmp_path / f"psvm{n}.{data}"
            r = run_cli(TRAIN, ["-q", files[data], out], n)
            assert r.returncode == 0, r.stderr
        psvm = (tmp_path / f"psvm1.{data}").read_text()
        assert psvm == (tmp_path / f"psvm3.{data}").read_text() and " 0:" in psvm
        largest = 4 if data == "late0" else 3
        assert _gamma(psvm) == _gamma(models[f"lib.{data}"].read_text()) == 1 / largest
        models[f"psvm.{data}"] = tmp_path / f"psvm1.{data}"
    r = run_cli(TRAIN, ["-q", files["test1"], tmp_path / "psvm.one"], None)
    assert r.returncode == 0, r.stderr
    models["psvm.one"] = tmp_path / "psvm.one"  # a 1-based model
    for model in models.values():
        for test in ("test0", "test1"):
            want, got = tmp_path / "want", tmp_path / "got"
            run = [libsvm_tools["svm-predict"], files[test], model, want]
            assert subprocess.run(run, capture_output=True).returncode == 0
            r = run_cli(PREDICT, [files[test], model, got], 2)
            assert r.returncode == 0, r.stderr
            assert got.read_text() == want.read_text(), (model.name, test)
    # --strict-features refuses a 0-based test file for a 1-based model (every feature shifted)
    strict = ["--strict-features", files["test0"], models["psvm.one"], tmp_path / "o"]
    r = run_cli(PREDICT, strict, 2)
    assert r.returncode != 0 and "holds feature index 0, which the model has not" in r.stderr
    r = run_cli(TRAIN, ["--solver", "sgd", files["train0"], tmp_path / "sgd"], None)
    assert r.returncode != 0 and "feature index 0 is not >= 1" in r.stderr


class _FlushTrackingStdout(io.StringIO):
    """stdout that records what a print left unflushed when the next print starts."""

    def __init__(self):
        super().__init__()
        self.pending, self.unflushed = "", []

    def write(self, s: str) -> int:
        if self.pending.endswith("\n"):  # a print's line sat in the buffer when more came
            self.unflushed.append(self.pending)
            self.pending = ""
        self.pending += s
        return super().write(s)

    def flush(self) -> None:
        self.pending = ""


@pytest.mark.parametrize("flags", [[], ["--solver", "sgd", "--epochs", "3"]])
def test_training_lines_are_flushed_as_they_come(tmp_path, monkeypatch, flags):
    # under mpiexec a rank's stdout is a pipe, which Python buffers until the exit (no
    # PYTHONUNBUFFERED): progress lines must not wait for it (svm-train flushes each one)
    from psvm.cli._common import _protocol
    from psvm.cli.train import USAGE, _body

    data = tmp_path / "good.txt"
    data.write_text(GOOD * 3)
    out = _FlushTrackingStdout()
    monkeypatch.setattr(sys, "stdout", out)
    code = _protocol("psvm-train", USAGE, _body, [*flags, str(data), str(tmp_path / "m")])
    assert code == 0
    assert "Wrote" in out.getvalue() and out.getvalue().count("\n") >= 2
    assert out.unflushed == [] and out.pending == ""


@pytest.mark.parametrize("make", ["SVC", "SGDSVC"])
def test_verbose_estimators_flush_each_line(monkeypatch, make):
    import psvm

    out = _FlushTrackingStdout()
    monkeypatch.setattr(sys, "stdout", out)
    X, y = np.array([[0.0, 1], [1, 0], [0, 2], [2, 0]]), np.array([0, 1, 0, 1])
    getattr(psvm, make)(verbose=True).fit(X, y)
    assert out.getvalue().count("\n") >= 1
    assert out.unflushed == [] and out.pending == ""


@pytest.mark.parametrize("n", [None, 2, 3])
def test_a_pipe_is_read_as_its_file(tmp_path, n):
    """``psvm-train <(xz -dc f.xz)``, ``cat f | psvm-predict /dev/stdin``: a pipe has no size
    and cannot seek, so rank 0 reads it whole and deals its lines out. The model and the
    predictions are those of the file, byte for byte; before, psvm-predict predicted nothing.
    Under mpiexec the pipe is a named one, as bash's ``<(...)`` makes: MPICH's mpiexec stops
    the job when rank 0 has not read its stdin before the pipe's buffer fills."""
    data = Path(__file__).parents[1] / "data" / "breast_cancer.train"
    test = data.with_name("breast_cancer.test")
    launch = [] if n is None else [mpiexec(), "-n", str(n)]
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    writers = []

    def fed(path: Path) -> Path:
        fifo = tmp_path / f"fifo{len(writers)}"
        os.mkfifo(fifo)
        writers.append(subprocess.Popen(["sh", "-c", 'exec cat "$0" > "$1"', path, fifo]))
        return fifo

    def run(module, args, stdin=None, fds=()):
        cmd = [*launch, sys.executable, "-m", module, *map(str, args)]
        r = subprocess.run(
            cmd, input=stdin, capture_output=True, timeout=120, env=env, pass_fds=fds
        )
        assert r.returncode == 0, r.stderr.decode()
        return r.stdout.decode()

    run(TRAIN, ["-q", data, tmp_path / "file.model"])
    said = run(PREDICT, [test, tmp_path / "file.model", tmp_path / "file.out"])
    assert said.startswith("Accuracy = 9"), said
    runs = [(fed(data), None, fed(test), None)]
    if n is None:
        runs.append(("/dev/stdin", data.read_bytes(), "/dev/stdin", test.read_bytes()))
    for train, train_in, predict, predict_in in runs:
        run(TRAIN, ["-q", train, tmp_path / "pipe.model"], train_in)
        assert (tmp_path / "pipe.model").read_bytes() == (tmp_path / "file.model").read_bytes()
        out = tmp_path / "pipe.out"
        assert run(PREDICT, [predict, tmp_path / "file.model", out], predict_in) == said
        assert out.read_bytes() == (tmp_path / "file.out").read_bytes()
    assert [w.wait(timeout=60) for w in writers] == [0] * len(writers)
    with open(data, "rb") as f:  # a file given as rank 0's descriptor: another in each rank
        fd = f.fileno()
        run(TRAIN, ["-q", f"/dev/fd/{fd}", tmp_path / "fd.model"], fds=(fd,))
    assert (tmp_path / "fd.model").read_bytes() == (tmp_path / "file.model").read_bytes()


def test_output_to_dev_stdout_follows_what_stdout_holds(tmp_path):
    """``psvm-predict t m /dev/stdout >> log``: the predictions go through the descriptor,
    after what it holds. Opened by name, /dev/stdout is the log file itself, which a
    replacement deleted (the log kept only the predictions) and LIBSVM truncates."""
    data = tmp_path / "d.txt"
    data.write_text(GOOD)
    assert run_cli(TRAIN, ["-q", data, tmp_path / "m"], None).returncode == 0
    log = tmp_path / "log.txt"
    log.write_text("old\n")
    for target, opened in (("/dev/stdout", "a"), ("/dev/fd/1", "w")):
        with open(log, opened) as out:
            out.write("before\n")
            out.flush()
            cmd = [sys.executable, "-m", PREDICT, data, tmp_path / "m", target]
            r = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, timeout=120, check=False)
        assert r.returncode == 0, r.stderr
        head = "old\nbefore\n" if opened == "a" else "before\n"
        assert log.read_text() == head + "1\n-1\n1\n-1\nAccuracy = 100% (4/4) (classification)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.txt", "log.txt", "m"]


@pytest.mark.parametrize("n", [None, 2, 3])
def test_an_output_that_names_an_input_is_refused(tmp_path, n):
    """``psvm-train f f``, ``psvm-predict t m t``: the output would replace the data (LIBSVM
    writes over it). Refused before any work, also through a hard link; the input unchanged."""
    data = tmp_path / "d.txt"
    data.write_text(GOOD)
    assert run_cli(TRAIN, ["-q", data, tmp_path / "m"], None).returncode == 0
    os.link(data, tmp_path / "link.txt")
    val = tmp_path / "v.txt"  # (SGD's --validation file: an input too)
    val.write_text(GOOD)
    cases = [
        (TRAIN, ["-q", data, data], "the model file", "the training file"),
        (
            TRAIN,
            ["-q", "--solver", "sgd", data, tmp_path / "link.txt"],
            "the model file",
            "the training file",
        ),
        (
            TRAIN,
            ["-q", "--solver", "sgd", "--validation", val, data, val],
            "the model file",
            "the --validation file",
        ),
        (PREDICT, [data, tmp_path / "m", data], "the output file", "the test file"),
        (PREDICT, [data, tmp_path / "m", tmp_path / "m"], "the output file", "the model file"),
    ]
    model = (tmp_path / "m").read_bytes()
    stats = ["-q", "--solver", "sgd", "--stats", val, "--validation", val, data, tmp_path / "x"]
    cases.append((TRAIN, stats, "the --stats file", "the --validation file", val))
    for module, args, output, inp, *path in cases:  # (path: the output's, if not the last)
        r = run_cli(module, args, n, timeout=120)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        target = path[0] if path else args[-1]
        assert f"cannot write {output} '{target}': it is {inp} too" in r.stderr, r.stderr
    assert data.read_text() == GOOD == val.read_text() and (tmp_path / "m").read_bytes() == model


@pytest.mark.parametrize("n", [None, 2, 3])  # 3: more ranks than the wide file's rows
def test_a_feature_past_a_set_width_says_whose_width(tmp_path, n):
    """The reader knows only the number: the message says whose it is."""
    data, wide = tmp_path / "d.txt", tmp_path / "wide.txt"
    data.write_text(GOOD)
    wide.write_text("1 1:1 17:2\n-1 2:1\n")
    assert run_cli(TRAIN, ["-q", data, tmp_path / "m"], None).returncode == 0
    cases = [
        (PREDICT, ["--strict-features", wide, tmp_path / "m", tmp_path / "o"], "the model's"),
        (TRAIN, ["--n-features", "5", wide, tmp_path / "x"], "--n-features"),
        (TRAIN, ["--solver", "sgd", "--n-features", "5", wide, tmp_path / "x"], "--n-features"),
    ]
    for module, args, whose in cases:
        r = run_cli(module, args, n, timeout=120)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert f"{wide}:1: feature index 17 exceeds" in r.stderr and f"({whose}" in r.stderr


def test_a_reader_that_left_changes_nothing(tmp_path):
    """``psvm-train f m | head -1``: the lines printed after the reader left go nowhere and
    the run ends as it would have (the model written, status 0); Python raised
    BrokenPipeError at the next line flushed, reported as a bug, and no model was left.
    (Under mpiexec, MPICH's mpiexec itself dies of SIGPIPE and ends the job: docs/cli.md.)"""
    data = Path(__file__).parents[1] / "data" / "breast_cancer.train"
    runs = {
        "model": [TRAIN, data, tmp_path / "m"],
        "folds": [TRAIN, "-v", "3", data],
        "sgd": [TRAIN, "--solver", "sgd", data, tmp_path / "s"],
        "predictions": [PREDICT, data, tmp_path / "m", "/dev/stdout"],
    }
    for what, (module, *args) in runs.items():
        cmd = [sys.executable, "-m", module, *map(str, args)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.close()  # gone before the first line
        err = p.stderr.read().decode()
        assert p.wait(timeout=120) == 0 and err == "", (what, err)
    for model in ("m", "s"):
        written = (tmp_path / model).read_bytes()
        cmd = [sys.executable, "-m", TRAIN, *map(str, runs[{"m": "model", "s": "sgd"}[model]][1:])]
        subprocess.run(cmd, capture_output=True, check=True, timeout=120)
        assert (tmp_path / model).read_bytes() == written


@pytest.mark.parametrize("n", [None, 2])
def test_a_descriptor_psvm_did_not_inherit_is_refused(tmp_path, n):
    """``/dev/fd/N`` names one of the process's descriptors; one the command was not started
    with is psvm's own, here MPICH's PMI socket: refused as an output and as an input, on
    every rank, before any work (written to, it would have broken the job)."""
    data = tmp_path / "d.txt"
    data.write_text(GOOD)
    assert run_cli(TRAIN, ["-q", data, tmp_path / "m"], None).returncode == 0
    fd = "$PMI_FD" if n else "9"  # (one process: 9 is not open, so not the input's case)
    argvs = {"output": f"{PREDICT} {data} {tmp_path / 'm'} /dev/fd/{fd}"}
    if n:
        argvs["input"] = f"{TRAIN} /dev/fd/{fd} {tmp_path / 'x'}"
    for what, argv in argvs.items():
        launch = f"exec {sys.executable} -m {argv}"
        cmd = ["sh", "-c", launch] if n is None else [mpiexec(), "-n", str(n), "sh", "-c", launch]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        assert r.returncode == 1, (what, r.stderr)
        assert "was not open when the command started" in r.stderr, (what, r.stderr)
        assert "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.txt", "m"]


def test_liblinear_logistic_models_give_probabilities(tmp_path):
    """``psvm-predict -b 1`` on a LIBLINEAR logistic regression model: LIBLINEAR's
    predict_probability (a sigmoid per model; with more than two classes divided by their
    sum), which scikit-learn's liblinear solver and its one-vs-rest share. LIBLINEAR's other
    models are refused in its words."""
    from sklearn.datasets import dump_svmlight_file, load_iris
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    from psvm.io.linear_model_file import write_linear_model
    from psvm.sgd.model import LinearModel

    X, y = load_iris(return_X_y=True)
    model, test, out = tmp_path / "lr.model", tmp_path / "t", tmp_path / "out"
    for classes in ([1, 2], [0, 1, 2]):
        keep = np.isin(y, classes)
        lr = OneVsRestClassifier(LogisticRegression(solver="liblinear")).fit(X[keep], y[keep])
        parts = lr.estimators_
        coef = np.vstack([e.coef_ for e in parts])
        b = np.concatenate([e.intercept_ for e in parts])
        # two classes: one model, which scores LIBLINEAR's first label (scikit-learn's second)
        labels = lr.classes_ if len(classes) > 2 else lr.classes_[::-1]
        write_linear_model(model, LinearModel(coef, b, labels, solver_type="L2R_LR"))
        dump_svmlight_file(X[keep], y[keep], str(test), zero_based=False)
        r = run_cli(PREDICT, ["-b", "1", test, model, out], None)
        assert r.returncode == 0 and r.stdout.startswith("Accuracy = "), r.stderr
        head, *rows = out.read_text().splitlines()
        assert head == "labels " + " ".join(map(str, labels))
        got = np.array([row.split() for row in rows], dtype=float)
        want = lr.predict_proba(X[keep])[:, np.searchsorted(lr.classes_, labels)]
        np.testing.assert_allclose(got[:, 1:], want, rtol=1e-5, atol=1e-6)  # (%g: 6 digits)
        assert got[:, 0].tolist() == lr.predict(X[keep]).tolist()
    write_linear_model(model, LinearModel(coef, b, labels, solver_type="L2R_L2LOSS_SVC_DUAL"))
    out.unlink()
    r = run_cli(PREDICT, ["-b", "1", test, model, out], None)
    assert r.returncode == 1 and not out.exists()
    assert "probability output is only supported for logistic regression" in r.stderr


@pytest.mark.parametrize("n", [None, 3])
def test_largest_feature_index_round_trips_through_a_model(tmp_path, n):
    """Index 2**31 - 1 (svm-train's int) trains and its model predicts; 2**31 is refused at its
    line. 2**31 used to train and write a model that psvm-predict refused."""
    data = tmp_path / "d.txt"
    data.write_text("+1 1:0.5 2147483647:1\n-1 1:-0.5\n+1 1:0.7\n-1 1:-0.2 3:1\n")
    model, out = tmp_path / "m", tmp_path / "out"
    r = run_cli(TRAIN, ["-q", "-g", "0.5", data, model], n, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "2147483647:1" in model.read_text()
    r = run_cli(PREDICT, [data, model, out], n, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(out.read_text().splitlines()) == 4
    data.write_text("+1 1:0.5\n-1 1:-0.5 2147483648:1\n")
    r = run_cli(TRAIN, ["-q", data, model], n, timeout=120)
    assert r.returncode == 1
    assert f"{data}:2:" in r.stderr and "too large (max 2147483647)" in r.stderr, r.stderr


@pytest.mark.parametrize("n", [None, 3])
def test_sgd_refuses_weights_beyond_memory_by_name(tmp_path, n):
    """One feature index of 2**31 - 1 and 64 classes (6 TiB of weights a rank, beyond any CI
    box): an error that names the file, on every rank alike, not numpy's MemoryError and a
    traceback; --n-features is named when it sets the width, and refused past the limit."""
    data = tmp_path / "d.txt"
    data.write_text("".join(f"{c} 1:0.5\n" for c in range(63)) + "63 1:1 2147483647:1\n")
    r = run_cli(TRAIN, ["-q", "--solver", "sgd", data, tmp_path / "m"], n, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"{str(data)!r} has feature indices up to 2147483647" in r.stderr, r.stderr
    ranks = "one rank" if n is None else f"{n} ranks"
    need = 6 * 8 * 64 * (2**31 - 1) * (n or 1) / 2**30
    assert f"64 x 2147483647 weights needs at least {need:.1f} GiB for {ranks}" in r.stderr
    assert not (tmp_path / "m").exists()
    flags = ["-q", "--solver", "sgd", "--n-features"]
    r = run_cli(TRAIN, [*flags, "2147483647", data, tmp_path / "m"], n, timeout=120)
    assert r.returncode == 1 and "error: --n-features 2147483647: a linear model" in r.stderr
    r = run_cli(TRAIN, [*flags, "2147483648", data, tmp_path / "m"], n, timeout=120)
    assert r.returncode == 1, r.stderr
    assert "n_features must be an integer in [1, 2147483647], got 2147483648" in r.stderr


@pytest.mark.parametrize("n", [2, 3])
def test_thread_warnings_print_once_under_mpiexec(tmp_path, n):
    """-o beyond numba's pool (the suite's launchers make it one thread), or n ranks of -o 1
    on fewer cores: rank 0 warns once, even under -q; the run goes on."""
    from psvm.threads import usable_cores

    data = tmp_path / "d.txt"
    data.write_text(GOOD * 3)
    over = n > usable_cores()  # (the suite's ranks share the machine's cores)
    for o in ("2", "1"):
        r = run_cli(TRAIN, ["-q", "-o", o, data, tmp_path / "m"], n, timeout=120)
        assert r.returncode == 0, r.stderr
        notes = ["numba's pool has one thread (NUMBA_NUM_THREADS); using 1"] if o == "2" else []
        if over:
            notes.append(f"{n} ranks x 1 thread on {usable_cores()} core")
        lines = r.stderr.splitlines()
        assert len(lines) == bool(notes), r.stderr
        if notes:
            assert lines[0].startswith(f"psvm-train: warning: -o {o}: " + "; ".join(notes))
