"""The ``lf_mlf`` config (paper 003): base model, task, sources and targets, combiners,
seeds, and the optional source-count sweep and cross-branch parts."""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.errors import unknown
from polymnesia.experiments.base import ExperimentConfig
from polymnesia.experiments.sections import (
    BaseModelSection,
    DataConfig,
    TrainConfig,
    check_language,
)
from polymnesia.gradients import COMBINERS
from polymnesia.stages.finetune import FinetuneEvalConfig
from polymnesia.tasks import TaskConfig

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
    pretrain: BaseModelSection
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
    evaluation: FinetuneEvalConfig = Field(default_factory=FinetuneEvalConfig)
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
