"""How much time could elimination save at best? Traces of `none` against `earliest`.

    python benchmarks/elimination_bound.py --data a9a,w8a,ijcnn1,skin_nonskin --repeat 5
    python benchmarks/elimination_bound.py --data w8a --repeat 5 --heuristic lazy

For each data set (full training file, one process) psvm-train runs without
elimination and with ``earliest`` (it tests the rule every iteration). Until
``earliest`` has eliminated half of the rows, no heuristic can have done
much better, since they all apply the same rule, later. The share of the
`none` run's training time spent before that iteration bounds what any
heuristic can save: even if every later iteration were free, it would save
at most the rest. psvm-report computes the same bound from its study's traces
(:func:`heuristics.report.summary.elimination_bound`).

``earliest``'s iterations do not depend on the clock, but the share of ``none``'s time
before them does: on a shared VM one run's bound moved by up to 10 points (w8a 78-84%,
skin_nonskin 63-73% in one hour). ``--repeat N`` times ``none`` N times and reports the
median bound with the range.

``--heuristic H`` (default ``frequent``, psvm's; ``''``: none) also times H in the same
worker, its runs alternating with ``none``'s, and prints what H saves against ``none``
(medians) and that saving's share of the bound (#14's target: 70% at P = 1, default threads).
``--ranks`` and ``--threads`` (``-o``) measure the same at another P or thread count: for
analysis, not the target, which is measured as users run psvm-train. Timed in one process
and in the same minutes, ``none`` and H see the same machine: on a VM whose speed drifts by
10-20% within an hour, a share from two scripts' runs can move by as much (session 37).

Two more columns say what the rest of H's time is made of. ``overhead s``: the median of
H's reconstruction and window-cut seconds, work that ``none`` never does and the bound
counts as free; ``share w/o`` is the share H would reach if that work cost nothing.
``rows/earliest``: H's active rows over ``earliest``'s after the half-way iteration
(summed over ``earliest``'s trace points); near 1, H's windows are as small as the rule allows, so
its iterations there cannot get much cheaper by eliminating earlier.

Two columns say how much of the bound the rule leaves within reach (session 57).
``ceiling``: the share of the bound saved by a heuristic that knew ``earliest``'s active
rows for nothing: at each iteration its window holds just those, each row costing what
one of ``none``'s costs at that iteration, with no test, cut or reconstruction
(:func:`heuristics.report.summary.rule_ceiling`, the median over ``none``'s runs). The
bound counts the iterations after the half-way one as free; no heuristic of the rule gets
them so. (Above 100% on small sets: the ceiling also saves before the half-way iteration,
where the bound counts ``none``'s time.) ``ceiling+overhead``: the same heuristic paying
H's reconstructions and cuts, which an exact heuristic cannot skip (the stale rows' G
must be brought up to date to stop).
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np

from heuristics.bench import DATASETS, dataset_paths, run_worker
from heuristics.report.summary import elimination_bound, rule_ceiling


def traces(name: str, heuristics: list[str], ranks: int = 1, threads: int = 0) -> list[dict]:
    """The statistics of traced runs in one worker of ``ranks`` ranks (``threads`` each,
    0: the default), one run per entry of ``heuristics`` in that order, after one warm-up
    run of the first."""
    ds = DATASETS[name]
    train, test = dataset_paths(ds, None, None)
    flags = ["-c", f"{ds.C:g}", "-g", f"{ds.gamma:g}", "-m", "200"]
    flags += [*(["-o", str(threads)] if threads else []), "--heuristic"]
    plan = {
        "train": train,
        "test": test,
        "n_features": ds.n_features,
        "warmup": [*flags, heuristics[0]],
        "runs": [{"flags": [*flags, h], "traces": True, "accuracy": False} for h in heuristics],
    }
    with tempfile.TemporaryDirectory(prefix="psvm-bound-") as work:
        return [rec["stats"] for rec in run_worker(ranks, plan, work)]


def overhead(stats: dict) -> float:
    """A run's seconds in work only elimination does: reconstructions and window cuts."""
    sec = stats["seconds_max"]
    return sec.get("reconstruct", 0.0) + sec.get("cut", 0.0)


def rows_ratio(trace: dict, earliest: dict, half: int) -> float:
    """The run's active rows over ``earliest``'s from iteration ``half`` on, summed over
    ``earliest``'s trace points there (the run's read where they fall)."""
    it = np.asarray(earliest["iter"], float)
    after = it >= half
    theirs = np.asarray(earliest["active"], float)[after]
    at = np.asarray(trace["iter"], float)
    mine = np.interp(it[after], at, np.asarray(trace["active"], float))
    return float(mine.sum() / theirs.sum()) if theirs.sum() > 0 else float("nan")


def _share(saving: float, before: float, width: int) -> str:
    """A saving as a share of the bound, ``width`` wide ('-' without a bound)."""
    return f"{100 * saving / (1 - before):{width - 1}.0f}%" if before < 1 else "-".rjust(width)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="a9a,w8a,ijcnn1,skin_nonskin")
    p.add_argument("--repeat", type=int, default=1, help="runs of `none` (median bound)")
    p.add_argument(
        "--heuristic", default="frequent", help="also time this one, alternated ('': none)"
    )
    p.add_argument("--ranks", type=int, default=1, help="P (#14's target: 1)")
    p.add_argument("--threads", type=int, default=0, help="-o N a rank (default: as users run)")
    a = p.parse_args(argv)
    if a.repeat < 1 or a.ranks < 1 or a.threads < 0:
        p.error("--repeat and --ranks must be at least 1, --threads at least 0")
    other = a.heuristic
    print(
        f"{'data':13s} {'rows':>7s} {'iter':>6s} {'half out at':>11s} {'none s':>7s} "
        f"{'before':>7s} {'best saving':>11s} {'range':>9s} {'ceiling':>7s}"
        + (
            f" {other + ' s':>12s} {'saving':>7s} {'share':>6s} {'overhead s':>10s} "
            f"{'share w/o':>9s} {'rows/earliest':>13s} {'ceiling+overhead':>16s}"
            if other
            else ""
        )
    )
    for name in a.data.split(","):
        (early,) = traces(name, ["earliest"], a.ranks, a.threads)
        plan = ["none", other] * a.repeat if other else ["none"] * a.repeat
        runs = traces(name, plan, a.ranks, a.threads)
        none, timed = runs[:: 2 if other else 1], runs[1::2]
        n = none[0]["values"]["n_samples"]
        bounds = [elimination_bound(r["traces"], early["traces"], n) for r in none]
        half, shares = bounds[0]["half_iter"], [b["share"] for b in bounds]
        before = float(np.median(shares))
        seconds = float(np.median([r["seconds_max"]["train"] for r in none]))
        spread = f"{100 * (1 - max(shares)):.0f}-{100 * (1 - min(shares)):.0f}%"
        ceiling = float(np.median([rule_ceiling(r["traces"], early["traces"], n) for r in none]))
        line = (
            f"{name:13s} {n:7d} {none[0]['counts']['n_iter']:6d} {half:11d} "
            f"{seconds:7.2f} {100 * before:6.0f}% {100 * (1 - before):10.0f}% {spread:>9s} "
            + _share(1 - ceiling, before, 7)
        )
        if other:
            t = float(np.median([r["seconds_max"]["train"] for r in timed]))
            saving = 1 - t / seconds
            extra = float(np.median([overhead(r) for r in timed]))
            share, free = _share(saving, before, 6), _share(saving + extra / seconds, before, 9)
            paid = _share(1 - ceiling - extra / seconds, before, 16)
            ratio = np.median([rows_ratio(r["traces"], early["traces"], half) for r in timed])
            line += f" {t:12.2f} {100 * saving:6.0f}% {share} {extra:10.3f} {free} {ratio:13.2f}"
            line += f" {paid}"
        print(line)


if __name__ == "__main__":
    main()
