"""The scripts of docs/user_guide.md run as documented, in one process and under mpiexec.

Each ```python block that starts with ``# file: NAME`` is saved as NAME; each
command line in a ```sh block is run in the same directory (``python`` is this
interpreter, ``mpiexec`` the one next to it). a9a stands for a 2000-row head.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests._helpers import mpiexec
from tests._svm import write_head

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "user_guide.md"
TEXT = GUIDE.read_text()
SCRIPTS = dict(re.findall(r"```python\n# file: (\S+)\n(.*?)```", TEXT, flags=re.S))
COMMANDS = [
    line.strip()
    for block in re.findall(r"```sh\n(.*?)```", TEXT, flags=re.S)
    for line in block.splitlines()
    if line.strip()
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, shared_data):
    d = tmp_path_factory.mktemp("guide")
    for name, code in SCRIPTS.items():
        (d / name).write_text(code)
    write_head(shared_data / "a9a.xz", d / "a9a", 2000)
    write_head(shared_data / "a9a.t.xz", d / "a9a.t", 1000)
    return d


def test_every_script_has_a_command():
    used = {w for c in COMMANDS for w in shlex.split(c) if w.endswith(".py")}
    assert used == set(SCRIPTS) and len(SCRIPTS) >= 5


@pytest.mark.parametrize("command", COMMANDS)
def test_command_runs(workdir, command):
    argv = shlex.split(command)
    if argv[0] == "mpiexec":
        argv = [mpiexec(), *argv[1:]]
    argv = [sys.executable if a == "python" else a for a in argv]
    env = dict(
        os.environ,
        NUMBA_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        PSVM_CACHE_DIR=str(workdir / "cache"),
    )
    proc = subprocess.run(
        argv, cwd=workdir, capture_output=True, text=True, timeout=180, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip(), "every example prints its result"
    if "mpiexec" in command:  # rank 0 prints; nobody else does
        assert len(proc.stdout.strip().splitlines()) == 1


def test_shrinking_row_says_what_the_code_does():
    """The guide's `shrinking` row names the heuristic that shrinking=True selects."""
    from psvm.faces.params import resolve_heuristic

    row = next(line for line in TEXT.splitlines() if line.startswith("| `shrinking` |"))
    said = re.search(r"`True` means [^`|]*`'([\w-]+)'`", row)
    assert said is not None, row
    assert said.group(1) == resolve_heuristic(True, None)
    assert "`False` means `'none'`" in row and resolve_heuristic(False, None) == "none"
