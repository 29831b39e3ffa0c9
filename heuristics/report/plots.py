"""The report's PNGs, one figure per quantity with one panel per data set.

Every panel has labelled axes with units and a legend; configurations are
listed in the study's order (second order first, ``none`` on top).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

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
from heuristics.report.text import first_p
from heuristics.report.versus import plot_summary, plot_time

COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple")  # series of grouped bars


def _panels(study, n_rows: int = 1, height: float | None = None, n_conf: int = 10):
    plt = pyplot()
    names = [d["name"] for d in study["datasets"]]
    h = height if height is not None else max(3.5, 0.32 * n_conf + 1.5)
    fig, axes = plt.subplots(
        n_rows, len(names), figsize=(5.2 * len(names) + 1.5, h * n_rows), squeeze=False
    )
    return plt, fig, axes, names


def _labels(rows):
    seen = []
    for r in rows:
        if r["label"] not in seen:
            seen.append(r["label"])
    return seen


def _legend_below(fig, ax) -> None:
    """One legend under the panels, sized to the figure (it never covers a bar)."""
    handles, labels = ax.get_legend_handles_labels()
    width, height = fig.get_size_inches()
    ncol = max(1, min(len(labels), int(width // 3.2)))
    rows = -(-len(labels) // ncol)
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8)
    fig._legend_space = (0.25 * rows + 0.1) / height


def _col(rs: dict, labels, key):
    return [rs[lab][key] if lab in rs else None for lab in labels]


def _hbars(ax, labels, series, xlabel, log=False):
    """Grouped horizontal bars: ``series`` is [(legend, values)], one value per label; the
    default's row named, in bold and on a band."""
    y = np.arange(len(labels))
    k = len(series)
    w = 0.8 / max(k, 1)
    for s, (name, vals) in enumerate(series):
        v = np.array([np.nan if x is None else x for x in vals], dtype=float)
        ax.barh(y - 0.4 + w * (s + 0.5), v, height=w, color=COLORS[s % len(COLORS)], label=name)
    if default_label() in labels:
        at = labels.index(default_label())
        ax.axhspan(at - 0.5, at + 0.5, color=HIGHLIGHT, zorder=0)
    ax.set_yticks(y, [labelled(lab) for lab in labels], fontsize=8)
    bold_default(ax.get_yticklabels())
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    if log:
        ax.set_xscale("symlog", linthresh=1)
    ax.grid(axis="x", alpha=0.3)


def plot_iterations(study, rows, svc, out):
    rows = first_p(rows)
    labels = _labels(rows)
    plt, fig, axes, names = _panels(study, n_conf=len(labels))
    for ax, d in zip(axes[0], names, strict=True):
        rs = {r["label"]: r for r in rows if r["dataset"] == d}
        _hbars(
            ax,
            labels,
            [("psvm", [rs[lab]["n_iter"] if lab in rs else None for lab in labels])],
            "iterations [SMO steps]",
        )
        s = svc.get((d, True))
        if s:
            ax.axvline(s["n_iter"], color="red", ls=":", label="sklearn SVC (shrinking on)")
        ax.set_title(d)
    _legend_below(fig, axes[0][0])
    return save(plt, fig, out, "iterations", "Iterations to m - M < tol (same for every P)")


def plot_active(study, rows, svc, out):
    rows = [
        r
        for r in first_p(rows)
        if r["traces"].get("iter")
        and r["selection"] == "second"
        and r["reconstruction"] != "approximate"
    ]
    plt, fig, axes, names = _panels(study, height=4.2)
    labels = _labels(rows)
    for ax, d in zip(axes[0], names, strict=True):
        for lab in labels:
            r = next((r for r in rows if r["dataset"] == d and r["label"] == lab), None)
            if r is None:
                continue
            t = r["traces"]
            n = r["n_samples"] or max(t["active"])
            default = lab == default_label()
            ax.step(
                t["iter"],
                100.0 * np.asarray(t["active"]) / n,
                where="post",
                lw=3.0 if default else 1.2,
                color=color(r["heuristic"]),
                ls="-" if r["reconstruction"] == "single" else "--",
                marker=marker(r["heuristic"]),
                markevery=0.12,
                markersize=4,
                zorder=3 if default else 2,
                label=labelled(lab),
            )
        ax.set_xlabel("iteration (sampled trace points)")
        ax.set_ylabel("active rows [% of training rows]")
        ax.set_ylim(0, 105)
        ax.set_title(d)
        ax.grid(alpha=0.3)
    legend = axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    bold_default(legend.get_texts())
    return save(plt, fig, out, "active", "Active-set size over the iterations (P = smallest)")


def plot_elimination(study, rows, svc, out):
    rows = [r for r in first_p(rows) if r["heuristic"] != "none"]
    labels = _labels(rows)
    plt, fig, axes, names = _panels(study, n_conf=len(labels))
    for ax, d in zip(axes[0], names, strict=True):
        rs = {r["label"]: r for r in rows if r["dataset"] == d}
        _hbars(
            ax,
            labels,
            [
                ("eliminations", _col(rs, labels, "n_eliminated")),
                ("false positives", _col(rs, labels, "n_false_positive")),
            ],
            "rows [count, symlog scale]",
            log=True,
        )
        ax.set_title(d)
    _legend_below(fig, axes[0][0])
    return save(plt, fig, out, "elimination", "Eliminations and false positives (revived rows)")


def plot_reconstruction(study, rows, svc, out):
    rows = [r for r in first_p(rows) if r["heuristic"] != "none"]
    labels = _labels(rows)
    plt, fig, axes, names = _panels(study, n_rows=2, n_conf=len(labels))
    for col, d in enumerate(names):
        rs = {r["label"]: r for r in rows if r["dataset"] == d}
        _hbars(
            axes[0][col],
            labels,
            [
                (
                    "reconstructions",
                    [rs[lab]["n_reconstruct"] if lab in rs else None for lab in labels],
                )
            ],
            "reconstructions [count]",
        )
        share = [
            100 * rs[lab]["reconstruct_s"] / rs[lab]["train_s"]
            if lab in rs and rs[lab]["train_s"]
            else None
            for lab in labels
        ]
        _hbars(
            axes[1][col],
            labels,
            [("reconstruction time", share)],
            "reconstruction time [% of training time]",
        )
        axes[0][col].set_title(d)
        for ax in axes[:, col]:
            if len(ax.get_legend_handles_labels()[0]) > 1:
                ax.legend(fontsize=7, loc="lower right", framealpha=0.9)
    return save(plt, fig, out, "reconstruction", "Gradient reconstructions: count and cost")


def plot_imbalance(study, rows, svc, out):
    P = max(study["ranks"])
    rows = [r for r in rows if r["ranks"] == P]
    if P < 2 or not rows:
        return None
    labels = _labels(rows)
    plt, fig, axes, names = _panels(study, n_conf=len(labels))
    for ax, d in zip(axes[0], names, strict=True):
        rs = {r["label"]: r for r in rows if r["dataset"] == d}
        series = [
            (f"rank {k}", [rs[lab]["busy_per_rank"][k] if lab in rs else None for lab in labels])
            for k in range(P)
        ]
        _hbars(ax, labels, series, "busy time per rank [s]")
        ax.set_title(d)
    _legend_below(fig, axes[0][0])
    return save(
        plt,
        fig,
        out,
        "imbalance",
        f"Work per rank at P={P}: kernel + select + update + reconstruct (equal bars: balanced)",
    )


def plot_quality(study, rows, svc, out):
    rows = first_p(rows)
    labels = _labels(rows)
    plt, fig, axes, names = _panels(study, n_rows=2, n_conf=len(labels))
    for col, d in enumerate(names):
        rs = {r["label"]: r for r in rows if r["dataset"] == d}
        acc = [100 * rs[lab]["accuracy"] if lab in rs else None for lab in labels]
        _hbars(axes[0][col], labels, [("psvm", acc)], "test accuracy [%]")
        vals = [a for a in acc if a is not None]
        if vals:
            axes[0][col].set_xlim(min(vals) - 0.5, max(vals) + 0.5)
        s = svc.get((d, False))
        if s:
            axes[0][col].axvline(100 * s["accuracy"], color="red", ls="--", label="sklearn SVC")
        gap = [
            abs(rs[lab]["gap_svc"]) if lab in rs and rs[lab]["gap_svc"] is not None else None
            for lab in labels
        ]
        _hbars(
            axes[1][col],
            labels,
            [("|objective - SVC objective| / |SVC objective|", gap)],
            "relative objective gap to sklearn SVC [log scale]",
        )
        if any(g for g in gap if g):
            axes[1][col].set_xscale("log")
        axes[0][col].set_title(d)
        for ax in axes[:, col]:
            if len(ax.get_legend_handles_labels()[0]) > 1:
                ax.legend(fontsize=7, loc="lower right", framealpha=0.9)
    return save(plt, fig, out, "quality", "Test accuracy and objective gap")


PLOTS = {"summary": plot_summary, "time": plot_time, "iterations": plot_iterations,
         "active": plot_active, "elimination": plot_elimination,
         "reconstruction": plot_reconstruction, "imbalance": plot_imbalance,
         "quality": plot_quality}  # fmt: skip


def make_plots(study, rows, svc, out) -> dict:
    """Write every PNG into ``out``; returns name -> file name (relative to ``out``)."""
    out = Path(out)
    figures = {}
    for name, fn in PLOTS.items():
        path = fn(study, rows, svc, out)
        if path:
            figures[name] = path
    return figures
