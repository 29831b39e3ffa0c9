"""Brier scores of -b 1: psvm-train/psvm-predict against LIBSVM's svm-train/svm-predict.

    python benchmarks/bench_probability.py [--rows N] [-n P]

a9a (train a9a, test a9a.t) and ijcnn1 (ijcnn1, ijcnn1.t), LIBSVM's default C and gamma,
each side with its own internal folds. Prints each Brier score, their difference (target:
within 0.005), and the training wall times and their ratio measured in the same run.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from heuristics.bench import data_dir, head_path, libsvm_tool

SETS = {"a9a": ("a9a.xz", "a9a.t.xz"), "ijcnn1": ("ijcnn1.xz", "ijcnn1.t.xz")}


def brier(out: Path, test: str) -> float:
    """Mean over rows of sum_c (p_c - [y = c])^2 from a `-b 1` output file."""
    lines = out.read_text().split("\n")
    labels = np.array(lines[0].split()[1:], dtype=float)
    prob = np.loadtxt(lines[1:], ndmin=2)[:, 1:]
    y = np.array([float(line.split(None, 1)[0]) for line in open(test) if line.strip()])
    return float(np.mean(np.sum((prob - (y[:, None] == labels)) ** 2, axis=1)))


def run(cmd: list) -> float:
    t0 = time.perf_counter()
    subprocess.run(list(map(str, cmd)), check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=None, help="first training rows (default all)")
    ap.add_argument("-n", type=int, default=1, help="psvm's ranks (mpiexec -n)")
    args = ap.parse_args()
    ours = [sys.executable, "-m"]
    if args.n > 1:
        ours = ["mpiexec", "-n", args.n, *ours]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, (train_file, test_file) in SETS.items():
            train = head_path(data_dir() / train_file, args.rows)
            test = head_path(data_dir() / test_file, None)
            t_lib = run([libsvm_tool("svm-train"), "-q", "-b", "1", train, tmp / "lib"])
            run([libsvm_tool("svm-predict"), "-b", "1", test, tmp / "lib", tmp / "lib.out"])
            t_ours = run([*ours, "psvm.cli.train", "-q", "-b", "1", train, tmp / "ours"])
            run([*ours, "psvm.cli.predict", "-q", "-b", "1", test, tmp / "ours", tmp / "o.out"])
            b_lib, b_ours = brier(tmp / "lib.out", test), brier(tmp / "o.out", test)
            print(
                f"{name}: Brier psvm {b_ours:.5f} LIBSVM {b_lib:.5f} (diff {b_ours - b_lib:+.5f}); "
                f"train psvm {t_ours:.1f}s (P={args.n}) LIBSVM {t_lib:.1f}s "
                f"(ratio {t_lib / t_ours:.2f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
