"""Errors and signals across a job's ranks: the guard that turns one rank's error into the
job's, and the collective checks that stop every rank alike on Ctrl-C or SIGTERM
(:class:`JobControl`, a part of :class:`psvm.comm.Comm`; the processes' side:
:mod:`psvm.comm.process`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import NoReturn, TypeVar

import numpy as np

from psvm.comm import process
from psvm.comm.process import (
    FORWARD_SECONDS,
    GRACE_SECONDS,
    Terminated,
    everyone_arrives,
    interruption,
    report,
    sigint_watch,
    stop_line,
    stop_status,
)

_Self = TypeVar("_Self", bound="JobControl")  # (typing.Self: Python 3.11)


class JobControl:
    """:class:`~psvm.comm.Comm`'s guard and interrupt checks, over its ``_c`` (None: one
    process), ``rank`` and ``size``."""

    @contextmanager
    def guard(self: _Self, prog: str = "psvm") -> Iterator[_Self]:
        """Turn an error of one rank into an error of the job, so that no rank waits forever.

        Agreed errors (``collective`` set: every rank raises them, e.g. through
        :meth:`agree`) propagate on every rank. Under several ranks anything
        else (a bug, a ``MemoryError``, a ``KeyboardInterrupt`` on one rank) ends
        the job with one message: ``PROG: rank R: unexpected error`` and the
        traceback, then ``MPI_Abort`` of COMM_WORLD (status 1), or ``PROG: rank R:
        interrupted`` (status 130). Ctrl-C, which mpiexec sends to every rank,
        prints ``PROG: interrupted`` once and every rank exits with status 130 (SIGTERM in
        psvm's commands: ``PROG: terminated``, 143). With one process every error propagates
        unchanged, but for the interrupt it stands for (:func:`_stopped_by`); psvm's commands
        watch the signals there too (the solver's checks).

        Collective: entering and leaving duplicate and free a communicator,
        on which the ranks find out that Ctrl-C reached them all.
        """
        if self._c is None:
            with sigint_watch() if process.WATCH_SIGTERM else nullcontext() as watch:
                try:
                    yield self
                except Exception as e:
                    stop = _stopped_by(e, watch)
                    if stop is None:
                        raise
                    raise stop from (None if stop is interruption(e) else e)
            return
        control = self._c.Dup()
        with sigint_watch() as watch:
            try:
                yield self
            except BaseException as e:
                if getattr(e, "collective", False) or isinstance(e, GeneratorExit):
                    control.Free()
                    raise
                self._end_job(prog, _stopped_by(e, watch) or e, control if watch.seen else None)
        control.Free()

    @contextmanager
    def deferred_interrupts(self, alone: bool = False) -> Iterator[None]:
        """A block whose Ctrl-C raises at its :meth:`check_interrupt` and
        :meth:`raise_if_interrupted` calls and at its end, on every rank alike (see
        :class:`~psvm.comm.process.SigintWatch`). Collective: every rank must make the same
        checks. Only the block defers, and the watch is the process's (its main thread's
        guard). ``alone``: with one process, defer SIGTERM in the main thread (the kernel
        solver with a checkpoint, saved at its check); Ctrl-C raises at once there."""
        watch = process.WATCH
        main = threading.current_thread() is threading.main_thread()
        if watch is None or (self._c is None and not (alone and main)):
            yield
            self.check_interrupt()
            return
        outer = watch.defer
        watch.defer = process.DEFER_ALL if self._c is not None else process.DEFER_SIGTERM
        try:
            yield
            self.check_interrupt()  # still deferred: a signal now waits for no other check
        finally:
            watch.defer = outer

    def interrupt_vote(self) -> float:
        """1.0 if Ctrl-C reached this rank, size + 1 if SIGTERM did, else 0.0: a slot of a sum
        (SGD's model average) or a maximum (:meth:`check_interrupt`) that the ranks make
        anyway, then read by :meth:`raise_if_interrupted`. Either says whether SIGTERM
        reached any rank: the votes exceed the size."""
        watch = process.WATCH
        if watch is None or not watch.seen:
            return 0.0
        return self.size + 1.0 if watch.terminated else 1.0

    def raise_if_interrupted(self, votes: float) -> None:
        """Raise ``KeyboardInterrupt`` if the ranks' summed (or greatest)
        :meth:`interrupt_vote` is positive, :class:`Terminated` if SIGTERM reached any rank:
        on every rank alike, as they read the same value."""
        if votes > 0:
            terminated = votes > self.size
            watch = process.WATCH
            if watch is not None:
                watch.seen, watch.terminated = True, terminated  # (as mpiexec forwards them)
            raise Terminated if terminated else KeyboardInterrupt

    def check_interrupt(self, vote: bool = False) -> bool:
        """Raise ``KeyboardInterrupt`` (:class:`Terminated`) on every rank if Ctrl-C (SIGTERM)
        reached any; else whether ``vote`` holds on any rank (collective; both in one small
        Allreduce). With one process, a signal the watch deferred raises here.

        Control traffic of the guard, like its barrier: not counted among the verbs.
        """
        if self._c is None:
            watch = process.WATCH
            if watch is not None and watch.defer:
                self.raise_if_interrupted(self.interrupt_vote())
            return vote
        from mpi4py import MPI

        flags = np.array([self.interrupt_vote(), vote])
        self._c.Allreduce(MPI.IN_PLACE, flags, op=MPI.MAX)
        self.raise_if_interrupted(flags[0])
        return bool(flags[1])

    def _end_job(self, prog: str, error: BaseException, control) -> NoReturn:
        """Report ``error`` once for the whole job and end every rank (never returns).

        ``control``: the guard's communicator when this rank received SIGINT.
        """
        interrupted = isinstance(error, KeyboardInterrupt)
        if interrupted and control is not None and everyone_arrives(control, GRACE_SECONDS):
            # Ctrl-C reached every rank: one line, then all leave MPI cleanly, so that no rank
            # is killed and mpiexec exits with 130 (it ORs the ranks' wait statuses)
            report(stop_line(prog, error) if self.rank == 0 else None)
            process.end_process(stop_status(error))
        if self.rank != 0:  # rank 0's one line and MPI_Abort end the job first if it fails too;
            # after Ctrl-C it may see the signal a while after this rank (a rank sees it when it
            # leaves a compiled call): two lines came out at P = 3 on two busy cores
            time.sleep(GRACE_SECONDS * (3 if interrupted and control is not None else 1))
        if interrupted:  # Ctrl-C that not every rank saw yet, or an interrupt of this rank
            report(stop_line(prog, error, None if control else self.rank))
        else:
            report(f"{prog}: rank {self.rank}: unexpected error", error)
        time.sleep(FORWARD_SECONDS)
        try:  # MPICH prints its own "Abort(1) on node 0 ..." line: ours said it all
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
        except OSError:
            pass
        _abort_job(stop_status(error) if interrupted else 1)


def _abort_job(code: int) -> NoReturn:
    """MPI_Abort on COMM_WORLD, whatever the communicator: MPICH aborts another communicator
    with a message to each rank, which a rank already in MPI_Finalize never reads, and the job
    hung (3 of 40 runs of ``mpiexec -n 2`` on this VM). COMM_WORLD's abort goes through the
    process manager, which kills every rank."""
    from mpi4py import MPI

    MPI.COMM_WORLD.Abort(code)
    raise AssertionError("MPI_Abort returned")  # pragma: no cover


def _stopped_by(error: BaseException, watch) -> KeyboardInterrupt | None:
    """The interrupt that ``error`` stands for, if any: itself, the one a compiled call was
    returning through (:func:`~psvm.comm.process.interruption`), or a signal the guard's watch
    saw whose interrupt never reached Python's stack. A handler's exception raised inside a
    ctypes callback (numba's object cache, loading compiled code) is printed and dropped, and
    the run failed later with another error (1 of about 40 SIGTERMs to psvm-predict, session
    53). An error raised while the interrupt was handled (a checkpoint that could not be
    saved: agreed, or chained to it) is the run's error."""
    stop = interruption(error)
    if stop is not None or watch is None or not watch.seen or getattr(error, "collective", False):
        return stop
    cause = error
    while cause is not None:
        if isinstance(cause, KeyboardInterrupt):
            return None
        cause = cause.__cause__ or cause.__context__
    return watch.error()
