"""Training plugin ``active_forgetting``: periodic token-embedding resets.

Aggarwal et al. 2024 (section 3 and Table 4) after Chen et al.
(2023, code facebookresearch/language-model-plasticity): every K optimizer
steps the token embeddings are re-drawn from N(0, 0.02) with the padding row
zeroed; the embeddings are *not* reset after the final step (Table 4 note).

What happens at a reset step s (s % K == 0 and s < total steps), right after
the optimizer step s has been applied:

* the input embedding matrix is re-drawn from N(0, ``std``) on process 0 and
  broadcast to every process (torch.distributed), so all replicas agree; the
  padding row (``config.pad_token_id``) is zeroed;
* the AdamW state of the embedding parameters is reset: ``exp_avg`` and
  ``exp_avg_sq`` zeroed and their ``step`` set to 0. AdamW keeps ``step`` per
  parameter, so the embeddings get their own bias correction from 1 again
  while the body's moments and counters continue;
* with ``replay_schedule`` (the reference code's behaviour) the embeddings sit
  in their own optimizer group whose learning-rate multiplier is
  :func:`polymnesia.training.schedule.windowed`: the linear warmup + cosine
  decay replayed inside each K-step window. The body keeps the global
  schedule. Without it, the embeddings follow the global schedule.

The embeddings and the head are found through the model's own API
(:mod:`polymnesia.models.anatomy`: ``get_input_embeddings`` /
``get_output_embeddings``), so any transformers architecture works; a model
without an input embedding matrix is refused in one line.

LM heads:

* tied head (``tie_word_embeddings``): the head *is* the embedding matrix, so
  it is reset with it (as in the reference code, which ties them);
* untied head (Mistral's default): the reference code does not define this
  case. ``reset_head=False`` (default) resets the input embeddings only, the
  head keeps its weights, moments and schedule (it is part of the "body");
  ``reset_head=True`` re-draws the head from the same N(0, std) as well and
  treats it exactly like the embeddings (moments, step counter, schedule).

Departure: draws use a generator seeded by ``(seed, step)`` so that an exact
resume from a checkpoint reproduces the same resets (the reference code uses
the global RNG).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from pydantic import Field, ValidationError

from polymnesia.errors import ConfigError
from polymnesia.models.anatomy import input_embeddings, output_embeddings
from polymnesia.training.fsdp import is_dtensor, local_rows
from polymnesia.training.plugins import PLUGINS, LoopState, PluginOptions, TrainingPlugin
from polymnesia.training.schedule import windowed


def check_reset_every(reset_every: Any, total_steps: int | None = None) -> int:
    """Validate K: a positive integer smaller than the number of steps (one-line error)."""
    if isinstance(reset_every, bool) or not isinstance(reset_every, int) or reset_every < 1:
        raise ConfigError(
            f"active_forgetting reset_every must be a positive integer, got {reset_every!r}"
        )
    if total_steps is not None and reset_every >= total_steps:
        raise ConfigError(
            f"active_forgetting reset_every {reset_every} must be smaller than train.steps "
            f"{total_steps}, otherwise no reset ever happens"
        )
    return reset_every


def is_reset_step(step: int, reset_every: int, total_steps: int) -> bool:
    """Whether the embeddings are reset after optimizer step ``step`` (1-based); never after the
    last.
    """
    return step % reset_every == 0 and step < total_steps


def reset_adam_state(optimizer: torch.optim.Optimizer, params: list[torch.nn.Parameter]) -> None:
    """Zero the AdamW moments of ``params`` and restart their own bias-correction counter."""
    inner = getattr(optimizer, "optimizer", optimizer)  # unwrap Accelerate's optimizer
    for p in params:
        st = inner.state.get(p)
        if not st:
            continue
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            if key in st:
                st[key].zero_()
        if "step" in st:
            if torch.is_tensor(st["step"]):
                st["step"].zero_()
            else:
                st["step"] = 0


def redraw_(
    weight: torch.Tensor, std: float, generator: torch.Generator, pad_id: int | None
) -> None:
    """Re-draw ``weight`` in place from N(0, std), padding row zero. A weight sharded by
    rows (FSDP2) draws the whole matrix and keeps the rows this process holds, so every
    sharding gives the same rows."""
    fresh = torch.randn(weight.shape, generator=generator, dtype=torch.float32) * std
    if pad_id is not None and 0 <= pad_id < weight.shape[0]:
        fresh[pad_id] = 0.0
    rows, start = local_rows(weight)
    rows.copy_(fresh[start : start + rows.shape[0]].to(device=rows.device, dtype=rows.dtype))


@torch.no_grad()
def reset_embeddings_(
    targets: list[torch.nn.Parameter],
    optimizer: torch.optim.Optimizer,
    *,
    std: float,
    seed: int,
    step: int,
    pad_id: int | None,
    accelerator: Any = None,
) -> None:
    """One reset after optimizer step ``step``: re-draw ``targets`` (the input embeddings first,
    whose padding row is zeroed) from N(0, std) with a generator seeded by ``(seed, step)`` and
    reset their AdamW state. A sharded weight (FSDP2) is drawn whole on every process, which
    keeps its own rows; a replicated one is drawn on the main process and broadcast (the draw
    is the same on every process anyway: the generator is seeded and on the CPU)."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
    for i, w in enumerate(targets):
        if is_dtensor(w):  # sharded: every process draws, each keeps its own rows
            redraw_(w.data, std, gen, pad_id if i == 0 else None)
            continue
        if accelerator is None or accelerator.is_main_process:
            redraw_(w.data, std, gen, pad_id if i == 0 else None)
        _broadcast(w.data, accelerator)
    reset_adam_state(optimizer, targets)


def _broadcast(weight: torch.Tensor, accelerator: Any) -> None:
    if accelerator is not None and accelerator.num_processes > 1:
        import torch.distributed as dist

        dist.broadcast(weight, src=0)


class ActiveForgettingOptions(PluginOptions):
    """Options of the ``active_forgetting`` plugin (Aggarwal et al. 2024, Table 4)."""

    reset_every: int = Field(gt=0, description="K: optimizer steps between embedding resets")
    std: float = Field(0.02, gt=0, description="std of the re-drawn embeddings")
    reset_head: bool = Field(False, description="also reset an untied LM head")
    replay_schedule: bool = Field(True, description="embedding LR replays warmup+decay per window")
    warmup_ratio: float = Field(0.1, ge=0, le=1, description="warmup share of each window")
    min_lr_ratio: float = Field(0.0, ge=0, le=1, description="final LR share of each window")
    seed: int = Field(0, description="seed of the re-drawn embeddings")


@PLUGINS.register(
    "active_forgetting",
    "re-draw the token embeddings every K steps, reset their Adam state and replay their LR "
    "schedule",
)
class ActiveForgetting(TrainingPlugin):
    """See the module docstring. Options are the keys of a stage's ``plugins`` entry."""

    name = "active_forgetting"
    Options = ActiveForgettingOptions
    sharded_engines = ("fsdp2",)

    def __init__(self, **options: Any) -> None:
        check_reset_every(options.get("reset_every"))
        try:
            o = ActiveForgettingOptions(**options)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            raise ConfigError(f"active_forgetting {where}: {err['msg']}") from None
        self.reset_every = o.reset_every
        self.std, self.reset_head, self.replay = o.std, o.reset_head, o.replay_schedule
        self.warmup_ratio, self.min_lr_ratio, self.seed = o.warmup_ratio, o.min_lr_ratio, o.seed
        self.resets: list[int] = []

    @classmethod
    def check_train(cls, options: dict[str, Any], train: Any) -> None:
        try:
            check_reset_every(options["reset_every"], train.steps)
        except ConfigError as e:
            raise ValueError(str(e)) from None

    # -- which parameters are "the embeddings"
    def _targets(self, model: torch.nn.Module) -> list[torch.nn.Parameter]:
        emb = input_embeddings(model, "active_forgetting")
        out = [emb.weight]
        head = output_embeddings(model)
        if self.reset_head and head is not None and head.weight is not emb.weight:
            out.append(head.weight)
        return out

    def window_lambda(self) -> functools.partial[float]:
        k = self.reset_every
        return functools.partial(
            windowed,
            window=k,
            warmup=int(round(self.warmup_ratio * k)),
            total=k,
            min_ratio=self.min_lr_ratio,
        )

    def param_groups(
        self, model: torch.nn.Module, groups: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        if not self.replay:
            return groups
        targets = {id(p) for p in self._targets(model)}
        moved: list[torch.nn.Parameter] = []
        decay = 0.0
        for g in groups:
            keep = [p for p in g["params"] if id(p) not in targets]
            if len(keep) != len(g["params"]):
                decay = g.get("weight_decay", 0.0)
                moved += [p for p in g["params"] if id(p) in targets]
            g["params"] = keep
        groups = [g for g in groups if g["params"]]
        if moved:
            groups.append(
                {
                    "name": "embeddings",
                    "params": moved,
                    "weight_decay": decay,
                    "lr_lambda": self.window_lambda(),
                }
            )
        return groups

    def setup(self, state: LoopState) -> None:
        check_reset_every(self.reset_every, state.total_steps)

    @torch.no_grad()
    def reset(self, state: LoopState) -> None:
        model = state.unwrapped
        targets = self._targets(model)
        pad_id = getattr(getattr(model, "config", None), "pad_token_id", None)
        reset_embeddings_(
            targets,
            state.optimizer,
            std=self.std,
            seed=self.seed,
            step=state.step,
            pad_id=pad_id,
            accelerator=state.accelerator,
        )
        self.resets.append(state.step)
        state.extras.setdefault("embedding_resets", []).append(state.step)

    def after_optimizer_step(self, state: LoopState) -> None:
        if is_reset_step(state.step, self.reset_every, state.total_steps):
            self.reset(state)

    def state_dict(self) -> dict[str, Any]:
        return {"resets": list(self.resets)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.resets = list(state.get("resets", []))
