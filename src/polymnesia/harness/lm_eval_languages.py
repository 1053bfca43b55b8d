"""The language of any lm-eval task, with its family, script and resource level.

:func:`task_info` reads a task's language as :func:`polymnesia.harness.run.task_lang` does
(polymnesia's language table, :mod:`polymnesia.data.languages`). Names outside that table
still map when they carry a FLORES-200 code (ISO 639-3 plus an ISO 15924 script, as Belebele,
FLORES and SIB-200 write them: ``belebele_acm_Arab``):

* the ISO 639-3 codes of :data:`EXTRA_LANGUAGES`: the Belebele languages that polymnesia's
  table lacks, with their name, family and branch (Ethnologue's classification, as
  the table uses it). Joshi et al. 2020 classes were not assigned to them: their resource
  level is ``unknown``;
* any other ``xxx_Scrp`` code: the language ``xxx`` in the script its ISO 15924 code names,
  family and resource level ``unknown``.

The script is the one a FLORES code names where the task has one (``belebele_hin_Latn`` is
romanized Hindi), else the table's. A task with no language in its name is ``und``
(undetermined), in every group ``unknown``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from polymnesia.data.languages import get_language
from polymnesia.errors import PolymnesiaError
from polymnesia.harness.run import task_lang

UNKNOWN = "unknown"

#: ISO 639-3 -> (name, family, branch) of the Belebele languages outside polymnesia's
#: language table (lm-eval 0.4.13 ships 122 ``belebele_*`` tasks; these 26 were ``und``)
EXTRA_LANGUAGES: dict[str, tuple[str, str, str]] = {
    "acm": ("Mesopotamian Arabic", "Afro-Asiatic", "Semitic"),
    "apc": ("Levantine Arabic", "Afro-Asiatic", "Semitic"),
    "ars": ("Najdi Arabic", "Afro-Asiatic", "Semitic"),
    "ary": ("Moroccan Arabic", "Afro-Asiatic", "Semitic"),
    "arz": ("Egyptian Arabic", "Afro-Asiatic", "Semitic"),
    "asm": ("Assamese", "Indo-European", "Indo-Aryan"),
    "bam": ("Bambara", "Niger-Congo", "Mande"),
    "ckb": ("Central Kurdish", "Indo-European", "Iranian"),
    "fuv": ("Nigerian Fulfulde", "Niger-Congo", "Atlantic"),
    "gaz": ("West Central Oromo", "Afro-Asiatic", "Cushitic"),
    "grn": ("Guarani", "Tupian", "Tupi-Guarani"),
    "ilo": ("Ilocano", "Austronesian", "Malayo-Polynesian"),
    "kac": ("Jingpho", "Sino-Tibetan", "Sal"),
    "kea": ("Kabuverdianu", "Creole", "Portuguese-based"),
    "lug": ("Ganda", "Niger-Congo", "Bantu"),
    "luo": ("Luo", "Nilo-Saharan", "Nilotic"),
    "nso": ("Northern Sotho", "Niger-Congo", "Bantu"),
    "nya": ("Nyanja", "Niger-Congo", "Bantu"),
    "ory": ("Odia", "Indo-European", "Indo-Aryan"),
    "shn": ("Shan", "Kra-Dai", "Tai"),
    "snd": ("Sindhi", "Indo-European", "Indo-Aryan"),
    "ssw": ("Swati", "Niger-Congo", "Bantu"),
    "sun": ("Sundanese", "Austronesian", "Malayo-Polynesian"),
    "tsn": ("Tswana", "Niger-Congo", "Bantu"),
    "tso": ("Tsonga", "Niger-Congo", "Bantu"),
    "war": ("Waray", "Austronesian", "Malayo-Polynesian"),
}

#: ISO 15924 code -> the script name polymnesia's language table uses
SCRIPTS: dict[str, str] = {
    "Latn": "Latin", "Cyrl": "Cyrillic", "Arab": "Arabic", "Deva": "Devanagari",
    "Hans": "Han", "Hant": "Han", "Hani": "Han", "Beng": "Bengali", "Taml": "Tamil",
    "Telu": "Telugu", "Knda": "Kannada", "Sinh": "Sinhala", "Ethi": "Ethiopic",
    "Grek": "Greek", "Hebr": "Hebrew", "Jpan": "Japanese", "Hang": "Hangul", "Kore": "Hangul",
    "Thai": "Thai", "Geor": "Georgian", "Armn": "Armenian", "Mlym": "Malayalam",
    "Gujr": "Gujarati", "Guru": "Gurmukhi", "Orya": "Oriya", "Khmr": "Khmer", "Laoo": "Lao",
    "Mymr": "Myanmar", "Tibt": "Tibetan", "Tfng": "Tifinagh", "Syrc": "Syriac",
    "Thaa": "Thaana", "Cher": "Cherokee", "Olck": "Ol Chiki", "Mtei": "Meetei Mayek",
}  # fmt: skip

_FLORES = re.compile(r"(?:^|[_\-.])([a-z]{3})[_\-]([A-Za-z][a-z]{3})(?=$|[_\-.])")


@dataclass(frozen=True)
class TaskLanguage:
    """A task's language (``code``, ``name``) and the groups it falls in."""

    code: str
    name: str
    family: str
    script: str
    resource: str  # "low", "mid", "high" (Joshi et al. 2020 classes) or "unknown"


@functools.cache
def task_info(task: str) -> TaskLanguage:
    """The language of lm-eval task ``task`` and its family, script and resource level (see
    the module docstring); ``und`` with every group ``unknown`` when its name spells none."""
    found = _FLORES.findall(task)
    written = None  # the script a FLORES code names: belebele_hin_Latn is romanized Hindi
    if found:
        written = SCRIPTS.get(found[-1][1].capitalize(), found[-1][1].capitalize())
    code = task_lang(task)
    if code != "und":
        try:
            lang = get_language(code)
        except PolymnesiaError:
            pass
        else:
            script = written or lang.script
            return TaskLanguage(lang.code, lang.name, lang.family, script, lang.resource_level)
    if found and written is not None:
        iso = found[-1][0]
        if iso in EXTRA_LANGUAGES:
            name, family, _ = EXTRA_LANGUAGES[iso]
            return TaskLanguage(iso, name, family, written, UNKNOWN)
        return TaskLanguage(iso, iso, UNKNOWN, written, UNKNOWN)
    return TaskLanguage("und", "undetermined", UNKNOWN, UNKNOWN, UNKNOWN)


__all__ = ["EXTRA_LANGUAGES", "SCRIPTS", "UNKNOWN", "TaskLanguage", "task_info"]
