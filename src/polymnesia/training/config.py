"""The training loop's typed config."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import NOT_FINGERPRINTED, StrictModel, submodels
from polymnesia.errors import ConfigError
from polymnesia.training.plugins import PLUGINS, validate_plugin_spec


class TrainConfig(StrictModel):
    """Optimisation settings shared by every training stage (AdamW, warmup + cosine)."""

    steps: int = Field(200, gt=0, description="optimizer steps")
    batch_size: int = Field(
        16, gt=0, description="global batch in sequences, over all processes and accumulation"
    )
    grad_accum: int = Field(1, gt=0, description="micro-batches accumulated per optimizer step")
    block_size: int = Field(128, gt=1, description="tokens per sequence (packed LM data)")
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
    plugins: list[dict[str, Any]] = Field(
        default_factory=list,
        description="training methods plugged into the loop: [{name: NAME, option: value}] "
        "(polymnesia ls plugins)",
    )

    @field_validator("plugins")
    @classmethod
    def _plugins(cls, v: list[Any]) -> list[dict[str, Any]]:
        specs = [validate_plugin_spec(s) for s in v]
        names = [s["name"] for s in specs]
        if len(set(names)) < len(names):
            raise ValueError(f"a plugin is listed twice: {names}")
        return specs

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
            options = {k: v for k, v in spec.items() if k != "name"}
            PLUGINS.get(spec["name"]).check_train(options, self)
        return self

    def with_plugins(self, *specs: dict[str, Any]) -> TrainConfig:
        """This config with ``specs`` appended to its plugins (validated)."""
        data = self.model_dump()
        data["plugins"] = [*self.plugins, *specs]
        return TrainConfig.model_validate(data)

    @property
    def warmup_steps(self) -> int:
        return int(round(self.warmup_ratio * self.steps))


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
