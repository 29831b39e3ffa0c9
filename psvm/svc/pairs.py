"""The class pairs of a one-vs-one fit, solved side by side in one process.

A multi-class fit solves k (k - 1) / 2 independent binary problems, and the compiled loop
releases the GIL. In one process, worker threads solve several pairs at once, each exactly
as it would be solved alone (a pair's arithmetic does not depend on its thread: the same
bits). The fit's thread budget (numba's count in the fitting thread: ``n_threads``, ``-o``)
goes to the pairs instead of to the columns of each pair, which on the rows of two classes
are mostly too short to split. Under mpiexec the ranks step through one pair at a time
together (collectives), and a checkpoint saves one pair at a time: there the pairs run one by
one (a rank that fits alone, a cross-validation fold of ``psvm-train -v``, is one process).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numba

from psvm.stats import Stats

# the first pair's solve time below which the others run one by one too: such pairs are mostly
# Python (a pair's set-up and read-out, about 0.4 ms), which threads would only queue for
PAIR_SECONDS = 0.002


# numba's threading layers that take parallel regions from several threads at once (its
# fallback, workqueue, aborts the process instead: the pairs' large columns and sums use them)
THREADSAFE_LAYERS = ("tbb", "omp")


def pair_workers(comm, checkpoint, n_pairs: int) -> int:
    """Threads that may solve the pairs: the fit's thread budget in one process, else 1."""
    if comm.size > 1 or checkpoint is not None or n_pairs < 2:
        return 1
    budget = numba.get_num_threads()  # (starts numba's threads: the layer is known then)
    if budget < 2 or numba.threading_layer() not in THREADSAFE_LAYERS:
        return 1
    return min(budget, n_pairs)


def solved_pairs(
    n_pairs: int,
    prepare: Callable[[int], tuple],
    solve: Callable[[int, object, Stats, threading.Event | None, int], object],
    stats: Stats,
    workers: int,
) -> Iterator[tuple[int, tuple, object]]:
    """(pair, ``prepare(pair)``, its result) for each pair, in pair order; close it (the
    caller's error stops the pairs running, ``contextlib.closing``).

    ``prepare(pair)`` (in the calling thread) gives the pair's job, whose last item is its
    problem; ``solve(pair, problem, stats, cancel, workers)`` solves it. With ``workers`` > 1
    the first pair is solved alone, timed: if it took :data:`PAIR_SECONDS` or more, the
    others go to ``workers`` threads (``stats.values["pair_threads"]``), each with statistics
    of its own added to ``stats`` in pair order: the same counts and traces as one by one,
    but for the cache's hits and misses where a pair's columns outgrow its share of the
    cache, and times that add up the threads'. At most twice as many pairs as threads are
    prepared ahead (their rows are copies). The results are read in pair order, so the first
    error in pair order is raised, as one by one (an error of ``prepare`` itself, memory,
    comes when it happens); an error or Ctrl-C sets ``cancel``, and the pairs still running
    stop at their next engine return.
    """
    first = 0
    if workers > 1 and n_pairs > 1:
        job = prepare(0)
        start = time.perf_counter()
        res = solve(0, job[-1], stats, None, 1)
        if time.perf_counter() - start < PAIR_SECONDS:
            workers = 1
        yield 0, job, res
        first = 1
    if workers < 2:
        for pair in range(first, n_pairs):
            job = prepare(pair)
            yield pair, job, solve(pair, job[-1], stats, None, 1)
        return
    stats.values["pair_threads"] = workers
    cancel = threading.Event()

    def run(pair: int, problem) -> tuple:
        own = Stats()
        return solve(pair, problem, own, cancel, workers), own

    each = max(1, numba.get_num_threads() // workers)  # (thread-local: each worker sets it)
    pending: deque = deque()
    pool = ThreadPoolExecutor(workers, initializer=numba.set_num_threads, initargs=(each,))
    with pool:
        try:
            for pair in range(first, n_pairs):
                if len(pending) == 2 * workers:
                    yield _done(pending.popleft(), stats)
                job = prepare(pair)
                pending.append((pair, job, pool.submit(run, pair, job[-1])))
            while pending:
                yield _done(pending.popleft(), stats)
        except BaseException:
            cancel.set()
            pool.shutdown(cancel_futures=True)
            raise


def _done(item: tuple, stats: Stats) -> tuple:
    """A pending pair's (pair, job, result), once solved; its statistics added to ``stats``."""
    pair, job, future = item
    res, own = future.result()
    stats.merge(own)
    return pair, job, res
