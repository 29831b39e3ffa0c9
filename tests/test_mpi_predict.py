"""psvm-predict under mpiexec: each rank predicts its byte range, rank 0 writes in order.

One launch per P (tests/mpi/run_predict_batch.py) runs every case. The output
files of P = 1, 2 and 3 must be byte for byte those of LIBSVM's svm-predict
(hence of one another): a9a (binary) and usps (ten classes) with models that
svm-train wrote, a file of fewer rows than ranks, an empty file (an empty
output, as svm-predict; with -b 1 its header line alone), and bad lines in the
first, a middle and the last rank's range (every rank returns 1, rank 0 alone
names the file and line, no output file, no hang).
"""

import json
import subprocess
from pathlib import Path

import pytest

from tests._helpers import run_mpi
from tests._svm import write_head

TIMEOUT = 240
BAD_LINES = (2, 1500, 3000)  # rank 0's, a middle rank's, the last rank's


def _svm(tools, name, *args) -> str:
    r = subprocess.run([tools[name], *args], capture_output=True, text=True, check=True)
    return r.stdout


@pytest.fixture(scope="module")
def cases(shared_data, tmp_path_factory, libsvm_tools):
    """(name, test file, model file, svm-predict's output bytes and stdout) per good case,
    and the bad files with their bad line."""
    d = tmp_path_factory.mktemp("predict")
    write_head(shared_data / "a9a.xz", d / "a9a", 3000)
    write_head(shared_data / "a9a.t.xz", d / "a9a.t", 3000)
    usps = (shared_data / "usps.t.xz").as_posix()
    write_head(usps, d / "usps_all")
    lines = (d / "usps_all").read_bytes().splitlines(keepends=True)
    (d / "usps").write_bytes(b"".join(lines[:1000]))
    (d / "usps.t").write_bytes(b"".join(lines[1000:]))
    _svm(libsvm_tools, "svm-train", "-q", d / "a9a", d / "a9a.model")
    _svm(libsvm_tools, "svm-train", "-q", "-c", "10", "-g", "0.005", d / "usps", d / "usps.model")
    (d / "two.t").write_text("1 1:0.5 40:1\n-1 3:1 124:2\n")  # fewer rows than ranks
    (d / "empty.t").write_text("")
    bundled = Path(__file__).parents[1] / "data" / "breast_cancer.train"
    _svm(libsvm_tools, "svm-train", "-q", "-b", "1", bundled, d / "proba.model")
    _svm(libsvm_tools, "svm-predict", "-b", "1", d / "empty.t", d / "proba.model", d / "empty.b")
    good = []
    for name, model in (("a9a.t", "a9a"), ("usps.t", "usps"), ("two.t", "a9a")):
        test, model = d / name, d / f"{model}.model"
        stdout = _svm(libsvm_tools, "svm-predict", test, model, d / f"{name}.libsvm")
        good.append((name, test, model, (d / f"{name}.libsvm").read_bytes(), stdout))
    a9a_t = (d / "a9a.t").read_bytes().splitlines(keepends=True)
    bad = []
    for line in BAD_LINES:
        rows = list(a9a_t)
        rows[line - 1] = b"+1 3:1 5:x 9:1\n"
        (d / f"bad{line}.t").write_bytes(b"".join(rows))
        bad.append((d / f"bad{line}.t", line))
    return d, good, bad


@pytest.mark.parametrize("n", [1, 2, 3])
def test_outputs_are_libsvm_s_for_any_number_of_ranks(cases, tmp_path, n):
    d, good, bad = cases
    argv = [[str(t), str(m), str(tmp_path / name)] for name, t, m, _, _ in good]
    argv.append([str(d / "empty.t"), str(d / "a9a.model"), str(tmp_path / "empty.out")])
    argv.append(["-b", "1", str(d / "empty.t"), str(d / "proba.model"), str(tmp_path / "empty.b")])
    argv += [[str(t), str(d / "a9a.model"), str(tmp_path / t.name)] for t, _ in bad]
    (tmp_path / "cases.json").write_text(json.dumps(argv))
    out = tmp_path / "results.json"
    r = run_mpi(
        "run_predict_batch.py",
        [tmp_path / "cases.json", out],
        n,
        timeout=TIMEOUT,
        env={"PSVM_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert r.returncode == 0 and out.exists(), r.stderr[-3000:]
    results = json.loads(out.read_text())
    for (name, _, _, theirs, stdout), res in zip(good, results, strict=False):
        assert res["codes"] == [0] * n, res
        assert (tmp_path / name).read_bytes() == theirs, name
        assert res["stdout"] == [stdout] + [""] * (n - 1), res  # LIBSVM's accuracy line
        assert res["stderr"] == [""] * n, res
    empty = results[len(good)]
    assert empty["codes"] == [0] * n and (tmp_path / "empty.out").read_bytes() == b""
    assert empty["stdout"][0] == "Accuracy = nan% (0/0) (classification)\n", empty
    empty_b = results[len(good) + 1]  # svm-predict -b 1: the labels line alone
    assert empty_b["codes"] == [0] * n, empty_b
    assert (tmp_path / "empty.b").read_bytes() == (d / "empty.b").read_bytes() == b"labels 1 -1\n"
    for (test, line), res in zip(bad, results[len(good) + 2 :], strict=True):
        assert res["codes"] == [1] * n, res  # every rank, whichever holds the line
        assert res["stderr"][0].startswith(f"psvm-predict: error: {test}:{line}: "), res
        assert res["stderr"][0].count("\n") == 1 and res["stderr"][1:] == [""] * (n - 1), res
        assert not (tmp_path / test.name).exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
