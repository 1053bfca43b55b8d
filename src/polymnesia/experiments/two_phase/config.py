"""The ``two_phase`` config (the two-phase CFT paper): base model, instruction sets, phase-wise
pairs, the
dataset mixture, an optional off-the-shelf Phase 1 model, mitigations, evaluation."""

from __future__ import annotations

import re
import warnings
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.errors import ConfigWarning
from polymnesia.evaluation.config import EvaluationSection
from polymnesia.experiments.base import EXPERIMENT_CONFIGS, ExperimentConfig
from polymnesia.experiments.sections import BaseModelSection, DataConfig, TrainConfig
from polymnesia.harness.config import HarnessOptions
from polymnesia.harness.suites import expand_suites, is_suite, parse_suite
from polymnesia.harness.tasks import check_tasks
from polymnesia.methods.layer_freezing import LayerFreezing, LayerFreezingConfig
from polymnesia.stages.common import MODEL
from polymnesia.stages.drift import DriftConfig
from polymnesia.stages.instruction_data import InstructionSetConfig
from polymnesia.stages.merge import MergeParams
from polymnesia.stages.replay_data import ReplayConfig
from polymnesia.stages.similarity import SimilarityConfig
from polymnesia.training.plugins import PLUGINS, FisherEstimate, PluginOptions, plugin_options

INSTRUCT = "instruct"  # the name of the off-the-shelf Phase 1 "dataset" (the paper's Instruct rows)
_NAME = re.compile(r"^[A-Za-z0-9_]+$")


class PairConfig(StrictModel):
    """Phase-wise datasets: Phase 1 (English) then Phase 2 (multilingual)."""

    phase1: str = Field(description=f"an instruction set name, or '{INSTRUCT}' (instruct_model)")
    phase2: str = Field(description="an instruction set name")

    @property
    def key(self) -> str:
        return f"{self.phase1}__{self.phase2}"


#: the models a freezing arm's input options (``before``, ``after``, ``source``) may name:
#: ``base``, the pretrained base model (the Phase 1 model is the one being trained)
ARM_MODELS = ("base",)


class FreezingArm(LayerFreezingConfig):
    """A layer-freezing arm of Table 5 (LF_H1 random, LF_H2 most changed, Spectrum): the
    ``layer_freezing`` plugin's own options (``polymnesia ls plugins``; every rule is the
    plugin's) and a name. ``most_changed`` measures the change from ``before: base`` (the
    base model) to the Phase 1 model unless ``before`` says otherwise."""

    name: str = Field(description="the arm's name in tables (mit_NAME stages)")

    @model_validator(mode="before")
    @classmethod
    def _before_is_base(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("strategy") == "most_changed":
            data = {"before": "base", **data}
        return data

    @model_validator(mode="after")
    def _inputs(self) -> FreezingArm:
        for key in LayerFreezing.input_options:
            value = getattr(self, key)
            if value is not None and value not in ARM_MODELS:
                raise ValueError(
                    f"freezing arm {self.name}: {key} names {value!r}; accepted: "
                    f"{', '.join(ARM_MODELS)}"
                )
        return self

    def plugin(self) -> LayerFreezingConfig:
        """The arm's ``layer_freezing`` plugin options (every option but the arm's name)."""
        return LayerFreezingConfig.model_validate(
            self.model_dump(exclude={"name"}, exclude_none=True)
        )

    def models(self) -> list[str]:
        """The models (of :data:`ARM_MODELS`) the plugin reads as stage inputs."""
        named = (getattr(self, key) for key in LayerFreezing.input_options)
        return list(dict.fromkeys(v for v in named if v is not None))


class ReplayArm(ReplayConfig):
    """A replay arm of Table 5 (GR_5, GR_10: generative; ER_10: English)."""

    name: str


#: the input role of a baseline arm's Phase 2 stage that holds the Phase 1 Fisher (an arm whose
#: plugin reads one, EWC: a ``fisher`` stage)
EWC_FISHER = "fisher"
#: what a baseline arm's ``method`` may be besides a plugin: the models merged
MERGE = "merge"


def baseline_plugins() -> list[str]:
    """The training plugins that are ``two_phase`` baseline arms: those declaring a
    :class:`~polymnesia.training.plugins.Baseline` for ``two_phase``."""
    return [e.name for e in PLUGINS if e.obj.baseline is not None and e.obj.baseline.two_phase]


class BaselineArm(StrictModel):
    """A forgetting baseline as a Phase 2 arm (issue 27; docs/baselines.md), judged against
    plain CFT like the mitigations: Phase 2 with a baseline's training plugin (``l2sp``: a
    pull towards the Phase 1 weights; ``ewc``: a pull weighted by the Phase 1 model's Fisher
    on the Phase 1 data, a ``fisher`` stage; ``distill``: LwF, KL to the Phase 1 model's
    outputs; any plugin that declares itself a baseline), its options set for a step after
    the Phase 1 model as the plugin says, or ``merge``: the Phase 1 and plain CFT models
    merged (``merge_models``)."""

    name: str = Field(description="the arm's name in tables (mit_NAME stages)")
    method: str = Field(
        description="a baseline's training plugin (l2sp, ewc, distill; polymnesia ls "
        "training-plugins), or merge (Phase 1 and CFT merged)"
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="the plugin's options (polymnesia ls training-plugins; ewc: lam, and "
        "fisher_examples, fisher_batch_size for its fisher stage), or merge_models' "
        "(method: average, task_arithmetic or ties; weights; lam; density)",
    )

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        accepted = [*baseline_plugins(), MERGE]
        if v not in accepted:
            raise ValueError(f"unknown baseline {v!r}; accepted: {', '.join(accepted)}")
        return v

    @model_validator(mode="after")
    def _options(self) -> BaselineArm:
        if self.method == MERGE:
            merge = MergeParams.model_validate({"method": "average", **self.options})
            full = merge.model_dump(mode="json")
        else:  # every option filled in: equal settings, equal fingerprints
            try:
                step = self._step(self.options)
            except ValueError as e:
                raise ValueError(f"baseline arm {self.name}: {e}") from None
            full = step.options()
        object.__setattr__(self, "options", full)  # past validate_assignment
        return self

    def _step(self, given: dict[str, Any]) -> PluginOptions:
        """The plugin's options for Phase 2, a step after one previous task (Phase 1), as the
        plugin sets them (:meth:`~polymnesia.training.plugins.PluginOptions.for_step`): its
        input options (EWC's Fisher) are the protocol's."""
        options = plugin_options({"name": self.method, **given})
        role = EWC_FISHER if options.fisher_estimate() is not None else str(MODEL)
        step = options.for_step(role)
        if step is None:
            raise ValueError(f"{self.method} trains without a previous model")
        inputs, wanted = options.plugin_class.input_options, step.options()
        for key in inputs:
            if key in given and given[key] != wanted[key]:
                raise ValueError(
                    f"{self.method}'s {key} is the Phase 1 model's, set by the protocol; leave "
                    f"it out (options: {', '.join(k for k in wanted if k not in inputs)})"
                )
        step.check_previous_tasks(1)
        return step

    def plugin(self) -> PluginOptions:
        """The arm's training plugin options (``l2sp``, ``ewc``, ``distill``, ...)."""
        return plugin_options({"name": self.method, **self.options})

    def fisher(self) -> FisherEstimate | None:
        """How the arm's Phase 1 Fisher is estimated, where its plugin reads one (EWC)."""
        return None if self.method == MERGE else self.plugin().fisher_estimate()


class MitigationConfig(StrictModel):
    """Phase 2 with mitigations (Table 5) for one pair (the paper: Instruct -> MultiAlpaca)."""

    pair: int = Field(0, ge=0, description="index into 'pairs' of the pair mitigated")
    pool: str = Field(
        description="the English instruction set replay draws from (an english_counterpart of "
        "the pair's Phase 2 set: the same instructions in English, original responses)"
    )
    replay: list[ReplayArm] = Field(default_factory=list)
    freezing: list[FreezingArm] = Field(default_factory=list)
    lora_rank: int | None = Field(None, gt=0, description="the LoRA baseline's rank (paper: 64)")
    baselines: list[BaselineArm] = Field(
        default_factory=list, description="forgetting baselines: l2sp, ewc, distill, merge arms"
    )

    def arm_names(self) -> list[str]:
        """Every Phase 2 arm's name (its ``mit_NAME`` stage): replay, freezing, the forgetting
        baselines, then ``LoRA`` when ``lora_rank`` is set."""
        names = [*(a.name for a in self.replay), *(f.name for f in self.freezing)]
        names += [b.name for b in self.baselines]
        return names + (["LoRA"] if self.lora_rank is not None else [])


class AbilityTasks(HarnessOptions):
    """English ability (EA) and multilingual ability (MA): their lm-evaluation-harness tasks,
    and lm-eval's options (:class:`~polymnesia.harness.config.HarnessOptions`, declared once
    for every protocol)."""

    english: list[str] = Field(
        min_length=1,
        description="EA tasks (offline poly_*_en; online e.g. ifeval, mmlu, hellaswag)",
    )
    multilingual: list[str] = Field(
        min_length=1,
        description="MA tasks (offline poly_*_LANG; online e.g. xquad_de, mlqa_*), or suites "
        "SUITE@GROUP: a task family in every language of a group (base, phase2, sets, or "
        "codes joined by '+'), e.g. poly_continue_mc@phase2, belebele@phase2",
    )

    @model_validator(mode="after")
    def _tasks(self) -> AbilityTasks:
        names = [*self.english, *self.multilingual]
        for n in filter(is_suite, names):
            parse_suite(n)  # expanded by the protocol's config, which knows the groups
        plain = [n for n in names if not is_suite(n)]
        if plain:
            check_tasks(plain, self.is_offline(), verify_online=False)
        return self

    def expanded(self, groups: dict[str, list[str]]) -> AbilityTasks:
        """The same section with every ``SUITE@GROUP`` replaced by its tasks, checked."""
        english = expand_suites(self.english, groups)
        multilingual = expand_suites(self.multilingual, groups)
        check_tasks([*english, *multilingual], self.is_offline(), verify_online=False)
        return self.model_copy(update={"english": english, "multilingual": multilingual})


class TwoPhaseEvaluation(EvaluationSection):
    """EA and MA through lm-evaluation-harness (``harness``), the claims' margin, and the
    precision of every model-running evaluation stage (harness, drift, hidden-state DES) and
    of generative replay."""

    harness: AbilityTasks
    ea_margin: float = Field(
        0.05,
        ge=0,
        le=1,
        description="non-inferiority margin of 'Phase 2 on a similar set keeps English "
        "ability': EA (0-1) may fall by at most this much (docs/two_phase.md)",
    )


#: the lm-eval keys of the flat ``evaluation`` section of older two_phase configs, and the
#: defaults it had where lm-eval's differ (they still apply to such a config)
_OLD_HARNESS_KEYS = (
    "english",
    "multilingual",
    "limit",
    "docs_per_task",
    "num_fewshot",
    "batch_size",
    "max_gen_toks",
)
_OLD_DEFAULTS = {"limit": 60, "num_fewshot": 0, "max_gen_toks": 48}


def old_evaluation(data: Any) -> Any:
    """An older config's flat ``evaluation`` section as ``evaluate`` with its lm-eval keys
    under ``evaluate.harness`` (and its old defaults), with one warning line."""
    if not isinstance(data, dict) or "evaluation" not in data:
        return data
    if "evaluate" in data:
        raise ValueError("evaluation is the old name of evaluate; give only evaluate")
    data = dict(data)
    old = data.pop("evaluation")
    if isinstance(old, dict):
        old = dict(old)
        moved = {k: old.pop(k) for k in _OLD_HARNESS_KEYS if k in old}
        old["harness"] = {**_OLD_DEFAULTS, **moved}
    data["evaluate"] = old
    warnings.warn(
        "evaluation is now evaluate, with its lm-eval keys (english, multilingual, limit, "
        "docs_per_task, num_fewshot, batch_size, max_gen_toks) under evaluate.harness; the "
        "old form is still read, with its defaults limit 60, num_fewshot 0, max_gen_toks 48",
        ConfigWarning,
        stacklevel=2,
    )
    return data


@EXPERIMENT_CONFIGS.register("two_phase")
class TwoPhaseConfig(ExperimentConfig):
    experiment: Literal["two_phase"] = "two_phase"
    max_seeds: ClassVar[int | None] = None  # seeds: [..] runs once per seed, pooled
    data: DataConfig = Field(default_factory=DataConfig)
    base: BaseModelSection
    sets: dict[str, InstructionSetConfig] = Field(description="instruction sets by name")
    pairs: list[PairConfig] = Field(min_length=1, description="phase-wise dataset pairs (CFT arms)")
    mixture: bool = Field(True, description="also train the single-phase dataset mixture")
    instruct_model: str | None = Field(
        None,
        description=f"an off-the-shelf Phase 1 model (folder or Hub id): pairs may name "
        f"'{INSTRUCT}' as phase1",
    )
    phase1: TrainConfig = Field(default_factory=TrainConfig)
    phase2: TrainConfig = Field(default_factory=TrainConfig)
    max_length: int = Field(256, gt=8, description="tokens per SFT example")
    mitigation: MitigationConfig | None = None
    evaluate: TwoPhaseEvaluation
    similarity: SimilarityConfig = Field(default_factory=SimilarityConfig)
    drift: DriftConfig = Field(default_factory=DriftConfig)

    @model_validator(mode="before")
    @classmethod
    def _old_keys(cls, data: Any) -> Any:
        return old_evaluation(data)

    @field_validator("sets")
    @classmethod
    def _names(cls, v: dict[str, InstructionSetConfig]) -> dict[str, InstructionSetConfig]:
        if not v:
            raise ValueError("list at least one instruction set")
        for name, s in v.items():
            if not _NAME.match(name) or name == INSTRUCT:
                raise ValueError(
                    f"instruction set name {name!r}: letters, digits and '_' only, not '{INSTRUCT}'"
                )
            if s.of is not None and s.of not in v:
                raise ValueError(f"set {name}: 'of' names {s.of!r}, which is not a set")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> TwoPhaseConfig:
        keys = []
        for i, pair in enumerate(self.pairs):
            if pair.phase1 == INSTRUCT and self.instruct_model is None:
                raise ValueError(f"pairs[{i}] uses '{INSTRUCT}' but instruct_model is not set")
            for which in (pair.phase1, pair.phase2):
                if which != INSTRUCT and which not in self.sets:
                    raise ValueError(
                        f"pairs[{i}] names set {which!r}; defined: {', '.join(self.sets)}"
                    )
            if pair.phase2 == INSTRUCT or pair.phase1 == pair.phase2:
                raise ValueError(f"pairs[{i}]: phase 2 must be a set other than phase 1")
            keys.append(pair.key)
        if len(set(keys)) < len(keys):
            raise ValueError("a pair is listed twice")
        self._fits_the_train_split()
        h = self.evaluate.harness
        if any(map(is_suite, [*h.english, *h.multilingual])):
            # assigned past pydantic: validate_assignment would run this validator again
            object.__setattr__(self.evaluate, "harness", h.expanded(self.language_groups()))
        m = self.mitigation
        if m is not None:
            if m.pair >= len(self.pairs):
                raise ValueError(
                    f"mitigation.pair {m.pair} is not a pair index (0..{len(self.pairs) - 1})"
                )
            if m.pool not in self.sets:
                raise ValueError(f"mitigation.pool names {m.pool!r}, which is not a set")
            if self.base.model.name_or_path is None:  # a preset: its depth is known now
                layers = self.base.model.dims()["num_hidden_layers"]
                for f in m.freezing:
                    try:
                        f.check_depth(layers)
                    except ValueError as e:
                        raise ValueError(f"freezing arm {f.name}: {e}") from None
            names = m.arm_names()  # LoRA's arm is named LoRA
            fisher = [b for b in m.baselines if b.fisher() is not None]
            if fisher and self.pairs[m.pair].phase1 == INSTRUCT:
                raise ValueError(
                    f"baseline arm {fisher[0].name} ({fisher[0].method}) needs the Phase 1 data "
                    "for its Fisher, and "
                    f"the mitigated pair's Phase 1 is the off-the-shelf '{INSTRUCT}' model; "
                    "mitigate a pair whose phase1 is an instruction set, or drop the arm"
                )
            if len(set(names)) < len(names) or not all(_NAME.match(n) for n in names):
                raise ValueError(f"mitigation arm names must be unique identifiers: {names}")
        return self

    def language_groups(self) -> dict[str, list[str]]:
        """The groups a task suite may name: ``base`` (pretraining languages), ``phase2``
        (the Phase 2 sets' languages), ``sets`` (every instruction set's languages)."""
        phase2 = [x for p in self.pairs for x in self.sets[p.phase2].languages]
        every = [x for s in self.sets.values() for x in s.languages]
        return {
            "base": list(self.base.languages),
            "phase2": list(dict.fromkeys(phase2)),
            "sets": list(dict.fromkeys(every)),
        }

    def _fits_the_train_split(self) -> None:
        """A Phase 2 set leaves out every verse of its Phase 1 sets, so together they need that
        many distinct training verses; with ``data.max_train_per_lang`` set, say so before any
        training instead of after pretraining."""
        cap = self.data.max_train_per_lang
        if cap is None:
            return
        for name in dict.fromkeys(p.phase2 for p in self.pairs):
            s = self.sets[name]
            if s.kind == "hf" or s.of is not None:
                continue
            phase1s = sorted({p.phase1 for p in self.pairs if p.phase2 == name} - {INSTRUCT})
            counts = [self.sets[x].records for x in phase1s]
            known = [c for c in counts if c is not None]
            if s.records is None or len(known) < len(counts):
                continue  # an uncapped bible set: its size is known when it is built
            need = s.records + sum(known)
            if need > cap:
                raise ValueError(
                    f"set {name} ({s.records} records) leaves out the verses of "
                    f"{', '.join(phase1s)} ({need - s.records}): {need} distinct training verses "
                    f"per language, but data.max_train_per_lang is {cap}; raise it or ask for "
                    "fewer records"
                )

    def mixture_train(self) -> TrainConfig:
        """The mixture trains as many steps as the two phases together (the paper: the same
        number of training steps)."""
        data = self.phase1.model_dump()
        data["steps"] = self.phase1.steps + self.phase2.steps
        return TrainConfig.model_validate(data)
