"""One entry point per step of a labelled task, whatever its kind (sequence, token, span).

A fine-tuning stage reads prepared records, and for a task (:class:`TaskConfig`):
:func:`task_records` builds the constructed task when one is named,
:func:`label_space` gives the number of labels (and tag names),
:func:`build_examples` the model inputs, :func:`training_data` the loop's data,
:func:`evaluate_task` the score and per-item columns of every language.
"""

from __future__ import annotations

from typing import Any

import torch

from polymnesia.errors import DataError
from polymnesia.runtime import Runtime
from polymnesia.tasks.classification import (
    ClassificationData,
    LanguageResult,
    build_sequence_examples,
    evaluate_items_by_language,
    token_metric,
)
from polymnesia.tasks.config import TaskConfig, check_label_count, infer_num_labels
from polymnesia.tasks.constructed import construct, genre_tag_names, label_names
from polymnesia.tasks.qa import SpanData, build_span_examples, predict_answers, score_answers
from polymnesia.tasks.tagging import build_token_examples

#: the trivial answer each kind's baseline gives (sequence tasks: chance and majority class,
#: computed from the items in the report; see polymnesia.reports.baselines.label_baselines)
TRIVIAL = {
    "span": "the whole passage",
    "token": "the most frequent tag everywhere",
}


def task_records(
    records: list[dict[str, Any]], task: TaskConfig, seed: int = 0
) -> list[dict[str, Any]]:
    """The task's records: ``records`` as they are, or the constructed task built from them."""
    if task.constructed is None:
        return records
    return construct(task.constructed, records, task.passage_verses, seed)


def label_space(
    task: TaskConfig, source_records: list[dict[str, Any]]
) -> tuple[int, list[str] | None]:
    """``(num_labels, tag_names)`` from the config, else from the (unconstructed) source records."""
    if task.kind == "span":
        return 2, None
    if task.constructed == "genre_segments":
        names = label_names(source_records)
        if not names:
            raise DataError(f"task '{task.name}' needs labelled verses to build genre tags from")
        genres = max(names) + 1
        return 1 + 2 * genres, task.tag_names or genre_tag_names(genres, names)
    if task.num_labels:
        return check_label_count(task, task.num_labels, source_records), task.tag_names
    if task.tag_names:
        n = len(task.tag_names)
        return check_label_count(task, n, source_records, "the number of tag_names"), task.tag_names
    return infer_num_labels(source_records, task.kind), task.tag_names


def build_examples(
    records: list[dict[str, Any]], task: TaskConfig, tokenizer: Any, *, train: bool
) -> list[dict[str, Any]]:
    """Model inputs of ``records`` (already through :func:`task_records`)."""
    if task.kind == "span":
        return build_span_examples(
            records, tokenizer, task.max_length, train=train, echo=task.context == "echo"
        )
    if task.kind == "token":
        return build_token_examples(
            records, tokenizer, task.max_length, echo=task.context == "echo"
        )
    return build_sequence_examples(records, tokenizer, task.max_length)


def training_data(examples: list[dict[str, Any]], task: TaskConfig, pad_id: int) -> Any:
    """The training loop's data object for ``examples``."""
    return (
        SpanData(examples, pad_id) if task.kind == "span" else ClassificationData(examples, pad_id)
    )


def evaluate_task(
    model: torch.nn.Module,
    examples_by_lang: dict[str, list[dict[str, Any]]],
    task: TaskConfig,
    *,
    batch_size: int = 64,
    tag_names: list[str] | None = None,
    runtime: Runtime | None = None,
) -> dict[str, tuple[LanguageResult, dict[str, float]]]:
    """Per language: the task metric with its per-item columns, and every metric's value.

    Span tasks give item kind ``values`` (one exact match or F1 per question,
    the task's metric) and both ``exact_match`` and ``squad_f1``; the others
    give their :func:`~polymnesia.tasks.classification.evaluate_items_by_language` result.
    """
    if task.kind != "span":
        got = evaluate_items_by_language(
            model,
            examples_by_lang,
            kind=task.kind,
            metric=task.metric,
            batch_size=batch_size,
            tag_names=tag_names,
            runtime=runtime,
        )
        return {
            lang: (r, {task.metric: r.value, **_word_accuracy(task, r)}) for lang, r in got.items()
        }
    out = {}
    for lang, examples in examples_by_lang.items():
        if not examples:
            continue
        preds = predict_answers(model, examples, batch_size, task.max_answer_tokens, runtime)
        cols = score_answers(preds, examples)
        values = {m: sum(v) / len(v) for m, v in cols.items()}
        ids = [e["id"] for e in examples]
        result = LanguageResult(
            values[task.metric], "values", ids, {"values": cols[task.metric]}, 0
        )
        out[lang] = (result, values)
    return out


def _word_accuracy(task: TaskConfig, result: LanguageResult) -> dict[str, float]:
    """A span-F1 tagging task's word tag accuracy too (from the same predictions): span F1
    needs every word of a span right, so it can sit near 0 while the words are learned."""
    if "accuracy" not in secondary_metrics(task):
        return {}
    total = sum(result.columns["total"])
    return {"accuracy": sum(result.columns["correct"]) / total if total else float("nan")}


def secondary_metrics(task: TaskConfig) -> list[str]:
    """The metrics a task's scores carry besides ``task.metric``, with intervals and a trivial
    baseline where the items allow (a span-F1 tagging task: word accuracy)."""
    return ["accuracy"] if task.kind == "token" and task.metric == "span_f1" else []


def trivial_baselines(
    examples_by_lang: dict[str, list[dict[str, Any]]],
    task: TaskConfig,
    tag_names: list[str] | None = None,
    metric: str | None = None,
) -> dict[str, float]:
    """Per language, the task metric (or ``metric``) of a predictor that learned nothing about
    the task: span tasks answer every question with the whole (visible) passage, token tasks
    give every scored word the language's most frequent gold tag. Empty for sequence tasks
    (their chance and majority baselines come from the gold labels of the items)."""
    metric = metric or task.metric
    if task.kind not in TRIVIAL:
        return {}
    out = {}
    for lang, examples in examples_by_lang.items():
        if not examples:
            continue
        if task.kind == "span":
            passages = [
                str(e["context"][e["offsets"][0][0] : e["offsets"][-1][1]]).strip()
                for e in examples
            ]
            cols = score_answers(passages, examples)
            out[lang] = sum(cols[metric]) / len(examples)
        else:
            gold = [[int(x) for x in e["labels"] if int(x) != -100] for e in examples]
            counts: dict[int, int] = {}
            for g in gold:
                for x in g:
                    counts[x] = counts.get(x, 0) + 1
            top = max(counts, key=lambda k: (counts[k], -k))
            out[lang] = token_metric([[top] * len(g) for g in gold], gold, metric, tag_names)
    return out
