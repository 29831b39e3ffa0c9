"""epsilon-SVR and nu-SVR iterations: LIBSVM's svm-train with and without shrinking
against psvm-train without elimination and with the default heuristic, one process (#17).

    python benchmarks/svr_iterations.py --md benchmarks/results/svr_iterations.md

Iterations are counts, not times: the machine's load does not change them. ``none``
against ``-h 0`` compares the selections alone (the same rule; LIBSVM breaks ties
towards the larger index and keeps Q in float, so the paths part after a while);
``frequent`` and ``frequent --reconstruction multi`` against ``-h 1`` compare the
elimination schedules, which decide when eliminated rows are looked at again.
"""

from __future__ import annotations

import argparse
import lzma
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from heuristics.bench import data_dir, tool
from heuristics.report.text import markdown_table

# name: (file, flags shared by svm-train and psvm-train)
CASES = {
    "cadata eps C=1e4 p=1e3": ("cadata_scale.xz", "-s 3 -c 10000 -p 1000 -g 0.5"),
    "cadata eps C=1e5 p=1e4": ("cadata_scale.xz", "-s 3 -c 100000 -p 10000 -g 0.5"),
    "cpusmall eps C=100 p=0.1": ("cpusmall_scale.xz", "-s 3 -c 100 -p 0.1 -g 0.5"),
    "abalone eps C=100 p=0.1": ("abalone_scale.xz", "-s 3 -c 100 -p 0.1 -g 0.5"),
    "space_ga eps C=100 p=0.01": ("space_ga_scale.xz", "-s 3 -c 100 -p 0.01 -g 0.5"),
    "mg eps C=100 p=0.01": ("mg_scale.xz", "-s 3 -c 100 -p 0.01 -g 0.5"),
    "cpusmall nu C=100 n=0.5": ("cpusmall_scale.xz", "-s 4 -c 100 -n 0.5 -g 0.5"),
    "abalone nu C=10 n=0.5": ("abalone_scale.xz", "-s 4 -c 10 -n 0.5 -g 0.5"),
}
RUNS = {  # column: (program, extra flags)
    "svm-train -h 0": ("svm-train", "-h 0"),
    "svm-train -h 1": ("svm-train", "-h 1"),
    "psvm none": ("psvm-train", "--heuristic none"),
    "psvm frequent single": ("psvm-train", "--heuristic frequent --reconstruction single"),
    "psvm frequent multi": ("psvm-train", "--heuristic frequent --reconstruction multi"),
}
HINTS = {"svm-train": "apt install libsvm-tools", "psvm-train": "pip install -e ."}


def iterations(program: str, flags: list[str], train: Path, model: Path) -> int:
    cmd = [tool(program, HINTS[program]), *flags, str(train), str(model)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{program} failed:\n{out.stderr[-2000:]}")
    return sum(int(n) for n in re.findall(r"#iter = (\d+)", out.stdout))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    ap.add_argument("--md", help="also write the table as Markdown here")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases.split(","):
            file, flags = CASES[name]
            train = Path(tmp) / file.removesuffix(".xz")
            if not train.exists():
                with lzma.open(data_dir() / file, "rb") as src:
                    train.write_bytes(src.read())
            counts = {
                col: iterations(prog, (flags + " " + extra).split(), train, Path(tmp) / "model")
                for col, (prog, extra) in RUNS.items()
            }
            ref = counts["svm-train -h 1"]
            rows.append([name] + [f"{n:,} ({n / ref:.2f})" for n in counts.values()])
            print(" | ".join(rows[-1]), flush=True)
    head = ["case", *(f"{col} (/ -h 1)" for col in RUNS)]
    table = "\n".join(markdown_table(head, rows))
    print(table)
    if args.md:
        Path(args.md).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
