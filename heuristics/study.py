"""The heuristics study: every elimination heuristic x reconstruction x selection x data x P.

:func:`run_study` executes the study and writes, under ``out/``:

- ``study.json``: the resolved definition (data sets and subset sizes, grid,
  ranks, repeats), the exact command, machine, versions and elapsed time; written
  at the start and again as each data set starts, ``finished`` and the elapsed time
  added at the end, so that a study cut short (Ctrl-C, killed) still has its report;
- ``records/<data>.svc.jsonl``: scikit-learn SVC (shrinking off and on),
  timed in this process on the same rows with the same C, gamma, tol, cache;
- ``records/<data>.P<P>.jsonl``: one record per psvm run, from
  :mod:`heuristics.worker` under ``mpiexec -n P`` (the run's psvm-train
  command, its statistics JSON, test accuracy, peak RSS per rank).

Runs are ordered repeat-major (every configuration once, then again), so slow
spells of a shared machine spread over all configurations instead of hitting
one. The solver is deterministic, so traces are kept for the first repeat only.
:mod:`heuristics.report` turns these files into ``REPORT.md`` and PNGs.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from psvm._params import HEURISTICS, RECONSTRUCTIONS, SELECTIONS

# heuristics that also run with first-order selection and with 'approximate' in the default grid
FIRST_ORDER_SUBSET = ("none", "earliest", "percent-5", "libsvm")
APPROXIMATE_SUBSET = ("earliest", "libsvm")


def grid(
    kind: str = "default",
    heuristics=HEURISTICS,
    reconstructions=RECONSTRUCTIONS,
    selections=tuple(SELECTIONS),
) -> list[tuple[str, str, str]]:
    """(heuristic, reconstruction, selection) triples, 'none' only with 'single'.

    ``default``: second order x every heuristic x {single, multi}, plus
    ``approximate`` for :data:`APPROXIMATE_SUBSET` and first order (single) for
    :data:`FIRST_ORDER_SUBSET`. ``full``: the whole product.
    """
    if kind not in ("default", "full"):
        raise ValueError(f"grid must be 'default' or 'full', got {kind!r}")
    out = []
    for sel in ("second", "first"):
        for h in HEURISTICS:
            for rec in RECONSTRUCTIONS:
                if h == "none" and rec != "single":
                    continue  # without elimination there is nothing to reconstruct
                if kind == "default":
                    if sel == "first" and (h not in FIRST_ORDER_SUBSET or rec != "single"):
                        continue
                    if rec == "approximate" and (sel == "first" or h not in APPROXIMATE_SUBSET):
                        continue
                out.append((h, rec, sel))
    return [c for c in out if c[0] in heuristics and c[1] in reconstructions and c[2] in selections]


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _append(path: Path, records: list[dict]) -> None:
    with open(path, "a") as f:
        for r in records:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")


def run_study(
    out: str | Path,
    *,
    data: list[str],
    ranks: list[int],
    rows: int | None,
    test_rows: int | None,
    repeats: int,
    combos: list[tuple[str, str, str]],
    grid_name: str,
    command: str,
    tol: float = 1e-3,
    cache_mb: float = 200.0,
    seed: int = 0,
    log=_log,
) -> dict:
    """Run the study and write ``study.json`` and ``records/*.jsonl`` under ``out``."""
    from heuristics.bench import count_lines, dataset_paths, load_csr, resolve_dataset, run_worker

    out = Path(out)
    rec_dir = out / "records"
    t_start = time.perf_counter()
    study = _study_header(
        command, grid_name, combos, ranks, repeats, rows, test_rows, seed, tol, cache_mb
    )
    rec_dir.mkdir(parents=True, exist_ok=True)
    _write_study(out, study)  # now (a study cut short has its report), before the old records
    for old in rec_dir.glob("*.jsonl"):  # go (a kill between: no finished study without them)
        old.unlink()
    n_runs = len(data) * len(ranks) * len(combos) * repeats
    log(
        f"{n_runs} psvm runs: {len(data)} data set(s) x P in {ranks} x {len(combos)} "
        f"configurations x {repeats} repeats"
    )
    for entry in data:  # a built-in name or a LIBSVM file
        ds = resolve_dataset(entry)
        train, test = dataset_paths(ds, rows, test_rows, seed)
        info = {
            "name": ds.name,
            "train_file": ds.train,
            "test_file": ds.test,
            "C": ds.C,
            "gamma": ds.gamma,
            "n_features": ds.n_features,
            "n_train": count_lines(train),
            "n_test": count_lines(test),
        }
        study["datasets"].append(info)
        _write_study(out, study)  # before its records, which the report reads by its entry
        log(f"{ds.name}: {info['n_train']} training rows, {info['n_test']} test rows")
        X, y = load_csr(train, ds.n_features)
        Xt, yt = load_csr(test, ds.n_features)
        svc = _sklearn_records(ds, (X, y, Xt, yt), repeats, tol, cache_mb)
        _append(rec_dir / f"{ds.name}.svc.jsonl", svc)
        log(f"{ds.name}: scikit-learn SVC done")
        plan = _worker_plan(ds, train, test, combos, repeats, tol, cache_mb)
        for P in ranks:
            t = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="psvm-study-") as work:
                records = run_worker(P, plan, work)
            _append(rec_dir / f"{ds.name}.P{P}.jsonl", records)
            log(f"{ds.name} P={P}: {len(records)} runs in {time.perf_counter() - t:.0f}s")
    study["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    study["elapsed_seconds"] = round(time.perf_counter() - t_start, 1)
    _write_study(out, study)
    return study


def _write_study(out: Path, study: dict) -> None:
    """study.json, whole or not at all: a study killed while it wrote keeps the last one."""
    from psvm.io.atomic import write_atomic

    with write_atomic(out / "study.json") as f:
        f.write(json.dumps(study, indent=1) + "\n")


def _study_header(command, grid_name, combos, ranks, repeats, rows, test_rows, seed, tol, cache_mb):
    """study.json's fields before any run: the command, the grid, the machine, the versions."""
    from heuristics.bench import machine, versions

    return {
        "schema": 1,
        "command": command,
        "grid": grid_name,
        "combos": [list(c) for c in combos],
        "ranks": ranks,
        "repeats": repeats,
        "rows": rows,
        "test_rows": test_rows,
        "seed": seed,
        "tol": tol,
        "cache_mb": cache_mb,
        "datasets": [],
        "machine": machine(),
        "versions": versions(),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _sklearn_records(ds, arrays, repeats: int, tol: float, cache_mb: float) -> list[dict]:
    """scikit-learn's SVC on the data set, shrinking off and on, ``repeats`` times each."""
    from heuristics.bench import sklearn_svc_fit

    X, y, Xt, yt = arrays
    return [
        {
            "schema": 1,
            "kind": "sklearn-svc",
            "dataset": ds.name,
            "shrinking": shrinking,
            "repeat": rep,
            **sklearn_svc_fit(X, y, Xt, yt, ds, shrinking=shrinking, tol=tol, cache=cache_mb),
        }
        for rep in range(repeats)
        for shrinking in (False, True)
    ]


def _worker_plan(ds, train, test, combos, repeats: int, tol: float, cache_mb: float) -> dict:
    """The psvm-train runs of one data set, as :func:`heuristics.bench.run_worker` takes them."""
    base = ["-c", f"{ds.C:g}", "-g", f"{ds.gamma:g}", "-e", f"{tol:g}", "-m", f"{cache_mb:g}"]
    runs = [
        {
            "flags": [*base, "--heuristic", h, "--reconstruction", rec, "--selection", sel],
            "meta": {
                "dataset": ds.name,
                "heuristic": h,
                "reconstruction": rec,
                "selection": sel,
                "repeat": rep,
            },
            "traces": rep == 0,
            "exact_objective": rec == "approximate",
        }
        for rep in range(repeats)
        for h, rec, sel in combos
    ]
    return {
        "train": train,
        "test": test,
        "n_features": ds.n_features,
        "runs": runs,
        "warmup": [*base, "--heuristic", "earliest", "--reconstruction", "multi"],
    }


class StudyFileError(ValueError):
    """A study's file that is no JSON (edited, or cut short other than in its last line)."""


def load_records(out: str | Path) -> tuple[dict, list[dict]]:
    """``study.json`` and every record under ``out/records`` (file order kept)."""
    out = Path(out)
    study = _json(out / "study.json", (out / "study.json").read_text())
    records = []
    for path in sorted((out / "records").glob("*.jsonl")):
        records.extend(_records(path))
    return study, records


def _json(path: Path, text: str, line: int | None = None):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        where = f"{path}:{line}" if line is not None else str(path)
        raise StudyFileError(f"{where}: not JSON ({e})") from None


def _records(path: Path) -> list[dict]:
    """A records file's records; a last line cut short (a run interrupted while it wrote)
    is left out with a note on stderr."""
    lines = [(k + 1, ln) for k, ln in enumerate(path.read_text().splitlines()) if ln.strip()]
    try:
        last = [json.loads(lines[-1][1])] if lines else []
    except json.JSONDecodeError:
        print(f"psvm-report: {path}: its last line is cut short: left out", file=sys.stderr)
        last = []
    return [_json(path, ln, k) for k, ln in lines[:-1]] + last
