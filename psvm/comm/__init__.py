"""The only package that talks to MPI.

A :class:`Comm` offers the few collective verbs psvm needs, counts calls,
bytes and seconds per verb (so communication statistics come for free), and
short-circuits every verb when there is one process. ``mpi4py`` is imported
lazily: a serial run outside ``mpiexec`` never initialises MPI. Every face runs
its collective work under :meth:`Comm.guard`, so an error on one rank never
leaves the others waiting (:mod:`psvm.comm.control`, with the checks for Ctrl-C).

In a process that a rank forked or spawned (a joblib worker, a multiprocessing
pool: :func:`~psvm.comm.process.mpi_worker`), :func:`world` is one process.
"""

from __future__ import annotations

import math
import os
import pickle
import time
from collections import defaultdict
from collections.abc import Callable

import numpy as np

from psvm.comm.control import JobControl
from psvm.comm.process import launched_by_mpiexec, mpi_worker

__all__ = ["Comm", "alone", "launched_by_mpiexec", "mpi_worker", "world"]


def named(error: BaseException, rank: int) -> BaseException:
    """``error`` with ``rank R:`` before its message: its type, rebuilt from the message, or a
    ValueError where that type's constructor takes other arguments (a user's callable kernel
    may raise any): a failed rebuild on the root would leave the others in its broadcast."""
    try:
        return type(error)(f"rank {rank}: {error}")
    except Exception:
        return ValueError(f"rank {rank}: {type(error).__name__}: {error}")


class Comm(JobControl):
    """Collective verbs over an MPI communicator, or over one process.

    Parameters
    ----------
    mpi_comm : mpi4py.MPI.Comm or None
        The communicator to duplicate. ``None`` means ``MPI.COMM_WORLD`` when
        launched by ``mpiexec``, and a single process otherwise (also in a
        worker process of a rank, see :func:`mpi_worker`).
    """

    def __init__(self, mpi_comm=None):
        if mpi_comm is None and launched_by_mpiexec() and not mpi_worker():
            from mpi4py import MPI

            mpi_comm = MPI.COMM_WORLD
        self._c = mpi_comm.Dup() if mpi_comm is not None and mpi_comm.Get_size() > 1 else None
        self.rank = 0 if self._c is None else self._c.Get_rank()
        self.size = 1 if self._c is None else self._c.Get_size()
        # verb -> [calls, bytes sent, seconds]
        self.counters: dict[str, list] = defaultdict(lambda: [0, 0, 0.0])
        self._in_place = self._sum_op = None  # MPI handles, looked up once
        self.first_calls: set = set()  # psvm.jit.compile_first_on_one_rank's, per communicator
        self._jit = None  # the tuple of :meth:`compiled`
        self._node_size: int | None = None  # :meth:`local_size`, once found

    # -- bookkeeping -------------------------------------------------------
    def _tick(self, verb: str, nbytes: int, t0: float) -> None:
        c = self.counters[verb]
        c[0] += 1
        c[1] += nbytes
        c[2] += time.perf_counter() - t0

    def record(self, verb: str, calls: int, nbytes: int, seconds: float) -> None:
        """Count calls made from compiled code (:mod:`psvm.comm.compiled`)."""
        if self._c is not None:
            c = self.counters[verb]
            c[0] += calls
            c[1] += nbytes
            c[2] += seconds

    # -- hot-loop verbs (buffers, no pickling) -----------------------------
    def allgather_into(self, send: np.ndarray, recv: np.ndarray) -> np.ndarray:
        """Gather equal-sized float64 buffers: ``recv[r]`` is rank r's ``send``."""
        if self._c is None:
            recv[0] = send
            return recv
        t0 = time.perf_counter()
        self._c.Allgather(send, recv)
        self._tick("allgather", send.nbytes, t0)
        return recv

    def sum_(self, x):
        """Global sum of a float scalar or a float64/int64 array."""
        return self._reduce(x, "SUM")

    def max_(self, x):
        return self._reduce(x, "MAX")

    def min_(self, x):
        return self._reduce(x, "MIN")

    def _reduce(self, x, op: str):
        if self._c is None:
            return x
        from mpi4py import MPI

        t0 = time.perf_counter()
        arr = np.array(x, dtype=np.int64 if isinstance(x, (int, np.integer)) else None)
        arr = np.ascontiguousarray(arr)
        out = np.empty_like(arr)
        self._c.Allreduce(arr, out, op=getattr(MPI, op))
        self._tick("allreduce", arr.nbytes, t0)
        return out if np.ndim(x) else out.item()

    def sum_inplace(self, buf: np.ndarray) -> np.ndarray:
        """Global sum of a float64 buffer, in place: the hot-loop model average (no allocation).

        The seconds counted include waiting for the slowest rank.
        """
        if self._c is None:
            return buf
        if self._in_place is None:
            from mpi4py import MPI

            self._in_place, self._sum_op = MPI.IN_PLACE, MPI.SUM
        t0 = time.perf_counter()
        self._c.Allreduce(self._in_place, buf, op=self._sum_op)
        self._tick("sum_inplace", buf.nbytes, t0)
        return buf

    def exscan_sum(self, n: int) -> int:
        """Sum of ``n`` over the ranks before this one (0 on rank 0)."""
        if self._c is None:
            return 0
        t0 = time.perf_counter()
        out = self._c.exscan(int(n))
        self._tick("exscan", 8, t0)
        return 0 if out is None else int(out)

    def exact_sum(self, terms: np.ndarray) -> float:
        """The correctly rounded sum of every rank's ``terms`` (``math.fsum``): the same bits
        whatever the number of ranks and the split. For the sums that feed a model (gamma
        'scale', rho, the objective); an Allreduce adds in an order that depends on P."""
        terms = np.ascontiguousarray(terms, dtype=np.float64)  # (a scalar: one term)
        gathered = terms if self._c is None else self.allgatherv(terms)
        return math.fsum(gathered.tolist())  # (floats: faster than numpy scalars)

    def allgatherv(self, local: np.ndarray) -> np.ndarray:
        """Concatenate 1-D arrays from all ranks in rank order."""
        local = np.ascontiguousarray(local)
        if self._c is None:
            return local.copy()
        t0 = time.perf_counter()
        counts = np.array(self._c.allgather(local.size), dtype=np.int64)
        out = np.empty(int(counts.sum()), dtype=local.dtype)
        displs = np.concatenate(([0], np.cumsum(counts)[:-1]))
        self._c.Allgatherv(local, [out, counts, displs, _mpi_type(local.dtype)])
        self._tick("allgatherv", local.nbytes, t0)
        return out

    def gatherv(self, local: np.ndarray, root: int = 0) -> np.ndarray | None:
        """Concatenate 1-D arrays from all ranks in rank order on ``root``; None elsewhere."""
        local = np.ascontiguousarray(local)
        if self._c is None:
            return local.copy()
        t0 = time.perf_counter()
        counts = self._c.gather(local.size, root=root)
        out = None
        if self.rank == root:
            counts = np.array(counts, dtype=np.int64)
            out = np.empty(int(counts.sum()), dtype=local.dtype)
            displs = np.concatenate(([0], np.cumsum(counts)[:-1]))
            self._c.Gatherv(local, [out, counts, displs, _mpi_type(local.dtype)], root=root)
        else:
            self._c.Gatherv(local, None, root=root)
        self._tick("gatherv", local.nbytes, t0)
        return out

    def alltoallv(self, send: np.ndarray, send_counts: np.ndarray) -> np.ndarray:
        """Send ``send_counts[r]`` consecutive items of ``send`` to rank r."""
        send = np.ascontiguousarray(send)
        if self._c is None:
            return send.copy()
        t0 = time.perf_counter()
        send_counts = np.asarray(send_counts, dtype=np.int64)
        recv_counts = np.empty_like(send_counts)
        self._c.Alltoall(send_counts, recv_counts)
        sdispl = np.concatenate(([0], np.cumsum(send_counts)[:-1]))
        rdispl = np.concatenate(([0], np.cumsum(recv_counts)[:-1]))
        out = np.empty(int(recv_counts.sum()), dtype=send.dtype)
        t = _mpi_type(send.dtype)
        self._c.Alltoallv([send, send_counts, sdispl, t], [out, recv_counts, rdispl, t])
        self._tick("alltoallv", send.nbytes, t0)
        return out

    # -- setup verbs (pickle) ----------------------------------------------
    def allgather_obj(self, obj) -> list:
        if self._c is None:
            return [obj]
        t0 = time.perf_counter()
        out = self._c.allgather(obj)
        self._tick("allgather_obj", len(pickle.dumps(obj)), t0)
        return out

    def bcast_obj(self, obj, root: int = 0):
        if self._c is None:
            return obj
        t0 = time.perf_counter()
        out = self._c.bcast(obj, root=root)
        self._tick("bcast_obj", 0, t0)
        return out

    def agree(self, error: BaseException | None, whose: Callable | None = None) -> None:
        """Raise the same exception on every rank if any rank has one.

        Expected errors (a bad line, a single class) are found locally; this
        collective makes every rank raise the lowest failing rank's error, so
        all exit cleanly with one message and none waits in a later collective.
        ``whose(failed)`` (each rank's flag) true: the message names that rank (``rank R:``;
        the error rebuilt from its message).
        """
        if self._c is None:
            failed = [error is not None]
        else:
            failed = self.allgather_obj(error is not None)
        if not any(failed):
            return
        if self._c is not None:
            root = failed.index(True)
            if self.rank == root and whose is not None and whose(failed):
                error = named(error, root)
            error = self.bcast_obj(error, root=root)
        error.collective = True  # the CLI exits cleanly on these: every rank has it
        raise error

    def node_leader(self) -> bool:
        """True on one rank per shared-memory node (for node-local file caches)."""
        if self._c is None:
            return True
        from mpi4py import MPI

        node = self._c.Split_type(MPI.COMM_TYPE_SHARED)
        try:
            return node.Get_rank() == 0
        finally:
            node.Free()

    def leader_first(self, fn: Callable[[], object]) -> None:
        """``fn()`` on one rank per node, then on the node's others (collective): the leader
        fills a node-local cache that the others then read. The others wait without spinning
        (an MPI barrier polls, taking a core from the leader when ranks outnumber cores)."""
        if self._c is None:
            fn()
            return
        from mpi4py import MPI

        node = self._c.Split_type(MPI.COMM_TYPE_SHARED)
        try:
            leader, error = node.Get_rank() == 0, None
            if leader:
                try:
                    fn()
                except Exception as e:  # raised after the barrier: the others must not wait
                    error = e
            done = node.Ibarrier()
            while not done.Test():
                time.sleep(0.005)
            if error is not None:
                raise error
            if not leader:
                fn()
        finally:
            node.Free()

    def free(self) -> None:
        """Release the duplicated communicator (collective); the verbs then act on one process."""
        if self._c is not None:
            self._c.Free()
            self._c = None
            self.rank, self.size = 0, 1

    def compiled(self) -> tuple[int, int, int, int]:
        """This communicator for :mod:`psvm.comm.compiled`: (MPI_Allgather's address, the
        communicator's handle, MPI_DOUBLE's handle, size); one process: (0, 0, 0, 1)."""
        if self._c is None:
            return (0, 0, 0, 1)
        if self._jit is None:
            import ctypes

            from mpi4py import MPI

            if MPI._sizeof(MPI.Comm) != ctypes.sizeof(ctypes.c_int):
                raise RuntimeError("psvm's compiled solver needs an MPI with int handles (MPICH)")
            lib = ctypes.CDLL(MPI.__file__)
            fn = ctypes.cast(lib.MPI_Allgather, ctypes.c_void_p).value

            def handle(obj) -> int:
                return ctypes.c_int32(MPI._handleof(obj) & 0xFFFFFFFF).value

            self._jit = (fn, handle(self._c), handle(MPI.DOUBLE), self.size)
        return self._jit

    def local_size(self) -> int:
        """How many ranks of this communicator share this node's memory (collective at the
        first call, which every rank makes; later calls reuse its count)."""
        if self._c is None:
            return 1
        if self._node_size is None:
            from mpi4py import MPI

            node = self._c.Split_type(MPI.COMM_TYPE_SHARED)
            try:
                self._node_size = node.Get_size()
            finally:
                node.Free()
        return self._node_size


def _mpi_type(dtype: np.dtype):
    from mpi4py import MPI

    return MPI._typedict[np.dtype(dtype).char]


_WORLD: tuple[int, Comm] | None = None  # (the PID that made it, the Comm)


def world() -> Comm:
    """The process-wide default :class:`Comm` (created once per process).

    A forked child does not reuse its parent's: it makes its own, of one
    process if it is a worker of a rank (:func:`mpi_worker`).
    """
    global _WORLD
    if _WORLD is None or _WORLD[0] != os.getpid():
        _WORLD = (os.getpid(), Comm())
    return _WORLD[1]


def alone(comm: Comm) -> Comm:
    """A Comm of this process alone, beside ``comm``: for work one rank does by itself (a
    fold of ``psvm-train -v``); its verbs make no MPI call."""
    if comm.size == 1:
        return comm
    from mpi4py import MPI

    return Comm(MPI.COMM_SELF)
