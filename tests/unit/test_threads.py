"""psvm.threads: each rank's share of the node's cores, the n_threads / -o overrides."""

import os
import warnings

import numba
import numpy as np
import pytest
from sklearn.datasets import make_blobs

import psvm
from psvm import threads
from psvm._params import ParameterError
from psvm.cli import train, train_sgd
from psvm.comm import Comm

TOP = numba.config.NUMBA_NUM_THREADS  # numba's pool: the most threads set_num_threads takes


class Node:
    """A stand-in communicator: ``local`` ranks share this node."""

    def __init__(self, local: int):
        self.local, self.calls = local, 0

    def local_size(self) -> int:
        self.calls += 1
        return self.local


@pytest.fixture(autouse=True)
def restore_threads():
    before = numba.get_num_threads()
    yield
    numba.set_num_threads(before)


@pytest.fixture
def cores(monkeypatch):
    """Pretend this process may run on ``n`` cores."""

    def set_cores(n: int) -> None:
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(n)), raising=False)

    return set_cores


@pytest.mark.parametrize(
    "n_cores, local, expected",
    [(8, 1, 8), (8, 2, 4), (8, 3, 2), (8, 8, 1), (8, 16, 1), (2, 2, 1), (2, 1, 2), (1, 4, 1)],
)
def test_default_is_the_node_share(monkeypatch, cores, n_cores, local, expected):
    cores(n_cores)
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 64)
    assert threads.default_threads(local) == expected


def test_default_never_exceeds_numba_pool(monkeypatch, cores):
    cores(16)
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 3)
    assert threads.default_threads(1) == 3
    assert threads.default_threads(8) == 2


def test_cores_are_the_affinity_else_cpu_count(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 5, 7}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 32)
    assert threads.usable_cores() == 3  # a CPU set smaller than the machine
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert threads.usable_cores() == 32


@pytest.mark.parametrize("n, expected", [(None, None), (0, None), (1, 1), (np.int64(3), 3)])
def test_check_threads_accepts(n, expected):
    got = threads.check_threads(n)
    assert got == expected and (got is None or type(got) is int)


@pytest.mark.parametrize("n", [-1, 1.5, 2.0, "2", True, [2]])
@pytest.mark.parametrize("name", ["n_threads", "-o"])
def test_check_threads_names_the_parameter(n, name):
    with pytest.raises(ParameterError, match=rf"^{name} must be a positive integer"):
        threads.check_threads(n, name)


def test_apply_default_from_the_local_ranks(cores):
    cores(2 * TOP)
    node = Node(2)
    assert threads.apply_threads(None, node) == TOP == numba.get_num_threads()
    assert node.calls == 1
    if TOP > 1:  # with a pool of one thread every choice is 1
        numba.set_num_threads(TOP)
        assert threads.apply_threads(0, Node(4 * TOP)) == 1 == numba.get_num_threads()


def test_apply_explicit_count_makes_the_split_and_caps():
    """An explicit count makes the node's collective too: the ranks' counts may differ (a
    rank's own n_threads or -o), and a rank that skipped it left the others waiting."""
    node = Node(1000)
    assert threads.apply_threads(1, node) == 1 == numba.get_num_threads()
    assert threads.apply_threads(TOP + 5, node) == TOP == numba.get_num_threads()
    assert node.calls == 2


@pytest.mark.parametrize("n_jobs", [None, 1, -1])
def test_n_jobs_makes_the_node_collective_too(n_jobs):
    """psvm.SVC's n_jobs on one rank and the default on another: both make the node's
    collective once, as the default count does."""
    node = Node(2)
    with threads.numba_threads(n_jobs, node):
        if n_jobs == 1:
            assert numba.get_num_threads() == 1
    assert node.calls == 1


def test_apply_validates_before_any_collective():
    node = Node(2)
    with pytest.raises(ParameterError, match="^-o must be"):
        threads.apply_threads(-2, node, name="-o")
    assert node.calls == 0


def test_one_process_is_alone_on_its_node():
    assert Comm().local_size() == 1


def test_rank_threads_restores():
    numba.set_num_threads(TOP)
    with threads.rank_threads(1, Node(1)) as n:
        assert n == 1 == numba.get_num_threads()
    assert numba.get_num_threads() == TOP


# -- the estimators ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def blobs():
    return make_blobs(n_samples=120, centers=2, n_features=4, random_state=0)


@pytest.mark.parametrize("cls", [psvm.SVC, psvm.SGDSVC])
def test_estimators_store_validate_and_apply(blobs, cls):
    X, y = blobs
    est = cls(n_threads=-1)
    assert est.get_params()["n_threads"] == -1  # __init__ only stores
    with pytest.raises(ValueError, match=r"^n_threads must be a positive integer"):
        est.fit(X, y)
    numba.set_num_threads(TOP)
    fitted = cls(n_threads=1).fit(X, y)
    assert fitted.fit_stats_["values"]["n_threads"] == 1  # the count during the fit
    assert numba.get_num_threads() == TOP  # restored afterwards
    default = cls().fit(X, y).fit_stats_["values"]["n_threads"]
    assert default == threads.default_threads(1)  # one process: all its cores


def test_sgd_partial_fit_applies_threads(blobs):
    X, y = blobs
    est = psvm.SGDSVC(n_threads=1).partial_fit(X, y, classes=[0, 1])
    assert est.fit_stats_["values"]["n_threads"] == 1
    with pytest.raises(ValueError, match=r"^n_threads"):
        est.set_params(n_threads=2.5).partial_fit(X, y)


def test_svc_n_jobs_still_works_and_conflicts_with_n_threads(blobs):
    X, y = blobs
    assert psvm.SVC(n_jobs=1).fit(X, y).fit_stats_["values"]["n_threads"] == 1
    with pytest.raises(ValueError, match=r"^n_threads=1 and n_jobs=1"):
        psvm.SVC(n_threads=1, n_jobs=1).fit(X, y)
    # n_threads=0 is the default, so n_jobs decides
    assert psvm.SVC(n_threads=0, n_jobs=1).fit(X, y).fit_stats_["values"]["n_threads"] == 1


# -- the command line -------------------------------------------------------------------------
def test_o_flag_is_parsed_by_both_solvers():
    assert train.parse_args(["-o", "3", "f"])["n_threads"] == 3
    assert "n_threads" not in train.parse_args(["f"])
    assert train_sgd.parse_args(["--solver", "sgd", "-o", "1", "f"])["n_threads"] == 1
    assert "-o n_threads: threads per rank" in train.USAGE
    assert "-o n_threads: threads per rank" in train_sgd.USAGE


@pytest.mark.parametrize("solver", [[], ["--solver", "sgd"]])
def test_o_flag_error_names_it_before_reading_files(tmp_path, capsys, solver):
    missing = tmp_path / "missing.txt"
    assert train.main([*solver, "-q", "-o", "-2", str(missing)]) == 1
    err = capsys.readouterr().err
    assert "-o must be a positive integer" in err and "missing" not in err


@pytest.mark.parametrize(
    "env, expected",
    [({}, 1), ({"MPI_LOCALNRANKS": "3"}, 3), ({"OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, 2)],
)
def test_local_work_counts_the_ranks_mpiexec_reports(monkeypatch, cores, env, expected):
    """predict is local to a rank: it cannot ask the others, mpiexec's environment tells."""
    for var in ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert threads.launcher_local_ranks() == expected
    cores(6 * TOP)
    assert threads.apply_threads(None, None) == min(TOP, 6 * TOP // expected)


@pytest.mark.parametrize(
    "env, n_cores, expected",
    [
        ({}, 2, None),  # one process: OpenBLAS's own default
        ({"MPI_LOCALNRANKS": "1"}, 2, None),
        ({"MPI_LOCALNRANKS": "2"}, 2, "1"),
        ({"MPI_LOCALNRANKS": "2"}, 6, "3"),
        ({"MPI_LOCALNRANKS": "4"}, 2, "1"),  # never below one
        ({"OMPI_COMM_WORLD_LOCAL_SIZE": "2"}, 4, "2"),
        ({"MPI_LOCALNRANKS": "2", "OPENBLAS_NUM_THREADS": "4"}, 2, "4"),  # the user's
        ({"MPI_LOCALNRANKS": "2", "OMP_NUM_THREADS": "4"}, 2, None),  # OpenBLAS reads it
        ({"MPI_LOCALNRANKS": "2", "GOTO_NUM_THREADS": "4"}, 2, None),
    ],
)
def test_commands_give_blas_the_node_share(monkeypatch, cores, env, n_cores, expected):
    """Several ranks on a node: each OpenBLAS pool gets the rank's share of the cores,
    unless the user set a count OpenBLAS reads."""
    for var in ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", *threads.BLAS_THREADS_VARS):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    cores(n_cores)
    threads.share_blas_threads()
    assert os.environ.get("OPENBLAS_NUM_THREADS") == expected


def test_the_blas_share_is_set_before_numpy_loads():
    """psvm.threads loads no numpy (the commands call it first), and the console entry calls
    it before importing psvm.comm, which loads numpy."""
    import inspect
    import subprocess
    import sys

    from psvm.cli import _common

    code = "import sys, psvm.threads, psvm.cli.train; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    source = inspect.getsource(_common.run_main)
    assert source.index("share_blas_threads()") < source.index("from psvm.comm")


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, 0),
        ({"MPI_LOCALRANKID": "1"}, 1),
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "2"}, 2),
        ({"PMIX_LOCAL_RANK": "1"}, 1),
        ({"SLURM_LOCALID": "3"}, 3),  # srun: the node's first rank alone warns
        ({"SLURM_LOCALID": "0", "MPI_LOCALRANKID": "1"}, 1),  # mpiexec inside a job script
    ],
)
def test_local_rank_is_read_from_every_launcher(monkeypatch, env, expected):
    for var in threads.LOCAL_RANK_VARS:
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    assert threads.launcher_local_rank() == expected


@pytest.mark.parametrize(
    "n, local, n_cores, machine, pool, expected",
    [
        (None, 4, 2, 2, 8, None),  # the default shares the cores
        (1, 2, 2, 2, 8, None),
        (2, 1, 2, 2, 8, None),
        (2, 2, 2, 2, 8, "-o 2: 2 ranks x 2 threads on 2 cores: they wait"),
        (3, 1, 2, 2, 8, "-o 3: 3 threads on 2 cores"),
        (1, 2, 1, 4, 8, None),  # pinned, a core a rank (Open MPI's binding)
        (2, 2, 1, 4, 8, "-o 2: 2 threads on this rank's 1 core: they wait"),
        (4, 1, 8, 8, 2, "-o 4: numba's pool has 2 threads (NUMBA_NUM_THREADS); using 2"),
        (2, 1, 8, 8, 1, "-o 2: numba's pool has one thread (NUMBA_NUM_THREADS); using 1"),
        (3, 2, 2, 2, 2, "-o 3: numba's pool has 2 threads (NUMBA_NUM_THREADS); using 2; 2 ranks x"),
    ],
)
def test_thread_warning_says_when_a_count_will_not_run_as_asked(
    monkeypatch, cores, n, local, n_cores, machine, pool, expected
):
    """-o 2 under mpiexec -n 2 on two cores trained w8a 10x slower, silently. The node's
    collective runs whatever the count (a rank that skipped it would hang the others)."""
    cores(n_cores)
    monkeypatch.setattr(os, "cpu_count", lambda: machine)
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", pool)
    node = Node(local)
    warning = threads.thread_warning(n, node, "-o")
    assert node.calls == 1
    assert warning == expected if expected is None else warning.startswith(expected), warning


def test_estimators_warn_of_an_oversubscribing_count(monkeypatch, cores, blobs):
    X, y = blobs
    cores(1)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    monkeypatch.setenv("MPI_LOCALNRANKS", "2")  # (the launcher's count: no collective)
    for cls in (psvm.SVC, psvm.SGDSVC):
        with pytest.warns(RuntimeWarning, match="n_threads 1: 2 ranks x 1 thread on 1 core: ") as w:
            cls(n_threads=1).fit(X, y)
        assert w[0].filename == __file__, w[0].filename  # the user's line, not psvm's
    monkeypatch.setenv("MPI_LOCALRANKID", "1")  # the node's first rank warns, not every rank
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for cls in (psvm.SVC, psvm.SGDSVC):
            cls(n_threads=1).fit(X, y)


def test_cli_warns_once_even_when_quiet(tmp_path, capsys, monkeypatch):
    data = tmp_path / "d.txt"
    data.write_text("+1 1:1\n-1 1:-1\n+1 1:0.5\n-1 1:-0.5\n")
    monkeypatch.setattr(numba.config, "NUMBA_NUM_THREADS", 1)
    assert train.main(["-q", "-o", "3", str(data), str(tmp_path / "m")]) == 0
    err = capsys.readouterr().err
    assert err == (
        "psvm-train: warning: -o 3: numba's pool has one thread (NUMBA_NUM_THREADS); using 1\n"
    )
