"""What an LF-MLF model that learned nothing scores (:func:`trivial_score`: uniform chance
or the majority-class share of a label task, the recorded trivial answer of a tagging or QA
task), the headroom an effect can take above it (:func:`headroom_of`), and the report's
rows of chance and majority-class scores per arm (:func:`baseline_rows`,
:func:`trivial_rows`), which also say which arms learned their task (the claims'
not-testable rule, :mod:`polymnesia.experiments.lf_mlf.claims`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from polymnesia.experiments.lf_mlf.config import REFERENCE, LFMLFConfig, TaskSection, label_of
from polymnesia.items import ItemSet, select_items
from polymnesia.metrics.uncertainty import Interval
from polymnesia.reports.baselines import Baselines
from polymnesia.reports.evidence import arm_score, item_baselines
from polymnesia.results import Score, filter_scores
from polymnesia.tasks.kinds import secondary_metrics


def has_scores(scores: Sequence[Score], model: str, **where: Any) -> bool:
    return bool(filter_scores(scores, model=model, **where))


def trivial_score(
    section: TaskSection,
    metric: str,
    model: str,
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    **where: Any,
) -> tuple[float, str] | None:
    """What a model that learned nothing scores on the selected languages, and its name: the
    larger of uniform chance and the majority-class share of a label task's gold labels, the
    mean recorded trivial answer (``trivial_baseline``) of a tagging or QA task (first seed;
    it depends on the test items, not on the arm). None when the records do not say."""
    if section.kind == "sequence":
        sets = select_items(items, model=model, **where)
        if not sets:
            return None
        first = min((s.seed or 0) for s in sets)
        base = item_baselines([s for s in sets if (s.seed or 0) == first])
        return max(base.chance(metric), base.majority(metric)), "the majority-class share"
    chosen = filter_scores(scores, model=model, metric=metric, **where)
    first = min((s.seed or 0 for s in chosen), default=0)
    values = [
        float(s.extra["trivial_baseline"]["value"])
        for s in chosen
        if (s.seed or 0) == first and "trivial_baseline" in (s.extra or {})
    ]
    if not values or len(values) != len({s.lang for s in chosen}):
        return None
    return sum(values) / len(values), "the trivial answer"


def headroom_of(
    section: TaskSection,
    metric: str,
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    where: Mapping[str, Any],
) -> float | None:
    """``1 -`` the trivial score of the selected languages (LF-MLF's items), the room an
    effect on this metric can take above chance; None where it is unknown."""
    trivial = trivial_score(section, metric, REFERENCE, scores, items, **where)
    return None if trivial is None else 1.0 - trivial[0]


def baseline_rows(
    cfg: LFMLFConfig, task: TaskSection, scores: Sequence[Score], items: Sequence[ItemSet]
) -> list[tuple[str, str, str, Interval, Baselines]]:
    """Per main arm: its mean score on the sources it was trained on, against chance and majority.

    Only label tasks (accuracy, macro-F1) have these baselines; SLF arms are
    scored on their own language.
    """
    if task.kind != "sequence":
        return []
    rows: list[tuple[str, str, str, Interval, Baselines]] = []
    arms = [label_of(m) for m in cfg.methods]
    arms += [f"SLF-{s}" for s in cfg.sources_of(task)] if cfg.slf else []
    for model in arms:
        langs = [model[4:]] if model.startswith("SLF-") else cfg.sources_of(task)
        where: dict[str, Any] = {
            "group": "source",
            "setting": "main",
            "task": task.name,
            "lang": langs,
        }
        if not has_scores(scores, model, metric=task.metric, **where):
            continue
        sets = select_items(items, model=model, **where)
        if not sets:
            continue
        first_seed = min((s.seed or 0) for s in sets)
        base = item_baselines([s for s in sets if (s.seed or 0) == first_seed])
        iv = arm_score(scores, items, task.metric, model, **where)
        if math.isfinite(iv.estimate):
            rows.append((model, ", ".join(langs), task.metric, iv, base))
    return rows


def trivial_rows(
    cfg: LFMLFConfig, task: TaskSection, scores: Sequence[Score], items: Sequence[ItemSet]
) -> list[tuple[str, str, str, Interval, str, float]]:
    """Per main arm of a tagging or QA task: its mean score on its sources, and what the
    trivial answer recorded by ``finetune_task`` scores there (mean over the same languages,
    first seed; the answer depends on the test items, not on the arm)."""
    if task.kind == "sequence":
        return []
    rows: list[tuple[str, str, str, Interval, str, float]] = []
    arms = [label_of(m) for m in cfg.methods]
    arms += [f"SLF-{s}" for s in cfg.sources_of(task)] if cfg.slf else []
    for metric in [task.metric, *secondary_metrics(task)]:
        for model in arms:
            row = _trivial_row(task, metric, model, cfg, scores, items)
            if row is not None:
                rows.append(row)
    return rows


def _trivial_row(
    task: TaskSection,
    metric: str,
    model: str,
    cfg: LFMLFConfig,
    scores: Sequence[Score],
    items: Sequence[ItemSet],
) -> tuple[str, str, str, Interval, str, float] | None:
    langs = [model[4:]] if model.startswith("SLF-") else cfg.sources_of(task)
    where: dict[str, Any] = {"group": "source", "setting": "main", "task": task.name}
    chosen = filter_scores(scores, model=model, metric=metric, lang=langs, **where)
    first = min((s.seed or 0 for s in chosen), default=0)
    base = {
        s.lang: s.extra["trivial_baseline"]
        for s in chosen
        if (s.seed or 0) == first and "trivial_baseline" in (s.extra or {})
    }
    if set(base) != set(langs):  # scored before the stage recorded it
        return None
    iv = arm_score(scores, items, metric, model, lang=langs, **where)
    value = sum(float(b["value"]) for b in base.values()) / len(base)
    answer = str(next(iter(base.values()))["answer"])
    if not math.isfinite(iv.estimate):
        return None
    return (model, ", ".join(langs), metric, iv, answer, value)
