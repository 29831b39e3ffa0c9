"""The figures of time against ``none``: every configuration (``time.png``) and the summary
a reader acts on (``summary.png``: each heuristic per data set, with the elimination bound).

Times are ratios to ``none`` with the same data, P and selection (wall seconds of psvm's
``train`` timer, medians; bars span the repeats' min-max over ``none``'s median), so the
differences between heuristics are not drowned by the differences between data sets.
"""

from __future__ import annotations

from collections import defaultdict

from heuristics.report.style import (
    HIGHLIGHT,
    bold_default,
    color,
    default_label,
    labelled,
    marker,
    pyplot,
    save,
)
from heuristics.report.summary import bounds, find, gmean
from heuristics.report.text import default_config

P_MARKERS = ("o", "s", "^", "D", "v")


def _approx(r: dict) -> bool:
    return r["reconstruction"] == "approximate"


GROUPS = (  # time.png's row groups, each sorted by time / none
    ("exact, second order", lambda r: r["selection"] == "second" and not _approx(r)),
    ("approximate (no reconstruction)", _approx),
    ("first-order selection", lambda r: r["selection"] == "first"),
)


def _ratio(r: dict) -> tuple[float, float, float] | None:
    """time / none: the median, and how far below and above it the repeats reach."""
    if r["vs_none"] is None:
        return None
    none_s = r["train_s"] / r["vs_none"]
    lo, hi = (r["train_s"] - r["train_min"]) / none_s, (r["train_max"] - r["train_s"]) / none_s
    return r["vs_none"], lo, hi


def _sorted_rows(rows) -> list[tuple[str, bool]]:
    """(label, is a group heading) from top to bottom: groups in order, each by geometric
    mean of time / none over data sets and P (fastest on top)."""
    out = []
    for title, member in GROUPS:
        by = defaultdict(list)
        for r in rows:
            if member(r):
                by[r["label"]].append(r["vs_none"])
        if by:
            order = sorted(by, key=lambda lab: gmean(by[lab]) or float("inf"))
            out += [(title, True)] + [(lab, False) for lab in order]
    return out


def plot_time(study, rows, svc, out):
    """Time / none per configuration: one panel per data set, one dot per P."""
    if not any(r["vs_none"] for r in rows):
        return None
    fig, _ = time_figure(study, rows, svc)
    title = "Training time against none per configuration (fastest on top)"
    return save(pyplot(), fig, out, "time", title)


def time_figure(study, rows, svc):
    """The figure of :func:`plot_time`, returned unsaved (the tests read it)."""
    order = _sorted_rows(rows)
    plt = pyplot()
    names = [d["name"] for d in study["datasets"]]
    ranks = study["ranks"]
    fig, axes = plt.subplots(
        1,
        len(names),
        figsize=(4.3 * len(names) + 2.4, 0.3 * len(order) + 2.2),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    y = {lab: k for k, (lab, head) in enumerate(order) if not head}
    step = 0.5 / max(len(ranks), 1)
    for ax, d in zip(axes[0], names, strict=True):
        for k, (lab, head) in enumerate(order):
            if lab == default_label() and not head:
                ax.axhspan(k - 0.5, k + 0.5, color=HIGHLIGHT, zorder=0)
            if head and k:
                ax.axhline(k - 0.5, color="0.5", lw=0.8)
        for r in rows:
            q = _ratio(r) if r["dataset"] == d and r["label"] in y else None
            if q is None:
                continue
            p = ranks.index(r["ranks"]) if r["ranks"] in ranks else 0
            ax.errorbar(
                q[0],
                y[r["label"]] + (p - (len(ranks) - 1) / 2) * step,
                xerr=[[q[1]], [q[2]]],
                fmt=P_MARKERS[p % len(P_MARKERS)],
                color=color(r["heuristic"]),
                mec="black" if r["label"] == default_label() else color(r["heuristic"]),
                ms=6,
                elinewidth=0.8,
                capsize=2,
                zorder=3,
            )
        ax.axvline(1.0, color="black", lw=1.0, zorder=1)
        s1 = svc.get((d, True))
        none = find(rows, d, min(ranks), "none/single")
        title = d
        if s1 and none and none["train_s"]:
            x = s1["seconds"] / none["train_s"]
            title += f"\nscikit-learn SVC (shrinking on): {x:.1f}x none, P={min(ranks)}"
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(f"training time / none's (median of {study['repeats']}; bars: min-max)")
        ax.grid(axis="x", alpha=0.3)
    _row_labels(axes[0][0], order)
    _time_legend(fig, ranks)
    return fig, axes


def _row_labels(ax, order) -> None:
    """The configurations' names down the first panel, the group heads in grey italics."""
    ax.set_yticks(range(len(order)), [lab if head else labelled(lab) for lab, head in order])
    for tick, (_, head) in zip(ax.get_yticklabels(), order, strict=True):
        tick.set_fontsize(8)
        if head:
            tick.set_fontstyle("italic")
            tick.set_color("0.35")
    bold_default(ax.get_yticklabels())
    ax.set_ylim(len(order) - 0.5, -0.5)


def _time_legend(fig, ranks) -> None:
    """The markers of each P, the line of none and the default's band, below the panels."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Line2D([], [], ls="", marker=P_MARKERS[k % len(P_MARKERS)], color="0.3", label=f"P={P}")
        for k, P in enumerate(ranks)
    ]
    handles += [
        Line2D([], [], color="black", label="none (= 1): left of it is faster"),
        Patch(color=HIGHLIGHT, label=f"the default, {default_label()}"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8)
    fig._legend_space = 0.35 / fig.get_size_inches()[1]


def _per_heuristic(rows) -> list[str]:
    """One configuration per heuristic: exact, the default selection, the default
    reconstruction if it was run (else the first one)."""
    _, rec, sel = default_config()
    picked = {}
    for r in rows:
        if r["selection"] == sel and not _approx(r):
            if r["heuristic"] not in picked or r["reconstruction"] == rec:
                picked[r["heuristic"]] = r["label"]
    return list(picked.values())


def plot_summary(study, rows, svc, out):
    """Time / none per data set for each heuristic, one panel per P, with the elimination
    bound (:func:`heuristics.report.summary.bounds`) where the records give it."""
    labels = _per_heuristic(rows)
    rows = [r for r in rows if r["label"] in labels and r["vs_none"] is not None]
    if not rows:
        return None
    fig, _ = summary_figure(study, rows, labels, bounds(rows))
    title = "Time against none per data set, and the least time any exact heuristic can reach"
    return save(pyplot(), fig, out, "summary", title)


def _bound_bar(ax, i: int, share: float) -> None:
    ax.fill_between(
        [i - 0.45, i + 0.45],
        0,
        share,
        color="0.85",
        lw=0,
        label="out of reach of every exact heuristic (elimination bound)",
    )
    ax.text(
        i,
        share / 2,
        f"bound {share:.2f}:\nat most {1 - share:.0%} less",
        ha="center",
        va="center",
        fontsize=8,
        color="0.25",
    )


def summary_figure(study, rows, labels, bound: dict):
    """The figure of :func:`plot_summary`, returned unsaved (the tests read it)."""
    plt = pyplot()
    names = [d["name"] for d in study["datasets"]]
    ranks = [P for P in study["ranks"] if any(r["ranks"] == P for r in rows)]
    width = max(4.5, 1.6 * len(names) + 2) * len(ranks) + 3.2
    fig, axes = plt.subplots(1, len(ranks), figsize=(width, 5.2), sharey=True, squeeze=False)
    w = 0.8 / len(labels)
    for ax, P in zip(axes[0], ranks, strict=True):
        for i, d in enumerate(names):
            if (d, P) in bound:
                _bound_bar(ax, i, bound[(d, P)]["share"])
        for j, lab in enumerate(labels):
            found = [(i, find(rows, d, P, lab)) for i, d in enumerate(names)]
            pts = [(i + (j - (len(labels) - 1) / 2) * w, *_ratio(r)) for i, r in found if r]
            if not pts:
                continue
            x, y, lo, hi = zip(*pts, strict=True)
            h, default = lab.split("/")[0], lab == default_label()
            ax.errorbar(
                x,
                y,
                yerr=[lo, hi],
                ls="",
                marker=marker(h),
                color=color(h),
                ms=11 if default else 6,
                mec="black" if default else color(h),
                mew=1.6 if default else 1.0,
                elinewidth=0.8,
                capsize=2,
                zorder=4 if default else 3,
                label=labelled(lab),
            )
        ax.axhline(1.0, color="black", lw=1.0, zorder=2, label="none (= 1)")
        ax.set_xticks(range(len(names)), names)
        ax.set_xlim(-0.5, len(names) - 0.5)
        ax.set_ylim(0, max(1.15, 1.1 * max(r["vs_none"] for r in rows)))  # long bars are cut
        ax.set_title(f"P={P}")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("training time / none's (median; bars: min-max of the repeats)")
    saving = axes[0][-1].secondary_yaxis(
        "right", functions=(lambda y: 100 * (1 - y), lambda s: 1 - s / 100)
    )
    saving.set_ylabel("less time than none [%]")
    entries = {}
    for ax in axes[0]:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(text, handle)
    legend = axes[0][-1].legend(
        entries.values(),
        entries.keys(),
        fontsize=8,
        loc="center left",
        bbox_to_anchor=(1.0, 0.5),
        bbox_transform=_beyond(fig, axes[0][-1], saving),
    )
    bold_default(legend.get_texts())
    return fig, axes


def _beyond(fig, ax, right):
    """Axes coordinates shifted right past ``right`` (the secondary axis: its ticks and label)
    by a fixed distance in inches: an axes fraction shrinks with narrow panels, and then the
    legend covered the axis label (one data set)."""
    from matplotlib.transforms import ScaledTranslation

    renderer = fig.canvas.get_renderer()
    past = right.get_tightbbox(renderer).x1 - ax.get_window_extent(renderer).x1
    return ax.transAxes + ScaledTranslation(past / fig.dpi + 0.15, 0, fig.dpi_scale_trans)
