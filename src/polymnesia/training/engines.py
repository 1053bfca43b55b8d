"""Which training methods run under which distributed engine, checked before training.

The engine is one process or DDP as launched (``torchrun``, ``accelerate launch``), or
polymnesia's own FSDP2 (``train.engine: fsdp2`` or ``POLYMNESIA_ENGINE=fsdp2``;
:mod:`polymnesia.training.fsdp`). Accelerate's own FSDP and DeepSpeed modes (chosen in
``accelerate config``) shard the model outside polymnesia's control. Under a sharded
engine a method that reads or writes parameters or gradients directly (embedding resets,
frozen rows, layer freezing, early stopping's snapshots, per-language gradients and their
combiners, LoRA) acts on one shard; each plugin and step function declares the sharded
engines it is verified under (``sharded_engines``, backed by a 2-process equality test),
and the others are refused before the first step, in one line naming the method, the
engine and what to use instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from polymnesia.errors import ConfigError
from polymnesia.training import fsdp

SHARDED = ("fsdp2", "fsdp", "deepspeed")
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


def resolve(acc: Any, cfg: Any) -> str:
    """The engine this run trains under: the launcher's (``single``/``ddp``/``fsdp``/
    ``deepspeed``), or ``fsdp2`` where the config or ``POLYMNESIA_ENGINE`` asks for it."""
    launched = engine_name(acc)
    want = fsdp.requested(cfg.engine)
    if want == "fsdp2":
        if launched in ("fsdp", "deepspeed"):
            raise ConfigError(
                f"train.engine=fsdp2 shards the model itself, but this process was launched in "
                f"Accelerate's {launched} mode; launch it as plain multi-process (torchrun, or "
                "accelerate launch without --use_fsdp/--use_deepspeed)"
            )
        if cfg.mixed_precision == "fp16":
            raise ConfigError(
                "train.engine=fsdp2 trains in bf16 or float32; set train.mixed_precision to "
                "bf16 or no (fp16 would need a sharded gradient scaler)"
            )
        return "fsdp2"
    if cfg.fsdp2_offload:
        raise ConfigError("train.fsdp2_offload needs train.engine: fsdp2 (or POLYMNESIA_ENGINE)")
    if want == "ddp" and launched in ("fsdp", "deepspeed"):
        raise ConfigError(f"train.engine=ddp, but this process was launched in {launched} mode")
    return launched


def check_engine(
    engine: str,
    plugins: Sequence[Any],
    step_fn: Callable[..., Any],
    model: torch.nn.Module,
    *,
    standard_step: Callable[..., Any],
) -> None:
    """Raise :class:`ConfigError` (one line) if something in this run cannot run under
    ``engine``.
    """
    if engine not in SHARDED:
        return
    for p in plugins:
        if engine not in getattr(p, "sharded_engines", ()):
            name = getattr(p, "name", type(p).__name__)
            why = getattr(p, "sharded_refusal", None)
            if why:
                raise ConfigError(
                    f"training plugin '{name}' is refused under {engine}: {why}; run it with "
                    "DDP or one process"
                )
            raise ConfigError(
                f"training plugin '{name}' edits parameters or gradients directly and is not "
                f"verified under {engine} (sharded parameters); run it with DDP or one process"
                + _fsdp2_hint(engine, p)
            )
    if step_fn is not standard_step and engine not in getattr(step_fn, "sharded_engines", ()):
        name = getattr(step_fn, "__name__", None) or type(step_fn).__name__
        raise ConfigError(
            f"step function '{name}' (per-language gradients) reads gradients directly and is not "
            f"verified under {engine}; run it with DDP or one process"
            + _fsdp2_hint(engine, step_fn)
        )
    if type(model).__module__.startswith("peft") and engine != "fsdp2":
        raise ConfigError(
            f"LoRA adapters (peft) are not verified under {engine} in polymnesia; run them "
            "with DDP, one process or train.engine: fsdp2"
        )


def _fsdp2_hint(engine: str, method: Any) -> str:
    if engine != "fsdp2" and "fsdp2" in getattr(method, "sharded_engines", ()):
        return ", or with train.engine: fsdp2 (polymnesia's FSDP2, where it is verified)"
    return ""
