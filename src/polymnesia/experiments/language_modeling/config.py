"""The ``language_modeling`` config: data, language groups, a base model and its evaluation."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from polymnesia.experiments.base import EXPERIMENT_CONFIGS, ExperimentConfig
from polymnesia.experiments.sections import (
    BaseModelSection,
    DataConfig,
    EvalConfig,
    GroupsConfig,
    ModelConfig,
    TokenizerConfig,
    TrainConfig,
    flat_base,
    own_tokenizer,
)


@EXPERIMENT_CONFIGS.register("language_modeling")
class LanguageModelingConfig(ExperimentConfig):
    experiment: Literal["language_modeling"] = "language_modeling"
    max_seeds: ClassVar[int | None] = None  # seeds: [..] runs once per seed
    label: str = Field("Baseline", description="the model's name in tables")
    data: DataConfig = Field(default_factory=DataConfig)
    groups: GroupsConfig
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    mixture_temperature: float = Field(
        3.0, gt=0, description="language sampling temperature of the pretraining mixture"
    )
    evaluate: EvalConfig = Field(default_factory=EvalConfig)

    @model_validator(mode="before")
    @classmethod
    def _own_tokenizer(cls, data: Any) -> Any:
        return own_tokenizer(data)

    def base(self) -> BaseModelSection:
        """The base model these flat keys describe (pretrained on ``groups.pretraining``)."""
        return flat_base(self, self.train)
