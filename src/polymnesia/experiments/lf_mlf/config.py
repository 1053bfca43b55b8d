"""The ``lf_mlf`` config (Mao et al. 2022): base model, task(s), sources and targets, combiners,
seeds, the Friedman blocks, and the optional source-count sweep and cross-branch parts.

Everything that can be known without running is checked here with one line
(issue 9): non-empty and duplicate-free lists (parts, seeds, methods, sweep and
branch methods, branch groups), known language codes that are pretraining
languages where they are fine-tuned on, non-negative seeds, a ``sweep`` or
``branches`` section exactly where ``parts`` runs it, and each combiner's
``method_options`` against the options that combiner takes.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, ClassVar, Literal

from pydantic import (
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_serializer,
    model_validator,
)

from polymnesia.config.base import StrictModel, renamed
from polymnesia.data.sources.checks import check_data_section
from polymnesia.errors import PolymnesiaError, unknown
from polymnesia.experiments.base import EXPERIMENT_CONFIGS, ExperimentConfig
from polymnesia.experiments.sections import (
    BaseModelSection,
    DataConfig,
    TrainConfig,
    unique_languages,
)
from polymnesia.gradients import COMBINERS, get_combiner
from polymnesia.metrics.stats import Blocks
from polymnesia.stages.finetune import FinetuneEvalConfig
from polymnesia.tasks.config import TaskConfig

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


def _unique(values: list[Any], key: str, what: str = "value") -> list[Any]:
    if not values:
        raise ValueError(f"{key} must not be empty")
    seen = set()
    for v in values:
        if v in seen:
            raise ValueError(f"{what} {v!r} is listed twice in {key}")
        seen.add(v)
    return values


def _languages(codes: list[str], key: str) -> list[str]:
    """Non-empty, each listed once, then known codes in normal form, each once."""
    return unique_languages(_unique(codes, key), key)


def check_methods(methods: list[str], key: str) -> list[str]:
    """Known combiners, each once, at least one."""
    for m in methods:
        if m not in COMBINERS:
            raise ValueError(f"{key}: {unknown('combiner', m, COMBINERS.names())}")
    return _unique(methods, key, "combiner")


def check_method_options(method: str, options: dict[str, Any]) -> None:
    """``options`` against combiner ``method``'s constructor: names, types, then its own checks."""
    cls = COMBINERS.get(method)
    params = [p for p in inspect.signature(cls.__init__, eval_str=True).parameters.values()][1:]
    fields: dict[str, Any] = {
        p.name: (Any if p.annotation is p.empty else p.annotation, p.default) for p in params
    }
    model = create_model(
        f"{method}_options", __config__=ConfigDict(extra="forbid", strict=False), **fields
    )
    try:
        model.model_validate(options)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        accepted = ", ".join(fields) or "none"
        raise ValueError(
            f"method_options.{method}.{where}: {err['msg']} (got {err.get('input')!r}); "
            f"options of '{method}': {accepted}"
        ) from None
    try:
        get_combiner(method, **options)
    except PolymnesiaError as e:
        raise ValueError(f"method_options.{method}: {e}") from None


class SweepSection(StrictModel):
    """Figures 3-4: sources = the top-k of ``ranking`` for each k in ``counts``."""

    ranking: list[str] = Field(description="source candidates from high to low resource")
    counts: list[int] = Field(description="numbers of source languages (each >= 2)")
    methods: list[str] = Field(default_factory=lambda: ["uniform", "lf_mlf"])

    @field_validator("ranking")
    @classmethod
    def _ranking(cls, v: list[str]) -> list[str]:
        return _languages(v, "sweep.ranking")

    @field_validator("methods")
    @classmethod
    def _methods(cls, v: list[str]) -> list[str]:
        return check_methods(v, "sweep.methods")

    @model_validator(mode="after")
    def _check(self) -> SweepSection:
        _unique(self.counts, "sweep.counts", "count")
        if any(k < 2 or k > len(self.ranking) for k in self.counts):
            raise ValueError(
                f"sweep.counts must lie in 2..{len(self.ranking)} (the ranking's length), got "
                f"{self.counts}"
            )
        return self


class BranchSection(StrictModel):
    """Figure 5a: fine-tune on one branch's languages, zero-shot on each other branch."""

    groups: dict[str, list[str]] = Field(description="branch name -> languages")
    methods: list[str] = Field(default_factory=lambda: ["uniform", "lf_mlf"])

    @field_validator("methods")
    @classmethod
    def _methods(cls, v: list[str]) -> list[str]:
        return check_methods(v, "branches.methods")

    @field_validator("groups")
    @classmethod
    def _groups(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        if len(v) < 2:
            raise ValueError(f"branches.groups needs at least 2 branches, got {len(v)}")
        seen: dict[str, str] = {}
        for name, langs in v.items():
            if not name.strip() or "/" in name:
                raise ValueError(f"branch name {name!r} must be a non-empty name without '/'")
            _languages(langs, f"branches.groups.{name}")
            for lang in langs:
                if lang in seen:
                    raise ValueError(
                        f"language '{lang}' is in branches '{seen[lang]}' and '{name}'"
                    )
                seen[lang] = name
        return v


class FriedmanSection(StrictModel):
    """What one block of the Friedman test and the CD diagram is (Mao et al. 2022, Section
    5.2.1)."""

    blocks: Blocks | None = Field(
        None,
        description="tasks (as the paper) or languages; null: tasks when the run has >= 2 tasks",
    )


class TaskSection(TaskConfig):
    """A task of this protocol: a :class:`TaskConfig` with, optionally, its own data and languages
    (the paper's three tasks come from three datasets; TyDiQA has its own sources)."""

    data: DataConfig | None = Field(
        None, description="the task's own data; null: the config's data"
    )
    sources: list[str] | None = Field(None, description="this task's sources; null: sources")
    targets: list[str] | None = Field(None, description="this task's targets; null: targets")

    @field_validator("sources", "targets")
    @classmethod
    def _codes(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else _languages(v, "task languages")

    def base(self) -> TaskConfig:
        """The plain task a stage takes (without data and languages)."""
        return TaskConfig.model_validate(self.model_dump(exclude={"data", "sources", "targets"}))


@EXPERIMENT_CONFIGS.register("lf_mlf")
class LFMLFConfig(ExperimentConfig):
    experiment: Literal["lf_mlf"] = "lf_mlf"
    max_seeds: ClassVar[int | None] = None  # its seeds: fine-tuning seeds
    data: DataConfig = Field(default_factory=DataConfig)
    pretrain: BaseModelSection
    task: TaskSection = Field(default_factory=TaskSection)
    tasks: list[TaskSection] | None = Field(
        None, description="several tasks (each its own tables; Friedman blocks); replaces task"
    )
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
    evaluate: FinetuneEvalConfig = Field(
        default_factory=FinetuneEvalConfig,
        description="labelled examples per arm, scoring (precision, batch_size, "
        "max_texts_per_lang) and F_p",
    )
    forgetting_data: DataConfig | None = Field(
        None,
        description="held-out text F_p is measured on (test split of each F_p language), for "
        "every task, including tasks that bring their own data (which otherwise have no F_p); "
        "default: the shared data",
    )
    friedman: FriedmanSection = Field(default_factory=FriedmanSection)
    fine_tuning_margin: float = Field(
        0.01,
        ge=0,
        le=1,
        description="non-inferiority margin of 'LF-MLF's fine-tuning performance is comparable "
        "to each baseline's' (score 0-1; the largest deficit in Tables 4-6 of Mao et al. 2022: "
        "0.0077)",
    )
    sweep: SweepSection | None = None
    branches: BranchSection | None = None
    parts: list[Part] = Field(
        default_factory=lambda: list(ALL_PARTS), description="which parts to run"
    )

    @model_validator(mode="before")
    @classmethod
    def _old_keys(cls, data: Any) -> Any:
        return renamed(data, {"evaluation": "evaluate"}, "")

    @field_validator("sources", "targets")
    @classmethod
    def _codes(cls, v: list[str] | None, info: ValidationInfo) -> list[str] | None:
        return None if v is None else _languages(v, info.field_name or "languages")

    @field_validator("methods")
    @classmethod
    def _methods(cls, v: list[str]) -> list[str]:
        return check_methods(v, "methods")

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int]) -> list[int]:
        if any(s < 0 for s in v):
            raise ValueError(f"seeds must be non-negative integers, got {v}")
        return _unique(v, "seeds", "seed")

    @field_validator("parts")
    @classmethod
    def _parts(cls, v: list[Part]) -> list[Part]:
        return _unique(v, "parts", "part")

    @model_serializer(mode="wrap")
    def _one_task_form(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """With ``tasks`` the single ``task`` is unused and left out, so the resolved config
        (a run folder's config.yaml) validates again."""
        data: dict[str, Any] = handler(self)
        if self.tasks is not None:
            data.pop("task", None)
        return data

    @model_validator(mode="after")
    def _check(self) -> LFMLFConfig:
        self._check_tasks()
        self._check_languages()
        self._check_parts()
        for m, options in self.method_options.items():
            if m not in self.all_methods():
                raise ValueError(
                    f"method_options names '{m}', which is not in methods {self.all_methods()}"
                )
            check_method_options(m, options)
        return self

    def _check_tasks(self) -> None:
        if self.tasks is not None:
            # a run folder written before the serializer below holds the default task too
            if "task" in self.model_fields_set and self.task != TaskSection():
                raise ValueError("give either task (one) or tasks (several), not both")
            _unique([t.name for t in self.tasks], "tasks", "task name")
        for i, t in enumerate(self.task_list()):
            if t.data is not None:
                try:
                    check_data_section(t.data, f"tasks.{i}.data")
                except PolymnesiaError as e:
                    raise ValueError(str(e)) from None
        if self.friedman.blocks == "tasks" and len(self.task_list()) < 2:
            raise ValueError(
                "friedman.blocks 'tasks' needs at least 2 tasks; this config has 1: use "
                "'languages' or null"
            )

    def _check_languages(self) -> None:
        pretrained = self.pretrain.languages
        for t in self.task_list():
            sources = self.sources_of(t)
            if len(sources) < 2 and self.methods:
                raise ValueError(
                    "multi-lingual methods need T >= 2 sources (with T = 1 every combiner is "
                    "plain fine-tuning; use slf)"
                )
            missing = [s for s in sources if s not in pretrained]
            if missing:
                raise ValueError(
                    f"sources {missing} are not pretraining languages {pretrained} (paper: S_f in "
                    "S_p)"
                )
            targets = t.targets if t.targets is not None else self.targets
            if targets is not None and (overlap := [x for x in targets if x in sources]):
                warnings.warn(
                    f"targets {overlap} are also sources; they are scored as sources only",
                    stacklevel=2,
                )
            if "main" in self.parts and not self.target_langs(sources, t):
                raise ValueError(
                    f"task '{t.name}' has no target language left after removing the sources "
                    f"{sources}"
                )
        if self.sweep:
            self._within_pretraining(self.sweep.ranking, "sweep.ranking")
        if self.branches:
            for name, langs in self.branches.groups.items():
                self._within_pretraining(langs, f"branches.groups.{name}")
        if self.evaluate.forgetting_languages is not None:
            _unique(self.evaluate.forgetting_languages, "evaluate.forgetting_languages", "language")
            known = self.all_languages()
            bad = [x for x in self.evaluate.forgetting_languages if x not in known]
            if bad:
                raise ValueError(
                    f"evaluate.forgetting_languages {bad} are not data languages of this run "
                    f"{known}"
                )

    def _within_pretraining(self, langs: list[str], key: str) -> None:
        missing = [x for x in langs if x not in self.pretrain.languages]
        if missing:
            raise ValueError(
                f"{key}: {missing} are not pretraining languages {self.pretrain.languages} "
                "(they are fine-tuned on: paper S_f in S_p)"
            )

    def _check_parts(self) -> None:
        for part, section in (("sweep", self.sweep), ("branches", self.branches)):
            if part in self.parts and section is None:
                raise ValueError(f"parts lists '{part}' but the config has no {part} section")
            if section is not None and part not in self.parts:
                warnings.warn(f"the {part} section is not run: parts is {self.parts}", stacklevel=2)

    def all_methods(self) -> list[str]:
        extra = [
            *(self.sweep.methods if self.sweep else []),
            *(self.branches.methods if self.branches else []),
        ]
        return list(dict.fromkeys([*self.methods, *extra]))

    def task_list(self) -> list[TaskSection]:
        return list(self.tasks) if self.tasks is not None else [self.task]

    def sources_of(self, task: TaskSection | None = None) -> list[str]:
        return task.sources if task is not None and task.sources is not None else self.sources

    def target_langs(self, sources: list[str], task: TaskSection | None = None) -> list[str]:
        own = task.targets if task is not None and task.targets is not None else self.targets
        pool = own if own is not None else self.pretrain.languages
        return [t for t in pool if t not in sources]

    def all_languages(self) -> list[str]:
        langs = [*self.pretrain.languages, *(self.targets or [])]
        for t in self.task_list():
            langs += [*(t.sources or []), *(t.targets or [])]
        if self.sweep:
            langs += self.sweep.ranking
        if self.branches:
            langs += [x for g in self.branches.groups.values() for x in g]
        return list(dict.fromkeys(langs))

    def forgetting_languages(self) -> list[str]:
        return self.evaluate.forgetting_languages or self.all_languages()
