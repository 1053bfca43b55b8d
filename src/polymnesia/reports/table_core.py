"""The :class:`Table` type and its formats: Markdown grid, tidy CSV, files on disk.

A cell is a number, a string, ``None`` (shown "N/A") or an :class:`Estimate`:
a value with its uncertainty. An estimate prints as ``value ± half-width``
of its confidence interval (or ``mean±std`` over seeds, Mao et al. 2022's layout,
when ``spread`` is set) and, in the CSV, its column is followed by
``COLUMN_ci_low``, ``COLUMN_ci_high`` and ``COLUMN_n`` columns. An estimate
without an interval (one seed, no item-level data) prints its value alone:
never "±0.00".
"""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polymnesia.errors import ConfigError
from polymnesia.io import atomic_write_csv, atomic_write_text

if TYPE_CHECKING:
    from polymnesia.metrics.uncertainty import Interval

NA = "N/A"
MISSING = "–"  # Mao et al. 2022 marks cells that do not apply with an en dash
CI_SUFFIXES = ("ci_low", "ci_high", "n")


@dataclass(frozen=True)
class Estimate:
    """A table cell: ``value`` with an optional interval ``[low, high]`` from ``n`` items or seeds.

    ``spread`` (a std over seeds) replaces the interval's half-width in the
    displayed text (Mao et al. 2022 prints mean±std); ``mark`` is appended (●).
    """

    value: float
    low: float = math.nan
    high: float = math.nan
    n: int | None = None
    spread: float | None = None
    mark: str = ""
    method: str = ""  # how the interval was obtained (captions list these)

    @classmethod
    def of(cls, interval: Interval, value: float | None = None, mark: str = "") -> Estimate:
        """The cell of an :class:`~polymnesia.metrics.uncertainty.Interval` (``value`` overrides its
        estimate).
        """
        v = interval.estimate if value is None else value
        return cls(v, interval.low, interval.high, interval.n, None, mark, interval.method)

    @property
    def has_ci(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2 if self.has_ci else math.nan

    def text(self, floatfmt: str = ".3f") -> str:
        if math.isnan(self.value):
            return NA
        out = number_text(self.value, floatfmt)
        if self.spread is not None and math.isfinite(self.spread):
            out += f"±{number_text(self.spread, floatfmt)}"
        elif self.has_ci:
            out += f" ± {number_text(self.half_width, floatfmt)}"
        return out + self.mark


@dataclass
class Table:
    """A rectangular table plus optional block-header rows.

    In a table of two or more columns, a row with a single cell is a *block
    header* (e.g. "Number of parameters = 400M"); it holds the raw block value
    ("400M") and ``block_format`` makes the displayed label ("Number of
    parameters = {}"), after ``block_labels`` maps the raw value to its text
    ("base" -> "0.62M (base)"). Markdown and HTML show the label across the row as in
    Aggarwal et al. 2024; the CSV instead repeats the raw value in a leading
    ``block_column`` column so that the file stays tidy (without a
    ``block_column`` the label is kept as a padded row). ``bold`` lists
    (row, column) cells to emphasise.
    """

    name: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    caption: str = ""
    block_column: str | None = None
    bold: list[tuple[int, int]] = field(default_factory=list)
    block_format: str = "{}"
    block_labels: dict[str, str] = field(default_factory=dict)
    floatfmt: str | None = None  # overrides the renderer's number format for this table

    def is_block_row(self, row: Sequence[Any]) -> bool:
        """Whether ``row`` is a block header (a single cell in a wider table)."""
        return len(row) == 1 and len(self.columns) > 1

    def block_label(self, row: Sequence[Any]) -> str:
        """The displayed text of a block-header row, e.g. "Number of parameters = 400M"."""
        raw = format_cell(row[0])
        return self.block_format.format(self.block_labels.get(raw, raw))


#: from this size on, a fixed-point number is shown in scientific notation
SCIENTIFIC_FROM = 1e6


def number_text(value: float, floatfmt: str = ".3f") -> str:
    """``value`` in ``floatfmt``; a fixed-point format (".3f") writes a number of a million or
    more in scientific notation with as many decimals ("2.644e+30", not 31 digits that push
    a table off the page: word perplexity of a language the model never saw)."""
    v = float(value)
    fixed = re.fullmatch(r"\.(\d+)f", floatfmt)
    if fixed and math.isfinite(v) and abs(v) >= SCIENTIFIC_FROM:
        return format(v, f".{fixed.group(1)}e")
    return format(v, floatfmt)


def format_cell(value: Any, floatfmt: str = ".3f") -> str:
    """Text of one cell: reals with ``floatfmt``, NaN and ``None`` as "N/A", the rest ``str``."""
    if value is None:
        return NA
    if isinstance(value, Estimate):
        return value.text(floatfmt)
    if isinstance(value, (bool, numbers.Integral)):
        return str(value)
    if isinstance(value, numbers.Real):
        return NA if math.isnan(float(value)) else number_text(float(value), floatfmt)
    return str(value)


def to_markdown(table: Table, floatfmt: str = ".3f") -> str:
    """The table as a GitHub-flavoured Markdown grid (no title or caption), ending in a newline."""
    floatfmt = table.floatfmt or floatfmt
    width = len(table.columns)
    bold = set(table.bold)
    lines = ["| " + " | ".join(_md_escape(c) for c in table.columns) + " |"]
    lines.append("|" + "---|" * width)
    for i, row in enumerate(table.rows):
        if table.is_block_row(row):
            lines.append(
                "| " + " | ".join([_md_escape(table.block_label(row))] + [""] * (width - 1)) + " |"
            )
            continue
        cells = [_md_escape(format_cell(v, floatfmt)) for v in row]
        cells = [f"**{c}**" if (i, j) in bold else c for j, c in enumerate(cells)]
        cells += [""] * (width - len(cells))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_csv_rows(table: Table, floatfmt: str | None = None) -> tuple[list[str], list[list[str]]]:
    """``(header, rows)`` for CSV; block headers become a leading ``block_column`` column.

    Numbers keep full precision unless ``floatfmt`` is given. A column holding
    an :class:`Estimate` is followed by ``_ci_low``, ``_ci_high`` and ``_n``
    columns (empty where a cell has no interval); its own cells hold the value.
    """
    fmt = floatfmt or "r"
    wide = _estimate_columns(table)
    header = [h for j, c in enumerate(table.columns) for h in _csv_header(c, j in wide)]
    if table.block_column:
        header = [table.block_column, *header]
    out: list[list[str]] = []
    block = ""
    for row in table.rows:
        if table.is_block_row(row) and table.block_column:
            block = format_cell(row[0])
            continue
        if table.is_block_row(row):
            out.append([table.block_label(row)] + [""] * (len(header) - 1))
            continue
        cells = [x for j, v in enumerate(row) for x in _csv_cells(v, fmt, j in wide)]
        out.append([block, *cells] if table.block_column else cells)
    return header, out


def _estimate_columns(table: Table) -> set[int]:
    return {
        j
        for row in table.rows
        if not table.is_block_row(row)
        for j, v in enumerate(row)
        if isinstance(v, Estimate)
    }


def _csv_header(column: str, wide: bool) -> list[str]:
    return [column, *(f"{column}_{suffix}" for suffix in CI_SUFFIXES)] if wide else [column]


def _csv_cells(value: Any, fmt: str, wide: bool) -> list[str]:
    if not wide:
        return [_csv_cell(value, fmt)]
    if not isinstance(value, Estimate):
        return [_csv_cell(value, fmt), "", "", ""]
    bounds = [_csv_cell(value.low, fmt), _csv_cell(value.high, fmt)] if value.has_ci else ["", ""]
    n = "" if value.n is None else str(value.n)
    return [_csv_cell(value.value, fmt), *bounds, n]


def _csv_cell(value: Any, fmt: str) -> str:
    if fmt == "r" and isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        return NA if math.isnan(float(value)) else repr(float(value))
    return format_cell(value, fmt)


def table_markdown_block(table: Table, floatfmt: str = ".3f") -> str:
    """Title, grid and caption as one Markdown block (what ``NAME.md`` and reports contain)."""
    parts = [f"**{table.title}**\n"] if table.title else []
    parts.append(to_markdown(table, floatfmt))
    if table.caption:
        parts.append(f"*{table.caption}*\n")
    return "\n".join(parts)


def write_table(
    results_dir: str | os.PathLike[str], table: Table, floatfmt: str = ".3f"
) -> tuple[Path, Path]:
    """Write ``NAME.csv`` and ``NAME.md`` under ``results_dir`` atomically; returns both paths."""
    if not table.name or "/" in table.name or table.name.startswith("."):
        raise ConfigError(f"table name '{table.name}' must be a plain file stem like 'perplexity'")
    root = Path(results_dir)
    csv_path, md_path = root / f"{table.name}.csv", root / f"{table.name}.md"
    header, rows = to_csv_rows(table)
    atomic_write_csv(csv_path, header, rows)
    atomic_write_text(md_path, table_markdown_block(table, floatfmt))
    return csv_path, md_path
