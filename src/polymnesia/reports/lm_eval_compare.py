"""``polymnesia compare LM_EVAL_DIR LM_EVAL_DIR...``: runs of lm-evaluation-harness compared
document by document, by task and by language, family, script and resource level.

Each folder is what ``lm_eval ... --output_path DIR --log_samples`` wrote, for any model
(:mod:`polymnesia.harness.lm_eval_output`). Every later run is compared with the first on
the documents both scored alike (paired by task, filter and ``doc_id``):

* every metric whose lm-eval score is the mean over documents gets a paired bootstrap of
  the difference (:func:`polymnesia.metrics.uncertainty.paired_bootstrap`: its percentile
  interval and two-sided p-value); a 0/1 metric (accuracy) also gets McNemar's exact test
  (the two-sided binomial test of the discordant documents, McNemar 1947);
* p-values are adjusted by Holm's method (:func:`polymnesia.metrics.stats.holm`) over all
  comparisons of a table, the bootstrap's and McNemar's apart;
* with a non-inferiority margin ``m``, a later run is non-inferior where its interval's bound
  on the side of worse lies within ``m`` of no difference (the lower bound above ``-m`` for a
  metric where higher is better);
* tasks are grouped by language, family, script and resource level
  (:func:`polymnesia.harness.lm_eval_languages.task_info`): a group's score is the
  unweighted mean over its tasks, its intervals resample documents within each task
  (:func:`~polymnesia.metrics.uncertainty.stratified_bootstrap_ci`, and the stratified
  paired bootstrap for the difference).

The report is ``compare.md``, a self-contained ``compare.html`` and one CSV per table.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polymnesia.errors import PolymnesiaError
from polymnesia.harness.lm_eval_languages import TaskLanguage, task_info
from polymnesia.harness.lm_eval_output import (
    LmEvalRun,
    PairedMetric,
    Pairing,
    pair_runs,
    read_lm_eval,
)
from polymnesia.io import atomic_write_csv, atomic_write_text
from polymnesia.metrics.stats import holm
from polymnesia.metrics.uncertainty import (
    DEFAULT_RESAMPLES,
    PairedTest,
    mean_statistic,
    paired_bootstrap,
    stratified_bootstrap_ci,
)
from polymnesia.reports.compare import config_differences, default_out_dir, run_labels
from polymnesia.reports.render import Report
from polymnesia.reports.table_core import Estimate, Table, to_csv_rows

#: the groupings of tasks, in report order: (table name, column title, the group of a task)
GROUPINGS: tuple[tuple[str, str, Callable[[TaskLanguage], str]], ...] = (
    ("by_language", "Language", lambda t: f"{t.name} ({t.code})"),
    ("by_family", "Family", lambda t: t.family),
    ("by_script", "Script", lambda t: t.script),
    ("by_resource", "Resource level", lambda t: t.resource),
)


class Difference(Estimate):
    """A difference with its percentile interval, shown ``+0.042 [-0.010, +0.094]`` (the
    bootstrap interval need not be symmetric)."""

    def text(self, floatfmt: str = ".3f") -> str:
        if math.isnan(self.value):
            return "N/A"
        if not self.has_ci:
            return format(self.value, "+" + floatfmt)
        return "{} [{}, {}]".format(*(format(v, "+" + floatfmt) for v in self.triple))

    @property
    def triple(self) -> tuple[float, float, float]:
        return self.value, self.low, self.high


def mcnemar_exact(ref: Sequence[float], other: Sequence[float]) -> tuple[float, int, int]:
    """McNemar's exact test of two 0/1 columns on the same documents: ``(p, b, c)`` with ``b``
    documents right in ``ref`` only and ``c`` in ``other`` only; ``p`` is the two-sided
    binomial test of ``min(b, c)`` in ``b + c`` at 1/2 (1 when no document is discordant),
    computed exactly."""
    b = sum(1 for x, y in zip(ref, other, strict=True) if x == 1 and y == 0)
    c = sum(1 for x, y in zip(ref, other, strict=True) if x == 0 and y == 1)
    n = b + c
    if n == 0:
        return 1.0, b, c
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n), b, c


@dataclass
class Row:
    """One comparison: a task (or group) and metric of a later run against the first."""

    label: str  # "run-b − run-a"
    metric: str
    ref: Estimate
    other: Estimate
    test: PairedTest
    higher_is_better: bool | None
    mcnemar: tuple[float, int, int] | None = None

    def non_inferior(self, margin: float) -> str:
        if self.higher_is_better is None or math.isnan(self.test.low):
            return "N/A"
        if self.higher_is_better:
            return "yes" if self.test.low > -margin else "no"
        return "yes" if self.test.high < margin else "no"


def _estimate(pm_values: Sequence[PairedMetric], side: str, seed: int) -> Estimate:
    stats = [mean_statistic(getattr(pm, side), pm.metric) for pm in pm_values]
    return Estimate.of(stratified_bootstrap_ci(stats, n_resamples=DEFAULT_RESAMPLES, seed=seed))


def _test(pms: Sequence[PairedMetric], seed: int) -> PairedTest:
    other = [mean_statistic(pm.other, pm.metric) for pm in pms]
    ref = [mean_statistic(pm.ref, pm.metric) for pm in pms]
    return paired_bootstrap(other, ref, n_resamples=DEFAULT_RESAMPLES, seed=seed)


def _row(label: str, pms: Sequence[PairedMetric], seed: int = 0) -> Row:
    first = pms[0]
    binary = all(pm.binary for pm in pms)
    mcnemar = None
    if binary and len(pms) == 1:
        mcnemar = mcnemar_exact(first.ref.tolist(), first.other.tolist())
    return Row(
        label,
        first.metric,
        _estimate(pms, "ref", seed),
        _estimate(pms, "other", seed),
        _test(pms, seed),
        first.higher_is_better,
        mcnemar,
    )


def _p_columns(rows: Sequence[Row], with_mcnemar: bool) -> list[list[Any]]:
    boot = [r.test.p_value for r in rows]
    out = [[p, q] for p, q in zip(boot, holm(boot), strict=True)]
    if with_mcnemar:
        mc = [r.mcnemar[0] if r.mcnemar else None for r in rows]
        for cells, p, q in zip(out, mc, holm(mc), strict=True):
            cells += [p if p is not None else math.nan, q]
    return out


def _difference(t: PairedTest) -> Difference:
    return Difference(t.effect, t.low, t.high, t.n)


def task_table(rows: Sequence[tuple[str, Row]], margin: float | None) -> Table:
    """One row per task, metric and later run: both runs' scores, the paired difference,
    its p-values (bootstrap and, for 0/1 metrics, McNemar; each also Holm-adjusted)."""
    columns = ["Task", "Language", "Metric", "Runs", "First run", "Later run", "Difference"]
    columns += ["p", "p (Holm)", "McNemar p", "McNemar p (Holm)", "n"]
    if margin is not None:
        columns.append(f"Non-inferior (margin {margin:g})")
    ps = _p_columns([r for _, r in rows], with_mcnemar=True)
    body = []
    for (task, r), p in zip(rows, ps, strict=True):
        info = task_info(task)
        line = [task, info.code, r.metric, r.label, r.ref, r.other, _difference(r.test), *p]
        line.append(r.test.n)
        if margin is not None:
            line.append(r.non_inferior(margin))
        body.append(line)
    return Table(
        name="compare_tasks",
        title="Paired differences by task",
        columns=columns,
        rows=body,
        caption=(
            "Later run minus the first on the documents both scored alike. First/Later run: "
            "the runs' scores on those documents, ± half the width of their 95% bootstrap "
            "interval. Difference: its 95% paired percentile bootstrap interval "
            f"({DEFAULT_RESAMPLES} resamples of the documents); p: the bootstrap's two-sided "
            f"p (0: no resample in {DEFAULT_RESAMPLES} changed the sign); McNemar p: the "
            "exact test of the documents only one run got right (0/1 metrics); Holm: "
            "adjusted over the rows of this table." + _margin_note(margin)
        ),
        floatfmt=".3g",
    )


def _margin_note(margin: float | None) -> str:
    if margin is None:
        return ""
    return (
        f" Non-inferior: the difference's interval excludes a loss of {margin:g} or more "
        "(its lower bound above the negative margin where higher is better; its upper bound "
        "below the margin where lower is better)."
    )


def group_table(
    name: str,
    column: str,
    groups: Sequence[tuple[str, int, Row]],
    margin: float | None,
) -> Table:
    """One row per group, metric and later run: the mean over the group's tasks in both runs
    and their difference, intervals from documents resampled within each task."""
    columns = [column, "Tasks", "Metric", "Runs", "First run", "Later run", "Difference"]
    columns += ["p", "p (Holm)", "n"]
    if margin is not None:
        columns.append(f"Non-inferior (margin {margin:g})")
    ps = _p_columns([r for _, _, r in groups], with_mcnemar=False)
    body = []
    for (group, n_tasks, r), p in zip(groups, ps, strict=True):
        line = [group, n_tasks, r.metric, r.label, r.ref, r.other, _difference(r.test), *p]
        line.append(r.test.n)
        if margin is not None:
            line.append(r.non_inferior(margin))
        body.append(line)
    return Table(
        name=f"compare_{name}",
        title=f"Paired differences by {column.lower()}",
        columns=columns,
        rows=body,
        caption=(
            f"The unweighted mean over each {column.lower()}'s tasks, documents resampled "
            "within each task (stratified bootstrap); n counts the documents; Holm over this "
            "table's rows."
        ),
        floatfmt=".3g",
    )


def _pairing_table(labels: Sequence[str], pairings: Sequence[Pairing]) -> Table:
    rows = []
    for label, pairing in zip(labels[1:], pairings, strict=True):
        for t in pairing.tasks:
            why = t.describe().split(" not", 1)[1].lstrip(": ") if t.unpaired else ""
            rows.append([t.task, f"{label} − {labels[0]}", t.paired, t.unpaired, why])
    return Table(
        name="compare_pairing",
        title="Documents paired",
        columns=["Task", "Runs", "Paired", "Not paired", "Why not"],
        rows=rows,
        caption=(
            "Documents pair by task, filter and doc_id when both runs scored the same "
            "document and target with the same prompt; only paired documents are compared."
        ),
    )


def _run_config(run: LmEvalRun) -> dict[str, Any]:
    config = dict(run.results.get("config") or {})
    keep = ("model", "model_args", "batch_size", "device", "limit", "fewshot_seed", "random_seed")
    out = {k: config.get(k) for k in keep if k in config}
    out["lm_eval_version"] = run.version
    out["chat_template_sha"] = run.chat_template
    out["n-shot"] = dict(run.results.get("n-shot") or {})
    return out


def compare_lm_eval(
    run_dirs: Sequence[str | os.PathLike[str]],
    margin: float | None = None,
    notes: list[str] | None = None,
) -> tuple[Report, list[Table]]:
    """The comparison report of two or more lm-eval output folders and its tables; lines
    about documents that did not pair are added to ``notes`` (when given)."""
    if len(run_dirs) < 2:
        raise PolymnesiaError("compare needs at least two lm-eval output folders")
    if margin is not None and not (math.isfinite(margin) and margin > 0):
        raise PolymnesiaError(f"--margin must be a positive number, got {margin}")
    dirs = [Path(d) for d in run_dirs]
    runs = [read_lm_eval(d) for d in dirs]
    labels = run_labels(dirs)
    pairings = [
        pair_runs(runs[0], run, (labels[0], label))
        for run, label in zip(runs[1:], labels[1:], strict=True)
    ]
    task_rows: list[tuple[str, Row]] = []
    grouped: dict[str, dict[tuple[str, str, str], list[PairedMetric]]] = {
        g[0]: {} for g in GROUPINGS
    }
    for label, pairing in zip(labels[1:], pairings, strict=True):
        comparison = f"{label} − {labels[0]}"
        for pm in pairing.metrics:
            task_rows.append((pm.task, _row(comparison, [pm])))
            info = task_info(pm.task)
            for name, _, group_of in GROUPINGS:
                key = (group_of(info), pm.metric, comparison)
                grouped[name].setdefault(key, []).append(pm)
    if not task_rows:
        first = "; ".join(s for p in pairings for s in p.skipped[:3])
        raise PolymnesiaError(
            "the runs share no metric that is a mean over documents, so nothing can be "
            f"tested document by document ({first or 'no metric in common'})"
        )
    rep = Report(f"Comparison of {len(runs)} lm-eval runs")
    rep.bullets(
        [
            f"**{lab}**: `{run.results_file}` (model `{run.model}`, lm-eval {run.version}"
            + (f"; the newest of {run.older + 1} runs in that folder" if run.older else "")
            + ")"
            for lab, run in zip(labels, runs, strict=True)
        ]
    )
    rep.heading("How the runs differ", 2)
    diffs = config_differences([_run_config(r) for r in runs], labels)
    if diffs:
        rep.bullets(diffs)
    else:
        rep.paragraph("The runs' lm-eval configs are the same.")
    for pairing in pairings:
        if pairing.prompts_differ:
            rep.paragraph(
                "The runs used different chat templates, so every prompt differs: documents "
                "are paired by their content and target alone."
            )
        for t in pairing.tasks:
            if t.unpaired and notes is not None:
                notes.append(t.describe())
    tables = [_pairing_table(labels, pairings), task_table(task_rows, margin)]
    for name, column, _ in GROUPINGS:
        rows = [
            (group, len({pm.task for pm in pms}), _row(comparison, pms))
            for (group, _, comparison), pms in sorted(grouped[name].items())
        ]
        tables.append(group_table(name, column, rows, margin))
    for table in tables:
        rep.heading(table.title, 2).table(table)
    skipped = [s for p in pairings for s in p.skipped]
    if skipped:
        rep.paragraph(
            f"Not tested document by document ({len(skipped)}): " + "; ".join(sorted(skipped))
        )
    return rep, tables


def write_lm_eval_comparison(
    run_dirs: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str] | None = None,
    margin: float | None = None,
    notes: list[str] | None = None,
) -> tuple[Path, Path, list[Path]]:
    """Write ``compare.md``, ``compare.html`` and one ``compare_TABLE.csv`` per table into
    ``out_dir`` (default ``runs/compare-HASH``); returns their paths."""
    rep, tables = compare_lm_eval(run_dirs, margin, notes)
    out = Path(out_dir) if out_dir is not None else default_out_dir(run_dirs)
    md, page = out / "compare.md", out / "compare.html"
    atomic_write_text(md, rep.to_markdown())
    atomic_write_text(page, rep.to_html(out))
    csvs = []
    for table in tables:
        header, rows = to_csv_rows(table)
        path = out / f"{table.name}.csv"
        atomic_write_csv(path, header, rows)
        csvs.append(path)
    return md, page, csvs


__all__ = [
    "GROUPINGS",
    "Difference",
    "compare_lm_eval",
    "group_table",
    "mcnemar_exact",
    "task_table",
    "write_lm_eval_comparison",
]
