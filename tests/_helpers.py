"""Shared test helpers: launching MPI scenario scripts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

MPI_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi")
REPO = os.path.dirname(os.path.dirname(MPI_DIR))


def checkout_env(env: dict | None = None, **extra: str) -> dict:
    """``env`` (default: this process's), plus ``extra``, with this checkout first on
    PYTHONPATH: a subprocess imports this psvm, not an installed one."""
    env = {**(os.environ if env is None else env), **extra}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")]))
    return env


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
    no abort by mpi4py on an unhandled exception. This checkout's psvm is imported.
    ``env`` sets variables; a None value unsets one (the thread defaults below too).
    """
    exe = mpiexec()
    if exe is None:
        pytest.fail("mpiexec not found: the mpich wheel provides it")
    if not os.path.isabs(script):
        script = os.path.join(MPI_DIR, script)
    full_env = {"OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", **os.environ}
    for k, v in (env or {}).items():
        if v is None:
            full_env.pop(k, None)
        else:
            full_env[k] = v
    # the script's folder comes first on sys.path, not the checkout: put this checkout's psvm
    # before any installed one
    full_env = checkout_env(full_env)
    runner = ["-m", "mpi4py"] if mpi4py_runner else []
    cmd = [exe, "-n", str(n), sys.executable, *runner, script, *map(str, args)]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=full_env, check=False
    )


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (mpiexec -> hydra proxy -> ranks), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def rank_pids(pid: int, n: int, timeout: float = 60) -> dict[int, int]:
    """rank -> PID of the Python ranks under mpiexec ``pid`` (PMI_RANK in their environment)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ranks = {}
        for c in descendants(pid):
            try:
                with open(f"/proc/{c}/environ", "rb") as f:
                    env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
                with open(f"/proc/{c}/cmdline", "rb") as f:
                    is_python = b"psvm.cli.train" in f.read()
            except OSError:
                continue
            if is_python and b"PMI_RANK" in env:
                ranks[int(env[b"PMI_RANK"])] = c
        if len(ranks) == n:
            return ranks
        time.sleep(0.1)
    pytest.fail("the ranks did not start")


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def until_exists(path, proc, seconds: float = 90.0) -> bool:
    """Wait for ``path`` while ``proc`` runs."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
