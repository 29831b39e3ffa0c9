"""Run statistics: counters, timers and traces, owned by one solver per rank.

The compiled solver loop keeps its counters, sampled timers and traces in
arrays and hands them over at each return (:mod:`psvm.svc.solver`); no
collective is ever run just to record a statistic; :func:`reduce_stats`
combines the ranks once, at the end.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Callable

import numpy as np


def progress_log(show: bool) -> Callable[[str], None] | None:
    """A fit's log (progress and summary lines): :func:`_print_line` where ``show`` (rank 0,
    not quiet), else None."""
    return _print_line if show else None


def _print_line(message: str) -> None:
    """``message`` and its newline in one write (``print`` writes them apart, and the class
    pairs on threads log side by side), flushed: under mpiexec a rank's stdout is a pipe,
    which Python buffers until the exit; svm-train flushes each message as well."""
    sys.stdout.write(f"{message}\n")
    sys.stdout.flush()


class _Timer:
    __slots__ = ("stats", "name", "t0")

    def __init__(self, stats: Stats, name: str):
        self.stats, self.name = stats, name

    def __enter__(self):
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        # (a sum, which the records' order does not change: they can wait)
        self.stats._seconds[self.name] += time.perf_counter() - self.t0


class Stats:
    """Per-rank counters (``n_iter``, ``cache_hits``...), timers and traces.

    A solve may hand its times and traces over as a record (:meth:`later`), kept until
    ``seconds`` or ``traces`` is first read: converting them cost an iris fit a twentieth of
    its time, and most fits never read them (pairs on threads or ranks are read at their
    merge). One thread at a time, as the rest of a fit's statistics."""

    def __init__(self):
        self.counts: dict[str, int] = defaultdict(int)
        self._seconds: dict[str, float] = defaultdict(float)
        self._traces: dict[str, list] = defaultdict(list)
        self.values: dict = {}
        self._later: list[Callable[[dict, dict], None]] = []

    @property
    def seconds(self) -> dict[str, float]:
        self._apply()
        return self._seconds

    @property
    def traces(self) -> dict[str, list]:
        self._apply()
        return self._traces

    def __getstate__(self) -> dict:
        """The records applied first: a pickle holds plain values, not the functions that
        make them (which may move between versions)."""
        self._apply()
        return self.__dict__

    def __setstate__(self, state: dict) -> None:
        """A pickle made before records (times and traces as plain attributes) loads too."""
        for name in ("seconds", "traces"):
            if name in state:
                state[f"_{name}"] = state.pop(name)
        state.setdefault("_later", [])
        self.__dict__.update(state)

    def later(self, record: Callable[[dict, dict], None]) -> None:
        """Apply ``record(seconds, traces)`` when either is next read (records in order)."""
        self._later.append(record)

    def _apply(self) -> None:
        if self._later:
            records, self._later = self._later, []
            for record in records:
                record(self._seconds, self._traces)

    def timer(self, name: str) -> _Timer:
        return _Timer(self, name)

    def add(self, name: str, k: int = 1) -> None:
        self.counts[name] += k

    def merge(self, other: Stats, own: bool = True) -> None:
        """Add ``other``'s counters and times, and append its traces (a part of the same run,
        solved apart: :mod:`psvm.svc.pairs`). ``own`` False: another rank solved that part,
        so this rank takes only what every rank keeps alike (:data:`SHARED_COUNTS`, the
        traces but for zeros in :data:`SUMMED_TRACES`): :func:`reduce_stats` then counts
        the part once."""
        for name, k in other.counts.items():
            if own or name in SHARED_COUNTS:
                self.counts[name] += k
        if own:
            for name, v in other.seconds.items():
                self.seconds[name] += v
        for name, trace in other.traces.items():
            zeros = not own and name in SUMMED_TRACES
            self.traces[name].extend([0] * len(trace) if zeros else trace)
        self.values.update(other.values)

    def to_dict(self) -> dict:
        return {
            "counts": dict(self.counts),
            "seconds": dict(self.seconds),
            "traces": {k: list(v) for k, v in self.traces.items()},
            "values": dict(self.values),
        }


# Counters every rank keeps identically (the loop runs in lockstep): not summed.
SHARED_COUNTS = frozenset(
    {"n_iter", "n_reconstruct", "n_sync", "n_msf_backoff", "n_checkpoint", "n_max_iter"}
)
# Traces of per-rank quantities whose global value is the sum over ranks.
SUMMED_TRACES = frozenset({"active", "cache_misses"})


def hit_rate(counts: dict) -> float:
    """The kernel cache's hits over its look-ups (0 without any)."""
    hits, misses = counts.get("cache_hits", 0), counts.get("cache_misses", 0)
    return hits / (hits + misses) if hits + misses else 0.0


def reduce_stats(comm, stats: Stats) -> dict:
    """Combine per-rank statistics: counters summed, times as max over ranks.

    Counters in :data:`SHARED_COUNTS` are the same on every rank and taken once.

    Also lists every rank's own counters (``per_rank``) to show load imbalance.
    Collective: call it on every rank. ``comm`` None: one process (which counts no
    communication).
    """
    mine = stats.to_dict()
    mine["comm"] = {k: list(v) for k, v in comm.counters.items()} if comm is not None else {}
    ranks = comm.allgather_obj(mine) if comm is not None else [mine]
    keys_c = sorted({k for r in ranks for k in r["counts"]})
    keys_s = sorted({k for r in ranks for k in r["seconds"]})
    verbs = sorted({k for r in ranks for k in r["comm"]})
    return {
        "schema": 1,
        "ranks": comm.size if comm is not None else 1,
        "counts": {
            k: ranks[0]["counts"].get(k, 0)
            if k in SHARED_COUNTS
            else sum(r["counts"].get(k, 0) for r in ranks)
            for k in keys_c
        },
        "seconds_max": {k: max(r["seconds"].get(k, 0.0) for r in ranks) for k in keys_s},
        "comm": {
            v: {
                "calls": max(r["comm"].get(v, [0, 0, 0])[0] for r in ranks),
                "bytes": sum(r["comm"].get(v, [0, 0, 0])[1] for r in ranks),
                "seconds_max": max(r["comm"].get(v, [0, 0, 0])[2] for r in ranks),
            }
            for v in verbs
        },
        "values": mine["values"],
        # traces are sampled at the same iterations on every rank (the loop is lockstep, or
        # every rank appends every pair's: :mod:`psvm.svc.pairs`)
        "traces": {
            k: (
                np.sum([r["traces"][k] for r in ranks], axis=0).tolist()
                if k in SUMMED_TRACES and len(ranks) > 1
                else v
            )
            for k, v in mine["traces"].items()
        },
        "per_rank": [
            {
                "counts": r["counts"],
                "seconds": r["seconds"],
                "traces": {k: r["traces"][k] for k in SUMMED_TRACES if k in r["traces"]},
            }
            for r in ranks
        ],
    }
