"""Which model a config asks for (:class:`ModelConfig`) and its adapters
(:class:`LoraConfig`): sections read without torch or transformers (building, loading and
adapting models is :mod:`polymnesia.models.build`'s and :mod:`polymnesia.models.lora`'s)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from polymnesia.config.base import MAX_HEADS, MAX_LAYERS, MAX_LENGTH, MAX_WIDTH, StrictModel
from polymnesia.errors import PolymnesiaError, unknown
from polymnesia.models.presets import PRESETS
from polymnesia.paths import looks_local


class ModelConfig(StrictModel):
    """Which model: a preset or explicit dimensions for a Mistral built from scratch, or a Hub
    id/folder.
    """

    preset: str | None = Field(
        "tiny", description="size preset (polymnesia ls presets); ignored with name_or_path"
    )
    name_or_path: str | None = Field(
        None, description="a Hub model id or a local HF model folder to start from"
    )
    hidden_size: int | None = Field(
        None, gt=0, le=MAX_WIDTH, description="override the preset's width"
    )
    num_hidden_layers: int | None = Field(None, gt=0, le=MAX_LAYERS)
    num_attention_heads: int | None = Field(None, gt=0, le=MAX_HEADS)
    num_key_value_heads: int | None = Field(None, gt=0, le=MAX_HEADS)
    intermediate_size: int | None = Field(None, gt=0, le=MAX_WIDTH)
    max_position_embeddings: int = Field(2048, gt=0, le=MAX_LENGTH)
    tie_word_embeddings: bool = Field(
        False, description="tie the LM head to the input embeddings (Mistral: untied)"
    )
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="attention dropout")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="weight dtype, for models built here and loaded (torch_dtype)"
    )
    attn_implementation: Literal["eager", "sdpa", "flash_attention_2", "flex_attention"] | None = (
        Field(
            None,
            description="attention kernel (transformers' attn_implementation); null: its default",
        )
    )
    trust_remote_code: bool = Field(False, description="only for Hub models that need it")

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        if self.name_or_path is None and self.preset is not None and self.preset not in PRESETS:
            raise ValueError(str(unknown("model preset", self.preset, PRESETS.names())))
        name = self.name_or_path
        if name is not None and looks_local(name) and not Path(name).expanduser().exists():
            raise ValueError(f"local model folder '{name}' does not exist")
        if name is None:
            try:
                self.dims()  # head counts that do not divide the width fail here, not at run time
            except PolymnesiaError as e:
                raise ValueError(str(e)) from None
        return self

    def describe(self) -> str:
        """How a report names the model: the folder or Hub id it loads, else its preset."""
        if self.name_or_path is not None:
            return self.name_or_path
        return f"preset '{self.preset or 'tiny'}'"

    def dims(self) -> dict[str, int]:
        base = PRESETS.get(self.preset or "tiny")
        dims = {k: getattr(base, k) for k in base.__dataclass_fields__}
        for k in dims:
            if getattr(self, k) is not None:
                dims[k] = getattr(self, k)
        if dims["hidden_size"] % dims["num_attention_heads"]:
            raise PolymnesiaError(
                f"model.hidden_size {dims['hidden_size']} is not divisible by num_attention_heads "
                f"{dims['num_attention_heads']}"
            )
        if dims["num_attention_heads"] % dims["num_key_value_heads"]:
            raise PolymnesiaError(
                "model.num_attention_heads must be a multiple of num_key_value_heads"
            )
        return dims


class LoraConfig(StrictModel):
    """Rank, scale, dropout and target layers of the adapters."""

    alpha: int | None = Field(None, gt=0, description="scale numerator; null = the rank (paper)")
    dropout: float = Field(0.1, ge=0, lt=1, description="LoRA dropout (paper: 0.1)")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        description="module names (or name suffixes) that get adapters; the Llama names q_proj, "
        "k_proj, v_proj, o_proj mean the attention projections of any architecture",
    )
