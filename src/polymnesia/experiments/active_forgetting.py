"""Protocol ``active_forgetting``: paper 000 end to end (Aggarwal et al. 2024, Figure 1).

Three arms share what they can (one data stage, one tokenizer; the baseline
pretraining serves Baseline and BA):

* **Baseline**: pretrain on the pretraining languages -> instruction-tune (English);
* **BA**: the same base model -> vocabulary expansion on the adapting
  languages (new rows + head trained, body frozen) -> instruction-tune;
* **AFA**: pretrain with active forgetting (embeddings reset every K steps)
  -> vocabulary expansion -> instruction-tune.

Evaluation per language and group: perplexity and bits per byte (Table 1) and
isotropy (Table 2) of the models before instruction tuning (Baseline = the
base model, BA/AFA = the adapted ones, as the paper studies M_adapted);
English-to-X translation (Table 3) and zero-shot genre classification of the
instruction-tuned models. With ``sizes`` the whole pipeline runs per model
size and the report draws Figure 3.

Defaults follow Tables 4-5 scaled down for a CPU: pretraining lr 1e-4 ->
config, 150,000 steps -> a few hundred, reset every 10,000 -> K with the same
ratio steps/K = 15 where affordable, weight decay 0, 10% linear warmup,
cosine; finetuning lr 1e-6, 5 epochs, batch 16 (a tiny model trained for a
few hundred steps needs a larger lr: the configs say what they use).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.experiments.base import EXPERIMENTS, Experiment, ExperimentConfig
from polymnesia.experiments.language_modeling import data_stage, evaluate_stage, tokenizer_stage
from polymnesia.experiments.sections import DataConfig, EvalConfig, GroupsConfig, TokenizerConfig
from polymnesia.models import ModelConfig
from polymnesia.pipeline.stage import StageSpec
from polymnesia.training.config import TrainConfig

ARMS = ("Baseline", "BA", "AFA")


class ForgettingSection(StrictModel):
    """Active forgetting during pretraining (Table 4: reset every 10,000 of 150,000 steps)."""

    reset_every: int = Field(gt=0, description="K: optimizer steps between embedding resets")
    std: float = Field(0.02, gt=0, description="std of the re-drawn embeddings")
    reset_head: bool = Field(False, description="also reset an untied LM head")
    replay_schedule: bool = Field(True, description="embedding LR replays warmup+decay per window")


class AdaptSection(StrictModel):
    """Vocabulary expansion (paper: 32,000 + 16,000 = 48,000 tokens)."""

    new_vocab_size: int = Field(3000, ge=300, description="size of the adapting vocabulary V^L")
    max_new_tokens: int | None = Field(None, gt=0)
    init: Literal["mean", "subtoken_mean"] = "mean"
    strict: bool = False
    sample_texts: int = Field(8000, gt=0)
    train: TrainConfig = Field(default_factory=TrainConfig)


class InstructSection(StrictModel):
    """English-only instruction tuning (Table 5; OpenOrca there, Bible-derived offline here)."""

    source: Literal["bible", "hf"] = "bible"
    tasks: list[str] = Field(default_factory=lambda: ["genre", "continue"])
    dataset: str | None = None
    dataset_config: str | None = None
    fields: dict[str, str] = Field(default_factory=dict)
    max_records: int | None = Field(2000, gt=0)
    max_length: int = Field(256, gt=8)
    train: TrainConfig = Field(default_factory=TrainConfig)


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
    adapt: AdaptSection = Field(default_factory=AdaptSection)
    instruct: InstructSection = Field(default_factory=InstructSection)
    evaluate: EvalConfig = Field(default_factory=EvalConfig)
    downstream: DownstreamSection = Field(default_factory=DownstreamSection)

    @model_validator(mode="after")
    def _check(self) -> ActiveForgettingConfig:
        from polymnesia.methods.active_forgetting import check_reset_every

        check_reset_every(self.forgetting.reset_every, self.pretrain.steps)
        if not self.groups.adapting:
            raise ValueError("groups.adapting is empty: the adapted arms need adapting languages")
        return self


def _size_stages(cfg: ActiveForgettingConfig, size: str | None) -> list[StageSpec]:
    from polymnesia.stages.adapt_vocabulary import AdaptVocabularyParams
    from polymnesia.stages.evaluate_isotropy import EvaluateIsotropyParams
    from polymnesia.stages.evaluate_translation import EvaluateTranslationParams
    from polymnesia.stages.evaluate_zero_shot import EvaluateZeroShotParams
    from polymnesia.stages.instruct import InstructParams
    from polymnesia.stages.pretrain import PretrainParams

    sfx = f"_{size}" if size else ""
    model = cfg.model.model_copy(update={"preset": size}) if size else cfg.model
    size = size or model.preset or "model"  # the tables' size block label
    g, d = cfg.groups, cfg.downstream
    langs = g.group_of()
    f = cfg.forgetting
    af_plugin = {
        "name": "active_forgetting",
        "reset_every": f.reset_every,
        "std": f.std,
        "reset_head": f.reset_head,
        "replay_schedule": f.replay_schedule,
        "warmup_ratio": cfg.pretrain.warmup_ratio,
        "min_lr_ratio": cfg.pretrain.min_lr_ratio,
        "seed": cfg.seed,
    }
    specs: list[StageSpec] = []
    for name, plugins in (("pretrain", []), ("pretrain_af", [af_plugin])):
        specs.append(
            StageSpec(
                name + sfx,
                "pretrain",
                PretrainParams(
                    model=model,
                    train=cfg.pretrain,
                    languages=g.pretraining,
                    temperature=cfg.mixture_temperature,
                    seed=cfg.seed,
                    plugins=plugins,
                ),
                {"data": "data", "tokenizer": "tokenizer"},
            )
        )
    a = cfg.adapt
    for label, base in (("BA", "pretrain"), ("AFA", "pretrain_af")):
        specs.append(
            StageSpec(
                f"adapt_{label}{sfx}",
                "adapt_vocabulary",
                AdaptVocabularyParams(
                    label=label,
                    size=size,
                    adapting=g.adapting,
                    pretraining=g.pretraining,
                    strict=a.strict,
                    new_vocab_size=a.new_vocab_size,
                    max_new_tokens=a.max_new_tokens,
                    temperature=cfg.tokenizer.temperature,
                    sample_texts=a.sample_texts,
                    min_frequency=cfg.tokenizer.min_frequency,
                    init=a.init,
                    fertility_languages=langs,
                    fertility_texts=cfg.evaluate.max_texts_per_lang or 200,
                    train=a.train,
                    seed=cfg.seed,
                ),
                {"data": "data", "model": base + sfx},
            )
        )
    i = cfg.instruct
    sources = {"Baseline": "pretrain", "BA": "adapt_BA", "AFA": "adapt_AFA"}
    for label, src in sources.items():
        specs.append(
            StageSpec(
                f"instruct_{label}{sfx}",
                "instruct",
                InstructParams(
                    source=i.source,
                    tasks=i.tasks,
                    dataset=i.dataset,
                    dataset_config=i.dataset_config,
                    fields=i.fields,
                    max_records=i.max_records,
                    max_length=i.max_length,
                    train=i.train,
                    seed=cfg.seed,
                ),
                {"data": "data", "model": src + sfx},
            )
        )
    for label, src in sources.items():
        specs.append(evaluate_stage(f"lm_{label}{sfx}", label, src + sfx, g, cfg.evaluate, size))
        specs.append(
            StageSpec(
                f"isotropy_{label}{sfx}",
                "evaluate_isotropy",
                EvaluateIsotropyParams(
                    label=label,
                    size=size,
                    languages=langs,
                    max_texts_per_lang=d.isotropy_texts,
                    seed=cfg.seed,
                ),
                {"data": "data", "model": src + sfx},
            )
        )
        tuned = f"instruct_{label}{sfx}"
        specs.append(
            StageSpec(
                f"translation_{label}{sfx}",
                "evaluate_translation",
                EvaluateTranslationParams(
                    label=label,
                    size=size,
                    languages=langs,
                    shots=d.translation_shots,
                    max_texts_per_lang=d.translation_texts,
                    max_new_tokens=d.max_new_tokens,
                    seed=cfg.seed,
                ),
                {"data": "data", "model": tuned},
            )
        )
        specs.append(
            StageSpec(
                f"zero_shot_{label}{sfx}",
                "evaluate_zero_shot",
                EvaluateZeroShotParams(
                    label=label,
                    size=size,
                    languages=langs,
                    max_texts_per_lang=d.zero_shot_texts,
                    seed=cfg.seed,
                ),
                {"data": "data", "model": tuned},
            )
        )
    return specs


@EXPERIMENTS.register(
    "active_forgetting",
    "paper 000: Baseline / BA / AFA (active forgetting, vocabulary expansion, English-only SFT)",
)
class ActiveForgetting(Experiment):
    Config = ActiveForgettingConfig

    @classmethod
    def build(cls, cfg: ExperimentConfig) -> list[StageSpec]:
        assert isinstance(cfg, ActiveForgettingConfig)
        specs = [
            data_stage(cfg, cfg.groups.all()),
            tokenizer_stage(cfg, cfg.tokenizer, cfg.groups.pretraining),
        ]
        sizes: list[str | None] = list(cfg.sizes) or [None]
        for size in sizes:
            specs += _size_stages(cfg, size)
        return specs

    @classmethod
    def report(cls, cfg: ExperimentConfig, run_dir: Path) -> Path:
        from polymnesia.experiments.active_forgetting_report import write_report

        assert isinstance(cfg, ActiveForgettingConfig)
        return write_report(cfg, run_dir)
