"""Figures for publication: how a report's figures look and are written (matplotlib, Agg).

Each figure is written in every format asked (`png` at 300 dpi, `svg`, `pdf`: vector), its legend
outside the axes at the right (columns added past 18 entries, so 30 curves stay readable), and
each curve a distinct (colour, marker) pair: the ten colours of matplotlib's `tab10` first, then
the same ten with a marker (circle, square, triangle, diamond), never the same pair twice. Dashed
lines are left to reference curves (the paper's), dotted to the diagonal. `fit_range` chooses an
axis range that holds the data, rounded to 5.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["DPI", "FORMATS", "fit_range", "save_figure", "style"]

DPI = 300
FORMATS = ("png", "svg", "pdf")
_MARKERS = (None, "o", "s", "^", "D", "v", "P", "X")


def style(i: int) -> dict[str, Any]:
    """The i-th curve's colour and marker (unique up to 80 curves, then cycling)."""
    import matplotlib

    colours = matplotlib.colormaps["tab10"].colors  # type: ignore[attr-defined]
    marker = _MARKERS[(i // len(colours)) % len(_MARKERS)]
    out: dict[str, Any] = {"color": colours[i % len(colours)]}
    if marker is not None:
        out |= {"marker": marker, "markersize": 3, "markevery": 0.1}
    return out


def fit_range(values: Iterable[float], pad: float = 1.0, lo: float | None = None) -> tuple[float, float]:
    """From (min − pad) to (max + pad), outwards to multiples of 5, not below `lo`."""
    vs = [v for v in values if math.isfinite(v)]
    if not vs:
        return (0.0, 1.0)
    a = 5 * math.floor((min(vs) - pad) / 5)
    b = 5 * math.ceil((max(vs) + pad) / 5)
    if lo is not None:
        return (max(float(a), lo), float(b if b > max(a, lo) else max(a, lo) + 5))
    return (float(a), float(b if b > a else a + 5))


def save_figure(
    stem: Path,
    formats: Sequence[str],
    title: str,
    xlabel: str,
    ylabel: str,
    draw: Callable[[Any], Sequence[Any] | None],
) -> list[Path]:
    """Draw on fresh axes (`draw` may return extra legend handles, e.g. a band's explanation) and
    write `stem`.<format> for each format; the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text: searchable, editable
    matplotlib.rcParams["pdf.fonttype"] = 42  # TrueType in PDFs, as journals ask
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    extra = draw(ax) or []
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    handles = [*handles, *extra]
    labels = [*labels, *(h.get_label() for h in extra)]
    if handles:
        ncol = 1 + (len(handles) - 1) // 18
        fig.set_size_inches(6.4 + 2.4 * ncol, max(3.6, 0.17 * min(len(handles), 18) + 1.0))
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=6.5, ncol=ncol)
    paths = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for fmt in formats:
            path = stem.with_suffix(f".{fmt}")
            fig.savefig(path, dpi=DPI, bbox_inches="tight", metadata=_metadata(fmt))
            paths.append(path)
    plt.close(fig)
    return paths


def _metadata(fmt: str) -> dict[str, Any]:
    """No creation date in the files (the same runs give the same bytes)."""
    if fmt == "svg":
        return {"Date": None}
    if fmt == "pdf":
        return {"CreationDate": None}
    return {}
