"""token_ids: the wrapper's ids, from the Rust backend where that is the same."""

from __future__ import annotations

import pytest

from polymnesia.testing import corpus, tiny_bpe, tiny_sentencepiece, tiny_tiktoken_bpe
from polymnesia.tokenizers.encode import _plain_backend, token_ids

TEXTS = [
    *corpus(("en", "ru", "zh"))[:40],
    "",
    " leading and trailing spaces ",
    "digits 2024 and emoji \N{GRINNING FACE} and tabs\tand\nnewlines",
]


def wrapper(tok, texts):  # type: ignore[no-untyped-def]
    return [list(x) for x in tok(list(texts), add_special_tokens=False)["input_ids"]]


def tokenizers():  # type: ignore[no-untyped-def]
    yield "byte-level BPE", tiny_bpe()
    yield "SentencePiece BPE", tiny_sentencepiece(model_type="bpe")[0]
    yield "SentencePiece Unigram", tiny_sentencepiece(model_type="unigram")[0]
    yield "tiktoken-style BPE", tiny_tiktoken_bpe()


@pytest.mark.parametrize(
    "name", ["byte-level BPE", "SentencePiece BPE", "SentencePiece Unigram", "tiktoken-style BPE"]
)
def test_same_ids_as_the_wrapper(name: str) -> None:
    tok = dict(tokenizers())[name]
    specials = [t for t in (tok.bos_token, tok.eos_token) if t]
    texts = [*TEXTS, *(f"before {s} after" for s in specials)]  # special tokens inside text
    assert token_ids(tok, texts) == wrapper(tok, texts)


def test_takes_the_backend_path_for_plain_fast_tokenizers() -> None:
    tok = tiny_bpe()
    assert _plain_backend(tok) is tok.backend_tokenizer
    calls = []
    backend = tok.backend_tokenizer

    class Spy:
        def __getattr__(self, name):  # type: ignore[no-untyped-def]
            calls.append(name)
            return getattr(backend, name)

    tok._tokenizer = Spy()  # the wrapper's backend_tokenizer reads this attribute
    try:
        token_ids(tok, ["one text"])
    finally:
        tok._tokenizer = backend
    assert "encode_batch_fast" in calls or "encode_batch" in calls


def test_truncation_left_on_the_backend_goes_through_the_wrapper() -> None:
    tok = tiny_bpe()
    tok.backend_tokenizer.enable_truncation(3)
    assert _plain_backend(tok) is None
    text = TEXTS[0]
    # the wrapper resets the backend's truncation for an untruncated call: full length
    assert token_ids(tok, [text]) == wrapper(tok, [text])
    assert len(token_ids(tok, [text])[0]) > 3


def test_split_special_tokens_is_honoured() -> None:
    tok = tiny_bpe()
    tok.split_special_tokens = True
    text = f"a {tok.eos_token} b"
    assert _plain_backend(tok) is None  # backend still encodes specials whole: use the wrapper
    assert token_ids(tok, [text]) == wrapper(tok, [text])
    assert tok.eos_token_id not in token_ids(tok, [text])[0]


def test_a_class_with_its_own_encode_path_keeps_it() -> None:
    from transformers import PreTrainedTokenizerFast

    class Custom(PreTrainedTokenizerFast):
        def _encode_plus(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return super()._encode_plus(*args, **kwargs)

    base = tiny_bpe()
    tok = Custom(tokenizer_object=base.backend_tokenizer)
    assert _plain_backend(tok) is None
    assert token_ids(tok, TEXTS[:5]) == wrapper(tok, TEXTS[:5])


def test_empty_list() -> None:
    assert token_ids(tiny_bpe(), []) == []
