"""The ``data`` section of every config: which source, which options, how it is split and capped."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from polymnesia.config.base import StrictModel
from polymnesia.data.languages import get_language
from polymnesia.data.sources import SOURCES
from polymnesia.errors import unknown


def check_language(code: str) -> str:
    """The code in its normal form, or one line (with a suggestion) if the table does not know it.

    A plain code becomes the language table's code (``EN`` and ``eng`` -> ``en``),
    so a language cannot enter a config twice under two spellings; a locale
    keeps its subtags with canonical case (``ZH-tw`` -> ``zh-TW``, ``zho_hans``
    -> ``zho_Hans``), since sources such as MASSIVE name their data by locale.
    """
    lang = get_language(code)
    text = str(code).strip()
    parts = re.split(r"([-_])", text)
    if len(parts) == 1:
        return lang.code
    head, rest = parts[0].lower(), parts[1:]
    out = [head]
    for piece in rest:
        if piece in "-_":
            out.append(piece)
        elif len(piece) == 4 and piece.isalpha():
            out.append(piece.title())  # script subtag (ISO 15924)
        else:
            out.append(piece.upper())  # region subtag (ISO 3166 or UN M.49)
    return "".join(out)


def check_languages(codes: list[str]) -> list[str]:
    """:func:`check_language` of each code, in order."""
    return [check_language(c) for c in codes]


class DataConfig(StrictModel):
    """Where the text comes from and how it is split."""

    source: str = Field("bible", description="data source (polymnesia ls sources)")
    options: dict[str, Any] = Field(
        default_factory=dict, description="options passed to the source"
    )
    split_fractions: tuple[float, float, float] = Field(
        (0.8, 0.1, 0.1), description="train/validation/test by aligned id"
    )
    split_seed: int = 0
    max_train_per_lang: int | None = Field(
        3000, gt=0, description="cap on training texts per language"
    )
    max_eval_per_lang: int | None = Field(
        300, gt=0, description="cap on validation and test texts per language"
    )

    @field_validator("source")
    @classmethod
    def _known_source(cls, v: str) -> str:
        if v not in SOURCES:
            raise ValueError(str(unknown("data source", v, SOURCES.names())))
        return v
