"""Reports: paper-layout tables, plots and the Markdown/HTML report of a run folder.

Tables (:mod:`polymnesia.reports.tables`) and the report builder
(:mod:`polymnesia.reports.render`) are re-exported here; plots live in
:mod:`polymnesia.reports.plots` (imported on demand, it pulls in matplotlib).
Scores come from :mod:`polymnesia.results`. See docs/reports.md.
"""

from polymnesia.reports.frame import RunTable, load_run, load_runs
from polymnesia.reports.render import Report, table_html
from polymnesia.reports.tables import (
    Estimate,
    Table,
    group_table,
    language_table,
    matrix_table,
    seed_table,
    to_csv_rows,
    to_markdown,
    write_table,
)

__all__ = [
    "Estimate",
    "Report",
    "RunTable",
    "Table",
    "group_table",
    "load_run",
    "load_runs",
    "language_table",
    "matrix_table",
    "seed_table",
    "table_html",
    "to_csv_rows",
    "to_markdown",
    "write_table",
]
