"""LIBSVM's own tools run unmodified on psvm: grid.py (Debian's svm-grid) with psvm-train under
mpiexec, and easy.py (svm-easy) with psvm-train and psvm-predict (issue 18).

The tools come from Debian's libsvm-tools (tests/conftest.py's ``libsvm_tools``: from PATH,
else fetched into a temporary folder); never copied into the repository.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests._helpers import mpiexec
from tests._svm import write_head

REPO = Path(__file__).resolve().parents[1]
SMALL_GRID = ["-log2c", "-1,1,1", "-log2g", "-3,-1,1"]  # 9 points around heart_scale's best


def _script(path: Path, *cmd: str) -> str:
    """A shell script running ``cmd "$@"``: what a user points the tools at."""
    path.write_text("#!/bin/sh\nexec " + " ".join(map(shlex.quote, cmd)) + ' "$@"\n')
    path.chmod(0o755)
    return str(path)


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def test_grid_py_finds_libsvm_s_best_with_psvm_train_under_mpiexec(
    tmp_path, shared_data, libsvm_tools
):
    from libsvm import svmutil

    data = write_head(shared_data / "heart_scale.xz", tmp_path / "heart_scale")
    train = _script(
        tmp_path / "psvm-train-mpi", mpiexec(), "-n", "2", sys.executable, "-m", "psvm.cli.train"
    )
    r = subprocess.run(
        [
            sys.executable,
            libsvm_tools["svm-grid"],
            *SMALL_GRID,
            "-svmtrain",
            train,
            "-gnuplot",
            "null",
            "-out",
            "null",
            data,
        ],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    c, g, rate = map(float, r.stdout.splitlines()[-1].split())
    assert len(re.findall(r"^\[local\]", r.stdout, re.M)) == 9  # every point got a rate
    # LIBSVM's rates at each point, over three fold draws (its rand() runs on between calls)
    y, x = svmutil.svm_read_problem(data)
    points = [(2.0**a, 2.0**b) for a in (-1, 0, 1) for b in (-3, -2, -1)]
    rates = {
        p: [svmutil.svm_train(y, x, f"-q -v 5 -c {p[0]} -g {p[1]}") for _ in range(3)]
        for p in points
    }
    mean = {p: np.mean(v) for p, v in rates.items()}
    spread = max(np.ptp(v) for v in rates.values())
    best = max(mean, key=mean.get)
    assert (c, g) == best or mean[(c, g)] >= mean[best] - spread, (c, g, best, rates)
    assert 0 < spread < 5  # the draws differ, within a few points


def test_easy_py_runs_on_psvm_train_and_psvm_predict(tmp_path, shared_data, libsvm_tools):
    """easy.py runs ../svm-scale, ../svm-train, ../svm-predict and ./grid.py from its folder, and
    asserts /usr/bin/gnuplot; here grid.py is svm-grid on a small grid, to keep the test short."""
    if not os.path.exists("/usr/bin/gnuplot"):
        pytest.skip("easy.py asserts /usr/bin/gnuplot, which is not installed")
    data = write_head(shared_data / "heart_scale.xz", tmp_path / "heart_scale")
    (tmp_path / "svm-scale").symlink_to(libsvm_tools["svm-scale"])
    _script(tmp_path / "svm-train", sys.executable, "-m", "psvm.cli.train")
    _script(tmp_path / "svm-predict", sys.executable, "-m", "psvm.cli.predict")
    run = tmp_path / "run"
    run.mkdir()
    _script(run / "grid.py", sys.executable, libsvm_tools["svm-grid"], *SMALL_GRID)
    r = subprocess.run(
        [sys.executable, libsvm_tools["svm-easy"], data, data],
        cwd=run,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^Best c=\S+, g=\S+ CV rate=\d", r.stdout, re.M), r.stdout
    acc = re.search(r"^Accuracy = (\S+)% \(\d+/270\) \(classification\)", r.stdout, re.M)
    assert acc and float(acc.group(1)) > 80, r.stdout  # psvm-predict on psvm-train's model
    assert (run / "heart_scale.model").exists()
