"""How much time could elimination save at best? Traces of `none` against `earliest`.

    python benchmarks/elimination_bound.py --data a9a,w8a,ijcnn1,skin_nonskin

For each data set (full training file, one process) psvm-train runs without
elimination and with ``earliest`` (it tests the rule every iteration). Until
``earliest`` has eliminated half of the rows, no heuristic can have done
much better, since they all apply the same rule, later. The share of the
`none` run's training time spent before that iteration bounds what any
heuristic can save: even if every later iteration were free, it would save
at most the rest. psvm-report computes the same bound from its study's traces
(:func:`heuristics.report.summary.elimination_bound`).
"""

from __future__ import annotations

import argparse
import tempfile

from heuristics.bench import DATASETS, dataset_paths, run_worker
from heuristics.report.summary import elimination_bound


def traces(name: str, heuristic: str) -> dict:
    ds = DATASETS[name]
    train, test = dataset_paths(ds, None, None)
    flags = ["-c", f"{ds.C:g}", "-g", f"{ds.gamma:g}", "-m", "200", "--heuristic", heuristic]
    plan = {
        "train": train,
        "test": test,
        "n_features": ds.n_features,
        "warmup": flags,
        "runs": [{"flags": flags, "traces": True, "accuracy": False}],
    }
    with tempfile.TemporaryDirectory(prefix="psvm-bound-") as work:
        (rec,) = run_worker(1, plan, work)
    return rec["stats"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="a9a,w8a,ijcnn1,skin_nonskin")
    a = p.parse_args(argv)
    print(
        f"{'data':13s} {'rows':>7s} {'iter':>6s} {'half out at':>11s} {'none s':>7s} "
        f"{'before':>7s} {'best saving':>11s}"
    )
    for name in a.data.split(","):
        none, early = traces(name, "none"), traces(name, "earliest")
        n = none["values"]["n_samples"]
        b = elimination_bound(none["traces"], early["traces"], n)
        half, before = b["half_iter"], b["share"]
        print(
            f"{name:13s} {n:7d} {none['counts']['n_iter']:6d} {int(half):11d} "
            f"{none['seconds_max']['train']:7.2f} {100 * before:6.0f}% "
            f"{100 * (1 - before):10.0f}%"
        )


if __name__ == "__main__":
    main()
