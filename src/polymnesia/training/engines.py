"""Which training methods run under which distributed engine, checked before training.

Accelerate picks the engine from ``accelerate config`` / ``accelerate launch``:
one process, DDP (``MULTI_GPU``/``MULTI_CPU``), FSDP or DeepSpeed. Under FSDP
and DeepSpeed ZeRO the parameters, gradients and optimizer states are sharded
across processes, so a method that reads or writes parameters or gradients
directly (embedding resets and their broadcast, frozen rows, layer freezing,
early stopping's weight snapshots, per-language gradients and their combiners,
LoRA adapters) would act on one shard as if it were the whole tensor. None of
them has been verified on sharded parameters, so each is refused before the
first step, in one line naming the method and the engine; plain training (the
default step, no plugin) is passed through. A plugin that is known to work on
sharded parameters declares it in ``TrainingPlugin.sharded_engines``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from polymnesia.errors import ConfigError

SHARDED = ("fsdp", "deepspeed")
#: engines that hold every parameter whole in each process
UNSHARDED = ("single", "ddp")


def engine_name(acc: Any) -> str:
    """``single``, ``ddp``, ``fsdp``, ``deepspeed`` (or Accelerate's name in lower case)."""
    kind = str(getattr(getattr(acc, "distributed_type", None), "value", "NO")).lower()
    if kind == "no":
        return "single"
    if kind.startswith("multi_"):
        return "ddp"
    return kind


def check_engine(
    engine: str,
    plugins: Sequence[Any],
    step_fn: Callable[..., Any],
    model: torch.nn.Module,
    *,
    standard_step: Callable[..., Any],
) -> None:
    """Raise :class:`ConfigError` (one line) if something in this run cannot run under ``engine``."""
    if engine not in SHARDED:
        return
    for p in plugins:
        if engine not in getattr(p, "sharded_engines", ()):
            name = getattr(p, "name", type(p).__name__)
            raise ConfigError(
                f"training plugin '{name}' edits parameters or gradients directly and is not "
                f"supported under {engine} (sharded parameters); run it with DDP or one process"
            )
    if step_fn is not standard_step and engine not in getattr(step_fn, "sharded_engines", ()):
        name = getattr(step_fn, "__name__", None) or type(step_fn).__name__
        raise ConfigError(
            f"step function '{name}' (per-language gradients) reads gradients directly and is not "
            f"supported under {engine}; run it with DDP or one process"
        )
    if type(model).__module__.startswith("peft"):
        raise ConfigError(
            f"LoRA adapters (peft) are not supported under {engine} in polymnesia; run them "
            "with DDP or one process"
        )
