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

Each engine is an :class:`Engine` object, chosen once per run (:func:`select`, as
torchtitan's ``parallelize_fn`` is chosen once): it places and prepares the model and the
optimizer, holds back the gradient synchronisation of a micro-batch, clips, says which trees
a checkpoint holds and who writes them, and gathers the trained model for saving. The
training loop (:func:`polymnesia.training.loop.train`) calls these and has no branch on the
engine itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import torch

from polymnesia.errors import ConfigError
from polymnesia.training import fsdp
from polymnesia.training.loss import chunked_head

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


#: a checkpoint tree: the function that returns it and the one that loads it back
Tree: TypeAlias = tuple[Callable[[], Any], Callable[[Any], None]]
#: builds the optimizer and its scheduler from parameter groups; ``fusable``: whether a
#: fused AdamW may be used (not over sharded parameters)
BuildOptimizer: TypeAlias = Callable[..., tuple[torch.optim.Optimizer, Any]]


@dataclass
class CheckpointTrees:
    """What a checkpoint holds beyond the scheduler, the scaler and the RNG states."""

    #: trees the main process writes and every process reads (``STEM``)
    shared: dict[str, Tree] = field(default_factory=dict)
    #: trees every process writes and reads for itself (``STEM_rankR``: its shards)
    per_rank: dict[str, Tree] = field(default_factory=dict)
    #: the sharded model's tensors with their full shapes and placements, kept in the
    #: manifest (:func:`polymnesia.training.fsdp.shard_layout`); None for a whole model
    layout: Callable[[], dict[str, Any]] | None = None
    #: the optimizer's parameters by name, in its state dict's order (sharded model only):
    #: kept in the manifest so that its states can be cut for another number of processes
    param_names: Callable[[], list[str]] | None = None


class Engine:
    """How one engine runs the loop's model: one process, DDP, Accelerate's own sharded
    modes, or polymnesia's FSDP2. The base class is Accelerate's: it prepares (wraps) the
    model and the optimizer, and every process holds what its mode gives it."""

    #: whether every process holds every parameter whole (single, ddp)
    whole: bool = False

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def place(self, model: torch.nn.Module, device: Any) -> None:
        """Put the model where its parameter groups and the optimizer are made."""

    def prepare(
        self,
        acc: Any,
        model: torch.nn.Module,
        groups: list[dict[str, Any]],
        build: BuildOptimizer,
        cfg: Any,
    ) -> tuple[torch.nn.Module, Any, Any]:
        """The model, the optimizer over ``groups`` (from ``build``) and its scheduler, ready
        to train."""
        optimizer, scheduler = build(groups, fusable=True)
        model, optimizer = acc.prepare(model, optimizer)
        return model, optimizer, scheduler

    def no_sync(self, acc: Any, model: torch.nn.Module) -> contextlib.AbstractContextManager[Any]:
        """Accumulate one micro-batch's gradients without synchronising them."""
        return acc.no_sync(model)

    def clip(self, acc: Any, model: torch.nn.Module, max_norm: float | None) -> Any:
        """The total gradient norm (before clipping), clipping at ``max_norm`` when it is set;
        None where only the engine knows the norm and nothing was clipped."""
        if max_norm:
            return acc.clip_grad_norm_(model.parameters(), max_norm)
        return None

    def loss_head(self, model: torch.nn.Module, cfg: Any) -> torch.nn.Linear | None:
        """The LM head to make the loss with in chunks (``train.chunked_loss``), or None: the
        model's own loss (a sharded engine holds the head in shards)."""
        return None

    def settle(self, model: torch.nn.Module) -> None:
        """After a forward pass outside training (an evaluation, a plugin's score): leave the
        model as training and checkpoints expect it."""

    def agree(self, acc: Any, ok: bool) -> bool:
        """``ok`` on every process, where each holds other parameters (a finite check)."""
        return ok

    def checkpoint_trees(
        self, model: torch.nn.Module, optimizer: Any, loop: Tree
    ) -> CheckpointTrees:
        """The optimizer's and the loop's trees (with the plugins' states), and who writes
        them; the model's weights are ``model.safetensors`` unless ``per_rank`` has them."""
        return CheckpointTrees(
            shared={"loop": loop, "optimizer": (optimizer.state_dict, optimizer.load_state_dict)}
        )

    def gather(self, acc: Any, model: torch.nn.Module) -> torch.nn.Module:
        """The trained model, unwrapped (and whole) for saving."""
        return acc.unwrap_model(model)


class Single(Engine):
    """One process: the model on its device, nothing to synchronise."""

    whole = True

    def __init__(self, name: str = "single") -> None:
        super().__init__(name)

    def place(self, model: torch.nn.Module, device: Any) -> None:
        model.to(device)  # before a fused optimizer is built

    def no_sync(self, acc: Any, model: torch.nn.Module) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def clip(self, acc: Any, model: torch.nn.Module, max_norm: float | None) -> Any:
        if max_norm:
            return acc.clip_grad_norm_(model.parameters(), max_norm)
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        return torch.nn.utils.get_total_norm(grads) if grads else None

    def loss_head(self, model: torch.nn.Module, cfg: Any) -> torch.nn.Linear | None:
        # not compiled: the head's pass-through would make the compiled forward recompile
        if not cfg.chunked_loss or cfg.compile:
            return None
        return chunked_head(model)


class DDP(Single):
    """Processes holding the whole model each, gradients all-reduced (Accelerate's DDP)."""

    def __init__(self, name: str = "ddp") -> None:
        super().__init__(name)

    def no_sync(self, acc: Any, model: torch.nn.Module) -> contextlib.AbstractContextManager[Any]:
        return acc.no_sync(model)


class FSDP2(Engine):
    """polymnesia's FSDP2 (:mod:`polymnesia.training.fsdp`): the model sharded per block
    after the plugins chose and froze its parameters; checkpoints hold each process's shards;
    the trained model gathered into a plain copy."""

    def __init__(self, name: str = "fsdp2") -> None:
        super().__init__(name)
        self.gatherer: fsdp.Gatherer | None = None

    def prepare(
        self,
        acc: Any,
        model: torch.nn.Module,
        groups: list[dict[str, Any]],
        build: BuildOptimizer,
        cfg: Any,
    ) -> tuple[torch.nn.Module, Any, Any]:
        # plugins chose and froze parameters on the whole model; the groups are carried over
        # to the sharded parameters by name
        named = fsdp.groups_by_name(model, groups)
        device = torch.device(acc.device)
        fsdp.ensure_process_group(device)
        self.gatherer = fsdp.Gatherer(model)
        fsdp.shard(model, cfg, device)
        optimizer, scheduler = build(fsdp.groups_from_names(model, named), fusable=False)
        return model, optimizer, scheduler

    def no_sync(self, acc: Any, model: torch.nn.Module) -> contextlib.AbstractContextManager[Any]:
        return fsdp.no_sync(model)

    def clip(self, acc: Any, model: torch.nn.Module, max_norm: float | None) -> Any:
        return fsdp.clip_grad_norm(list(model.parameters()), max_norm)

    def settle(self, model: torch.nn.Module) -> None:
        fsdp.reshard(model)  # the root stays gathered after a forward pass with no backward

    def agree(self, acc: Any, ok: bool) -> bool:
        flag = torch.tensor([0.0 if ok else 1.0], device=acc.device)
        return float(acc.reduce(flag, reduction="sum")) == 0.0

    def checkpoint_trees(
        self, model: torch.nn.Module, optimizer: Any, loop: Tree
    ) -> CheckpointTrees:
        # plugin states hold shards too (LF-MLF's accumulated update): one per process
        return CheckpointTrees(
            per_rank={
                "loop": loop,
                "model": (
                    lambda: fsdp.local_state(model),
                    lambda s: fsdp.load_local_state(model, s),
                ),
                "optimizer": (
                    lambda: fsdp.optimizer_to_local(optimizer.state_dict()),
                    lambda s: optimizer.load_state_dict(fsdp.optimizer_from_local(optimizer, s)),
                ),
            },
            layout=lambda: fsdp.shard_layout(model),
            param_names=lambda: fsdp.optimizer_param_names(model, optimizer),
        )

    def gather(self, acc: Any, model: torch.nn.Module) -> torch.nn.Module:
        if self.gatherer is None:
            raise RuntimeError("FSDP2.gather before FSDP2.prepare: there is no sharded model")
        return self.gatherer.gather(model)


#: the engine classes by name; any other (Accelerate's FSDP, DeepSpeed, ...) is
#: :class:`Engine`, which leaves the model to Accelerate
ENGINES: dict[str, type[Engine]] = {"single": Single, "ddp": DDP, "fsdp2": FSDP2}


def select(acc: Any, cfg: Any) -> Engine:
    """The engine object this run trains under (:func:`resolve` names it), chosen once."""
    name = resolve(acc, cfg)
    return ENGINES.get(name, Engine)(name)
