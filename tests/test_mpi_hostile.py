"""Hostile input through psvm-train under mpiexec (issue 7).

Mutated training files either train or stop every rank with one message naming
the file and the first bad line, exit status 1, and no model file (nor a
temporary one). Many seeded cases share one launch (``tests/mpi/run_cli_batch.py``)
for P = 1 and 2; a handful run as separate ``mpiexec -n 2 psvm-train`` jobs so
that exit codes and stderr are the real ones.
"""

import random

import pytest

from tests._hostile import first_bad_line, mutated_file
from tests._svm import launch_cli_batch, run_cli

TRAIN = "psvm.cli.train"
# Two classes, rows spread so that both ranks of P = 2 own lines.
BASE = b"".join(
    b"%s %d:%g %d:%g\n" % (b"+1" if k % 2 else b"-1", 1 + k % 3, 0.1 * k, 4 + k % 5, -0.2 * k)
    for k in range(12)
)


def _cases(tmp_path, n_cases=24, seed=7):
    rng = random.Random(seed)
    out = []
    for k in range(n_cases):
        # huge_ok=False: a *valid* index of 10**9 makes the solver allocate
        # n_features-long work vectors (docs/reliability.md, known gaps).
        content = mutated_file(BASE, rng, 1 + k % 2, huge_ok=False)
        case = tmp_path / f"case{k:02d}"
        case.mkdir()
        (case / "data.txt").write_bytes(content)
        out.append((case, content))
    return out


def _check_outcome(case, content, ok: bool, message: str):
    data, model = case / "data.txt", case / "data.model"
    bad = first_bad_line(content)
    if bad is not None:
        assert not ok, (content, message)
        errors = [s for s in message.splitlines() if s.startswith("psvm-train: error:")]
        assert len(errors) == 1, message
        assert errors[0].startswith(f"psvm-train: error: {data}:{bad}: "), (content, message)
    if ok:
        assert model.exists() and bad is None
    else:
        assert "Traceback" not in message and message.count("psvm-train: error:") == 1
        assert bad is not None or f"{data}: " in message  # whole-file error (one class)
    assert sorted(p.name for p in case.iterdir()) == (
        ["data.model", "data.txt"] if ok else ["data.txt"]
    )


@pytest.mark.parametrize("n", [1, 2])
def test_mutated_files_in_one_launch(tmp_path, n):
    cases = _cases(tmp_path)
    runs = [["train", "-q", case / "data.txt", case / "data.model"] for case, _ in cases]
    env = {"PSVM_CACHE_DIR": str(tmp_path / "cache")}
    results = launch_cli_batch(tmp_path, n, runs, timeout=120, env=env)
    n_bad = 0
    for (case, content), res in zip(cases, results, strict=True):
        assert len(set(res["codes"])) == 1, res  # every rank returns the same code
        _check_outcome(case, content, res["codes"][0] == 0, res["stderr"])
        n_bad += first_bad_line(content) is not None
    assert 0 < n_bad < len(cases)  # the seed exercises both outcomes


SEPARATE = {
    # name: (content, first bad line or None for a whole-file error)
    "non-UTF-8 on rank 1's half": (BASE + b"1 1:0.5 2:\xff\xfe\n" + BASE, 13),
    "truncated last line": (BASE + b"-1 1:0.25 3:", 13),
    "CRLF then NaN": (BASE.replace(b"\n", b"\r\n") + b"1 2:NaN\r\n", 13),
    "duplicate index": (BASE[:40] + b"\n1 3:1 3:1\n" + BASE, None),
}
# valid lines whose labels no model file holds (LIBSVM reads labels as C ints): (content, the
# line named, its label's words), found before training, not when writing the model
LABELS = {
    "fractional labels": (b"1 1:1\n2 2:1\n1.5 1:0.9\n2.5 2:0.8\n", 3, "1.5 is not an integer"),
    "labels past 32 bits": (
        b"1 1:1\n3000000000 2:1\n1 1:0.9\n3000000000 2:0.8\n",
        2,
        "3000000000 is not a 32-bit integer",
    ),
    "two lines": (b"1 1:1\n-2147483649 2:1\n", 2, "-2147483649 is not a 32-bit integer"),
}


@pytest.mark.parametrize("name", sorted(SEPARATE))
def test_mutated_file_under_mpiexec(tmp_path, name):
    content, _ = SEPARATE[name]
    case = tmp_path / "case"
    case.mkdir()
    (case / "data.txt").write_bytes(content)
    r = run_cli(TRAIN, ["-q", case / "data.txt", case / "data.model"], 2, timeout=60)
    assert r.returncode == 1, r.stderr
    assert r.stdout == ""
    _check_outcome(case, content, False, r.stderr)


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("solver", ["smo", "sgd"])
@pytest.mark.parametrize("name", sorted(LABELS))
def test_labels_no_model_file_holds(tmp_path, name, solver, n):
    """Such a model file would load in LIBSVM with another label, so psvm-train refuses the
    training file at once, naming the line, on every rank (at P = 3 on two lines, one rank
    holds none)."""
    content, line, words = LABELS[name]
    data = tmp_path / "data.txt"
    data.write_bytes(content)
    r = run_cli(TRAIN, ["-q", "--solver", solver, data, tmp_path / "m.model"], n, timeout=60)
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert r.stderr.count("psvm-train: error:") == 1, r.stderr
    assert f"psvm-train: error: {data}:{line}: label {words}" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.txt"]
