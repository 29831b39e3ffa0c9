"""psvm-train -v 5: how ranks share the folds, against LIBSVM's svm-train -v 5.

    python benchmarks/bench_cv.py --repeat 3
    python benchmarks/bench_cv.py --only heart_scale --repeat 1

Designs, P = 2 on this box (``--cv-parallel``):

- ``rows``: every fold is one distributed training over both ranks' rows.
- ``folds``: every rank gets a copy of all rows and trains folds 0, 2, 4 and 1, 3 alone
  (numba one thread each, as each rank has under mpiexec -n 2 on 2 cores).
- ``P=1``: one process, psvm's default threads.

Times: ``train`` is the in-process time of the folds (psvm-train's ``--stats``
``seconds_max.train``, the slowest rank's), ``wall`` the whole command with start-up and
loading; LIBSVM's is its wall time. Best of ``--repeat``. The accuracies of every psvm
design are the same number (the folds and the models do not depend on the design);
LIBSVM's folds differ (its rand()).

Also printed: the kernel columns' share of psvm's training time (``seconds_max.kernel``,
sampled) and the cache misses, which bound what a kernel cache shared across folds could
save (docs/cli.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from heuristics.bench import data_dir, head_path, libsvm_tool, machine, mpiexec

REPO = Path(__file__).resolve().parents[1]
# name: (file, rows or None, extra svm-train options)
PROBLEMS = {
    "heart_scale": ("heart_scale.xz", None, []),
    "a9a 3k": ("a9a.xz", 3000, []),
    "a9a 5k": ("a9a.xz", 5000, []),
    "a9a 5k C=32 g=2^-7": ("a9a.xz", 5000, ["-c", "32", "-g", "0.0078125"]),
    "usps.t": ("usps.t.xz", None, []),
    "a9a 3k C=2^15 g=2^-7": ("a9a.xz", 3000, ["-c", "32768", "-g", "0.0078125"]),
}


def _env(threads: int | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    if threads is not None:
        env["NUMBA_NUM_THREADS"] = str(threads)
    return env


def _run(cmd: list[str], env=None) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return wall, r.stdout


def psvm(path: str, opts: list[str], ranks: int, design: str, workdir: str) -> dict:
    stats = os.path.join(workdir, "stats.json")
    cmd = [sys.executable, "-m", "psvm.cli.train", "-q", "-v", "5", "--cv-parallel", design]
    cmd += ["--stats", stats, *opts, path]
    if ranks > 1:
        cmd = [mpiexec(), "-n", str(ranks), *cmd]
    wall, out = _run(cmd, _env())
    rep = json.loads(Path(stats).read_text())
    sec = rep["seconds_max"]
    return {
        "wall": wall,
        "train": sec["train"],
        "kernel": sec.get("kernel", 0.0),
        "misses": rep["counts"].get("cache_misses", 0),
        "accuracy": out.split()[-1],
    }


def libsvm(path: str, opts: list[str]) -> dict:
    wall, out = _run([libsvm_tool("svm-train"), "-q", "-v", "5", *opts, path])
    return {"wall": wall, "accuracy": out.split()[-1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated problem names")
    args = ap.parse_args()
    names = [n for n in PROBLEMS if not args.only or n in args.only.split(",")]
    print(f"# psvm-train -v 5 designs at P=2 against svm-train -v 5; best of {args.repeat}")
    print(f"# machine: {json.dumps(machine())}")
    print(
        "| problem | LIBSVM wall s | P=1 train s (wall) | rows P=2 train s (wall) "
        "| folds P=2 train s (wall) | kernel share P=1 | cache misses | accuracy psvm / LIBSVM |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    with tempfile.TemporaryDirectory() as workdir:
        for name in names:
            file, rows, opts = PROBLEMS[name]
            path = head_path(data_dir() / file, rows)
            psvm(path, opts, 1, "rows", workdir)  # warm numba's cache
            best = {}
            for _ in range(args.repeat):
                runs = {
                    "lib": libsvm(path, opts),
                    "p1": psvm(path, opts, 1, "rows", workdir),
                    "p2": psvm(path, opts, 2, "rows", workdir),
                    "grp": psvm(path, opts, 2, "folds", workdir),
                }
                for key, r in runs.items():
                    if key not in best or r["wall"] < best[key]["wall"]:
                        best[key] = r
            b = best
            assert b["p1"]["accuracy"] == b["p2"]["accuracy"] == b["grp"]["accuracy"], b

            def cell(r):
                return f"{r['train']:.2f} ({r['wall']:.2f})"

            share = b["p1"]["kernel"] / b["p1"]["train"]
            print(
                f"| {name} | {b['lib']['wall']:.2f} | {cell(b['p1'])} | {cell(b['p2'])} | "
                f"{cell(b['grp'])} | {share:.0%} | {b['p1']['misses']} | "
                f"{b['p1']['accuracy']} / {b['lib']['accuracy']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
