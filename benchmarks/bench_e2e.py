"""End-to-end wall time as a user sees it: psvm-train against LIBSVM's svm-train and sklearn.

    python benchmarks/bench_e2e.py                  # a9a,w8a,ijcnn1,skin_nonskin at P = 1,2
    python benchmarks/bench_e2e.py --data a9a --rows 2000 --ranks 1,2 --repeat 1
    python benchmarks/bench_e2e.py --repeat 3 --md benchmarks/results/e2e.md
    python benchmarks/bench_e2e.py --repeat 3 --pause 3    # each run after 3 s idle
    python benchmarks/bench_e2e.py --data usps.t,classes5,classes8   # multi-class
    python benchmarks/bench_e2e.py --data usps.t --probability        # -b 1 everywhere

Every tool runs as a fresh process with the parent's environment passed on
UNCHANGED: no NUMBA_NUM_THREADS, OMP_NUM_THREADS or other override is set, so
psvm picks its own threads per rank (``-o 0``: the node's cores / its ranks),
just as for a user typing the commands. Per data set (files
``$PSVM_SHARED_DATA/NAME.xz`` and ``NAME.t.xz``, default ``../shared/data``; C
and gamma from :data:`heuristics.bench.DATASETS`) the train and test files are
decompressed once to a temporary directory (train: the first ``--rows`` lines
only, if given), then, ``--repeat`` times interleaved (the fastest run counts):

* psvm: ``mpiexec -n P psvm-train -c C -g G -m 200 TRAIN MODEL`` for each P in
  ``--ranks`` (mpiexec and psvm-train from next to this Python, i.e. the mpich
  wheel and the installed entry point, bypassing any pyenv shim); wall clock
  from launch to exit, plus "train+load s", the time psvm-train prints itself
  (``Wrote MODEL in X s``: reading, training and writing the model);
* LIBSVM in one thread, "svm-train": ``svm-train -c C -g G -m 200 TRAIN MODEL``, the
  binary on PATH or else Debian's libsvm-tools fetched into the user's cache
  (:func:`heuristics.bench.libsvm_tool`), wall clock from launch to exit;
* LIBSVM with OpenMP, "libsvm-omp": ``python -c`` running libsvm-official's
  ``svm_read_problem`` + ``svm_train`` with the same options, wall clock from launch
  to the end of ``svm_train``: the pip package builds LIBSVM with ``-fopenmp``, so its
  kernel columns run in OpenMP's default threads (one per core);
* scikit-learn: ``python -c`` running ``load_svmlight_file`` (indices cast to
  32 bits, which SVC requires) + ``SVC(C, gamma, cache_size=200).fit``; wall
  clock from launch to the end of ``fit`` (the child reports ``time.time()``
  then and predicts the test set afterwards, untimed), plus the fit time
  measured inside.

``--pause S`` sleeps S seconds before every timed run: a run then starts as a
user's single run after a pause, on a VM that has taken back the memory freed
by the run before (this VM does within a second: a MB touched first costs 2.4 ms
then, 0.13 ms right after another process freed it).

Accuracy: ``psvm-predict TEST MODEL OUT`` once (one process, the P = 1 model),
``svm-predict`` likewise, SVC's ``predict`` in its child. Data sets without a
test split (skin_nonskin, heart_scale) are scored on the training rows, and so are
``classes5`` and ``classes8``, multi-class sets that scikit-learn makes (:data:`SYNTHETIC`).
Note that ``-m 200`` is per process: psvm at P = 2 has 2 x 200 MB of kernel cache.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import lzma
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from heuristics.bench import (
    DATASETS,
    Dataset,
    data_dir,
    libsvm_tool,
    machine,
    mpiexec,
    tool,
    versions,
    write_output,
)
from heuristics.report.text import markdown_table

REPO = Path(__file__).resolve().parents[1]
CACHE_MB = 200
ENV_VARS = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

SKLEARN_CHILD = """
import sys, time
import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.svm import SVC
train, test, C, gamma, nf = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), \
    int(sys.argv[5])
def load(path):
    X, y = load_svmlight_file(path, n_features=nf)
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X, y
X, y = load(train)
prob = sys.argv[6:] == ["-b", "1"]
clf = SVC(C=C, gamma=gamma, cache_size=CACHE, probability=prob, random_state=0)
t = time.perf_counter()
clf.fit(X, y)
fit = time.perf_counter() - t
print(f"fit_end {time.time():.6f} fit {fit:.6f} nsv {int(clf.n_support_.sum())}", flush=True)
Xt, yt = load(test)
print(f"accuracy {100 * np.mean(clf.predict(Xt) == yt):.4f}")
""".replace("CACHE", str(CACHE_MB))

LIBSVM_CHILD = """
import sys, time
from libsvm.svmutil import svm_predict, svm_read_problem, svm_train
train, test, C, gamma = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
extra = " ".join(sys.argv[5:])
y, x = svm_read_problem(train)
t = time.perf_counter()
m = svm_train(y, x, f"-c {C} -g {gamma} -m CACHE {extra} -q")
fit = time.perf_counter() - t
print(f"fit_end {time.time():.6f} fit {fit:.6f} nsv {m.get_nr_sv()}", flush=True)
yt, xt = svm_read_problem(test)
_, (acc, _, _), _ = svm_predict(yt, xt, m, "-q")
print(f"accuracy {acc:.4f}")
""".replace("CACHE", str(CACHE_MB))


def run(cmd: list[str]) -> tuple[float, float, str]:
    """Run ``cmd`` with the parent's environment; (start epoch, wall seconds, stdout)."""
    t0, p0 = time.time(), time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - p0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return t0, wall, r.stdout + r.stderr


def find(pattern: str, text: str, cast=float):
    m = re.search(pattern, text)
    return cast(m.group(1)) if m else None


def decompress(src: Path, dst: Path, rows: int | None) -> int:
    """``src`` (.xz) as plain text at ``dst``, only the first ``rows`` lines if given."""
    n = 0
    with lzma.open(src, "rb") as f, open(dst, "wb") as out:
        for line in f:
            if rows is not None and n >= rows:
                break
            out.write(line)
            n += 1
    return n


# multi-class sets that scikit-learn makes (the shared data holds one, usps.t): name -> (rows,
# classes) of make_classification with 20 features, 10 informative, seed 0; C = 1, gamma 0.05,
# scored on the training rows
SYNTHETIC = {"classes5": (12000, 5), "classes8": (3000, 8)}


def synthetic(name: str, dst: Path) -> tuple[Dataset, int]:
    """A :data:`SYNTHETIC` set written at ``dst`` (LIBSVM format), and its rows."""
    from sklearn.datasets import dump_svmlight_file, make_classification

    rows, classes = SYNTHETIC[name]
    X, y = make_classification(rows, 20, n_informative=10, n_classes=classes, random_state=0)
    dump_svmlight_file(X, y, str(dst))
    return Dataset(name, dst.name, None, 1.0, 0.05, 20), rows


def psvm_train(
    ranks: int, ds: Dataset, train: str, model: str, subset: bool, options: tuple = ()
) -> dict:
    """``mpiexec -n ranks psvm-train [options]``; ``--n-features`` only for a head subset,
    which may lack the last columns (psvm-predict rejects test features beyond the model's)."""
    extra = ["--n-features", str(ds.n_features)] if subset else []
    train_cmd = tool("psvm-train", "pip install -e . first")
    cmd = [
        mpiexec(),
        "-n",
        str(ranks),
        train_cmd,
        "-c",
        f"{ds.C:g}",
        "-g",
        f"{ds.gamma:g}",
        "-m",
        f"{CACHE_MB}",
        *extra,
        *options,
        train,
        model,
    ]
    _, wall, out = run(cmd)
    return {
        "wall": wall,
        "fit": find(r"Wrote .* in ([\d.]+) ?s", out),
        "n_sv": find(r"Total nSV = (\d+)", out, int),
    }


# the LIBSVM references: svm-train (one thread) and libsvm-official (OpenMP), each if present
LIBSVMS = ("svm-train", "libsvm-omp")


def libsvms() -> dict[str, str]:
    """The LIBSVM references this machine has: label -> what runs."""
    have = {}
    binary = libsvm_tool("svm-train", required=False)
    if binary and libsvm_tool("svm-predict", required=False):
        have["svm-train"] = f"{binary} (one thread)"
    if importlib.util.find_spec("libsvm") is not None:
        version = importlib.metadata.version("libsvm-official")
        have["libsvm-omp"] = f"libsvm-official {version} (Python; OpenMP, default threads)"
    return have


def libsvm_train(
    lib: str, ds: Dataset, train: str, test: str, model: str, options: tuple = ()
) -> dict:
    """One timed LIBSVM training: the ``svm-train`` binary, or libsvm-official in a child."""
    if lib == "svm-train":
        cmd = [libsvm_tool("svm-train"), "-c", f"{ds.C:g}", "-g", f"{ds.gamma:g}"]
        _, wall, out = run([*cmd, "-m", f"{CACHE_MB}", *options, train, model])
        return {"wall": wall, "fit": None, "n_sv": find(r"Total nSV = (\d+)", out, int)}
    return child(LIBSVM_CHILD, [train, test, f"{ds.C:g}", f"{ds.gamma:g}", *options])


def sklearn_fit(ds: Dataset, train: str, test: str, options: tuple = ()) -> dict:
    """SVC's fit; ``options`` ``-b 1``: ``probability=True``."""
    args = [train, test, f"{ds.C:g}", f"{ds.gamma:g}", str(ds.n_features), *options]
    return child(SKLEARN_CHILD, args)


def child(code: str, args: list[str]) -> dict:
    """A ``python -c`` child timed from launch to the ``fit_end`` epoch it reports."""
    t0, total, out = run([sys.executable, "-c", code, *args])
    return {
        "wall": find(r"fit_end ([\d.]+)", out) - t0,
        "wall_to_exit": total,
        "fit": find(r" fit ([\d.]+)", out),
        "n_sv": find(r"nsv (\d+)", out, int),
        "accuracy": find(r"accuracy ([\d.]+)", out),
    }


def accuracy(cmd: list[str]) -> float | None:
    try:
        return find(r"Accuracy = ([\d.]+)%", run(cmd)[2])
    except RuntimeError as e:
        print(f"# no accuracy: {e}", file=sys.stderr)
        return None


def warmup(ranks: list[int], ds: Dataset, train: str, subset: bool, tmp: Path) -> dict:
    """One untimed psvm-train per P on the data set itself, so that numba's on-disk cache holds
    every specialisation the timed runs use (a stale cache, e.g. after a source change, costs a
    launch its compile time; the bundled data set compiled neither the large-file reader nor
    the threaded sums a full a9a needs at P = 1). The wall seconds are kept as ``warmup_wall``:
    a full training plus whatever compiling was left (before session 12: the bundled set's)."""
    model = str(tmp / "warmup.model")
    return {f"psvm P={p}": psvm_train(p, ds, train, model, subset)["wall"] for p in ranks}


def bench(
    name: str,
    ranks: list[int],
    rows: int | None,
    test_rows: int | None,
    repeat: int,
    libs: list[str],
    warm: bool,
    pause: float = 0.0,
    options: tuple = (),
) -> dict:
    with tempfile.TemporaryDirectory(prefix="psvm-e2e-") as tmp:
        tmp = Path(tmp)
        train = str(tmp / name)
        if name in SYNTHETIC:
            ds, n = synthetic(name, Path(train))
        else:
            ds = DATASETS[name]
            n = decompress(data_dir() / ds.train, Path(train), rows)
        cold = warmup(ranks, ds, train, rows is not None, tmp) if warm else None
        test, n_test = train, n
        if ds.test:
            test = str(tmp / f"{name}.t")
            n_test = decompress(data_dir() / ds.test, Path(test), test_rows)
        runs = {f"psvm P={p}": [] for p in ranks} | {lib: [] for lib in libs} | {"sklearn": []}
        lib_model = str(tmp / "libsvm.model")  # (svm-train's; libsvm-omp writes none)
        for _ in range(repeat):  # interleaved, so that load drifts hit every tool alike
            for p in ranks:
                time.sleep(pause)
                runs[f"psvm P={p}"].append(
                    psvm_train(p, ds, train, str(tmp / f"psvm{p}.model"), rows is not None, options)
                )
            for lib in libs:
                time.sleep(pause)
                runs[lib].append(libsvm_train(lib, ds, train, test, lib_model, options))
            time.sleep(pause)
            runs["sklearn"].append(sklearn_fit(ds, train, test, options))
        best = {k: min(v, key=lambda r: r["wall"]) for k, v in runs.items()}
        p_acc = 1 if 1 in ranks else ranks[0]
        acc = {
            f"psvm P={p_acc}": accuracy(
                [
                    tool("psvm-predict", "pip install -e . first"),
                    test,
                    str(tmp / f"psvm{p_acc}.model"),
                    str(tmp / "psvm.out"),
                ]
            )
        }
        for lib in libs:
            if lib == "svm-train":  # (the model of its last run)
                out = str(tmp / "libsvm.out")
                acc[lib] = accuracy([libsvm_tool("svm-predict"), test, lib_model, out])
            else:
                acc[lib] = runs[lib][0]["accuracy"]
        acc["sklearn"] = runs["sklearn"][0]["accuracy"]
    return {
        "data": name,
        "n": n,
        "n_test": n_test,
        "C": ds.C,
        "gamma": ds.gamma,
        "ranks": ranks,
        "libsvms": libs,
        "runs": runs,
        "wall": {k: b["wall"] for k, b in best.items()},
        "fit": {k: b["fit"] for k, b in best.items()},
        "n_sv": {k: b["n_sv"] for k, b in best.items()},
        "accuracy": acc,
        "warmup_wall": cold,
    }


def table(res: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: wall seconds, ratios, speed-up, accuracies, then fit-only seconds."""
    ranks, libs = res[0]["ranks"], res[0]["libsvms"]
    ps = [f"psvm P={p}" for p in ranks]
    refs = [*libs, "sklearn"]
    head = ["data", "n", *(f"{k} s" for k in [*ps, *refs])]
    head += [f"{ref}/psvm P={p}" for ref in refs for p in ranks]
    head += [f"P{p}/P{ranks[0]}" for p in ranks[1:]]
    head += [f"acc {k} %" for k in ["psvm", *refs]]
    head += [f"psvm P={p} train+load s" for p in ranks] + [f"{ref} fit s" for ref in refs]
    body = []
    for r in res:
        w, f, a = r["wall"], r["fit"], r["accuracy"]
        row = [r["data"], str(r["n"]), *(_s(w[k]) for k in [*ps, *refs])]
        row += [_x(w[ref] / w[k]) for ref in refs for k in ps]
        row += [_x(w[ps[0]] / w[k]) for k in ps[1:]]
        psvm_acc = next(v for k, v in a.items() if k.startswith("psvm"))
        row += [_s(psvm_acc), *(_s(a[ref]) for ref in refs)]
        row += [_s(f[k]) for k in ps] + [_s(f[ref]) for ref in refs]
        body.append(row)
    return head, body


def _s(v) -> str:
    return "-" if v is None else f"{v:.2f}" if v >= 1 else f"{v:.3f}"


def _x(v) -> str:
    return f"{v:.3g}x"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data",
        default="a9a,w8a,ijcnn1,skin_nonskin",
        help=f"comma-separated, from {', '.join([*DATASETS, *SYNTHETIC])}",
    )
    p.add_argument("--ranks", default="1,2", help="psvm process counts (mpiexec -n P)")
    p.add_argument("--rows", type=int, default=None, help="train on the first ROWS rows only")
    p.add_argument("--test-rows", type=int, default=None, help="score the first ROWS test rows")
    p.add_argument("--repeat", type=int, default=1, help="runs of each tool; the fastest counts")
    p.add_argument(
        "--no-warmup",
        action="store_true",
        help="skip the untimed psvm-train per P on each data set before its timed runs",
    )
    p.add_argument(
        "--pause", type=float, default=0.0, help="seconds idle before each timed run (default 0)"
    )
    p.add_argument(
        "--probability",
        action="store_true",
        help="train probability models: -b 1, SVC(probability=True)",
    )
    p.add_argument(
        "--libsvm",
        default="",
        help=f"LIBSVM references to time, from {','.join(LIBSVMS)} (default: those present)",
    )
    p.add_argument("--md", default=str(REPO / "benchmarks/results/e2e.md"))
    p.add_argument("--json", default=str(REPO / "benchmarks/results/e2e.json"))
    a = p.parse_args(argv)
    names = a.data.split(",")
    for name in names:
        if name not in DATASETS and name not in SYNTHETIC:
            p.error(f"unknown data set {name!r}; choose from {', '.join([*DATASETS, *SYNTHETIC])}")
    ranks = [int(r) for r in a.ranks.split(",")]
    chosen = a.libsvm.split(",") if a.libsvm else LIBSVMS
    if not set(chosen) <= set(LIBSVMS):
        p.error(f"--libsvm {a.libsvm}: choose from {', '.join(LIBSVMS)}")
    have = {k: v for k, v in libsvms().items() if k in chosen}
    libs = list(have)
    m = machine()
    load = " ".join(f"{x:.1f}" for x in m["load_avg"] or [])
    env = ", ".join(f"{k}={os.environ.get(k, 'unset')}" for k in ENV_VARS)
    header = [
        "End-to-end wall seconds (launch to exit; sklearn and libsvm-omp: launch to end of fit), "
        f"best of {a.repeat}, -m {CACHE_MB} MB per process"
        f"{'' if a.no_warmup else ', after an untimed psvm-train per P on the data set'}"
        f"{f', {a.pause:g} s idle before each timed run' if a.pause else ''}.",
        f"Environment passed unchanged, no thread overrides ({env}).",
        f"{m['host']}: {m['cpu']}, {m['cores']} cores, load {load}; "
        f"LIBSVM: {'; '.join(f'{k} = {v}' for k, v in have.items()) or 'none'}; "
        f"rows: {a.rows or 'all'}.",
    ]
    options = ("-b", "1") if a.probability else ()
    if options:
        header.append("Probability models: -b 1 (psvm-train, svm-train), SVC(probability=True).")
    for line in header:
        print(f"# {line}", flush=True)
    res = []
    for name in names:
        warm = not a.no_warmup
        res.append(bench(name, ranks, a.rows, a.test_rows, a.repeat, libs, warm, a.pause, options))
        head, body = table(res[-1:])
        if len(res) == 1:
            print("  ".join([head[0].ljust(12), *head[1:]]))
        cells = [body[0][0].ljust(12)] + [
            c.rjust(len(h)) for c, h in zip(body[0][1:], head[1:], strict=True)
        ]
        print("  ".join(cells), flush=True)
    head, body = table(res)
    md = [*(f"{line}  " for line in header), "", *markdown_table(head, body)]
    write_output(a.md, "\n".join(md))
    out = {
        "argv": sys.argv,
        "header": header,
        "environment": "unchanged",
        "inherited": {k: os.environ.get(k) for k in ENV_VARS},
        "machine": m,
        "versions": versions(),
        "libsvm": have,
        "rows": a.rows,
        "repeat": a.repeat,
        "pause": a.pause,
        "results": res,
    }
    write_output(a.json, json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
