"""Heatmaps for reports: :func:`heatmap` (R matrices, Khelli et al. 2025 MBT/MFT language-by-hop
maps, cross-branch transfer), centred on zero where a matrix holds changes, and
:func:`shared_limits`, so that figures compared side by side share one colour scale."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.colors import Normalize, TwoSlopeNorm
from matplotlib.figure import Figure

from polymnesia.errors import ConfigError
from polymnesia.reports.plots import figure_width, save_figure
from polymnesia.reports.style import number_text


def heatmap(
    matrix: Any,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    path: str | os.PathLike[str],
    *,
    title: str = "",
    cmap: str | None = None,
    fmt: str | None = None,
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
    Khelli et al. 2025 Figures 5-6); otherwise "viridis". Cells are annotated with
    ``fmt`` when ``annotate`` is true, by default when there are at most 600; without
    ``fmt``, with as many decimals as the colour scale needs (:func:`annotation_format`:
    0.035 and 0.039 on a scale from 0.030 read as two numbers, not "0.04" twice).
    """
    data = np.asarray(matrix, dtype=float)
    if data.ndim != 2 or data.shape != (len(row_labels), len(col_labels)):
        raise ConfigError(
            f"heatmap: matrix shape {data.shape} does not match {len(row_labels)} row and "
            f"{len(col_labels)} column labels"
        )
    n_rows, n_cols = data.shape
    fig = Figure(
        figsize=(figure_width(n_cols, 0.45, 5.0, 24.0), min(20.0, max(3.5, 1.5 + 0.38 * n_rows)))
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
        scale = image.norm  # its bounds, set by the limits or from the data
        lo, hi = float(scale.vmin), float(scale.vmax)  # type: ignore[arg-type]
        _annotate(ax, data, fmt or annotation_format(lo, hi), image)
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


def annotation_format(vmin: float, vmax: float) -> str:
    """The format of a heatmap's cell numbers on a colour scale from ``vmin`` to ``vmax``:
    enough decimals that half the scale's span shows a non-zero digit (at least 2, at most
    6), so cells of different colours do not read as the same number."""
    half = abs(float(vmax) - float(vmin)) / 2
    if not math.isfinite(half) or half <= 0:
        return ".2f"
    return f".{min(6, max(2, -math.floor(math.log10(half))))}f"


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
            number_text(v, fmt),
            ha="center",
            va="center",
            fontsize=size,
            color="white" if dark else "black",
        )
