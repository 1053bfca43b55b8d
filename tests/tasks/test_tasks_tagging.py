"""Hand-checkable tests of token examples and the constructed language-ID tagging set."""

from __future__ import annotations

import pytest
import torch
from tasks_helpers import record  # type: ignore[import-not-found]

from polymnesia.errors import DataError, PolymnesiaError
from polymnesia.tasks.classification import evaluate_by_language, load_classifier
from polymnesia.tasks.tagging import build_token_examples, language_id_tagging


def test_first_subtoken_gets_the_tag(tiny_tok) -> None:  # type: ignore[no-untyped-def]
    rec = record(1, "en", "earth zqxj", None, tags=[1, 2])
    (ex,) = build_token_examples([rec], tiny_tok, max_length=64)
    w1 = tiny_tok("earth", add_special_tokens=False)["input_ids"]
    w2 = tiny_tok(" zqxj", add_special_tokens=False)["input_ids"]
    assert len(w2) > 1  # an unseen word splits into several pieces
    assert ex["input_ids"] == [tiny_tok.bos_token_id, *w1, *w2]
    assert ex["labels"] == [-100, 1, *[-100] * (len(w1) - 1), 2, *[-100] * (len(w2) - 1)]
    # the per-word pieces are exactly the tokenization of the whole text
    assert ex["input_ids"][1:] == tiny_tok("earth zqxj", add_special_tokens=False)["input_ids"]


def test_truncation_keeps_whole_words_and_checks_tag_count(tiny_tok) -> None:  # type: ignore[no-untyped-def]
    rec = record(1, "en", "earth zqxj", None, tags=[1, 2])
    (ex,) = build_token_examples([rec], tiny_tok, max_length=3)
    assert [x for x in ex["labels"] if x != -100] == [1]
    with pytest.raises(DataError, match="2 words but 1 tags"):
        build_token_examples([record(2, "en", "a b", None, tags=[0])], tiny_tok, 8)
    assert build_token_examples([record(3, "en", "untagged", 0)], tiny_tok, 8) == []


def test_echo_lays_the_words_out_twice_and_tags_the_second_copy(tiny_tok) -> None:  # type: ignore[no-untyped-def]
    rec = record(1, "en", "earth zqxj", None, tags=[1, 2])
    (plain,) = build_token_examples([rec], tiny_tok, max_length=64)
    (ex,) = build_token_examples([rec], tiny_tok, max_length=64, echo=True)
    bos, eos = tiny_tok.bos_token_id, tiny_tok.eos_token_id
    body = plain["input_ids"][1:]
    assert ex["input_ids"] == [bos, *body, eos, *body]
    assert ex["labels"] == [-100] * (len(body) + 2) + plain["labels"][1:]
    # the same tags are scored, in the same order
    assert [x for x in ex["labels"] if x != -100] == [1, 2]
    # max_length counts both copies: each copy keeps the whole words that fit in half of it
    w1 = len(tiny_tok("earth", add_special_tokens=False)["input_ids"])
    (cut,) = build_token_examples([rec], tiny_tok, max_length=2 + 2 * w1, echo=True)
    assert [x for x in cut["labels"] if x != -100] == [1]
    assert len(cut["input_ids"]) == 2 + 2 * w1
    with pytest.raises(PolymnesiaError, match="at least 4 with echo"):
        build_token_examples([rec], tiny_tok, max_length=3, echo=True)


def test_language_id_tagging_is_constructed_and_aligned() -> None:
    a = [record(1, "en", "a b c d", 0), record(2, "en", "e f", 0), record(9, "en", "x y", 0)]
    b = [record(1, "de", "A B C D E F", 0), record(2, "de", "G H", 0)]
    out = language_id_tagging(a, b, seed=0)
    assert [r["id"] for r in out] == ["1.1.1", "1.1.2"]  # 1.1.9 has no German verse
    for r in out:
        words, tags = r["text"].split(), r["meta"]["tags"]
        assert len(words) == len(tags) and r["meta"]["constructed"] is True
        k = tags.index(1)
        assert tags == [0] * k + [1] * (len(tags) - k) and k >= 1
        assert all(w.islower() for w in words[:k]) and all(w.isupper() for w in words[k:])
    assert out == language_id_tagging(a, b, seed=0)
    bio = language_id_tagging(a, b, seed=0, scheme="bio")
    assert bio[1]["meta"]["tags"] == [1, 3] and bio[1]["meta"]["tag_names"][3] == "B-de"
    with pytest.raises(DataError):
        language_id_tagging(a, a, seed=0)


def test_token_classifier_scores(lm_folder) -> None:  # type: ignore[no-untyped-def]
    model, tok = load_classifier(lm_folder, num_labels=5, kind="token")
    a = [record(1, "en", "the earth was void", 0)]
    b = [record(1, "de", "die Erde war leer", 0)]
    recs = language_id_tagging(a, b, seed=1, scheme="bio")
    ex = build_token_examples(recs, tok, 64)
    names = recs[0]["meta"]["tag_names"]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ex[0]["input_ids"]])).logits[0]
    keep = torch.tensor(ex[0]["labels"]) != -100
    pred = logits.argmax(-1)[keep].tolist()
    gold = [x for x in ex[0]["labels"] if x != -100]
    acc = evaluate_by_language(model, {"x": ex}, kind="token", metric="accuracy")["x"]
    assert acc == pytest.approx(sum(p == g for p, g in zip(pred, gold, strict=True)) / len(gold))
    f1 = evaluate_by_language(model, {"x": ex}, kind="token", metric="span_f1", tag_names=names)
    assert 0.0 <= f1["x"] <= 1.0
