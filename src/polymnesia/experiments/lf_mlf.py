"""Protocol ``lf_mlf``: multi-lingual fine-tuning with per-language gradients (paper 003).

Mao et al. 2022, "Less-Forgetting Multi-Lingual Fine-Tuning", Section 5: a
multilingual model (here: the decoder of the pretraining stage, shared and
cached with ``language_modeling``) is fine-tuned on a labelled task in a few
source languages with Uniform-MLF, PCGrad, GradVac, MGDA and LF-MLF, and with
single-language fine-tuning (SLF) per source, over several seeds; reported are
zero-shot performance averaged over the target languages (Tables 1-3),
fine-tuning performance per source (Tables 4-6) with paired t-test marks, the
Friedman test and Bonferroni-Dunn CD diagram (Figure 2), the forgetting F_p of
the pretraining objective (Section 3.2), and optionally the source-count sweep
(Figures 3-4, R_T) and cross-branch transfer (Figure 5a).

The offline task is the Bible verse genre (9 labels); XLM-R and WikiANN/XNLI
are replaced by a tiny decoder and the Bible: see docs/lf_mlf.md.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.experiments.base import EXPERIMENTS, Experiment, ExperimentConfig
from polymnesia.experiments.language_modeling import data_stage, tokenizer_stage
from polymnesia.experiments.sections import DataConfig, TokenizerConfig, check_language
from polymnesia.models import ModelConfig
from polymnesia.pipeline.stage import StageSpec
from polymnesia.tasks import TaskConfig
from polymnesia.training.config import TrainConfig

LABELS = {
    "uniform": "Uniform-MLF",
    "pcgrad": "PCGrad",
    "gradvac": "GradVac",
    "mgda": "MGDA",
    "lf_mlf": "LF-MLF",
}
REFERENCE = "LF-MLF"
Part = Literal["main", "sweep", "branches"]
ALL_PARTS: list[Part] = ["main", "sweep", "branches"]


def label_of(method: str) -> str:
    return LABELS.get(method, method)


class PretrainSection(StrictModel):
    """The base model: same builders (and cache entries) as ``language_modeling``."""

    languages: list[str] = Field(
        description="pretraining languages (S_p; sources must be among them)"
    )
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    mixture_temperature: float = Field(3.0, gt=0)

    @field_validator("languages")
    @classmethod
    def _codes(cls, v: list[str]) -> list[str]:
        return [check_language(c) for c in v]


class EvaluationSection(StrictModel):
    max_train_per_lang: int | None = Field(
        2000, gt=0, description="labelled training examples per source (seeded sample by verse id)"
    )
    max_eval_per_lang: int | None = Field(
        None, gt=0, description="cap on test examples per language"
    )
    batch_size: int = Field(64, gt=0)
    forgetting_texts: int | None = Field(
        50, gt=0, description="held-out texts per language for F_p"
    )
    forgetting_max_length: int = Field(128, gt=1)
    forgetting_languages: list[str] | None = Field(None, description="default: every data language")


class SweepSection(StrictModel):
    """Figures 3-4: sources = the top-k of ``ranking`` for each k in ``counts``."""

    ranking: list[str] = Field(description="source candidates from high to low resource")
    counts: list[int] = Field(description="numbers of source languages (each >= 2)")
    methods: list[str] = Field(default_factory=lambda: ["uniform", "lf_mlf"])

    @model_validator(mode="after")
    def _check(self) -> SweepSection:
        if any(k < 2 or k > len(self.ranking) for k in self.counts):
            raise ValueError(
                f"sweep.counts must lie in 2..{len(self.ranking)} (the ranking's length)"
            )
        return self


class BranchSection(StrictModel):
    """Figure 5a: fine-tune on one branch's languages, zero-shot on each other branch."""

    groups: dict[str, list[str]] = Field(description="branch name -> languages")
    methods: list[str] = Field(default_factory=lambda: ["uniform", "lf_mlf"])


class LFMLFConfig(ExperimentConfig):
    experiment: Literal["lf_mlf"] = "lf_mlf"
    data: DataConfig = Field(default_factory=DataConfig)
    pretrain: PretrainSection
    task: TaskConfig = Field(default_factory=TaskConfig)
    sources: list[str] = Field(description="source languages S_f (paper: en, de, fr)")
    targets: list[str] | None = Field(
        None, description="zero-shot languages; default: every other pretraining language"
    )
    methods: list[str] = Field(
        default_factory=lambda: list(LABELS), description="gradient combiners"
    )
    method_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="combiner -> options"
    )
    slf: bool = Field(True, description="single-language fine-tuning baselines per source")
    seeds: list[int] = Field(
        default_factory=lambda: [0, 1, 2], description="fine-tuning seeds (>= 3 for t-tests)"
    )
    finetune: TrainConfig = Field(default_factory=TrainConfig)
    evaluation: EvaluationSection = Field(default_factory=EvaluationSection)
    sweep: SweepSection | None = None
    branches: BranchSection | None = None
    parts: list[Part] = Field(
        default_factory=lambda: list(ALL_PARTS), description="which parts to run"
    )

    @field_validator("sources", "targets")
    @classmethod
    def _codes(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else [check_language(c) for c in v]

    @field_validator("methods")
    @classmethod
    def _methods(cls, v: list[str]) -> list[str]:
        from polymnesia.errors import unknown
        from polymnesia.gradients import COMBINERS

        for m in v:
            if m not in COMBINERS:
                raise ValueError(str(unknown("combiner", m, COMBINERS.names())))
        return v

    @model_validator(mode="after")
    def _check(self) -> LFMLFConfig:
        if not self.sources:
            raise ValueError("at least one source language is needed")
        if len(self.sources) < 2 and self.methods:
            raise ValueError(
                "multi-lingual methods need T >= 2 sources (with T = 1 every combiner is plain fine-tuning; use slf)"
            )
        missing = [s for s in self.sources if s not in self.pretrain.languages]
        if missing:
            raise ValueError(
                f"sources {missing} are not pretraining languages {self.pretrain.languages} (paper: S_f in S_p)"
            )
        if self.targets is not None and (overlap := [t for t in self.targets if t in self.sources]):
            warnings.warn(
                f"targets {overlap} are also sources; they are scored as sources only", stacklevel=2
            )
        for m in self.method_options:
            if m not in self.methods:
                raise ValueError(
                    f"method_options names '{m}', which is not in methods {self.methods}"
                )
        return self

    def target_langs(self, sources: list[str]) -> list[str]:
        pool = self.targets if self.targets is not None else self.pretrain.languages
        return [t for t in pool if t not in sources]

    def all_languages(self) -> list[str]:
        langs = [*self.pretrain.languages, *(self.targets or [])]
        if self.sweep:
            langs += self.sweep.ranking
        if self.branches:
            langs += [x for g in self.branches.groups.values() for x in g]
        return list(dict.fromkeys(langs))

    def forgetting_languages(self) -> list[str]:
        return self.evaluation.forgetting_languages or self.all_languages()


def pretrain_stage(cfg: LFMLFConfig) -> StageSpec:
    from polymnesia.stages.pretrain import PretrainParams

    p = cfg.pretrain
    params = PretrainParams(
        model=p.model,
        train=p.train,
        languages=p.languages,
        temperature=p.mixture_temperature,
        seed=cfg.seed,
    )
    return StageSpec("pretrain", "pretrain", params, {"data": "data", "tokenizer": "tokenizer"})


def base_lm_stage(cfg: LFMLFConfig) -> StageSpec:
    from polymnesia.stages.evaluate_lm import EvaluateLMParams

    e = cfg.evaluation
    params = EvaluateLMParams(
        label="base",
        languages={lang: "forgetting" for lang in cfg.forgetting_languages()},
        split="test",
        max_texts_per_lang=e.forgetting_texts,
        batch_size=e.batch_size,
        max_length=e.forgetting_max_length,
    )
    return StageSpec("base_lm", "evaluate_lm", params, {"data": "data", "model": "pretrain"})


def finetune_stage(
    cfg: LFMLFConfig, method: str, sources: list[str], targets: list[str], seed: int, setting: str
) -> StageSpec:
    from polymnesia.stages.finetune import FinetuneParams

    e = cfg.evaluation
    label = f"SLF-{sources[0]}" if method == "slf" else label_of(method)
    params = FinetuneParams(
        label=label,
        method=method,
        method_options=cfg.method_options.get(method, {}),
        sources=sources,
        targets=targets,
        task=cfg.task,
        train=cfg.finetune,
        seed=seed,
        setting=setting,
        max_train_per_lang=e.max_train_per_lang,
        max_eval_per_lang=e.max_eval_per_lang,
        eval_batch_size=e.batch_size,
        forgetting_languages=cfg.forgetting_languages() if setting == "main" else [],
        forgetting_texts=e.forgetting_texts,
        forgetting_max_length=e.forgetting_max_length,
    )
    tag = "-".join(sources) if method == "slf" else method
    return StageSpec(
        f"ft_{setting}_{tag}_s{seed}",
        "finetune_task",
        params,
        {"data": "data", "model": "pretrain"},
    )


def arms(
    cfg: LFMLFConfig,
    methods: list[str],
    sources: list[str],
    targets: list[str],
    setting: str,
    slf: bool,
) -> list[StageSpec]:
    out = []
    for seed in cfg.seeds:
        out += [finetune_stage(cfg, m, sources, targets, seed, setting) for m in methods]
        if slf:
            out += [finetune_stage(cfg, "slf", [s], targets, seed, setting) for s in sources]
    return out


@EXPERIMENTS.register(
    "lf_mlf",
    "multi-lingual fine-tuning: uniform, PCGrad, GradVac, MGDA, LF-MLF and SLF (paper 003)",
)
class LFMLF(Experiment):
    Config = LFMLFConfig

    @classmethod
    def build(cls, cfg: ExperimentConfig) -> list[StageSpec]:
        assert isinstance(cfg, LFMLFConfig)
        specs = [
            data_stage(cfg, cfg.all_languages()),
            tokenizer_stage(cfg, cfg.pretrain.tokenizer, cfg.pretrain.languages),
        ]
        specs += [pretrain_stage(cfg), base_lm_stage(cfg)]
        if "main" in cfg.parts:
            specs += arms(
                cfg, cfg.methods, cfg.sources, cfg.target_langs(cfg.sources), "main", cfg.slf
            )
        if cfg.sweep and "sweep" in cfg.parts:
            top = cfg.sweep.ranking[: max(cfg.sweep.counts)]
            targets = [t for t in cfg.target_langs(top)]
            for k in cfg.sweep.counts:
                specs += arms(
                    cfg, cfg.sweep.methods, cfg.sweep.ranking[:k], targets, f"top{k}", False
                )
            specs += arms(cfg, [], top, targets, "sweep_slf", True)
        if cfg.branches and "branches" in cfg.parts:
            groups = cfg.branches.groups
            for name, langs in groups.items():
                others = [x for g, ls in groups.items() if g != name for x in ls]
                specs += arms(cfg, cfg.branches.methods, langs, others, f"branch_{name}", False)
        return specs

    @classmethod
    def report(cls, cfg: ExperimentConfig, run_dir: Path) -> Path:
        from polymnesia.experiments.lf_mlf_report import write_report

        assert isinstance(cfg, LFMLFConfig)
        return write_report(cfg, run_dir)
