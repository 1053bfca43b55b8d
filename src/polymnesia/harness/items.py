"""lm-evaluation-harness's per-document samples as item sets (kind ``docs``).

lm-eval scores every document and keeps the values in its samples (``log_samples``):
``{"doc_id": 0, "doc_hash": ..., "filter": "none", "metrics": ["acc", "acc_norm"],
"acc": 1.0, "acc_norm": 0.0, ...}``. :func:`samples_to_items` makes one
:class:`~polymnesia.items.ItemSet` per task with a column per metric whose per-document
mean *is* lm-eval's score for that task (checked: a metric lm-eval aggregates otherwise,
such as corpus BLEU, gets no column), so a harness score gets a bootstrap interval over
its documents and two runs scored on the same documents can be compared item by item.
Documents are identified by lm-eval's ``doc_hash`` (their content), else ``doc_id``.

lm-eval keeps a translation task's ``chrf`` per document as a (reference, prediction) pair
and aggregates it over the corpus, so it gets no ``chrf`` column; the documents' sentence
chrF on a 0-1 scale is kept as :data:`SENTENCE_CHRF` instead, the per-document value of a
translation task in the two-phase CFT paper's abilities. A multiple-choice task's documents also
keep
their chance accuracy (:data:`CHANCE`, one over the number of choices lm-eval scored), so a
report can tell a model at chance from one that answers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from sacrebleu.metrics import CHRF

from polymnesia.harness.run import finite_number, task_lang
from polymnesia.items import ItemSet

#: how far a column's mean may be from lm-eval's aggregate and still count as that score
TOLERANCE = 1e-9
#: the column of each document's sentence chrF / 100 (a translation task's documents)
SENTENCE_CHRF = "chrf_sentence"
#: the column of each multiple-choice document's chance accuracy (1 / its number of choices)
CHANCE = "chance"
_CHRF = CHRF()


def samples_to_items(
    results: Mapping[str, Any],
    model: str,
    *,
    task_langs: Mapping[str, str] | None = None,
    **fields: Any,
) -> list[ItemSet]:
    """One ``docs`` item set per task of ``results`` that kept samples (``fields``: the
    identity fields the task's scores carry, e.g. size and seed)."""
    out = []
    aggregates = results.get("results") or {}
    for task, rows in (results.get("samples") or {}).items():
        columns, ids = _columns(rows, aggregates.get(task) or {})
        if columns:
            out.append(
                ItemSet(
                    model, task_lang(task, task_langs), "docs", ids, columns, task=task, **fields
                )
            )
    return out


def _columns(
    rows: list[Mapping[str, Any]], aggregate: Mapping[str, Any]
) -> tuple[dict[str, list[float]], list[Any]]:
    by_filter: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        by_filter[str(r.get("filter", "none"))].append(r)
    columns: dict[str, list[float]] = {}
    ids: list[Any] | None = None
    for flt, mine in by_filter.items():
        mine = sorted(mine, key=lambda r: int(r.get("doc_id", 0)))
        these = [r.get("doc_hash") or r.get("doc_id") for r in mine]
        if ids is not None and these != ids:
            continue  # another filter scored other documents: not one item set
        for metric in mine[0].get("metrics") or []:
            if metric == "chrf" and flt == "none":
                sentence = [_sentence_chrf(r.get(metric)) for r in mine]
                if all(v is not None for v in sentence):
                    columns[SENTENCE_CHRF] = [float(v) for v in sentence if v is not None]
                    ids = these
            values = [_value(r.get(metric)) for r in mine]
            want = finite_number(aggregate.get(f"{metric},{flt}"))
            kept = [v for v in values if v is not None]
            if want is None or len(kept) != len(values):
                continue
            if abs(sum(kept) / len(kept) - want) > TOLERANCE * max(1.0, abs(want)):
                continue  # lm-eval's score is not the mean over documents
            columns[metric if flt == "none" else f"{metric}/{flt}"] = kept
            ids = these
        if flt == "none" and "acc" in columns and ids == these:
            chance = _chance(mine)
            if chance is not None:
                columns[CHANCE] = chance
    return columns, ids or []


def _chance(rows: list[Mapping[str, Any]]) -> list[float] | None:
    """Each multiple-choice document's uniform-guess accuracy, one over its number of choices
    (lm-eval logs one request per choice in ``arguments``); None where a document has fewer
    than two (a single loglikelihood request is not a choice among answers)."""
    counts = [r.get("arguments") for r in rows]
    if not all(isinstance(c, (list, tuple, dict)) and len(c) >= 2 for c in counts):
        return None
    return [1.0 / len(c) for c in counts if c is not None]


def _value(x: Any) -> float | None:
    """A document's value: a number, or a bool (IFEval's per-prompt pass) as 0 or 1."""
    return float(x) if isinstance(x, bool) else finite_number(x)


def _sentence_chrf(pair: Any) -> float | None:
    """Sentence chrF / 100 of lm-eval's per-document ``(reference, prediction)`` pair."""
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        return None
    ref, pred = (str(x[0] if isinstance(x, list) else x) for x in pair)
    return float(_CHRF.sentence_score(pred, [ref]).score) / 100.0
