"""Trivial baselines of tagging and QA tasks: what a predictor that learned nothing scores."""

from __future__ import annotations

import math

import pytest

from polymnesia.metrics.uncertainty import Interval
from polymnesia.reports.baselines import trivial_table
from polymnesia.tasks.config import TaskConfig
from polymnesia.tasks.kinds import secondary_metrics, trivial_baselines


def _span_example(context: str, answer: str, visible: int) -> dict:
    # offsets of whitespace words; only the first `visible` words fit in the input
    words, pos, offsets = context.split(), 0, []
    for w in words:
        start = context.index(w, pos)
        offsets.append((start, start + len(w)))
        pos = start + len(w)
    return {"context": context, "offsets": offsets[:visible], "answers": [answer]}


def test_span_baseline_answers_the_visible_passage() -> None:
    task = TaskConfig(kind="span", metric="squad_f1")
    ex = [
        _span_example("alpha beta gamma delta", "gamma delta", 4),  # F1 2*(2/4*1)/(1/2+1)=2/3
        _span_example("alpha beta gamma delta", "alpha", 2),  # sees "alpha beta": F1 2/3
    ]
    got = trivial_baselines({"en": ex, "fr": []}, task)
    assert set(got) == {"en"} and got["en"] == pytest.approx(2 / 3)
    em = trivial_baselines({"en": ex}, TaskConfig(kind="span", metric="exact_match"))
    assert em["en"] == 0.0


def test_token_baseline_tags_every_word_with_the_most_frequent_tag() -> None:
    names = ["O", "B-law", "I-law"]
    ex = [
        {"labels": [-100, 1, 2, 2, -100]},  # B-law I-law I-law: one span
        {"labels": [0, 0, 1]},  # O O B-law: one span at the end
    ]
    # most frequent: I-law (2) and O (2) tie, B-law 2 too: the smallest id wins -> O everywhere
    acc = trivial_baselines({"en": ex}, TaskConfig(kind="token", metric="accuracy"), names)
    assert acc["en"] == pytest.approx(2 / 6)
    f1 = trivial_baselines(
        {"en": ex}, TaskConfig(kind="token", metric="span_f1", tag_names=names), names
    )
    assert f1["en"] == 0.0  # O predicts no span
    # a span-F1 task's word accuracy baseline: the same predictor, scored word by word
    task = TaskConfig(kind="token", metric="span_f1", tag_names=names)
    assert secondary_metrics(task) == ["accuracy"]
    assert secondary_metrics(TaskConfig(kind="token", metric="accuracy")) == []
    assert secondary_metrics(TaskConfig(kind="span", metric="squad_f1")) == []
    words = trivial_baselines({"en": ex}, task, names, metric="accuracy")
    assert words["en"] == pytest.approx(2 / 6)
    ex[1]["labels"] = [2, 2, 2]  # now I-law is the majority: one span per sentence
    f1 = trivial_baselines(
        {"en": ex}, TaskConfig(kind="token", metric="span_f1", tag_names=names), names
    )
    # sentence 1: pred (law,0,3) = gold; sentence 2: pred (law,0,3) = gold (lenient I- start)
    assert f1["en"] == 1.0


def test_sequence_tasks_have_no_trivial_answer_here() -> None:
    assert trivial_baselines({"en": [{"labels": 1}]}, TaskConfig(kind="sequence")) == {}


def test_trivial_table_verdicts() -> None:
    rows = [
        ("A", "en", "squad_f1", Interval(0.6, 0.55, 0.65, 100, 0.95, "b"), "whole", 0.5),
        ("B", "en", "squad_f1", Interval(0.3, 0.25, 0.35, 100, 0.95, "b"), "whole", 0.5),
        ("C", "en", "squad_f1", Interval(0.5, 0.45, 0.55, 100, 0.95, "b"), "whole", 0.5),
        ("D", "en", "squad_f1", Interval(0.5, math.nan, math.nan, 1, 0.95, "b"), "whole", 0.5),
    ]
    t = trivial_table(rows)
    assert [r[7] for r in t.rows] == [
        "above the trivial answer",
        "below the trivial answer",
        "not distinguishable",
        "not distinguishable",
    ]
    assert t.rows[0][6] == pytest.approx(1.2)
