"""Fixed costs: psvm-train's cold and warm start, the CLI's start-up, and SVC.fit's per-fit cost.

    python benchmarks/startup.py --repeat 5

Run as users run psvm (no NUMBA_NUM_THREADS or other overrides):

(a) cold run (what a first run costs where the cache compiled at install does not fit:
    another numba or CPU, or ``PSVM_PRECOMPILE=0``; ``benchmarks/first_run.py`` times the
    install itself): numba's cache of the imported psvm package is deleted (the
    ``*.nbi`` / ``*.nbc`` files in its ``__pycache__`` folders, found from
    ``psvm.__file__``, so an editable install works; also their mirror under
    ``$NUMBA_CACHE_DIR`` when set), then README's main job
    ``psvm-train -c 1 -g 0.05 data/breast_cancer.train <tmp>/m.model`` runs as
    a subprocess, on one process and under ``mpiexec -n 2`` (the cache is
    cleared before each);
(b) warm run: the same commands with the cache in place, best of ``--repeat``;
(c) the fixed cost of a CLI run: psvm-train on the first 20 rows of the
    bundled training file, next to ``python -c pass``, ``python -c "import
    psvm.cli.train"`` and ``mpiexec -n 2 python -c pass``; and the import-time
    offenders (``python -X importtime``) of ``import psvm.cli.train`` and of the
    whole tiny run, summed by top-level package;
(d) the estimator's fixed per-fit cost: ``psvm.SVC().fit`` against
    ``sklearn.svm.SVC().fit`` on 20 rows of iris (10 of each of 2 classes),
    best of ``--fits`` after a warm-up.

``wall`` is the subprocess's wall time; ``reported`` is what psvm-train prints
(``Wrote ... in X s``: reading, training and writing the model), so
``wall - reported`` is start-up and shut-down outside psvm-train's own timer. psvm-train
flushes each line, so the time its ``Wrote`` line reaches this script splits that in two:
``before`` (until the timer started: the interpreter, imports, MPI's start) and ``after``
(the exit), each within 5 ms (the line gives the time to 0.01 s).
Writes ``benchmarks/results/startup.{json,md}`` unless told otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from heuristics.bench import machine, mpiexec, tool, versions, write_output
from heuristics.report.text import markdown_table

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
MAIN_DATA = "data/breast_cancer.train"  # README's main job, run from the repository root
WROTE = re.compile(r"Wrote .* in ([0-9.]+)s on (\d+) rank")


def psvm_package() -> Path:
    """The folder of the psvm that ``psvm-train`` imports (the same environment as ours)."""
    out = subprocess.run(
        [sys.executable, "-c", "import psvm; print(psvm.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    child = Path(out.stdout.strip()).resolve().parent
    import psvm

    mine = Path(psvm.__file__).resolve().parent
    if child != mine:
        raise RuntimeError(f"this script imports psvm from {mine}, a subprocess from {child}")
    return mine


def numba_cache_files(pkg: Path) -> list[Path]:
    roots = [pkg]
    if os.environ.get("NUMBA_CACHE_DIR"):  # numba mirrors the source path under it
        roots.append(Path(os.environ["NUMBA_CACHE_DIR"]) / str(pkg).lstrip(os.sep))
    return [
        f
        for root in roots
        if root.is_dir()
        for pattern in ("*.nbi", "*.nbc")
        for f in root.rglob(f"__pycache__/{pattern}")
    ]


def clear_numba_cache(pkg: Path) -> int:
    files = numba_cache_files(pkg)
    for f in files:
        f.unlink(missing_ok=True)
    return len(files)


def run(cmd: list[str], cwd: Path) -> dict:
    """Wall time, psvm-train's reported time, and the time its ``Wrote`` line came (it
    flushes each line): before = that time - reported, after = the exit's - that time."""
    with tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        with subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=err, text=True) as proc:
            wrote, at = None, None
            for line in proc.stdout:
                if wrote is None and (wrote := WROTE.search(line)):
                    at = time.perf_counter() - t
            code = proc.wait()
        wall = time.perf_counter() - t
        if code != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} failed ({code}):\n{err.read()[-3000:]}")
    if wrote is None:
        return {"wall": wall, "reported": None}
    reported = float(wrote.group(1))
    return {"wall": wall, "reported": reported, "before": at - reported, "after": wall - at}


def best(cmd: list[str], cwd: Path, repeat: int) -> dict:
    runs = [run(cmd, cwd) for _ in range(repeat)]
    b = min(runs, key=lambda r: r["wall"])
    return {**b, "all_wall": [r["wall"] for r in runs]}


def importtime(cmd: list[str], cwd: Path, top: int) -> dict:
    """``python -X importtime``: self time summed by top-level package, and the slowest modules
    with their importer and the psvm module whose import brought them in."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", *cmd],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [
        ln
        for ln in r.stderr.splitlines()
        if ln.startswith("import time:") and "imported package" not in ln
    ]
    by_pkg, mods, total, stack = defaultdict(float), [], 0.0, {}
    for line in reversed(lines):  # importtime prints children first: reversed, parents come first
        fields = line.split(":", 1)[1].split("|", 2)
        try:
            self_us, cum_us, name = float(fields[0]), float(fields[1]), fields[2]
        except (ValueError, IndexError):
            continue
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        name = name.strip()
        stack[depth] = name
        chain = [stack[k] for k in range(depth)]
        if depth == 0:
            total += cum_us / 1e3
        by_pkg[name.split(".")[0]] += self_us / 1e3
        via = next((m for m in reversed(chain) if m.startswith("psvm")), None)
        mods.append((self_us / 1e3, cum_us / 1e3, name, chain[-1] if chain else None, via))
    mods.sort(key=lambda m: -m[0])
    pkgs = sorted(by_pkg.items(), key=lambda kv: -kv[1])
    return {
        "command": " ".join(cmd),
        "total_ms": total,
        "by_package_ms": [[k, v] for k, v in pkgs[:top]],
        "slowest_modules_ms": [
            {"module": n, "self": s, "cumulative": c, "importer": i, "via_psvm": v}
            for s, c, n, i, v in mods[:top]
        ],
    }


def per_fit(fits: int) -> dict:
    import sklearn.svm
    from sklearn.datasets import load_iris

    import psvm

    X, y = load_iris(return_X_y=True)
    rows = np.r_[0:10, 50:60]
    X, y = X[rows], y[rows]
    out = {}
    for name, make in (("psvm.SVC().fit", psvm.SVC), ("sklearn.svm.SVC().fit", sklearn.svm.SVC)):
        make().fit(X, y)  # warm-up
        times, inner = [], []
        for _ in range(fits):
            est = make()
            t = time.perf_counter()
            est.fit(X, y)
            times.append(time.perf_counter() - t)
            stats = getattr(est, "fit_stats_", None)
            if stats:
                inner.append(stats["seconds_max"]["train"])
        out[name] = {
            "best_ms": 1e3 * min(times),
            "median_ms": 1e3 * float(np.median(times)),
            "train_timer_best_ms": 1e3 * min(inner) if inner else None,
        }
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3, help="warm runs of each command (best counts)")
    p.add_argument("--fits", type=int, default=200, help="timed fits in (d) (best counts)")
    p.add_argument("--top", type=int, default=10, help="import-time offenders listed")
    p.add_argument("--no-cold", action="store_true", help="skip (a): keep numba's cache")
    p.add_argument("--md", default=str(RESULTS / "startup.md"), help="markdown ('' : none)")
    p.add_argument("--json", default=str(RESULTS / "startup.json"), help="JSON ('' : none)")
    a = p.parse_args(argv)
    pkg, train, mpi = psvm_package(), tool("psvm-train", "pip install -e . first"), mpiexec()
    mach, ver = machine(), versions()
    print(
        f"# psvm {pkg} ({ver['psvm git']}); {train}; {mach['cpu']}, {mach['cores']} cores, "
        f"load {mach['load_avg']}",
        flush=True,
    )
    rows: list[dict] = []

    def add(part: str, what: str, r: dict, note: str = "") -> None:
        rows.append({"part": part, "what": what, **r, "note": note})
        cells = " ".join(f"{c:>8s}" for c in _cells(r))
        print(f"{part:2s} {what:44s} {r['wall']:8.2f} {cells}  {note}", flush=True)

    heads = ("reported", "outside", "before", "after")
    print(f"{'':2s} {'command':44s} {'wall s':>8s} " + " ".join(f"{h:>8s}" for h in heads))
    with tempfile.TemporaryDirectory(prefix="psvm-startup-") as tmp:
        model = str(Path(tmp) / "m.model")
        main_1 = [train, "-c", "1", "-g", "0.05", MAIN_DATA, model]
        main_2 = [mpi, "-n", "2", *main_1]
        if not a.no_cold:
            for label, cmd in (
                ("psvm-train (main job)", main_1),
                ("mpiexec -n 2 psvm-train (main job)", main_2),
            ):
                n = clear_numba_cache(pkg)
                add("a", f"cold {label}", run(cmd, REPO), f"{n} cache files deleted")
        for label, cmd in (
            ("psvm-train (main job)", main_1),
            ("mpiexec -n 2 psvm-train (main job)", main_2),
        ):
            add("b", f"warm {label}", best(cmd, REPO, a.repeat))
        tiny = Path(tmp) / "tiny.train"
        with open(REPO / MAIN_DATA) as f:
            tiny.write_text("".join(f.readline() for _ in range(20)))
        tiny_1 = [train, "-c", "1", "-g", "0.05", str(tiny), model]
        for label, cmd in (
            ("python -c pass", [sys.executable, "-c", "pass"]),
            ("python -c 'import psvm.cli.train'", [sys.executable, "-c", "import psvm.cli.train"]),
            ("mpiexec -n 2 python -c pass", [mpi, "-n", "2", sys.executable, "-c", "pass"]),
            ("psvm-train tiny (20 rows)", tiny_1),
            ("mpiexec -n 2 psvm-train tiny (20 rows)", [mpi, "-n", "2", *tiny_1]),
        ):
            add("c", label, best(cmd, REPO, a.repeat))
        imports = [
            importtime(["-c", "import psvm.cli.train"], REPO, a.top),
            importtime([train, *tiny_1[1:]], REPO, a.top),
        ]
        for imp in imports:
            imp["command"] = imp["command"].replace(tmp, "<tmp>")
    for imp in imports:
        print(f"\n(c) python -X importtime {imp['command']}: {imp['total_ms']:.0f} ms of imports")
        print(
            "    by package (self ms): "
            + ", ".join(f"{k} {v:.0f}" for k, v in imp["by_package_ms"])
        )
        print("    slowest modules (self / cumulative ms; importer; psvm module that led there):")
        for m in imp["slowest_modules_ms"]:
            print(
                f"      {m['module']:36s} {m['self']:5.0f} {m['cumulative']:5.0f}  "
                f"{m['importer'] or '-'}; {m['via_psvm'] or '-'}"
            )
    fit = per_fit(a.fits)
    print(f"\n(d) per-fit cost, 20 rows of iris, 2 classes, best of {a.fits}:")
    for name, r in fit.items():
        inner = r["train_timer_best_ms"]
        print(
            f"    {name:24s} best {r['best_ms']:7.2f} ms  median {r['median_ms']:7.2f} ms"
            + (f"  (psvm train timer {inner:.2f} ms)" if inner is not None else "")
        )
    ratio = fit["psvm.SVC().fit"]["best_ms"] / fit["sklearn.svm.SVC().fit"]["best_ms"]
    print(f"    psvm / sklearn: {ratio:.1f}x")
    doc = {
        "argv": sys.argv,
        "repeat": a.repeat,
        "machine": mach,
        "versions": ver,
        "package": str(pkg),
        "psvm_train": train,
        "commands": rows,
        "importtime": imports,
        "per_fit": fit,
    }
    write_output(a.json, json.dumps(doc, indent=1))
    write_output(a.md, "\n".join(markdown(doc)))


def _cells(r: dict) -> list[str]:
    """reported, outside (wall - reported), before and after the timer ('-': no such line)."""
    if r.get("reported") is None:
        return ["-"] * 4
    values = (r["reported"], r["wall"] - r["reported"], r.get("before"), r.get("after"))
    return ["-" if v is None else f"{v:.2f}" for v in values]


def markdown(doc: dict) -> list[str]:
    m = doc["machine"]
    out = [
        f"psvm {doc['versions']['psvm git']}, {m['cpu']}, {m['cores']} cores; warm rows: "
        f"best of {doc['repeat']}. reported: psvm-train's own `Wrote ... in X s`; outside: "
        "wall - reported (interpreter, imports, MPI start-up and exit); before: until the timer "
        "started (the `Wrote` line's arrival - reported); after: from that line to the exit.",
        "",
    ]
    body = [
        [r["part"], r["what"], f"{r['wall']:.2f}", *_cells(r), r["note"]] for r in doc["commands"]
    ]
    heads = ["reported s", "outside s", "before s", "after s"]
    out += markdown_table(["", "command", "wall s", *heads, "note"], body)
    for imp in doc["importtime"]:
        out.append(
            f"`python -X importtime {imp['command']}`: {imp['total_ms']:.0f} ms; by "
            "package (self ms): " + ", ".join(f"{k} {v:.0f}" for k, v in imp["by_package_ms"])
        )
        out.append("")
        body = [
            [
                m["module"],
                f"{m['self']:.1f}",
                f"{m['cumulative']:.1f}",
                m["importer"] or "-",
                m["via_psvm"] or "-",
            ]
            for m in imp["slowest_modules_ms"]
        ]
        out += markdown_table(["module", "self ms", "cumulative ms", "importer", "via psvm"], body)
    body = [
        [
            k,
            f"{r['best_ms']:.2f}",
            f"{r['median_ms']:.2f}",
            "-" if r["train_timer_best_ms"] is None else f"{r['train_timer_best_ms']:.2f}",
        ]
        for k, r in doc["per_fit"].items()
    ]
    out.append("Per-fit cost on 20 rows of iris (2 classes):")
    out.append("")
    out += markdown_table(["fit", "best ms", "median ms", "psvm train timer ms"], body)
    return out


if __name__ == "__main__":
    main()
