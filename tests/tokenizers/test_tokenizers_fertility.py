"""Fertility counts on a stub tokenizer and on real ones."""

from __future__ import annotations

import math

import pytest
from tokenizers_corpus import sentences

from polymnesia.errors import DataError
from polymnesia.tokenizers.fertility import count_words, fertility, fertility_table


class WhitespaceTokenizer:
    """One token per whitespace chunk: counts are easy to check by hand."""

    def __call__(self, texts, add_special_tokens=True):  # type: ignore[no-untyped-def]
        return {"input_ids": [list(range(len(t.split()))) for t in texts]}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("hello world", 2),
        ("  spaced   out  ", 2),
        ("東京2024年", 4),  # 東, 京, 年 + "2024"
        ("先生は本を読みます。", 10),  # 9 kana/kanji characters + "。" (punctuation, one word)
        ("สวัสดี ครับ", 7),  # Thai vowel signs are combining marks: 4 + 3 base characters
        ("", 0),
    ],
)
def test_count_words(text, words):
    assert count_words(text) == words


def test_fertility_by_hand():
    f = fertility(WhitespaceTokenizer(), ["ab cd", "é"])
    assert (f["n_tokens"], f["words"], f["bytes"], f["chars"]) == (3, 3, 7, 6)
    assert f["tokens_per_word"] == 1.0
    assert math.isclose(f["tokens_per_byte"], 3 / 7)
    assert f["tokens_per_char"] == 0.5


def test_unseen_script_is_one_token_per_byte(base_tok):
    texts = sentences("ja")[:5]
    f = fertility(base_tok, texts)
    assert f["n_tokens"] == f["bytes"]
    assert f["tokens_per_byte"] == 1.0


def test_fertility_table_rows(base_tok, merged):
    tok, _ = merged
    rows = fertility_table(
        {"base": base_tok, "merged": tok}, {"ja": sentences("ja"), "en": sentences("en")}
    )
    assert [(r["lang"], r["tokenizer"]) for r in rows] == [
        ("en", "base"),
        ("en", "merged"),
        ("ja", "base"),
        ("ja", "merged"),
    ]
    assert rows[0]["n_tokens"] == rows[1]["n_tokens"]
    assert rows[3]["tokens_per_word"] < rows[2]["tokens_per_word"] / 2


def test_bad_inputs_are_refused(base_tok):
    with pytest.raises(DataError, match="at least one text"):
        fertility(base_tok, [])
    with pytest.raises(DataError, match="one string"):
        fertility(base_tok, "a text")
    with pytest.raises(DataError, match="non-empty"):
        fertility(base_tok, [""])
