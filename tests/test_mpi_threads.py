"""Threads under mpiexec: the ranks of a node share its cores instead of each taking them all.

One launch of tests/mpi/run_threads.py with two ranks on this node and numba's
pool as large as the cores (the suite's launchers otherwise pin it to one
thread): the library, both estimators and psvm-train must each give every
rank ``cores // 2`` threads (1 on a 2-core box, where numba alone would run 2
per rank), and ``-o`` must override it; SVC.predict and psvm-predict too.
"""

import json
import os

from tests._helpers import run_mpi

TIMEOUT = 180


def test_two_ranks_share_the_node(tmp_path):
    cores = len(os.sched_getaffinity(0))
    proc = run_mpi(
        "run_threads.py", [tmp_path], 2, timeout=TIMEOUT, env={"NUMBA_NUM_THREADS": str(cores)}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    share = max(1, cores // 2)
    assert out["top"] == [cores, cores]  # numba's pool is every core, as without the suite
    assert out["local_size"] == [2, 2]
    assert out["local_size again"] == [2, None]  # (rank 0 alone: no second collective)
    assert out["default"] == [[share, share]] * 2  # returned and applied
    for name in ("SVC", "SGDSVC"):
        assert out[name] == [[share, cores]] * 2, name  # during fit; restored after
    assert out["cli"] == [[0, share]] * 2
    assert out["cli sgd"] == [[0, share]] * 2
    assert out["cli -o 1"] == [[0, 1]] * 2
    two = min(2, cores)  # (rank 1's own count)
    assert out["cli -o 2 on rank 1"] == [[0, share], [0, two]]
    assert [code for code, _ in out["cli -o -1 on rank 1"]] == [1, 1]  # one error, no hang
    for name in ("SVC n_threads", "SVC n_jobs", "SGDSVC n_threads"):  # (the same model)
        assert out[name] == [[share, True], [two, True]], name
    assert out["SVC.predict"] == [[share, cores]] * 2  # local, by mpiexec's count; restored
    assert out["cli predict"] == [[0, share]] * 2


def test_console_runs_give_blas_the_rank_share(monkeypatch):
    """psvm-train's console entry under mpiexec -n 2: each rank's OpenBLAS pool has
    cores // 2 threads (numpy's default is every core, whose idle threads spin on the
    other rank's cores while both start)."""
    from psvm.threads import BLAS_THREADS_VARS

    for var in BLAS_THREADS_VARS:
        monkeypatch.delenv(var, raising=False)
    cores = len(os.sched_getaffinity(0))
    env = {"OMP_NUM_THREADS": None}  # (OpenBLAS reads it: the suite's 1 would hide the share)
    proc = run_mpi("run_blas_threads.py", [], 2, timeout=TIMEOUT, env=env, mpi4py_runner=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(counts) == 2 and all(counts), counts  # numpy's OpenBLAS on every rank
    assert all(c == max(1, cores // 2) for rank in counts for c in rank), counts
