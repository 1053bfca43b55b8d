"""Tables in the papers' layouts, built from long-format :class:`~polymnesia.results.Score` records.

* :func:`group_table`: Aggarwal et al. 2024 Tables 1-3 and 7-11. Rows are models
  (Baseline, BA, AFA) in blocks per model size ("Number of parameters =
  400M"); columns are per-group means ``mu_<group>`` then ``mu_overall``.
* :func:`language_table`: one row per language, one column per model.
* :func:`seed_table`: Mao et al. 2022 Tables 1-6, mean ± std over seeds with
  significance marks (the paper's ●) and the best cell in bold; with one
  seed, the value (± its bootstrap interval over items) and no marks.

Cells carry their uncertainty as :class:`Estimate` (see
:mod:`polymnesia.reports.cells` for which interval each cell gets) and the
caption says what "±" means; the CSV gets ``_ci_low``/``_ci_high``/``_n`` columns.
* :func:`matrix_table`: a labelled matrix (transfer matrices R, Khelli et al. 2025).

``mu_overall`` is the mean over *all* scored languages, not the mean of the
group means. Checked against Aggarwal et al. 2024 Table 1, 400M Baseline: the group means
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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from polymnesia.errors import ConfigError
from polymnesia.metrics.base import metric_direction
from polymnesia.metrics.uncertainty import Interval
from polymnesia.reports.cells import language_cell, mean_cell, metric_scores, uncertainty_note
from polymnesia.reports.seed_table import seed_table
from polymnesia.reports.table_core import (
    MISSING,
    NA,
    Estimate,
    Table,
    format_cell,
    table_markdown_block,
    to_csv_rows,
    to_markdown,
    write_table,
)
from polymnesia.results import Score, filter_scores, group_scores, mean, ordered, unique

__all__ = [
    "MISSING",
    "NA",
    "Estimate",
    "Table",
    "format_cell",
    "group_means",
    "group_table",
    "human_params",
    "language_table",
    "matrix_table",
    "seed_table",
    "size_label",
    "table_markdown_block",
    "to_csv_rows",
    "to_markdown",
    "write_table",
]

#: (model, size, group) -> interval of the group mean, as polymnesia.items.group_intervals returns
GroupIntervals = Mapping[tuple[str, str | None, str], Interval]

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


def _direction(metric: str, higher_is_better: bool | None) -> bool | None:
    return higher_is_better if higher_is_better is not None else metric_direction(metric)


def group_means(
    lang_values: Mapping[str, float], groups: Mapping[str, Sequence[str]]
) -> dict[str, float]:
    """``{group: mean over its scored languages}`` plus ``"overall"`` over all scored languages.

    A group with no scored language maps to NaN (shown "N/A"). Aggarwal et al. 2024, see
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
    intervals: GroupIntervals | None = None,
    level: float = 0.95,
) -> Table:
    """Aggarwal et al. 2024 layout: models in size blocks, ``mu_<group>`` columns then
    ``mu_overall``.

    Scores are averaged per language first (over seeds or repeated records),
    then over the languages of each group; ``mu_overall`` averages every scored
    language of that model, grouped or not. ``block_by="size"`` makes one block
    per model size, labelled by its parameter count ("0.62M (base)");
    ``None`` no blocks. ``higher_is_better`` (default: from the metric
    registry) adds "(Higher is better)" or "(Lower is better)" to the caption,
    as the paper does. Each mean carries an interval
    (:func:`polymnesia.reports.cells.mean_cell`): over seeds when there are
    several, else ``intervals[(model, size, group)]`` (e.g.
    :func:`polymnesia.items.group_intervals`), else one combined from the
    per-language intervals of the records.
    """
    if block_by not in ("size", None):
        raise ConfigError(f"block_by '{block_by}' is not supported; accepted: 'size', None")
    chosen = metric_scores(scores, metric, "group_table")
    columns = ["Model", *(f"mu_{g}" for g in groups), "mu_overall"]
    blocks = _size_blocks(chosen) if block_by else [None]
    use_blocks = block_by is not None and blocks != [None]
    rows: list[list[Any]] = []
    for block in blocks:
        in_block = [s for s in chosen if size_label(s) == block] if use_blocks else chosen
        if use_blocks:
            rows.append([block])
        for model in ordered(unique(in_block, "model"), model_order):
            mine = filter_scores(in_block, model=model)
            rows.append([model, *_group_cells(mine, groups, intervals, level)])
    cells = [c for r in rows for c in r[1:]]
    note = uncertainty_note(cells, level) or _no_interval_note(chosen)
    return Table(
        name=name or metric,
        title=title or f"Results on {metric}",
        columns=columns,
        rows=rows,
        caption=_with_direction(f"{caption} {note}".strip(), _direction(metric, higher_is_better)),
        block_column="size" if use_blocks else None,
        block_format="Number of parameters = {}",
        block_labels=_param_labels(chosen) if use_blocks else {},
    )


def _group_cells(
    mine: Sequence[Score],
    groups: Mapping[str, Sequence[str]],
    intervals: GroupIntervals | None,
    level: float,
) -> list[Any]:
    by_lang = {k[0]: g for k, g in group_scores(mine, "lang").items()}
    size = mine[0].size if mine else None
    model = mine[0].model if mine else ""
    parts = {
        g: {lang: by_lang[lang] for lang in langs if lang in by_lang} for g, langs in groups.items()
    }
    parts["overall"] = by_lang
    return [
        mean_cell(part, (intervals or {}).get((model, size, g)), level) for g, part in parts.items()
    ]


def _no_interval_note(scores: Sequence[Score]) -> str:
    if len(unique(scores, "seed")) <= 1:
        return "No interval: one seed and no per-item data."
    return ""


def _param_labels(scores: Sequence[Score]) -> dict[str, str]:
    """Block label -> "0.62M (base)": the parameter count (Aggarwal et al. 2024 prints it), then the
    preset."""
    out: dict[str, str] = {}
    for block in _size_blocks(scores):
        params = sorted({s.params for s in scores if size_label(s) == block and s.params})
        if block is None or not params:
            continue
        count = human_params(params[0])
        if len(params) > 1:
            count += f"–{human_params(params[-1])}"
        out[block] = count if block == count else f"{count} ({block})"
    return out


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
    level: float = 0.95,
) -> Table:
    """One row per language (code, name, script, group), one column per model.

    Languages come in group order, then any scored language in no group (group
    "-"). ``describe(code)`` may supply ``name`` and ``script``. With several
    model sizes the columns are labelled "MODEL (SIZE)". Missing cells are "N/A".
    A cell carries the t-interval over seeds when there are several, else the
    record's own bootstrap interval (:func:`polymnesia.reports.cells.language_cell`).
    """
    chosen = metric_scores(scores, metric, "language_table")
    sizes = _size_blocks(chosen)
    keys = [
        (m, z) for z in sizes for m in ordered(unique(_in_size(chosen, z), "model"), model_order)
    ]
    labels = [m if len(sizes) == 1 else f"{m} ({z})" for m, z in keys]
    cells = {
        k: {
            key[0]: g
            for key, g in group_scores(
                filter_scores(_in_size(chosen, k[1]), model=k[0]), "lang"
            ).items()
        }
        for k in keys
    }
    rows = [
        [
            *_describe_row(lang, group, describe),
            *(language_cell(cells[k].get(lang, []), level) for k in keys),
        ]
        for lang, group in language_order(chosen, groups)
    ]
    note = uncertainty_note([c for r in rows for c in r[4:]], level) or _no_interval_note(chosen)
    return Table(
        name=name or f"{metric}_by_language",
        title=title or f"{metric} by language",
        columns=["Code", "Language", "Script", "Group", *labels],
        rows=rows,
        caption=f"{caption} {note}".strip(),
    )


def _in_size(scores: Sequence[Score], size: str | None) -> list[Score]:
    return [s for s in scores if size_label(s) == size]


def language_order(
    scores: Sequence[Score], groups: Mapping[str, Sequence[str]], ungrouped: str = "-"
) -> list[tuple[str, str]]:
    """``(lang, group)`` of every scored language: group by group in ``groups``' order, then
    the scored languages no group lists, in first-seen order, under ``ungrouped``."""
    scored = set(unique(scores, "lang"))
    out = [(lang, g) for g, langs in groups.items() for lang in langs if lang in scored]
    seen = {lang for lang, _ in out}
    return out + [(lang, ungrouped) for lang in unique(scores, "lang") if lang not in seen]


def _describe_row(
    lang: str, group: str, describe: Callable[[str], Mapping[str, Any]] | None
) -> list[str]:
    info = describe(lang) if describe else {}
    return [lang, str(info.get("name", "")), str(info.get("script", "")), group]


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
    """A labelled matrix, e.g. Khelli et al. 2025's R[i, j] (score on language j after training step
    i)."""
    matrix = [[float(v) for v in row] for row in R]
    if len(matrix) != len(row_labels) or any(len(r) != len(col_labels) for r in matrix):
        shape = f"{len(matrix)}x{len(matrix[0]) if matrix else 0}"
        raise ConfigError(
            f"matrix_table '{name}': matrix is {shape} but labels are "
            f"{len(row_labels)}x{len(col_labels)}"
        )
    rows: list[list[Any]] = [[lab, *r] for lab, r in zip(row_labels, matrix, strict=True)]
    return Table(name=name, title=title, columns=[corner, *col_labels], rows=rows, caption=caption)
