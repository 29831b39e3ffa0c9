"""Numbers of the heuristics report: run records summarised per configuration, ratios
against ``none`` and against scikit-learn's SVC, the noise level and the ranking."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

KEY = ("dataset", "ranks", "heuristic", "reconstruction", "selection")
BUSY = ("kernel", "select", "update", "reconstruct", "cut")  # per-rank work; the rest waits


def _med(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return float(np.median(xs)) if xs else None


def _objective(values: dict) -> float | None:
    obj = values.get("objective")
    if obj is None:
        return None
    return float(np.sum(obj))


def config_label(heuristic: str, reconstruction: str, selection: str) -> str:
    return f"{heuristic}/{reconstruction}" + ("/1st" if selection == "first" else "")


def find(rows: list[dict], dataset: str, ranks: int, label: str) -> dict | None:
    """The summary row of one configuration, or None."""
    key = (dataset, ranks, label)
    return next((r for r in rows if (r["dataset"], r["ranks"], r["label"]) == key), None)


def summarize_psvm(records: list[dict]) -> list[dict]:
    """One row per (dataset, P, heuristic, reconstruction, selection) over its repeats."""
    groups = defaultdict(list)
    for r in records:
        if r.get("kind") == "psvm" and r.get("returncode", 0) == 0:
            groups[tuple(r[k] for k in KEY)].append(r)
    rows = []
    for key, rs in groups.items():
        rs.sort(key=lambda r: r["repeat"])
        st = [r["stats"] for r in rs]
        counts = st[0]["counts"]
        train = [s["seconds_max"].get("train", 0.0) for s in st]
        # CPU seconds of the slowest rank, shown beside the compared time, train (wall)
        cpu = [
            max(r["cpu_seconds"]) if r.get("cpu_seconds") else t
            for r, t in zip(rs, train, strict=True)
        ]
        busy = [[sum(p["seconds"].get(k, 0.0) for k in BUSY) for p in s["per_rank"]] for s in st]
        traced = next((s for s in st if s.get("traces")), {})
        rows.append(
            {
                **dict(zip(KEY, key, strict=True)),
                "label": config_label(*key[2:]),
                "repeats": len(rs),
                "train_s": _med(train),
                "train_min": min(train),
                "train_max": max(train),
                "wall_s": _med(r["wall_seconds"] for r in rs),
                "cpu_s": _med(cpu),
                "cpu_min": min(cpu),
                "cpu_max": max(cpu),
                "n_iter": int(counts.get("n_iter", 0)),
                "n_eliminated": int(counts.get("n_eliminated", 0)),
                "n_false_positive": int(counts.get("n_false_positive", 0)),
                "n_reconstruct": int(counts.get("n_reconstruct", 0)),
                "reconstruct_s": _med(s["seconds_max"].get("reconstruct", 0.0) for s in st),
                "kernel_s": _med(s["seconds_max"].get("kernel", 0.0) for s in st),
                "comm_s": _med(
                    sum(v["seconds_max"] for v in s.get("comm", {}).values()) for s in st
                ),
                # 'approximate' runs: the objective recomputed from the model (heuristics.worker)
                "objective": rs[0].get("objective_recomputed", _objective(st[0]["values"])),
                "n_support": st[0]["values"].get("n_support"),
                "n_samples": st[0]["values"].get("n_samples"),
                "cache_hit_rate": _med(s["values"].get("cache_hit_rate") for s in st),
                "accuracy": _med(r.get("accuracy") for r in rs),
                "busy_per_rank": [_med(b[k] for b in busy) for k in range(len(busy[0]))],
                "imbalance": _med(max(b) / np.mean(b) if np.mean(b) > 0 else 1.0 for b in busy),
                "eliminated_per_rank": [
                    int(p["counts"].get("n_eliminated", 0)) for p in st[0]["per_rank"]
                ],
                "peak_rss_mb": [max(r["peak_rss_mb"][k] for r in rs) for k in range(len(busy[0]))],
                "traces": traced.get("traces", {}),
                "command": rs[0]["command"],
            }
        )
    return rows


def summarize_svc(records: list[dict]) -> dict:
    """(dataset, shrinking) -> median fit time and the (deterministic) model figures."""
    groups = defaultdict(list)
    for r in records:
        if r.get("kind") == "sklearn-svc":
            groups[(r["dataset"], r["shrinking"])].append(r)
    out = {}
    for key, rs in groups.items():
        secs = [r["seconds"] for r in rs]
        cpu = [r.get("cpu_seconds", r["seconds"]) for r in rs]
        out[key] = {
            "seconds": _med(secs),
            "min": min(secs),
            "max": max(secs),
            "cpu": _med(cpu),
            "cpu_min": min(cpu),
            "cpu_max": max(cpu),
            "repeats": len(rs),
            "objective": rs[0]["objective"],
            "accuracy": rs[0]["accuracy"],
            "n_support": rs[0]["n_support"],
            "n_iter": rs[0]["n_iter"],
            "command": rs[0]["command"],
        }
    return out


def _rel(a, b):
    return (a - b) / abs(b) if a is not None and b not in (None, 0) else None


def derive(rows: list[dict], svc: dict) -> None:
    """Add ratios to ``none`` and to SVC, objective gaps and the speed-up over the smallest P."""
    by = {tuple(r[k] for k in KEY): r for r in rows}
    p_min = min((r["ranks"] for r in rows), default=1)
    for r in rows:
        d, P, h, rec, sel = (r[k] for k in KEY)
        none = by.get((d, P, "none", "single", sel))
        ref = by.get((d, p_min, "none", "single", "second"))
        r["vs_none"] = r["train_s"] / none["train_s"] if none and none["train_s"] else None
        r["vs_none_cpu"] = r["cpu_s"] / none["cpu_s"] if none and none["cpu_s"] else None
        for shr in (False, True):
            s = svc.get((d, shr))
            r[f"vs_svc{int(shr)}"] = r["train_s"] / s["seconds"] if s and s["seconds"] else None
        r["gap_none"] = _rel(r["objective"], ref["objective"] if ref else None)
        s0 = svc.get((d, False))
        r["gap_svc"] = _rel(r["objective"], s0["objective"] if s0 else None)
        base = by.get((d, p_min, h, rec, sel))
        r["speedup"] = base["train_s"] / r["train_s"] if base and r["train_s"] else None


def build(study: dict, records: list[dict]) -> tuple[list[dict], dict]:
    rows, svc = summarize_psvm(records), summarize_svc(records)
    derive(rows, svc)
    order = {tuple(c): k for k, c in enumerate(study["combos"])}
    dsets = [d["name"] for d in study["datasets"]]
    rows.sort(
        key=lambda r: (
            dsets.index(r["dataset"]) if r["dataset"] in dsets else 99,
            order.get((r["heuristic"], r["reconstruction"], r["selection"]), 999),
            r["ranks"],
        )
    )
    return rows, svc


def recorded(study: dict, rows: list[dict], svc: dict) -> tuple[dict, dict]:
    """``study`` and the scikit-learn results ``svc`` narrowed to the data sets and P that
    have psvm runs: a study cut short lists a data set as it starts, and its P from the
    command."""
    done = {r["dataset"] for r in rows}
    narrowed = {
        **study,
        "datasets": [d for d in study["datasets"] if d["name"] in done],
        "ranks": [P for P in study["ranks"] if any(r["ranks"] == P for r in rows)],
    }
    return narrowed, {key: s for key, s in svc.items() if key[0] in done}


# -- numbers the conclusions quote ------------------------------------------


def gmean(xs) -> float | None:
    xs = [x for x in xs if x is not None and x > 0]
    return float(math.exp(np.mean(np.log(xs)))) if xs else None


def noise(rows: list[dict], metric: str = "train") -> float:
    """Median relative spread (max - min) / median of the repeats: the study's noise level.

    ``metric``: "train" (the compared time: the solver's wall time) or "cpu".
    """
    med = "cpu_s" if metric == "cpu" else "train_s"
    return (
        _med(
            (r[f"{metric}_max"] - r[f"{metric}_min"]) / r[med]
            for r in rows
            if r["repeats"] > 1 and r[med]
        )
        or 0.0
    )


def ranking(rows: list[dict], selection: str = "second") -> list[tuple[str, float, int]]:
    """Exact configurations with elimination, by geometric mean of time / none over the data
    sets and P (best first)."""
    acc = defaultdict(list)
    for r in rows:
        if r["selection"] == selection and r["reconstruction"] != "approximate":
            acc[(r["heuristic"], r["reconstruction"])].append(r["vs_none"])
    out = [
        (config_label(h, rec, selection), gmean(v), len(v))
        for (h, rec), v in acc.items()
        if h != "none"
    ]
    return sorted((o for o in out if o[1] is not None), key=lambda o: o[1])


# -- the elimination bound (benchmarks/elimination_bound.py) ----------------


def elimination_bound(none: dict, earliest: dict, n: int) -> dict | None:
    """How much time any exact heuristic can save at best, from two traced runs.

    ``none`` and ``earliest`` are the ``traces`` of a run without elimination and of one
    with ``earliest`` (it tests the rule every iteration), same data, P and selection.
    Every heuristic applies the same rule, later, so no heuristic has many fewer active rows
    than ``earliest`` before it has eliminated half of the ``n`` rows: the share of ``none``'s
    time spent before that iteration is about the least time / ``none`` any can reach.
    Returns {"half_iter", "share"}, or None without usable traces (missing, or several
    binary problems, whose iterations restart at 0).
    """
    try:
        it, active = np.asarray(earliest["iter"], float), np.asarray(earliest["active"], float)
        t_it, t_s = np.asarray(none["iter"], float), np.asarray(none["seconds"], float)
    except (KeyError, TypeError):
        return None
    if min(len(it), len(t_it)) < 2 or len(it) != len(active) or len(t_it) != len(t_s):
        return None
    if np.any(np.diff(it) < 0) or np.any(np.diff(t_it) < 0) or not t_s[-1] > 0:
        return None
    out = active <= n / 2
    half = it[np.argmax(out)] if out.any() else it[-1]
    return {"half_iter": int(half), "share": float(np.interp(half, t_it, t_s) / t_s[-1])}


def rule_ceiling(none: dict, earliest: dict, n: int) -> float:
    """Time / ``none``'s of a heuristic that knew ``earliest``'s active rows for nothing: at
    each of ``earliest``'s iterations its window holds just those rows, each costing what a
    row of ``none``'s window costs at that iteration, and it tests, cuts and reconstructs
    for nothing. The bound (:func:`elimination_bound`) counts the iterations after the
    half-way one as free; these windows' iterations are what keeps every heuristic of the
    rule above it. Traces as :func:`elimination_bound` takes them (usable there)."""
    t_it, t_s = np.asarray(none["iter"], float), np.asarray(none["seconds"], float)
    it, active = np.asarray(earliest["iter"], float), np.asarray(earliest["active"], float)
    row_cost = np.diff(t_s) / np.maximum(np.diff(t_it), 1.0) / n  # a row-iteration, per segment
    at = np.arange(it[-1])
    seg = np.clip(np.searchsorted(t_it, at, side="right") - 1, 0, row_cost.size - 1)
    return float((np.interp(at, it, active) * row_cost[seg]).sum() / t_s[-1])


def bounds(rows: list[dict], selection: str = "second") -> dict:
    """(dataset, P) -> :func:`elimination_bound` from the traced ``none/single`` and
    ``earliest`` (single, else multi) rows, with the :func:`rule_ceiling` of the pair
    (``ceiling``); pairs without both are left out."""
    out = {}
    traced = {
        (r["dataset"], r["ranks"], r["heuristic"], r["reconstruction"]): r
        for r in rows
        if r["selection"] == selection and r["traces"]
    }
    for (d, P, h, rec), none in traced.items():
        if h != "none" or rec != "single":
            continue
        early = traced.get((d, P, "earliest", "single")) or traced.get((d, P, "earliest", "multi"))
        n = none["n_samples"]
        b = elimination_bound(none["traces"], early["traces"], n) if early and n else None
        if b is not None:
            out[(d, P)] = {**b, "ceiling": rule_ceiling(none["traces"], early["traces"], n)}
    return out
