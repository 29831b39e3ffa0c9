"""The figures' shared look: one colour and marker per heuristic, the default singled out,
and PNGs written small (a 256-colour palette)."""

from __future__ import annotations

import io
from pathlib import Path

from heuristics.report.summary import config_label
from heuristics.report.text import default_config
from psvm.io.atomic import write_atomic

# tab10 without olive, close to orange; `none` is black
COLORS = (
    "tab:blue",
    "tab:orange",
    "tab:green",
    "tab:red",
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:gray",
    "tab:cyan",
)
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">")
HIGHLIGHT = "#ffe680"  # the band behind the default's row


def default_label() -> str:
    return config_label(*default_config())


def labelled(label: str) -> str:
    """``label``, named as the default when it is."""
    return f"{label} (default)" if label == default_label() else label


def _order(heuristic: str) -> int:
    """The heuristic's place in psvm's table, so that it keeps its look in every figure and
    every report."""
    from psvm._params import HEURISTICS

    known = [h for h in HEURISTICS if h != "none"]
    return known.index(heuristic) if heuristic in known else len(known)


def color(heuristic: str) -> str:
    return "black" if heuristic == "none" else COLORS[_order(heuristic) % len(COLORS)]


def marker(heuristic: str) -> str:
    return "o" if heuristic == "none" else MARKERS[(_order(heuristic) + 1) % len(MARKERS)]


def bold_default(texts) -> None:
    """Tick labels or legend entries: the default's in bold."""
    for text in texts:
        if text.get_text().endswith("(default)"):
            text.set_fontweight("bold")


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(plt, fig, out: Path, name: str, title: str) -> str:
    fig.suptitle(title)
    fig.tight_layout(rect=(0, getattr(fig, "_legend_space", 0.0), 1, 0.97))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    try:  # a palette keeps the committed PNGs small; Pillow comes with matplotlib
        from PIL import Image

        buf.seek(0)
        # octree, not median cut: median cut weighs colours by area and merged the thin lines'
        # green, purple and pink into grey
        img = Image.open(buf).convert("RGB").quantize(256, method=Image.Quantize.FASTOCTREE)
        buf = io.BytesIO()
        img.save(buf, format="png", optimize=True)
    except ImportError:
        pass
    with write_atomic(Path(out) / f"{name}.png", "wb") as f:  # (Ctrl-C: old or new, whole)
        f.write(buf.getvalue())
    return f"{name}.png"
