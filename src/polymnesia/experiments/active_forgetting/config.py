"""The ``active_forgetting`` config (Aggarwal et al. 2024): groups, base model, forgetting,
adaptation,
instruction tuning and the downstream evaluations."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel, renamed
from polymnesia.errors import suggest
from polymnesia.experiments.base import EXPERIMENT_CONFIGS, ExperimentConfig
from polymnesia.experiments.sections import (
    BaseModelSection,
    DataConfig,
    EvalConfig,
    GroupsConfig,
    ModelConfig,
    TokenizerConfig,
    TrainConfig,
    check_language,
    flat_base,
    own_tokenizer,
)
from polymnesia.harness.config import HarnessConfig
from polymnesia.harness.tasks import HARNESS_TASKS, expand
from polymnesia.items import BootstrapConfig
from polymnesia.methods.active_forgetting import ActiveForgettingOptions
from polymnesia.models import PRESETS
from polymnesia.stages.adapt_vocabulary import AdaptConfig
from polymnesia.stages.evaluate_translation import check_tokenizer_name
from polymnesia.stages.instruct import InstructConfig

ARMS = ("Baseline", "BA", "AFA")


class ForgettingSection(ActiveForgettingOptions):
    """Active forgetting during pretraining (Table 4: reset every 10,000 of 150,000 steps).

    The ``active_forgetting`` plugin's own options (declared once, in
    :class:`~polymnesia.methods.active_forgetting.ActiveForgettingOptions`), less those the
    protocol sets (:data:`FROM_THE_PROTOCOL`: the window's warmup and decay follow
    ``pretrain``, the draws the config's ``seed``); :meth:`plugin_for` is the AFA arm's plugin.
    """

    @model_validator(mode="before")
    @classmethod
    def _not_the_protocols(cls, data: Any) -> Any:
        given = sorted(set(data) & set(FROM_THE_PROTOCOL)) if isinstance(data, dict) else []
        if given:
            raise ValueError(
                f"{given[0]} is set from {FROM_THE_PROTOCOL[given[0]]}; remove it (accepted: "
                f"{', '.join(k for k in cls.model_fields if k not in FROM_THE_PROTOCOL)})"
            )
        return data

    def plugin_for(self, pretrain: TrainConfig, seed: int) -> ActiveForgettingOptions:
        """The plugin's options for pretraining with ``pretrain`` under ``seed``."""
        return ActiveForgettingOptions(
            **self.model_dump(),
            warmup_ratio=pretrain.warmup_ratio,
            min_lr_ratio=pretrain.min_lr_ratio,
            seed=seed,
        )


#: the plugin's options a :class:`ForgettingSection` leaves to the protocol, and where from
FROM_THE_PROTOCOL = {
    "warmup_ratio": "pretrain.warmup_ratio",
    "min_lr_ratio": "pretrain.min_lr_ratio",
    "seed": "the config's seed",
}
for _key in FROM_THE_PROTOCOL:  # not a key of the section: left out of its dump
    ForgettingSection.model_fields[_key].exclude = True
ForgettingSection.model_rebuild(force=True)


class DownstreamSection(StrictModel):
    """Tables 2-4: isotropy, translation and zero-shot genre classification, and their intervals."""

    isotropy_texts: int = Field(100, gt=0, description="test verses per language for isotropy")
    isotropy_pooling: Literal["last", "mean"] = Field(
        "last", description="one vector per word occurrence from its sub-tokens: last or mean"
    )
    translation_texts: int = Field(12, gt=0, description="test verses per language translated")
    translation_shots: int = Field(4, ge=0, description="examples in the prompt (paper: 4)")
    max_new_tokens: int = Field(48, gt=0)
    bleu_tokenize: str = Field(
        "13a",
        description="sacrebleu BLEU tokenizer (13a, intl, char, zh, flores200, ...) or by_script",
    )
    bleu_tokenize_by_lang: dict[str, str] = Field(
        default_factory=dict,
        description="target language -> BLEU tokenizer (overrides bleu_tokenize)",
    )
    zero_shot_texts: int = Field(60, gt=0, description="test verses per language classified")
    zero_shot_scoring: Literal["raw", "length_normalised", "pmi", "contextual"] = Field(
        "raw",
        description="answer score: raw likelihood, length_normalised, pmi (Holtzman et al. 2021) "
        "or contextual (Zhao et al. 2021)",
    )
    bootstrap: BootstrapConfig = Field(
        default_factory=BootstrapConfig, description="resampling of test items for intervals"
    )
    sample_seed: int = Field(
        0,
        description="seed of the test sample: the verses translated and classified, the "
        "translation examples, isotropy's random word pairs and lm-eval's few-shot draws; "
        "not the training seed, so every training seed is scored on the same test items",
    )

    @field_validator("bleu_tokenize")
    @classmethod
    def _tokenizer(cls, v: str) -> str:
        return check_tokenizer_name(v)

    @field_validator("bleu_tokenize_by_lang")
    @classmethod
    def _tokenizers(cls, v: dict[str, str]) -> dict[str, str]:
        out = {check_language(lang): check_tokenizer_name(name) for lang, name in v.items()}
        if len(out) < len(v):
            raise ValueError("a language is listed twice in bleu_tokenize_by_lang")
        return out


class AFEvaluation(EvalConfig):
    """Per-language likelihood evaluation (Tables 1-2), and lm-evaluation-harness tasks on the
    instruction-tuned models (optional)."""

    harness: HarnessConfig | None = Field(
        None, description="lm-evaluation-harness tasks on the instruction-tuned models"
    )

    def lm(self) -> EvalConfig:
        """The likelihood evaluation alone (the ``evaluate_lm`` stages' section)."""
        return EvalConfig.model_validate(self.model_dump(exclude={"harness"}))


@EXPERIMENT_CONFIGS.register("active_forgetting")
class ActiveForgettingConfig(ExperimentConfig):
    experiment: Literal["active_forgetting"] = "active_forgetting"
    max_seeds: ClassVar[int | None] = None  # seeds: [..] runs once per seed
    data: DataConfig = Field(default_factory=DataConfig)
    groups: GroupsConfig
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    sizes: list[str] | None = Field(
        None, description="model presets to sweep (Figure 3); left out: just 'model'"
    )
    pretrain: TrainConfig = Field(default_factory=TrainConfig)
    mixture_temperature: float = Field(3.0, gt=0)
    forgetting: ForgettingSection
    adapt: AdaptConfig = Field(default_factory=AdaptConfig)
    instruct: InstructConfig = Field(default_factory=InstructConfig)
    evaluate: AFEvaluation = Field(default_factory=AFEvaluation)
    downstream: DownstreamSection = Field(default_factory=DownstreamSection)

    @model_validator(mode="before")
    @classmethod
    def _old_keys(cls, data: Any) -> Any:
        return renamed(data, {"harness": "evaluate.harness"}, "")

    @model_validator(mode="before")
    @classmethod
    def _own_tokenizer(cls, data: Any) -> Any:
        return own_tokenizer(data)

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("sizes is empty: list model presets to sweep, or leave sizes out")
        for size in v:
            if size not in PRESETS:
                names = PRESETS.names()
                raise ValueError(
                    f"unknown model preset '{size}' in sizes{suggest(size, names)}; "
                    f"accepted: {', '.join(names)}"
                )
        if len(set(v)) < len(v):
            raise ValueError(f"a size is listed twice in sizes: {v}")
        return v

    @model_validator(mode="after")
    def _check(self) -> ActiveForgettingConfig:
        self.forgetting_train()  # the plugin's own checks (reset_every < steps, ...)
        if not self.groups.adapting:
            raise ValueError("groups.adapting is empty: the adapted arms need adapting languages")
        if self.model.name_or_path and self.sizes:
            raise ValueError("sizes sweeps presets; it cannot be combined with model.name_or_path")
        unused = sorted(set(self.downstream.bleu_tokenize_by_lang) - set(self.groups.all()))
        if unused:
            raise ValueError(
                f"downstream.bleu_tokenize_by_lang names {', '.join(unused)}, not in groups"
            )
        if self.evaluate.harness is not None:
            missing = sorted(
                {t.lang for t in map(HARNESS_TASKS.get, expand(self.evaluate.harness.tasks))}
                - set(self.groups.all())
            )
            if missing:
                raise ValueError(
                    f"evaluate.harness.tasks need {', '.join(missing)}, which no group lists "
                    "(the poly_* tasks read the run's prepared data)"
                )
        return self

    def size_list(self) -> list[str | None]:
        """The sizes to build (``[None]``: just the ``model`` section)."""
        return [*self.sizes] if self.sizes else [None]

    def base(self) -> BaseModelSection:
        """The base model (pretrained on ``groups.pretraining`` with ``pretrain``)."""
        return flat_base(self, self.pretrain)

    def forgetting_plugin(self) -> ActiveForgettingOptions:
        return self.forgetting.plugin_for(self.pretrain, self.seed)

    def forgetting_train(self) -> TrainConfig:
        """The AFA arm's pretraining: ``pretrain`` with the ``active_forgetting`` plugin."""
        return self.pretrain.with_plugins(self.forgetting_plugin())
