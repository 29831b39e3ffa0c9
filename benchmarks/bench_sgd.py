"""Time to reach LinearSVC's accuracy minus 0.5 pt: psvm SGD (P = 1, 2) vs scikit-learn.

    python benchmarks/bench_sgd.py [--data a9a,w8a,ijcnn1,skin_nonskin] [--ranks 1,2]

Per data set, lambda = 1/n, i.e. LinearSVC(C = 1 / (n lambda) = 1, loss='hinge').
The target is LinearSVC's test accuracy minus 0.5 point. Times (best of
``--repeat`` rounds; each round runs every solver once, so that a busy spell
of a shared machine does not fall on one solver only) to the first epoch
whose model reaches the target:

- SGDClassifier(loss='hinge', alpha=lambda), plain and with average=True:
  wall time of ``fit(max_iter=k, tol=None)`` for the smallest k that reaches it;
- psvm (``psvm-train --solver sgd``, launched by ``mpiexec -n P`` from here,
  default ``--sync-every auto``): cumulative ``train_seconds`` of the first
  such epoch plus the MSF calibration, from the run's statistics. This is
  the slowest rank's time in the epochs (steps, model averages, the primal
  objective); file loading, numba's cache loading and the validation scoring
  used to find the epoch are not counted.

skin_nonskin has no test file: a seeded 80/20 split, features divided by
255 (raw 0..255 values make LinearSVC run for minutes without converging).
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from heuristics.bench import mpiexec

_HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("PSVM_SHARED_DATA", os.path.join(_HERE, "..", "..", "shared", "data"))
N_FEATURES = {"a9a": 123, "w8a": 300, "ijcnn1": 22, "skin_nonskin": 3}


def load(path, n_features):
    """CSR with 32-bit indices (LinearSVC accepts no others)."""
    import scipy.sparse as sp

    with lzma.open(path, "rb") as f:
        X, y = load_svmlight_file(f, n_features=n_features, zero_based=False)
    X = sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), X.shape)
    return X, y


def prepare(name: str, tmp: str):
    """(train path, test path, X, y, Xt, yt) with the files psvm reads."""
    d = N_FEATURES[name]
    if name != "skin_nonskin":
        train, test = os.path.join(DATA, f"{name}.xz"), os.path.join(DATA, f"{name}.t.xz")
        X, y = load(train, d)
        Xt, yt = load(test, d)
        return train, test, X, y, Xt, yt
    from sklearn.model_selection import train_test_split

    X, y = load(os.path.join(DATA, "skin_nonskin.xz"), d)
    X = X / 255.0
    X, Xt, y, yt = train_test_split(X, y, test_size=0.2, random_state=0)
    train, test = os.path.join(tmp, "skin.train"), os.path.join(tmp, "skin.test")
    dump_svmlight_file(X, y, train, zero_based=False)
    dump_svmlight_file(Xt, yt, test, zero_based=False)
    return train, test, X, y, Xt, yt


def timed(fn, *args) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def sgdclassifier_fit(X, y, lam, average, k):
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import SGDClassifier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return SGDClassifier(
            loss="hinge", alpha=lam, average=average, max_iter=k, tol=None, random_state=0
        ).fit(X, y)


def sgdclassifier_epochs(X, y, Xt, yt, lam, target, average, max_epochs):
    """Smallest max_iter k whose fit reaches the target: (k or None, accuracy)."""
    best = 0.0
    for k in range(1, max_epochs + 1):
        acc = sgdclassifier_fit(X, y, lam, average, k).score(Xt, yt)
        if acc >= target:
            return k, acc
        best = max(best, acc)
    return None, best


def psvm_run(train, test, n, lam, target, max_epochs, seed, tmp):
    """One psvm launch under mpiexec -n n: (time to target or inf, epoch, accuracy, period)."""
    exe = mpiexec()
    stats = os.path.join(tmp, f"stats-{n}.json")
    cmd = [
        exe,
        "-n",
        str(n),
        sys.executable,
        "-m",
        "psvm.cli.train",
        "--solver",
        "sgd",
        "-q",
        "--lambda",
        repr(lam),
        "--epochs",
        str(max_epochs),
        "--tol",
        "0",
        "--seed",
        str(seed),
        "--validation",
        test,
        "--stats",
        stats,
        train,
        os.path.join(tmp, "m.model"),
    ]
    subprocess.run(cmd, check=True)
    with open(stats) as f:
        s = json.load(f)
    tr = s["traces"]
    hits = [e for e, a in enumerate(tr["val_accuracy"]) if a >= target]
    if not hits:
        return np.inf, None, max(tr["val_accuracy"]), tr["period"][-1]
    e = hits[0]
    t = tr["train_seconds"][e] + s["seconds_max"].get("calibrate", 0.0)
    return t, e + 1, tr["val_accuracy"][e], tr["period"][e]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="a9a,w8a,ijcnn1,skin_nonskin")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--epochs", type=int, default=20, help="epoch budget per solver")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None, help="also write the rows as JSON")
    opts = ap.parse_args()
    from sklearn.svm import LinearSVC

    rows = []
    ranks = [int(p) for p in opts.ranks.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        for name in opts.data.split(","):
            train, test, X, y, Xt, yt = prepare(name, tmp)
            n = X.shape[0]
            lam = 1.0 / n
            lin = LinearSVC(C=1.0, loss="hinge", max_iter=20000)
            acc_lin = lin.fit(X, y).score(Xt, yt)
            target = acc_lin - 0.005
            row = dict(
                data=name, n=n, lam=lam, linearsvc_s=np.inf, linearsvc_acc=acc_lin, target=target
            )
            for avg in (False, True):
                k, acc = sgdclassifier_epochs(X, y, Xt, yt, lam, target, avg, opts.epochs)
                row[f"sgdclf{'_avg' if avg else ''}"] = dict(s=np.inf, epochs=k, acc=acc)
            for p in ranks:
                row[f"psvm_p{p}"] = dict(s=np.inf, epochs=None, acc=0.0, period=None)
            # repeats interleave the solvers, so a busy spell on a shared machine hits all
            for r in range(opts.repeat):
                t, _ = timed(lin.fit, X, y)
                row["linearsvc_s"] = min(row["linearsvc_s"], t)
                for key, avg in (("sgdclf", False), ("sgdclf_avg", True)):
                    if row[key]["epochs"] is not None:
                        k = row[key]["epochs"]
                        t, _ = timed(sgdclassifier_fit, X, y, lam, avg, k)
                        row[key]["s"] = min(row[key]["s"], t)
                for p in ranks:
                    t, e, acc, period = psvm_run(train, test, p, lam, target, opts.epochs, r, tmp)
                    cur = row[f"psvm_p{p}"]
                    if t < cur["s"] or (cur["epochs"] is None and e is None):
                        row[f"psvm_p{p}"] = dict(s=t, epochs=e, acc=acc, period=period)
            rows.append(row)
            print_row(row, opts.ranks)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


_HEADER = False


def print_row(row: dict, ranks: str) -> None:
    global _HEADER
    ps = [f"psvm_p{p}" for p in ranks.split(",")]
    if not _HEADER:
        cols = [
            "data",
            "LinearSVC s (acc)",
            "target",
            "SGDClf s (ep, acc)",
            "SGDClf avg s (ep, acc)",
        ] + [f"{p} s (ep, acc, period)" for p in ps]
        cols += ["P2 / best SGDClf"] if "psvm_p2" in ps else []
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        _HEADER = True

    def cell(d, extra=""):
        if d["epochs"] is None:
            return f"not reached ({100 * d['acc']:.2f}){extra}"
        return f"{d['s']:.4f} ({d['epochs']}, {100 * d['acc']:.2f}{extra})"

    cells = [
        row["data"],
        f"{row['linearsvc_s']:.3f} ({100 * row['linearsvc_acc']:.2f})",
        f"{100 * row['target']:.2f}",
        cell(row["sgdclf"]),
        cell(row["sgdclf_avg"]),
    ]
    cells += [cell(row[p], f", {row[p]['period']}") for p in ps]
    if "psvm_p2" in ps:
        best = min(row["sgdclf"]["s"], row["sgdclf_avg"]["s"])
        cells.append(f"{row['psvm_p2']['s'] / best:.2f}" if np.isfinite(best) else "-")
    print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
