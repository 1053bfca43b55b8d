"""Tokenizer fertility: how many tokens a tokenizer spends on a language.

Used for the before/after table of a vocabulary merge (Aggarwal et al. 2024, section 3:
the merge is meant to make the adapting languages cheaper to encode).
Fertility is counted on content tokens only (no BOS/EOS).

Words: whitespace-separated chunks. Scripts written without spaces between
words (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar) would make a whole
sentence one "word", so each character of those scripts counts as one word
(combining marks such as Thai vowel signs belong to the character before them),
and whatever else is left in the chunk (Latin letters, digits, punctuation)
counts as one more word. ``"東京2024年"`` is thus 4 words (東, 京, 年,
2024). tokens_per_byte and tokens_per_char need no such convention and are
the better numbers to compare across scripts.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from polymnesia.errors import DataError
from polymnesia.tokenizers.encode import token_ids

# Code point ranges of scripts written without spaces between words.
_NO_SPACE_RANGES: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0x20000, 0x3134F),  # CJK extensions B-G
)


def is_no_space_char(ch: str) -> bool:
    """True for a base (non-combining) character of a script written without spaces."""
    cp = ord(ch)
    in_script = any(lo <= cp <= hi for lo, hi in _NO_SPACE_RANGES)
    return in_script and not unicodedata.category(ch).startswith("M")


def count_words(text: str) -> int:
    """Whitespace words, with each no-space-script character counted as a word."""
    words = 0
    for chunk in text.split():
        no_space = sum(1 for ch in chunk if is_no_space_char(ch))
        rest = [ch for ch in chunk if not is_no_space_char(ch) and not _is_script_mark(ch)]
        words += no_space + (1 if rest else 0)
    return words


def _is_script_mark(ch: str) -> bool:
    """A combining mark of a no-space script (Thai vowel signs): part of the previous character."""
    cp = ord(ch)
    in_script = any(lo <= cp <= hi for lo, hi in _NO_SPACE_RANGES)
    return in_script and unicodedata.category(ch).startswith("M")


def fertility(tokenizer: Any, texts: Sequence[str]) -> dict[str, float]:
    """Token counts of ``texts`` per word, per UTF-8 byte and per character.

    Returns ``n_tokens, words, bytes, chars, tokens_per_word, tokens_per_byte,
    tokens_per_char``. Works with any callable tokenizer returning
    ``input_ids`` (transformers tokenizers).
    """
    if isinstance(texts, str):
        raise DataError("fertility needs a list of texts, got one string")
    if not texts:
        raise DataError("fertility needs at least one text, got none")
    encoded = token_ids(tokenizer, texts)
    n_tokens = sum(len(ids) for ids in encoded)
    words = sum(count_words(t) for t in texts)
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    chars = sum(len(t) for t in texts)
    if chars == 0:
        raise DataError("fertility needs non-empty texts, got only empty strings")
    return {
        "n_tokens": n_tokens,
        "words": words,
        "bytes": n_bytes,
        "chars": chars,
        "tokens_per_word": n_tokens / words if words else float("nan"),
        "tokens_per_byte": n_tokens / n_bytes,
        "tokens_per_char": n_tokens / chars,
    }


def fertility_table(
    tokenizers: Mapping[str, Any], texts_by_lang: Mapping[str, Sequence[str]]
) -> list[dict[str, Any]]:
    """One row per (language, tokenizer): ``{"lang", "tokenizer", **fertility}``.

    For the before/after table of a merge pass ``{"base": base, "merged": merged}``.
    """
    rows = []
    for lang in sorted(texts_by_lang):
        for name, tok in tokenizers.items():
            rows.append({"lang": lang, "tokenizer": name, **fertility(tok, texts_by_lang[lang])})
    return rows
