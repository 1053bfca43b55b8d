"""What comes after a memory plan (:mod:`polymnesia.training.memory`): whether it fits a
device (:func:`check_fits`, one line naming what would make it fit: :func:`remedies` tries
more devices, FSDP2, offload, checkpointing, LoRA), how much memory this process's device has
(:func:`device_bytes`), and a plan made from a model and a training config
(:func:`plan_for_model`, with the engine, precision and frozen share read from them), as the
training loop checks before its first step."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from polymnesia.errors import ConfigError
from polymnesia.training.memory import (
    ENGINES,
    Engine,
    MemoryPlan,
    Precision,
    Setup,
    gib,
    plan,
)
from polymnesia.training.model_shape import LORA_DEFAULT, ModelShape
from polymnesia.training.plugins import PluginOptions


def remedies(p: MemoryPlan, device_bytes: int, max_devices: int = 64) -> list[str]:
    """What would make ``p`` fit in ``device_bytes`` per device, each tried alone on ``p``
    (the first few that fit), or a combination when none fits alone."""
    s = p.setup

    def on(n: int) -> dict[str, Any]:  # the same global batch spread over n devices
        return {"engine": "fsdp2", "devices": n, "micro_batch": -(-s.micro_batch * s.devices // n)}

    tries: list[tuple[str, dict[str, Any]]] = []
    if s.engine != "fsdp2":
        tries.append((f"engine fsdp2 on the same {s.devices} device(s)", {"engine": "fsdp2"}))
    fsdp_n = next(
        (n for n in _powers(s.devices, max_devices) if p.replan(**on(n)).total <= device_bytes),
        None,
    )
    if fsdp_n is not None and fsdp_n > s.devices:
        tries.append((f"fsdp2 on {fsdp_n} devices", on(fsdp_n)))
    if not s.gradient_checkpointing:
        tries.append(("train.gradient_checkpointing: true", {"gradient_checkpointing": True}))
    if s.micro_batch > 1:
        half = s.micro_batch // 2
        tries.append(
            (
                f"a micro-batch of {half} (twice the gradient accumulation)",
                {"micro_batch": half, "grad_accum": s.grad_accum * 2},
            )
        )
    if s.lora_rank is None:
        tries.append(("LoRA (e.g. rank 64)", {"lora_rank": 64}))
    if s.engine == "fsdp2" and not s.offload:
        tries.append(("fsdp2_offload: true", {"offload": True}))
    elif not s.offload:
        tries.append(("fsdp2 with fsdp2_offload: true", {"engine": "fsdp2", "offload": True}))
    fits = [name for name, change in tries if p.replan(**change).total <= device_bytes]
    if fits:
        return fits[:4]
    combo: dict[str, Any] = {"engine": "fsdp2", "gradient_checkpointing": True}
    names = ["fsdp2", "gradient checkpointing"]
    for name, change in (
        (f"{max_devices} devices", on(max_devices)),
        ("a micro-batch of 1", {"micro_batch": 1}),
        ("fsdp2_offload", {"offload": True}),
        ("LoRA", {"lora_rank": s.lora_rank or 64}),
    ):
        combo.update(change)
        names.append(name)
        if p.replan(**combo).total <= device_bytes:
            return [" + ".join(names) + " together"]
    return [
        "a device with more memory (even fsdp2 with offload, checkpointing and LoRA does not fit)"
    ]


def _powers(start: int, stop: int) -> list[int]:
    out, n = [], max(1, start)
    while n <= stop:
        out.append(n)
        n *= 2
    return out


#: whether :func:`check_fits` refuses (``polymnesia run --no-memory-check`` turns it off for
#: the process: :func:`skip_memory_checks`)
CHECKS = {"enabled": True}


def skip_memory_checks() -> None:
    """Turn :func:`check_fits` off in this process (``run --no-memory-check``)."""
    CHECKS["enabled"] = False


def check_fits(plan: MemoryPlan, device_bytes: int | None) -> None:
    """Raise :class:`ConfigError` (one line naming what would make it fit) when ``plan``'s
    peak is larger than ``device_bytes``; nothing when it fits, the size is unknown or the
    checks are off (:func:`skip_memory_checks`)."""
    if device_bytes is None or plan.total <= device_bytes or not CHECKS["enabled"]:
        return
    where = f"stage '{plan.label}'" if plan.label else "this stage"
    raise ConfigError(
        f"{where} needs about {gib(plan.total)} GiB per device ({short_breakdown(plan)}) but the "
        f"device has {gib(device_bytes)} GiB; it would fit with "
        + "; or ".join(remedies(plan, device_bytes))
    )


def short_breakdown(p: MemoryPlan) -> str:
    parts = [
        ("params", p.parameters),
        ("grads", p.gradients),
        ("AdamW", p.optimizer),
        ("activations", p.activations),
    ]
    return ", ".join(f"{n} {gib(v)}" for n, v in parts) + f"; {p.setup.describe()}"


def device_bytes(device: Any = None, processes: int = 1) -> int | None:
    """Memory one training process may use on ``device``: a CUDA device's total memory, or
    on a CPU the available RAM shared by ``processes`` processes; None when unknown."""
    kind = getattr(device, "type", str(device or "cpu"))
    if kind == "cuda":
        import torch

        index = getattr(device, "index", None)
        return int(torch.cuda.get_device_properties(index or 0).total_memory)
    if kind != "cpu":
        return None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            info = dict(line.split(":", 1) for line in f)
        return int(info["MemAvailable"].split()[0]) * 1024 // max(1, processes)
    except (OSError, KeyError, ValueError):
        return None


def precision_of(dtype: str | None, mixed_precision: str) -> Precision:
    """The planner's precision of a model stored in ``dtype`` trained with Accelerate's
    ``mixed_precision``: bfloat16 weights train in pure bf16 whatever autocast does."""
    if dtype in ("bfloat16", "float16"):
        return "bf16"
    return "fp32" if mixed_precision == "no" else "bf16-mixed"


def frozen_fraction(shape: ModelShape, plugins: Iterable[PluginOptions]) -> float:
    """The share of the blocks' parameters that ``plugins`` (a training config's typed
    entries) freeze, each as its options answer (:meth:`PluginOptions.frozen_share`)."""
    return min(1.0, sum(p.frozen_share(shape) for p in plugins))


def resolve_engine(engine: str, devices: int) -> Engine:
    """``engine`` with ``auto`` resolved (single on one device, else ddp); one line if unknown."""
    name = ("single" if devices == 1 else "ddp") if engine == "auto" else engine
    for known in ENGINES:
        if known == name:
            return known
    raise ConfigError(f"engine '{engine}' is not one of {', '.join(ENGINES)}")


def plan_for_model(
    model: Any,
    cfg: Any,
    *,
    seq_len: int,
    engine: str = "single",
    devices: int = 1,
    device_type: str = "cuda",
    label: str = "",
) -> MemoryPlan:
    """The plan of training the live ``model`` (a transformers model, PEFT-wrapped or not)
    with ``cfg`` (a :class:`~polymnesia.training.config.TrainConfig`) on ``devices``
    processes: its shape from its config, what trains from ``requires_grad`` (LoRA from
    PEFT's config), its precision from its weights' dtype. For the training loop, before
    the first step: ``check_fits(plan_for_model(...), device_bytes(device, local))``."""
    inner = model.get_base_model() if hasattr(model, "peft_config") else model
    kind = type(inner).__name__
    lm_head = not kind.endswith(("SequenceClassification", "TokenClassification"))
    shape = ModelShape.from_hf_config(inner.config, lm_head=lm_head)
    params = list(model.parameters())
    dtype = str(params[0].dtype).removeprefix("torch.") if params else "float32"
    lora_rank, modules = None, LORA_DEFAULT
    frozen = 0.0
    peft = getattr(model, "peft_config", None)
    if peft:
        conf = next(iter(peft.values()))
        lora_rank = int(getattr(conf, "r", 8))
        modules = tuple(getattr(conf, "target_modules", None) or LORA_DEFAULT)
    else:
        fixed = sum(p.numel() for p in params if not p.requires_grad)
        frozen = min(1.0, fixed / max(1, shape.num_layers * shape.block_params))
    fused = getattr(cfg, "fused_adamw", None)
    chosen = resolve_engine(engine, devices)
    setup = Setup(
        micro_batch=max(1, cfg.batch_size // cfg.grad_accum // devices),
        seq_len=seq_len,
        precision=precision_of(dtype, cfg.mixed_precision),
        engine=chosen,
        devices=devices,
        offload=bool(getattr(cfg, "fsdp2_offload", False)) and chosen == "fsdp2",
        gradient_checkpointing=cfg.gradient_checkpointing,
        grad_accum=cfg.grad_accum,
        chunked_loss=cfg.chunked_loss,
        attention=str(getattr(inner.config, "_attn_implementation", None) or "sdpa"),
        lora_rank=lora_rank,
        lora_modules=modules,
        frozen_fraction=frozen,
        fused_adamw=fused if fused is not None else device_type == "cuda",
        device_type=device_type,
    )
    return plan(shape, setup, label=label)


def summary(plans: list[MemoryPlan], device_bytes: int | None = None) -> list[str]:
    """One line per plan: its label, its line and whether it fits ``device_bytes``."""
    out = []
    for p in plans:
        verdict = ""
        if device_bytes is not None:
            verdict = "fits" if p.total <= device_bytes else "DOES NOT FIT"
            verdict = f" [{verdict}]"
        out.append(f"{p.label}: {p.line()}{verdict}")
    return out
