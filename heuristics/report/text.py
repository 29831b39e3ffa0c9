"""The Markdown of the heuristics report: tables and conclusions computed from the summary rows.

Every number printed here comes from :func:`heuristics.report.build` (medians of
the run records); the wording around them is chosen by comparisons, not by
hand. See :mod:`heuristics.report`.
"""

from __future__ import annotations

import inspect

import numpy as np

from heuristics.report.summary import config_label, gmean, noise, ranking

PLOT_TITLES = {
    "summary": "Time against none per data set and heuristic, with the elimination bound",
    "time": "Training time per configuration against none",
    "iterations": "Iterations",
    "active": "Active-set size over the iterations",
    "elimination": "Eliminated samples and false positives",
    "reconstruction": "Reconstructions: count and cost",
    "imbalance": "Load imbalance across ranks",
    "quality": "Accuracy and objective gap",
}


def fmt(x, spec: str = ".3f", none: str = "-") -> str:
    return none if x is None else format(x, spec)


def _s(seconds: float) -> str:
    return f"{seconds:.3g}"


def _versus(a: dict, b: dict | None) -> str:
    """Whether the repeat ranges (min-max) of two rows overlap: the plain significance test."""
    if b is None or a is b or a["repeats"] < 2 or b["repeats"] < 2:
        return ""
    apart = a["train_max"] < b["train_min"] or a["train_min"] > b["train_max"]
    return " (repeat ranges apart)" if apart else " (repeat ranges overlap: not significant)"


def _pct(ratio) -> str:
    """A time ratio as 'N% less' / 'N% more'."""
    if ratio is None:
        return "n/a"
    d = (1.0 - ratio) * 100
    return f"{abs(d):.0f}% {'less' if d >= 0 else 'more'} time"


def markdown_table(header: list[str], body: list[list[str]]) -> list[str]:
    """A markdown table's lines, then an empty line."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in body]
    return out + [""]


def default_config() -> tuple[str, str, str]:
    """psvm's default (heuristic, reconstruction, selection) for C-SVC, the study's type."""
    from psvm._params import default_reconstruction, validate_svc_params

    p = inspect.signature(validate_svc_params).parameters
    return p["heuristic"].default, default_reconstruction("c_svc"), p["selection"].default


def _by(rows, **kw):
    return [r for r in rows if all(r[k] == v for k, v in kw.items())]


def first_p(rows):
    """Rows of the smallest P (deterministic counts are the same for every P)."""
    p = min((r["ranks"] for r in rows), default=1)
    return [r for r in rows if r["ranks"] == p]


def p_invariance(rows) -> tuple[int, list[str]]:
    """Configurations checked, and those whose iterations or objective differ across P."""
    groups = {}
    for r in rows:
        groups.setdefault((r["dataset"], r["label"]), []).append(r)
    bad = [
        f"{d} {lab}"
        for (d, lab), rs in groups.items()
        if len({r["n_iter"] for r in rs}) > 1
        or max(abs((r["objective"] or 0) - (rs[0]["objective"] or 0)) for r in rs)
        > 1e-6 * abs(rs[0]["objective"] or 1)
    ]
    return len(groups), bad


def _cores(study) -> str:
    n = study["machine"]["cores"]
    return f"{n} core" + ("s" if n != 1 else "")


def conclusions(study, rows, svc) -> list[str]:
    """The report's opening findings, one paragraph each (those with data)."""
    exact = [r for r in rows if r["reconstruction"] != "approximate"]
    parts = [
        _noise_text(study, rows),
        *_per_dataset_lines(study, exact, svc),
        _ranking_text(rows),
        _direction_text(rows, exact),
        _largest_saving_text(study, rows, exact),
        _false_positive_text(exact),
        _first_order_text(rows),
        _scaling_text(study, rows),
        _exactness_text(exact),
        _approximate_text(rows),
    ]
    return [p for p in parts if p]


def _none_of(rows, r, **same):
    """The `none` row of ``r``'s data set and P (and ``same``'s fields), or None."""
    return next(
        iter(_by(rows, dataset=r["dataset"], ranks=r["ranks"], heuristic="none", **same)), None
    )


def _noise_text(study, rows) -> str:
    if study["repeats"] <= 1:
        return (
            "Noise: one run per configuration, so the noise is not measured; treat "
            "small differences as insignificant."
        )
    return (
        f"Noise: the median spread (max - min over median) across the "
        f"{study['repeats']} repeats of a configuration is {noise(rows):.0%} for wall time and "
        f"{noise(rows, 'cpu'):.0%} for CPU time (the machine's {_cores(study)} may run "
        f"other jobs too). Times below are the wall seconds of psvm's `train` timer (the "
        f"slowest rank's; reading and start-up excluded) and of SVC's `fit`, the time a user "
        f"waits for: a rank's CPU seconds add up its threads, so they would weigh a "
        f"configuration by how much of its work ran in parallel. A difference counts only "
        f"when the repeat ranges do not overlap."
    )


def _per_dataset_lines(study, exact, svc) -> list[str]:
    dflt = config_label(*default_config())
    out = []
    for d in [x["name"] for x in study["datasets"]]:
        for P in study["ranks"]:
            rs = _by(exact, dataset=d, ranks=P, selection="second")
            if not rs:
                continue
            best = min(rs, key=lambda r: r["train_s"])
            none = next((r for r in rs if r["heuristic"] == "none"), None)
            df = next((r for r in rs if r["label"] == dflt), None)
            s1 = svc.get((d, True))
            if best is none:
                txt = f"{d}, P={P}: fastest is `none` itself ({_s(best['train_s'])} s)"
            else:
                txt = (
                    f"{d}, P={P}: fastest is `{best['label']}` ({_s(best['train_s'])} s, "
                    f"{_pct(best['vs_none'])} than `none`"
                )
                txt += f" at {_s(none['train_s'])} s){_versus(best, none)}" if none else ")"
            if df is not None:
                txt += (
                    f"; the default `{dflt}` takes {_pct(df['vs_none'])} than "
                    f"`none`{_versus(df, none)}"
                )
                if s1:
                    txt += (
                        f" and {df['vs_svc1']:.2f}x the time of scikit-learn SVC "
                        f"(shrinking on, {_s(s1['seconds'])} s)"
                    )
            out.append(txt + ".")
    return out


def _ranking_text(rows) -> str | None:
    rk = ranking(rows)
    if not rk:
        return None

    def names(part):
        return ", ".join(f"`{lab}` {g:.2f}" for lab, g, _ in part)

    ranked = (
        f"in order {names(rk)}" if len(rk) <= 5 else f"best {names(rk[:3])}; worst {names(rk[-2:])}"
    )
    return (
        f"Over all data sets and P (geometric mean of time / `none`, second-order "
        f"selection, exact configurations; below 1 beats `none`): {ranked}."
    )


def _direction_text(rows, exact) -> str | None:
    cmp = [
        (r, _none_of(rows, r, selection=r["selection"]))
        for r in exact
        if r["heuristic"] != "none" and r["vs_none"] is not None
    ]
    if not cmp:
        return None
    slower = [r for r, n in cmp if r["vs_none"] > 1]
    apart = [r for r, n in cmp if "apart" in _versus(r, n)]
    return (
        f"Direction: of {len(cmp)} comparisons of an exact elimination configuration "
        f"with `none` (same data, P and selection), {len(slower)} are slower and "
        f"{len(cmp) - len(slower)} faster; the repeat ranges are apart in "
        f"{sum(r['vs_none'] > 1 for r in apart)} slower and "
        f"{sum(r['vs_none'] <= 1 for r in apart)} faster cases."
    )


def _largest_saving_text(study, rows, exact) -> str | None:
    ratios = [r for r in exact if r["vs_none"] is not None and r["heuristic"] != "none"]
    if not ratios:
        return None
    b = min(ratios, key=lambda r: r["vs_none"])
    none = _none_of(rows, b, selection=b["selection"])
    return (
        f"Largest saving against the no-elimination baseline: `{b['label']}` on "
        f"{b['dataset']} at P={b['ranks']}, {_pct(b['vs_none'])}"
        f"{_versus(b, none)}. Being the best of "
        f"many noisy comparisons, it overstates the typical gain. The "
        f"seed paper (Narasimhan et al., arXiv 1406.5161) reports 30-60% less time "
        f"than that baseline on full-size data over several nodes; these runs use "
        f"{_rows_text(study)} on one machine of {_cores(study)}."
    )


def _false_positive_text(exact) -> str | None:
    fp = [r for r in first_p(exact) if r["n_false_positive"] > 0]
    if not fp:
        return None
    dflt = config_label(*default_config())
    w = max(fp, key=lambda r: r["n_false_positive"])
    tot = {
        lab: sum(r["n_false_positive"] for r in first_p(exact) if r["label"] == lab)
        for lab in {r["label"] for r in exact}
    }
    return (
        f"False positives: most with `{w['label']}` on {w['dataset']} "
        f"({w['n_false_positive']} of {w['n_eliminated']} eliminations, "
        f"{w['n_reconstruct']} reconstructions); summed over the data sets the "
        f"default `{dflt}` has {tot.get(dflt, 0)}."
    )


def _first_order_text(rows) -> str | None:
    fo = [
        (a, b)
        for a in rows
        if a["selection"] == "first"
        for b in [
            next(
                iter(
                    _by(
                        rows,
                        dataset=a["dataset"],
                        ranks=a["ranks"],
                        heuristic=a["heuristic"],
                        reconstruction=a["reconstruction"],
                        selection="second",
                    )
                ),
                None,
            )
        ]
        if b is not None
    ]
    if not fo:
        return None
    t = gmean(a["train_s"] / b["train_s"] for a, b in fo)
    it = gmean(a["n_iter"] / b["n_iter"] for a, b in fo)
    return (
        f"First-order (maximal violating pair) against second-order selection, "
        f"same heuristic: {it:.2f}x the iterations and {t:.2f}x the time "
        f"(geometric means over {len(fo)} pairs)."
    )


def _scaling_text(study, rows) -> str | None:
    pmax = max(study["ranks"])
    if pmax <= min(study["ranks"]):
        return None
    sp = [
        f"{r['dataset']} {r['speedup']:.2f}x"
        for r in _by(rows, heuristic="none", selection="second", ranks=pmax)
        if r["speedup"]
    ]
    if not sp:  # (no `none` run at both P)
        return None
    return (
        f"P={pmax} against P={min(study['ranks'])} (`none`): "
        + ", ".join(sp)
        + f". The machine has {_cores(study)}, which other jobs may share, so the ranks "
        "compete for them; these are not scaling figures."
    )


def _exactness_text(exact) -> str | None:
    q = [r for r in first_p(exact) if r["gap_none"] is not None]
    if not q:
        return None
    g = max(abs(r["gap_none"]) for r in q)
    acc = max(
        abs(r["accuracy"] - n["accuracy"])
        for r in q
        for n in _by(first_p(exact), dataset=r["dataset"], label="none/single")
    )
    return (
        f"Exactness: every exact configuration ends within {g:.1e} relative "
        f"objective of `none` and within {100 * acc:.2f} accuracy points of it."
    )


def _approximate_text(rows) -> str | None:
    ap = [r for r in first_p(rows) if r["reconstruction"] == "approximate"]
    if not ap:
        return None
    g = max(abs(r["gap_none"] or 0) for r in ap)
    return (
        f"`approximate` (no reconstruction) ends up to {g:.1e} relative objective "
        f"away from `none` (objective recomputed from the model's support vectors); "
        f"its models are flagged approximate."
    )


def _rows_text(study) -> str:
    rows = "/".join(f"{n:,}" for n in sorted({d["n_train"] for d in study["datasets"]}))
    return f"subsets of {rows} training rows" if study.get("rows") else f"all {rows} rows"


def _med_share(rows) -> float:
    """Median share of training (wall) time spent in reconstruction."""
    shares = [r["reconstruct_s"] / r["train_s"] for r in rows if r["train_s"]]
    return float(np.median(shares)) if shares else 0.0  # (of an even count: the mean of two)


WHY_DEFAULT = {
    "frequent": "It tests the rule every min(n, 50) iterations and drops a row once the rule "
    "has held at two consecutive tests: rows leave soon after they settle, and the second test "
    "filters most of the false positives that acting on the first hit would bring.",
    "gap-triggered": "It tests the rule every min(n, 1000) iterations, but only once m - M has "
    "fallen below a tenth of its first value: rows leave when their bound is settled, so false "
    "positives and reconstruction work stay small.",
    "libsvm": "It is LIBSVM's shrinking: the rule is checked every min(n, 1000) iterations; one "
    "full unshrink at m - M <= 10 tol and one reconstruction at the end keep the model exact.",
}


def default_section(study, rows) -> list[str]:
    h, rec, sel = default_config()
    lab = config_label(h, rec, sel)
    rk = ranking(rows, sel)
    pos = next((k for k, (lb, _, _) in enumerate(rk) if lb == lab), None)
    why = WHY_DEFAULT.get(h, "")
    out = [
        f"psvm's default is `--heuristic {h} --reconstruction {rec} --selection {sel}` "
        f"(the defaults of `psvm._params.validate_svc_params`), chosen from full-data-set "
        f"timings ([docs/heuristics.md](../docs/heuristics.md)). {why}"
    ]
    if pos is None:
        return out
    g = rk[pos][1]
    out.append(
        f"In this study it ranks {pos + 1} of {len(rk)} exact second-order "
        f"configurations with elimination (time / `none` = {g:.2f}, geometric mean "
        f"over data sets and P)."
    )
    # one run per configuration: no noise level to compare against (noise() reads 0 then),
    # so no difference is called beyond it
    nz = noise(rows) if study["repeats"] > 1 else None
    best_lab, best_g, _ = rk[0]
    if best_lab != lab:
        out.append(_against_best(best_lab, best_g, g, nz))
    return out + [_against_none(study, rows, lab, sel, g, nz)]


UNMEASURED = "one run per configuration, so the noise is not measured"


def _against_best(best_lab: str, best_g: float, g: float, nz: float | None) -> str:
    """The default against the study's fastest configuration (``nz``: the noise level, None
    when not measured)."""
    if nz is None:
        return (
            f"`{best_lab}` was faster ({best_g:.2f}), but with {UNMEASURED}, the ranking "
            f"says little: run the study with `--repeats 3` or more."
        )
    if best_g < g * (1 - nz):
        return (
            f"`{best_lab}` was faster ({best_g:.2f}) by more than the noise level ({nz:.0%}); "
            f"that is worth re-checking on the full data sets before changing the default."
        )
    return f"No other heuristic beats it by more than the noise level ({nz:.0%})."


def _against_none(study, rows, lab: str, sel: str, g: float, nz: float | None) -> str:
    """The default's time against `none`, and why elimination did not pay if it did not."""
    if g <= 1:
        if nz is None:
            return f"It takes {_pct(g)} than `none`, with {UNMEASURED}."
        size = "beyond" if g < 1 - nz else "within"
        return f"It takes {_pct(g)} than `none`, {size} the noise level."
    mine = [r for r in first_p(rows) if r["label"] == lab and r["train_s"]]
    cmp = [
        r
        for r in rows
        if r["heuristic"] != "none"
        and r["selection"] == sel
        and r["reconstruction"] != "approximate"
        and r["vs_none"] is not None
    ]
    slower = sum(r["vs_none"] > 1 for r in cmp)
    size = (
        UNMEASURED
        if nz is None
        else f"{'beyond' if g > 1 + nz else 'within'} the noise level of a single comparison"
    )
    return (
        f"It takes {_pct(g)} than `none` (geometric mean), {size}; "
        f"{slower} of {len(cmp)} second-order elimination "
        f"configurations (median per data set and P) were slower than `none`. So on "
        f"{_rows_text(study)} elimination did not pay. Reconstruction alone takes a "
        f"median {_med_share(mine):.0%} of the default's training time here"
        + (
            "; plausibly, in problems this small an iteration over all rows is cheap, so the "
            "checks, reconstructions and cache fill-ins for revived rows are not repaid. "
            if study.get("rows")
            else ". "
        )
        + "The full data sets are measured in docs/heuristics.md."
    )
