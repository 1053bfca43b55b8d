"""Protocol ``language_modeling``: tokenizer + decoder from scratch, evaluated by language group.

The quickstart. It is the first half of paper 000's pipeline (Figure 1): a
byte-level BPE and a small Mistral decoder trained on the *pretraining*
languages, then perplexity and bits per byte on held-out text of the
pretraining, adapting and other languages, averaged per group as in Table 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from polymnesia.experiments.base import EXPERIMENTS, Experiment, ExperimentConfig
from polymnesia.experiments.reporting import lm_bar_plot, lm_tables, training_curves
from polymnesia.experiments.sections import DataConfig, EvalConfig, GroupsConfig, TokenizerConfig
from polymnesia.models import ModelConfig
from polymnesia.pipeline.stage import StageSpec
from polymnesia.reports.render import Report
from polymnesia.results import read_scores
from polymnesia.training.config import TrainConfig


class LanguageModelingConfig(ExperimentConfig):
    experiment: Literal["language_modeling"] = "language_modeling"
    label: str = Field("Baseline", description="the model's name in tables")
    data: DataConfig = Field(default_factory=lambda: DataConfig())
    groups: GroupsConfig
    tokenizer: TokenizerConfig = Field(default_factory=lambda: TokenizerConfig())
    model: ModelConfig = Field(default_factory=lambda: ModelConfig())
    train: TrainConfig = Field(default_factory=lambda: TrainConfig())
    mixture_temperature: float = Field(
        3.0, gt=0, description="language sampling temperature of the pretraining mixture"
    )
    evaluate: EvalConfig = Field(default_factory=lambda: EvalConfig())


def data_stage(cfg: Any, languages: list[str]) -> StageSpec:
    """The prepare-data stage of any experiment config with a ``data`` section."""
    from polymnesia.stages.data import PrepareDataParams

    d: DataConfig = cfg.data
    return StageSpec(
        "data",
        "prepare_data",
        PrepareDataParams(
            source=d.source,
            options=d.options,
            languages=languages,
            split_fractions=d.split_fractions,
            split_seed=d.split_seed,
            max_train_per_lang=d.max_train_per_lang,
            max_eval_per_lang=d.max_eval_per_lang,
        ),
    )


def tokenizer_stage(cfg: ExperimentConfig, t: TokenizerConfig, languages: list[str]) -> StageSpec:
    from polymnesia.stages.tokenizer import TrainTokenizerParams

    return StageSpec(
        "tokenizer",
        "train_tokenizer",
        TrainTokenizerParams(
            languages=languages,
            vocab_size=t.vocab_size,
            temperature=t.temperature,
            sample_texts=t.sample_texts,
            min_frequency=t.min_frequency,
            seed=cfg.seed,
            name_or_path=t.name_or_path,
        ),
        {"data": "data"},
    )


def evaluate_stage(
    name: str,
    label: str,
    model_stage: str,
    groups: GroupsConfig,
    e: EvalConfig,
    size: str | None = None,
) -> StageSpec:
    from polymnesia.stages.evaluate_lm import EvaluateLMParams

    return StageSpec(
        name,
        "evaluate_lm",
        EvaluateLMParams(
            label=label,
            size=size,
            languages=groups.group_of(),
            split=e.split,
            max_texts_per_lang=e.max_texts_per_lang,
            batch_size=e.batch_size,
            max_length=e.max_length,
        ),
        {"data": "data", "model": model_stage},
    )


@EXPERIMENTS.register(
    "language_modeling",
    "tokenizer + decoder from scratch, perplexity and bits/byte by language group (quickstart)",
)
class LanguageModeling(Experiment):
    Config = LanguageModelingConfig

    @classmethod
    def build(cls, cfg: ExperimentConfig) -> list[StageSpec]:
        from polymnesia.stages.pretrain import PretrainParams

        assert isinstance(cfg, LanguageModelingConfig)
        langs = cfg.groups.pretraining
        return [
            data_stage(cfg, cfg.groups.all()),
            tokenizer_stage(cfg, cfg.tokenizer, langs),
            StageSpec(
                "pretrain",
                "pretrain",
                PretrainParams(
                    model=cfg.model,
                    train=cfg.train,
                    languages=langs,
                    temperature=cfg.mixture_temperature,
                    seed=cfg.seed,
                ),
                {"data": "data", "tokenizer": "tokenizer"},
            ),
            evaluate_stage("evaluate", cfg.label, "pretrain", cfg.groups, cfg.evaluate),
        ]

    @classmethod
    def report(cls, cfg: ExperimentConfig, run_dir: Path) -> Path:
        assert isinstance(cfg, LanguageModelingConfig)
        scores = read_scores(run_dir / "results" / "scores.jsonl")
        groups = cfg.groups.as_dict()
        rep = Report(f"{cfg.name}: language modelling by language group")
        rep.paragraph(
            f"A {cfg.model.preset or cfg.model.name_or_path} decoder trained for {cfg.train.steps} steps on "
            f"{', '.join(cfg.groups.pretraining)} (data source '{cfg.data.source}'), evaluated on the "
            f"{cfg.evaluate.split} split of {len(cfg.groups.all())} languages. Bits per byte does not depend on "
            "the tokenizer; token perplexity does. Groups follow paper 000 (Table 6)."
        )
        rep.heading("Results", 2)
        lm_tables(rep, run_dir, scores, groups, cfg.evaluate.headline)
        rep.heading("Figures", 2)
        lm_bar_plot(rep, run_dir, scores, groups, cfg.evaluate.headline)
        training_curves(rep, run_dir)
        md, _ = rep.write(run_dir)
        return md
