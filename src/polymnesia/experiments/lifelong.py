"""Protocol ``lifelong``: sequential learning over many languages (paper 004, Khelli et al.).

A base decoder (the ``language_modeling`` data, tokenizer and pretraining
stages, so it is shared through the cache) is fine-tuned on a labelled task
language after language with the paper's five methods (eqs. 1-6), in several
language orders (section 3.2). After every step every language's test set is
scored, filling the accuracy matrix R; the report computes the paper's
metrics (eqs. 9-14) and the common variants from R, and draws Tables 1-2 and
Figures 2, 3, 5, 6 and 7 plus the language analysis of section 5.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.continual.config import Hyper, OrderConfig
from polymnesia.continual.lora import LoraConfig
from polymnesia.continual.methods import METHODS, get_method
from polymnesia.continual.orders import validate_order
from polymnesia.experiments.base import EXPERIMENTS, Experiment, ExperimentConfig
from polymnesia.experiments.sections import DataConfig, TokenizerConfig, check_language
from polymnesia.models import ModelConfig
from polymnesia.pipeline.stage import StageSpec
from polymnesia.tasks.config import TaskConfig
from polymnesia.training.config import TrainConfig


class BaseModelConfig(StrictModel):
    """The pretrained base: the language_modeling stages (same settings = same cache entries)."""

    pretraining: list[str] = Field(description="languages the base decoder is pretrained on")
    data_languages: list[str] | None = Field(
        None, description="languages the data stage prepares; null: pretraining + task languages"
    )
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    mixture_temperature: float = Field(3.0, gt=0)

    @field_validator("pretraining")
    @classmethod
    def _codes(cls, v: list[str]) -> list[str]:
        return [check_language(c) for c in v]


class LifelongConfig(ExperimentConfig):
    experiment: Literal["lifelong"] = "lifelong"
    data: DataConfig = Field(default_factory=DataConfig)
    base: BaseModelConfig
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


def arm_key(method: str, rank: int | None) -> str:
    return f"{method}_r{rank}" if rank is not None else method


def _step(
    cfg: LifelongConfig,
    name: str,
    method: str,
    rank: int | None,
    inputs: dict[str, str],
    **kw: object,
) -> StageSpec:
    from polymnesia.stages.sequential import StepParams

    params = StepParams(
        method=method, rank=rank, lora=cfg.lora, hyper=cfg.hyper(method, rank), task=cfg.task,
        task_pivot=cfg.task_pivot, languages=cfg.languages, train_per_lang=cfg.train_per_lang,
        eval_per_lang=cfg.eval_per_lang, eval_batch_size=cfg.eval_batch_size, seed=cfg.seed, **kw,  # type: ignore[arg-type]
    )  # fmt: skip
    return StageSpec(
        name, "sequential_step", params, {"data": "data", "base": "pretrain", **inputs}
    )


def base_stages(cfg: LifelongConfig) -> list[StageSpec]:
    from polymnesia.experiments.language_modeling import data_stage, tokenizer_stage
    from polymnesia.stages.pretrain import PretrainParams

    b = cfg.base
    extra = [cfg.task_pivot] if cfg.task_pivot else []
    langs = b.data_languages or list(dict.fromkeys([*b.pretraining, *cfg.languages, *extra]))
    return [
        data_stage(cfg, langs),
        tokenizer_stage(cfg, b.tokenizer, b.pretraining),
        StageSpec(
            "pretrain",
            "pretrain",
            PretrainParams(
                model=b.model,
                train=b.train,
                languages=b.pretraining,
                temperature=b.mixture_temperature,
                seed=cfg.seed,
            ),
            {"data": "data", "tokenizer": "tokenizer"},
        ),  # fmt: skip
    ]


def order_stage(cfg: LifelongConfig, o: OrderConfig) -> StageSpec:
    from polymnesia.stages.sequential_order import OrderParams

    key = arm_key(o.source_method, None)
    last = len(cfg.languages) - 1
    inputs = {
        "data": "data",
        **{f"source_{i}": f"{key}_{s}_{last}" for i, s in enumerate(o.sources)},
    }
    params = OrderParams(order=o, languages=cfg.languages, pretraining=cfg.base.pretraining)
    return StageSpec(f"order_{o.name}", "sequential_order", params, inputs)


@EXPERIMENTS.register(
    "lifelong", "sequential learning over many languages: 5 methods, orders, R matrices (paper 004)"
)
class Lifelong(Experiment):
    Config = LifelongConfig

    @classmethod
    def build(cls, cfg: ExperimentConfig) -> list[StageSpec]:
        assert isinstance(cfg, LifelongConfig)
        specs = [
            *base_stages(cfg),
            _step(cfg, "untrained", "vanilla", None, {}, evaluate_only=True, train_languages=[]),
        ]
        for method, rank in cfg.arms():
            sched, key = get_method(method).schedule, arm_key(method, rank)
            if sched == "joint":
                specs.append(_step(cfg, key, method, rank, {}, train_languages=cfg.languages))
            elif sched == "independent":
                specs += [
                    _step(cfg, f"{key}_{lang}", method, rank, {}, train_languages=[lang])
                    for lang in cfg.languages
                ]
        for o in cfg.orders:
            specs.append(order_stage(cfg, o))
            for method, rank in cfg.arms():
                if get_method(method).schedule != "sequential":
                    continue
                key = arm_key(method, rank)
                for k in range(len(cfg.languages)):
                    prev = {"prev": f"{key}_{o.name}_{k - 1}"} if k else {}
                    specs.append(
                        _step(cfg, f"{key}_{o.name}_{k}", method, rank, {"order": f"order_{o.name}", **prev}, order_index=k, setting=o.name)
                    )  # fmt: skip
        return specs

    @classmethod
    def report(cls, cfg: ExperimentConfig, run_dir: Path) -> Path:
        from polymnesia.experiments.lifelong_report import build_report

        assert isinstance(cfg, LifelongConfig)
        return build_report(cfg, run_dir)


__all__ = ["METHODS", "Lifelong", "LifelongConfig"]
