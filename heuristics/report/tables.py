"""The report's body: how it was produced, then one section per measured quantity.

Each section is a Markdown table per data set (numbers from the summary
rows of :func:`heuristics.report.build`) and the matching PNG. The MSF study of
parallel SGD (``benchmarks/msf_sweep.py``) is included when its output sits under
``<out>/msf/``.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from heuristics.report.summary import bounds, config_label, find
from heuristics.report.text import (
    PLOT_TITLES,
    default_config,
    first_p,
    fmt,
    markdown_table,
    p_invariance,
)

GLOSSARY = (
    "train s: the wall time of psvm's `train` timer (max over ranks; reading and start-up "
    "excluded), median over the repeats; fit s: SVC's wall time of `fit`. min-max: range "
    "over the repeats. vs none: train s / train s of `none` with the same data, P and "
    "selection; vs SVC h0 / h1: train s / fit s of scikit-learn SVC with shrinking off / on "
    "(one process, one thread); speed-up: train s at the smallest P / train s at this P. "
    "CPU s: user + system CPU seconds of the slowest rank over its psvm-train call (file "
    "reading and model writing included), median; they add up the rank's threads (vs none "
    "(CPU): CPU s / CPU s of `none`); for SVC, the CPU seconds of `fit`. busy s: kernel + "
    "select + update + reconstruct + cut seconds of each rank (the rest of its training time is "
    "waiting in collectives); max/mean: the largest busy time over the mean. gap: "
    "(objective - reference) / |reference| of the dual objective 1/2 a'Qa - e'a (lower is "
    "better, so a negative gap is a better optimum)."
)


def _figure(figures: dict, name: str) -> list[str]:
    if name not in figures:
        return []
    return [f"![{PLOT_TITLES[name]}]({figures[name]})", ""]


def _produced(study) -> list[str]:
    m, v = study["machine"], study["versions"]
    load = m.get("load_avg")
    out = [
        "## How this report was produced",
        "",
        "Command (from a clean checkout, after `pip install -e '.[test]'`):",
        "",
        f"    {study['command']}",
        "",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gb']} GB, {m['os']}; "
        f"load average at the start {', '.join(f'{x:.2f}' for x in load) if load else 'n/a'}. "
        "Other jobs may share the machine, so times carry noise (see Conclusions), and "
        "ranks compete with them for the cores.",
        "- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val) + ".",
        f"- Started {study['started']}, {_finished(study)}.",
        f"- Grid `{study['grid']}`: {len(study['combos'])} configurations (heuristic / "
        f"reconstruction / selection, `1st` = first-order) x P in {study['ranks']} x "
        f"{study['repeats']} repeats per data set; `none` runs once per selection since it "
        f"has nothing to reconstruct. Tolerance -e {study['tol']:g}, kernel cache "
        f"{study['cache_mb']:g} MB per rank, RBF kernel, one process per rank with psvm's "
        f"default threads (the node's cores shared by its ranks; each record keeps its "
        f"count). Each P runs as one `mpiexec` launch that calls psvm-train's `main` once per "
        f"run (after one discarded warm-up run), in repeat-major order; each record keeps "
        f"its exact psvm-train command line. scikit-learn SVC is timed in the parent "
        f"process with the same C, gamma, tol and cache.",
        "",
    ]
    body = [
        [
            d["name"],
            f"{d['n_train']:,}",
            f"{d['n_test']:,}",
            d["test_file"] or "training rows",
            f"{d['C']:g}",
            f"{d['gamma']:g}",
            str(d["n_features"]),
        ]
        for d in study["datasets"]
    ]
    header = ["data", "training rows", "test rows", "test file", "C", "gamma", "features"]
    out += markdown_table(header, body)
    subsets = bool(study.get("rows"))
    out += [
        _sampling(study)
        + (" Subsets keep the default study short on this machine." if subsets else "")
        + " The full grid (every heuristic x single/multi/approximate x "
        "first/second order) on the full files is:",
        "",
        "    psvm-report heuristics --data a9a,w8a,ijcnn1 --ranks 1,2 --rows 0 "
        "--test-rows 0 --grid full --repeats 3 --out heuristics-full/",
        "",
    ]
    if subsets:
        out += ["(far longer: the run time of SMO grows faster than linearly with the rows).", ""]
    return out


def _finished(study: dict) -> str:
    """When the study ended; a study cut short (or still running) has no end in study.json."""
    if "finished" not in study:
        return "not finished: interrupted, or still running (the records hold the runs done)"
    minutes = f"{study['elapsed_seconds'] / 60:.1f}" if "elapsed_seconds" in study else "?"
    return f"finished {study['finished']}; {minutes} minutes of wall time in all"


def _sampling(study: dict) -> str:
    """How the study took its rows (studies before the seed was recorded read the first rows)."""
    seed = study.get("seed")
    if seed is None:
        how = "the first rows of"
    else:
        how = f"a sample stratified by class (seed {seed}, file order kept) of"
    train = f"{how} each file" if study.get("rows") else "every row of each file"
    test = f"{how} the test file" if study.get("test_rows") else "every row of the test file"
    tests = [d.get("test_file") for d in study.get("datasets", [])]
    if tests and not any(tests):
        test = "the training rows (no data set has a test file)"
    elif not all(tests):
        test += " (on the training rows where a data set has none)"
    return f"Training rows are {train}; accuracy is measured on {test}."


BOUND = (
    "The elimination bound{grey}: every heuristic applies the same rule as "
    "`earliest`, later, so until `earliest` has eliminated half of the rows none of them can "
    "have eliminated many more; the share of `none`'s time spent before that iteration is "
    "about the least time / `none` an exact heuristic can reach, even if every later iteration "
    "were free (`benchmarks/elimination_bound.py` measures it on the full data sets). It comes "
    "from the traces of the first repeat (wall clock); the dots are medians of training time. "
    "The ceiling of the rule: the share a heuristic would reach that knew `earliest`'s active "
    "rows for nothing, kept just those in its window at each iteration at what a row of "
    "`none`'s costs there, and never tested, cut or reconstructed "
    "(`heuristics.report.summary.rule_ceiling`); above 100% it also saves before the half-way "
    "point. The iterations the bound counts as free are not: by that model no heuristic of the "
    "rule does better than the ceiling, and an exact one also pays its reconstructions."
)


def bound_section(study, rows, figures: dict) -> list[str]:
    """The summary figure, and the default's saving against the most any heuristic can save."""
    out = ["## Time against `none`, and the bound", ""] + _figure(figures, "summary")
    got = bounds(rows)
    if not got:
        return out + [
            "No elimination bound: it needs traced `none/single` and `earliest` runs with "
            "second-order selection on a two-class problem (`--heuristics` must include "
            "`none` and `earliest`).",
            "",
        ]
    lab = config_label(*default_config())
    body = []
    for d in [x["name"] for x in study["datasets"]]:
        for P in study["ranks"]:
            b = got.get((d, P))
            if b is None:
                continue
            df = find(rows, d, P, lab)
            saving = 1 - df["vs_none"] if df and df["vs_none"] is not None else None
            best = 1 - b["share"]
            body.append(
                [
                    d,
                    str(P),
                    f"{b['half_iter']:,}",
                    f"{b['share']:.2f}",
                    f"{best:.0%}",
                    fmt(saving, ".0%"),
                    fmt(saving / best if saving is not None and best > 0 else None, ".0%"),
                    fmt((1 - b["ceiling"]) / best if best > 0 else None, ".0%"),
                ]
            )
    header = [
        "data",
        "P",
        "`earliest` has half the rows out at iteration",
        "bound: time / `none` before it",
        "the bound's saving",
        f"saving of the default `{lab}`",
        "share of the possible saving",
        "ceiling of the rule, as a share",
    ]
    grey = " (grey in the figure)" if "summary" in figures else ""
    return out + [BOUND.format(grey=grey), ""] + markdown_table(header, body)


def _svc_section(study, svc) -> list[str]:
    body = []
    for d in study["datasets"]:
        for shr in (False, True):
            s = svc.get((d["name"], shr))
            if s:
                body.append(
                    [
                        d["name"],
                        "on" if shr else "off",
                        fmt(s["seconds"]),
                        f"{s['min']:.3f}-{s['max']:.3f}",
                        fmt(s["cpu"]),
                        f"{s['cpu_min']:.3f}-{s['cpu_max']:.3f}",
                        str(s["n_iter"]),
                        str(s["n_support"]),
                        fmt(s["objective"], ".6g"),
                        fmt(100 * s["accuracy"], ".2f"),
                    ]
                )
    return ["## Reference: scikit-learn SVC", ""] + markdown_table(
        [
            "data",
            "shrinking",
            "fit s",
            "fit min-max",
            "CPU s",
            "CPU min-max",
            "iterations",
            "nSV",
            "objective",
            "accuracy %",
        ],
        body,
    )


def _section(title, intro, figures, names, study, rows, header, cells, only=None) -> list[str]:
    """``## title``, an intro paragraph, the figures ``names``, then a table per data set."""
    out = [f"## {title}", ""] + ([intro, ""] if intro else [])
    for name in names:
        out += _figure(figures, name)
    for d in [x["name"] for x in study["datasets"]]:
        rs = [r for r in rows if r["dataset"] == d and (only is None or only(r))]
        if rs:
            out += [f"### {d}", ""] + markdown_table(header, [cells(r) for r in rs])
    return out


TIME = (
    "The figure gives every configuration's time / `none` (same data, P and selection), "
    "fastest first within each group, with the spread of the repeats; the tables give "
    "the seconds and the ratios to scikit-learn SVC."
)


def _time(study, rows, figures) -> list[str]:
    return _section(
        "Training time against `none` and scikit-learn SVC",
        TIME
        if "time" in figures
        else "The tables give the seconds and the ratios to scikit-learn SVC.",
        figures,
        ["time"],
        study,
        rows,
        [
            "configuration",
            "P",
            "train s",
            "train min-max",
            "vs none",
            "vs SVC h0",
            "vs SVC h1",
            "speed-up",
            "CPU s",
            "vs none (CPU)",
        ],
        lambda r: [
            r["label"],
            str(r["ranks"]),
            fmt(r["train_s"]),
            f"{r['train_min']:.3f}-{r['train_max']:.3f}",
            fmt(r["vs_none"], ".2f"),
            fmt(r["vs_svc0"], ".2f"),
            fmt(r["vs_svc1"], ".2f"),
            fmt(r["speedup"], ".2f"),
            fmt(r["cpu_s"]),
            fmt(r["vs_none_cpu"], ".2f"),
        ],
    )


def _elimination(study, rows, figures) -> list[str]:
    n, bad = p_invariance(rows)
    same = (
        f"Iterations and objectives agree across P for all {n} configurations, so counts "
        f"are shown once (smallest P); times are that P's medians."
        if not bad
        else f"Iterations or objectives differ across P for: {', '.join(bad)}."
    )
    return _section(
        "Iterations, active set, elimination and reconstruction",
        same,
        figures,
        ["iterations", "active", "elimination", "reconstruction"],
        study,
        first_p(rows),
        [
            "configuration",
            "iterations",
            "eliminated",
            "false positives",
            "reconstructions",
            "reconstruct s",
            "reconstruct % of train",
            "kernel s",
            "cache hit %",
        ],
        lambda r: [
            r["label"],
            str(r["n_iter"]),
            str(r["n_eliminated"]),
            str(r["n_false_positive"]),
            str(r["n_reconstruct"]),
            fmt(r["reconstruct_s"]),
            fmt(100 * r["reconstruct_s"] / r["train_s"] if r["train_s"] else None, ".1f"),
            fmt(r["kernel_s"]),
            fmt(100 * (r["cache_hit_rate"] or 0), ".1f"),
        ],
    )


def _imbalance(study, rows, figures) -> list[str]:
    return _section(
        "Load imbalance across ranks",
        "Rows are split over the ranks by non-zeros; elimination can leave one rank with "
        "more active rows than another. Peak RSS is each rank's high-water mark over its "
        "whole launch (all runs of that P on that data set).",
        figures,
        ["imbalance"],
        study,
        rows,
        [
            "configuration",
            "P",
            "busy s per rank",
            "max/mean",
            "eliminated per rank",
            "comm s",
            "peak RSS MB per rank",
        ],
        lambda r: [
            r["label"],
            str(r["ranks"]),
            " / ".join(f"{b:.3f}" for b in r["busy_per_rank"]),
            fmt(r["imbalance"], ".2f"),
            " / ".join(map(str, r["eliminated_per_rank"])),
            fmt(r["comm_s"]),
            " / ".join(f"{m:.0f}" for m in r["peak_rss_mb"]),
        ],
        only=lambda r: r["ranks"] > 1,
    )


def _quality(study, rows, figures) -> list[str]:
    return _section(
        "Accuracy and objective gap",
        "Gap vs none: against `none/single` at the smallest P; gap vs SVC: against "
        "scikit-learn SVC (shrinking off), whose dual objective is recomputed from its "
        "support vectors and dual coefficients.",
        figures,
        ["quality"],
        study,
        first_p(rows),
        ["configuration", "accuracy %", "nSV", "objective", "gap vs none", "gap vs SVC"],
        lambda r: [
            r["label"],
            fmt(100 * r["accuracy"], ".2f"),
            str(r["n_support"]),
            fmt(r["objective"], ".6g"),
            fmt(r["gap_none"], "+.1e"),
            fmt(r["gap_svc"], "+.1e"),
        ],
    )


def _msf(out: Path) -> list[str]:
    """Include ``benchmarks/msf_sweep.py`` output (CSV tables, PNGs) found under ``out/msf``."""
    md = ["## Model synchronisation frequency (parallel SGD)", ""]
    msf = out / "msf"
    csvs = sorted(msf.glob("*.csv")) if msf.is_dir() else []
    pngs = sorted(msf.glob("*.png")) if msf.is_dir() else []
    if not csvs and not pngs:
        return md + [
            "Not part of this run. `python benchmarks/msf_sweep.py ... --out "
            "heuristics/msf` writes its CSV and plots there; `psvm-report heuristics "
            "--build-only` then includes them here.",
            "",
        ]
    for path in csvs:
        with open(path, newline="") as f:
            table = list(csv.reader(f))
        if table:
            cells = [[_short(c) for c in row] for row in table[1:]]
            md += [f"From `msf/{path.name}`:", ""] + markdown_table(table[0], cells)
    md += [f"![{p.stem}](msf/{p.name})" for p in pngs]
    return md + [""]


def _short(cell: str) -> str:
    """A CSV cell as the report shows it: a fraction to four significant digits."""
    try:
        x = float(cell)
    except ValueError:
        return cell
    return cell if x.is_integer() or not math.isfinite(x) else f"{x:.4g}"


def body_sections(study, rows, svc, figures: dict, out: Path) -> list[str]:
    md = _produced(study) + _svc_section(study, svc)
    md += _time(study, rows, figures) + _elimination(study, rows, figures)
    md += _imbalance(study, rows, figures) + _quality(study, rows, figures)
    md += _msf(Path(out)) + ["## Columns", "", GLOSSARY, ""]
    return md
