"""The ``new_token_init`` config: base models (standard pretraining, active forgetting) crossed
with the initialisations of new-token rows, scored along the relearning of those rows."""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.experiments.active_forgetting.config import ForgettingSection
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
)
from polymnesia.items import BootstrapConfig
from polymnesia.models.new_tokens import INITS
from polymnesia.stages.static_embeddings import VocabularySection

#: the reference every other initialisation is compared with
REFERENCE = "mean"


class BaseArm(StrictModel):
    """One base model: the shared pretraining, with active forgetting when ``forgetting`` is set."""

    name: str = Field(description="the base's label in tables and figures (standard, af)")
    forgetting: ForgettingSection | None = Field(
        None,
        description="active forgetting during pretraining (Aggarwal et al. 2024); null: standard",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", v):
            raise ValueError(
                f"base name '{v}' must start with a letter and hold letters, digits, _ or -"
            )
        return v


class RelearnSection(StrictModel):
    """The initialisations compared and how their rows relearn (new rows and head, body frozen)."""

    inits: list[str] = Field(
        default_factory=lambda: [
            "mean",
            "subtoken_mean",
            "normal",
            "focus",
            "omp",
            "align",
            "wechsel",
        ],
        description="initialisations to compare (polymnesia ls inits); must include mean",
    )
    head: Literal["keep", "reinit"] = Field(
        "keep",
        description="LM head: keep (old rows kept, new rows initialised like the embeddings) or "
        "reinit (Aggarwal et al. 2024: every row drawn afresh, so 0 steps scores a random head)",
    )
    vocabulary: VocabularySection = Field(default_factory=VocabularySection)
    train: TrainConfig = Field(default_factory=TrainConfig, description="the relearning")
    eval_at: list[int] | None = Field(
        None,
        description="step counts scored besides 0 (the initialisation alone) and train.steps, "
        "at least one when train.steps is 2 or more; null: the midpoint, train.steps // 2",
    )

    @field_validator("inits")
    @classmethod
    def _inits(cls, v: list[str]) -> list[str]:
        unknown = [i for i in v if i not in INITS]
        if unknown:
            raise ValueError(
                f"unknown init {unknown[0]!r} in relearn.inits; accepted: "
                f"{', '.join(INITS.names())}"
            )
        if len(set(v)) < len(v):
            raise ValueError(f"an init is listed twice in relearn.inits: {v}")
        if REFERENCE not in v:
            raise ValueError(
                f"relearn.inits must include '{REFERENCE}': every other init is compared with it"
            )
        return v

    @model_validator(mode="after")
    def _steps(self) -> RelearnSection:
        n = self.train.steps
        if self.eval_at == [] and n > 1:
            raise ValueError(
                "relearn.eval_at is empty, so the relearning would be scored only at its ends: "
                f"give step counts strictly between 0 and relearn.train.steps ({n}), e.g. "
                f"[{n // 2}], or leave the key out for the midpoint"
            )
        bad = sorted(s for s in self.eval_steps() if not 0 < s < self.train.steps)
        if bad:
            raise ValueError(
                f"relearn.eval_at {bad} must lie strictly between 0 and relearn.train.steps "
                f"({self.train.steps}); both ends are always scored"
            )
        if len(set(self.eval_steps())) < len(self.eval_steps()):
            raise ValueError(f"a step count is listed twice in relearn.eval_at: {self.eval_at}")
        return self

    def eval_steps(self) -> list[int]:
        """The step counts scored between 0 and ``train.steps``: ``eval_at``, or the midpoint
        when it is not given (none for a relearning of one step)."""
        if self.eval_at is not None:
            return list(self.eval_at)
        return [self.train.steps // 2] if self.train.steps > 1 else []

    def steps(self) -> list[int]:
        """Every step count scored, ascending."""
        return sorted({0, *self.eval_steps(), self.train.steps})


@EXPERIMENT_CONFIGS.register("new_token_init")
class NewTokenInitConfig(ExperimentConfig):
    #: any number of training seeds: the report pairs arms seed by seed (seeds and texts)
    max_seeds: ClassVar[int | None] = None

    experiment: Literal["new_token_init"] = "new_token_init"
    data: DataConfig = Field(default_factory=DataConfig)
    groups: GroupsConfig
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    pretrain: TrainConfig = Field(default_factory=TrainConfig)
    mixture_temperature: float = Field(3.0, gt=0)
    bases: list[BaseArm] = Field(
        min_length=1, description="base models: standard pretraining and/or active forgetting"
    )
    relearn: RelearnSection = Field(default_factory=RelearnSection)
    evaluate: EvalConfig = Field(default_factory=EvalConfig)
    bootstrap: BootstrapConfig = Field(
        default_factory=BootstrapConfig, description="resampling of test texts for intervals"
    )

    @model_validator(mode="after")
    def _check(self) -> NewTokenInitConfig:
        names = [b.name for b in self.bases]
        if len(set(names)) < len(names):
            raise ValueError(f"a base name is listed twice in bases: {names}")
        if not self.groups.adapting:
            raise ValueError("groups.adapting is empty: the new tokens are learned on them")
        if self.model.name_or_path:
            raise ValueError(
                "new_token_init pretrains its base models (with and without active forgetting); "
                "model.name_or_path is not accepted, use model.preset"
            )
        for b in self.bases:
            self.base_train(b)  # the plugin's own checks (reset_every < steps, ...)
        return self

    def base(self) -> BaseModelSection:
        return flat_base(self, self.pretrain)

    def base_train(self, arm: BaseArm) -> TrainConfig:
        """A base's pretraining: ``pretrain``, with the ``active_forgetting`` plugin if asked."""
        if arm.forgetting is None:
            return self.pretrain
        return self.pretrain.with_plugins(arm.forgetting.plugin_for(self.pretrain, self.seed))
