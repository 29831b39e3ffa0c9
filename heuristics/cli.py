"""psvm-report: studies that run psvm many times and write a Markdown report with plots.

    psvm-report heuristics --out heuristics/
    psvm-report heuristics --build-only --out heuristics/

``heuristics`` runs every elimination heuristic x reconstruction x selection
x data set x P (see :func:`heuristics.study.grid`), scikit-learn SVC on the same
rows, and writes ``OUT/REPORT.md``, ``OUT/*.png``, ``OUT/study.json`` and
``OUT/records/*.jsonl``. ``--build-only`` rebuilds the report from those
records without running anything, also those of a study cut short.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path

DEFAULTS = {
    "data": "a9a,w8a,ijcnn1",
    "ranks": "1,2",
    "rows": 10000,
    "test_rows": 5000,
    "repeats": 5,
}


def _csv(text: str) -> list[str]:
    return [t for t in text.split(",") if t]


def parser() -> argparse.ArgumentParser:
    from psvm._params import HEURISTICS, RECONSTRUCTIONS, SELECTIONS

    p = argparse.ArgumentParser(prog="psvm-report", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="study", required=True)
    h = sub.add_parser(
        "heuristics",
        help="elimination heuristics comparison",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    h.add_argument(
        "--data",
        default=DEFAULTS["data"],
        help="comma-separated built-in data set names (heuristics.bench.DATASETS: files from "
        "$PSVM_SHARED_DATA or ../shared/data) or paths of your own LIBSVM files",
    )
    h.add_argument("--ranks", default=DEFAULTS["ranks"], help="comma-separated process counts")
    h.add_argument(
        "--rows",
        type=int,
        default=DEFAULTS["rows"],
        help="training rows: a sample of N, stratified by class (--seed); 0 = all",
    )
    h.add_argument(
        "--test-rows",
        type=int,
        default=DEFAULTS["test_rows"],
        help="test rows for accuracy: a stratified sample of N of the test file; 0 = all",
    )
    h.add_argument("--seed", type=int, default=0, help="seed of the row samples (>= 0)")
    h.add_argument(
        "--repeats",
        type=int,
        default=DEFAULTS["repeats"],
        help="runs per configuration; times are medians",
    )
    h.add_argument(
        "--grid",
        choices=("default", "full"),
        default="default",
        help="default: second order x every heuristic x single/multi, plus "
        "approximate and first order for a few; full: the whole product",
    )
    h.add_argument("--heuristics", default=",".join(HEURISTICS), help="restrict the grid")
    h.add_argument("--reconstructions", default=",".join(RECONSTRUCTIONS), help="restrict the grid")
    h.add_argument("--selections", default=",".join(SELECTIONS), help="restrict the grid")
    h.add_argument("--cache", type=float, default=200.0, help="kernel cache MB per process")
    h.add_argument("--out", default="heuristics", help="output directory")
    h.add_argument(
        "--build-only",
        action="store_true",
        help="rebuild REPORT.md and the PNGs from OUT/records; run nothing",
    )
    h.add_argument(
        "--no-plots", action="store_true", help="Markdown only (PNGs already there are kept)"
    )
    return p


def heuristics(a: argparse.Namespace, argv: list[str]) -> int:
    from heuristics.report import NothingToReportError, write_report
    from heuristics.study import StudyFileError

    if not a.build_only:
        status = _study(a, argv, *_checked(a))
        if status:  # Ctrl-C
            return status
    elif not (Path(a.out) / "study.json").is_file():
        raise SystemExit(f"psvm-report: --build-only: no study in {a.out} (its study.json)")
    try:
        path = write_report(a.out, plots=not a.no_plots)
    except NothingToReportError as e:
        raise SystemExit(f"psvm-report: {e}: no report") from None
    except StudyFileError as e:
        raise SystemExit(f"psvm-report: {e}") from None
    except KeyboardInterrupt:  # each file is whole (written atomically): some may be old
        again = f"rebuild it: {_build_only(a.out)}"
        print(f"psvm-report: interrupted while writing the report; {again}", file=sys.stderr)
        return 130
    print(f"wrote {path}")
    return 0


def _build_only(out: str) -> str:
    """The command that writes the report of the study in ``out``."""
    return f"psvm-report heuristics --build-only --out {shlex.quote(out)}"


def _checked(a: argparse.Namespace) -> tuple[list[str], list[int], list]:
    """The study's data sets, process counts and configurations, checked before anything in
    OUT is cleared (each error one line naming its flag)."""
    from heuristics.bench import DATASETS, DataNotFoundError, data_dir, resolve_dataset
    from heuristics.study import grid
    from psvm._params import HEURISTICS, RECONSTRUCTIONS, SELECTIONS

    data, names = _csv(a.data), {}
    for entry in data:
        try:
            name = resolve_dataset(entry).name
        except (ValueError, OSError) as e:
            raise SystemExit(f"psvm-report: {e}") from None
        if name in names:  # the records and tables are keyed by the name
            raise SystemExit(
                f"psvm-report: --data {names[name]} and {entry} are both named {name!r}: rename one"
            )
        names[name] = entry
    known = {"heuristics": HEURISTICS, "reconstructions": RECONSTRUCTIONS, "selections": SELECTIONS}
    for flag, allowed in known.items():
        bad = [v for v in _csv(getattr(a, flag)) if v not in allowed]
        if bad:
            raise SystemExit(
                f"psvm-report: --{flag} {','.join(bad)}: unknown; one of {','.join(allowed)}"
            )
    combos = grid(a.grid, _csv(a.heuristics), _csv(a.reconstructions), _csv(a.selections))
    if not combos:
        raise SystemExit("psvm-report: the grid is empty after --heuristics/--selections")
    if a.repeats < 1 or a.rows < 0 or a.test_rows < 0:
        raise SystemExit("psvm-report: --repeats must be >= 1, --rows/--test-rows >= 0")
    ranks = _ranks(a.ranks)
    if a.seed < 0:  # numpy's generators take no negative seed
        raise SystemExit(f"psvm-report: --seed {a.seed}: must be >= 0")
    if not (math.isfinite(a.cache) and a.cache > 0):
        raise SystemExit(f"psvm-report: --cache {a.cache:g}: must be a number > 0 (MB)")
    try:
        if any(entry in DATASETS for entry in data):
            data_dir()  # before run_study clears OUT/records
    except DataNotFoundError as e:
        local = [x for x in data if x in DATASETS and Path(x).is_file()]
        mine = "".join(
            f"; {x!r} names the built-in data set: --data ./{x} for your file" for x in local
        )
        raise SystemExit(f"psvm-report: {e}{mine}") from None
    _out_dir(a.out)
    return data, ranks, combos


def _out_dir(out: str) -> None:
    """--out: a folder, made if missing (before any run: a study that cannot write its
    records would fail after its first)."""
    if Path(out).exists() and not Path(out).is_dir():
        raise SystemExit(f"psvm-report: --out {out}: not a folder")
    try:
        Path(out, "records").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SystemExit(f"psvm-report: --out {out}: {e.strerror}") from None


def _ranks(text: str) -> list[int]:
    """--ranks: distinct process counts of at least 1."""
    try:
        ranks = [int(P) for P in _csv(text)]
    except ValueError:
        ranks = []
    if not ranks or min(ranks) < 1:
        raise SystemExit(f"psvm-report: --ranks {text}: process counts >= 1, e.g. 1,2")
    twice = next((P for k, P in enumerate(ranks) if P in ranks[:k]), None)
    if twice is not None:  # records/NAME.P<P>.jsonl would be written twice
        raise SystemExit(f"psvm-report: --ranks {text}: P={twice} given twice")
    return ranks


def _study(a: argparse.Namespace, argv: list[str], data, ranks, combos) -> int:
    """Run the study; 130 if Ctrl-C stopped it (its records and study.json stay), else 0."""
    from heuristics.report import remove_report
    from heuristics.study import run_study

    remove_report(a.out)  # (of the records run_study clears: no report of other runs stays)
    try:
        run_study(
            a.out,
            data=data,
            ranks=ranks,
            rows=a.rows or None,
            test_rows=a.test_rows or None,
            repeats=a.repeats,
            combos=combos,
            grid_name=a.grid,
            cache_mb=a.cache,
            seed=a.seed,
            command=shlex.join(["psvm-report", *argv]),
        )
    except KeyboardInterrupt:  # say how to report what it ran
        ran = any(Path(a.out, "records").glob("*.P*.jsonl"))
        so_far = f"its report so far: {_build_only(a.out)}" if ran else "before its first psvm run"
        print(f"psvm-report: interrupted; {so_far}", file=sys.stderr)
        return 130
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    a = parser().parse_args(argv)
    return heuristics(a, argv)


if __name__ == "__main__":
    sys.exit(main())
