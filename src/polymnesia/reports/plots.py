"""Plots for reports: PNG files drawn with matplotlib's Agg renderer, written atomically.

* :func:`bar_by_language`: per-language scores ordered and coloured by group
  (grouped bars when several models are shown).
* :func:`polymnesia.reports.curves.line_plot` (and panels, scatter plots): curves such as
  Aggarwal et al. 2024 Figure 3 (average score against parameter count per arm) and Khelli et al.
  2025 Figure 2
  (average score over steps).
* :func:`polymnesia.reports.heatmaps.heatmap`: R matrices, Khelli et al. 2025 MBT/MFT
  language-by-hop heatmaps (Figures 5-7), cross-branch transfer.
* :func:`bar_plot`: one bar per label, e.g. Khelli et al. 2025 Figure 3 (performance
  change per language), coloured by sign when asked.

Figures are built on :class:`matplotlib.figure.Figure` directly, never through
``pyplot``, so nothing opens a window, no global backend is switched and no
figure is left registered. Each PNG is rendered to memory and written with
:func:`polymnesia.io.atomic_write_bytes` (temporary file in the same folder,
then ``os.replace``).
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from polymnesia.errors import DataError
from polymnesia.io import atomic_write_bytes
from polymnesia.reports.cells import language_cell
from polymnesia.reports.style import (
    LINESTYLES,
    MARKERS,
    PALETTE,
    SeriesStyle,
    legend_columns,
    number_text,
    series_style,
)
from polymnesia.reports.table_core import Estimate
from polymnesia.reports.tables import language_order
from polymnesia.results import Score, filter_scores, group_scores, mean, ordered, unique

DPI = 120
GROUP_COLORS = PALETTE


def save_figure(fig: Figure, path: str | os.PathLike[str]) -> Path:
    """Render ``fig`` to PNG in memory and write it atomically to ``path``."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())
    return Path(path)


def _colour(i: int) -> str:
    return GROUP_COLORS[i % len(GROUP_COLORS)]


def series_colours(names: Iterable[str]) -> dict[str, str]:
    """One colour per distinct name, in order of first appearance: pass the result as
    ``colours`` to every figure of a report so a model keeps its colour across figures."""
    return {name: _colour(i) for i, name in enumerate(dict.fromkeys(names))}


def labelled_style(colours: Mapping[str, str] | None, label: str, i: int) -> SeriesStyle:
    """Series ``label``'s style: its colour from ``colours`` (a report's fixed colours) with
    the line style and marker of its place there, else the style of position ``i``."""
    if colours is not None and label in colours:
        turn = list(colours).index(label) // len(PALETTE)
        return SeriesStyle(
            colours[label], LINESTYLES[turn % len(LINESTYLES)], MARKERS[turn % len(MARKERS)]
        )
    return series_style(i)


def figure_width(
    n_items: float, per_item: float = 0.32, lo: float = 6.0, hi: float = 26.0
) -> float:
    return float(min(hi, max(lo, 1.5 + per_item * n_items)))


def bar_by_language(
    scores: Sequence[Score],
    metric: str,
    groups: Mapping[str, Sequence[str]],
    path: str | os.PathLike[str],
    *,
    model: str | Sequence[str] | None = None,
    model_order: Sequence[str] | None = None,
    title: str = "",
    ylabel: str | None = None,
) -> Path:
    """Bars per language, languages ordered by group.

    One model: bars coloured by group with a group legend. Several models:
    grouped bars coloured by model, and the groups in another encoding (shaded bands
    named above the bars), so a model never shares a colour with a group. Repeated records
    (seeds) are averaged. Error
    bars show each bar's interval (t over seeds, else the record's bootstrap
    interval; :func:`polymnesia.reports.cells.language_cell`) where it has one.
    """
    chosen = filter_scores(scores, metric=metric)
    if model is not None:
        chosen = filter_scores(chosen, model=[model] if isinstance(model, str) else list(model))
    if not chosen:
        raise DataError(f"bar_by_language: no scores for metric '{metric}' and model {model!r}")
    langs = language_order(chosen, groups, ungrouped="other")
    models = ordered(unique(chosen, "model"), model_order)
    values = {
        k: mean([s.value for s in g]) for k, g in group_scores(chosen, "model", "lang").items()
    }
    errors = _error_bars(chosen)
    colour = {g: _colour(i) for i, g in enumerate(dict.fromkeys(g for _, g in langs))}
    fig = Figure(figsize=(figure_width(len(langs) * max(1, len(models) * 0.6)), 4.2))
    ax = fig.add_subplot()
    x = np.arange(len(langs))
    width = 0.8 / len(models)
    for i, m in enumerate(models):
        ys = [values.get((m, lang), math.nan) for lang, _ in langs]
        offset = (i - (len(models) - 1) / 2) * width
        err = np.array([errors.get((m, lang), (0.0, 0.0)) for lang, _ in langs]).T
        bars: dict[str, Any] = {"yerr": err, "capsize": 2, "ecolor": "#333"} if err.any() else {}
        if len(models) == 1:
            ax.bar(x, ys, width, color=[colour[g] for _, g in langs], **bars)
        else:
            color = _colour(i)
            ax.bar(x + offset, ys, width, label=m, color=color, **bars)
    _language_axis(ax, langs, colour, grouped=len(models) > 1)
    ax.set_ylabel(ylabel or metric)
    ax.set_title(
        title or (f"{metric} by language" + (f" ({models[0]})" if len(models) == 1 else "")),
        pad=16 if len(models) > 1 else 6,  # room for the group names above the bars
    )
    return save_figure(fig, path)


def _error_bars(scores: Sequence[Score]) -> dict[tuple[str, str], tuple[float, float]]:
    """(model, lang) -> (value - low, high - value) for the bars that have an interval."""

    out = {}
    for (m, lang), g in group_scores(scores, "model", "lang").items():
        cell = language_cell(g)
        if isinstance(cell, Estimate) and cell.has_ci:
            out[(m, lang)] = (max(0.0, cell.value - cell.low), max(0.0, cell.high - cell.value))
    return out


def _language_axis(
    ax: Any, langs: Sequence[tuple[str, str]], colour: Mapping[str, str], grouped: bool
) -> None:
    from matplotlib.patches import Patch

    ax.set_xticks(np.arange(len(langs)))
    ax.set_xticklabels(
        [lang for lang, _ in langs], rotation=90 if len(langs) > 16 else 0, fontsize=8
    )
    for tick, (_, g) in zip(ax.get_xticklabels(), langs, strict=False):
        tick.set_color(colour[g])
    ax.set_xlim(-0.6, len(langs) - 0.4)
    for i in range(1, len(langs)):
        if langs[i][1] != langs[i - 1][1]:
            ax.axvline(i - 0.5, color="0.6", linewidth=0.8, linestyle=":")
    ax.grid(axis="y", alpha=0.3)
    group_handles = [Patch(color=c, label=g) for g, c in colour.items()]
    if grouped:
        for tick in ax.get_xticklabels():
            tick.set_color("black")
        start = 0
        for k, i in enumerate([*range(1, len(langs)), len(langs)]):
            if i == len(langs) or langs[i][1] != langs[start][1]:
                ax.axvspan(start - 0.5, i - 0.5, color="0.92" if k % 2 else "0.97", zorder=0)
                ax.text(
                    (start + i - 1) / 2,
                    1.01,
                    langs[start][1],
                    transform=ax.get_xaxis_transform(),
                    ha="center",
                    va="bottom",
                    fontsize=8,
                    style="italic",
                )
                start = i
        outside_legend(ax)
        ax.get_legend().set_title("model")
    else:
        ax.legend(
            handles=group_handles,
            title="group",
            fontsize=8,
            loc="upper left",
            bbox_to_anchor=(1.0, 1.0),
        )


def outside_legend(ax: Any, fontsize: float = 8) -> None:
    """The series legend to the right of the axes (never over the data), in as many columns
    as its entries need; nothing when no series has a label."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(
            handles,
            labels,
            fontsize=fontsize,
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            borderaxespad=0.0,
            ncol=legend_columns(len(labels)),
        )


def bar_plot(
    values: Mapping[str, float],
    path: str | os.PathLike[str],
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    errors: Mapping[str, float] | None = None,
    intervals: Mapping[str, tuple[float, float]] | None = None,
    signed_colors: bool = False,
    sort: bool = False,
    fmt: str | None = None,
    limits: tuple[float, float] | None = None,
) -> Path:
    """One bar per label (insertion order, or descending with ``sort``).

    ``signed_colors`` paints gains blue and losses red with a zero line (paper
    004 Figure 3, performance change per language); ``errors`` adds symmetric error
    bars, ``intervals`` asymmetric ones from each label's ``(low, high)`` (a label without a
    finite interval gets none); ``fmt`` writes each value above its bar (a value that
    rounds to zero without a minus sign). ``limits`` fixes the value axis, so that bar plots
    read side by side (one per arm) share one scale (:func:`shared_range`).
    """
    if not values:
        raise DataError("bar_plot: no values to draw")
    labels = sorted(values, key=lambda k: -values[k]) if sort else list(values)
    ys = [float(values[k]) for k in labels]
    fig = Figure(figsize=(figure_width(len(labels), 0.35), 4.2))
    ax = fig.add_subplot()
    colors = (
        [("#4C72B0" if y >= 0 else "#C44E52") for y in ys] if signed_colors else GROUP_COLORS[0]
    )
    yerr: Any = [float(errors.get(k, 0.0)) for k in labels] if errors else None
    if intervals:
        yerr = np.array(
            [_below_above(y, intervals.get(k)) for k, y in zip(labels, ys, strict=True)]
        ).T
    bars = ax.bar(
        np.arange(len(labels)),
        ys,
        0.7,
        color=colors,
        yerr=yerr,
        capsize=2 if yerr is not None else 0,
    )
    if signed_colors:
        ax.axhline(0.0, color="0.3", linewidth=0.8)
    if fmt:
        ax.bar_label(bars, labels=[number_text(y, fmt) for y in ys], fontsize=7)
    if limits is not None:
        ax.set_ylim(*limits)
    ax.set_xticks(np.arange(len(labels)))
    ax.set_xticklabels(labels, rotation=90 if len(labels) > 12 else 0, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)


def _below_above(y: float, iv: tuple[float, float] | None) -> tuple[float, float]:
    """How far an interval ``(low, high)`` reaches below and above the bar's value ``y`` (no
    bar where it is missing or not finite)."""
    if iv is None or not all(math.isfinite(v) for v in iv):
        return 0.0, 0.0
    return max(0.0, y - iv[0]), max(0.0, iv[1] - y)


def shared_range(values: Iterable[float], margin: float = 0.15) -> tuple[float, float] | None:
    """One value axis for bar plots read side by side: from the smallest to the largest
    finite value over all of them, zero included, widened by ``margin`` of the span on each
    side for the values written above the bars (None when no value is finite)."""
    finite = [float(v) for v in values if math.isfinite(float(v))]
    if not finite:
        return None
    lo, hi = min(0.0, *finite), max(0.0, *finite)
    pad = (hi - lo) * margin or 0.05
    return lo - pad, hi + pad
