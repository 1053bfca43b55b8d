"""SQuAD exact match and F1 (metrics/qa.py) on hand-checkable answers."""

from __future__ import annotations

import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics import METRICS
from polymnesia.metrics.qa import (
    exact_match,
    exact_match_one,
    f1_one,
    normalize_answer,
    question_scores,
    squad_f1,
)


def test_normalisation_follows_squad() -> None:
    assert normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert normalize_answer("an apple a day") == "apple day"
    assert normalize_answer("«Paris»—France") == "parisfrance"  # Unicode punctuation removed too
    assert normalize_answer("theatre") == "theatre"  # articles only as whole words


def test_exact_match_and_f1_by_hand() -> None:
    assert exact_match_one("the Eiffel Tower", "Eiffel tower.") == 1.0
    assert exact_match_one("Eiffel", "Eiffel Tower") == 0.0
    # pred {eiffel, tower, paris} vs gold {eiffel, tower}: p = 2/3, r = 1, F1 = 0.8
    assert f1_one("Eiffel Tower Paris", "the Eiffel Tower") == pytest.approx(0.8)
    # repeated tokens count once per occurrence: pred [a1 a1] vs gold [a1]: p 1/2, r 1 -> 2/3
    assert f1_one("x x", "x") == pytest.approx(2 / 3)
    assert f1_one("dog", "cat") == 0.0
    assert f1_one("", "cat") == 0.0  # SQuAD v1.1: no overlap, no credit


def test_best_over_gold_answers_and_corpus_mean() -> None:
    assert question_scores("Tower", ["Eiffel Tower", "tower"]) == (1.0, 1.0)
    preds = ["Eiffel Tower Paris", "cat"]
    golds = [["the Eiffel Tower"], ["dog", "a cat"]]
    assert exact_match(preds, golds) == pytest.approx(0.5)  # 0 and 1
    assert squad_f1(preds, golds) == pytest.approx((0.8 + 1.0) / 2)
    assert METRICS.get("squad_f1").higher_is_better


def test_bad_input_is_one_line() -> None:
    with pytest.raises(PolymnesiaError, match="one prediction per question"):
        exact_match(["a"], [["a"], ["b"]])
    with pytest.raises(PolymnesiaError, match="at least one gold answer"):
        squad_f1(["a"], [[]])
