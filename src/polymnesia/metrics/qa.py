"""Extractive question answering scores: exact match and token F1, as in SQuAD.

Rajpurkar et al. 2016 (SQuAD v1.1, the official ``evaluate-v1.1.py``), which
XTREME applies to TyDiQA-GoldP (Mao et al. 2022, Tables 2 and 5): both the
prediction and each gold answer are normalised (lower-cased, punctuation
removed, the English articles *a*, *an*, *the* removed, whitespace
collapsed); exact match is 1 when the normalised strings are equal, F1 is the
harmonic mean of precision and recall of the bag of whitespace tokens; each
question takes the maximum over its gold answers, a corpus the mean over
questions (on a 0-1 scale; SQuAD prints 0-100).

Departure: punctuation is every character of ``string.punctuation`` *and*
every Unicode punctuation character (category ``P*``), as MLQA's script
does for non-English text; for ASCII text this is exactly SQuAD's rule.
Tokens are whitespace-separated, so for Chinese or Japanese (no spaces)
F1 is close to exact match (MLQA splits those into characters).
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.base import register_metric

_ASCII_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD's ``normalize_answer``: lower case, no punctuation, no articles, single spaces."""
    lowered = text.lower()
    kept = "".join(
        ch
        for ch in lowered
        if ch not in _ASCII_PUNCT and not unicodedata.category(ch).startswith("P")
    )
    return " ".join(_ARTICLES.sub(" ", kept).split())


def exact_match_one(prediction: str, gold: str) -> float:
    """1.0 when the normalised prediction equals the normalised gold answer."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_one(prediction: str, gold: str) -> float:
    """Token F1 of one prediction against one gold answer (SQuAD v1.1: 0 when nothing overlaps)."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def _best(fn: Callable[[str, str], float], prediction: str, golds: Sequence[str]) -> float:
    if not golds:
        raise PolymnesiaError("a question needs at least one gold answer")
    return max(fn(prediction, g) for g in golds)


def question_scores(prediction: str, golds: Sequence[str]) -> tuple[float, float]:
    """``(exact match, F1)`` of one question: the maximum over its gold answers."""
    return _best(exact_match_one, prediction, golds), _best(f1_one, prediction, golds)


def _corpus_mean(
    fn: Callable[[str, str], float],
    predictions: Sequence[str],
    golds: Sequence[Sequence[str]],
) -> float:
    """Mean over questions of ``fn``'s best value against each question's gold answers."""
    if len(predictions) != len(golds) or not predictions:
        raise PolymnesiaError(
            f"need one prediction per question, got {len(predictions)} predictions for "
            f"{len(golds)} questions"
        )
    return sum(_best(fn, p, g) for p, g in zip(predictions, golds, strict=True)) / len(predictions)


@register_metric(
    "exact_match",
    higher_is_better=True,
    description="SQuAD exact match of normalised answers (mean over questions, 0-1)",
)
def exact_match(predictions: Sequence[str], golds: Sequence[Sequence[str]]) -> float:
    """Mean over questions of the best exact match against each question's gold answers."""
    return _corpus_mean(exact_match_one, predictions, golds)


@register_metric(
    "squad_f1",
    higher_is_better=True,
    description="SQuAD token F1 of normalised answers (mean over questions, 0-1)",
)
def squad_f1(predictions: Sequence[str], golds: Sequence[Sequence[str]]) -> float:
    """Mean over questions of the best token F1 against each question's gold answers."""
    return _corpus_mean(f1_one, predictions, golds)
