"""The ``lifelong`` config (Khelli et al. 2025): base model, task languages, methods, LoRA ranks,
optimisation per method, language orders, evaluation sizes and the report's resampling.

Everything that can be known without running is checked here, one line each
(issue 9): known and unique language codes, at least one method / order /
LoRA target, target layers the base model has, ranks that fit them, a pivot
or slot field that fits the task kind, non-negative seeds.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel, renamed
from polymnesia.continual.config import OrderConfig, task_language, task_languages
from polymnesia.continual.methods import get_method
from polymnesia.continual.orders import validate_order
from polymnesia.continual.replay import ReplayBufferConfig
from polymnesia.errors import ConfigError
from polymnesia.evaluation.config import TextEvaluation
from polymnesia.experiments.base import EXPERIMENT_CONFIGS, ExperimentConfig
from polymnesia.experiments.sections import BaseModelSection, DataConfig
from polymnesia.items import BootstrapConfig
from polymnesia.models.config import LoraConfig
from polymnesia.tasks.config import TaskConfig
from polymnesia.training.config import EpochTrainConfig, train_preset

#: the linear layers of the Mistral decoders built from presets (LoRA targets)
MISTRAL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class LifelongBase(BaseModelSection):
    """The pretrained base (the shared data, tokenizer and pretraining stages: same settings,
    same cache entries as the other protocols). ``pretraining`` is the old name of ``languages``."""

    data_languages: list[str] | None = Field(
        None, description="languages the data stage prepares; null: pretraining + task languages"
    )

    @model_validator(mode="before")
    @classmethod
    def _old_key(cls, data: Any) -> Any:
        return renamed(data, {"pretraining": "languages"}, "base")

    @field_validator("data_languages")
    @classmethod
    def _data_langs(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not v:
            raise ValueError("list at least one language, or null for pretraining + task languages")
        return None if v is None else task_languages(v, "base.data_languages")


class LifelongTrain(StrictModel):
    """Optimisation of each arm's steps: training presets (``TrainConfig`` settings with early
    stopping, :data:`polymnesia.training.config.TRAIN_PRESETS`), one for full fine-tuning, one
    for LoRA, and per-method ones."""

    full: EpochTrainConfig = Field(
        default_factory=lambda: train_preset("full"),
        description="without LoRA; default: the 'full' preset (paper: lr 5e-5, 50 epochs, "
        "patience 5)",
    )
    lora: EpochTrainConfig = Field(
        default_factory=lambda: train_preset("lora"),
        description="with LoRA; default: the 'lora' preset (paper: lr 5e-6, 100 epochs, "
        "patience 15)",
    )
    overrides: dict[str, EpochTrainConfig] = Field(
        default_factory=dict, description="per method name, in place of full / lora"
    )


#: keys of older lifelong configs: evaluation settings now in the ``evaluate`` section every
#: protocol has, optimisation in the ``train`` section of training presets
RENAMED = {
    "eval_per_lang": "evaluate.max_texts_per_lang",
    "eval_batch_size": "evaluate.batch_size",
    "eval_precision": "evaluate.precision",
    "full": "train.full",
    "lora_hyper": "train.lora",
    "overrides": "train.overrides",
}


@EXPERIMENT_CONFIGS.register("lifelong")
class LifelongConfig(ExperimentConfig):
    experiment: Literal["lifelong"] = "lifelong"
    max_seeds: ClassVar[int | None] = None  # the report pools seeds (Pool)
    data: DataConfig = Field(default_factory=DataConfig)
    base: LifelongBase
    languages: list[str] = Field(min_length=2, description="the task languages, learned one by one")
    task: TaskConfig = Field(default_factory=TaskConfig)
    task_pivot: str | None = Field(
        None, description="token task: the language mixed into every example (constructed tagging)"
    )
    slot_field: str | None = Field(
        None,
        min_length=1,
        description="token task: the record meta field holding slot annotations '[slot : words]' "
        "(MASSIVE's annot_utt), turned into BIO tags; null with task_pivot",
    )
    methods: list[str] = Field(description="methods to run (polymnesia.continual.methods)")
    ranks: list[int] = Field(default_factory=list, description="LoRA ranks (paper: 32, 64, 256)")
    lora: LoraConfig = Field(default_factory=LoraConfig)
    train: LifelongTrain = Field(
        default_factory=LifelongTrain,
        description="optimisation of each arm's steps: full, lora and per-method overrides",
    )
    orders: list[OrderConfig] = Field(min_length=1)
    shift: Literal["literal", "previous"] = Field(
        "literal",
        description="P_avg reading (eq. 9) of Figure 3 and of destructive_last orders that set "
        "none: literal (the new language counts in P_t+1) or previous (only languages learned "
        "before)",
    )
    train_per_lang: int | None = Field(
        None, gt=0, description="training examples per language (cap)"
    )
    evaluate: TextEvaluation = Field(
        default_factory=TextEvaluation,
        description="scoring of the R rows and of early stopping: precision, batch_size and "
        "max_texts_per_lang (validation and test examples per language)",
    )
    hops: int = Field(9, ge=0, description="largest hop of MFT/MBT (paper: 9)")
    replay: ReplayBufferConfig = Field(
        default_factory=ReplayBufferConfig,
        description="the replay arm's buffer of earlier languages' training examples and the share "
        "of each step drawn from it (used when 'replay' is in methods)",
    )
    bootstrap: BootstrapConfig = Field(
        default_factory=BootstrapConfig,
        description="resampling of test items behind every interval and claim of the report",
    )

    @model_validator(mode="before")
    @classmethod
    def _old_keys(cls, data: Any) -> Any:
        return renamed(data, RENAMED, "")

    @field_validator("languages")
    @classmethod
    def _langs(cls, v: list[str]) -> list[str]:
        return task_languages(v, "languages")

    @field_validator("task_pivot")
    @classmethod
    def _pivot(cls, v: str | None) -> str | None:
        return None if v is None else task_language(v)

    @field_validator("methods")
    @classmethod
    def _methods(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("list at least one method (polymnesia ls methods)")
        for m in v:
            get_method(m)
        if len(set(v)) != len(v):
            raise ValueError("a method is listed twice; list each once")
        return v

    @field_validator("ranks")
    @classmethod
    def _ranks(cls, v: list[int]) -> list[int]:
        if any(r < 1 for r in v):
            raise ValueError("LoRA ranks must be at least 1")
        if len(set(v)) != len(v):
            raise ValueError("a rank is listed twice; list each once")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> LifelongConfig:
        self._check_seeds()
        self._check_task()
        for m in self.train.overrides:
            get_method(m)
            if m not in self.methods:
                raise ConfigError(f"train.overrides.{m}: '{m}' is not in methods {self.methods}")
        if any(get_method(m).lora for m in self.methods) and not self.ranks:
            raise ConfigError("ranks: LoRA methods need at least one rank in 'ranks'")
        self._check_lora()
        self._check_orders()
        return self

    def _check_seeds(self) -> None:
        for key, value in (("seed", self.seed), ("bootstrap.seed", self.bootstrap.seed)):
            if value < 0:
                raise ConfigError(f"bad value for '{key}': {value}: seeds must be 0 or more")

    def _check_task(self) -> None:
        if not self.task.name.strip():
            raise ConfigError("task.name must not be empty (it names the task in reports)")
        if self.task.kind == "sequence":
            if self.task_pivot is not None or self.slot_field is not None:
                raise ConfigError(
                    "task_pivot and slot_field are for token tasks (task.kind: token); remove them"
                )
            return
        if (self.task_pivot is None) == (self.slot_field is None):
            raise ConfigError(
                "a token task needs exactly one of task_pivot (constructed language-ID tagging) "
                "and slot_field (slot annotations in the records, e.g. annot_utt)"
            )
        meta = self.data.options.get("meta_fields")
        if (
            self.slot_field is not None
            and self.data.source == "hf"
            and (not isinstance(meta, list) or self.slot_field not in meta)
        ):
            raise ConfigError(
                f"slot_field '{self.slot_field}' must be listed in data.options.meta_fields (the "
                "hf source copies those columns into each record)"
            )
        if self.task_pivot is not None and self.task_pivot in self.languages:
            raise ConfigError(
                f"task_pivot '{self.task_pivot}' is a task language; pick a prepared language "
                "outside 'languages'"
            )

    def _check_lora(self) -> None:
        targets = self.lora.target_modules
        if not targets or any(not t for t in targets):
            raise ConfigError(
                "lora.target_modules: list at least one layer name; accepted: "
                f"{', '.join(MISTRAL_LINEAR)}"
            )
        if len(set(targets)) != len(targets):
            raise ConfigError("lora.target_modules lists a layer twice; list each once")
        if self.base.model.name_or_path is not None:
            return  # names and widths are checked against the loaded model at run time
        bad = [t for t in targets if t not in MISTRAL_LINEAR]
        if bad:
            raise ConfigError(
                "lora.target_modules: the preset decoder has no layer "
                f"{', '.join(map(repr, bad))}; accepted: {', '.join(MISTRAL_LINEAR)}"
            )
        d = self.base.model.dims()
        kv = d["hidden_size"] // d["num_attention_heads"] * d["num_key_value_heads"]
        widths = {"k_proj": kv, "v_proj": kv}
        width = min(widths.get(t, d["hidden_size"]) for t in targets)
        for r in self.ranks:
            if r > width:
                raise ConfigError(
                    f"ranks: LoRA rank {r} is larger than the layer width {width} of {targets}; "
                    f"use 1..{width}"
                )

    def _check_orders(self) -> None:
        names: list[str] = []
        for i, o in enumerate(self.orders):
            if o.name in names:
                raise ConfigError(f"orders: order name '{o.name}' is used twice")
            if o.languages is not None:
                validate_order(o.languages, self.languages, f"order '{o.name}'")
            for s in o.sources:
                if s not in names:
                    raise ConfigError(
                        f"order '{o.name}': source '{s}' is not an earlier order ({names})"
                    )
            if o.sources and (
                o.source_method not in self.methods
                or get_method(o.source_method).schedule != "sequential"
            ):
                raise ConfigError(
                    f"order '{o.name}': source_method must be a sequential method in 'methods'"
                )
            count = o.destructive_count
            if count is not None and count > len(self.languages):
                raise ConfigError(
                    f"order '{o.name}': destructive_count {count} exceeds the "
                    f"{len(self.languages)} languages"
                )
            if o.kind == "destructive_last" and "shift" not in o.model_fields_set:
                self.orders[i] = o.model_copy(update={"shift": self.shift})
            names.append(o.name)

    def step_train(self, method: str, rank: int | None) -> EpochTrainConfig:
        """The optimisation of ``method``'s steps at LoRA ``rank`` (None: no LoRA)."""
        if method in self.train.overrides:
            return self.train.overrides[method]
        return self.train.lora if get_method(method).uses_lora(rank) else self.train.full

    def arms(self) -> list[tuple[str, int | None]]:
        """(method, rank) pairs; MULTI runs once without LoRA and once per rank."""
        out: list[tuple[str, int | None]] = []
        for m in self.methods:
            lora = get_method(m).lora
            if lora is None:
                out += [(m, None), *[(m, r) for r in self.ranks]]
            else:
                out += [(m, r) for r in self.ranks] if lora else [(m, None)]
        return out
