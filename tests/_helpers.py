"""Shared test helpers: launching MPI scenario scripts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

MPI_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi")


def mpiexec() -> str | None:
    """The mpiexec next to this Python (the mpich wheel), else the one on PATH."""
    here = os.path.dirname(sys.executable)
    return shutil.which("mpiexec", path=here) or shutil.which("mpiexec")


def run_mpi(
    script: str,
    args: list[str],
    n: int,
    timeout: float = 120,
    env: dict | None = None,
    mpi4py_runner: bool = True,
) -> subprocess.CompletedProcess:
    """Run ``mpiexec -n n python -m mpi4py script *args``; text output captured.

    ``script`` is a path, or a file name in ``tests/mpi``. A hang fails the
    calling test (``subprocess.TimeoutExpired`` kills the launcher).
    ``mpi4py_runner=False`` runs plain ``python script``, as most users do:
    no abort by mpi4py on an unhandled exception.
    """
    exe = mpiexec()
    if exe is None:
        pytest.fail("mpiexec not found: the mpich wheel provides it")
    if not os.path.isabs(script):
        script = os.path.join(MPI_DIR, script)
    full_env = dict(os.environ)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # this checkout's psvm first, whichever one is installed
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, full_env.get("PYTHONPATH")]))
    full_env.update(env or {})
    full_env.setdefault("OMP_NUM_THREADS", "1")
    full_env.setdefault("NUMBA_NUM_THREADS", "1")
    runner = ["-m", "mpi4py"] if mpi4py_runner else []
    cmd = [exe, "-n", str(n), sys.executable, *runner, script, *map(str, args)]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=full_env, check=False
    )
