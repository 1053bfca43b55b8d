"""What every polymnesia callback for the Hugging Face Trainer shares: how it finds the engine
the Trainer runs under, the refusals, and the gradient hook that edits a gradient *before*
the Trainer clips it.

The Trainer calls ``on_pre_optimizer_step`` after it clips the gradients
(``transformers.Trainer._inner_training_loop``: clip, ``on_pre_optimizer_step``,
``optimizer.step``, ``on_optimizer_step``), while polymnesia's loop edits them before
(:meth:`~polymnesia.training.plugins.TrainingPlugin.before_optimizer_step`). So an edit that
changes the gradient norm (masking frozen rows, a penalty's gradient) is made in a
post-accumulate-grad hook of the parameter, which runs when the gradient is final: in one
process after each micro-batch's backward pass, under FSDP2 after the reduce-scatter of the
step's last micro-batch (FSDP2 runs these hooks on its sharded parameters). Under DDP the
reduced gradient is copied back after such a hook, so there the edit is made in
``on_pre_optimizer_step``, after clipping: :func:`warn_after_clipping` says so in one line.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
from transformers import TrainerCallback

from polymnesia.errors import ConfigError
from polymnesia.training.fsdp import is_dtensor

#: how the Trainer spreads the model: one process, DDP (replicas), FSDP2 (sharded parameters)
SINGLE, DDP, FSDP2 = "single", "ddp", "fsdp2"


class IntegrationWarning(UserWarning):
    """A polymnesia callback runs, but not exactly as polymnesia's own loop would."""


def engine_of(model: torch.nn.Module) -> str:
    """The engine ``model`` trains under once the Trainer has prepared it."""
    if any(is_dtensor(p) for p in model.parameters()):
        return FSDP2
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return DDP
    return SINGLE


def check_args(method: str, args: Any) -> None:
    """Refuse, in one line, the Trainer setups a callback cannot be exact under."""
    if getattr(args, "deepspeed", None):
        raise ConfigError(
            f"{method}: DeepSpeed owns the gradients and the optimizer state, which this "
            "callback edits; accepted: one process, DDP or FSDP2 (fsdp_config version 2)"
        )
    fsdp = getattr(args, "fsdp", None)
    config = getattr(args, "fsdp_config", None) or {}
    if fsdp and int(config.get("version", 2)) != 2:
        raise ConfigError(
            f"{method}: FSDP version 1 flattens the parameters this callback edits by row; "
            "accepted: fsdp_config version 2 (FSDP2), DDP or one process"
        )


def warn_after_clipping(method: str, args: Any, what: str) -> None:
    """Under DDP with clipping: the edit comes after the Trainer's clip (one line)."""
    if getattr(args, "max_grad_norm", 0) and args.max_grad_norm > 0:
        warnings.warn(
            f"{method} under DDP: {what} after the Trainer clips the gradients "
            f"(max_grad_norm={args.max_grad_norm}), where polymnesia's loop does it before; "
            "set max_grad_norm=0, or train in one process or under FSDP2, for the loop's "
            "exact step",
            IntegrationWarning,
            stacklevel=3,
        )


def warn_not_sharded(method: str, engine: str) -> None:
    """``fsdp`` was asked but the model is not sharded (Accelerate on CPU): one line."""
    warnings.warn(
        f"{method}: fsdp is set but the Trainer did not shard the model (Accelerate runs FSDP "
        f"only on accelerators; on CPU it trains under {engine.upper()}): the callback runs as "
        f"under {engine.upper()}",
        IntegrationWarning,
        stacklevel=3,
    )


def sync_step() -> bool:
    """Whether the micro-batch being back-propagated is the optimizer step's last (the Trainer
    sets Accelerate's gradient state before each micro-batch)."""
    from accelerate.state import GradientState

    return bool(GradientState().sync_gradients)


class PolymnesiaCallback(TrainerCallback):
    """A callback that sets the model up in ``on_init_end`` (before the Trainer builds its
    optimizer and wraps or shards the model), or in ``on_train_begin`` when it was added after
    the Trainer was made (then only in one process), and keeps its gradient hooks."""

    method = "callback"
    #: whether setting the model up may wait until train begin under DDP or FSDP2 (a callback
    #: that freezes nothing)
    late_setup_ok = False

    def __init__(self) -> None:
        self._prepared = False
        self._hooks: list[Any] = []
        self.engine = SINGLE

    def prepare(self, model: torch.nn.Module) -> None:
        """Freeze parameters and check the model (before the optimizer exists)."""

    def begin(self, args: Any, state: Any, model: torch.nn.Module, **kwargs: Any) -> None:
        """The model is prepared (maybe sharded) and the optimizer built: snapshot, hook."""

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        check_args(self.method, args)
        model = kwargs.get("model")
        if model is not None and not self._prepared:
            self.prepare(model)
            self._prepared = True

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        check_args(self.method, args)
        model = kwargs.pop("model", None)
        if model is None:
            raise ConfigError(f"{self.method}: the Trainer gave the callback no model")
        self.engine = engine_of(model)
        if not self._prepared:
            if self.engine != SINGLE and not self.late_setup_ok:
                raise ConfigError(
                    f"{self.method}: added after the Trainer wrapped the model for "
                    f"{self.engine}; pass it in Trainer(callbacks=[...]) so that it sets the "
                    "model up first"
                )
            self.prepare(model)
            self._prepared = True
        if getattr(args, "fsdp", None) and self.engine != FSDP2:
            warn_not_sharded(self.method, self.engine)
        self.begin(args, state, model, **kwargs)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks = []

    def hook_grad(
        self, params: list[torch.nn.Parameter], edit: Callable[[torch.nn.Parameter], None]
    ) -> None:
        """Run ``edit(p)`` on each final gradient before the Trainer clips it (one process,
        FSDP2); under DDP the callback edits in ``on_pre_optimizer_step`` instead."""
        if self.engine == DDP:
            return
        for p in params:
            self._hooks.append(p.register_post_accumulate_grad_hook(edit))
