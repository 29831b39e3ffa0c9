"""Prediction wall time: psvm-predict at P ranks against LIBSVM's svm-predict and scikit-learn.

    python benchmarks/bench_predict.py                        # a9a, ijcnn1 at P = 1,2
    python benchmarks/bench_predict.py --data a9a --test-rows 2000 --repeat 1

Per data set (C and gamma from :data:`heuristics.bench.DATASETS`; files from
``$PSVM_SHARED_DATA``, default ``../shared/data``) ``mpiexec -n 2 psvm-train``
writes one model, untimed, and every tool predicts the test file with it:

* psvm: ``mpiexec -n P psvm-predict TEST MODEL OUT`` for each P in ``--ranks``,
  wall clock from launch to exit (interpreter start, reading the model and the
  test file, writing the output), with the environment passed unchanged, so each
  rank takes its share of the cores, as for a user; one untimed run first, so
  that numba's on-disk cache is hot;
* LIBSVM: ``svm-predict TEST MODEL OUT`` (the binary on PATH), launch to exit;
* scikit-learn: ``SVC(C, gamma).fit`` on the training file with the same
  parameters (untimed: its model has the same support vectors up to the
  solver's tolerance), then ``predict`` on the test matrix, timed alone; in the
  same child, ``psvm.SVC.from_libsvm_model(MODEL).predict`` on the same matrix,
  timed alone, for a like-for-like figure without start-up and reading.

``--repeat`` runs, interleaved; the fastest counts. The output files of psvm
(every P) are compared with svm-predict's, line by line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from heuristics.bench import (
    DATASETS,
    dataset_paths,
    libsvm_tool,
    machine,
    mpiexec,
    tool,
    versions,
    write_output,
)
from heuristics.report.text import markdown_table

REPO = Path(__file__).resolve().parents[1]
WITH_TEST = [name for name, ds in DATASETS.items() if ds.test is not None]

CHILD = """
import sys, time
import numpy as np
from sklearn.svm import SVC
import psvm
from heuristics.bench import load_csr
train, test, model, C, gamma, nf, repeat = sys.argv[1:8]
nf, repeat = int(nf), int(repeat)
X, y = load_csr(train, nf)
Xt, yt = load_csr(test, nf)
sk = SVC(C=float(C), gamma=float(gamma), cache_size=200).fit(X, y)
ours = psvm.SVC.from_libsvm_model(model, n_features=nf)
ours.predict(Xt[:10])  # numba's cache loaded, untimed
for name, est in (("sklearn", sk), ("psvm SVC", ours)):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        pred = est.predict(Xt)
        best = min(best, time.perf_counter() - t)
    acc = 100 * np.mean(pred == yt)
    print(f"{name}: predict {best:.6f} accuracy {acc:.4f} nsv {int(est.n_support_.sum())}")
"""


def run(cmd: list) -> tuple[float, str]:
    """Wall seconds from launch to exit, and stdout, of ``cmd`` (environment unchanged)."""
    t0 = time.perf_counter()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stderr}")
    return wall, r.stdout


def bench(name: str, ranks: list[int], test_rows: int | None, repeat: int) -> dict:
    ds = DATASETS[name]
    train, test = dataset_paths(ds, None, test_rows)
    predict = tool("psvm-predict", "pip install -e . first")
    with tempfile.TemporaryDirectory(prefix="psvm-predict-") as tmp:
        model, out = Path(tmp) / "model", {p: Path(tmp) / f"psvm{p}.out" for p in ranks}
        train_cmd = [mpiexec(), "-n", "2", tool("psvm-train", "pip install -e . first"), "-q"]
        run([*train_cmd, "-c", f"{ds.C:g}", "-g", f"{ds.gamma:g}", train, model])
        n_sv = int(
            next(ln for ln in model.read_text().splitlines() if ln.startswith("total_sv"))[9:]
        )
        run([predict, "-q", test, model, out[ranks[0]]])  # numba's cache hot
        walls: dict[str, float] = {}
        for _ in range(repeat):  # interleaved: load drifts hit every tool alike
            for p in ranks:
                wall, text = run([mpiexec(), "-n", p, predict, test, model, out[p]])
                walls[f"psvm P={p}"] = min(walls.get(f"psvm P={p}", wall), wall)
            wall, lib_text = run(
                [libsvm_tool("svm-predict"), test, model, Path(tmp) / "libsvm.out"]
            )
            walls["svm-predict"] = min(walls.get("svm-predict", wall), wall)
        child = [sys.executable, "-c", CHILD, train, test, model, ds.C, ds.gamma, ds.n_features]
        _, child_out = run([*child, repeat])
        theirs = (Path(tmp) / "libsvm.out").read_text().splitlines()
        differ = {
            p: sum(a != b for a, b in zip(out[p].read_text().splitlines(), theirs, strict=True))
            for p in ranks
        }
    for line in child_out.splitlines():  # "NAME: predict S accuracy A nsv N"
        who, rest = line.split(": ")
        walls[f"{who} predict"] = float(rest.split()[1])
    return {
        "data": name,
        "n_test": len(theirs),
        "n_sv": n_sv,
        "C": ds.C,
        "gamma": ds.gamma,
        "ranks": ranks,
        "wall": walls,
        "labels differing from svm-predict": differ,
        "psvm accuracy line": text.strip(),
        "svm-predict accuracy line": lib_text.strip(),
        "child": child_out.strip().splitlines(),
    }


def table(res: list[dict]) -> tuple[list[str], list[list[str]]]:
    ranks = res[0]["ranks"]
    ps = [f"psvm P={p}" for p in ranks]
    head = ["data", "test rows", "SVs", *(f"{k} s" for k in ps), "svm-predict s"]
    head += [f"svm-predict / {k}" for k in ps] + [f"P{p} / P{ranks[0]}" for p in ranks[1:]]
    head += ["sklearn predict s", "psvm SVC predict s", "sklearn / psvm SVC"]
    head += ["labels != svm-predict"]
    body = []
    for r in res:
        w = r["wall"]
        row = [r["data"], f"{r['n_test']:,}", f"{r['n_sv']:,}", *(_s(w[k]) for k in ps)]
        row += [_s(w["svm-predict"])] + [_x(w["svm-predict"] / w[k]) for k in ps]
        row += [_x(w[ps[0]] / w[k]) for k in ps[1:]]
        sk, ours = w["sklearn predict"], w["psvm SVC predict"]
        row += [_s(sk), _s(ours), _x(sk / ours)]
        row += [" / ".join(str(v) for v in r["labels differing from svm-predict"].values())]
        body.append(row)
    return head, body


def _s(v: float) -> str:
    return f"{v:.2f}" if v >= 1 else f"{v:.3f}"


def _x(v: float) -> str:
    return f"{v:.3g}x"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="a9a,ijcnn1", help=f"comma-separated, from {WITH_TEST}")
    p.add_argument("--ranks", default="1,2", help="psvm-predict process counts (mpiexec -n P)")
    p.add_argument("--test-rows", type=int, default=None, help="the first ROWS test rows only")
    p.add_argument("--repeat", type=int, default=3, help="runs of each tool; the fastest counts")
    p.add_argument("--md", default=str(REPO / "benchmarks/results/predict.md"), help="'': none")
    p.add_argument("--json", default=str(REPO / "benchmarks/results/predict.json"), help="'': none")
    a = p.parse_args(argv)
    names = a.data.split(",")
    for name in names:
        if name not in DATASETS or DATASETS[name].test is None:
            p.error(f"{name!r}: choose data sets with a test file from {WITH_TEST}")
    if libsvm_tool("svm-predict", required=False) is None:
        p.error("LIBSVM's svm-predict: neither on PATH nor fetched (libsvm-tools)")
    ranks = [int(r) for r in a.ranks.split(",")]
    m = machine()
    load = " ".join(f"{x:.1f}" for x in m["load_avg"] or [])
    header = [
        f"Prediction wall seconds, best of {a.repeat}: psvm-predict and svm-predict from launch "
        "to exit (start-up, reading the model and the test file, writing the labels); "
        "scikit-learn's and psvm's SVC.predict alone, on the loaded test matrix.",
        f"{m['host']}: {m['cpu']}, {m['cores']} cores, load {load} at the start; "
        "environment unchanged (each psvm rank takes its share of the cores).",
    ]
    for line in header:
        print(f"# {line}", flush=True)
    res = []
    for name in names:
        res.append(bench(name, ranks, a.test_rows, a.repeat))
        head, body = table(res[-1:])
        print("\n".join(f"{h}: {c}" for h, c in zip(head, body[0], strict=True)), flush=True)
    head, body = table(res)
    md = [*(f"{line}  " for line in header), "", *markdown_table(head, body)]
    write_output(a.md, "\n".join(md) + "\n")
    record = {"argv": sys.argv, "header": header, "machine": m, "versions": versions()}
    write_output(a.json, json.dumps({**record, "results": res}, indent=1))


if __name__ == "__main__":
    main()
