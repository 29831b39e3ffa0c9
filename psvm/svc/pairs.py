"""The class pairs of a one-vs-one fit: side by side on threads in one process, or dealt
out to the ranks, each solved whole by one rank.

A multi-class fit solves k (k - 1) / 2 independent binary problems, each with the same bits
however it is solved (alone, on a thread, or by ranks together: the model does not depend on
P). In one process, worker threads solve several pairs at once (:func:`solved_pairs`; the
compiled loop releases the GIL): the fit's thread budget (numba's count in the fitting
thread: ``n_threads``, ``-o``) goes to the pairs instead of to the columns of each pair,
which on the rows of two classes are mostly too short to split. Under mpiexec the ranks
either step through each pair together (collectives twice an iteration) or, when the pairs
are many and small enough for every rank to hold all rows, each rank solves the pairs dealt
to it alone and the results are exchanged once (:func:`deal`, :func:`dealt_pairs`). A
checkpoint saves one pair at a time: there the pairs run one by one, together.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing

import numba
import numpy as np

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
    prepare: Callable[[int], object],
    solve: Callable[[int, object, Stats, threading.Event | None, int], object],
    stats: Stats,
    workers: int,
) -> Iterator[tuple[int, object]]:
    """(pair, its result) for each pair, in pair order; close it (the caller's error stops
    the pairs running, ``contextlib.closing``).

    ``prepare(pair)`` (in the calling thread) gives the pair's problem;
    ``solve(pair, problem, stats, cancel, workers)`` solves it. With ``workers`` > 1
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
    first, workers = 0, workers if n_pairs > 1 else 1
    if workers > 1:
        problem = prepare(0)
        start = time.perf_counter()
        res = solve(0, problem, stats, None, 1)
        if time.perf_counter() - start < PAIR_SECONDS:
            workers = 1
        yield 0, res
        first = 1
    if workers < 2:
        for pair in range(first, n_pairs):
            yield pair, solve(pair, prepare(pair), stats, None, 1)
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
                pending.append((pair, pool.submit(run, pair, prepare(pair))))
            while pending:
                yield _done(pending.popleft(), stats)
        except BaseException:
            cancel.set()
            pool.shutdown(cancel_futures=True)
            raise


def _done(item: tuple, stats: Stats) -> tuple:
    """A pending pair's (pair, result), once solved; its statistics added to ``stats``."""
    pair, future = item
    res, own = future.result()
    stats.merge(own)
    return pair, res


# pairs are dealt out while the ranks are busy this share of the time on average: a rank
# solving a pair alone makes no collective, where ranks stepping through a pair together wait
# on two Allgathers an iteration, which on pairs of a few thousand rows cost more than the work;
# three pairs of 16,000 rows at P = 2 (a share of 0.75) trained 8% faster together
DEAL_SHARE = 0.8


def pair_sizes(comm, cls: np.ndarray, kept: np.ndarray, pairs: list) -> np.ndarray:
    """Each class pair's global rows: those of its two classes (``cls``, codes; -1: none)
    that are ``kept`` (collective)."""
    k = max(max(pair) for pair in pairs) + 1
    n_class = comm.sum_(np.bincount(cls[kept & (cls >= 0)], minlength=k))
    return np.array([n_class[a] + n_class[b] for a, b in pairs])


def spread(comm, shard, *local):
    """Every rank's rows (:meth:`~psvm.io.shard.Shard.whole`), the per-row arrays ``local``
    gathered likewise (None stays None), and a communicator of this process alone: the
    start of pairs dealt to the ranks (collective)."""
    from psvm.comm import alone

    gathered = (None if a is None else comm.allgatherv(a) for a in local)
    return shard.whole(comm), *gathered, alone(comm)


def deal(comm, pair_rows: np.ndarray, shard) -> np.ndarray | None:
    """Each pair's rank, if the ranks should solve whole pairs alone, else None (collective).

    The pairs (``pair_rows``: their global rows) go longest first to the least loaded rank
    (ties: the lower pair, the lower rank), a pair of n rows costing n^2 (SMO's iterations and
    columns both grow with n). Dealt when that keeps the ranks busy :data:`DEAL_SHARE` of the
    time on average (total cost >= DEAL_SHARE x P x the busiest rank's) and every rank of a
    node may hold all rows (:func:`psvm.io.shard.replicable`).
    """
    from psvm.io.shard import replicable

    if comm.size == 1 or pair_rows.size < 2:
        return None
    cost = np.asarray(pair_rows, dtype=np.float64) ** 2
    owner, load = np.empty(cost.size, dtype=np.int64), np.zeros(comm.size)
    for pair in np.argsort(-cost, kind="stable"):
        owner[pair] = rank = int(np.argmin(load))
        load[rank] += cost[pair]
    if cost.sum() < DEAL_SHARE * comm.size * load.max() or not replicable(comm, shard):
        return None
    return owner


def dealt_pairs(
    comm,
    owner: np.ndarray,
    prepare: Callable[[int], object],
    solve: Callable[..., tuple[object, list[str]]],
    stats: Stats,
    workers: int,
    shows: bool,
    live: Callable[[str], None] | None = None,
) -> Iterator[tuple[int, tuple[object, list[str]]]]:
    """(pair, (its result, its log lines)) for each pair, in pair order, on every rank
    (collective). Rank ``owner[pair]`` solves the pair alone (:func:`solved_pairs`, on
    ``workers`` threads): ``solve(pair, problem, stats, cancel, workers, log)`` gives the
    result and the lines after it, ``log`` collecting the pair's progress lines before them
    where ``shows`` (whether rank 0 logs: the same on every rank), or, given ``live`` (rank
    0's log, for lines that may come out of order: progress), writing them as they come.
    Then the ranks exchange results and statistics once; each rank adds every pair's
    statistics to ``stats``, another rank's as :meth:`~psvm.stats.Stats.merge` says
    (``values["pairs_dealt"]``). The first error in pair order is raised on every rank (a
    rank stops at its first error; the lowest of those is the first of all)."""
    mine = np.flatnonzero(owner == comm.rank)

    def solve_mine(i: int, problem, _, cancel, workers: int) -> tuple:
        pair_stats, lines = Stats(), []
        log = live or (lines.append if shows else None)
        res, after = solve(int(mine[i]), problem, pair_stats, cancel, workers, log)
        return (res, lines + after), pair_stats

    def prepare_mine(i: int):
        return prepare(int(mine[i]))

    own, error = {}, None
    try:
        solved = solved_pairs(mine.size, prepare_mine, solve_mine, stats, workers)
        with closing(solved):
            for i, out in solved:
                own[int(mine[i])] = out
    except Exception as e:  # a pair's agreed error (values not finite): raised below
        if not getattr(e, "collective", False):
            raise  # (Comm.guard ends the job)
        error = (int(mine[len(own)]), e)  # (the next pair's: ``prepare`` raises none agreed)
    solved_all, errors = {}, []
    for part, err in comm.allgather_obj((own, error)):
        solved_all.update(part)
        errors += [err] if err is not None else []
    if errors:
        raise min(errors, key=lambda e: e[0])[1]
    stats.values["pairs_dealt"] = comm.size
    for pair in range(owner.size):
        out, pair_stats = solved_all.pop(pair)
        stats.merge(pair_stats, own=owner[pair] == comm.rank)
        yield pair, out
