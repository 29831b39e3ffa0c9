"""Kernel SVM benchmark: psvm (P ranks, each heuristic) against scikit-learn's SVC.

    python benchmarks/bench_svc.py --data a9a,w8a,ijcnn1,skin_nonskin --ranks 1,2 \\
        --heuristics all --repeat 3 --out benchmarks/results/svc.json

Every figure comes from this run: scikit-learn SVC (LIBSVM inside) with
shrinking off and on, and psvm-train under ``mpiexec -n P`` with the same C,
gamma, tol and cache size. Times are training wall times (psvm: the
``train`` timer of its statistics, i.e. without start-up and file reading);
each configuration runs ``--repeat`` times, interleaved, and the fastest run
counts (all times are kept in the JSON; on a shared 2-core VM the same run
varies by tens of percent, more at P = 2). One ``mpiexec`` launch per data set
and P runs every heuristic after a discarded warm-up run. Accuracy is on the
LIBSVM test split (the training rows for skin_nonskin, which has none).

``--gamma`` and ``--C`` replace every listed set's own values and ``--rows``
trains on the head of the file (e.g. the gamma sweep and the large-C run in
docs/heuristics.md); ``--md`` writes the table of training seconds that docs
show.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from dataclasses import replace

from heuristics.bench import (
    DATASETS,
    Dataset,
    dataset_paths,
    load_csr,
    run_worker,
    sklearn_svc_fit,
    write_output,
)
from heuristics.report.text import markdown_table
from psvm._params import HEURISTICS


def sklearn_run(ds: Dataset, rows: int | None, shrinking: bool, cache: float, repeat: int) -> dict:
    train, test = dataset_paths(ds, rows, None)
    X, y = load_csr(train, ds.n_features)
    Xt, yt = load_csr(test, ds.n_features)
    runs = [
        sklearn_svc_fit(X, y, Xt, yt, ds, shrinking=shrinking, tol=1e-3, cache=cache)
        for _ in range(repeat)
    ]
    r = min(runs, key=lambda r: r["seconds"])
    return {
        "seconds": r["seconds"],
        "all_seconds": [x["seconds"] for x in runs],
        "accuracy": r["accuracy"],
        "n_sv": r["n_support"],
        "n_iter": r["n_iter"],
        "objective": r["objective"],
    }


def psvm_runs(
    ds: Dataset, rows: int | None, ranks: int, heuristics: list[str], cache: float, repeat: int
) -> dict:
    """Every heuristic ``repeat`` times in one launch; the fastest run of each."""
    train, test = dataset_paths(ds, rows, None)
    base = ["-c", f"{ds.C:g}", "-g", f"{ds.gamma:g}", "-m", f"{cache:g}"]
    runs = [
        {
            "flags": [*base, "--heuristic", h],
            "traces": False,
            "accuracy": k == 0,
            "meta": {"heuristic": h},
        }
        for k in range(repeat)
        for h in heuristics
    ]
    plan = {
        "train": train,
        "test": test,
        "n_features": ds.n_features,
        "runs": runs,
        "warmup": [*base, "--heuristic", heuristics[0]],
    }
    with tempfile.TemporaryDirectory(prefix="psvm-bench-") as work:
        records = run_worker(ranks, plan, work)
    out = {}
    for h in heuristics:
        mine = [r for r in records if r["heuristic"] == h]
        best = min(mine, key=lambda r: r["stats"]["seconds_max"]["train"])
        s = best["stats"]
        best["accuracy"] = mine[0]["accuracy"]  # predicted once: the model is the same
        out[h] = {
            "seconds": s["seconds_max"]["train"],
            "all_seconds": [r["stats"]["seconds_max"]["train"] for r in mine],
            "wall": best["wall_seconds"],
            "accuracy": best["accuracy"],
            "n_sv": int(s["values"]["n_support"]),
            "n_iter": int(s["counts"]["n_iter"]),
            "objective": s["values"]["objective"],
            "eliminated": int(s["counts"].get("n_eliminated", 0)),
            "false_positives": int(s["counts"].get("n_false_positive", 0)),
            "reconstructions": int(s["counts"].get("n_reconstruct", 0)),
            "cache_hit_rate": s["values"]["cache_hit_rate"],
            "seconds_split": s["seconds_max"],
            "comm_seconds": sum(v["seconds_max"] for v in s["comm"].values()),
        }
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="a9a,w8a,ijcnn1")
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--heuristics", default="none,libsvm", help="comma-separated, or 'all'")
    p.add_argument("--cache", type=float, default=200.0, help="MB per process")
    p.add_argument("--gamma", type=float, default=None, help="gamma for every data set")
    p.add_argument("--C", type=float, default=None, help="C for every data set")
    p.add_argument("--rows", type=int, default=None, help="train on the first ROWS rows only")
    p.add_argument("--repeat", type=int, default=1, help="runs of each configuration")
    p.add_argument("--no-sklearn", action="store_true")
    p.add_argument("--out", default=None, help="also write the results as JSON")
    p.add_argument("--md", default=None, help="also write the time table as markdown")
    a = p.parse_args(argv)
    heuristics = list(HEURISTICS) if a.heuristics == "all" else a.heuristics.split(",")
    if "none" not in heuristics:
        heuristics.insert(0, "none")
    rows = []
    print(
        f"# {platform.node()} {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, python {platform.python_version()}, "
        f"best of {a.repeat}"
    )
    print(
        f"{'data':13s} {'solver':28s} {'P':>2s} {'train s':>8s} {'vs none':>7s} "
        f"{'vs SVC':>7s} {'vs SVC-shr':>10s} {'acc %':>6s} {'nSV':>6s} {'iter':>7s}"
    )
    for name in a.data.split(","):
        ds = DATASETS[name]
        ds = replace(ds, gamma=a.gamma or ds.gamma, C=a.C or ds.C)
        ref = {}
        if not a.no_sklearn:
            for shr in (False, True):
                r = sklearn_run(ds, a.rows, shr, a.cache, a.repeat)
                ref[shr] = r["seconds"]
                solver = f"sklearn SVC shrinking={shr}"
                rows.append(
                    {"data": name, "C": ds.C, "gamma": ds.gamma, "solver": solver, "ranks": 1, **r}
                )
                _print(rows[-1], None, ref)
        for n in map(int, a.ranks.split(",")):
            res = psvm_runs(ds, a.rows, n, heuristics, a.cache, a.repeat)
            for h in heuristics:
                vs_none = res["none"]["seconds"] / res[h]["seconds"]
                rows.append(
                    {
                        "data": name,
                        "C": ds.C,
                        "gamma": ds.gamma,
                        "solver": f"psvm {h}",
                        "heuristic": h,
                        "ranks": n,
                        **res[h],
                        "vs_none": vs_none,
                    }
                )
                _print(rows[-1], rows[-1]["vs_none"], ref)
    doc = {"argv": sys.argv, "repeat": a.repeat, "rows": rows}
    write_output(a.out, json.dumps(doc, indent=1))
    write_output(a.md, "\n".join(markdown(rows, heuristics)))


def markdown(rows: list[dict], heuristics: list[str]) -> list[str]:
    """Training seconds, one row per data set, gamma and P: SVC without and with shrinking
    (on the first P's row), every heuristic (the fastest in bold) and the best one's saving
    against `none`."""
    svc, psvm = {}, {}
    for r in rows:
        g = r.get("gamma", DATASETS[r["data"]].gamma)  # JSON written before --gamma existed
        if "heuristic" in r:
            psvm.setdefault((r["data"], g, r["ranks"]), {})[r["heuristic"]] = r["seconds"]
        else:
            svc.setdefault((r["data"], g), []).append(f"{r['seconds']:.2f}")
    body = []
    for (data, g, ranks), t in psvm.items():
        best = min(t, key=t.get)
        cells = [f"**{t[h]:.2f}**" if h == best else f"{t[h]:.2f}" for h in heuristics]
        body.append(
            [
                data,
                f"{g:g}",
                str(ranks),
                " / ".join(svc.pop((data, g), [])),
                *cells,
                f"{100 * (1 - t[best] / t['none']):.0f}% ({best})",
            ]
        )
    return markdown_table(["data", "gamma", "P", "SVC off / on", *heuristics, "best vs none"], body)


def _print(r: dict, vs_none: float | None, ref: dict) -> None:
    r["speedup_vs_svc"] = ref[False] / r["seconds"] if ref else None
    r["speedup_vs_svc_shrinking"] = ref[True] / r["seconds"] if True in ref else None
    print(
        f"{r['data']:13s} {r['solver']:28s} {r['ranks']:2d} {r['seconds']:8.2f} "
        f"{_x(vs_none)} {_x(r['speedup_vs_svc'])} {_x(r['speedup_vs_svc_shrinking']):>10s} "
        f"{100 * r['accuracy']:6.2f} {r['n_sv']:6d} {r['n_iter']:7d}",
        flush=True,
    )


def _x(v) -> str:
    return f"{v:6.2f}x" if v is not None else "    - "


if __name__ == "__main__":
    main()
