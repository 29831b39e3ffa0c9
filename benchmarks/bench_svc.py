"""Kernel SVM benchmark: psvm (P ranks, each heuristic) against scikit-learn's SVC.

    python benchmarks/bench_svc.py --data a9a,w8a,ijcnn1 --ranks 1,2 \\
        --heuristics none,libsvm --out benchmarks/results/svc.json

Every figure comes from this run: scikit-learn SVC (LIBSVM inside) with
shrinking off and on, and psvm-train under ``mpiexec -n P`` with the same C,
gamma, tol and cache size. Times are training wall times (psvm: the
``train`` timer of its statistics, i.e. without start-up and file reading;
``wall`` adds those). Accuracy is on the LIBSVM test split.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file
from sklearn.svm import SVC

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PSVM_SHARED_DATA", REPO.parent / "shared" / "data"))
# name: (train file, test file, C, gamma, n_features)
SETS = {
    "a9a": ("a9a.xz", "a9a.t.xz", 1.0, 0.05, 123),
    "w8a": ("w8a.xz", "w8a.t.xz", 1.0, 0.05, 300),
    "ijcnn1": ("ijcnn1.xz", "ijcnn1.t.xz", 1.0, 1.0, 22),
    "skin_nonskin": ("skin_nonskin.xz", None, 1.0, 1e-3, 3),
    "heart_scale": ("heart_scale.xz", None, 1.0, 0.05, 13),
}


def plain(path: Path) -> str:
    from psvm.io.libsvm_format import uncompressed_path

    return uncompressed_path(str(path))


def load(path: str, nf: int):
    """A LIBSVM file as CSR with 32-bit indices (sklearn's SVC refuses 64-bit ones)."""
    X, y = load_svmlight_file(path, n_features=nf, zero_based=False)
    X = sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), X.shape)
    return X, y


def sklearn_run(train, test, C, gamma, nf, shrinking, cache):
    X, y = load(train, nf)
    t = time.perf_counter()
    clf = SVC(C=C, gamma=gamma, shrinking=shrinking, cache_size=cache).fit(X, y)
    seconds = time.perf_counter() - t
    Xt, yt = load(test, nf) if test else (X, y)
    return {"seconds": seconds, "accuracy": float(np.mean(clf.predict(Xt) == yt)),
            "n_sv": int(clf.n_support_.sum()), "n_iter": int(clf.n_iter_.sum())}  # fmt: skip


def psvm_run(train, test, C, gamma, nf, ranks, heuristic, cache, workdir):
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or "mpiexec"
    model, stats = Path(workdir) / "m.model", Path(workdir) / "s.json"
    cmd = [mpiexec, "-n", str(ranks), sys.executable, "-m", "psvm.cli.train", "-q",
           "-c", str(C), "-g", str(gamma), "-m", str(cache), "--heuristic", heuristic,
           "--n-features", str(nf), "--stats", str(stats), train, str(model)]  # fmt: skip
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env=env)
    wall = time.perf_counter() - t
    s = json.loads(stats.read_text())
    from psvm.io.model_file import read_model

    m = read_model(model)
    Xt, yt = load(test or train, nf)
    return {
        "seconds": s["seconds_max"]["train"],
        "wall": wall,
        "accuracy": float(np.mean(m.predict(Xt) == yt)),
        "n_sv": int(m.support_vectors.shape[0]),
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
    header = f"{'data':13s} {'solver':28s} {'P':>2s} {'train s':>8s} {'wall s':>7s} " \
             f"{'vs SVC':>7s} {'vs SVC-shr':>10s} {'acc %':>6s} {'nSV':>6s} {'iter':>7s}"  # fmt: skip
    print(header)
    with tempfile.TemporaryDirectory() as work:
        for name in a.data.split(","):
            tr, te, C, gamma, nf = SETS[name]
            train, test = plain(DATA / tr), plain(DATA / te) if te else None
            ref = {}
            if not a.no_sklearn:
                for shr in (False, True):
                    r = sklearn_run(train, test, C, gamma, nf, shr, a.cache)
                    ref[shr] = r["seconds"]
                    rows.append({"data": name, "solver": f"sklearn SVC shrinking={shr}",
                                 "ranks": 1, **r})  # fmt: skip
            for h in a.heuristics.split(","):
                for n in map(int, a.ranks.split(",")):
                    r = psvm_run(train, test, C, gamma, nf, n, h, a.cache, work)
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
