"""The processes of an MPI job: which are ranks, and how a failed job reports and ends.

A process that a rank forks or spawns (a joblib worker of ``GridSearchCV(n_jobs=2)``,
a multiprocessing pool) inherits the launcher's environment but is no rank: it
cannot join the job, and initialising MPI there fails (MPICH: ``PMI_Init returned
-1``). :func:`mpi_worker` recognises it. Importing this module in a rank records
the rank's PID in the environment (``PSVM_MPI_RANK_PID``) for its forked
children to see.

The rest serves :meth:`psvm.comm.Comm.guard`: the SIGINT watch that tells
mpiexec's forwarded Ctrl-C from an interrupt of one rank (and, in psvm's commands,
SIGTERM: a batch scheduler's time limit), the barrier that finds whether every rank
got it, and the one report of a failure.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

from psvm.threads import JOB_SIZE_VARS

# Environment variables set by MPICH's hydra, PMIx launchers and Open MPI.
_LAUNCHER_VARS = ("PMI_SIZE", "PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")


# A rank that fails alone waits this long before it reports: when rank 0 fails too (every
# rank hit the same bug, or Ctrl-C reached them all), rank 0's one message ends the job first.
GRACE_SECONDS = 1.0
# Between the message and MPI_Abort, so that the launcher forwards it before ending the job.
FORWARD_SECONDS = 0.2


RANK_PID = "PSVM_MPI_RANK_PID"
# the exit code of a process whose last output could not be written (CPython's own)
UNWRITTEN = 120


def end_process(code: int) -> NoReturn:
    """End this process with ``code``, without the interpreter's teardown.

    The caller has closed its files (psvm writes models and statistics atomically). Tearing
    down numba's and LLVM's Python objects took 0.04-0.1 s of a 1.7 s ijcnn1 run at P = 2. The
    streams are flushed and MPI finalised here, then C's ``exit`` runs the native libraries'
    exit handlers: ``os._exit`` skips those too, and MPICH's process manager then killed a
    rank in 5 of 20 ``mpiexec -n 5`` runs of a four-row file. Output that cannot be written
    (a full disk) turns a success into :data:`UNWRITTEN`; a reader that left (``| head``)
    does not.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            pass
        except (OSError, ValueError):
            code = code or UNWRITTEN
    if getattr(sys.stdout, "failed", False) or getattr(sys.stderr, "failed", False):
        code = code or UNWRITTEN
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.Finalize()
    try:
        import ctypes

        libc = ctypes.CDLL(None)
    except (OSError, TypeError):  # no C library to call (Windows): the interpreter's exit
        sys.exit(code)
    libc.exit(code)
    sys.exit(code)  # (not reached)


class LastingStream:
    """``sys.stdout`` or ``sys.stderr`` that outlives its reader and its disk: once the pipe is
    closed (``| head``) or a write fails (a full disk), what is printed goes to /dev/null and
    the run goes on to write its model (svm-train dies of SIGPIPE in the first case and
    ignores the failed printf in the second; Python would raise at the next line). A failed
    write is remembered (``failed``), and :func:`end_process` turns a success into
    :data:`UNWRITTEN`; a reader that left (a closed pipe or socket) is no failure."""

    def __init__(self, stream) -> None:
        self._stream, self.failed = stream, False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as e:
            self._lost(e)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as e:
            self._lost(e)

    def _lost(self, error: OSError) -> None:
        self.failed = self.failed or not isinstance(error, (BrokenPipeError, ConnectionResetError))
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self._stream.fileno())  # (the buffered rest is flushed there)
        os.close(null)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def skip_network_memory_hooks() -> None:
    """Turn UCX's memory hooks off (``UCX_MEM_EVENTS=no``) when every rank of the job runs
    on this node, unless the user set them; call it before MPI loads.

    The mpich wheel's MPI library loads UCX, which patches the process's memory
    functions as it loads: 41 ms of every rank's start on the 2-core box, about 2% of an
    ijcnn1 run. The hooks keep UCX's registration cache of network transfers valid (without
    them UCX does without the cache); ranks of one node talk through shared memory.
    """
    if "UCX_MEM_EVENTS" in os.environ:
        return
    for local, size in JOB_SIZE_VARS:
        if local in os.environ or size in os.environ:
            if os.environ.get(local) != os.environ.get(size):
                return  # ranks on other nodes, or a launcher that does not say
            break
    os.environ["UCX_MEM_EVENTS"] = "no"


# glibc's mallopt parameters, and its largest M_MMAP_THRESHOLD on 64-bit systems
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
HEAP_ARRAYS = 32 * 2**20


def keep_freed_memory() -> bool:
    """Have glibc's malloc keep memory that is freed for the process's next arrays, unless
    the user tuned malloc (``MALLOC_*`` variables, ``GLIBC_TUNABLES``); whether it did.

    By default glibc maps every array of more than 128 KB (then of more than the largest one
    freed) apart and unmaps it when it is freed, and it returns the heap's free top to the
    system: a later array of that size touches new pages, each a page fault, 2-5 µs on the
    2-core box. A psvm-train run makes the window's arrays anew at each cut and frees them at
    the next. With arrays of up to 32 MB on the heap and the heap kept whole, skin_nonskin
    took 41,000 faults instead of 52,000, and about 0.81 s instead of 0.92 s (a9a, w8a and
    ijcnn1 5-7% less), for 1-3% more peak memory (the heap holds what was freed; psvm's
    commands end after their run). Setting either threshold also stops glibc adjusting them.
    Called by psvm's commands only: their process is psvm's.
    """
    if any(k.startswith("MALLOC_") for k in os.environ) or "malloc" in os.environ.get(
        "GLIBC_TUNABLES", ""
    ):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
    except (OSError, TypeError):  # no C library to call (Windows)
        return False
    if not all(hasattr(libc, f) for f in ("gnu_get_libc_version", "mallopt")):  # glibc's
        return False
    return bool(
        libc.mallopt(M_MMAP_THRESHOLD, HEAP_ARRAYS) and libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1)
    )


def launched_by_mpiexec() -> bool:
    """True when this process was started by an MPI launcher."""
    return any(v in os.environ for v in _LAUNCHER_VARS)


def mpi_worker() -> bool:
    """True in a process forked or spawned by a rank of an MPI job: it must not use MPI.

    Forked: its parent is the rank that recorded its PID at import. Spawned:
    MPICH's PMI socket (``PMI_FD``), open in every rank, was not inherited.
    """
    if not launched_by_mpiexec():
        return False
    if os.environ.get(RANK_PID) == str(os.getppid()):
        return True
    fd = os.environ.get("PMI_FD")
    if fd is None:  # another launcher: only forks are recognised
        return False
    try:
        return not stat.S_ISSOCK(os.fstat(int(fd)).st_mode)
    except (OSError, ValueError):
        return True


if launched_by_mpiexec() and not mpi_worker():
    os.environ[RANK_PID] = str(os.getpid())


def everyone_arrives(comm, seconds: float) -> bool:
    """Whether every rank of ``comm`` joins a barrier within ``seconds``."""
    request = comm.Ibarrier()
    deadline = time.monotonic() + seconds
    while not request.Test():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def stop_line(prog: str, error: KeyboardInterrupt, rank: int | None = None) -> str:
    """The one line of a run stopped by a signal: ``PROG: interrupted`` (Ctrl-C) or ``PROG:
    terminated`` (SIGTERM), with the checkpoint saved then; ``rank``: the one rank it
    reached."""
    who = f"{prog}: rank {rank}" if rank is not None else prog
    if not isinstance(error, Terminated):
        return f"{who}: interrupted"
    saved = error.saved
    if error.checkpoint is not None:
        saved = f"checkpoint saved at iteration {error.checkpoint} (--resume goes on)"
    return f"{who}: terminated" + ("" if saved is None else f"; {saved}")


def interruption(error: BaseException | None) -> KeyboardInterrupt | None:
    """``error`` if it is a ``KeyboardInterrupt`` (:class:`Terminated`), or the one a
    compiled call was returning through, else None. A signal handler raises wherever
    Python next runs, and a numba call runs Python (to box its result, to build an
    exception): numba then raises a ``SystemError`` caused by the interrupt."""
    while isinstance(error, SystemError):
        error = error.__cause__ or error.__context__
    return error if isinstance(error, KeyboardInterrupt) else None


def stop_status(error: KeyboardInterrupt) -> int:
    """The exit status of a run stopped by a signal: 128 + the signal's number, as a shell's."""
    return 128 + (signal.SIGTERM if isinstance(error, Terminated) else signal.SIGINT)


def report(line: str | None, error: BaseException | None = None) -> None:
    """``line`` (and the traceback of ``error``) on stderr, flushed; streams failing are ignored."""
    try:
        if line is not None:
            print(line, file=sys.stderr)
        if error is not None:
            traceback.print_exception(type(error), error, error.__traceback__)
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # a MemoryError or a closed pipe must not stop the job's end
        pass


class Terminated(KeyboardInterrupt):
    """SIGTERM reached a psvm command (a batch scheduler's time limit, ``kill``): it stops as
    on Ctrl-C, with status 143, and the kernel solver saves its checkpoint first.
    ``checkpoint``: the iteration saved, if any; else ``saved``: what the checkpoint holds."""

    checkpoint: int | None = None
    saved: str | None = None


# psvm's commands own their process: their guards also watch SIGTERM (:func:`sigint_watch`)
WATCH_SIGTERM = False


# the signals a deferred block holds for its check: Ctrl-C's and SIGTERM under several ranks,
# SIGTERM alone with one process (only a checkpoint to save makes waiting for the check pay)
DEFER_ALL = frozenset((signal.SIGINT, signal.SIGTERM))
DEFER_SIGTERM = frozenset((signal.SIGTERM,))


class SigintWatch:
    """SIGINT's handler while a guard runs (and SIGTERM's, :data:`WATCH_SIGTERM`): it
    records the signal, and raises ``KeyboardInterrupt`` (:class:`Terminated` for SIGTERM)
    at once (Python's default) or, for the signals in ``defer``
    (:meth:`psvm.comm.Comm.deferred_interrupts`), at the ranks' next check.

    A rank in a compiled loop or a blocking collective sees a signal only when it
    returns to Python. Raised at once, mpiexec's Ctrl-C can leave a rank that saw it
    waiting for the others in its barrier while they wait for it in the loop's
    collective; deferred, every rank raises at the same check.
    """

    def __init__(self) -> None:
        self.seen = False  # Ctrl-C reached this rank, or the job through another rank
        self.terminated = False  # the signal was SIGTERM
        self.defer: frozenset = frozenset()

    def __call__(self, signum, frame) -> None:
        first, self.seen = not self.seen, True
        self.terminated |= signum == signal.SIGTERM
        # a second signal raises nothing: the job is ending, or waits for the check (a second
        # Ctrl-C makes mpiexec itself end the job)
        if first and signum not in self.defer:
            raise self.error()

    def error(self) -> KeyboardInterrupt:
        return Terminated() if self.terminated else KeyboardInterrupt()


WATCH: SigintWatch | None = None  # the running guard's, if it could set SIGINT's handler


@contextmanager
def sigint_watch() -> Iterator[SigintWatch]:
    """SIGINT's handler for a guard (:class:`SigintWatch`), Python's default restored after;
    SIGTERM's too in psvm's commands (:data:`WATCH_SIGTERM`), unless it has a handler.

    A real SIGINT under mpiexec is its Ctrl-C, sent to every rank; a
    KeyboardInterrupt raised any other way concerns one rank. Only the main
    thread can set handlers, and a handler of the user's own is left alone: the
    watch then sees nothing. A guard inside a guard shares the outer one's watch.
    """
    global WATCH
    if WATCH is not None:
        yield WATCH
        return
    watch = SigintWatch()
    main = threading.current_thread() is threading.main_thread()
    # each signal on its own: a batch script's background job ignores SIGINT, not SIGTERM
    sigint = main and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    term = main and WATCH_SIGTERM and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    if not (sigint or term):
        yield watch
        return
    if sigint:
        signal.signal(signal.SIGINT, watch)
    if term:
        signal.signal(signal.SIGTERM, watch)
    WATCH = watch
    try:
        yield watch
    finally:
        WATCH = None
        if sigint:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if term:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
