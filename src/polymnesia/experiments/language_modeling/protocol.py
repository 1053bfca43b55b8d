"""Protocol ``language_modeling``: tokenizer + decoder from scratch, evaluated by language group.

The quickstart. It is the first half of Aggarwal et al. 2024's pipeline (Figure 1): a
byte-level BPE and a small Mistral decoder trained on the *pretraining*
languages, then perplexity and bits per byte on held-out text of the
pretraining, adapting and other languages, averaged per group as in Table 1.
"""

from __future__ import annotations

from pathlib import Path

from polymnesia.experiments.base import EXPERIMENTS, ExperimentConfig
from polymnesia.experiments.language_modeling.config import LanguageModelingConfig
from polymnesia.experiments.language_modeling.report import write_report
from polymnesia.experiments.seeds import SeededExperiment
from polymnesia.experiments.shared import PRETRAIN, base_stages, evaluate_lm_stage
from polymnesia.pipeline.stage import StageSpec


@EXPERIMENTS.register(
    "language_modeling",
    "tokenizer + decoder from scratch, perplexity and bits/byte by language group (quickstart)",
)
class LanguageModeling(SeededExperiment):
    Config = LanguageModelingConfig

    @classmethod
    def build_one(cls, cfg: LanguageModelingConfig) -> list[StageSpec]:
        """The stages of one training seed (``cfg.seed``)."""
        return [
            *base_stages(cfg.base(), cfg.data, cfg.groups.all(), cfg.seed),
            evaluate_lm_stage("evaluate", cfg.label, PRETRAIN, cfg.groups.group_of(), cfg.evaluate),
        ]

    @classmethod
    def report(cls, cfg: ExperimentConfig, run_dir: Path) -> Path:
        assert isinstance(cfg, LanguageModelingConfig)
        return write_report(cfg, run_dir)
