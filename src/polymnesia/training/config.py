"""The training loop's typed config."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_serializer, field_validator, model_validator

from polymnesia.config.base import (
    FINGERPRINTED_AS_DUMPED,
    FINGERPRINTED_UNLESS_DEFAULT,
    MAX_BATCH,
    MAX_LENGTH,
    MAX_STEPS,
    NOT_FINGERPRINTED,
    StrictModel,
    submodels,
)
from polymnesia.errors import ConfigError
from polymnesia.training.plugins import PluginOptions, plugin_options


class TrainConfig(StrictModel):
    """Optimisation settings shared by every training stage (AdamW, warmup + cosine)."""

    steps: int = Field(200, gt=0, le=MAX_STEPS, description="optimizer steps")
    batch_size: int = Field(
        16,
        gt=0,
        le=MAX_BATCH,
        description="global batch in sequences, over all processes and accumulation",
    )
    grad_accum: int = Field(
        1, gt=0, le=MAX_BATCH, description="micro-batches accumulated per optimizer step"
    )
    block_size: int = Field(
        128, gt=1, le=MAX_LENGTH, description="tokens per sequence (packed LM data)"
    )
    lr: float = Field(1e-3, gt=0, description="peak learning rate")
    warmup_ratio: float = Field(
        0.1, ge=0, le=1, description="share of steps with linear warmup (paper: 10%)"
    )
    min_lr_ratio: float = Field(
        0.0, ge=0, le=1, description="final learning rate as a share of the peak"
    )
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay (paper: 0)")
    betas: tuple[float, float] = Field(
        (0.9, 0.95), description="AdamW (beta1, beta2), each in [0, 1)"
    )
    eps: float = Field(1e-8, gt=0)
    grad_clip: float | None = Field(1.0, gt=0, description="max gradient norm; null to disable")
    mixed_precision: Literal["no", "fp16", "bf16"] = Field(
        "no", description="no, fp16 or bf16 (YAML's bare no/false also mean no)"
    )
    log_every: int = Field(10, gt=0)
    eval_every: int | None = Field(
        None, gt=0, description="steps between evaluations during training; null: none"
    )
    checkpoint_every: int = Field(100, gt=0, description="steps between resumable checkpoints")
    keep_checkpoints: int = Field(1, gt=0)
    checkpoint_at_end: bool = Field(True, description="also checkpoint after the final step")
    trackers: list[Literal["tensorboard", "mlflow", "wandb", "comet_ml", "aim", "clearml"]] = Field(
        default_factory=list, description="Accelerate trackers to log to besides metrics.jsonl"
    )
    progress_bar: bool = Field(
        True,
        description="show progress: a bar on a terminal, a line per tenth of the steps when "
        "the output goes to a file",
    )
    fused_adamw: bool | None = Field(
        None,
        description="fused AdamW kernel: null = on CUDA (where it is available), true = on any "
        "device that has it (CPU included), false = never",
        json_schema_extra=NOT_FINGERPRINTED,
    )
    compile: bool = Field(
        False,
        description="torch.compile the model's forward (first steps slower; needs a C++ compiler "
        "on CPU)",
        json_schema_extra=NOT_FINGERPRINTED,
    )
    chunked_loss: bool = Field(
        True,
        description="make a decoder's loss with its LM head a chunk of positions at a time, "
        "never all (batch x length x vocabulary) logits at once (same value up to float "
        "rounding; polymnesia.training.loss); false = the model's own loss",
        json_schema_extra=NOT_FINGERPRINTED,
    )
    gradient_checkpointing: bool = Field(
        False,
        description="recompute activations in the backward pass (less memory, ~30% more compute)",
        json_schema_extra=NOT_FINGERPRINTED,
    )
    engine: Literal["auto", "ddp", "fsdp2"] = Field(
        "auto",
        description="how the model is spread over the run's processes: auto = one process or "
        "DDP (each process holds the whole model), as launched; ddp = the same, said "
        "explicitly; fsdp2 = parameters, gradients and optimizer states sharded over the "
        "processes (PyTorch FSDP2; polymnesia.training.fsdp). POLYMNESIA_ENGINE in the "
        "launcher's environment overrides it",
        json_schema_extra=NOT_FINGERPRINTED,
    )
    fsdp2_offload: bool = Field(
        False,
        description="under engine fsdp2: keep the sharded parameters, gradients and optimizer "
        "states in CPU memory (slower; fits larger models)",
        json_schema_extra=NOT_FINGERPRINTED,
    )
    plugins: list[PluginOptions] = Field(
        default_factory=list,
        description="training methods plugged into the loop: [{name: NAME, option: value}] "
        "(polymnesia ls plugins); each entry becomes its plugin's typed Options, and is "
        "written back (config.yaml, fingerprints) as the entry with every option filled in",
        json_schema_extra=FINGERPRINTED_AS_DUMPED,
    )

    @field_validator("plugins", mode="before")
    @classmethod
    def _plugins(cls, v: Any) -> Any:
        if not isinstance(v, list | tuple):
            return v  # pydantic says what a list is
        specs = [plugin_options(s) for s in v]
        names = [s.plugin_name for s in specs]
        if len(set(names)) < len(names):
            raise ValueError(f"a plugin is listed twice: {names}")
        return specs

    @field_serializer("plugins")
    def _entries(self, v: list[PluginOptions]) -> list[dict[str, Any]]:
        return [p.entry() for p in v]

    @field_validator("mixed_precision", mode="before")
    @classmethod
    def _no_is_false(cls, v: object) -> object:
        return "no" if v is False else v

    @field_validator("betas")
    @classmethod
    def _betas(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not all(0.0 <= b < 1.0 for b in v):
            raise ValueError(f"each of the AdamW betas must be in [0, 1), got {list(v)}")
        return v

    @model_validator(mode="after")
    def _check(self) -> TrainConfig:
        if self.batch_size % self.grad_accum:
            raise ValueError(
                f"batch_size {self.batch_size} must be divisible by grad_accum {self.grad_accum}"
            )
        if self.fsdp2_offload and self.engine == "ddp":
            raise ValueError("fsdp2_offload needs engine: fsdp2 (or auto with POLYMNESIA_ENGINE)")
        for spec in self.plugins:
            spec.plugin_class.check_train(spec.options(), self)
        return self

    def with_plugins(self, *specs: PluginOptions | dict[str, Any]) -> TrainConfig:
        """This config with ``specs`` (typed options or entries) appended to its plugins
        (validated)."""
        data = self.model_dump()
        data["plugins"] = [*self.plugins, *specs]
        return type(self).model_validate(data)

    @property
    def warmup_steps(self) -> int:
        return int(round(self.warmup_ratio * self.steps))


class EarlyStoppingConfig(StrictModel):
    """When to stop training on one language."""

    max_epochs: int = Field(gt=0, description="epochs at most (paper: 50 full, 100 LoRA)")
    patience: int = Field(
        gt=0, description="epochs without validation improvement before stopping (paper: 5 / 15)"
    )
    min_delta: float = Field(0.0, ge=0, description="smallest change that counts as improvement")

    @model_validator(mode="after")
    def _can_stop(self) -> EarlyStoppingConfig:
        if self.patience >= self.max_epochs:
            raise ValueError(
                f"patience {self.patience} >= max_epochs {self.max_epochs}: early stopping can "
                "never trigger; use a patience smaller than max_epochs"
            )
        return self


#: set by a stage that trains in epochs (:class:`EpochTrainConfig`): the optimizer steps of
#: ``early_stopping.max_epochs`` epochs, a log line and a checkpoint per epoch
_PER_EPOCH = ("steps", "log_every", "checkpoint_every")


class EpochTrainConfig(TrainConfig):
    """A :class:`TrainConfig` for training in epochs until the validation score stops
    improving (Khelli et al. 2025's steps, ``sequential_step``): ``early_stopping`` sets the length
    (``steps``, ``log_every`` and ``checkpoint_every`` are set per epoch by the stage; other
    values are refused), and the learning rate is constant unless ``warmup_ratio`` /
    ``min_lr_ratio`` say otherwise (the paper names no schedule). ``batch_size`` is capped at
    the language's training examples."""

    lr: float = Field(gt=0, description="AdamW learning rate (paper: 5e-5 full, 5e-6 LoRA)")
    early_stopping: EarlyStoppingConfig
    warmup_ratio: float = Field(0.0, ge=0, le=1, description="share of steps with linear warmup")
    min_lr_ratio: float = Field(
        1.0, ge=0, le=1, description="final learning rate as a share of the peak (1: constant)"
    )
    progress_bar: bool = Field(False, description="show progress (a bar or a line per tenth)")

    @model_validator(mode="after")
    def _no_steps(self) -> EpochTrainConfig:
        # a run folder's config.yaml lists them at their defaults: those are read
        fields = type(self).model_fields
        given = [k for k in _PER_EPOCH if getattr(self, k) != fields[k].get_default()]
        if given:
            raise ValueError(
                f"{', '.join(given)}: set per epoch from early_stopping (max_epochs, patience); "
                "remove them"
            )
        return self

    def loop_config(self, steps_per_epoch: int, batch_size: int) -> TrainConfig:
        """The loop's config for one training run: ``early_stopping.max_epochs`` epochs of
        ``steps_per_epoch`` steps at ``batch_size`` (the plugins are passed to the loop
        beside it)."""
        steps = steps_per_epoch * self.early_stopping.max_epochs
        data = self.model_dump(exclude={"early_stopping", "plugins"})
        data.update(
            steps=steps, batch_size=batch_size, log_every=steps_per_epoch, checkpoint_every=steps
        )
        return TrainConfig.model_validate(data)


# settings besides the paper's (lr, batch_size, early_stopping, plugins) enter stage
# fingerprints only when changed, so cache entries made before they could be set stay valid
for _name, _field in EpochTrainConfig.model_fields.items():
    if _name not in ("lr", "batch_size", "early_stopping", "plugins") and (
        _field.json_schema_extra != NOT_FINGERPRINTED
    ):
        _field.json_schema_extra = FINGERPRINTED_UNLESS_DEFAULT

#: named :class:`EpochTrainConfig` settings (Khelli et al. 2025, section 3.5): ``full`` fine-tuning
#: (lr 5e-5, at most 50 epochs, patience 5) and ``lora`` adapters (lr 5e-6, 100 epochs,
#: patience 15), both at batch 16
TRAIN_PRESETS: dict[str, dict[str, Any]] = {
    "full": {"lr": 5e-5, "batch_size": 16, "early_stopping": {"max_epochs": 50, "patience": 5}},
    "lora": {"lr": 5e-6, "batch_size": 16, "early_stopping": {"max_epochs": 100, "patience": 15}},
}


def train_preset(name: str) -> EpochTrainConfig:
    """The :data:`TRAIN_PRESETS` entry ``name``; an unknown name is one line listing them."""
    if name not in TRAIN_PRESETS:
        raise ConfigError(f"unknown training preset '{name}'; accepted: {', '.join(TRAIN_PRESETS)}")
    return EpochTrainConfig.model_validate(TRAIN_PRESETS[name])


def train_configs(node: Any) -> list[tuple[str, TrainConfig]]:
    """Every :class:`TrainConfig` inside ``node`` (a config model, or dicts and lists of them),
    with its dotted path."""
    return [(path, m) for path, m in submodels(node) if isinstance(m, TrainConfig)]


def check_precision(node: Any, device_type: str, where: str) -> None:
    """Refuse, in one line, training in fp16 on a CPU: Accelerate makes no fp16 autocast or
    gradient scaler there and trains in float32 without saying so, so the run would record
    fp16 and be float32."""
    if device_type != "cpu":
        return
    for path, cfg in train_configs(node):
        if cfg.mixed_precision == "fp16":
            key = f"{path}.mixed_precision" if path else "mixed_precision"
            raise ConfigError(
                f"{where}: {key}=fp16 needs a GPU; on a CPU Accelerate would train in float32 "
                "without saying so; accepted here: bf16 or no"
            )
