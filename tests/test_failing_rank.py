"""A failing rank (issues 7, 16): every rank exits non-zero within seconds, the error is
reported once, and the output folder holds no model file, partial or temporary.

Failures: an unexpected exception on one rank (injected by scenario scripts,
``tests/mpi/run_train_fault.py`` and ``run_face_fault.py``: a RuntimeError,
TypeError, MemoryError or KeyboardInterrupt, in psvm-train and in the
estimators' fit; ``run_late_abort.py``: after the other ranks finished), an I/O
error while rank 0 writes the model, and ``kill -9`` of one rank in the middle of
training a9a.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from psvm.comm.process import GRACE_SECONDS
from tests._helpers import gone, mpiexec, rank_pids, run_mpi, until_exists
from tests._svm import write_head
from tests.test_cli import GOOD


@pytest.fixture(scope="module")
def a9a_text(shared_data, tmp_path_factory):
    """a9a decompressed once for the module's runs (each of which is stopped once its solver
    has written a checkpoint): the runs read plain text, not xz."""
    return write_head(shared_data / "a9a.xz", tmp_path_factory.mktemp("data") / "a9a")


# a checkpoint every 100 iterations: the first one shows the solver running, a few ms into
# a solve of some 40,000 iterations, whatever the machine's speed (a progress line comes only
# 5 s in, and the whole solve now takes about 5 s at P = 2)
def _solving(checkpoint) -> list[str]:
    return ["-c", "4", "-g", "0.5", "--checkpoint-iters", "100", "--checkpoint", str(checkpoint)]


def _only_input_left(folder, data):
    assert sorted(os.listdir(folder)) == [os.path.basename(data)]


@pytest.mark.parametrize("n, rank", [(2, 1), (3, 2), (3, 0)])
def test_exception_on_one_rank_aborts_every_rank(tmp_path, n, rank):
    data, model = tmp_path / "d.txt", tmp_path / "d.model"
    data.write_text(GOOD * 3)
    t0 = time.perf_counter()
    r = run_mpi("run_train_fault.py", ["fit", rank, "-q", data, model], n, timeout=60)
    assert time.perf_counter() - t0 < 30
    assert r.returncode != 0
    assert r.stderr.count("unexpected error") == 1, r.stderr  # the failing rank only
    assert f"psvm-train: rank {rank}: unexpected error" in r.stderr
    assert f"RuntimeError: injected failure on rank {rank}" in r.stderr
    assert "psvm-train: error:" not in r.stderr  # not mistaken for a collective error
    _only_input_left(tmp_path, data)


@pytest.mark.parametrize("face, error, rank", [
    ("svc", "TypeError", 2), ("svc", "MemoryError", 0), ("svc", "KeyboardInterrupt", 1),
    ("sgd", "TypeError", 1), ("sgd", "MemoryError", 2), ("sgd", "KeyboardInterrupt", 0),
    ("train", "TypeError", 0), ("train", "MemoryError", 1), ("train", "KeyboardInterrupt", 2),
])  # fmt: skip
def test_unexpected_error_on_one_of_three_ranks_ends_the_job(tmp_path, face, error, rank):
    # Comm.guard, which every face runs under: one message, MPI_Abort, no rank left waiting
    data, model = tmp_path / "d.txt", tmp_path / "d.model"
    data.write_text(GOOD * 3)
    r = run_mpi(
        "run_face_fault.py",
        [face, error, rank, "-q", data, model],
        3,
        timeout=60,
        mpi4py_runner=False,
    )
    ended = time.time()
    injected = [float(s.split()[-1]) for s in r.stderr.splitlines() if s.startswith("injected at")]
    assert len(injected) == 1, r.stderr
    assert ended - injected[0] < 10, r.stderr
    prog = {"svc": "psvm.SVC.fit", "sgd": "psvm.SGDSVC.fit", "train": "psvm-train"}[face]
    if error == "KeyboardInterrupt":
        # MPI_Abort's 130, or 9 as below: mpiexec may reap a rank it killed first (session 28:
        # 2 of the 3 cases in one full run, 1 of 21 in reruns of these cases alone)
        assert r.returncode in (130, 9), r.stderr
        assert r.stderr.count("interrupted") == 1, r.stderr
        assert f"{prog}: rank {rank}: interrupted" in r.stderr and "Traceback" not in r.stderr
    else:
        # MPI_Abort's 1; on a loaded machine mpiexec may reap a rank it killed first and
        # report that rank's SIGKILL (9) instead (seen once in a full run at load 5)
        assert r.returncode in (1, 9), r.stderr
        assert r.stderr.count("unexpected error") == 1, r.stderr
        assert f"{prog}: rank {rank}: unexpected error" in r.stderr
        assert f"{error}: injected {error}" in r.stderr
    assert "fitted" not in r.stdout
    _only_input_left(tmp_path, data)


def test_write_failure_leaves_no_partial_model(tmp_path):
    data, model = tmp_path / "d.txt", tmp_path / "d.model"
    data.write_text(GOOD * 3)
    r = run_mpi("run_train_fault.py", ["fsync", 0, "-q", data, model], 2, timeout=60)
    assert r.returncode != 0
    # a write that fails at the end is the run's one error line, not a traceback
    assert "unexpected error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    error = f"psvm-train: error: cannot write {str(model)!r}: No space left on device"
    assert r.stderr.count(error) == 1, r.stderr
    _only_input_left(tmp_path, data)  # the temporary file was removed, none renamed


@pytest.mark.parametrize("n", [2, 3])
def test_failure_after_the_others_finished_ends_the_job(n):
    """The others are in MPI_Finalize when rank 0 aborts. MPICH aborted psvm's duplicated
    communicator by a message to each rank, which a finalising rank never read: the job
    hung or ended with another status in 10 of 30 runs here. Repeated: it was a race."""
    for delay in (0, 0.01, 0.02, 0.05, 0.1):
        r = run_mpi("run_late_abort.py", [delay], n, timeout=60, mpi4py_runner=False)
        # 1; or 9 as in the tests above: mpiexec may reap a rank it killed first
        assert r.returncode in (1, 9), (delay, r.returncode, r.stderr)
        assert r.stderr.count("late: rank 0: unexpected error") == 1, r.stderr


@pytest.mark.parametrize("n, victim", [(2, 1), (3, 0)])
def test_kill_9_of_one_rank_mid_training(tmp_path, a9a_text, n, victim):
    out = tmp_path / "out"
    out.mkdir()
    model = out / "a9a.model"
    env = dict(
        os.environ,
        NUMBA_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        PSVM_CACHE_DIR=str(tmp_path / "cache"),
    )
    cmd = [
        mpiexec(),
        "-n",
        str(n),
        sys.executable,
        "-m",
        "psvm.cli.train",
        *_solving(tmp_path / "c.ckpt"),
        a9a_text,
        str(model),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        ranks = rank_pids(proc.pid, n)
        assert until_exists(tmp_path / "c.ckpt", proc), "no checkpoint: the solver is not running"
        os.kill(ranks[victim], signal.SIGKILL)
        t0 = time.monotonic()
        rc = proc.wait(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc != 0
    assert elapsed < 10, elapsed
    deadline = time.monotonic() + 5
    while not all(gone(p) for p in ranks.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(gone(p) for p in ranks.values())  # no rank left waiting in a collective
    assert os.listdir(out) == []  # no model, no temporary file


def _epochs_running(proc) -> bool:
    """Read SGD's progress lines until the second epoch's (the ranks are syncing)."""
    for line in proc.stdout:
        if line.startswith(b"epoch 2:"):
            return True
    return False


@pytest.mark.parametrize(
    "n, victim, solver, sig",
    [
        (2, None, "smo", signal.SIGINT),
        (3, None, "smo", signal.SIGINT),
        (3, 1, "smo", signal.SIGINT),
        (3, 1, "sgd", signal.SIGINT),
        (2, None, "sgd", signal.SIGTERM),  # the kernel solver's: test_checkpoint.py
    ],
)
def test_ctrl_c_or_sigterm_prints_one_line_and_exits(tmp_path, a9a_text, n, victim, solver, sig):
    # mpiexec forwards Ctrl-C (SIGINT) to every rank, in their own process groups, which see
    # it at different times; a SIGINT to one rank alone is the extreme case (no rank may go
    # on into the solver's next collective, or SGD's next model average, while another
    # leaves it). SIGTERM (a batch scheduler's time limit) stops a run alike, with 143.
    out = tmp_path / "out"
    out.mkdir()
    env = dict(
        os.environ,
        NUMBA_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        PSVM_CACHE_DIR=str(tmp_path / "cache"),
    )
    cmd = [
        mpiexec(),
        "-n",
        str(n),
        sys.executable,
        "-m",
        "psvm.cli.train",
        *(
            _solving(tmp_path / "c.ckpt")
            if solver == "smo"
            else ["--solver", "sgd", "--epochs", "100000", "--tol", "0"]  # runs until stopped
        ),
        "--stats",
        str(out / "s.json"),
        a9a_text,
        str(out / "a9a.model"),
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL if solver == "smo" else subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    try:
        target = proc.pid if victim is None else rank_pids(proc.pid, n)[victim]
        if solver == "smo":
            running = until_exists(tmp_path / "c.ckpt", proc)
        else:
            running = _epochs_running(proc)
        assert running, "the solver is not running"
        os.kill(target, sig)  # SIGINT to mpiexec: what the terminal sends it on Ctrl-C
        t0 = time.monotonic()
        _, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # 130; mpiexec kills the ranks still running once one has exited non-zero, and a rank
    # slower to leave after MPI_Finalize (P = 3 on two busy cores) makes it report 9
    assert proc.returncode in (128 + sig, 9), err
    word = "interrupted" if sig == signal.SIGINT else "terminated"
    assert err.decode() == f"psvm-train: {word}\n"  # no traceback, no MPI_Abort line
    # every rank stopped at the same check and left MPI together: none waited out the
    # grace periods of the job's ending through MPI_Abort (at least 4 s when a rank other
    # than 0 saw the signal alone, as rank 1 here)
    assert elapsed < 3 * GRACE_SECONDS, elapsed
    assert os.listdir(out) == []  # no model, no stats, no temporary file
