"""Config sections that several protocols share.

Sections that a stage consumes live next to that stage's layer (``DataConfig``
in :mod:`polymnesia.data.config`, ``TokenizerConfig`` in
:mod:`polymnesia.tokenizers.config`, ``ModelConfig`` in :mod:`polymnesia.models`,
``TrainConfig`` in :mod:`polymnesia.training.config`, ``EvalConfig`` in
:mod:`polymnesia.evaluation.config`); they are re-exported here. This module
adds the two that are protocol concepts: the language groups of Aggarwal et al. 2024 and
the base model that every protocol pretrains (or loads) in the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.data.config import DataConfig, check_language, check_languages
from polymnesia.evaluation.config import EvalConfig
from polymnesia.models import ModelConfig
from polymnesia.paths import looks_local
from polymnesia.tokenizers.config import TokenizerConfig
from polymnesia.training.config import TrainConfig

__all__ = [
    "BaseModelSection",
    "DataConfig",
    "EvalConfig",
    "GroupsConfig",
    "ModelConfig",
    "TokenizerConfig",
    "TrainConfig",
    "check_language",
    "flat_base",
    "own_tokenizer",
    "unique_languages",
]


def unique_languages(codes: list[str], key: str = "languages") -> list[str]:
    """Known codes in their normal form, each once (one line naming the duplicate)."""
    codes = check_languages(codes)
    seen: set[str] = set()
    for c in codes:
        if c in seen:
            raise ValueError(f"language '{c}' is listed twice in {key}")
        seen.add(c)
    return codes


class GroupsConfig(StrictModel):
    """Language groups as Aggarwal et al. 2024 groups them (Table 6)."""

    pretraining: list[str] = Field(description="languages the base model is pretrained on")
    adapting: list[str] = Field(default_factory=list, description="languages added by adaptation")
    other: list[str] = Field(
        default_factory=list, description="languages in neither split (evaluation only)"
    )

    @field_validator("pretraining", "adapting", "other")
    @classmethod
    def _codes(cls, v: list[str]) -> list[str]:
        return check_languages(v)

    @model_validator(mode="after")
    def _disjoint(self) -> GroupsConfig:
        seen: dict[str, str] = {}
        for group, langs in self.as_dict().items():
            unique_languages(langs, f"groups.{group}")
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


class BaseModelSection(StrictModel):
    """The base model every protocol starts from: a tokenizer and a decoder pretrained on a
    temperature-sampled mixture of ``languages`` (or loaded with ``model.name_or_path``).

    The same settings give the same cache entries in every protocol, so a base
    model pretrained for one experiment is reused by the others.
    """

    languages: list[str] = Field(min_length=1, description="pretraining languages")
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    mixture_temperature: float = Field(
        3.0, gt=0, description="language sampling temperature of the pretraining mixture"
    )
    pretrain: bool = Field(
        True,
        description="train the model on the language mixture (from scratch for a preset, continued "
        "for a loaded model); false: use the loaded model (model.name_or_path) as it is",
    )

    @model_validator(mode="before")
    @classmethod
    def _own_tokenizer(cls, data: Any) -> Any:
        return own_tokenizer(data)

    @field_validator("languages")
    @classmethod
    def _codes(cls, v: list[str]) -> list[str]:
        return unique_languages(v, "languages")

    def describe(self) -> str:
        """One phrase for reports: which model, and whether and on what it was pretrained here."""
        if not self.pretrain:
            return f"{self.model.describe()} (used as loaded, not pretrained here)"
        verb = "continued pretraining" if self.model.name_or_path else "pretrained"
        return (
            f"{self.model.describe()}, {verb} {self.train.steps} steps on "
            f"{', '.join(self.languages)}"
        )

    @model_validator(mode="after")
    def _loaded(self) -> BaseModelSection:
        if not self.pretrain and self.model.name_or_path is None:
            raise ValueError("pretrain: false uses a loaded model: set model.name_or_path")
        return self


def own_tokenizer(data: Any) -> Any:
    """A section's ``model`` and ``tokenizer`` with the tokenizer of a loaded model made its
    own: with ``model.name_or_path`` set and no ``tokenizer.name_or_path``, the tokenizer is
    the model's (a tokenizer trained here would feed the model ids its embeddings never
    learnt). ``data`` is the section's input (a dict of dicts or of sections)."""
    if not isinstance(data, dict):
        return data
    model, tok = data.get("model"), data.get("tokenizer")
    name = model.get("name_or_path") if isinstance(model, dict) else None
    if isinstance(model, ModelConfig):
        name = model.name_or_path
    if not isinstance(name, str) or not name:
        return data
    if looks_local(name) and not Path(name).expanduser().exists():
        return data  # the model section says the folder is missing
    if tok is None:
        return {**data, "tokenizer": {"name_or_path": name}}
    if isinstance(tok, dict) and tok.get("name_or_path") is None:
        return {**data, "tokenizer": {**tok, "name_or_path": name}}
    if isinstance(tok, TokenizerConfig) and tok.name_or_path is None:
        return {**data, "tokenizer": tok.model_copy(update={"name_or_path": name})}
    return data


def flat_base(cfg: Any, train: TrainConfig) -> BaseModelSection:
    """The base model of a protocol whose config keeps its pieces at the top level (Aggarwal et al.
    2024's
    layout: ``tokenizer``, ``model``, ``mixture_temperature``, ``groups.pretraining``)."""
    return BaseModelSection(
        languages=cfg.groups.pretraining,
        tokenizer=cfg.tokenizer,
        model=cfg.model,
        train=train,
        mixture_temperature=cfg.mixture_temperature,
    )
