"""A solve's trace samples and phase times, as the engine leaves them, turned into the
statistics' traces and seconds (:class:`psvm.stats.Stats`) when those are read."""

from __future__ import annotations

import numpy as np

from psvm.svc import engine as E

# a solve's trace keeps at most this many samples: the engine's buffer holds one more, and
# when that one comes it thins them (:func:`psvm.svc.engine._record`)
TRACE_POINTS = 500
TRACES = ("iter", "gap", "active", "cache_misses", "seconds")
TRACE_TYPES = (np.int64, float, np.int64, np.int64, float)  # of TRACES' samples
ENGINE_TIMERS = (  # the engine's sampled phase timers, as the statistics name them
    ("select", E.T_SELECT),
    ("kernel", E.T_KERNEL),
    ("update", E.T_UPDATE),
)


def sampled_seconds(timers: np.ndarray, n_iter: int, timed: int, engine_seconds: float) -> dict:
    """The engine's phase times: select, kernel and update sampled on one iteration in
    ``TIMED_EVERY`` and scaled to all ``n_iter`` iterations; comm (the Allgathers) and the
    column fills (misses, columns carried over or completed, added to kernel) timed on every
    call. A stall of the machine in a timed iteration counts ``TIMED_EVERY`` times (a w8a fit
    once read 1.55 s of kernel in 0.89 s of training): the sampled sum is then cut, in
    proportion, to the rest of the engine calls' own time."""
    t = timers.tolist()  # (Python floats: cheaper than numpy scalars on a small solve)
    scale = max(n_iter, 1) / max(timed, 1)
    seconds = {name: t[k] * scale for name, k in ENGINE_TIMERS}
    comm, fills = t[E.T_COMM], t[E.T_FILLS]
    rest, total = max(engine_seconds - comm - fills, 0.0), sum(seconds.values())
    if total > rest:
        seconds = {name: v * rest / total for name, v in seconds.items()}
    seconds["kernel"] += fills
    seconds["comm"] = comm
    return seconds


def add_solve(
    samples: list, t_start: float, end: tuple | None, times: tuple, seconds: dict, traces: dict
) -> None:
    """A solve's record (:meth:`psvm.svc.solver.Solver._record`): its trace samples (the
    clock from the solve's start) and ``end``, the final state if the samples lack it,
    appended to ``traces``; its phase times (:func:`sampled_seconds` of ``times``) added to
    ``seconds``."""
    samples = [*samples[:-1], samples[-1] - t_start]
    for k, name in enumerate(TRACES):
        trace = traces[name]
        trace.extend(samples[k].tolist())
        if end is not None:
            trace.append(end[k])
    for name, v in sampled_seconds(*times).items():
        seconds[name] += v
