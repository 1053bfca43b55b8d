"""Session fixtures: the corpus of tokenizers_corpus.py and tokenizers trained on it."""

from __future__ import annotations

import pytest
from tokenizers_corpus import BASE_LANGS, NEW_LANGS, PARTS, sentences


@pytest.fixture(scope="session")
def corpus() -> dict[str, list[str]]:
    return {lang: sentences(lang) for lang in PARTS}


@pytest.fixture(scope="session")
def base_tok(corpus):  # type: ignore[no-untyped-def]
    from polymnesia.tokenizers.bpe import train_bpe

    texts = [t for lang in BASE_LANGS for t in corpus[lang]]
    return train_bpe(texts, 600, model_max_length=256)


@pytest.fixture(scope="session")
def new_tok(corpus):  # type: ignore[no-untyped-def]
    from polymnesia.tokenizers.bpe import train_bpe

    texts = [t for lang in NEW_LANGS for t in corpus[lang]]
    return train_bpe(texts, 500)


@pytest.fixture(scope="session")
def merged(base_tok, new_tok):  # type: ignore[no-untyped-def]
    from polymnesia.tokenizers.merge import merge_tokenizers

    return merge_tokenizers(base_tok, new_tok)
