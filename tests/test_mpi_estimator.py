"""psvm.SVC under mpiexec: the same script gives the same model for 1, 2 and 3 ranks.

tests/mpi/run_estimator.py runs every case (replicated and sharded data, dense
multiclass and sparse binary, an empty shard, a bad shard) in one launch and
asserts collectively that every rank holds the same fitted model; here the
ranks' results are compared with the same script run as one plain process.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests._helpers import MPI_DIR, run_mpi

SCRIPT = os.path.join(MPI_DIR, "run_estimator.py")
TIMEOUT = 180
EXACT = ("predict", "support", "n_support", "support_vectors", "n_iter", "shape_fit")
CLOSE = ("dual_coef", "intercept", "decision_ovr", "decision_ovo")


def _result(proc) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def serial(shared_data) -> dict:
    """The script as one process, outside mpiexec."""
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--shared-data", str(shared_data)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
    )
    out = _result(proc)
    assert out["ranks"] == 1
    return out["cases"]


@pytest.mark.parametrize("n", [2, 3])
def test_same_model_as_one_process(serial, shared_data, n):
    out = _result(run_mpi(SCRIPT, ["--shared-data", shared_data], n, timeout=TIMEOUT))
    assert out["ranks"] == n
    cases = out["cases"]
    # one process: replicated and sharded are the same fit
    for key in EXACT + CLOSE:
        np.testing.assert_array_equal(
            serial["digits-sharded"][key], serial["digits-replicated"][key]
        )
    for name, got in cases.items():
        if name == "grid":
            assert got == serial["grid"]
            continue
        if name == "digits-nan-on-last-rank":
            assert got["error"].startswith(f"rank {n - 1}: Input X contains NaN"), got
            continue
        ref = serial[name.replace("empty-rank", "sharded")]
        for key in EXACT:
            np.testing.assert_array_equal(got[key], ref[key], err_msg=f"{name} {key}")
        for key in CLOSE:
            np.testing.assert_allclose(
                got[key], ref[key], rtol=1e-9, atol=1e-12, err_msg=f"{name} {key}"
            )


def test_replicated_input_is_compared_exactly():
    # every rank raises the same error, even when the copies' sums agree within 1e-9
    r = run_mpi("run_replicated.py", [], 3, timeout=120, mpi4py_runner=False)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for face in ("svc", "sgd"):
        assert out[f"{face} same"] == out[f"{face} same, string labels"] == "ok"
        cases = ("sum within 1e-9", "last bit", "swapped labels", "swapped string labels")
        for case in (*cases, "one weight"):
            got = out[f"{face} {case}"]
            assert got.startswith(
                "InputError: distributed='replicated' needs the same X, y and "
                "sample_weight on every rank"
            ), (face, case, got)
            ranks = "[1, 2]" if case == "sum within 1e-9" else "[2]"
            assert f"rank(s) {ranks} differ from rank 0" in got, (face, case, got)
    assert out["other C"] == (
        "InputError: parameters differ between ranks: ['C'] (C: rank 0: 1.0, rank 1: 1.0, "
        "rank 2: 2.0); every rank must fit with the same parameters"
    )
    assert out["bad C"].startswith("InputError: parameters differ between ranks: ['C']")
    # a value only one rank refuses (n_threads may differ) or a copy only it has wrong: the
    # message names that rank (the others' are fine); one all ranks refuse names none
    assert out["bad n_threads"].startswith("ParameterError: rank 2: n_threads must be")
    for face in ("svc", "sgd"):
        assert out[f"{face} NaN on the last rank"].startswith(
            "ValueError: rank 2: Input X contains NaN"
        )
        assert out[f"{face} NaN on every rank"].startswith("ValueError: Input X contains NaN")
    for face in ("", ", sgd"):
        assert out[f"bad distributed{face}"].startswith(
            "InputError: parameters differ between ranks: ['distributed']"
        )
    assert out["C as an int"] == out["other cache_size"] == "ok"
    assert out["other period"].startswith(
        "InputError: parameters differ between ranks: ['alpha', 'sync_every'] (alpha: "
        "rank 0: 0.0001, rank 1: 0.0001, rank 2: 0.001)"
    )
    assert out["balanced partial_fit"].startswith(
        "InputError: parameters differ between ranks: ['class_weight']"
    )
    for face in ("svc", "sgd"):  # X's column names, which every rank must give alike
        assert out[f"{face} names, sharded"] == "ok ['a', 'b', 'c']"
        # a rank without rows may pass an array: it takes the others' names
        assert out[f"{face} names, no rows as an array on the last rank, sharded"] == (
            "ok ['a', 'b', 'c']"
        )
        assert out[f"{face} names reversed on the last rank, sharded"] == (
            "InputError: X's feature names differ between ranks: rank 0 has ['a', 'b', 'c'], "
            "rank 2 has ['c', 'b', 'a']; every rank must give the same columns in the same "
            "order (DataFrames with the same columns, or arrays)"
        )
        assert out[f"{face} strings on the last rank"] == (
            "InputError: y's labels are numbers on rank 0 and strings on rank 2: every rank "
            "must give labels of one type (Mix of label input types)"
        )
        assert out[f"{face} strings on every rank"].startswith("ok [")
        assert out[f"{face} names on the first ranks only, replicated"].startswith(
            "InputError: X's feature names differ between ranks: rank 0 has ['a', 'b', 'c'], "
            "rank 2 has none (no DataFrame)"
        )


def test_joblib_and_fork_workers_fit_as_one_process():
    # GridSearchCV(n_jobs=2) under mpiexec: loky's workers inherit the launcher's environment
    # but cannot join the job (MPICH: PMI_Init returned -1); psvm fits there as one process
    r = run_mpi("run_grid_jobs.py", [], 2, timeout=300, mpi4py_runner=False)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["ranks"] == 2 and len(out["svc"]) == 4 and len(out["sgd"]) == 2
    assert out["fork"] == [[True, 1], [True, 1]]
    assert out["sharded"].startswith("distributed='sharded' in a worker process of an MPI job")


@pytest.mark.parametrize("n", [2, 3])
def test_thread_warning_once_a_node(tmp_path, n):
    """An n_threads beyond numba's pool (the suite's launchers make it one thread) warns on
    the node's first rank only: every rank of a node would say the same."""
    script = tmp_path / "fit.py"
    script.write_text(
        "from sklearn.datasets import make_blobs\n"
        "import psvm\n"
        "X, y = make_blobs(60, centers=2, random_state=0)\n"
        "psvm.SVC(n_threads=2).fit(X, y)\n"
        "psvm.SGDSVC(n_threads=2).fit(X, y)\n"
    )
    env = {"NUMBA_NUM_THREADS": "1"}  # (whatever the caller's environment says)
    r = run_mpi(str(script), [], n, timeout=TIMEOUT, env=env, mpi4py_runner=False)
    assert r.returncode == 0, r.stderr
    warned = [s for s in r.stderr.splitlines() if "RuntimeWarning: n_threads 2: numba's" in s]
    assert len(warned) == 2, r.stderr  # one a fit, from one rank
