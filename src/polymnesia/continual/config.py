"""Typed settings shared by the lifelong experiment and its stages."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.data.languages import get_language
from polymnesia.errors import PolymnesiaError

_REGION = re.compile(r"^([A-Za-z]{2}|[0-9]{3})$")


def task_language(code: str) -> str:
    """A task language as the protocol names it: the language table's code (``EN`` -> ``en``,
    ``cmn`` -> ``zh``), optionally with a region subtag kept as a distinct language
    (``zh-TW``: MASSIVE's Traditional Chinese next to ``zh``). Unknown codes are one line."""
    base, _, region = str(code).strip().replace("_", "-").partition("-")
    try:
        lang = get_language(base)
    except PolymnesiaError as e:
        raise ValueError(str(e)) from None
    if not region:
        return lang.code
    if not _REGION.match(region):
        raise ValueError(
            f"language '{code}': region subtag '{region}' must be two letters or three digits "
            "(zh-TW)"
        )
    return f"{lang.code}-{region.upper()}"


def task_languages(codes: list[str], key: str) -> list[str]:
    """:func:`task_language` of each code; a code listed twice is one line naming ``key``."""
    out = [task_language(c) for c in codes]
    repeats = sorted({c for c in out if out.count(c) > 1})
    if repeats:
        raise ValueError(f"{key} lists {', '.join(repeats)} twice; list each language once")
    return out


OrderKind = Literal["resource", "shuffle", "explicit", "destructive_last"]


class OrderConfig(StrictModel):
    """One language order (Khelli et al. 2025 section 3.2)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$", description="short name used in file names")
    kind: OrderKind = Field(
        description="resource: by pretraining resource size; shuffle: seeded; explicit: as listed; "
        "destructive_last: least destructive first, from earlier orders' performance changes"
    )
    seed: int = Field(0, ge=0, description="shuffle seed")
    resource_by: Literal["joshi", "pretraining_size"] = Field(
        "pretraining_size",
        description="pretraining_size: texts of the language in the base model's pretraining data "
        "(0 if absent), ties by Joshi class; joshi: the Joshi et al. 2020 class",
    )
    languages: list[str] | None = Field(None, description="the order, for kind explicit")
    sources: list[str] = Field(
        default_factory=list, description="earlier orders whose runs decide destructive_last"
    )
    source_method: str = Field("vanilla", description="the sequential method those runs used")
    destructive: Literal["move_to_end", "sort"] = Field(
        "move_to_end",
        description="destructive_last procedure: move_to_end (Khelli et al. 2025, A.1: shuffle "
        "with 'seed', then move the 'destructive_count' most destructive languages to the end); "
        "sort: every language by P_avg",
    )
    destructive_count: int | None = Field(
        None, ge=0, description="languages moved to the end (move_to_end); default about a tenth"
    )
    shift: Literal["literal", "previous"] = Field(
        "literal",
        description="P_avg reading that ranks destructiveness: literal eq. 9 (new language "
        "included) or previous (only languages learned before, section 3.3.1's prose)",
    )

    @field_validator("languages")
    @classmethod
    def _codes(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else [task_language(c) for c in v]

    @field_validator("source_method")
    @classmethod
    def _method(cls, v: str) -> str:
        if not v:
            raise ValueError("source_method must name a sequential method (vanilla, shared_lora)")
        return v

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> OrderConfig:
        if (self.kind == "explicit") != (self.languages is not None):
            raise ValueError(
                f"order '{self.name}': 'languages' is given exactly when kind is explicit"
            )
        if (self.kind == "destructive_last") != bool(self.sources):
            raise ValueError(
                f"order '{self.name}': 'sources' (earlier order names) is given exactly when kind "
                "is destructive_last"
            )
        return self
