"""Report pieces shared by experiments: the paper-000 tables, the training curves, the
run's health and compute."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from polymnesia.data.languages import get_language
from polymnesia.io import read_jsonl_strict
from polymnesia.items import BootstrapConfig, ItemSet, group_intervals
from polymnesia.metrics.base import metric_direction, metric_title, scored_metrics
from polymnesia.pipeline.partial import read_missing
from polymnesia.pipeline.stage import CATEGORIES, STAGES
from polymnesia.reports.claims import Claim, correct
from polymnesia.reports.curves import panel_lines
from polymnesia.reports.plots import bar_by_language
from polymnesia.reports.render import Report
from polymnesia.reports.table_core import Table
from polymnesia.reports.tables import group_table, language_table, write_table
from polymnesia.results import STAGES_FILE, Score, StageRecord, read_stage_records


def describe_language(code: str) -> dict[str, Any]:
    lang = get_language(code)
    return {"name": lang.name, "script": lang.script}


def lm_tables(
    report: Report,
    run_dir: Path,
    scores: list[Score],
    groups: dict[str, list[str]],
    headline: str,
    model_order: list[str] | None = None,
    number: int = 1,
    items: Sequence[ItemSet] = (),
    bootstrap: BootstrapConfig | None = None,
) -> None:
    """Table 1 of Aggarwal et al. 2024 for the headline metric, then one for each other metric
    registered
    for ``lm`` items that ``scores`` hold (:func:`~polymnesia.metrics.base.scored_metrics`, in
    name order: bits per byte, token perplexity, word perplexity), plus per-language tables.
    Titles and directions are the metrics' registrations.

    With ``items`` (the ``lm`` item sets of the run) the group means carry
    stratified bootstrap intervals (items resampled within each language);
    otherwise intervals combined from the per-language ones.
    """
    results = run_dir / "results"
    present = {s.metric for s in scores}
    shown = [m for m in dict.fromkeys([headline, *scored_metrics("lm")]) if m in present]
    for i, metric in enumerate(shown):
        title = (
            f"Table {number}{'' if i == 0 else chr(ord('a') + i)}: "
            f"{metric_title(metric, start=True)} by language group"
        )
        t = group_table(
            scores,
            metric,
            groups,
            model_order=model_order,
            name=f"table{number}_{metric}",
            title=title,
            caption="mu_overall averages all evaluated languages.",
            intervals=group_intervals(items, metric, groups, bootstrap) if items else None,
        )
        write_table(results, t)
        report.table(t)
    above = sorted({s.lang for s in scores if s.metric == "bits_per_byte" and s.value > 8})
    if above:
        report.paragraph(
            f"Bits per byte above 8 ({', '.join(above)}): 8 bits is the cost of guessing each "
            "byte uniformly among 256, so these languages are predicted worse than by chance. "
            "This is typical of a script absent from the training data: its text reaches the "
            "model as byte-fallback tokens, which training taught it to rule out."
        )
    for metric in shown:
        t = language_table(
            scores,
            metric,
            groups,
            model_order=model_order,
            describe=describe_language,
            name=f"{metric}_by_language",
            title=f"{metric_title(metric, start=True)} per language",
        )
        write_table(results, t)
        report.table(t)


def lm_bar_plot(
    report: Report,
    run_dir: Path,
    scores: list[Score],
    groups: dict[str, list[str]],
    metric: str,
    model_order: list[str] | None = None,
) -> None:
    rel = f"plots/{metric}_by_language.png"
    title = metric_title(metric, start=True)
    higher = metric_direction(metric)
    better = "" if higher is None else f" ({'higher' if higher else 'lower'} is better)"
    bar_by_language(
        [s for s in scores if s.metric == metric],
        metric,
        groups,
        run_dir / rel,
        model_order=model_order,
        title=f"{title} per language{better}",
        ylabel=title,
    )
    several = len({s.model for s in scores if s.metric == metric}) > 1
    how = (
        "bars coloured by model, language groups shaded and named"
        if several
        else "coloured by group"
    )
    report.image(rel, f"{title} per language, {how}.")


def run_health(report: Report, run_dir: Path) -> None:
    """Say which training stages diverged or sat at chance (``train_health.json``, written by
    the loop and kept in the run's stage records) and whether the run trusted remote code
    (``run.json``); nothing when all is well."""
    lines = []
    records = read_stage_records(run_dir / "results" / STAGES_FILE)
    for name in sorted(records):
        health = records[name].files.get("train_health.json")
        for warning in health.get("warnings", []) if isinstance(health, dict) else []:
            lines.append(f"{name}: {warning}")
    run = run_dir / "run.json"
    if run.is_file() and json.loads(run.read_text(encoding="utf-8")).get("trust_remote_code"):
        lines.append(
            "this run was started with --trust-remote-code: model or data code from the Hub ran"
        )
    if lines:
        report.heading("Run health", 2).bullets(lines)


#: the file in which a stage that scores its own model records the seconds that took
#: (``sequential_step``: ``{"eval_seconds": ...}``), so "Compute by stage" counts it as evaluation
INNER_EVAL_FILE = "step_summary.json"


def _inner_eval_seconds(record: StageRecord | None, role: str) -> float | None:
    """Seconds a non-evaluation stage spent scoring its own model (None: not recorded)."""
    if role == "evaluation" or record is None:
        return None
    rec = record.files.get(INNER_EVAL_FILE)
    v = rec.get("eval_seconds") if isinstance(rec, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else None


def stage_times(run_dir: Path) -> list[dict[str, Any]]:
    """Per stage of the run (``run.json``): name, kind, role (``Stage.category``), whether this run
    built it or reused it, the seconds its build took (the run's stage records) and, for a
    stage that scores its own model inside it, the seconds that scoring took (``eval_seconds``,
    from :data:`INNER_EVAL_FILE`)."""
    path = run_dir / "run.json"
    if not path.is_file():
        return []
    stages = json.loads(path.read_text(encoding="utf-8")).get("stages", {})
    records = read_stage_records(run_dir / "results" / STAGES_FILE)
    rows = []
    for name, rec in stages.items():
        kind = str(rec.get("kind", ""))
        record = records.get(name)
        role = STAGES.get(kind).category if kind in STAGES else "other"
        total = record.seconds if record is not None else None
        inner = _inner_eval_seconds(record, role) if total is not None else None
        rows.append(
            {
                "stage": name,
                "kind": kind,
                "role": role,
                "status": rec.get("status", ""),
                "seconds": total,
                "eval_seconds": min(inner, total)
                if inner is not None and total is not None
                else None,
            }
        )
    return rows


def _split_inner_eval(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each stage that scored its own model as two parts: its training (the rest of its
    seconds) and an evaluation part ``KIND (scoring inside)``."""
    out = []
    for r in rows:
        inner = r.get("eval_seconds")
        if not inner:
            out.append(r)
            continue
        out.append({**r, "seconds": r["seconds"] - inner})
        out.append(
            {**r, "role": "evaluation", "kind": f"{r['kind']} (scoring inside)", "seconds": inner}
        )
    return out


def compute_table(report: Report, run_dir: Path) -> None:
    """Where the compute went: seconds by stage role and kind (``results/stage_times.csv`` has
    every stage), and evaluation's share of training."""
    stages = [r for r in stage_times(run_dir) if r["seconds"] is not None]
    if not stages:
        return
    rows = _split_inner_eval(stages)
    inside = sum(r["eval_seconds"] or 0.0 for r in stages)
    total = sum(r["seconds"] for r in rows)
    by_kind: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        by_kind.setdefault((r["role"], r["kind"]), []).append(r)
    order = sorted(
        by_kind, key=lambda k: (CATEGORIES.index(k[0]) if k[0] in CATEGORIES else 9, k[1])
    )
    table_rows = []
    for role, kind in order:
        rs = by_kind[(role, kind)]
        seconds = sum(r["seconds"] for r in rs)
        built = sum(r["status"] == "run" for r in rs)
        table_rows.append(
            [
                role,
                kind,
                len(rs),
                built,
                round(seconds, 1),
                round(100 * seconds / max(total, 1e-9), 1),
            ]
        )
    per_role = {role: sum(r["seconds"] for r in rows if r["role"] == role) for role in CATEGORIES}
    caption = (
        f"Seconds each stage took when its cache entry was built (a reused entry counts the run "
        f"that built it); {total:.0f} s in all. "
    )
    if inside:
        caption += (
            f"Scoring done inside training stages ({inside:.0f} s: a sequential step scores its "
            "model on every language after training) counts as evaluation, in the rows marked "
            "'scoring inside'; other fine-tuning stages (finetune_task) still include scoring "
            "their own model."
        )
    else:
        caption += (
            "Fine-tuning stages (finetune_task, sequential_step) include scoring their own model."
        )
    if per_role["training"] > 0:
        caption += (
            f" Evaluation {'(stages and scoring inside) ' if inside else 'stages '}took "
            f"{per_role['evaluation']:.0f} s, {per_role['evaluation'] / per_role['training']:.2f}x "
            f"the training stages' {per_role['training']:.0f} s."
        )
    write_table(
        run_dir / "results",
        Table(
            "stage_times",
            "Compute by stage",
            ["stage", "kind", "role", "status", "seconds", "eval_seconds"],
            [
                [r["stage"], r["kind"], r["role"], r["status"], r["seconds"], r["eval_seconds"]]
                for r in stages
            ],
        ),
    )
    report.heading("Compute by stage", 2).table(
        Table(
            "compute_by_kind",
            "Compute by stage kind",
            ["role", "stage kind", "stages", "built in this run", "seconds", "% of all"],
            table_rows,
            caption=caption,
            floatfmt=".1f",
        )
    )


def stage_family(stage: str) -> str:
    """The family of a stage name, what a training-loss panel groups: the part before the
    first ``_`` or ``.`` (``pretrain``, ``cft``, ``mit``, ``seq``), the seed tag left out."""
    for sep in ("_", "."):
        stage = stage.split(sep, 1)[0]
    return stage


def training_curves(report: Report, run_dir: Path) -> None:
    """Loss against step for every training stage of the run (from metrics.jsonl), the run's
    health notes (:func:`run_health`) and where the compute went (:func:`compute_table`)."""
    run_health(report, run_dir)
    compute_table(report, run_dir)
    panels: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    validation: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    for rec in read_jsonl_strict(run_dir / "metrics.jsonl", missing_ok=True):
        if "step" not in rec or "stage" not in rec:
            continue
        family = stage_family(rec["stage"])
        for key, into in (("loss", panels), ("val_loss", validation)):
            if key in rec:
                xs, ys = into.setdefault(family, {}).setdefault(rec["stage"], ([], []))
                xs.append(rec["step"])
                ys.append(rec[key])
    if panels:
        rel = "plots/training_loss.png"
        panel_lines(
            panels,
            run_dir / rel,
            dashed=validation,
            xlabel="optimizer step",
            ylabel="loss (nats/token)",
            title="Training loss by stage family",
        )
        has_val = any(validation.values())
        report.image(
            rel,
            "Training loss of each training stage, one panel per stage family"
            + (
                "; dashed: the validation loss where the stage measured it (eval_every)"
                if has_val
                else ""
            )
            + ".",
        )


def missing_arms_aside(claims: Sequence[Claim], run_dir: Path) -> list[Claim]:
    """In a run that lost stages for good (:mod:`polymnesia.pipeline.partial`), each claim
    with no effect to show (not finite: an arm it compares has no scores) set aside as not
    testable, naming the missing arms and the failed stages with their logs; the p-values
    adjusted again without them. A whole run's claims are returned as they are."""
    record = read_missing(run_dir)
    if not record:
        return list(claims)
    stages = record.get("stages", {})
    arms = [a for a in record.get("arms", []) if isinstance(a, str)]
    failed = sorted({f for s in stages.values() for f in s.get("failed", [])})
    logs = "; ".join(f"stage {f} failed, log: {stages.get(f, {}).get('log', '?')}" for f in failed)
    out, changed = [], False
    for c in claims:
        if c.testable and not math.isfinite(c.effect):
            named = [a for a in arms if a in f"{c.statement} {c.effect_label}"] or arms
            which = f"arm{'s' if len(named) > 1 else ''} {' and '.join(named)}"
            why = f"{which} {'are' if len(named) > 1 else 'is'} missing ({logs})"
            c, changed = replace(c, not_testable=why), True
        out.append(c)
    return correct(out) if changed else out
