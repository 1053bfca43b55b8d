"""Mao et al. 2022's tables (1-6): methods by languages or settings, mean±std over seeds, marks,
bold
best.

With one seed there is no spread and no significance test: a cell shows its
value with the interval over test items instead, and the caption says so
(never "±0.00", never a legend for marks that cannot exist).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from polymnesia.errors import ConfigError
from polymnesia.metrics.seed_tests import seed_interval
from polymnesia.metrics.uncertainty import Interval
from polymnesia.reports.cells import mean_cell, metric_scores, per_seed, uncertainty_note
from polymnesia.reports.table_core import MISSING, Estimate, Table
from polymnesia.results import Score, group_scores, mean, ordered, std, unique


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
    legend: str = "",
    intervals: Mapping[tuple[Any, Any], Interval] | None = None,
    level: float = 0.95,
) -> Table:
    """Mao et al. 2022 layout: cells "mean±std" over seeds, with optional marks and the best in
    bold.

    For each (row, col) cell, scores are averaged per seed first (e.g. over the
    target languages when ``col_key="setting"``), then mean and std (``ddof=1``,
    the sample std; the paper does not say which) are taken over seeds; the
    CSV adds the t-interval over seeds. ``marks`` maps a label to a suffix
    such as "●" (Mao et al. 2022: "statistically inferior to LF-MLF"); a cell looks
    up "ROW|COL", then ROW, then COL; ``legend`` explains them. ``best="max"``
    or ``"min"`` bolds the best mean in each row (``best_along="row"``, paper
    003 Tables 4-6 with languages as rows) or in each column
    (``best_along="col"``, methods as rows). Empty cells show "–", as in the
    paper.

    With one seed there is no spread and no test: cells show the value with
    its interval over test items (``intervals[(row, col)]``, e.g. a stratified
    bootstrap over the target languages, else the records' own intervals),
    marks and ``legend`` are dropped and the caption says so.
    """
    if best not in (None, "max", "min"):
        raise ConfigError(f"best '{best}' is not supported; accepted: 'max', 'min', None")
    if best_along not in ("row", "col"):
        raise ConfigError(f"best_along '{best_along}' is not supported; accepted: 'row', 'col'")
    chosen = metric_scores(scores, metric, "seed_table", tasks_apart="task" in (row_key, col_key))
    row_labels = ordered(unique(chosen, row_key), row_order)
    col_labels = ordered(unique(chosen, col_key), col_order)
    groups = group_scores(chosen, row_key, col_key)
    seeded = max(len(per_seed(g)) for g in groups.values()) >= 2
    grid = [
        [
            _seed_estimate(groups.get((r, c), []), r, c, seeded, marks, intervals, ddof, level)
            for c in col_labels
        ]
        for r in row_labels
    ]
    table = Table(
        name=name or f"{metric}_seeds",
        title=title or f"{metric} ({'mean±std over seeds' if seeded else 'one seed'})",
        columns=[row_key.capitalize(), *(str(c) for c in col_labels)],
        rows=[
            [r, *(MISSING if e is None else e for e in cells)]
            for r, cells in zip(row_labels, grid, strict=True)
        ],
        caption=_seed_caption(caption, legend, grid, seeded, level),
        floatfmt=floatfmt,
    )
    if best_along == "row":
        table.bold = [(i, j + 1) for i, cells in enumerate(grid) for j in _best_cols(cells, best)]
    else:
        columns = [list(col) for col in zip(*grid, strict=True)] if grid else []
        table.bold = sorted(
            (i, j + 1) for j, col in enumerate(columns) for i in _best_cols(col, best)
        )
    return table


def _seed_estimate(
    cell: Sequence[Score],
    row: Any,
    col: Any,
    seeded: bool,
    marks: Mapping[str, str] | None,
    intervals: Mapping[tuple[Any, Any], Interval] | None,
    ddof: int,
    level: float,
) -> Estimate | None:
    if not cell:
        return None
    values = list(per_seed(cell).values())
    if seeded:
        iv = seed_interval(values, level)
        spread = std(values, ddof) if len(values) > 1 else None  # one seed here: no "±0.00"
        return Estimate(
            mean(values), iv.low, iv.high, len(values), spread, _mark(marks, row, col), iv.method
        )
    by_lang = {k[0]: g for k, g in group_scores(cell, "lang").items()}
    got = mean_cell(by_lang, (intervals or {}).get((row, col)), level)
    return got if isinstance(got, Estimate) else Estimate(mean(values))


def _seed_caption(
    caption: str, legend: str, grid: Sequence[Sequence[Estimate | None]], seeded: bool, level: float
) -> str:
    cells = [e for row in grid for e in row if e is not None]
    if seeded:
        n = max(e.n or 0 for e in cells)
        extra = f"Mean±std over {n} seeds; the CSV gives the {level:.0%} t-interval."
        return " ".join(x for x in (caption, legend, extra) if x)
    note = "One seed: no spread over seeds and no significance test."
    return " ".join(x for x in (caption, note, uncertainty_note(cells, level)) if x)


def _mark(marks: Mapping[str, str] | None, row: Any, col: Any) -> str:
    if not marks:
        return ""
    for key in (f"{row}|{col}", str(row), str(col)):
        if key in marks:
            return marks[key]
    return ""


def _best_cols(cells: Sequence[Estimate | None], best: str | None) -> list[int]:
    means = [e.value for e in cells if e is not None]
    if best is None or not means:
        return []
    target = max(means) if best == "max" else min(means)
    return [j for j, e in enumerate(cells) if e is not None and e.value == target]
