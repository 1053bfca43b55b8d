"""Vocabulary merge of byte-level BPE tokenizers (Aggarwal et al. 2024, section 3)."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from tokenizers_corpus import BASE_LANGS, HELD_OUT, NEW_LANGS, sentences
from transformers import PreTrainedTokenizerFast

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.tokenizers.bpe import load_tokenizer, save_tokenizer
from polymnesia.tokenizers.merge import merge_tokenizer_json, merge_tokenizers, new_token_ids


def _ids(tok, text):  # type: ignore[no-untyped-def]
    return tok(text, add_special_tokens=False)["input_ids"]


def test_every_base_token_keeps_its_id(base_tok, merged):
    tok, _ = merged
    merged_vocab = tok.get_vocab()
    for token, token_id in base_tok.get_vocab().items():
        assert merged_vocab[token] == token_id


def test_sizes_add_up(base_tok, new_tok, merged):
    tok, report = merged
    assert (report.base_size, report.new_size) == (600, 500)
    # all 238 learned (non-byte, non-special) tokens of the new vocabulary are new scripts
    assert report.added == 500 - 256 - 6 == 238
    assert report.merged_size == len(tok) == report.base_size + report.added
    assert report.dropped == 0
    ids = new_token_ids(report)
    assert ids == range(600, 838)
    base_vocab = base_tok.get_vocab()
    assert all(tok.convert_ids_to_tokens(i) not in base_vocab for i in ids)


def test_special_tokens_and_settings_are_the_base(base_tok, merged):
    tok, _ = merged
    assert tok.all_special_tokens == base_tok.all_special_tokens
    assert [tok.convert_tokens_to_ids(t) for t in tok.all_special_tokens] == [
        base_tok.convert_tokens_to_ids(t) for t in base_tok.all_special_tokens
    ]
    assert tok.model_max_length == base_tok.model_max_length == 256
    assert tok.chat_template == base_tok.chat_template


def test_base_languages_tokenize_identically(base_tok, merged):
    tok, _ = merged
    for lang in BASE_LANGS:
        for text in [*sentences(lang), HELD_OUT[lang]]:
            assert _ids(tok, text) == _ids(base_tok, text), text


def test_new_languages_get_fewer_tokens(base_tok, merged):
    tok, _ = merged
    for lang in NEW_LANGS:
        assert len(_ids(tok, HELD_OUT[lang])) < len(_ids(base_tok, HELD_OUT[lang])) * 0.7, lang


@pytest.mark.parametrize("lang", sorted(HELD_OUT))
def test_round_trip_after_merge(merged, lang):
    tok, _ = merged
    text = HELD_OUT[lang]
    assert tok.decode(_ids(tok, text)) == text


def test_cap_on_new_tokens(base_tok, new_tok, merged):
    full, _ = merged
    tok, report = merge_tokenizers(base_tok, new_tok, max_new_tokens=50)
    assert (report.added, report.merged_size, len(tok)) == (50, 650, 650)
    assert report.merges_added >= 50
    text = HELD_OUT["ja"]
    assert tok.decode(_ids(tok, text)) == text
    assert len(_ids(full, text)) <= len(_ids(tok, text)) < len(_ids(base_tok, text))
    assert merge_tokenizers(base_tok, new_tok, max_new_tokens=0)[1].added == 0
    with pytest.raises(ConfigError, match="max_new_tokens"):
        merge_tokenizers(base_tok, new_tok, max_new_tokens=-1)


def test_merged_tokenizer_saves_and_loads(merged, tmp_path):
    tok, _ = merged
    save_tokenizer(tok, tmp_path / "merged")
    loaded = load_tokenizer(str(tmp_path / "merged"))
    assert len(loaded) == len(tok)
    for text in HELD_OUT.values():
        assert _ids(loaded, text) == _ids(tok, text)


def _byte_level_json(vocab: dict[str, int], merges: list[list[str]]) -> dict:  # type: ignore[type-arg]
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m) for m in merges]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    return json.loads(backend.to_str())


def test_token_whose_parts_are_missing_is_dropped():
    alphabet = {"a": 0, "b": 1, "c": 2, "d": 3}
    base = _byte_level_json(alphabet, [])
    # "bcd" comes before "cd" in id order: when it is reached, part "cd" is not there yet.
    new = _byte_level_json({**alphabet, "bcd": 4, "cd": 5}, [["c", "d"], ["b", "cd"]])
    merged, added, dropped, n_merges, first = merge_tokenizer_json(base, new)
    assert (added, dropped, n_merges, first) == (1, 1, 1, 4)
    assert merged["model"]["vocab"] == {**alphabet, "cd": 4}
    assert merged["model"]["merges"] == [["c", "d"]]


def test_new_merge_is_appended_after_base_merges():
    alphabet = {"a": 0, "b": 1, "c": 2}
    base = _byte_level_json({**alphabet, "ab": 3}, [["a", "b"]])
    new = _byte_level_json({**alphabet, "bc": 3, "abc": 4}, [["b", "c"], ["a", "bc"]])
    merged, added, dropped, _, _ = merge_tokenizer_json(base, new)
    assert (added, dropped) == (2, 0)
    assert merged["model"]["vocab"] == {**alphabet, "ab": 3, "bc": 4, "abc": 5}
    assert merged["model"]["merges"] == [["a", "b"], ["b", "c"], ["a", "bc"]]
    # "abc": the base merge a+b (rank 0) wins, then no rule joins "ab"+"c".
    assert Tokenizer.from_str(json.dumps(merged)).encode("abc").tokens == ["ab", "c"]


def test_collision_with_special_token_is_one_line(base_tok):
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    vocab.update({"<s": len(vocab), "<s>": len(vocab) + 1})
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[("<", "s"), ("<s", ">")]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    new = PreTrainedTokenizerFast(tokenizer_object=backend)
    with pytest.raises(PolymnesiaError, match="would collide with special token '<s>'") as err:
        merge_tokenizers(base_tok, new)
    assert "\n" not in str(err.value)


def test_non_byte_level_tokenizer_is_refused(base_tok):
    backend = Tokenizer(models.WordLevel(vocab={"[UNK]": 0, "hello": 1}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    new = PreTrainedTokenizerFast(tokenizer_object=backend)
    with pytest.raises(
        PolymnesiaError, match="byte-level BPE tokenizers only; the new tokenizer is WordLevel"
    ):
        merge_tokenizers(base_tok, new)
