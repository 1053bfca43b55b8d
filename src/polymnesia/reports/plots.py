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
from matplotlib.colors import Normalize, TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from polymnesia.errors import ConfigError, DataError
from polymnesia.io import atomic_write_bytes
from polymnesia.reports.cells import language_cell
from polymnesia.reports.style import (
    LINESTYLES,
    MARKERS,
    PALETTE,
    SeriesStyle,
    legend_columns,
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


def _style(colours: Mapping[str, str] | None, label: str, i: int) -> SeriesStyle:
    """Series ``label``'s style: its colour from ``colours`` (a report's fixed colours) with
    the line style and marker of its place there, else the style of position ``i``."""
    if colours is not None and label in colours:
        turn = list(colours).index(label) // len(PALETTE)
        return SeriesStyle(
            colours[label], LINESTYLES[turn % len(LINESTYLES)], MARKERS[turn % len(MARKERS)]
        )
    return series_style(i)


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
    errors: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    integer_x: bool = False,
    linestyles: Mapping[str, str] | None = None,
) -> Path:
    """One line with markers per series name, e.g. average score against parameter count per arm.

    ``xticklabels`` (one per distinct x of the first series) replaces the x
    tick labels, e.g. "400M", "1.6B" or the language trained at each step. ``colours``
    (series name -> colour, :func:`series_colours`) fixes a series' colour; others take the
    palette by position (:func:`~polymnesia.reports.style.series_style`: past twelve series,
    another line style and marker; ``linestyles`` fixes a series' line style, e.g. to tell
    apart two curves of one model in its colour). ``errors`` (series name -> lower and upper
    bounds, one per point) draws each series' interval as error bars; ``integer_x`` keeps x
    ticks on whole numbers (steps). The legend sits outside the axes.
    """
    if not series:
        raise DataError("line_plot: no series to draw")
    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.add_subplot()
    _draw_lines(ax, series, colours, errors, linestyles=linestyles)
    if integer_x:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if logx:
        ax.set_xscale("log")
    if xticklabels is not None:
        first_xs = list(next(iter(series.values()))[0])
        ax.set_xticks(first_xs)
        ax.set_xticklabels(list(xticklabels), rotation=45 if len(first_xs) > 8 else 0, fontsize=8)
        ax.minorticks_off()
    return _finish_series(fig, ax, path, xlabel, ylabel, title)


def _draw_lines(
    ax: Any,
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    colours: Mapping[str, str] | None,
    errors: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
    linestyles: Mapping[str, str] | None = None,
) -> None:
    """Each series as a line with markers in its style, and its interval as error bars where
    given, each series' bars set a little apart (overlapping shaded bands of several series
    turn into one grey area)."""
    all_x = [float(x) for xs, _ in series.values() for x in xs]
    span = (max(all_x) - min(all_x)) if all_x else 0.0
    dodge = 0.012 * span if span > 0 else 0.0
    n = len(series)
    for i, (label, (xs, ys)) in enumerate(series.items()):
        if len(xs) == 0:
            raise DataError(f"line_plot: series '{label}' has no points")
        if len(xs) != len(ys):
            raise DataError(
                f"line_plot: series '{label}' has {len(xs)} x values but {len(ys)} y values"
            )
        st = _style(colours, label, i)
        ax.plot(
            list(xs),
            list(ys),
            marker=st.marker,
            markersize=4,
            linestyle=(linestyles or {}).get(label, st.linestyle),
            label=label,
            color=st.colour,
        )
        if errors is not None and label in errors:
            lo, hi = errors[label]
            if len(lo) != len(xs) or len(hi) != len(xs):
                raise DataError(f"line_plot: series '{label}' needs one interval per point")
            shift = (i - (n - 1) / 2) * dodge
            ax.errorbar(
                [float(x) + shift for x in xs],
                list(ys),
                yerr=[
                    [max(0.0, y - a) for y, a in zip(ys, lo, strict=True)],
                    [max(0.0, b - y) for y, b in zip(ys, hi, strict=True)],
                ],
                fmt="none",
                ecolor=st.colour,
                elinewidth=0.9,
                capsize=2.5,
            )


def panel_lines(
    panels: Mapping[str, Mapping[str, tuple[Sequence[float], Sequence[float]]]],
    path: str | os.PathLike[str],
    *,
    dashed: Mapping[str, Mapping[str, tuple[Sequence[float], Sequence[float]]]] | None = None,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    integer_x: bool = True,
) -> Path:
    """One panel per key of ``panels`` (e.g. a stage family), each a :func:`line_plot` of its
    series with its own legend outside it; ``dashed[panel][series]`` adds a dashed line in
    the series' colour (e.g. its validation curve, labelled as such)."""
    if not panels:
        raise DataError("panel_lines: no panel to draw")
    n = len(panels)
    cols = 1 if n == 1 else 2
    rows = -(-n // cols)
    fig = Figure(figsize=(6.4 * cols + 1.5 * cols, 3.6 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    for k, (name, series) in enumerate(panels.items()):
        ax = axes[k // cols][k % cols]
        if not series:
            raise DataError(f"panel_lines: panel '{name}' has no series")
        colours = {label: series_style(i).colour for i, label in enumerate(series)}
        _draw_lines(ax, series, colours)
        extra = (dashed or {}).get(name, {})
        for label, (xs, ys) in extra.items():
            ax.plot(
                list(xs),
                list(ys),
                linestyle="--",
                marker="x",
                markersize=4,
                color=colours.get(label, "0.3"),
                label=f"{label} (validation)",
            )
        if integer_x:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        outside_legend(ax, fontsize=7)
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


def scatter_plot(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    path: str | os.PathLike[str],
    *,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    zero_lines: bool = True,
    colours: Mapping[str, str] | None = None,
    point_labels: Mapping[str, Sequence[str]] | None = None,
    intervals: Mapping[str, tuple[tuple[float, float], tuple[float, float]]] | None = None,
    connect: bool = False,
) -> Path:
    """Points per series name (e.g. each model's layers in a t-SNE, or each arm's EA/MA change);
    ``colours`` as in :func:`line_plot`. ``point_labels`` (series -> one text per point)
    writes beside each point (a t-SNE point's layer, an arm's name); ``intervals`` (series of
    one point -> its x and y bounds) draws error bars; ``connect`` joins a series' points in
    order with a thin line (layer 0 to the last)."""
    if not series:
        raise DataError("scatter_plot: no series to draw")
    fig = Figure(figsize=(6.4, 4.8))
    ax = fig.add_subplot()
    for i, (label, (xs, ys)) in enumerate(series.items()):
        if len(xs) != len(ys) or len(xs) == 0:
            raise DataError(f"scatter_plot: series '{label}' needs as many x as y values (>= 1)")
        st = _style(colours, label, i)
        ax.scatter(list(xs), list(ys), label=label, color=st.colour, marker=st.marker, s=36)
        if connect and len(xs) > 1:
            ax.plot(list(xs), list(ys), color=st.colour, lw=0.7, alpha=0.6)
        if intervals is not None and label in intervals:
            (x_lo, x_hi), (y_lo, y_hi) = intervals[label]
            x, y = float(xs[0]), float(ys[0])
            ax.errorbar(
                [x],
                [y],
                xerr=[[max(0.0, x - x_lo)], [max(0.0, x_hi - x)]],
                yerr=[[max(0.0, y - y_lo)], [max(0.0, y_hi - y)]],
                color=st.colour,
                lw=0.9,
                capsize=2,
                fmt="none",
            )
        texts = (point_labels or {}).get(label)
        if texts is not None:
            if len(texts) != len(xs):
                raise DataError(f"scatter_plot: series '{label}' needs one label per point")
            for x, y, text in zip(xs, ys, texts, strict=True):
                ax.annotate(
                    text,
                    (x, y),
                    xytext=(3, 3),
                    textcoords="offset points",
                    fontsize=6,
                    color=st.colour,
                )
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
    outside_legend(ax)
    return save_figure(fig, path)


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
    limits: tuple[float, float] | None = None,
) -> Path:
    """A labelled heatmap; NaN cells stay blank. ``limits`` fixes the colour scale (figures
    that are compared, such as R of each arm, share one: :func:`shared_limits`).

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
    norm: Normalize | None = _center_norm(data, center, limits)
    diverging = center is not None
    if norm is None and limits is not None:
        norm = Normalize(vmin=limits[0], vmax=limits[1])
    image = ax.imshow(
        masked, aspect="auto", cmap=cmap or ("coolwarm_r" if diverging else "viridis"), norm=norm
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


def _center_norm(
    data: np.ndarray, center: float | None, limits: tuple[float, float] | None = None
) -> TwoSlopeNorm | None:
    if center is None:
        return None
    if limits is not None:
        span = max(abs(limits[0] - center), abs(limits[1] - center)) or 1.0
    else:
        finite = data[np.isfinite(data)]
        span = float(np.max(np.abs(finite - center))) if finite.size else 1.0
        span = span or 1.0
    return TwoSlopeNorm(vcenter=center, vmin=center - span, vmax=center + span)


def shared_limits(matrices: Iterable[Any]) -> tuple[float, float] | None:
    """The smallest and largest finite value over ``matrices``: one colour scale for
    heatmaps that are read side by side (None when none has a finite value)."""
    values = [np.asarray(m, dtype=float) for m in matrices]
    finite: np.ndarray = (
        np.concatenate([v[np.isfinite(v)].ravel() for v in values]) if values else np.empty(0)
    )
    if finite.size == 0:
        return None
    lo, hi = float(np.min(finite)), float(np.max(finite))
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


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
