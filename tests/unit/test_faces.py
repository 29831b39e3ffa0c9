"""The faces' shared machinery on one process: the replicated-input hash and Comm.guard."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import scipy.sparse as sp

from psvm.comm import Comm, process
from psvm.faces.agreement import input_digest
from tests._helpers import checkout_env


def _digest(X, y, sw=None):
    labels, codes = np.unique(y, return_inverse=True)
    sw = np.ones(len(y)) if sw is None else sw
    return input_digest(sp.csr_matrix(X, dtype=np.float64), codes, sw)


def test_digest_is_exact():
    rng = np.random.default_rng(0)
    X = np.abs(rng.normal(size=(20, 4))) + 0.1
    X[::3, 1] = 0
    y = np.arange(20) % 2
    ref = _digest(X, y)
    explicit_zero = sp.csr_matrix(X)
    explicit_zero.data[0] = 0.0  # stored, but a zero: the same matrix as dense input
    X0 = X.copy()
    X0[np.unravel_index(np.flatnonzero(X)[0], X.shape)] = 0.0
    assert _digest(explicit_zero, y) == _digest(X0, y) != ref
    assert _digest(X, y) == ref
    X1 = X.copy()
    X1[3, 2] = np.nextafter(X1[3, 2], np.inf)
    assert _digest(X1, y) != ref  # one bit
    assert _digest(X * (1 + 1e-12), y) != ref
    assert _digest(X, y[::-1]) != ref  # same label counts, other order
    assert _digest(X, y, np.r_[2.0, np.ones(19)]) != ref
    assert _digest(X[:, :3], y) != _digest(np.c_[X[:, :3], np.zeros(20)], y)  # shape counts


@pytest.mark.parametrize("error", [TypeError, MemoryError, KeyboardInterrupt, ValueError])
def test_guard_of_one_process_lets_every_error_through(error):
    comm = Comm()
    assert comm.size == 1
    with pytest.raises(error, match="raw"), comm.guard("test"):
        raise error("raw")


def test_sigint_watch_defers_and_raises_once():
    # Python's own handler first, as in a fresh process: the watch leaves any other handler
    # alone, so one that an earlier test left would fail this test; the run's handler after
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _defers_and_raises_once()
    finally:
        signal.signal(signal.SIGINT, previous)


def _defers_and_raises_once() -> None:
    with process.sigint_watch() as watch:
        assert process.WATCH is watch and signal.getsignal(signal.SIGINT) is watch
        with process.sigint_watch() as inner:  # a guard inside a guard: one handler
            assert inner is watch
        watch.defer = process.DEFER_ALL
        os.kill(os.getpid(), signal.SIGINT)  # recorded for the ranks' next check only
        assert watch.seen
        watch.defer = frozenset()
        os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C: the job is already ending
    assert process.WATCH is None and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt), process.sigint_watch() as watch:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # interrupted: the handler raised
    assert watch.seen


@pytest.mark.parametrize("sigint", [signal.default_int_handler, signal.SIG_IGN])
def test_commands_watch_sigterm_too(monkeypatch, sigint):
    """psvm's commands own their process: SIGTERM raises Terminated (deferred, or at once),
    whose line and status say so; the default handler comes back after. SIGTERM is watched
    whatever SIGINT's handler: a batch script's background job ignores SIGINT."""
    previous = signal.signal(signal.SIGINT, sigint)
    monkeypatch.setattr(process, "WATCH_SIGTERM", True)
    try:
        with pytest.raises(process.Terminated) as e, process.sigint_watch() as watch:
            assert signal.getsignal(signal.SIGTERM) is watch
            assert (signal.getsignal(signal.SIGINT) is watch) == (sigint is not signal.SIG_IGN)
            watch.defer = process.DEFER_SIGTERM
            os.kill(os.getpid(), signal.SIGTERM)  # recorded for the next check
            assert watch.seen and watch.terminated
            raise watch.error()
        assert signal.getsignal(signal.SIGINT) is sigint
    finally:
        signal.signal(signal.SIGINT, previous)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert process.stop_status(e.value) == 143 and process.stop_status(KeyboardInterrupt()) == 130
    assert process.stop_line("p", e.value) == "p: terminated"
    assert process.stop_line("p", KeyboardInterrupt(), 2) == "p: rank 2: interrupted"
    e.value.checkpoint = 1200
    line = "p: terminated; checkpoint saved at iteration 1200 (--resume goes on)"
    assert process.stop_line("p", e.value) == line


def test_a_signal_in_a_compiled_call_stops_as_the_signal():
    """A user's trial: SIGTERM (or Ctrl-C) while numba's code ran (predictions' sums, -b 1's
    folds) gave 'unexpected error', a traceback and status 1 (3 of 3 psvm-predict runs, 5 of
    10 at P = 2): the handler raised where the compiled call ran Python (numba's unpickling),
    and numba raised a SystemError caused by the interrupt. The guard gives the interrupt
    itself, so the command says 'terminated' and exits with 143."""

    def numba_call():  # what numba raises then
        try:
            raise process.Terminated
        except process.Terminated as e:
            raise SystemError("Dispatcher(...) returned a result with an exception set") from e

    with pytest.raises(process.Terminated), Comm().guard("test"):
        numba_call()
    with pytest.raises(SystemError, match="other"), Comm().guard("test"):
        raise SystemError("other")
    system = SystemError("returned a result with an exception set")
    system.__context__ = KeyboardInterrupt()
    assert process.interruption(system) is system.__context__
    assert process.interruption(SystemError()) is None
    assert process.interruption(ValueError()) is None


def test_a_signal_dropped_before_an_error_stops_as_the_signal(monkeypatch):
    """A SIGTERM whose exception a ctypes callback dropped (numba's object cache: 'Exception
    ignored in ...'), then another error: the command stops as terminated (143), not with
    'unexpected error'. Without a signal, the error itself; outside psvm's commands (no
    watch), too; and an error raised while the interrupt was handled (a checkpoint that
    could not be saved), or an agreed one."""

    def dropped_then_failed():
        try:
            process.WATCH(signal.SIGTERM, None)  # the handler, run inside the callback
        except process.Terminated:
            pass  # (what the callback does with it)
        raise RuntimeError("loading compiled code failed")

    monkeypatch.setattr(process, "WATCH_SIGTERM", True)
    with pytest.raises(process.Terminated), Comm().guard("test"):
        dropped_then_failed()
    with pytest.raises(RuntimeError, match="failed"), Comm().guard("test"):
        raise RuntimeError("failed")
    saving = RuntimeError("cannot write the checkpoint")  # raised while the interrupt was handled
    with pytest.raises(RuntimeError, match="checkpoint"), Comm().guard("test"):
        try:
            process.WATCH(signal.SIGTERM, None)
        except process.Terminated:
            raise saving from None  # (its context: the interrupt)
    saving.collective = True  # agreed: every rank's error
    with pytest.raises(RuntimeError, match="checkpoint"), Comm().guard("test"):
        process.WATCH.seen = True
        raise saving
    monkeypatch.setattr(process, "WATCH_SIGTERM", False)
    with pytest.raises(RuntimeError, match="failed"), Comm().guard("test"):
        assert process.WATCH is None
        raise RuntimeError("failed")


def test_one_process_defers_only_sigterm_and_only_where_asked(monkeypatch):
    """With one process, the kernel solver's loop with a checkpoint (``alone``, main thread)
    raises SIGTERM at its check, and Ctrl-C at once (no collective to keep in step); SGD's
    loop, which makes no check alone, defers neither."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    monkeypatch.setattr(process, "WATCH_SIGTERM", True)
    comm = Comm()
    cases = [(True, signal.SIGTERM, process.Terminated, True)]
    cases += [(alone, signal.SIGINT, KeyboardInterrupt, False) for alone in (True, False)]
    cases += [(False, signal.SIGTERM, process.Terminated, False)]
    try:
        with comm.guard("test"):
            for alone, sig, error, deferred in cases:
                process.WATCH.seen = process.WATCH.terminated = False
                reached = False
                with pytest.raises(error), comm.deferred_interrupts(alone=alone):
                    os.kill(os.getpid(), sig)
                    reached = True
                    comm.check_interrupt()
                    pytest.fail("the check did not raise")
                assert reached == deferred, (alone, sig)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert process.WATCH is None and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_mpi_worker_is_recognised(monkeypatch):
    import socket

    from psvm.comm import mpi_worker, world

    for var in (
        "PMI_SIZE",
        "PMI_RANK",
        "PMIX_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "MPI_LOCALNRANKS",
        "PMI_FD",
        "PSVM_MPI_RANK_PID",
    ):
        monkeypatch.delenv(var, raising=False)
    assert not mpi_worker()  # no launcher at all
    monkeypatch.setenv("PMI_RANK", "0")
    assert not mpi_worker()  # another launcher, not forked from a rank: a rank
    monkeypatch.setenv("PSVM_MPI_RANK_PID", str(os.getppid()))
    assert mpi_worker()  # forked by the rank that recorded its PID
    monkeypatch.setenv("PSVM_MPI_RANK_PID", str(os.getpid()))
    a, b = socket.socketpair()
    with a, b:
        monkeypatch.setenv("PMI_FD", str(a.fileno()))
        assert not mpi_worker()  # MPICH's PMI socket is open: a rank
    monkeypatch.setenv("PMI_FD", str(a.fileno()))  # closed now: a spawned worker
    assert mpi_worker()
    assert world().size == 1


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, "no"),  # one process
        ({"MPI_LOCALNRANKS": "3", "PMI_SIZE": "3"}, "no"),  # hydra, one node
        ({"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_SIZE": "2"}, "no"),
        ({"MPI_LOCALNRANKS": "2", "PMI_SIZE": "4"}, None),  # ranks on another node
        ({"PMI_SIZE": "4"}, None),  # a launcher that does not tell the node's ranks
        ({"UCX_MEM_EVENTS": "yes"}, "yes"),  # the user's setting
    ],
)
def test_network_memory_hooks_off_on_one_node(monkeypatch, env, expected):
    from psvm.comm.process import JOB_SIZE_VARS, skip_network_memory_hooks

    for var in ("UCX_MEM_EVENTS", *(v for pair in JOB_SIZE_VARS for v in pair)):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    skip_network_memory_hooks()
    assert os.environ.get("UCX_MEM_EVENTS") == expected


FREED = """
import resource, sys
import numpy as np
from psvm.comm.process import keep_freed_memory
print(keep_freed_memory() if sys.argv[1] == "keep" else "-")
core = getattr(np, "_core", None) or np.core  # (numpy 1: np.core)
core.multiarray._set_madvise_hugepage(False)  # (a huge page: one fault for 512 pages)


def faults():  # a 16 MB array made, filled and freed
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    np.ones(2 * 2**20)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


print(*[faults() for _ in range(3)])
"""


def _freed_faults(mode: str, env: dict) -> tuple[str, list[int]]:
    run = subprocess.run(
        [sys.executable, "-c", FREED, mode], env=env, capture_output=True, text=True, check=True
    )
    applied, counts = run.stdout.splitlines()
    return applied, [int(c) for c in counts.split()]


def _glibc() -> bool:
    try:
        return "glibc" in (os.confstr("CS_GNU_LIBC_VERSION") or "")
    except (ValueError, OSError, AttributeError):
        return False


@pytest.mark.skipif(not _glibc(), reason="glibc's malloc is what psvm's commands tune")
def test_psvm_commands_keep_freed_memory_for_the_next_arrays():
    """glibc maps a large array apart, then the next of its size on new heap: both fault
    every page. psvm's commands keep what was freed: the second array faults no new page.
    A user's malloc settings stay theirs."""
    env = checkout_env({k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")})
    env.pop("GLIBC_TUNABLES", None)
    applied, kept = _freed_faults("keep", env)
    _, default = _freed_faults("-", env)
    pages = 16 * 2**20 // os.sysconf("SC_PAGE_SIZE")
    assert applied == "True"
    assert default[1] > pages // 2 and kept[1] < pages // 10, (default, kept)
    assert _freed_faults("keep", {**env, "MALLOC_TOP_PAD_": "0"})[0] == "False"


def _canonical(X):
    return sp.csr_matrix(X, dtype=np.float64)  # scipy's conversion


def test_dense_to_csr_gives_scipys_arrays():
    from psvm.faces.fit_input import as_csr

    rng = np.random.default_rng(1)
    for shape in [(150, 4), (37, 64), (1, 7), (5, 1), (3, 0), (0, 3)]:
        X = rng.normal(size=shape)
        X[rng.random(shape) < 0.5] = 0.0
        if X.size:
            X.flat[0] = -0.0  # a zero: not stored
        ours, ref = as_csr(X), _canonical(X)
        assert ours.shape == ref.shape and ours.has_canonical_format
        for a, b in [(ours.indptr, ref.indptr), (ours.indices, ref.indices)]:
            assert a.dtype == b.dtype and np.array_equal(a, b)
        assert np.array_equal(ours.data.view(np.int64), ref.data.view(np.int64))
    X.flags.writeable = False  # read-only: scipy's path, same result
    assert (as_csr(X) != _canonical(X)).nnz == 0


def test_plain_input_is_what_validate_data_leaves_alone():
    from psvm.faces.checks import plain_input

    X, y = np.ones((4, 2)), np.array([0, 1, 0, 1])
    assert plain_input(X, y)
    assert plain_input(sp.csr_matrix(X), y.astype(float))
    assert plain_input(X, np.array([True, False, True, False]))
    for bad_X in (X.astype(np.float32), X.T.copy().T, X.tolist(), np.ones((0, 2)), X[:, :0]):
        assert not plain_input(bad_X, y if np.shape(bad_X)[0] == 4 else y[:0])
    nan = X.copy()
    nan[1, 1] = np.nan
    assert not plain_input(nan, y)
    assert not plain_input(np.full((4, 2), 1e308), y)  # the sum overflows: the full check
    for bad_y in (y[:3], y.reshape(-1, 1), y + 0.5, y.astype(str), np.array([0, 1, np.inf, 0])):
        assert not plain_input(X, bad_y)
    assert not plain_input(X, np.array([0.0, 1.0, 2.0**60, 0.0]))  # int cast not exact


@pytest.mark.parametrize(
    "X, y, message",
    [
        (np.array([[0.0, np.nan]] * 4), [0, 1, 0, 1], "NaN"),
        (np.ones((4, 2)), [0.5, 1, 0, 1], "Unknown label type"),
        (np.ones((4, 2)), [0, 1, 0], "inconsistent numbers of samples"),
    ],
)
def test_fit_errors_are_scikit_learns(X, y, message):
    import sklearn.svm

    import psvm

    for est in (psvm.SVC(), sklearn.svm.SVC()):
        with pytest.raises(ValueError, match=message):
            est.fit(X, np.asarray(y))


def test_plain_fit_sets_what_validate_data_sets():
    import psvm

    X, y = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]]), np.array([0, 1, 1, 0])
    est = psvm.SVC()
    est.feature_names_in_ = np.array(["a", "b"], dtype=object)  # as a DataFrame's fit leaves
    est.fit(X, y)  # plain input: the names go, as validate_data drops them
    assert not hasattr(est, "feature_names_in_") and est.n_features_in_ == 2


def test_label_counts_is_np_unique():
    from psvm.faces.agreement import label_counts

    for y in (
        np.array([3, 1, 3, 3, 7]),
        np.array([5], dtype=np.uint8),
        np.array([-1, 1, 1]),
        np.array([0, 10**9]),
        np.array([1.5, -2.0, 1.5]),
        np.array(["b", "a", "b"]),
        np.array([True, False, True]),
        np.zeros(0, dtype=int),
    ):
        labels, counts = label_counts(y)
        ref_labels, ref_counts = np.unique(y, return_counts=True)
        assert labels.dtype == ref_labels.dtype and np.array_equal(labels, ref_labels)
        assert counts.dtype == ref_counts.dtype and np.array_equal(counts, ref_counts)


def test_dense_sparse_and_checked_paths_fit_the_same_bits():
    """Plain dense input (checks skipped, compiled CSR conversion), CSR input, and input that
    takes scikit-learn's checks (float32, Fortran order, a list) give one model."""
    from sklearn.datasets import load_iris

    import psvm

    X, y = load_iris(return_X_y=True)
    X32 = X.astype(np.float32).astype(np.float64)  # values a float32 copy can hold
    ref = psvm.SVC(C=10).fit(X32, y)
    for Xi, yi in [
        (sp.csr_matrix(X32), y),
        (X32.astype(np.float32), y),
        (np.asfortranarray(X32), y.astype(float)),
        (X32.tolist(), y.tolist()),
    ]:
        est = psvm.SVC(C=10).fit(Xi, yi)
        for name in ("dual_coef_", "intercept_", "support_"):
            a, b = getattr(est, name), getattr(ref, name)
            a = a.toarray() if sp.issparse(a) else a  # (no -0.0 there: + 0.0 below)
            assert np.array_equal(
                np.asarray(a + 0).view(np.uint8), np.asarray(b + 0).view(np.uint8)
            )


def test_an_error_named_after_its_rank_keeps_its_type_when_it_can():
    """agree's ``rank R:`` prefix (sharded input, a replicated copy only one rank fails): the
    error's own type when it rebuilds from a message, else a ValueError saying the type (a
    callable kernel's error whose constructor takes other arguments: a failed rebuild on the
    root would have left the other ranks waiting in its broadcast)."""
    from psvm.comm import named
    from psvm.faces.agreement import InputError

    e = named(InputError("Input X contains NaN."), 2)
    assert type(e) is InputError and str(e) == "rank 2: Input X contains NaN."

    class KernelError(ValueError):
        def __init__(self, row: int, why: str):
            super().__init__(f"row {row}: {why}")

    e = named(KernelError(3, "negative distance"), 1)
    assert type(e) is ValueError and str(e) == "rank 1: KernelError: row 3: negative distance"
