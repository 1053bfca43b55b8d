"""Critical-difference (CD) diagram of average ranks (Demsar 2006; Mao et al. 2022, Figure 2).

The axis shows the average rank of each method over settings (rank 1, the
best, on the left). With a ``reference`` (control method) the diagram takes the
Bonferroni-Dunn form 003 uses: a thick bar spans ``control rank +/- CD``, and
methods outside it differ significantly from the control. Without one it
takes the Nemenyi form: thick lines join groups of methods whose ranks differ
by less than CD (not significantly different), and a CD scale is drawn above
the axis. Compute ranks and CD with :mod:`polymnesia.metrics.stats`.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from polymnesia.errors import PolymnesiaError  # noqa: E402
from polymnesia.io import atomic_write_bytes  # noqa: E402

AXIS_Y = 0.0
ROW_STEP = 0.35  # vertical distance between label rows


def _check(avg_ranks: Mapping[str, float], cd: float, reference: str | None) -> None:
    if len(avg_ranks) < 2:
        raise PolymnesiaError(f"a CD diagram needs >= 2 methods, got {len(avg_ranks)}")
    if not cd > 0:
        raise PolymnesiaError(f"critical difference must be positive, got {cd}")
    if reference is not None and reference not in avg_ranks:
        raise PolymnesiaError(f"reference '{reference}' has no rank; accepted: {sorted(avg_ranks)}")


def _axis(ax: Axes, k: int) -> None:
    ax.plot([1, k], [AXIS_Y, AXIS_Y], color="black", lw=1)
    for r in range(1, k + 1):
        ax.plot([r, r], [AXIS_Y, AXIS_Y + 0.08], color="black", lw=1)
        ax.text(r, AXIS_Y + 0.12, str(r), ha="center", va="bottom", fontsize=9)


def _labels(ax: Axes, ranked: list[tuple[str, float]], k: int, reference: str | None) -> None:
    """Elbow lines from each rank down to its label; best half left, rest right."""
    half = (len(ranked) + 1) // 2
    for i, (name, rank) in enumerate(ranked):
        left = i < half
        row = i if left else len(ranked) - 1 - i
        y = AXIS_Y - ROW_STEP * (row + 1.5)
        x_end = 0.6 if left else k + 0.4
        ax.plot([rank, rank, x_end], [AXIS_Y, y, y], color="0.3", lw=0.8)
        weight = "bold" if name == reference else "normal"
        text = f"{name} ({rank:.2f})" if left else f"({rank:.2f}) {name}"
        ax.text(
            x_end,
            y,
            text,
            ha="right" if left else "left",
            va="center",
            fontsize=9,
            fontweight=weight,
        )


def _control_bar(ax: Axes, rank: float, cd: float, k: int) -> None:
    lo, hi = max(1.0, rank - cd), min(float(k), rank + cd)
    ax.plot([lo, hi], [AXIS_Y - 0.15, AXIS_Y - 0.15], color="tab:red", lw=4, solid_capstyle="butt")
    ax.text(hi, AXIS_Y - 0.15, f"  CD={cd:.2f}", va="center", fontsize=8, color="tab:red")


def cliques(ranked: list[tuple[str, float]], cd: float) -> list[tuple[int, int]]:
    """Maximal runs ``(first, last)`` of rank-sorted methods spanning less than ``cd``."""
    out: list[tuple[int, int]] = []
    for i in range(len(ranked)):
        j = i
        while j + 1 < len(ranked) and ranked[j + 1][1] - ranked[i][1] < cd:
            j += 1
        if j > i and not (out and out[-1][1] >= j):
            out.append((i, j))
    return out


def _nemenyi_marks(ax: Axes, ranked: list[tuple[str, float]], cd: float) -> None:
    ax.plot([1, 1 + cd], [AXIS_Y + 0.55, AXIS_Y + 0.55], color="black", lw=2)
    ax.text(1 + cd / 2, AXIS_Y + 0.62, f"CD={cd:.2f}", ha="center", va="bottom", fontsize=8)
    for n, (i, j) in enumerate(cliques(ranked, cd)):
        y = AXIS_Y - 0.12 - 0.1 * n
        ax.plot([ranked[i][1] - 0.03, ranked[j][1] + 0.03], [y, y], color="black", lw=3)


def plot_cd_diagram(
    avg_ranks: Mapping[str, float],
    cd: float,
    path: str | os.PathLike[str],
    reference: str | None = None,
    title: str = "Critical difference diagram",
) -> None:
    """Draw the CD diagram of ``avg_ranks`` (method -> average rank) and save it atomically to
    ``path``.

    The image format follows the suffix of ``path`` (png, pdf, svg). The file
    is written to a temporary file in the same folder and renamed into place.
    """
    _check(avg_ranks, cd, reference)
    ranked = sorted(avg_ranks.items(), key=lambda kv: kv[1])
    k = max(len(ranked), math.ceil(ranked[-1][1]))  # axis length; ranks lie in [1, n_methods]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * k + 3), 1.2 + ROW_STEP * ((k + 1) // 2 + 2)))
    try:
        _axis(ax, k)
        _labels(ax, ranked, k, reference)
        if reference is not None:
            _control_bar(ax, float(avg_ranks[reference]), cd, k)
        else:
            _nemenyi_marks(ax, ranked, cd)
        ax.set_xlim(-1.5, k + 2.5)
        ax.set_ylim(AXIS_Y - ROW_STEP * ((k + 1) // 2 + 2), AXIS_Y + 0.9)
        ax.set_title(title, fontsize=10)
        ax.axis("off")
        buf = io.BytesIO()
        suffix = os.fspath(path).rsplit(".", 1)[-1].lower() if "." in os.fspath(path) else "png"
        fig.savefig(buf, format=suffix, bbox_inches="tight", dpi=150)
    finally:
        plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
