"""Kernel SVM benchmark: psvm (P ranks, each heuristic) against scikit-learn's SVC.

    python benchmarks/bench_svc.py --data a9a,w8a,ijcnn1 --ranks 1,2 \\
        --heuristics none,libsvm --out benchmarks/results/svc.json

Every figure comes from this run: scikit-learn SVC (LIBSVM inside) with
shrinking off and on, and psvm-train under ``mpiexec -n P`` with the same C,
gamma, tol and cache size. Times are training wall times (psvm: the
``train`` timer of its statistics, i.e. without start-up and file reading;
``wall`` adds file reading; start-up is not counted). Accuracy is on the LIBSVM test split.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

from psvm.bench import DATASETS, dataset_paths, load_csr, run_worker, sklearn_svc_fit


def sklearn_run(name, shrinking, cache):
    ds = DATASETS[name]
    train, test = dataset_paths(ds, None, None)
    X, y = load_csr(train, ds.n_features)
    Xt, yt = load_csr(test, ds.n_features)
    r = sklearn_svc_fit(X, y, Xt, yt, ds, shrinking=shrinking, tol=1e-3, cache=cache)
    return {"seconds": r["seconds"], "accuracy": r["accuracy"], "n_sv": r["n_support"],
            "n_iter": r["n_iter"]}  # fmt: skip


def psvm_run(name, ranks, heuristic, cache):
    ds = DATASETS[name]
    train, test = dataset_paths(ds, None, None)
    flags = ["-c", f"{ds.C:g}", "-g", f"{ds.gamma:g}", "-m", f"{cache:g}",
             "--heuristic", heuristic]  # fmt: skip
    plan = {"train": train, "test": test, "n_features": ds.n_features,
            "runs": [{"flags": flags, "traces": False}], "warmup": None}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="psvm-bench-") as work:
        (rec,) = run_worker(ranks, plan, work)
    s = rec["stats"]
    return {
        "seconds": s["seconds_max"]["train"],
        "wall": rec["wall_seconds"],
        "accuracy": rec["accuracy"],
        "n_sv": int(s["values"]["n_support"]),
        "n_iter": int(s["counts"]["n_iter"]),
        "objective": s["values"]["objective"],
        "eliminated": int(s["counts"].get("n_eliminated", 0)),
        "false_positives": int(s["counts"].get("n_false_positive", 0)),
        "cache_hit_rate": s["values"]["cache_hit_rate"],
        "seconds_split": s["seconds_max"],
        "comm_seconds": sum(v["seconds_max"] for v in s["comm"].values()),
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="a9a,w8a,ijcnn1")
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--heuristics", default="none,libsvm")
    p.add_argument("--cache", type=float, default=200.0, help="MB per process")
    p.add_argument("--no-sklearn", action="store_true")
    p.add_argument("--out", default=None, help="also write the results as JSON")
    a = p.parse_args(argv)
    rows = []
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, python {platform.python_version()}")  # fmt: skip
    header = (f"{'data':13s} {'solver':28s} {'P':>2s} {'train s':>8s} {'wall s':>7s} "
              f"{'vs SVC':>7s} {'vs SVC-shr':>10s} {'acc %':>6s} {'nSV':>6s} {'iter':>7s}")
    print(header)
    for name in a.data.split(","):
        ref = {}
        if not a.no_sklearn:
            for shr in (False, True):
                r = sklearn_run(name, shr, a.cache)
                ref[shr] = r["seconds"]
                rows.append({"data": name, "solver": f"sklearn SVC shrinking={shr}",
                             "ranks": 1, **r})  # fmt: skip
        for h in a.heuristics.split(","):
            for n in map(int, a.ranks.split(",")):
                r = psvm_run(name, n, h, a.cache)
                rows.append({"data": name, "solver": f"psvm {h}", "ranks": n, **r})
        for r in rows:
            if r["data"] != name:
                continue
            r["speedup_vs_svc"] = ref[False] / r["seconds"] if ref else None
            r["speedup_vs_svc_shrinking"] = ref[True] / r["seconds"] if ref else None
            print(f"{name:13s} {r['solver']:28s} {r['ranks']:2d} {r['seconds']:8.2f} "
                  f"{r.get('wall', r['seconds']):7.2f} "
                  f"{_x(r['speedup_vs_svc'])} {_x(r['speedup_vs_svc_shrinking']):>10s} "
                  f"{100 * r['accuracy']:6.2f} {r['n_sv']:6d} {r['n_iter']:7d}",
                  flush=True)  # fmt: skip
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps({"argv": sys.argv, "rows": rows}, indent=1))


def _x(v) -> str:
    return f"{v:6.2f}x" if v is not None else "    - "


if __name__ == "__main__":
    main()
