"""Cost of one SMO iteration: psvm-train at P ranks against LIBSVM (scikit-learn's SVC).

    python benchmarks/bench_iteration.py --ranks 1,2

For each problem, psvm-train runs under ``mpiexec -n P`` (no environment
overrides) with ``--stats``; its µs per iteration is the ``train`` time over
the iterations, split into communication (the sampled ``comm`` timer: the
Allgathers, waiting for the slowest rank included) and the rest (arithmetic:
selection, kernel columns, step, update, and the Python between engine
calls). LIBSVM's is scikit-learn's SVC fit time over its iterations, in this
process, best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np
from sklearn.datasets import dump_svmlight_file, load_iris
from sklearn.svm import SVC

from heuristics.bench import DATASETS, dataset_paths, load_csr, mpiexec

PROBLEMS = {
    # name: (data, rows, C, gamma, psvm-train kernel flags, SVC kernel arguments)
    "iris poly gamma=1": ("iris", None, 1.0, 1.0, ["-t", "1", "-d", "3", "-r", "0"],
                          {"kernel": "poly", "degree": 3, "coef0": 0.0}),
    "a9a 5k C=100": ("a9a", 5000, 100.0, 0.05, [], {}),
    "a9a": ("a9a", None, 1.0, 0.05, [], {}),
}  # fmt: skip


def problem_file(name: str, tmp: str) -> tuple[str, int]:
    data, rows = PROBLEMS[name][:2]
    if data == "iris":
        X, y = load_iris(return_X_y=True)
        path = os.path.join(tmp, "iris.txt")
        dump_svmlight_file(X, y, path, zero_based=False)
        return path, 4
    ds = DATASETS[data]
    return dataset_paths(ds, rows, None)[0], ds.n_features


def psvm_run(path: str, P: int, name: str, tmp: str, repeat: int) -> dict:
    _, _, C, gamma, flags, _ = PROBLEMS[name]
    best = None
    for _ in range(repeat):
        stats = os.path.join(tmp, f"stats{P}.json")
        cmd = [
            mpiexec(),
            "-n",
            str(P),
            "psvm-train",
            "-q",
            "-c",
            str(C),
            "-g",
            str(gamma),
            "-m",
            "200",
            *flags,
            "--stats",
            stats,
            path,
            os.path.join(tmp, "m"),
        ]
        subprocess.run(cmd, check=True)
        with open(stats) as f:
            s = json.load(f)
        n_iter = s["counts"]["n_iter"]
        train = s["seconds_max"]["train"]
        comm = s["seconds_max"].get("comm", 0.0)
        r = {"n_iter": n_iter, "us": 1e6 * train / n_iter, "comm_us": 1e6 * comm / n_iter}
        r["arith_us"] = r["us"] - r["comm_us"]
        if best is None or r["us"] < best["us"]:
            best = r
    return best


def libsvm_run(path: str, n_features: int, name: str, repeat: int) -> dict:
    _, _, C, gamma, _, kw = PROBLEMS[name]
    X, y = load_csr(path, n_features)
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        clf = SVC(C=C, gamma=gamma, cache_size=200, **kw).fit(X, y)
        sec = time.perf_counter() - t
        n_iter = int(np.sum(clf.n_iter_))
        r = {"n_iter": n_iter, "us": 1e6 * sec / n_iter}
        if best is None or r["us"] < best["us"]:
            best = r
    return best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--only", default=",".join(PROBLEMS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default="benchmarks/results/iteration.json")
    args = ap.parse_args(argv)
    ranks = [int(p) for p in args.ranks.split(",")]
    rows = []
    head = f"{'problem':<20} {'LIBSVM µs':>9} {'iter':>7}"
    for p in ranks:
        head += f" | P={p} µs {'arith':>6} {'comm':>6} {'iter':>7}"
    print(head)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            path, d = problem_file(name, tmp)
            lib = libsvm_run(path, d, name, args.repeat)
            row = {"problem": name, "libsvm": lib}
            line = f"{name:<20} {lib['us']:>9.2f} {lib['n_iter']:>7}"
            for p in ranks:
                r = psvm_run(path, p, name, tmp, args.repeat)
                row[f"P{p}"] = r
                line += (
                    f" | {r['us']:>7.2f} {r['arith_us']:>6.2f} {r['comm_us']:>6.2f}"
                    f" {r['n_iter']:>7}"
                )
            print(line, flush=True)
            rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"time": time.time(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
