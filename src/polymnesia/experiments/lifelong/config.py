"""The ``lifelong`` config (paper 004): base model, task languages, methods, LoRA ranks,
optimisation per method, language orders and evaluation sizes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from polymnesia.continual.config import Hyper, OrderConfig
from polymnesia.continual.methods import get_method
from polymnesia.continual.orders import validate_order
from polymnesia.experiments.base import ExperimentConfig
from polymnesia.experiments.sections import (
    BaseModelSection,
    DataConfig,
    check_language,
    rename_key,
)
from polymnesia.models.lora import LoraConfig
from polymnesia.tasks.config import TaskConfig


class LifelongBase(BaseModelSection):
    """The pretrained base (the shared data, tokenizer and pretraining stages: same settings,
    same cache entries as the other protocols). ``pretraining`` is the old name of ``languages``."""

    data_languages: list[str] | None = Field(
        None, description="languages the data stage prepares; null: pretraining + task languages"
    )

    @model_validator(mode="before")
    @classmethod
    def _old_key(cls, data: Any) -> Any:
        return rename_key(data, "pretraining", "languages", "base")


class LifelongConfig(ExperimentConfig):
    experiment: Literal["lifelong"] = "lifelong"
    data: DataConfig = Field(default_factory=DataConfig)
    base: LifelongBase
    languages: list[str] = Field(min_length=2, description="the task languages, learned one by one")
    task: TaskConfig = Field(default_factory=TaskConfig)
    task_pivot: str | None = Field(
        None, description="token task: the language mixed into every example (constructed tagging)"
    )
    methods: list[str] = Field(description="methods to run (polymnesia.continual.methods)")
    ranks: list[int] = Field(default_factory=list, description="LoRA ranks (paper: 32, 64, 256)")
    lora: LoraConfig = Field(default_factory=LoraConfig)
    full: Hyper = Field(
        description="optimisation without LoRA (paper: lr 5e-5, 50 epochs, patience 5)"
    )
    lora_hyper: Hyper = Field(
        description="optimisation with LoRA (paper: lr 5e-6, 100 epochs, patience 15)"
    )
    overrides: dict[str, Hyper] = Field(default_factory=dict, description="per-method optimisation")
    orders: list[OrderConfig] = Field(min_length=1)
    train_per_lang: int | None = Field(
        None, gt=0, description="training examples per language (cap)"
    )
    eval_per_lang: int | None = Field(
        None, gt=0, description="validation/test examples per language (cap)"
    )
    eval_batch_size: int = Field(64, gt=0)
    hops: int = Field(9, ge=0, description="largest hop of MFT/MBT (paper: 9)")

    @field_validator("languages")
    @classmethod
    def _langs(cls, v: list[str]) -> list[str]:
        v = [check_language(c) for c in v]
        validate_order(v, sorted(set(v)), "languages")
        return v

    @field_validator("methods")
    @classmethod
    def _methods(cls, v: list[str]) -> list[str]:
        for m in v:
            get_method(m)
        if not v:
            raise ValueError("list at least one method")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> LifelongConfig:
        for m in self.overrides:
            get_method(m)
        if any(get_method(m).lora for m in self.methods) and not self.ranks:
            raise ValueError("LoRA methods need at least one rank in 'ranks'")
        self._check_ranks()
        names: list[str] = []
        for o in self.orders:
            if o.name in names:
                raise ValueError(f"order name '{o.name}' is used twice")
            if o.languages is not None:
                validate_order(o.languages, self.languages, f"order '{o.name}'")
            for s in o.sources:
                if s not in names:
                    raise ValueError(
                        f"order '{o.name}': source '{s}' is not an earlier order ({names})"
                    )
            if o.sources and (
                o.source_method not in self.methods
                or get_method(o.source_method).schedule != "sequential"
            ):
                raise ValueError(
                    f"order '{o.name}': source_method must be a sequential method in 'methods'"
                )
            names.append(o.name)
        if self.task.kind == "token" and (
            self.task_pivot is None or self.task_pivot in self.languages
        ):
            raise ValueError(
                "a token task needs task_pivot: a prepared language that is not a task language"
            )
        return self

    def _check_ranks(self) -> None:
        if self.base.model.name_or_path is not None:
            return  # checked against the loaded model's layers at run time
        d = self.base.model.dims()
        head = d["hidden_size"] // d["num_attention_heads"]
        widths = {"q_proj": d["hidden_size"], "o_proj": d["hidden_size"], "k_proj": head * d["num_key_value_heads"],
                  "v_proj": head * d["num_key_value_heads"], "gate_proj": d["hidden_size"], "up_proj": d["hidden_size"],
                  "down_proj": d["hidden_size"]}  # fmt: skip
        width = min(widths.get(t, d["hidden_size"]) for t in self.lora.target_modules)
        for r in self.ranks:
            if r < 1 or r > width:
                raise ValueError(
                    f"LoRA rank {r} is larger than the layer width {width} of {self.lora.target_modules}; use 1..{width}"
                )

    def hyper(self, method: str, rank: int | None) -> Hyper:
        if method in self.overrides:
            return self.overrides[method]
        return self.lora_hyper if get_method(method).uses_lora(rank) else self.full

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
