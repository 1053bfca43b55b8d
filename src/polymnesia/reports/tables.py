"""Tables in the papers' layouts, built from long-format :class:`~polymnesia.results.Score` records.

* :func:`group_table`: paper 000 Tables 1-3 and 7-11. Rows are models
  (Baseline, BA, AFA) in blocks per model size ("Number of parameters =
  400M"); columns are per-group means ``mu_<group>`` then ``mu_overall``.
* :func:`language_table`: one row per language, one column per model.
* :func:`seed_table`: paper 003 Tables 1-6, mean ± std over seeds with
  significance marks (the paper's ●) and the best cell in bold.
* :func:`matrix_table`: a labelled matrix (transfer matrices R, paper 004).

``mu_overall`` is the mean over *all* scored languages, not the mean of the
group means. Checked against paper 000 Table 1, 400M Baseline: the group means
25.041, 31.440, 34.663 average to 30.381, but the table prints 31.451, which
is (12 x 25.041 + 14 x 31.440 + 24 x 34.663) / 50 exactly, i.e. the mean over
the 12 pretraining, 14 adapting and 24 other languages listed in Table 6 (the
header of Table 6 says "other (26)" but lists 24 codes; 24 is the count that
reproduces every row). Table 8 (MLQA) agrees: 5 pretraining and 2 other
languages give (5 x 0.099 + 2 x 0.048) / 7 = 0.084 against the printed 0.085.
A group without any scored language shows "N/A", as in Table 8.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polymnesia.errors import ConfigError, DataError
from polymnesia.io import atomic_write_csv, atomic_write_text
from polymnesia.metrics import METRICS
from polymnesia.results import Score, filter_scores, group_scores, mean, ordered, std, unique

NA = "N/A"
MISSING = "–"  # paper 003 marks cells that do not apply with an en dash


@dataclass
class Table:
    """A rectangular table plus optional block-header rows.

    In a table of two or more columns, a row with a single cell is a *block
    header* (e.g. "Number of parameters = 400M"); it holds the raw block value
    ("400M") and ``block_format`` makes the displayed label ("Number of
    parameters = {}"). Markdown and HTML show the label across the row as in
    paper 000; the CSV instead repeats the raw value in a leading
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

    def is_block_row(self, row: Sequence[Any]) -> bool:
        """Whether ``row`` is a block header (a single cell in a wider table)."""
        return len(row) == 1 and len(self.columns) > 1

    def block_label(self, row: Sequence[Any]) -> str:
        """The displayed text of a block-header row, e.g. "Number of parameters = 400M"."""
        return self.block_format.format(format_cell(row[0]))


def format_cell(value: Any, floatfmt: str = ".3f") -> str:
    """Text of one cell: reals with ``floatfmt``, NaN and ``None`` as "N/A", the rest ``str``."""
    if value is None:
        return NA
    if isinstance(value, (bool, numbers.Integral)):
        return str(value)
    if isinstance(value, numbers.Real):
        return NA if math.isnan(float(value)) else format(float(value), floatfmt)
    return str(value)


def to_markdown(table: Table, floatfmt: str = ".3f") -> str:
    """The table as a GitHub-flavoured Markdown grid (no title or caption), ending in a newline."""
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

    Numbers keep full precision unless ``floatfmt`` is given.
    """
    fmt = floatfmt or "r"
    header = list(table.columns)
    if table.block_column:
        header = [table.block_column, *header]
    out: list[list[str]] = []
    block = ""
    for row in table.rows:
        if table.is_block_row(row) and table.block_column:
            block = format_cell(row[0])
            continue
        if table.is_block_row(row):
            out.append([table.block_label(row)] + [""] * (len(table.columns) - 1))
            continue
        cells = [_csv_cell(v, fmt) for v in row]
        out.append([block, *cells] if table.block_column else cells)
    return header, out


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


# --------------------------------------------------------------------- helpers


def human_params(n: int) -> str:
    """400_000_000 -> "400M", 1_600_000_000 -> "1.6B", 125_000 -> "125K"."""
    for div, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= div:
            return f"{n / div:.3g}{suffix}"
    return str(n)


def size_label(s: Score) -> str | None:
    """The size label of a score: ``size`` if set, else ``params`` in human form, else ``None``."""
    if s.size is not None:
        return s.size
    return human_params(s.params) if s.params is not None else None


def _size_blocks(scores: Sequence[Score]) -> list[str | None]:
    """Size labels ordered by parameter count when known, else by first appearance."""
    params: dict[str | None, float] = {}
    for s in scores:
        params.setdefault(size_label(s), float(s.params) if s.params is not None else math.inf)
    labels = list(params)
    return sorted(labels, key=lambda lab: (params[lab], labels.index(lab)))


def _single(scores: Sequence[Score], name: str, what: str) -> None:
    values = unique(scores, name)
    if len(values) > 1:
        shown = ", ".join(str(v) for v in values)
        raise DataError(
            f"{what} got scores of several {name}s ({shown}); select one with filter_scores({name}=...)"
        )


def _metric_scores(scores: Sequence[Score], metric: str, what: str) -> list[Score]:
    chosen = filter_scores(scores, metric=metric)
    if not chosen:
        metrics = ", ".join(str(m) for m in unique(scores, "metric")) or "none"
        raise DataError(f"{what}: no scores for metric '{metric}'; present: {metrics}")
    _single(chosen, "task", what)
    return chosen


def _direction(metric: str, higher_is_better: bool | None) -> bool | None:
    if higher_is_better is not None:
        return higher_is_better

    return METRICS.get(metric).higher_is_better if metric in METRICS else None


def _lang_means(scores: Sequence[Score]) -> dict[str, float]:
    """Mean value per language (repeated records, e.g. seeds, are averaged first)."""
    return {k[0]: mean([s.value for s in g]) for k, g in group_scores(scores, "lang").items()}


def group_means(
    lang_values: Mapping[str, float], groups: Mapping[str, Sequence[str]]
) -> dict[str, float]:
    """``{group: mean over its scored languages}`` plus ``"overall"`` over all scored languages.

    A group with no scored language maps to NaN (shown "N/A"). Paper 000, see
    the module docstring for why overall is not the mean of group means.
    """
    out = {
        g: mean([lang_values[lang] for lang in langs if lang in lang_values])
        for g, langs in groups.items()
    }
    out["overall"] = mean(list(lang_values.values()))
    return out


# -------------------------------------------------------------------- builders


def group_table(
    scores: Sequence[Score],
    metric: str,
    groups: Mapping[str, Sequence[str]],
    *,
    model_order: Sequence[str] | None = None,
    block_by: str | None = "size",
    name: str | None = None,
    title: str = "",
    caption: str = "",
    higher_is_better: bool | None = None,
) -> Table:
    """Paper 000 layout: models in size blocks, ``mu_<group>`` columns then ``mu_overall``.

    Scores are averaged per language first (over seeds or repeated records),
    then over the languages of each group; ``mu_overall`` averages every scored
    language of that model, grouped or not. ``block_by="size"`` makes one block
    per model size (labels from ``size`` or ``params``), ``None`` no blocks.
    ``higher_is_better`` (default: from the metric registry) adds "(Higher is
    better)" or "(Lower is better)" to the caption, as the paper does.
    """
    if block_by not in ("size", None):
        raise ConfigError(f"block_by '{block_by}' is not supported; accepted: 'size', None")
    chosen = _metric_scores(scores, metric, "group_table")
    columns = ["Model", *(f"mu_{g}" for g in groups), "mu_overall"]
    blocks = _size_blocks(chosen) if block_by else [None]
    use_blocks = block_by is not None and blocks != [None]
    rows: list[list[Any]] = []
    for block in blocks:
        in_block = [s for s in chosen if size_label(s) == block] if use_blocks else chosen
        if use_blocks:
            rows.append([block])
        for model in ordered(unique(in_block, "model"), model_order):
            stats = group_means(_lang_means(filter_scores(in_block, model=model)), groups)
            rows.append([model, *(stats[g] for g in groups), stats["overall"]])
    return Table(
        name=name or metric,
        title=title or f"Results on {metric}",
        columns=columns,
        rows=rows,
        caption=_with_direction(caption, _direction(metric, higher_is_better)),
        block_column="size" if use_blocks else None,
        block_format="Number of parameters = {}",
    )


def _with_direction(caption: str, higher: bool | None) -> str:
    if higher is None:
        return caption
    note = "(Higher is better)" if higher else "(Lower is better)"
    return f"{caption} {note}".strip()


def language_table(
    scores: Sequence[Score],
    metric: str,
    groups: Mapping[str, Sequence[str]],
    *,
    model_order: Sequence[str] | None = None,
    describe: Callable[[str], Mapping[str, Any]] | None = None,
    name: str | None = None,
    title: str = "",
    caption: str = "",
) -> Table:
    """One row per language (code, name, script, group), one column per model.

    Languages come in group order, then any scored language in no group (group
    "-"). ``describe(code)`` may supply ``name`` and ``script``. With several
    model sizes the columns are labelled "MODEL (SIZE)". Missing cells are "N/A".
    """
    chosen = _metric_scores(scores, metric, "language_table")
    sizes = _size_blocks(chosen)
    keys = [
        (m, z) for z in sizes for m in ordered(unique(_in_size(chosen, z), "model"), model_order)
    ]
    labels = [m if len(sizes) == 1 else f"{m} ({z})" for m, z in keys]
    cells = {(m, z): _lang_means(filter_scores(_in_size(chosen, z), model=m)) for m, z in keys}
    rows = [
        [*_describe_row(lang, group, describe), *(cells[k].get(lang, math.nan) for k in keys)]
        for lang, group in _language_order(chosen, groups)
    ]
    return Table(
        name=name or f"{metric}_by_language",
        title=title or f"{metric} by language",
        columns=["Code", "Language", "Script", "Group", *labels],
        rows=rows,
        caption=caption,
    )


def _in_size(scores: Sequence[Score], size: str | None) -> list[Score]:
    return [s for s in scores if size_label(s) == size]


def _language_order(
    scores: Sequence[Score], groups: Mapping[str, Sequence[str]]
) -> list[tuple[str, str]]:
    scored = set(unique(scores, "lang"))
    out = [(lang, g) for g, langs in groups.items() for lang in langs if lang in scored]
    seen = {lang for lang, _ in out}
    return out + [(lang, "-") for lang in unique(scores, "lang") if lang not in seen]


def _describe_row(
    lang: str, group: str, describe: Callable[[str], Mapping[str, Any]] | None
) -> list[str]:
    info = describe(lang) if describe else {}
    return [lang, str(info.get("name", "")), str(info.get("script", "")), group]


def seed_table(
    scores: Sequence[Score],
    metric: str,
    *,
    row_key: str = "model",
    col_key: str = "lang",
    row_order: Sequence[Any] | None = None,
    col_order: Sequence[Any] | None = None,
    marks: Mapping[str, str] | None = None,
    best: str | None = None,
    best_along: str = "row",
    floatfmt: str = ".2f",
    ddof: int = 1,
    name: str | None = None,
    title: str = "",
    caption: str = "",
) -> Table:
    """Paper 003 layout: cells "mean±std" over seeds, with optional marks and the best in bold.

    For each (row, col) cell, scores are averaged per seed first (e.g. over the
    target languages when ``col_key="setting"``), then mean and std (``ddof=1``,
    the sample std; the paper does not say which) are taken over seeds.
    ``marks`` maps a label to a suffix such as "●" (paper 003: "statistically
    inferior to LF-MLF"); a cell looks up "ROW|COL", then ROW, then COL.
    ``best="max"`` or ``"min"`` bolds the best mean in each row
    (``best_along="row"``, paper 003 Tables 4-6 with languages as rows) or in
    each column (``best_along="col"``, methods as rows). Empty cells show "–",
    as in the paper.
    """
    if best not in (None, "max", "min"):
        raise ConfigError(f"best '{best}' is not supported; accepted: 'max', 'min', None")
    if best_along not in ("row", "col"):
        raise ConfigError(f"best_along '{best_along}' is not supported; accepted: 'row', 'col'")
    chosen = _metric_scores(scores, metric, "seed_table")
    row_labels = ordered(unique(chosen, row_key), row_order)
    col_labels = ordered(unique(chosen, col_key), col_order)
    cells = group_scores(chosen, row_key, col_key)
    table = Table(
        name=name or f"{metric}_seeds",
        title=title or f"{metric} (mean±std over seeds)",
        columns=[row_key.capitalize(), *(str(c) for c in col_labels)],
        rows=[],
        caption=caption,
    )
    grid = [[_seed_stats(cells.get((r, c), []), ddof) for c in col_labels] for r in row_labels]
    for r, stats in zip(row_labels, grid, strict=True):
        text = [
            _seed_cell(st, floatfmt, _mark(marks, r, c))
            for st, c in zip(stats, col_labels, strict=True)
        ]
        table.rows.append([r, *text])
    if best_along == "row":
        table.bold = [(i, j + 1) for i, stats in enumerate(grid) for j in _best_cols(stats, best)]
    else:
        columns = [list(col) for col in zip(*grid, strict=True)] if grid else []
        table.bold = sorted(
            (i, j + 1) for j, col in enumerate(columns) for i in _best_cols(col, best)
        )
    return table


def _seed_stats(cell: Sequence[Score], ddof: int) -> tuple[float, float] | None:
    if not cell:
        return None
    per_seed = [mean([s.value for s in g]) for g in group_scores(cell, "seed").values()]
    return mean(per_seed), std(per_seed, ddof)


def _seed_cell(stats: tuple[float, float] | None, fmt: str, mark: str) -> str:
    if stats is None:
        return MISSING
    return f"{format(stats[0], fmt)}±{format(stats[1], fmt)}{mark}"


def _mark(marks: Mapping[str, str] | None, row: Any, col: Any) -> str:
    if not marks:
        return ""
    for key in (f"{row}|{col}", str(row), str(col)):
        if key in marks:
            return marks[key]
    return ""


def _best_cols(stats: Sequence[tuple[float, float] | None], best: str | None) -> list[int]:
    means = [st[0] for st in stats if st is not None]
    if best is None or not means:
        return []
    target = max(means) if best == "max" else min(means)
    return [j for j, st in enumerate(stats) if st is not None and st[0] == target]


def matrix_table(
    R: Any,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    name: str,
    title: str,
    *,
    corner: str = "",
    caption: str = "",
) -> Table:
    """A labelled matrix, e.g. paper 004's R[i, j] (score on language j after training step i)."""
    matrix = [[float(v) for v in row] for row in R]
    if len(matrix) != len(row_labels) or any(len(r) != len(col_labels) for r in matrix):
        shape = f"{len(matrix)}x{len(matrix[0]) if matrix else 0}"
        raise ConfigError(
            f"matrix_table '{name}': matrix is {shape} but labels are {len(row_labels)}x{len(col_labels)}"
        )
    rows: list[list[Any]] = [[lab, *r] for lab, r in zip(row_labels, matrix, strict=True)]
    return Table(name=name, title=title, columns=[corner, *col_labels], rows=rows, caption=caption)
