"""The ``data`` section of every config: which source, which options, how it is split and capped."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from polymnesia.config.base import StrictModel
from polymnesia.data.languages import get_language
from polymnesia.data.sources import SOURCES
from polymnesia.errors import unknown


def check_language(code: str) -> str:
    """A pydantic-friendly check: the code is in the language table (one line with a suggestion)."""
    get_language(code)
    return code


def check_languages(codes: list[str]) -> list[str]:
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
