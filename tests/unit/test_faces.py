"""The faces' shared machinery on one process: the replicated-input hash and Comm.guard."""

import numpy as np
import pytest
import scipy.sparse as sp

from psvm.comm import Comm
from psvm.faces.agreement import input_digest


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


def test_mpi_worker_is_recognised(monkeypatch):
    import os
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
