"""The ``active_forgetting`` config (paper 000): groups, base model, forgetting, adaptation,
instruction tuning and the downstream evaluations."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.experiments.base import ExperimentConfig
from polymnesia.experiments.sections import (
    BaseModelSection,
    DataConfig,
    EvalConfig,
    GroupsConfig,
    ModelConfig,
    TokenizerConfig,
    TrainConfig,
    flat_base,
)
from polymnesia.models import PRESETS
from polymnesia.stages.adapt_vocabulary import AdaptConfig
from polymnesia.stages.instruct import InstructConfig

ARMS = ("Baseline", "BA", "AFA")


class ForgettingSection(StrictModel):
    """Active forgetting during pretraining (Table 4: reset every 10,000 of 150,000 steps).

    These keys become the ``active_forgetting`` plugin of the AFA arm's pretraining
    (its warmup and decay follow ``pretrain``); the plugin's options validate them.
    """

    reset_every: int = Field(gt=0, description="K: optimizer steps between embedding resets")
    std: float = Field(0.02, gt=0, description="std of the re-drawn embeddings")
    reset_head: bool = Field(False, description="also reset an untied LM head")
    replay_schedule: bool = Field(True, description="embedding LR replays warmup+decay per window")


class DownstreamSection(StrictModel):
    isotropy_texts: int = Field(100, gt=0, description="test verses per language for isotropy")
    translation_texts: int = Field(12, gt=0, description="test verses per language translated")
    translation_shots: int = Field(4, ge=0, description="examples in the prompt (paper: 4)")
    max_new_tokens: int = Field(48, gt=0)
    zero_shot_texts: int = Field(60, gt=0, description="test verses per language classified")


class ActiveForgettingConfig(ExperimentConfig):
    experiment: Literal["active_forgetting"] = "active_forgetting"
    data: DataConfig = Field(default_factory=DataConfig)
    groups: GroupsConfig
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    sizes: list[str] = Field(
        default_factory=list, description="model presets to sweep (Figure 3); empty: just 'model'"
    )
    pretrain: TrainConfig = Field(default_factory=TrainConfig)
    mixture_temperature: float = Field(3.0, gt=0)
    forgetting: ForgettingSection
    adapt: AdaptConfig = Field(default_factory=AdaptConfig)
    instruct: InstructConfig = Field(default_factory=InstructConfig)
    evaluate: EvalConfig = Field(default_factory=EvalConfig)
    downstream: DownstreamSection = Field(default_factory=DownstreamSection)

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, v: list[str]) -> list[str]:
        for size in v:
            if size not in PRESETS:
                raise ValueError(
                    f"unknown model preset '{size}' in sizes; accepted: {', '.join(PRESETS.names())}"
                )
        if len(set(v)) < len(v):
            raise ValueError(f"a size is listed twice: {v}")
        return v

    @model_validator(mode="after")
    def _check(self) -> ActiveForgettingConfig:
        self.forgetting_train()  # the plugin's own checks (reset_every < steps, ...)
        if not self.groups.adapting:
            raise ValueError("groups.adapting is empty: the adapted arms need adapting languages")
        return self

    def base(self) -> BaseModelSection:
        """The base model (pretrained on ``groups.pretraining`` with ``pretrain``)."""
        return flat_base(self, self.pretrain)

    def forgetting_plugin(self) -> dict[str, Any]:
        f = self.forgetting
        return {
            "name": "active_forgetting",
            **f.model_dump(),
            "warmup_ratio": self.pretrain.warmup_ratio,
            "min_lr_ratio": self.pretrain.min_lr_ratio,
            "seed": self.seed,
        }

    def forgetting_train(self) -> TrainConfig:
        """The AFA arm's pretraining: ``pretrain`` with the ``active_forgetting`` plugin."""
        return self.pretrain.with_plugins(self.forgetting_plugin())
