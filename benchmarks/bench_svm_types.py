"""epsilon-SVR and one-class SVM, end to end: psvm-train at P = 1, 2 against scikit-learn's
SVR / OneClassSVM and LIBSVM's svm-train, at the same objective (#17).

    python benchmarks/bench_svm_types.py                      # the cases below, best of 1
    python benchmarks/bench_svm_types.py --repeat 3 --md benchmarks/results/svm_types.md

Every tool runs as a fresh process with the parent's environment unchanged (no
thread settings), process start and data loading included, as a user runs it:

* psvm: ``mpiexec -n P psvm-train -s S ... TRAIN MODEL``;
* scikit-learn: ``python -c`` loading the file with ``load_svmlight_file`` and
  fitting ``SVR`` / ``OneClassSVM`` with the same parameters (``cache_size`` 200);
* LIBSVM: the ``svm-train`` binary with the same flags, whose ``obj`` line is the
  reference objective (scikit-learn does not report one).

The objective psvm prints must be within 1e-3 relative of LIBSVM's.
"""

from __future__ import annotations

import argparse
import json
import lzma
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from heuristics.bench import data_dir, libsvm_tool, machine, mpiexec, tool, versions
from heuristics.report.text import markdown_table

# name: (file, -s, flags shared by psvm-train and svm-train, scikit-learn's estimator and kwargs)
CASES = {
    "cadata_scale epsilon-SVR": (
        "cadata_scale.xz",
        3,
        ["-c", "10000", "-p", "1000", "-g", "0.5"],
        "SVR(C=10000, epsilon=1000, gamma=0.5, cache_size=200)",
    ),
    "cpusmall_scale epsilon-SVR": (
        "cpusmall_scale.xz",
        3,
        ["-c", "100", "-p", "0.1", "-g", "0.5"],
        "SVR(C=100, epsilon=0.1, gamma=0.5, cache_size=200)",
    ),
    "a9a one-class": (
        "a9a.xz",
        2,
        ["-n", "0.1", "-g", "0.05"],
        "OneClassSVM(nu=0.1, gamma=0.05, cache_size=200)",
    ),
    "ijcnn1 one-class": (
        "ijcnn1.xz",
        2,
        ["-n", "0.1", "-g", "1"],
        "OneClassSVM(nu=0.1, gamma=1, cache_size=200)",
    ),
}
SKLEARN_CHILD = """
import sys
from sklearn.datasets import load_svmlight_file
from sklearn.svm import SVR, OneClassSVM
X, y = load_svmlight_file(sys.argv[1])
X.indices, X.indptr = X.indices.astype("int32"), X.indptr.astype("int32")  # SVR needs 32 bits
est = {est}
est.fit(X, y)
print("nsv", est.support_.size)
"""


def run(cmd: list[str]) -> tuple[float, str]:
    """Wall seconds and output of ``cmd`` (the parent's environment, unchanged)."""
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return time.perf_counter() - t, r.stdout + r.stderr


def objective(text: str) -> float:
    return float(re.search(r"obj = (\S+),", text).group(1))


def measure(name: str, workdir: Path, ranks: list[int], repeat: int) -> dict:
    file, svm_type, flags, sk = CASES[name]
    train = workdir / file.removesuffix(".xz")
    with lzma.open(data_dir() / file, "rb") as src:
        train.write_bytes(src.read())
    model = str(workdir / "model")
    base = ["-s", str(svm_type), *flags, "-m", "200"]
    best: dict[str, float] = {}
    objs: dict[str, float] = {}
    for _ in range(repeat):
        for p in ranks:
            t, out = run([mpiexec(), "-n", str(p), tool("psvm-train", "pip install -e ."), *base,
                          str(train), model])  # fmt: skip
            best[f"psvm P={p}"] = min(t, best.get(f"psvm P={p}", t))
            objs[f"psvm P={p}"] = objective(out)
        t, out = run([libsvm_tool("svm-train"), *base, str(train), model])
        best["libsvm"], objs["libsvm"] = min(t, best.get("libsvm", t)), objective(out)
        t, _ = run([sys.executable, "-c", SKLEARN_CHILD.format(est=sk), str(train)])
        best["sklearn"] = min(t, best.get("sklearn", t))
    return {"seconds": best, "objective": objs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--md", help="also write the table as Markdown here (and .json beside it)")
    args = ap.parse_args(argv)
    ranks = [int(p) for p in args.ranks.split(",")]
    rows, results = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases.split(","):
            r = results[name] = measure(name, Path(tmp), ranks, args.repeat)
            s, o = r["seconds"], r["objective"]
            gap = max(abs(o[k] - o["libsvm"]) / abs(o["libsvm"]) for k in o if k != "libsvm")
            rows.append(
                [name, f"{s['sklearn']:.2f}", f"{s['libsvm']:.2f}"]
                + [f"{s[f'psvm P={p}']:.2f}" for p in ranks]
                + [f"{s['sklearn'] / s[f'psvm P={p}']:.2f}" for p in ranks]
                + [f"{gap:.1e}"]
            )
            print(" | ".join(rows[-1]), flush=True)
    head = ["case", "sklearn s", "svm-train s", *[f"psvm P={p} s" for p in ranks]]
    head += [f"sklearn / psvm P={p}" for p in ranks] + ["obj vs LIBSVM (rel)"]
    table = "\n".join(markdown_table(head, rows))
    print(table)
    if args.md:
        Path(args.md).write_text(table + "\n")
        info = {"results": results, "machine": machine(), "versions": versions()}
        Path(args.md).with_suffix(".json").write_text(json.dumps(info, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
