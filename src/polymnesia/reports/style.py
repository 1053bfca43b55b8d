"""The look of every figure: one palette, and how series beyond it stay apart.

A report's figures draw up to a few dozen series (lf_mlf's training-loss plot has one per
arm, language and seed). Twelve colours are told apart on screen and in print (Paul Tol's
"muted" and "bright" schemes, less their near-duplicates: no second green or rose, a dark
grey instead); series 13 and up repeat the
colours with another line style and marker, so no two series of one figure look alike.
Legends sit outside the axes, so they never hide data.
"""

from __future__ import annotations

from dataclasses import dataclass

#: twelve distinguishable colours, in the order series take them
PALETTE = (
    "#4477AA",
    "#EE6677",
    "#228833",
    "#CCBB44",
    "#66CCEE",
    "#AA3377",
    "#332288",
    "#DDAA33",
    "#44AA99",
    "#555555",
    "#882255",
    "#999933",
)
#: the line style and marker of each pass through the palette
LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


@dataclass(frozen=True)
class SeriesStyle:
    """How series ``i`` of a figure is drawn."""

    colour: str
    linestyle: str
    marker: str


def series_style(i: int) -> SeriesStyle:
    """Series ``i``'s colour (``PALETTE[i % 12]``), and its line style and marker, which
    change with each pass through the palette (series 0-11 solid with circles, 12-23 dashed
    with squares, ...)."""
    if i < 0:
        raise ValueError(f"a series index is >= 0, got {i}")
    turn = i // len(PALETTE)
    return SeriesStyle(
        PALETTE[i % len(PALETTE)], LINESTYLES[turn % len(LINESTYLES)], MARKERS[turn % len(MARKERS)]
    )


def legend_columns(n_series: int, per_column: int = 16) -> int:
    """Columns of an outside legend holding ``n_series`` entries (at most ``per_column`` per
    column)."""
    return max(1, -(-n_series // per_column))


def number_text(value: float, fmt: str) -> str:
    """``value`` written in ``fmt`` for a figure, without the sign of a negative number that
    rounds to zero ("0.000", not "-0.000")."""
    text = format(value, fmt)
    if text.startswith("-") and float(text) == 0.0:
        return text[1:]
    return text
