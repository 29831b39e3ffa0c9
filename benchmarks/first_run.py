"""The README's main job from a fresh clone, as a new user runs it: install, then first run.

    python benchmarks/first_run.py --refs 8518ebb,HEAD --repeat 2

For each git ref (in turn, ``--repeat`` rounds, interleaved): ``git clone`` this repository
at the ref into a temporary folder, make a fresh venv, and time the README's main command in
its two steps: ``python -m pip install -e .`` (pip's build environment and, since psvm
compiles ahead of time, the compile), then the two mpiexec commands (train at P = 2, predict
at P = 2), which on the old refs compile at first use. No environment settings; pip takes
wheels from its cache or index as configured. Writes ``benchmarks/results/first_run.{json,md}``
unless told otherwise.
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

from heuristics.bench import machine, write_output
from heuristics.report.text import markdown_table

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
README_JOB = [
    "mpiexec -n 2 psvm-train -c 1 -g 0.05 data/breast_cancer.train breast_cancer.model",
    "mpiexec -n 2 psvm-predict data/breast_cancer.test breast_cancer.model breast_cancer.predict",
]


def timed(cmd: str, cwd: Path, env: dict) -> tuple[float, str]:
    t = time.perf_counter()
    r = subprocess.run(
        cmd, shell=True, cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if r.returncode != 0:
        raise RuntimeError(f"{cmd} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return time.perf_counter() - t, r.stdout


def one_round(ref: str, tmp: Path) -> dict:
    clone, venv = tmp / "clone", tmp / "venv"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", ref], check=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    install, _ = timed("python -m pip install -q -e .", clone, env)
    train, _ = timed(README_JOB[0], clone, env)
    predict, out = timed(README_JOB[1], clone, env)
    later = sum(timed(cmd, clone, env)[0] for cmd in README_JOB)
    return {
        "ref": ref,
        "install": install,
        "first_train": train,
        "first_predict": predict,
        "to_first_result": install + train + predict,
        "later_job": later,
        "accuracy": out.strip().splitlines()[-1],
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--refs", default="HEAD", help="comma-separated git refs")
    p.add_argument("--repeat", type=int, default=1, help="rounds over the refs")
    p.add_argument("--md", default=str(RESULTS / "first_run.md"), help="markdown ('': none)")
    p.add_argument("--json", default=str(RESULTS / "first_run.json"), help="JSON ('': none)")
    args = p.parse_args(argv)
    refs = [
        subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", r], capture_output=True, text=True
        ).stdout.strip()
        or r
        for r in args.refs.split(",")
    ]
    rows = []
    for _ in range(args.repeat):
        for ref in refs:
            with tempfile.TemporaryDirectory(prefix="psvm-first-run-") as tmp:
                rows.append(one_round(ref, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    head = ["ref", "install s", "first train s", "first predict s", "to first result s"]
    head.append("later job s")
    table = [
        [
            r["ref"],
            *(f"{r[k]:.1f}" for k in ("install", "first_train", "first_predict")),
            f"{r['to_first_result']:.1f}",
            f"{r['later_job']:.1f}",
        ]
        for r in rows
    ]
    m = machine()
    md = [
        f"{m['cpu']}, {m['cores']} cores, load {m['load_avg'][0]:.1f} at the end; the README's "
        "main job from a fresh clone and venv, no environment settings.",
        "",
        *markdown_table(head, table),
    ]
    print("\n".join(md))
    write_output(args.md, "\n".join(md) + "\n")
    write_output(args.json, json.dumps({"machine": m, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
