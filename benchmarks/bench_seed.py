"""Alpha seeding for -v 5 (DeCoste & Wagstaff 2000; Wen et al., AAAI 2017): does it pay?

    python benchmarks/bench_seed.py                    # one process: every fold in turn
    mpiexec -n 2 python benchmarks/bench_seed.py       # folds in parallel, as psvm-train -v
    python benchmarks/bench_seed.py --points 15,-7 --starts cold,fold0

A fold's C-SVC starts from a feasible alpha made from another solve instead of alpha = 0,
and the solver computes its starting gradient from it (``fit_ovo(alpha0=...)``). Starts:

- ``cold``: alpha = 0 (psvm-train -v today); rank r trains folds r, r + P, ...
- ``fold0``: fold 0 solved cold (by every rank, so no rank waits for another), then folds
  1 .. k-1 seeded from it, shared r + 1, r + 1 + P, ...: the rows both training sets share
  keep fold 0's alpha, the held-out fold's rows leave with their mass, and each class's mass
  is poured onto the rows new to the set (fold 0's), in row order, each up to C;
  ``fold0-margin``: the same, the new rows taken in order of y f(x) under fold 0's model,
  most violating first;
- ``all``: every rank solves all rows cold, then every fold starts from that solution with
  its held-out rows removed (mass the classes no longer balance is taken off the heavier).

Each seed depends on the fold only (not on P) and is checked feasible (0 <= alpha <= C,
sum y alpha = 0). Printed per grid point (a9a's first ``--rows`` rows, binary): each
start's wall time (ranks in step at the start and end), iterations of every fold, and the
objective's largest relative difference to the cold folds'.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from heuristics.bench import data_dir, head_path, machine
from psvm.cli.train import svc_params
from psvm.comm import alone, world
from psvm.cross_validation import fold_ids, training_shard
from psvm.io.shard import load_shard
from psvm.stats import Stats
from psvm.svc.multiclass import fit_ovo
from psvm.threads import apply_threads

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
POINTS = "15,-7 11,-5 7,-3 0,-7"  # log2 C, log2 gamma: three hard points, one easy one


def _pour(alpha, C, rows, mass) -> float:
    """Add ``mass`` to ``alpha[rows]`` in the order of ``rows``, each up to C; the rest."""
    room = C[rows] - alpha[rows]
    before = np.concatenate(([0.0], np.cumsum(room)[:-1]))
    alpha[rows] += np.clip(mass - before, 0.0, room)
    return max(mass - float(room.sum()), 0.0)


def _drain(alpha, rows, mass) -> None:
    """Take ``mass`` off ``alpha[rows]``, last rows first."""
    rows = rows[::-1]
    before = np.concatenate(([0.0], np.cumsum(alpha[rows])[:-1]))
    alpha[rows] -= np.clip(mass - before, 0.0, alpha[rows])


def seed(alpha, pos, C, source, target, key=None) -> np.ndarray:
    """The target set's start from the source set's ``alpha`` (masks over all rows)."""
    out = np.where(source & target, alpha, 0.0)
    added = target & ~source
    key = np.arange(alpha.size) if key is None else key
    left = {}
    for sign, side in ((1, pos), (-1, ~pos)):
        rows = np.flatnonzero(added & side)
        mass = float(alpha[source & ~target & side].sum())
        left[sign] = _pour(out, C, rows[np.argsort(key[rows], kind="stable")], mass)
    excess = left[1] - left[-1]  # the class left heavier gives the difference up
    if excess:
        _drain(out, np.flatnonzero(target & (~pos if excess > 0 else pos)), abs(excess))
    y = np.where(pos, 1.0, -1.0)
    assert out.min() >= 0 and (out <= C).all() and abs(y @ out) <= 1e-9 * C.max() * y.size
    return out


class Folds:
    """One a9a grid point's folds on this process alone."""

    def __init__(self, comm, shard, params, n_folds):
        self.comm, self.shard, self.params = comm, shard, params
        self.classes = shard.classes
        self.folds = fold_ids(shard.y, n_folds, 0, self.classes)
        self.pos = shard.y == self.classes[0]
        self.C = np.full(shard.y.size, params["C"])

    def fit(self, train, alpha=None):
        """Fold model, its alpha over all rows, iterations and objective; predicts the rest
        as -v does."""
        fold = training_shard(self.comm, self.shard, train, classes=self.classes)
        y = np.where(self.pos, 1.0, -1.0)
        a0 = None if alpha is None else (y * alpha)[None, train]
        model, sv = fit_ovo(self.comm, fold, self.params, self.classes, stats=Stats(), alpha0=a0)
        model.predict(self.shard.X[np.flatnonzero(~train)])
        out = np.zeros(y.size)
        out[np.flatnonzero(train)[sv]] = np.abs(model.dual_coef[0])
        return model, out, model.meta["n_iter"][0], model.meta["objective"][0]


def schedule(f: Folds, start: str, rank: int, size: int) -> dict:
    """This rank's share of one start's folds: {fold: (iterations, objective)}."""
    k = int(f.folds.max()) + 1
    if start == "cold":
        return {j: f.fit(f.folds != j)[2:] for j in range(rank, k, size)}
    if start == "all":
        source = np.ones(f.folds.size, dtype=bool)
        _, alpha, n_iter, _ = f.fit(source)
        done = {-1: (n_iter, np.nan)}
        mine = range(rank, k, size)
    else:
        source = f.folds != 0
        model, alpha, n_iter, obj = f.fit(source)
        done = {0: (n_iter, obj)}
        mine = range(1 + rank, k, size)
    key = None
    if start == "fold0-margin":
        key = np.where(f.pos, 1.0, -1.0) * model.decision_function(f.shard.X).ravel()
    for j in mine:
        target = f.folds != j
        done[j] = f.fit(target, seed(alpha, f.pos, f.C, source, target, key))[2:]
    return done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--points", default=POINTS, help="log2c,log2g pairs (default %(default)s)")
    ap.add_argument("--starts", default="cold,fold0,fold0-margin,all")
    args = ap.parse_args()
    comm = world()
    apply_threads(None, comm, name="-o")  # one thread per rank on 2 cores, as psvm-train
    me = alone(comm)
    shard = load_shard(me, head_path(data_dir() / "a9a.xz", args.rows))
    before, rows = os.getloadavg(), []
    for point in args.points.split():
        lc, lg = map(float, point.split(","))
        opts = {"svm_type": "c_svc", "C": 2.0**lc, "gamma": 2.0**lg, "class_weight": {}}
        f = Folds(me, shard, svc_params(opts), args.folds)
        f.fit(f.folds != 0)  # numba's cache and the pages, once
        cold_obj = None
        for start in args.starts.split(","):
            comm.sum_(0)
            t0 = time.perf_counter()
            mine = schedule(f, start, comm.rank, comm.size)
            comm.sum_(0)
            wall = time.perf_counter() - t0
            done = {j: v for part in comm.allgather_obj(mine) for j, v in part.items()}
            iters = [done[j][0] for j in sorted(done)]
            objs = {j: v[1] for j, v in done.items() if j >= 0}
            if start == "cold":
                cold_obj = objs
            diff = max(abs(objs[j] / cold_obj[j] - 1) for j in objs) if cold_obj else np.nan
            rows.append(dict(C=lc, gamma=lg, start=start, wall=wall, iters=iters, obj_diff=diff))
    after = os.getloadavg()
    if comm.rank:
        return
    shared = ", folds in parallel" if comm.size > 1 else ""
    print(f"# a9a first {args.rows} rows, -v {args.folds}, P = {comm.size}{shared}")
    print(f"# load average before {before[0]:.2f}, after {after[0]:.2f} (1 min)")
    print("| C, gamma | start | wall s | cold / this | iterations per fold (source first) |")
    print("| --- | --- | ---: | ---: | --- |")
    cold = {}
    for r in rows:
        cold.setdefault((r["C"], r["gamma"]), r["wall"])
        ratio = cold[(r["C"], r["gamma"])] / r["wall"]
        print(
            f"| 2^{r['C']:g}, 2^{r['gamma']:g} | {r['start']} | {r['wall']:.2f} | {ratio:.2f} | "
            f"{', '.join(map(str, r['iters']))} (sum {sum(r['iters'])}) |"
        )
    worst = max((r["obj_diff"] for r in rows if r["start"] != "cold"), default=np.nan)
    print(f"objectives: seeded folds within {worst:.1e} relative of the cold ones")
    RESULTS.mkdir(exist_ok=True)
    record = {"args": vars(args), "ranks": comm.size, "machine": machine(), "rows": rows}
    record["load"] = {"before": before, "after": after}
    path = RESULTS / f"seed_p{comm.size}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
