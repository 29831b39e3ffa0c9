"""All solvers on each data set, from one run: psvm (P ranks) against SVC, LIBSVM, LinearSVC, SGD.

    python benchmarks/run_all.py --data a9a,w8a,ijcnn1 --ranks 1,2 --md docs/benchmarks.md

For each data set (full LIBSVM files from ``../shared/data`` unless ``--rows``)
it trains, each in its own process so that peak memory is per solver:

- psvm-train (default heuristic) under ``mpiexec -n P`` for every P, through
  :mod:`heuristics.worker` (psvm-train's own ``main``; peak RSS of every rank);
- psvm-train ``--solver sgd`` (parallel SGD linear SVM) when this psvm has it;
- scikit-learn SVC and LIBSVM (``libsvm-official``, ``svm_train`` with the same
  ``-c -g -e -m -h``), the exact RBF references;
- scikit-learn LinearSVC and SGDClassifier (hinge, alpha = 1/(C n)), linear baselines.

Columns are explained under the table (``COLUMNS``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

import numpy as np

from heuristics.bench import (
    DATASETS,
    dataset_paths,
    dual_objective,
    load_csr,
    machine,
    run_worker,
    versions,
)
from heuristics.report.text import markdown_table
from psvm._params import DEFAULT_HEURISTIC

TOL, CACHE_MB = 1e-3, 200.0
COLUMNS = (
    "train s: the fit alone (psvm: the `train` timer, max over ranks). load+train s: reading "
    "the training file (psvm: its parallel reader; the others: `load_svmlight_file`) plus the "
    "fit (LIBSVM: also the conversion to its nodes), without interpreter start-up. x SVC: "
    "train s / scikit-learn SVC train s. objective: "
    "the RBF dual objective 1/2 a'Qa - e'a (for SVC and LIBSVM recomputed from their support "
    "vectors; linear solvers optimise another problem and show none). accuracy: on the test "
    "file. peak RSS: `ru_maxrss` of each process (each rank for psvm) right after training, "
    "before the test file is read, interpreter and libraries included."
)


def _rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def reference(solver: str, name: str, rows: int | None) -> dict:
    """Train one reference solver in this process (a child of the entry point)."""
    import sklearn.datasets  # noqa: F401  (its import is no load time: psvm's excludes its own)

    ds = DATASETS[name]
    train, test = dataset_paths(ds, rows, None)
    t0 = time.perf_counter()
    X, y = load_csr(train, ds.n_features)
    t1 = time.perf_counter()
    objective, n_sv = None, None
    if solver == "sklearn-svc":
        from sklearn.svm import SVC

        model = SVC(C=ds.C, gamma=ds.gamma, tol=TOL, cache_size=CACHE_MB).fit(X, y)
        t2 = time.perf_counter()
        rss = _rss_mb()
        n_sv = int(model.n_support_.sum())
        objective = dual_objective(model.support_vectors_, model.dual_coef_, ds.gamma)
    elif solver == "libsvm":
        from libsvm.svmutil import svm_parameter, svm_predict, svm_problem, svm_train

        prob = svm_problem(y, X)  # conversion to LIBSVM's nodes: not timed as training
        t1 = time.perf_counter()
        param = svm_parameter(f"-c {ds.C:g} -g {ds.gamma:g} -e {TOL:g} -m {CACHE_MB:g} -h 1 -q")
        lib = svm_train(prob, param)
        t2 = time.perf_counter()
        rss = _rss_mb()
        idx = np.asarray(lib.get_sv_indices()) - 1
        n_sv = int(idx.size)
        objective = dual_objective(X[idx], np.asarray(lib.get_sv_coef())[:, 0], ds.gamma)
    elif solver == "linearsvc":
        from sklearn.svm import LinearSVC

        model = LinearSVC(C=ds.C).fit(X, y)
        t2 = time.perf_counter()
        rss = _rss_mb()
    elif solver == "sgdclassifier":
        from sklearn.linear_model import SGDClassifier

        model = SGDClassifier(loss="hinge", alpha=1.0 / (ds.C * X.shape[0]), random_state=0)
        model.fit(X, y)
        t2 = time.perf_counter()
        rss = _rss_mb()
    else:
        raise ValueError(f"unknown solver {solver!r}")
    Xt, yt = load_csr(test, ds.n_features)
    if solver == "libsvm":
        pred, _, _ = svm_predict(yt, Xt, lib, "-q")
    else:
        pred = model.predict(Xt)
    return {
        "train_s": t2 - t1,
        "load_train_s": (t1 - t0) + (t2 - t1),
        "objective": objective,
        "accuracy": float(np.mean(np.asarray(pred) == yt)),
        "n_support": n_sv,
        "peak_rss_mb": [rss],
    }


def run_reference(solver: str, name: str, rows: int | None) -> dict:
    cmd = [sys.executable, __file__, "--child", solver, "--data", name]
    if rows:
        cmd += ["--rows", str(rows)]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{solver} on {name} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_psvm(name: str, rows: int | None, ranks: int, flags: list[str]) -> dict:
    ds = DATASETS[name]
    train, test = dataset_paths(ds, rows, None)
    plan = {
        "train": train,
        "test": test,
        "n_features": ds.n_features,
        "runs": [{"flags": flags, "traces": False}],
        "warmup": None,
    }
    with tempfile.TemporaryDirectory(prefix="psvm-bench-") as work:
        (rec,) = run_worker(ranks, plan, work)
    if rec["returncode"] != 0:
        raise RuntimeError(f"psvm failed: {rec['command']}")
    s = rec["stats"]
    obj = s["values"].get("objective")
    return {
        "train_s": s["seconds_max"]["train"],
        "load_train_s": rec["wall_seconds"],
        "objective": float(np.sum(obj)) if obj is not None and "--solver" not in flags else None,
        "accuracy": rec["accuracy"],
        "n_support": s["values"].get("n_support"),
        "peak_rss_mb": rec["peak_rss_mb"],
        "command": rec["command"],
    }


def _fmt_row(r: dict) -> list[str]:
    def f(x, spec):
        return "-" if x is None else format(x, spec)

    return [
        r["data"],
        r["solver"],
        str(r["ranks"]),
        f(r["train_s"], ".3f"),
        f(r["load_train_s"], ".3f"),
        f(r.get("x_svc"), ".3g"),
        f(r["objective"], ".6g"),
        f(100 * r["accuracy"], ".2f"),
        f(r["n_support"], "d"),
        " / ".join(f"{m:.0f}" for m in r["peak_rss_mb"]),
    ]


WIDTHS = (-12, -24, 2, 8, 12, 6, 12, 10, 6, 20)


def _line(cells) -> str:
    return " ".join(
        f"{c:<{-w}s}" if w < 0 else f"{c:>{w}s}" for c, w in zip(cells, WIDTHS, strict=True)
    )


HEADER = [
    "data",
    "solver",
    "P",
    "train s",
    "load+train s",
    "x SVC",
    "objective",
    "accuracy %",
    "nSV",
    "peak RSS MB per rank",
]


def markdown(rows: list[dict], meta: dict, notes: list[str]) -> str:
    m, v = meta["machine"], meta["versions"]
    md = [
        "# Benchmarks: psvm against scikit-learn SVC, LIBSVM, LinearSVC and SGDClassifier",
        "",
        "Generated by `benchmarks/run_all.py`; every number below comes from this one run "
        "(do not edit by hand, rerun instead):",
        "",
        f"    {meta['command']}",
        "",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, {m['os']}; load "
        f"average at the start {', '.join(f'{x:.2f}' for x in m['load_avg'])}. Shared with "
        "other engineers' jobs: single runs, so expect noise of tens of percent.",
        "- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val) + ".",
        f"- {meta['started']}, {meta['elapsed_s'] / 60:.1f} minutes. RBF kernel, C and "
        f"gamma per data set as below, tol {TOL:g}, kernel cache {CACHE_MB:g} MB per "
        "process, shrinking on (psvm: its default heuristic). No thread or environment "
        "settings: each psvm rank takes its share of the node's cores (psvm's default); the "
        "references run in one thread each (their processes "
        "set OMP_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1: LIBSVM is libsvm-official, built "
        "with OpenMP). "
        "Linear solvers: psvm SGD is `psvm-train --solver sgd` with its defaults (lambda = "
        "1/n, i.e. C = 1; sync period auto); LinearSVC(C=C) is scikit-learn's default "
        "squared hinge; SGDClassifier(loss='hinge', alpha=1/(C n), random_state=0).",
        "",
    ]
    md += markdown_table(HEADER, [_fmt_row(r) for r in rows])
    md += [
        "Data: "
        + "; ".join(
            f"{d['name']} {d['n_train']:,} training / {d['n_test']:,} "
            f"test rows, C={d['C']:g}, gamma={d['gamma']:g}"
            for d in meta["datasets"]
        )
        + ".",
        "",
    ]
    md += [f"- {n}" for n in notes] + [""]
    md += [f"Columns: {COLUMNS}", ""]
    return "\n".join(md).rstrip() + "\n"


def findings(rows: list[dict]) -> list[str]:
    """Sentences computed from the table: psvm against the references, per data set."""
    out = []
    for name in dict.fromkeys(r["data"] for r in rows):
        rs = [r for r in rows if r["data"] == name]
        svc = next((r for r in rs if r["solver"] == "sklearn SVC"), None)
        smo = sorted(
            (r for r in rs if r["solver"].startswith("psvm SMO")), key=lambda r: r["ranks"]
        )
        if not svc or not smo:
            continue
        lib = next((r for r in rs if r["solver"] == "LIBSVM"), None)
        best = min(smo, key=lambda r: r["train_s"])
        txt = (
            f"{name}: psvm's fastest SMO run (P={best['ranks']}) takes {best['x_svc']:.2f}x "
            f"the training time of scikit-learn SVC"
        )
        if lib:
            txt += f" and {best['train_s'] / lib['train_s']:.2f}x that of LIBSVM"
        if len(smo) > 1:
            txt += (
                f"; P={smo[-1]['ranks']} against P={smo[0]['ranks']}: "
                f"{smo[0]['train_s'] / smo[-1]['train_s']:.2f}x speed-up"
            )
        gap = max(abs(r["objective"] - svc["objective"]) / abs(svc["objective"]) for r in smo)
        acc = max(abs(r["accuracy"] - svc["accuracy"]) for r in smo)
        out.append(
            txt + f". Objective within {gap:.1e} (relative) of SVC's, test accuracy "
            f"within {100 * acc:.2f} points."
        )
        lin = [r for r in rs if r["objective"] is None and r["n_support"] is None]
        if lin:
            names = ", ".join(dict.fromkeys(r["solver"] for r in lin))
            out.append(
                f"{name}: the linear models ({names}) "
                f"train in at most {max(r['train_s'] for r in lin):.3g} s but reach "
                f"{100 * min(r['accuracy'] for r in lin):.2f}-"
                f"{100 * max(r['accuracy'] for r in lin):.2f}% test accuracy against "
                f"{100 * svc['accuracy']:.2f}% for the RBF SVM."
            )
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="a9a,w8a,ijcnn1")
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--rows", type=int, default=0, help="first N training rows only (0: all)")
    p.add_argument("--md", default=None, help="write the table as Markdown to this file")
    p.add_argument("--json", default=None, help="write the rows as JSON to this file")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    rows_opt = a.rows or None
    if a.child:
        print(json.dumps(reference(a.child, a.data, rows_opt)))
        return 0
    from heuristics.bench import count_lines

    t_start = time.perf_counter()
    meta = {
        "command": shlex.join(["python", "benchmarks/run_all.py", *(argv or sys.argv[1:])]),
        "machine": machine(),
        "versions": versions(),
        "datasets": [],
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    notes = []
    print(_line(HEADER), flush=True)
    out = []
    for name in a.data.split(","):
        ds = DATASETS[name]
        train, test = dataset_paths(ds, rows_opt, None)
        meta["datasets"].append(
            {
                "name": name,
                "n_train": count_lines(train),
                "n_test": count_lines(test),
                "C": ds.C,
                "gamma": ds.gamma,
            }
        )
        base = ["-c", f"{ds.C:g}", "-g", f"{ds.gamma:g}", "-e", f"{TOL:g}", "-m", f"{CACHE_MB:g}"]
        ranks = [int(P) for P in a.ranks.split(",")]
        runs = [
            ("sklearn SVC", 1, partial(run_reference, "sklearn-svc", name, rows_opt)),
            ("LIBSVM", 1, partial(run_reference, "libsvm", name, rows_opt)),
        ]
        smo = f"psvm SMO ({DEFAULT_HEURISTIC})"
        runs += [(smo, P, partial(run_psvm, name, rows_opt, P, base)) for P in ranks]
        runs += [
            ("psvm SGD", P, partial(run_psvm, name, rows_opt, P, ["--solver", "sgd"]))
            for P in ranks
        ]
        runs += [
            ("sklearn LinearSVC", 1, partial(run_reference, "linearsvc", name, rows_opt)),
            ("sklearn SGDClassifier", 1, partial(run_reference, "sgdclassifier", name, rows_opt)),
        ]
        svc_time = None
        for solver, P, fn in runs:
            r = {"data": name, "solver": solver, "ranks": P, **fn()}
            if solver == "sklearn SVC":
                svc_time = r["train_s"]
            r["x_svc"] = r["train_s"] / svc_time if svc_time else None
            out.append(r)
            print(_line(_fmt_row(r)), flush=True)
    meta["elapsed_s"] = time.perf_counter() - t_start
    if a.json:
        Path(a.json).write_text(json.dumps({"meta": meta, "rows": out}, indent=1) + "\n")
    notes = findings(out) + notes
    for n in notes:
        print(n)
    if a.md:
        Path(a.md).parent.mkdir(parents=True, exist_ok=True)
        Path(a.md).write_text(markdown(out, meta, notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
