"""The language table: codes, script, family and resource class of every language.

One row per language in ``languages.tsv`` (package data) with the columns
``iso639_1`` (empty where the language has none), ``iso639_3``, ``name``,
``script`` (ISO 15924 name), ``family``, ``branch`` and ``joshi_class``.
It covers every language a built-in source offers (the 22 Bible languages,
every committed UDHR language), all languages of Table 6 of Aggarwal et al. 2024
(Aggarwal, Sathe, Sitaram 2024) and the 52 MASSIVE languages.

``joshi_class`` (0-5) follows the taxonomy of Joshi et al. 2020, "The State
and Fate of Linguistic Diversity and Inclusion in the NLP World" (their
``lang2tax`` list). That list names languages, not codes; the mapping was
made by hand. Languages it does not name clearly (Corsican, Northern Sami,
Norwegian Bokmål/Nynorsk, which inherit Norwegian's class 1) are our
estimate, in the class of comparable languages.

:func:`resource_level` groups the classes as the papers' analyses do:
classes 0-2 are ``"low"``, class 3 ``"mid"``, classes 4-5 ``"high"``.

Codes: :func:`get_language` accepts ISO 639-1, ISO 639-3 and a few aliases
(deprecated 639-1 codes such as ``iw`` for Hebrew, which Table 6 of Aggarwal et al. 2024
uses, and individual-language 639-3 codes that the sources use for a
macrolanguage, such as ``arb``, ``cmn`` or ``pes``). Table 6 lists ``se``;
we read it as ISO 639-1 Northern Sami, although the authors may have meant
Swedish (``sv``, also in the table).
"""

from __future__ import annotations

import csv
import functools
import io
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from polymnesia.errors import PolymnesiaError, suggest
from polymnesia.registry import Registry

ResourceLevel = Literal["low", "mid", "high"]

#: deprecated or individual-language codes -> the table's code
ALIASES: dict[str, str] = {
    "iw": "he",
    "in": "id",
    "ji": "yi",
    "arb": "ar",
    "cmn": "zh",
    "pes": "fa",
    "swh": "sw",
    "ekk": "et",
    "zsm": "ms",
    "zlm": "ms",
    "khk": "mn",
    "azj": "az",
    "pbu": "ps",
    "pbt": "ps",
    "als": "sq",
    "lvs": "lv",
    "npi": "ne",
    "uzn": "uz",
    "fil": "tl",
    "kmr": "ku",
    "plt": "mg",
    "ydd": "yi",
}

_COLUMNS = ("iso639_1", "iso639_3", "name", "script", "family", "branch", "joshi_class")


@dataclass(frozen=True)
class Language:
    """One row of the language table."""

    iso639_1: str
    iso639_3: str
    name: str
    script: str
    family: str
    branch: str
    joshi_class: int

    @property
    def code(self) -> str:
        """The code polymnesia uses: ISO 639-1 where one exists, else ISO 639-3."""
        return self.iso639_1 or self.iso639_3

    @property
    def resource_level(self) -> ResourceLevel:
        return level_of_class(self.joshi_class)

    def describe(self) -> str:
        """One line, e.g. ``Arabic · Arabic script · Afro-Asiatic/Semitic · Joshi 5``."""
        return (
            f"{self.name} · {self.script} script · {self.family}/{self.branch} · "
            f"Joshi {self.joshi_class}"
        )


def level_of_class(joshi_class: int) -> ResourceLevel:
    """Joshi et al. 2020 class -> ``low`` (0-2), ``mid`` (3) or ``high`` (4-5)."""
    if not 0 <= joshi_class <= 5:
        raise PolymnesiaError(f"Joshi class must be 0-5, got {joshi_class}")
    if joshi_class <= 2:
        return "low"
    return "mid" if joshi_class == 3 else "high"


def parse_table(text: str) -> list[Language]:
    """Parse the TSV text of the language table (header row first)."""
    reader = csv.DictReader(io.StringIO(text), delimiter="\t")
    if tuple(reader.fieldnames or ()) != _COLUMNS:
        raise PolymnesiaError(f"language table must have the columns {', '.join(_COLUMNS)}")
    rows = []
    for i, row in enumerate(reader, start=2):
        try:
            if None in row:  # more fields than the header names
                raise ValueError
            lang = Language(
                iso639_1=row["iso639_1"],
                iso639_3=row["iso639_3"],
                name=row["name"],
                script=row["script"],
                family=row["family"],
                branch=row["branch"],
                joshi_class=int(row["joshi_class"]),
            )
            rows.append(lang)
        except (TypeError, ValueError):
            raise PolymnesiaError(f"language table line {i} is malformed: {row}") from None
    return rows


@functools.lru_cache(maxsize=1)
def all_languages() -> list[Language]:
    """Every language of the table, in table order (by Joshi class, high first)."""
    text = resources.files("polymnesia.data").joinpath("languages.tsv").read_text("utf-8")
    return parse_table(text)


@functools.lru_cache(maxsize=1)
def _index() -> dict[str, Language]:
    index: dict[str, Language] = {}
    for lang in all_languages():
        for code in (lang.iso639_1, lang.iso639_3):
            if code:
                index[code] = lang
    for alias, target in ALIASES.items():
        index.setdefault(alias, index[target])
    return index


def get_language(code: str) -> Language:
    """Look a language up by ISO 639-1, ISO 639-3 or alias code (case-insensitive)."""
    key = str(code).strip().lower().replace("_", "-").split("-")[0]
    index = _index()
    if key in index:
        return index[key]
    raise PolymnesiaError(
        f"unknown language code '{code}'{suggest(key, index)}; "
        "use an ISO 639-1 or 639-3 code from `polymnesia ls languages`"
    )


def resource_level(code: str) -> ResourceLevel:
    """``low`` / ``mid`` / ``high`` resource level of a language (see module docstring)."""
    return get_language(code).resource_level


def _build_registry() -> Registry[Language]:
    registry: Registry[Language] = Registry("language", "languages")
    for lang in all_languages():
        registry.add(lang.code, lang, lang.describe())
    return registry


#: the language table as a registry, for ``polymnesia ls languages``
LANGUAGES: Registry[Language] = _build_registry()
