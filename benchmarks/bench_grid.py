"""LIBSVM's grid.py (Debian's svm-grid) on a9a's first 5,000 rows: psvm-train against svm-train.

    python benchmarks/bench_grid.py                   # grid.py's default grid, 110 points
    python benchmarks/bench_grid.py --grid reduced    # every other point: 6 x 5 = 30
    python benchmarks/bench_grid.py --workers 2 --ranks 1 --threads 1   # two trainings at once

Both sides run the unmodified grid.py with ``-v 5``: psvm through a two-line wrapper,
``mpiexec -n RANKS python -m psvm.cli.train "$@"`` (``-svmtrain`` takes one path), LIBSVM
with its own ``svm-train``. ``--workers`` sets grid.py's ``nr_local_worker`` (it has no
flag for it) by loading grid.py as a module and calling its ``find_parameters``. Printed:
wall time of each grid, the ratio (LIBSVM / psvm, above 1: psvm faster), each side's best
(C, gamma, rate), how far the two sides' rates are apart per point (their folds differ:
psvm's generator is not LIBSVM's rand()), and the load average before and after.
Results also go to ``benchmarks/results/grid.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from heuristics.bench import (
    data_dir,
    head_path,
    libsvm_tool,
    machine,
    mpiexec,
    versions,
)

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
GRIDS = {
    "default": [],  # grid.py's: log2c -5..15 step 2, log2g 3..-15 step -2
    "reduced": ["-log2c", "-5,15,4", "-log2g", "3,-15,-4"],
    "tiny": ["-log2c", "-1,1,2", "-log2g", "-7,-5,2"],
}
# grid.py as a module, so that nr_local_worker can be set: argv = grid.py workers options data
RUN_GRID = """
import importlib.machinery, importlib.util, sys
loader = importlib.machinery.SourceFileLoader("grid", sys.argv[1])
grid = importlib.util.module_from_spec(importlib.util.spec_from_loader("grid", loader))
loader.exec_module(grid)
grid.nr_local_worker = int(sys.argv[2])
grid.find_parameters(sys.argv[-1], sys.argv[3:-1])
"""


def run_grid(svmtrain: str, data: str, grid: list[str], workers: int, out: Path) -> dict:
    """One grid.py run; its wall time, best point and every point's rate."""
    cmd = [sys.executable, "-c", RUN_GRID, libsvm_tool("svm-grid")]
    cmd += [str(workers), *grid, "-svmtrain", svmtrain, "-gnuplot", "null", "-out", str(out)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    t0 = time.perf_counter()
    r = subprocess.run([*cmd, data], capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if r.returncode != 0 or "quit" in r.stderr:
        raise RuntimeError(f"grid.py failed with {svmtrain}:\n{r.stderr[-3000:]}")
    c, g, rate = map(float, r.stdout.splitlines()[-1].split())
    rates = {}
    for line in out.read_text().splitlines():  # log2c=X log2g=Y rate=Z
        fields = dict(f.split("=") for f in line.split())
        rates[(float(fields["log2c"]), float(fields["log2g"]))] = float(fields["rate"])
    return {"wall": wall, "best": (c, g, rate), "rates": rates}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", choices=sorted(GRIDS), default="default")
    ap.add_argument("--rows", type=int, default=5000)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--threads", type=int, help="psvm-train -o: numba threads per rank")
    args = ap.parse_args()
    data = head_path(data_dir() / "a9a.xz", args.rows)
    before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = Path(tmp) / "psvm-train-mpi"
        cmd = [sys.executable, "-m", "psvm.cli.train"]
        cmd = [mpiexec(), "-n", str(args.ranks), *cmd] if args.ranks > 1 else cmd
        cmd += ["-o", str(args.threads)] if args.threads else []
        wrapper.write_text("#!/bin/sh\nexec " + shlex.join(cmd) + ' "$@"\n')
        wrapper.chmod(0o755)
        subprocess.run(
            [str(wrapper), "-q", "-v", "2", data],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            check=True,
        )  # warm cache
        grid = GRIDS[args.grid]
        ours = run_grid(str(wrapper), data, grid, args.workers, Path(tmp) / "psvm.out")
        svm_train = libsvm_tool("svm-train")
        theirs = run_grid(svm_train, data, grid, args.workers, Path(tmp) / "libsvm.out")
    after = os.getloadavg()
    diffs = [abs(ours["rates"][p] - theirs["rates"][p]) for p in theirs["rates"]]
    ratio = theirs["wall"] / ours["wall"]
    lines = [
        f"# grid.py -v 5 on a9a's first {args.rows} rows, {args.grid} grid "
        f"({len(theirs['rates'])} points), {args.workers} grid.py worker(s)",
        f"# load average before {before[0]:.2f}, after {after[0]:.2f} (1 min)",
        "| side | wall s | best C | best gamma | best rate % |",
        "| --- | ---: | ---: | ---: | ---: |",
        "| psvm-train, {} rank(s) | {:.1f} | {:g} | {:g} | {:g} |".format(
            args.ranks, ours["wall"], *ours["best"]
        ),
        "| LIBSVM svm-train | {:.1f} | {:g} | {:g} | {:g} |".format(
            theirs["wall"], *theirs["best"]
        ),
        f"ratio LIBSVM / psvm: {ratio:.2f}x (target 3x)",
        f"rate difference per point: max {max(diffs):.2f}, mean {sum(diffs) / len(diffs):.2f} "
        "points of accuracy",
    ]
    print("\n".join(lines))
    RESULTS.mkdir(exist_ok=True)
    record = {
        "args": vars(args),
        "psvm": {**ours, "rates": {str(k): v for k, v in ours["rates"].items()}},
        "libsvm": {**theirs, "rates": {str(k): v for k, v in theirs["rates"].items()}},
        "ratio": ratio,
        "load": {"before": before, "after": after},
        "machine": machine(),
        "versions": versions(),
    }
    (RESULTS / f"grid_{args.grid}_w{args.workers}_p{args.ranks}.json").write_text(
        json.dumps(record, indent=1)
    )


if __name__ == "__main__":
    main()
