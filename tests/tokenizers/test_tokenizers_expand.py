"""Vocabulary expansion in each tokenizer family, trained here on the packaged UDHR.

Base: English, French, German; new: Russian, Ukrainian, Bulgarian (Cyrillic);
held out: Macedonian (new script, not trained on) and Spanish (base script).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from polymnesia import testing
from polymnesia.errors import PolymnesiaError
from polymnesia.tokenizers import spm
from polymnesia.tokenizers.expand import expand_tokenizer, tokenizer_family

BASE = testing.corpus(("en", "fr", "de"))
NEW = testing.corpus(("ru", "uk", "bg"))
HELD_NEW = testing.corpus(("mk",))
KINDS = ["sp_bpe", "unigram", "tiktoken", "polymnesia_bpe"]


def make_base(kind: str) -> tuple[Any, bytes | None]:
    if kind in ("sp_bpe", "unigram"):
        return testing.tiny_sentencepiece(BASE, 400, "bpe" if kind == "sp_bpe" else "unigram")
    if kind == "tiktoken":
        return testing.tiny_tiktoken_bpe(BASE, 400), None
    return testing.tiny_bpe(BASE, 400), None


@pytest.fixture(scope="module", params=KINDS)
def case(request: pytest.FixtureRequest) -> dict[str, Any]:
    base, sp_model = make_base(request.param)
    kept = expand_tokenizer(base, NEW, 700, base_texts=BASE, sp_model=sp_model)
    free = expand_tokenizer(
        base, NEW, 700, base_texts=BASE, sp_model=sp_model, keep_base_tokenization=False
    )
    return {"kind": request.param, "base": base, "sp": sp_model, "kept": kept, "free": free}


def ids(tok: Any, texts: list[str]) -> list[list[int]]:
    return [list(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]


def test_family_detected(case: dict[str, Any]) -> None:
    want = {"sp_bpe": "sp_bpe", "unigram": "unigram", "tiktoken": "byte_bpe"}
    assert tokenizer_family(case["base"]) == want.get(case["kind"], "byte_bpe")
    assert case["kept"].report.family == tokenizer_family(case["base"])


def test_old_ids_and_special_tokens_kept(case: dict[str, Any]) -> None:
    base, merged, report = case["base"], case["kept"].tokenizer, case["kept"].report
    assert report.added > 0 and len(merged) == len(base) + report.added == report.merged_size
    old = base.get_vocab()
    new_vocab = merged.get_vocab()
    assert all(new_vocab[t] == i for t, i in old.items())
    assert all(i >= report.first_new_id for t, i in new_vocab.items() if t not in old)
    for token in base.all_special_tokens:
        assert merged.convert_tokens_to_ids(token) == base.convert_tokens_to_ids(token)


def test_base_tokenization_kept_and_changes_counted(case: dict[str, Any]) -> None:
    base = case["base"]
    kept, free = case["kept"], case["free"]
    assert kept.report.base_texts == len(BASE) and kept.report.base_texts_changed == 0
    assert ids(kept.tokenizer, BASE) == ids(base, BASE)
    differ = sum(a != b for a, b in zip(ids(free.tokenizer, BASE), ids(base, BASE), strict=True))
    assert free.report.base_texts_changed == differ and free.report.dropped_for_base == 0
    assert kept.report.added == free.report.added - kept.report.dropped_for_base


def test_new_language_is_covered_better(case: dict[str, Any]) -> None:
    base, merged = case["base"], case["kept"].tokenizer
    if case["kind"] == "unigram":  # no byte fallback: unseen script was <unk>
        unk = base.unk_token_id
        assert sum(x == unk for r in ids(merged, HELD_NEW) for x in r) < sum(
            x == unk for r in ids(base, HELD_NEW) for x in r
        )
    else:
        n_base = sum(map(len, ids(base, HELD_NEW)))
        assert sum(map(len, ids(merged, HELD_NEW))) < 0.6 * n_base
    text = HELD_NEW[0]
    if case["kind"] != "unigram":
        assert merged.decode(ids(merged, [text])[0]) == text


def test_saved_folder_reloads_with_the_same_behaviour(case: dict[str, Any], tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    expansion = case["kept"]
    folder = expansion.save(tmp_path / "tok")
    reloaded = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    assert type(reloaded) is type(expansion.tokenizer)
    texts = BASE[:20] + NEW[:20] + HELD_NEW
    assert ids(reloaded, texts) == ids(expansion.tokenizer, texts)
    assert reloaded.all_special_tokens == expansion.tokenizer.all_special_tokens
    assert (folder / "tokenizer.model").exists() == (case["sp"] is not None)


def test_sentencepiece_model_agrees_with_tokenizer_json(case: dict[str, Any]) -> None:
    """The expanded tokenizer.model (the sentencepiece library: the slow reference) = the fast
    one.
    """
    if case["sp"] is None:
        pytest.skip("byte-level BPE has no SentencePiece model")
    expansion = case["kept"]
    assert expansion.sp_model is not None
    for text in BASE[:30] + NEW[:30] + HELD_NEW:
        assert spm.encode_pieces(expansion.sp_model, text) == expansion.tokenizer.tokenize(text)


def test_sp_bpe_converts_from_tokenizer_model_alone(case: dict[str, Any], tmp_path: Path) -> None:
    """A folder with only the expanded tokenizer.model converts to the same ids (Llama layout)."""
    if case["kind"] != "sp_bpe":
        pytest.skip("only the Llama layout keeps SentencePiece ids unchanged")
    expansion = case["kept"]
    converted = spm.fast_from_proto(expansion.sp_model)
    texts = BASE[:20] + NEW[:20] + HELD_NEW
    assert ids(converted, texts) == ids(expansion.tokenizer, texts)


def test_trained_with_the_base_settings() -> None:
    base, model = testing.tiny_sentencepiece(BASE, 400, "bpe")
    settings = spm.spec_settings(model)
    assert settings["model_type"] == "bpe" and settings["byte_fallback"] is True
    assert settings["split_digits"] is True and settings["normalization_rule_name"] == "identity"
    expansion = expand_tokenizer(base, NEW, 700, sp_model=model)
    assert expansion.sp_model is not None
    grown = spm.spec_settings(expansion.sp_model)
    assert {k: v for k, v in grown.items() if k != "vocab_size"} == settings


def test_unsupported_tokenizer_is_one_line() -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    with pytest.raises(PolymnesiaError, match="this one is WordPiece") as e:
        expand_tokenizer(tok, NEW, 700)
    assert "\n" not in str(e.value)
    assert json.loads(tok.backend_tokenizer.to_str())["model"]["type"] == "WordPiece"


def test_loaded_tokenizer_without_pad_pads_with_eos(tmp_path: Path) -> None:
    from polymnesia.tokenizers.bpe import load_tokenizer

    tok, _ = testing.tiny_sentencepiece(BASE, 400, "bpe")
    assert tok.pad_token is None  # Llama-2 layout
    tok.save_pretrained(str(tmp_path))
    loaded = load_tokenizer(str(tmp_path))
    assert loaded.pad_token_id == loaded.eos_token_id == tok.eos_token_id
