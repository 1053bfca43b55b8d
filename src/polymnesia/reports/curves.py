"""Curves and points for reports (the look is :mod:`polymnesia.reports.style`'s, the files
:func:`polymnesia.reports.plots.save_figure`'s): :func:`line_plot` (a series per arm against
a numeric axis, with intervals where the scores have them), :func:`panel_lines` (one panel
per group, such as a training-loss figure per stage family with its validation curve) and
:func:`scatter_plot` (labelled points with intervals on both axes, such as the EA/MA
trade-off)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from polymnesia.errors import DataError
from polymnesia.reports.plots import labelled_style, outside_legend, save_figure
from polymnesia.reports.style import series_style


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
        st = labelled_style(colours, label, i)
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
    the series' colour (e.g. its validation curve, labelled as such). The panels stand one
    above the other, each as wide as a :func:`line_plot`, so that at a report's width their
    text is as large as a single plot's (side by side, a report shrank it to half)."""
    if not panels:
        raise DataError("panel_lines: no panel to draw")
    n = len(panels)
    cols = 1
    rows = n
    fig = Figure(figsize=(6.4, 3.4 * rows))
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


#: points between the labels of points drawn at one place (6-point text)
LABEL_STEP = 7


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
    writes beside each point (a t-SNE point's layer, an arm's name; the labels of points at
    one place stacked, so each stays readable); ``intervals`` (series of
    one point -> its x and y bounds) draws error bars; ``connect`` joins a series' points in
    order with a thin line (layer 0 to the last)."""
    if not series:
        raise DataError("scatter_plot: no series to draw")
    fig = Figure(figsize=(6.4, 4.8))
    ax = fig.add_subplot()
    texts_at: dict[tuple[float, float], int] = {}  # labels already written at a point
    for i, (label, (xs, ys)) in enumerate(series.items()):
        if len(xs) != len(ys) or len(xs) == 0:
            raise DataError(f"scatter_plot: series '{label}' needs as many x as y values (>= 1)")
        st = labelled_style(colours, label, i)
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
                # arms at one point (the same scores) get their names one above the other
                at = (round(float(x), 9), round(float(y), 9))
                above = texts_at[at] = texts_at.get(at, -1) + 1
                ax.annotate(
                    text,
                    (x, y),
                    xytext=(3, 3 + LABEL_STEP * above),
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
