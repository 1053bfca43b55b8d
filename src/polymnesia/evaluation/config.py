"""The ``evaluate`` section: per-language likelihood evaluation (perplexity, bits per byte)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from polymnesia.config.base import NOT_FINGERPRINTED, StrictModel
from polymnesia.runtime import Precision

PRECISION_HELP = (
    "inference precision: no (float32), bf16 or fp16 (the model is cast on the device; "
    "YAML's bare no/false mean no)"
)


def precision_field() -> Any:
    """The ``precision`` field of every model-running stage's parameters (default float32)."""
    return Field("no", description=PRECISION_HELP)


def no_is_false(v: object) -> object:
    """YAML reads a bare ``no`` as False: accept it as the precision ``no``."""
    return "no" if v is False else v


#: a stage parameter naming its inference precision (``no`` also read from YAML's false)
InferencePrecision = Annotated[Precision, BeforeValidator(no_is_false)]


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
        json_schema_extra=NOT_FINGERPRINTED,
    )
    precision: InferencePrecision = precision_field()
