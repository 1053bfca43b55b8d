"""Classification and sequence-labelling scores: accuracy, macro-F1, entity-span F1.

Mao et al. 2022 (NER on WikiANN, XNLI) and Khelli et al. 2025 (slot filling on MASSIVE) report
F1; span F1 for BIO tags follows the CoNLL-2000 ``conlleval`` chunking that
seqeval's default mode reproduces (implemented here, no seqeval dependency).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.base import accuracy_of, macro_f1_of, ratio_of, register_metric, summed

Span = tuple[str, int, int]  # (type, start, end exclusive)


def _pair(pred: npt.ArrayLike, gold: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    p, g = np.asarray(pred), np.asarray(gold)
    if p.shape != g.shape or p.ndim != 1 or p.size == 0:
        raise PolymnesiaError(
            f"pred and gold must be equal-length non-empty label lists, got shapes {p.shape} and "
            f"{g.shape}"
        )
    return p, g


@register_metric(
    "accuracy",
    higher_is_better=True,
    description="share of predictions equal to the gold label",
    title="accuracy",
    # label items: one prediction each; token items: correct / total tags per sentence
    items={"label": accuracy_of(), "token": ratio_of("correct", "total", name="accuracy")},
)
def accuracy(pred: npt.ArrayLike, gold: npt.ArrayLike) -> float:
    """Accuracy: ``mean(pred == gold)``."""
    p, g = _pair(pred, gold)
    return float(np.mean(p == g))


@register_metric(
    "macro_f1",
    higher_is_better=True,
    description=(
        "unweighted mean over labels of per-label F1 (labels in gold or pred, or 0..n_labels-1)"
    ),
    items={"label": macro_f1_of()},
    title="macro-F1",
)
def macro_f1(pred: npt.ArrayLike, gold: npt.ArrayLike, n_labels: int | None = None) -> float:
    """Macro-averaged F1: mean over labels of ``2 TP / (2 TP + FP + FN)``.

    The labels are ``0..n_labels-1`` when ``n_labels`` is given (a label never
    predicted nor present scores F1 = 0 then, as in scikit-learn with explicit
    ``labels``), otherwise the union of labels seen in ``gold`` and ``pred``.
    """
    p, g = _pair(pred, gold)
    labels = np.arange(n_labels) if n_labels is not None else np.union1d(p, g)
    scores = []
    for label in labels:
        tp = np.sum((p == label) & (g == label))
        denom = np.sum(p == label) + np.sum(g == label)  # = 2TP + FP + FN
        scores.append(2 * tp / denom if denom else 0.0)
    return float(np.mean(scores))


def _split(tag: str) -> tuple[str, str]:
    if tag in ("O", ""):
        return "O", ""
    prefix, _, kind = tag.partition("-")
    if prefix not in ("B", "I") or not kind:
        raise PolymnesiaError(f"tag '{tag}' is not BIO; accepted: O, B-<type>, I-<type>")
    return prefix, kind


def bio_spans(tags: Sequence[str]) -> set[Span]:
    """Entity spans of a BIO sequence, conlleval-style.

    A span starts at ``B-X``, or at ``I-X`` whose previous tag is ``O`` or of
    another type (a lenient start, as conlleval and seqeval's default mode
    do); it ends before the next tag that does not continue it with ``I-X``.
    """
    spans: set[Span] = set()
    kind, start = "", -1
    for i, tag in enumerate([*tags, "O"]):
        prefix, cur = _split(tag)
        continues = prefix == "I" and cur == kind
        if kind and not continues:
            spans.add((kind, start, i))
            kind = ""
        if prefix != "O" and not continues:
            kind, start = cur, i
    return spans


@register_metric(
    "span_f1",
    higher_is_better=True,
    description="micro F1 over exactly matching BIO entity spans (conlleval / seqeval default)",
    title="span F1",
    items={
        "token": summed(("tp", "n_pred", "n_gold"), lambda s: span_f1_from_counts(s), "span_f1")
    },
)
def span_f1(pred_tags: Sequence[Sequence[str]], gold_tags: Sequence[Sequence[str]]) -> float:
    """Micro-averaged span F1 over sentences: a predicted span counts if type and bounds match.

    ``pred_tags[s]`` and ``gold_tags[s]`` are the tag sequences of sentence
    ``s``. F1 = ``2 TP / (n_pred + n_gold)``; 0 when both are empty.
    """
    if len(pred_tags) != len(gold_tags):
        raise PolymnesiaError(
            f"need one prediction per sentence, got {len(pred_tags)} and {len(gold_tags)}"
        )
    tp = n_pred = n_gold = 0
    for s, (p, g) in enumerate(zip(pred_tags, gold_tags, strict=True)):
        if len(p) != len(g):
            raise PolymnesiaError(f"sentence {s}: {len(p)} predicted tags for {len(g)} gold tags")
        ps, gs = bio_spans(p), bio_spans(g)
        tp, n_pred, n_gold = tp + len(ps & gs), n_pred + len(ps), n_gold + len(gs)
    return 2 * tp / (n_pred + n_gold) if n_pred + n_gold else 0.0


def span_f1_from_counts(sums: np.ndarray) -> np.ndarray:
    """Span F1 ``2 TP / (n_pred + n_gold)`` of summed ``[B, 3]`` counts (TP, n_pred, n_gold);
    0 where both are empty."""
    denom = sums[:, 1] + sums[:, 2]
    return np.where(denom > 0, 2 * sums[:, 0] / np.maximum(denom, 1e-300), 0.0)
