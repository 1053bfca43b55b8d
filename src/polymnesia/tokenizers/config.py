"""The ``tokenizer`` section: a byte-level BPE trained on a language mixture, or a given one."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from polymnesia.config.base import MAX_VOCAB, StrictModel
from polymnesia.paths import looks_local


class TokenizerConfig(StrictModel):
    """A byte-level BPE trained on a temperature-sampled mixture, or a Hub/local tokenizer."""

    name_or_path: str | None = Field(
        None,
        description="use this tokenizer instead of training one; with a loaded model "
        "(model.name_or_path) null means the model's own",
    )
    vocab_size: int = Field(
        8000,
        ge=300,
        le=MAX_VOCAB,
        description="size of the trained vocabulary (Aggarwal et al. 2024: 32,000)",
    )
    temperature: float = Field(
        3.0, gt=0, description="language sampling temperature for the training mixture"
    )
    sample_texts: int = Field(20000, gt=0, description="texts drawn for tokenizer training")
    min_frequency: int = Field(2, ge=1)

    @field_validator("name_or_path")
    @classmethod
    def _exists(cls, name: str | None) -> str | None:
        if name is not None and looks_local(name) and not Path(name).expanduser().exists():
            raise ValueError(f"local tokenizer folder '{name}' does not exist")
        return name
