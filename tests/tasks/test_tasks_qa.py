"""Extractive QA on a decoder body (tasks/qa.py) and the constructed genre tasks
(tasks/constructed.py).
"""

from __future__ import annotations

import pytest
import torch
from tasks_helpers import record

from polymnesia.tasks.constructed import genre_question, genre_segments, passages
from polymnesia.tasks.qa import (
    best_spans,
    build_span_examples,
    char_span_to_tokens,
    collate_spans,
    predict_answers,
    score_answers,
    span_text,
)


def test_char_span_to_tokens_by_hand() -> None:
    offsets = [(0, 2), (2, 5), (5, 9), (9, 12)]  # "In|_th|e_be|gin"
    assert char_span_to_tokens(offsets, 3, 8) == (1, 2)
    assert char_span_to_tokens(offsets, 0, 2) == (0, 0)
    assert char_span_to_tokens(offsets, 20, 25) is None


def test_best_spans_by_hand() -> None:
    start = torch.tensor([[0.0, 5.0, 1.0, 9.0], [1.0, 1.0, 1.0, 1.0]])
    end = torch.tensor([[0.0, 1.0, 4.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    allowed = torch.tensor([[False, True, True, True], [False, False, False, False]])
    # row 0: (3,3) = 9, (1,2) = 9, (3,...) only j=3; ties broken by the first flat index: (1,2)
    assert best_spans(start, end, allowed, max_answer_tokens=4) == [(1, 2), (-1, -1)]
    # with answers of at most 1 token, (3, 3) = 9 beats (1, 1) = 6
    assert best_spans(start, end, allowed, max_answer_tokens=1)[0] == (3, 3)


def test_span_examples_locate_the_answer(tiny_tok) -> None:  # type: ignore[no-untyped-def]
    ctx = "In the beginning God created the heavens and the earth."
    rec = record(
        1, "en", ctx, None, question="who", answers={"text": ["God"], "answer_start": [17]}
    )
    (ex,) = build_span_examples([rec], tiny_tok, max_length=64)
    assert span_text(ex, ex["start_positions"], ex["end_positions"]) == "God"
    batch = collate_spans([ex, ex], tiny_tok.pad_token_id)
    assert batch["start_positions"].tolist() == [ex["start_positions"]] * 2
    # a window that cuts the answer off: dropped for training, kept (positions -1) for testing
    assert build_span_examples([rec], tiny_tok, max_length=8, train=True) == []
    (cut,) = build_span_examples([rec], tiny_tok, max_length=8)
    assert cut["start_positions"] == -1


def test_echo_answers_in_the_second_copy_of_the_passage(tiny_tok) -> None:  # type: ignore[no-untyped-def]
    ctx = "In the beginning God created the heavens and the earth."
    rec = record(
        1, "en", ctx, None, question="who", answers={"text": ["God"], "answer_start": [17]}
    )
    (plain,) = build_span_examples([rec], tiny_tok, max_length=64)
    (ex,) = build_span_examples([rec], tiny_tok, max_length=128, echo=True)
    head, passage = (
        plain["input_ids"][: plain["ctx_start"]],
        plain["input_ids"][plain["ctx_start"] :],
    )
    assert ex["input_ids"] == [*head, *passage, tiny_tok.eos_token_id, *passage]
    assert ex["ctx_start"] == len(head) + len(passage) + 1
    shift = ex["ctx_start"] - plain["ctx_start"]
    assert (ex["start_positions"], ex["end_positions"]) == (
        plain["start_positions"] + shift,
        plain["end_positions"] + shift,
    )
    assert span_text(ex, ex["start_positions"], ex["end_positions"]) == "God"
    # each copy gets half the room the question leaves: a window that cuts the answer off
    room = (20 - len(head) - 1) // 2
    (cut,) = build_span_examples([rec], tiny_tok, max_length=20, echo=True)
    assert len(cut["input_ids"]) == len(head) + 2 * room + 1
    assert cut["offsets"] == plain["offsets"][:room]


@pytest.mark.parametrize("echo", [False, True])
def test_span_model_trains_and_scores(lm_folder, tiny_tok, echo: bool) -> None:  # type: ignore[no-untyped-def]
    from polymnesia.tasks.classification import load_classifier

    model, tok = load_classifier(lm_folder, 2, "span", seed=0)
    ctx = "In the beginning God created the heavens and the earth."
    rec = record(
        1, "en", ctx, None, question="who", answers={"text": ["God"], "answer_start": [17]}
    )
    examples = build_span_examples([rec], tok, max_length=128, echo=echo)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-2)
    batch = collate_spans(examples, tok.pad_token_id)
    for _ in range(30):
        loss = model(**batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    (pred,) = predict_answers(model, examples, max_answer_tokens=8)
    assert pred == "God"
    assert score_answers([pred], examples) == {"exact_match": [1.0], "squad_f1": [1.0]}


def _verses() -> list[dict]:
    texts = [
        "alpha beta gamma",
        "delta epsilon",
        "zeta eta theta iota",
        "kappa lambda",
        "mu nu",
        "xi omicron",
    ]
    return [record(i, "en", t, i % 3, genre=f"g{i % 3}") for i, t in enumerate(texts)]


def test_passages_take_distinct_genres_and_same_ids_in_every_language() -> None:
    groups = passages(_verses(), k=3, seed=0)
    assert len(groups) == 2
    assert all(sorted(r["label"] for r in g) == [0, 1, 2] for g in groups)
    other = [{**r, "lang": "de", "text": r["text"].upper()} for r in _verses()]
    assert [[r["id"] for r in g] for g in passages(other, 3, 0)] == [
        [r["id"] for r in g] for g in groups
    ]


def test_genre_segments_tags_by_hand() -> None:
    recs = genre_segments(_verses(), k=3, seed=0)
    for r in recs:
        words, tags = r["text"].split(), r["meta"]["tags"]
        assert len(words) == len(tags) and r["meta"]["constructed"]
        begins = [t for t in tags if t % 2 == 1]  # B- tags are odd: 1 + 2g
        assert sorted((t - 1) // 2 for t in begins) == [0, 1, 2]
        assert tags[0] % 2 == 1


def test_genre_question_answer_is_the_verse_of_that_genre() -> None:
    for r in genre_question(_verses(), k=3, seed=0):
        ans = r["meta"]["answers"]
        start, text = ans["answer_start"][0], ans["text"][0]
        assert r["text"][start : start + len(text)] == text
        asked = r["meta"]["question"]
        verse = next(v for v in _verses() if v["text"] == text)
        assert verse["meta"]["genre"] == asked


@pytest.mark.parametrize("k", [1])
def test_passage_needs_two_verses(k: int) -> None:
    from polymnesia.errors import PolymnesiaError

    with pytest.raises(PolymnesiaError, match="at least 2"):
        passages(_verses(), k, 0)
