"""Plots for reports: PNG files drawn with matplotlib's Agg renderer, written atomically.

* :func:`bar_by_language`: per-language scores ordered and coloured by group
  (grouped bars when several models are shown).
* :func:`line_plot`: curves such as paper 000 Figure 3 (average score against
  parameter count per arm) and paper 004 Figure 2 (average score over steps).
* :func:`heatmap`: R matrices, paper 004 MBT/MFT language-by-hop heatmaps
  (Figures 5-7), cross-branch transfer.
* :func:`bar_plot`: one bar per label, e.g. paper 004 Figure 3 (performance
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
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from polymnesia.errors import ConfigError, DataError
from polymnesia.io import atomic_write_bytes
from polymnesia.reports.cells import language_cell
from polymnesia.reports.table_core import Estimate
from polymnesia.reports.tables import language_order
from polymnesia.results import Score, filter_scores, group_scores, mean, ordered, unique

DPI = 120
GROUP_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3")


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


def _series_colour(colours: Mapping[str, str] | None, label: str, i: int) -> str:
    return colours[label] if colours is not None and label in colours else _colour(i)


def _width(n_items: float, per_item: float = 0.32, lo: float = 6.0, hi: float = 26.0) -> float:
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
    grouped bars coloured by model, tick labels coloured by group and thin
    separators between groups. Repeated records (seeds) are averaged. Error
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
    fig = Figure(figsize=(_width(len(langs) * max(1, len(models) * 0.6)), 4.2))
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
        title or (f"{metric} by language" + (f" ({models[0]})" if len(models) == 1 else ""))
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
        first = ax.legend(title="model", fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.add_artist(first)
        ax.legend(
            handles=group_handles,
            title="group (labels)",
            fontsize=8,
            loc="lower left",
            bbox_to_anchor=(1.0, 0.0),
        )
    else:
        ax.legend(
            handles=group_handles,
            title="group",
            fontsize=8,
            loc="upper left",
            bbox_to_anchor=(1.0, 1.0),
        )


def line_plot(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    path: str | os.PathLike[str],
    *,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    logx: bool = False,
    xticklabels: Sequence[str] | None = None,
    colours: Mapping[str, str] | None = None,
) -> Path:
    """One line with markers per series name, e.g. average score against parameter count per arm.

    ``xticklabels`` (one per distinct x of the first series) replaces the x
    tick labels, e.g. "400M", "1.6B" or the language trained at each step. ``colours``
    (series name -> colour, :func:`series_colours`) fixes a series' colour; others take the
    palette by position.
    """
    if not series:
        raise DataError("line_plot: no series to draw")
    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.add_subplot()
    for i, (label, (xs, ys)) in enumerate(series.items()):
        if len(xs) == 0:
            raise DataError(f"line_plot: series '{label}' has no points")
        if len(xs) != len(ys):
            raise DataError(
                f"line_plot: series '{label}' has {len(xs)} x values but {len(ys)} y values"
            )
        ax.plot(
            list(xs), list(ys), marker="o", label=label, color=_series_colour(colours, label, i)
        )
    if logx:
        ax.set_xscale("log")
    if xticklabels is not None:
        first_xs = list(next(iter(series.values()))[0])
        ax.set_xticks(first_xs)
        ax.set_xticklabels(list(xticklabels), rotation=45 if len(first_xs) > 8 else 0, fontsize=8)
        ax.minorticks_off()
    return _finish_series(fig, ax, path, xlabel, ylabel, title)


def scatter_plot(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    path: str | os.PathLike[str],
    *,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    zero_lines: bool = True,
    colours: Mapping[str, str] | None = None,
) -> Path:
    """Points per series name (e.g. each model's layers in a t-SNE, or each arm's EA/MA change);
    ``colours`` as in :func:`line_plot`."""
    if not series:
        raise DataError("scatter_plot: no series to draw")
    fig = Figure(figsize=(6.4, 4.8))
    ax = fig.add_subplot()
    for i, (label, (xs, ys)) in enumerate(series.items()):
        if len(xs) != len(ys) or len(xs) == 0:
            raise DataError(f"scatter_plot: series '{label}' needs as many x as y values (>= 1)")
        ax.scatter(list(xs), list(ys), label=label, color=_series_colour(colours, label, i), s=36)
    if zero_lines:
        ax.axhline(0, color="0.6", lw=0.8)
        ax.axvline(0, color="0.6", lw=0.8)
    return _finish_series(fig, ax, path, xlabel, ylabel, title)


def _finish_series(
    fig: Figure, ax: Any, path: str | os.PathLike[str], xlabel: str, ylabel: str, title: str
) -> Path:
    """Axis labels, title, grid and series legend of a line or scatter plot, then the PNG."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def heatmap(
    matrix: Any,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    path: str | os.PathLike[str],
    *,
    title: str = "",
    cmap: str | None = None,
    fmt: str = ".2f",
    center: float | None = None,
    annotate: bool | None = None,
    xlabel: str = "",
    ylabel: str = "",
    colorbar_label: str = "",
) -> Path:
    """A labelled heatmap; NaN cells stay blank.

    ``center`` (e.g. 0 for transfer scores) uses a diverging map with that
    value white (default cmap "coolwarm_r": positive transfer cool, as in
    paper 004 Figures 5-6); otherwise "viridis". Cells are annotated with
    ``fmt`` when ``annotate`` is true, by default when there are at most 600.
    """
    data = np.asarray(matrix, dtype=float)
    if data.ndim != 2 or data.shape != (len(row_labels), len(col_labels)):
        raise ConfigError(
            f"heatmap: matrix shape {data.shape} does not match {len(row_labels)} row and "
            f"{len(col_labels)} column labels"
        )
    n_rows, n_cols = data.shape
    fig = Figure(
        figsize=(_width(n_cols, 0.45, 5.0, 24.0), min(20.0, max(3.5, 1.5 + 0.38 * n_rows)))
    )
    ax = fig.add_subplot()
    masked = np.ma.masked_invalid(data)
    norm = _center_norm(data, center)
    image = ax.imshow(
        masked, aspect="auto", cmap=cmap or ("coolwarm_r" if norm else "viridis"), norm=norm
    )
    ax.set_xticks(np.arange(n_cols))
    ax.set_xticklabels(list(col_labels), rotation=90 if n_cols > 10 else 0, fontsize=8)
    ax.set_yticks(np.arange(n_rows))
    ax.set_yticklabels(list(row_labels), fontsize=8)
    if annotate if annotate is not None else data.size <= 600:
        _annotate(ax, data, fmt, image)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label=colorbar_label, shrink=0.9)
    return save_figure(fig, path)


def _center_norm(data: np.ndarray, center: float | None) -> TwoSlopeNorm | None:
    if center is None:
        return None
    finite = data[np.isfinite(data)]
    span = float(np.max(np.abs(finite - center))) if finite.size else 1.0
    span = span or 1.0
    return TwoSlopeNorm(vcenter=center, vmin=center - span, vmax=center + span)


def _annotate(ax: Any, data: np.ndarray, fmt: str, image: Any) -> None:
    size = 7 if max(data.shape) <= 15 else 5
    for (i, j), v in np.ndenumerate(data):
        if not math.isfinite(v):
            continue
        r, g, b, _ = image.cmap(image.norm(v))
        dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
        ax.text(
            j,
            i,
            format(v, fmt),
            ha="center",
            va="center",
            fontsize=size,
            color="white" if dark else "black",
        )


def bar_plot(
    values: Mapping[str, float],
    path: str | os.PathLike[str],
    *,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    errors: Mapping[str, float] | None = None,
    signed_colors: bool = False,
    sort: bool = False,
    fmt: str | None = None,
) -> Path:
    """One bar per label (insertion order, or descending with ``sort``).

    ``signed_colors`` paints gains blue and losses red with a zero line (paper
    004 Figure 3, performance change per language); ``errors`` adds error
    bars; ``fmt`` writes each value above its bar.
    """
    if not values:
        raise DataError("bar_plot: no values to draw")
    labels = sorted(values, key=lambda k: -values[k]) if sort else list(values)
    ys = [float(values[k]) for k in labels]
    fig = Figure(figsize=(_width(len(labels), 0.35), 4.2))
    ax = fig.add_subplot()
    colors = (
        [("#4C72B0" if y >= 0 else "#C44E52") for y in ys] if signed_colors else GROUP_COLORS[0]
    )
    yerr = [float(errors.get(k, 0.0)) for k in labels] if errors else None
    bars = ax.bar(
        np.arange(len(labels)), ys, 0.7, color=colors, yerr=yerr, capsize=2 if yerr else 0
    )
    if signed_colors:
        ax.axhline(0.0, color="0.3", linewidth=0.8)
    if fmt:
        ax.bar_label(bars, labels=[format(y, fmt) for y in ys], fontsize=7)
    ax.set_xticks(np.arange(len(labels)))
    ax.set_xticklabels(labels, rotation=90 if len(labels) > 12 else 0, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)
