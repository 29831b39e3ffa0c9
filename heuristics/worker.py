"""Run a list of ``psvm-train`` jobs inside one ``mpiexec`` launch; one JSON record per run.

    mpiexec -n P python -m heuristics.worker plan.json

Each run calls :func:`psvm.cli.train.main` with its argv (wall and CPU
seconds of that call are recorded per rank): the same code path as the ``psvm-train``
command, in a process set up as psvm-train's is (malloc keeps freed memory), without paying
interpreter start-up and the numba cache load once per run (an optional warm-up run,
discarded, pays it once). Before each run the garbage of the last is collected (untimed: a pass over
an approximate run's objective took the next run's load 50 ms), the communicator's
per-verb counters are cleared and the ranks meet, so the statistics and timers
cover that run only. Rank 0
then reads the statistics and the model file, predicts the test file and
appends the record to ``plan["out"]``.

Plan keys: ``train``, ``test``, ``n_features``, ``workdir``, ``out``,
``runs`` (``flags``: psvm-train options; ``meta``: copied into the record;
``traces``: keep the sampled traces; ``accuracy``: false skips predicting the
test file (repeats); ``exact_objective``: recompute the dual
objective from the model's support vectors, for runs whose own value is not
exact), ``warmup`` (flags or null).
"""

from __future__ import annotations

import gc
import json
import os
import resource
import shlex
import sys
import time

MAX_TRACE = 100  # trace points kept per record (uniformly sampled, last point kept)


def peak_rss_mb() -> float:
    """This process's high-water resident set size (Linux: ru_maxrss is in KiB)."""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(kb / (1 if sys.platform != "darwin" else 1024) / 1024, 1)


def cpu_seconds() -> float:
    """User + system CPU time of this process: unlike wall time, barely moved by other jobs
    competing for the cores (MPICH polls while it waits, so a waiting rank still counts)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def sample_traces(traces: dict, limit: int = MAX_TRACE) -> dict:
    """Keep at most ``limit`` evenly spaced points of every trace (same points for all)."""
    n = max((len(v) for v in traces.values()), default=0)
    if n <= limit:
        return traces
    step = (n - 1) / (limit - 1)
    keep = sorted({round(k * step) for k in range(limit)})
    return {k: [v[i] for i in keep if i < len(v)] for k, v in traces.items()}


def slim_stats(stats: dict, keep_traces: bool) -> dict:
    """The statistics of a record: traces sampled, or dropped when not kept."""
    out = dict(stats)
    if keep_traces:
        out["traces"] = sample_traces(stats.get("traces", {}))
        out["per_rank"] = [
            {**r, "traces": sample_traces(r.get("traces", {}))} for r in stats.get("per_rank", [])
        ]
    else:
        out.pop("traces", None)
        out["per_rank"] = [
            {k: v for k, v in r.items() if k != "traces"} for r in stats.get("per_rank", [])
        ]
    return out


def main(plan_path: str) -> int:
    from psvm.comm.process import keep_freed_memory

    keep_freed_memory()  # as psvm-train's process does
    from psvm.cli import train
    from psvm.comm import world

    with open(plan_path) as f:
        plan = json.load(f)
    comm = world()
    work, nf = plan["workdir"], int(plan["n_features"])
    model_path = os.path.join(work, "model.txt")
    stats_path = os.path.join(work, "stats.json")
    test = None  # read on rank 0 after the first run, so it is not in that run's peak RSS
    tail = ["--n-features", str(nf), "--stats", stats_path, plan["train"], model_path]
    if plan.get("warmup"):
        train.main(["-q", *plan["warmup"], *tail])
    for run in plan["runs"]:
        argv = ["-q", *run["flags"], *tail]
        gc.collect()  # the last run's garbage (an approximate run's objective) is not this one's
        comm.allgather_obj(None)  # start together
        comm.counters.clear()
        c0, t0 = cpu_seconds(), time.perf_counter()
        rc = train.main(argv)
        wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
        rss, cpu = zip(*comm.allgather_obj((peak_rss_mb(), cpu)), strict=True)
        if comm.rank != 0:
            continue
        record = {
            "schema": 1,
            "kind": "psvm",
            **run.get("meta", {}),
            "ranks": comm.size,
            "command": f"mpiexec -n {comm.size} psvm-train {shlex.join(argv)}",
            "returncode": rc,
            "wall_seconds": wall,
            "cpu_seconds": list(cpu),
            "peak_rss_mb": list(rss),
        }
        if rc == 0:
            test = _add_results(record, run, plan, model_path, stats_path, test)
        with open(plan["out"], "a") as f:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
    return 0


def _add_results(record: dict, run: dict, plan: dict, model_path: str, stats_path: str, test):
    """Add a finished run's statistics, test accuracy and recomputed objective to its record;
    the test set, read on the first run that needs it."""
    import numpy as np

    from psvm.io.linear_model_file import read_any_model

    with open(stats_path) as f:
        stats = json.load(f)
    model = read_any_model(model_path)
    if run.get("accuracy", True):
        if test is None:
            from psvm.io.libsvm_format import read_libsvm

            test = read_libsvm(plan["test"], n_features=int(plan["n_features"]))
        Xt, yt = test
        record["accuracy"] = float(np.mean(model.predict(Xt) == yt))
        record["n_test"] = int(yt.size)
    record["stats"] = slim_stats(stats, bool(run.get("traces", True)))
    binary_rbf = getattr(model, "kernel", None) == "rbf" and len(model.classes) == 2
    if run.get("exact_objective") and binary_rbf:
        from heuristics.bench import dual_objective

        # psvm's own value uses the stale gradients of rows never reconstructed
        record["objective_recomputed"] = dual_objective(
            model.support_vectors, model.dual_coef, model.gamma
        )
    return test


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
