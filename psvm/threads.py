"""How many numba threads each rank runs: by default, its share of the node's cores.

numba's pool has one thread per core in every process, so P ranks on one node
would run P times as many threads as there are cores, and ``mpiexec -n 2`` on
two cores would be slower than one process. By default the ranks of a node
share its cores instead: ``cores // ranks on the node`` threads each (at least
one), never more than numba's pool (``NUMBA_NUM_THREADS``, the cores by
default). An explicit count (``psvm-train -o N``, ``n_threads=N``) overrides
the default, within numba's pool. psvm's commands give numpy's OpenBLAS pool the
same share (:func:`share_blas_threads`).
"""

from __future__ import annotations

import numbers
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from psvm._params import ParameterError


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity (macOS, Windows)
        return os.cpu_count() or 1


def core_share(local_ranks: int) -> int:
    """This rank's share of the usable cores when ``local_ranks`` ranks share the node."""
    return max(1, usable_cores() // max(1, int(local_ranks)))


def default_threads(local_ranks: int) -> int:
    """:func:`core_share`, within numba's pool."""
    import numba

    return min(core_share(local_ranks), numba.config.NUMBA_NUM_THREADS)


# (ranks on this node, ranks in the job) as launchers tell them: MPICH's hydra, Open MPI
JOB_SIZE_VARS = (
    ("MPI_LOCALNRANKS", "PMI_SIZE"),
    ("OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE"),
)


def _launcher_number(names, low: int, default: int) -> int:
    """The first of the environment variables ``names`` that holds an int >= ``low``."""
    for var in names:
        value = os.environ.get(var, "")
        if value.isdigit() and int(value) >= low:
            return int(value)
    return default


def launcher_local_ranks() -> int:
    """The ranks of this job on this node as the launcher tells them (MPICH's
    ``MPI_LOCALNRANKS``, Open MPI's ``OMPI_COMM_WORLD_LOCAL_SIZE``), 1 outside
    mpiexec: for work local to a rank (predict), which cannot ask the others."""
    return _launcher_number((local for local, _ in JOB_SIZE_VARS), 1, 1)


# this process's rank among the node's: MPICH's hydra, Open MPI, PMIx launchers, Slurm's srun
# (last: a job script's own SLURM_LOCALID reaches the ranks an mpiexec in it starts)
LOCAL_RANK_VARS = (
    "MPI_LOCALRANKID",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMIX_LOCAL_RANK",
    "SLURM_LOCALID",
)


def launcher_local_rank() -> int:
    """This process's rank among the node's as the launcher tells it
    (:data:`LOCAL_RANK_VARS`), 0 outside a launcher."""
    return _launcher_number(LOCAL_RANK_VARS, 0, 0)


# OpenBLAS's thread count, in the order it reads them
BLAS_THREADS_VARS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def share_blas_threads() -> None:
    """Give numpy's OpenBLAS this rank's share of the node's cores when a launcher started
    several ranks on it, unless the user set its count; call it before numpy loads.

    OpenBLAS starts a thread per core when it loads, and an idle one spins for about 0.1 s
    before it sleeps: under ``mpiexec -n 2`` on two cores each rank's spare thread took the
    other rank's core while both started (the README job: 0.51-0.67 s wall, 0.47-0.52 s with
    one thread a rank). psvm's commands train without BLAS.
    """
    local = launcher_local_ranks()
    if local > 1 and not any(v in os.environ for v in BLAS_THREADS_VARS):
        os.environ[BLAS_THREADS_VARS[0]] = str(core_share(local))


def check_threads(n, name: str = "n_threads") -> int | None:
    """``n`` as a positive int, or None for the default (None or 0); else a ParameterError."""
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ParameterError(
            f"{name} must be a positive integer (0 or None: the default), got {n!r}"
        )
    return int(n) or None


def thread_count(n, comm, name: str = "n_threads") -> int:
    """This rank's numba thread count for ``n``.

    ``n`` None or 0: the default, :func:`default_threads` of the ranks of
    ``comm`` on this node; ``comm`` None: of the launcher's count
    (:func:`launcher_local_ranks`). A positive ``n`` is used as given, capped at
    numba's pool. ``name`` is the parameter named in a validation error
    (``n_threads``, ``-o``), checked before the collective. Collective over ``comm``
    whatever ``n`` (:meth:`~psvm.comm.Comm.local_size`: its first call on a communicator):
    the ranks' counts may differ (a rank's own ``n_threads``), their calls may not.
    """
    import numba

    n = check_threads(n, name)
    local = node_ranks(comm)
    return min(default_threads(local) if n is None else n, numba.config.NUMBA_NUM_THREADS)


def node_ranks(comm) -> int:
    """The ranks of ``comm`` on this node (a collective), or the launcher's count with
    ``comm`` None."""
    return comm.local_size() if comm is not None else launcher_local_ranks()


def thread_warning(n, comm, name: str = "n_threads") -> str | None:
    """Why an explicit thread count ``n`` will not run as asked, or None: numba's pool is
    smaller (the count is capped), or the threads outnumber the cores. Over two cores,
    ``mpiexec -n 2`` with 2 threads a rank trained w8a 10x slower than with one: a parallel
    loop waits for its threads' time slices. The node's ranks are ``comm``'s (a collective),
    or the launcher's count with ``comm`` None. Ranks whose CPU sets together fit the
    machine are taken as pinned, each to its own set (Open MPI binds ranks to cores).
    Collective over ``comm`` whatever ``n``, as :func:`thread_count`."""
    import numba

    asked = check_threads(n, name)
    local = node_ranks(comm)  # (every rank calls the collective, whatever its count)
    if asked is None:
        return None
    pool, cores = numba.config.NUMBA_NUM_THREADS, usable_cores()
    used, notes = min(asked, pool), []
    if asked > pool:
        has = f"{pool} threads" if pool > 1 else "one thread"
        notes.append(f"numba's pool has {has} (NUMBA_NUM_THREADS); using {pool}")
    each = f"{used} thread{'s' if used > 1 else ''}"
    if local > 1 and cores * local <= (os.cpu_count() or cores):  # pinned: its own cores
        threads, where = used, f"{each} on this rank's"
    else:
        threads = local * used
        where = f"{local} ranks x {each} on" if local > 1 else f"{each} on"
    if threads > cores:
        notes.append(
            f"{where} {cores} core{'s' if cores > 1 else ''}: they wait for each other's "
            f"time slices, which can make training many times slower (without {name} the "
            f"ranks share the cores)"
        )
    return f"{name} {asked}: " + "; ".join(notes) if notes else None


def apply_threads(n, comm, name: str = "n_threads") -> int:
    """Set numba's thread count to :func:`thread_count` and return it."""
    import numba

    n = thread_count(n, comm, name)
    numba.set_num_threads(n)
    return n


def _callers_level() -> int:
    """warnings.warn's stacklevel, from its caller, of the first frame outside psvm and
    contextlib: the user's line, through however many of psvm's context managers."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in (
        "psvm",
        "contextlib",
    ):
        frame, level = frame.f_back, level + 1
    return level


@contextmanager
def rank_threads(n, comm, name: str = "n_threads") -> Iterator[int]:
    """:func:`thread_count` for the block (it yields the count), then numba's previous count.
    numba's count is set only when it changes: each set costs microseconds (a small fit's 2%)."""
    import numba

    # an explicit count (the default never oversubscribes); one warning a node, not a rank:
    # the ranks of a node see the same pool and cores
    if n and launcher_local_rank() == 0:
        warning = thread_warning(n, None, name)
        if warning is not None:
            warnings.warn(warning, RuntimeWarning, stacklevel=_callers_level())
    old, n = numba.get_num_threads(), thread_count(n, comm, name)
    if n == old:
        yield n
        return
    numba.set_num_threads(n)
    try:
        yield n
    finally:
        numba.set_num_threads(old)


@contextmanager
def numba_threads(n_jobs, comm=None) -> Iterator[None]:
    """Run the block with ``n_jobs`` numba threads (-1: all, -2: all but one), then restore.

    The older knob of :class:`psvm.SVC` (``n_jobs``); None leaves the count alone. With
    ``comm``, a collective, as :func:`thread_count`: the other ranks may count by default.
    """
    if comm is not None:
        comm.local_size()  # (the collective of the ranks that count by default)
    if n_jobs is None:
        yield
        return
    import numba

    top = numba.config.NUMBA_NUM_THREADS
    n = n_jobs if n_jobs > 0 else top + 1 + n_jobs
    old = numba.get_num_threads()
    numba.set_num_threads(max(1, min(n, top)))
    try:
        yield
    finally:
        numba.set_num_threads(old)
