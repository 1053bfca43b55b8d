"""The language of an lm-eval task, from its name: FLORES codes, language names, locale codes.

lm-eval names its multilingual tasks in several conventions, and a score's language decides
which language-group table it reaches (a task left as ``und`` reaches none):

* FLORES-200 codes, ISO 639-3 plus an ISO 15924 script: ``belebele_fra_Latn``,
  ``flores_..._arb_Arab`` (individual-language codes such as ``arb``, ``pes``, ``swh`` are
  read as their macrolanguage, :data:`polymnesia.data.languages.ALIASES`);
* English language names: ``include_base_44_french_stem``, ``..._norwegian_bokmål``;
* ISO 639-1 codes, alone or as a locale with a region: ``global_mmlu_full_fr_humanities``,
  ``xnli_de``, ``..._pt_BR``, ``..._zh-CN`` (a region is upper case and never read as a
  language: ``pt_BR`` is Portuguese, not Breton).

:func:`task_language` reads the name from its end, so the language nearest the end wins
(``arc_challenge_mt_fi`` is Finnish, not Maltese: ``mt`` there means machine-translated);
a three-letter token counts only with its script (``fra_Latn``) or as a known ISO 639-3
code that is not an English word of task names (:data:`NOT_LANGUAGES`). The result is a
code of polymnesia's language table (:mod:`polymnesia.data.languages`), or None.
"""

from __future__ import annotations

import functools
import re

from polymnesia.data.languages import ALIASES, all_languages

#: tokens of lm-eval task names that spell an ISO 639 code but never mean a language there
#: (``mt``: machine-translated, ``arc_challenge_mt_fi``; ``cot``: chain of thought)
NOT_LANGUAGES = frozenset({"mt", "cot"})
#: codes that are also English words or abbreviations of task names (``what_is_the_tao``,
#: ``no_gap``, ``to_be``, ``S_ne_O_V``, ``nn_architecture``, ``cat``...): read as a language
#: only where lm-eval has the same name with another language in their place (a sibling:
#: ``global_mmlu_full_he_anatomy`` next to ``global_mmlu_full_fr_anatomy``)
AMBIGUOUS = frozenset(
    {
        "am", "be", "he", "id", "is", "it", "my", "ne", "nn", "no", "so", "ta", "te",
        "bel", "bus", "cat", "cos", "dan", "est", "fin", "hat", "ind", "ita", "kin", "law",
        "lin", "lit", "mal", "mar", "mon", "pan", "por", "que", "sin", "som", "tam", "tel",
        "tur",
    }
)  # fmt: skip
#: dialect labels of Arabic task families (AraDiCE: Modern Standard, Egyptian, Levantine)
DIALECTS = {"msa": "ar", "egy": "ar", "lev": "ar"}
#: ISO 15924 script codes, as FLORES writes them after the language (``fra_Latn``); lm-eval's
#: global_piqa writes them in lower case (``fra_latn``)
_SCRIPT = re.compile(
    r"^[A-Z][a-z]{3}$|^(latn|cyrl|arab|deva|hans|hant|beng|taml|telu|knda|"
    r"sinh|ethi|grek|hebr|jpan|hang|kore|thai|geor|armn|mlym|gujr|guru|orya|"
    r"khmr|laoo|mymr|tibt|tfng|syrc|thaa|cher|olck|mtei)$"
)
_TOKEN = re.compile(r"[^_\-.\s]+")


@functools.cache
def _tables() -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(ISO 639-1 -> code, ISO 639-3 and its aliases -> code, lower-case name -> code); the
    deprecated two-letter aliases (``in``, ``iw``, ``ji``) are left out: English words."""
    one, three, names = {}, {}, {}
    for lang in all_languages():
        code = lang.code
        if lang.iso639_1:
            one[lang.iso639_1] = code
        three[lang.iso639_3] = code
        names[lang.name.lower()] = code
    for alias, target in ALIASES.items():
        if len(alias) == 3:
            three.setdefault(alias, one.get(target, target))
    return one, three, names


def flores_language(code: str) -> str | None:
    """``fra_Latn`` (or ``fra-Latn``) -> ``fr``; None when it is no FLORES code polymnesia knows."""
    parts = _TOKEN.findall(code)
    if len(parts) != 2 or not _SCRIPT.match(parts[1]):
        return None
    return _tables()[1].get(parts[0])


def _has_sibling(task: str, span: tuple[int, int], known: frozenset[str] | None) -> bool:
    """Whether lm-eval knows ``task`` with another (unambiguous) code in place of ``span``."""
    if known is None:
        return False
    one, three, _ = _tables()
    width = span[1] - span[0]
    codes = one if width == 2 else three
    return any(
        task[: span[0]] + c + task[span[1] :] in known
        for c in codes
        if len(c) == width and c not in AMBIGUOUS and c != task[span[0] : span[1]]
    )


def task_language(task: str, known: frozenset[str] | None = None) -> str | None:
    """The language of an lm-eval task from its name (see the module docstring), or None.

    ``known``: lm-eval's task names (:func:`polymnesia.harness.tasks.lm_eval_index`), which
    decide the :data:`AMBIGUOUS` tokens; without it they are never read as languages."""
    one, three, names = _tables()
    found = list(_TOKEN.finditer(task))
    tokens = [m.group() for m in found]
    for i in range(len(tokens) - 1, -1, -1):
        tok = tokens[i]
        if _SCRIPT.match(tok) and i > 0 and tokens[i - 1] in three:  # FLORES: fra_Latn
            return three[tokens[i - 1]]
        if not tok.islower() or tok in NOT_LANGUAGES:
            continue
        for width in (3, 2):  # multi-word names: norwegian_bokmål, haitian_creole
            joined = " ".join(tokens[max(0, i - width + 1) : i + 1])
            if i - width + 1 >= 0 and joined in names:
                return names[joined]
        if tok in names:
            return names[tok]
        if tok in DIALECTS:
            return DIALECTS[tok]
        code = (one if len(tok) == 2 else three if len(tok) == 3 else {}).get(tok)
        if code is None:
            continue
        if tok not in AMBIGUOUS or _has_sibling(task, found[i].span(), known):
            return code
    return None


__all__ = ["AMBIGUOUS", "NOT_LANGUAGES", "flores_language", "task_language"]
