"""Report pieces shared by experiments: the paper-000 tables and the training curves."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polymnesia.data.languages import get_language
from polymnesia.io import read_jsonl_strict
from polymnesia.items import BootstrapConfig, ItemSet, group_intervals
from polymnesia.pipeline.integrity import read_marker
from polymnesia.pipeline.stage import ROLES, STAGES
from polymnesia.reports.plots import bar_by_language, line_plot
from polymnesia.reports.render import Report
from polymnesia.reports.table_core import Table
from polymnesia.reports.tables import group_table, language_table, write_table
from polymnesia.results import Score

METRIC_TITLES = {"bits_per_byte": "Bits per byte", "perplexity": "Token perplexity"}


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
    """Table 1 of paper 000 for the headline metric and the other one, plus per-language tables.

    With ``items`` (the ``lm`` item sets of the run) the group means carry
    stratified bootstrap intervals (items resampled within each language);
    otherwise intervals combined from the per-language ones.
    """
    results = run_dir / "results"
    others = [m for m in ("bits_per_byte", "perplexity") if m != headline]
    for i, metric in enumerate([headline, *others]):
        if not any(s.metric == metric for s in scores):
            continue
        title = f"Table {number}{'' if i == 0 else chr(ord('a') + i)}: {METRIC_TITLES.get(metric, metric)} by language group"
        t = group_table(
            scores,
            metric,
            groups,
            model_order=model_order,
            name=f"table{number}_{metric}",
            title=title,
            caption="mu_overall averages all evaluated languages.",
            higher_is_better=False,
            intervals=group_intervals(items, metric, groups, bootstrap) if items else None,
        )
        write_table(results, t)
        report.table(t)
    for metric in [headline, *others]:
        if any(s.metric == metric for s in scores):
            t = language_table(
                scores,
                metric,
                groups,
                model_order=model_order,
                describe=describe_language,
                name=f"{metric}_by_language",
                title=f"{METRIC_TITLES.get(metric, metric)} per language",
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
    bar_by_language(
        [s for s in scores if s.metric == metric],
        metric,
        groups,
        run_dir / rel,
        model_order=model_order,
        title=f"{METRIC_TITLES.get(metric, metric)} per language (lower is better)",
        ylabel=METRIC_TITLES.get(metric, metric),
    )
    report.image(rel, f"{METRIC_TITLES.get(metric, metric)} per language, coloured by group.")


def run_health(report: Report, run_dir: Path) -> None:
    """Say which training stages diverged or sat at chance (``train_health.json``, written by
    the loop) and whether the run trusted remote code (``run.json``); nothing when all is well."""
    lines = []
    stages = run_dir / "stages"
    for health in sorted(stages.glob("*/train_health.json")) if stages.is_dir() else []:
        rec = json.loads(health.read_text(encoding="utf-8"))
        for warning in rec.get("warnings", []):
            lines.append(f"{health.parent.name}: {warning}")
    run = run_dir / "run.json"
    if run.is_file() and json.loads(run.read_text(encoding="utf-8")).get("trust_remote_code"):
        lines.append(
            "this run was started with --trust-remote-code: model or data code from the Hub ran"
        )
    if lines:
        report.heading("Run health", 2).bullets(lines)


def stage_times(run_dir: Path) -> list[dict[str, Any]]:
    """Per stage of the run (``run.json``): name, kind, role (``Stage.role``), whether this run
    built it or reused it, and the seconds its build took (its cache entry's marker)."""
    path = run_dir / "run.json"
    if not path.is_file():
        return []
    stages = json.loads(path.read_text(encoding="utf-8")).get("stages", {})
    rows = []
    for name, rec in stages.items():
        kind = str(rec.get("kind", ""))
        marker = read_marker(Path(rec["entry"])) if rec.get("entry") else None
        seconds = (marker or {}).get("seconds")
        rows.append(
            {
                "stage": name,
                "kind": kind,
                "role": STAGES.get(kind).role if kind in STAGES else "other",
                "status": rec.get("status", ""),
                "seconds": float(seconds) if isinstance(seconds, (int, float)) else None,
            }
        )
    return rows


def compute_table(report: Report, run_dir: Path) -> None:
    """Where the compute went: seconds by stage role and kind (``results/stage_times.csv`` has
    every stage), and evaluation's share of training."""
    rows = [r for r in stage_times(run_dir) if r["seconds"] is not None]
    if not rows:
        return
    total = sum(r["seconds"] for r in rows)
    by_kind: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        by_kind.setdefault((r["role"], r["kind"]), []).append(r)
    order = sorted(by_kind, key=lambda k: (ROLES.index(k[0]) if k[0] in ROLES else 9, k[1]))
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
    per_role = {role: sum(r["seconds"] for r in rows if r["role"] == role) for role in ROLES}
    caption = (
        f"Seconds each stage took when its cache entry was built (a reused entry counts the run "
        f"that built it); {total:.0f} s in all. Fine-tuning stages (finetune_task, "
        "sequential_step) include scoring their own model."
    )
    if per_role["training"] > 0:
        caption += (
            f" Evaluation stages took {per_role['evaluation']:.0f} s, "
            f"{per_role['evaluation'] / per_role['training']:.2f}x the training stages' "
            f"{per_role['training']:.0f} s."
        )
    write_table(
        run_dir / "results",
        Table(
            "stage_times",
            "Compute by stage",
            ["stage", "kind", "role", "status", "seconds"],
            [[r["stage"], r["kind"], r["role"], r["status"], r["seconds"]] for r in rows],
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


def training_curves(report: Report, run_dir: Path) -> None:
    """Loss against step for every training stage of the run (from metrics.jsonl), the run's
    health notes (:func:`run_health`) and where the compute went (:func:`compute_table`)."""
    run_health(report, run_dir)
    compute_table(report, run_dir)
    series: dict[str, tuple[list[float], list[float]]] = {}
    for rec in read_jsonl_strict(run_dir / "metrics.jsonl", missing_ok=True):
        if "loss" in rec and "step" in rec:
            xs, ys = series.setdefault(rec["stage"], ([], []))
            xs.append(rec["step"])
            ys.append(rec["loss"])
    if series:
        rel = "plots/training_loss.png"
        line_plot(
            series,
            run_dir / rel,
            xlabel="optimizer step",
            ylabel="training loss (nats/token)",
            title="Training loss",
        )
        report.image(rel, "Training loss of each training stage.")
