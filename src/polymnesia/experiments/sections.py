"""Config sections shared by several experiments."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel


def check_language(code: str) -> str:
    from polymnesia.data.languages import get_language

    get_language(code)  # one-line error with a suggestion for unknown codes
    return code


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
        from polymnesia.data.sources import (
            SOURCES,
            builtin,  # noqa: F401
        )
        from polymnesia.errors import unknown

        if v not in SOURCES:
            raise ValueError(str(unknown("data source", v, SOURCES.names())))
        return v


class GroupsConfig(StrictModel):
    """Language groups as paper 000 groups them (Table 6)."""

    pretraining: list[str] = Field(description="languages the base model is pretrained on")
    adapting: list[str] = Field(default_factory=list, description="languages added by adaptation")
    other: list[str] = Field(
        default_factory=list, description="languages in neither split (evaluation only)"
    )

    @field_validator("pretraining", "adapting", "other")
    @classmethod
    def _codes(cls, v: list[str]) -> list[str]:
        return [check_language(c) for c in v]

    @model_validator(mode="after")
    def _disjoint(self) -> GroupsConfig:
        seen: dict[str, str] = {}
        for group, langs in self.as_dict().items():
            for lang in langs:
                if lang in seen:
                    raise ValueError(f"language '{lang}' is in both '{seen[lang]}' and '{group}'")
                seen[lang] = group
        if not self.pretraining:
            raise ValueError("at least one pretraining language is needed")
        return self

    def as_dict(self) -> dict[str, list[str]]:
        return {"pretraining": self.pretraining, "adapting": self.adapting, "other": self.other}

    def all(self) -> list[str]:
        return [*self.pretraining, *self.adapting, *self.other]

    def group_of(self) -> dict[str, str]:
        return {lang: g for g, langs in self.as_dict().items() for lang in langs}


class TokenizerConfig(StrictModel):
    """A byte-level BPE trained on a temperature-sampled mixture, or a Hub/local tokenizer."""

    name_or_path: str | None = Field(None, description="use this tokenizer instead of training one")
    vocab_size: int = Field(
        8000, ge=300, description="size of the trained vocabulary (paper 000: 32,000)"
    )
    temperature: float = Field(
        3.0, gt=0, description="language sampling temperature for the training mixture"
    )
    sample_texts: int = Field(20000, gt=0, description="texts drawn for tokenizer training")
    min_frequency: int = Field(2, ge=1)


class EvalConfig(StrictModel):
    """Per-language likelihood evaluation."""

    split: str = Field("test", pattern="^(validation|test)$")
    max_texts_per_lang: int | None = Field(
        None, gt=0, description="cap (default: all prepared texts)"
    )
    batch_size: int = Field(64, gt=0)
    max_length: int = Field(256, gt=1)
    headline: str = Field(
        "bits_per_byte",
        pattern="^(bits_per_byte|perplexity)$",
        description="metric of the headline table (bits per byte compares vocabularies fairly)",
    )
