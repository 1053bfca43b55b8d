"""The ``evaluate`` section: per-language likelihood evaluation (perplexity, bits per byte)."""

from __future__ import annotations

from pydantic import Field

from polymnesia.config.base import NOT_FINGERPRINTED, StrictModel


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
