"""polymnesia's training methods as ``transformers.TrainerCallback`` objects, for the Hugging
Face Trainer and its subclasses (TRL's ``SFTTrainer``):

* :class:`FrozenRowsCallback` -- only the new token rows of the embeddings (and the LM head)
  train; the old rows stay bit-identical (the ``frozen_rows`` plugin, Aggarwal et al. 2024);
* :class:`ActiveForgettingCallback` -- the embeddings re-drawn and their AdamW moments reset
  every K steps (the ``active_forgetting`` plugin, Aggarwal et al. 2024);
* :class:`LayerFreezingCallback` -- layers frozen by name, at random, most changed or by
  Spectrum's SNR (the ``layer_freezing`` plugin, the two-phase CFT paper).

Each calls the pure functions the plugin of :mod:`polymnesia.methods` calls in polymnesia's
loop, at the same point of the step, so the Trainer and the loop train the same weights from
the same batches (``tests/integrations``). Pass the callback in ``Trainer(callbacks=[...])``:
it freezes parameters in ``on_init_end``, before the Trainer builds its optimizer and before
Accelerate shards the model. Each method's docstring says what differs under DDP and FSDP2.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.trainer_callback import ExportableState

from polymnesia.errors import ConfigError
from polymnesia.integrations.base import DDP, FSDP2, PolymnesiaCallback, warn_after_clipping
from polymnesia.methods.active_forgetting import (
    ActiveForgetting,
    check_reset_every,
    is_reset_step,
    reset_embeddings_,
)
from polymnesia.methods.frozen_rows import FrozenRows, mask_rows_
from polymnesia.methods.layer_freezing import LayerFreezing, resolve_frozen
from polymnesia.models.anatomy import input_embeddings, output_embeddings
from polymnesia.training.fsdp import row_slice


def _optimizer(method: str, kwargs: dict[str, Any]) -> torch.optim.Optimizer:
    opt = kwargs.get("optimizer")
    if opt is None:
        raise ConfigError(f"{method}: the Trainer gave the callback no optimizer")
    return getattr(opt, "optimizer", opt)  # Accelerate's wrapper holds the torch optimizer


class FrozenRowsCallback(PolymnesiaCallback):
    """Train only the embedding rows ``>= first_trainable_row`` (the tokens added to the
    vocabulary) and the LM head; with ``freeze_body`` every other parameter is frozen.

    As the ``frozen_rows`` plugin: the gradient of the old rows is zeroed
    (:func:`~polymnesia.methods.frozen_rows.mask_rows_`) before the Trainer clips, so they add
    nothing to the gradient norm or the AdamW moments, and after each optimizer step they are
    copied back from a snapshot, as AdamW's decoupled weight decay moves rows with a zero
    gradient. Under FSDP2 each process masks and restores the rows it holds. Under DDP the
    mask comes after the clip (one warning line when clipping); the old rows stay
    bit-identical under every engine.
    """

    method = "FrozenRowsCallback"

    def __init__(
        self, first_trainable_row: int, freeze_body: bool = True, freeze_head_rows: bool = False
    ) -> None:
        super().__init__()
        self.plugin = FrozenRows(first_trainable_row, freeze_body, freeze_head_rows)
        self.n_frozen = self.plugin.n_frozen
        self._snapshots: list[tuple[torch.nn.Parameter, torch.Tensor]] = []

    def _matrices(self, model: torch.nn.Module) -> list[torch.nn.Parameter]:
        emb = input_embeddings(model, self.method)
        out = [emb.weight]
        head = output_embeddings(model)
        if self.plugin.freeze_head_rows and head is not None and head.weight is not emb.weight:
            out.append(head.weight)
        return out

    def prepare(self, model: torch.nn.Module) -> None:
        rows = int(input_embeddings(model, self.method).weight.shape[0])
        if not 0 < self.n_frozen < rows:
            raise ConfigError(
                f"{self.method}: first_trainable_row {self.n_frozen} leaves no new token rows "
                f"to train and old rows to freeze in embeddings of {rows} rows; accepted: "
                f"1..{rows - 1} (add the new tokens with resize_token_embeddings first)"
            )
        if self.plugin.freeze_body:
            groups = [{"params": [p for p in model.parameters() if p.requires_grad]}]
            self.plugin.param_groups(model, groups)  # requires_grad off outside emb and head

    def begin(self, args: Any, state: Any, model: torch.nn.Module, **kwargs: Any) -> None:
        n = self.n_frozen
        self._snapshots = [(w, row_slice(w.detach(), 0, n).clone()) for w in self._matrices(model)]
        self.hook_grad([w for w, _ in self._snapshots], lambda p: mask_rows_(p.grad, n))
        if self.engine == DDP:
            warn_after_clipping(self.method, args, "the old rows' gradient is zeroed")

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        for w, _ in self._snapshots:  # already zero where a hook masked them
            mask_rows_(w.grad, self.n_frozen)

    @torch.no_grad()
    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        for w, frozen in self._snapshots:
            row_slice(w, 0, self.n_frozen).copy_(frozen)


class ActiveForgettingCallback(PolymnesiaCallback, ExportableState):
    """Every ``reset_every`` optimizer steps (never after the last) re-draw the token
    embeddings from N(0, ``std``), padding row zero, and reset their AdamW moments and step
    counter (:func:`~polymnesia.methods.active_forgetting.reset_embeddings_`, the draw seeded
    by ``(seed, step)`` as in the plugin). Options are the ``active_forgetting`` plugin's.

    With ``replay_schedule`` (the default, the reference code's behaviour) the embeddings get
    their own optimizer group at the start of training, whose learning rate follows the
    warmup and cosine decay replayed inside each K-step window
    (:func:`~polymnesia.training.schedule.windowed`), added to the Trainer's ``LambdaLR``
    schedule; the rest keeps the Trainer's schedule. The optimizer's state dict, as the
    Trainer checkpoints it, is given back in the Trainer's own layout (the embeddings in the
    group they came from), so ``trainer.train(resume_from_checkpoint=...)`` loads it and the
    callback makes the group again from the restored schedule: a resumed run takes the
    uninterrupted run's steps. ``resets`` is in the Trainer's state
    (``TrainerState.stateful_callbacks``) and comes back on resume. Under DDP every process
    draws the same embeddings (a seeded generator on the CPU); under FSDP2 every process
    draws the whole matrix and keeps its own rows (resuming such a run under FSDP2 is not
    tested).
    """

    method = "ActiveForgettingCallback"
    late_setup_ok = True  # it freezes nothing (so the Trainer may rebuild it on resume)

    def __init__(self, reset_every: int, **options: Any) -> None:
        super().__init__()
        self.plugin = ActiveForgetting(reset_every=reset_every, **options)
        self._args = {"reset_every": reset_every, **options}
        self.resets: list[int] = []
        self._targets: list[torch.nn.Parameter] = []
        self._pad_id: int | None = None
        #: the optimizer's groups as the Trainer made them, before the embeddings moved out
        self._layout: list[list[torch.nn.Parameter]] = []
        self._layout_hook: Any = None

    def state(self) -> dict[str, Any]:
        """What the Trainer keeps in its checkpoints' ``trainer_state.json``."""
        return {"args": dict(self._args), "attributes": {"resets": list(self.resets)}}

    def prepare(self, model: torch.nn.Module) -> None:
        input_embeddings(model, self.method)  # a model without embeddings: one line

    def begin(self, args: Any, state: Any, model: torch.nn.Module, **kwargs: Any) -> None:
        check_reset_every(self.plugin.reset_every, state.max_steps)
        emb = input_embeddings(model, self.method)
        self._targets = [emb.weight]
        head = output_embeddings(model)
        if self.plugin.reset_head and head is not None and head.weight is not emb.weight:
            self._targets.append(head.weight)
        self._pad_id = getattr(getattr(model, "config", None), "pad_token_id", None)
        if state.global_step > 0:  # resumed: the resets before the checkpoint
            saved = (getattr(state, "stateful_callbacks", None) or {}).get(type(self).__name__)
            saved = saved[0] if isinstance(saved, list) and saved else saved
            if isinstance(saved, dict):
                done = saved.get("attributes", {}).get("resets", [])
                self.resets = [int(s) for s in done if int(s) <= state.global_step]
        if self.plugin.replay:
            self._own_group(_optimizer(self.method, kwargs), kwargs.get("lr_scheduler"))

    def _own_group(self, optimizer: torch.optim.Optimizer, scheduler: Any) -> None:
        """Move the embeddings to their own group under the window schedule: before the first
        step, or on resume right after the Trainer loaded the optimizer's state in its own
        layout (the state stays with the parameters)."""
        inner = getattr(scheduler, "scheduler", scheduler)
        if not isinstance(inner, torch.optim.lr_scheduler.LambdaLR):
            raise ConfigError(
                f"{self.method}: replay_schedule needs the Trainer's LambdaLR schedule "
                f"(lr_scheduler_type linear, cosine, constant, ...), got "
                f"{type(inner).__name__}; or set replay_schedule=False"
            )
        targets = {id(p) for p in self._targets}
        layout = [list(g["params"]) for g in optimizer.param_groups]
        moved: list[torch.nn.Parameter] = []
        decay, base = 0.0, 0.0
        for g in optimizer.param_groups:
            keep = [p for p in g["params"] if id(p) not in targets]
            if len(keep) != len(g["params"]):
                moved += [p for p in g["params"] if id(p) in targets]
                decay, base = g.get("weight_decay", 0.0), float(g.get("initial_lr", g["lr"]))
                g["params"] = keep
        if not moved:
            return
        window = self.plugin.window_lambda()

        def lam(step: int) -> float:
            # a plain function: LambdaLR's state dict keeps no entry for it, so the Trainer's
            # scheduler (without this group) loads a checkpoint of this run
            return window(step)

        lr = base * lam(inner.last_epoch)
        optimizer.add_param_group(
            {"params": moved, "weight_decay": decay, "lr": lr, "initial_lr": base}
        )
        inner.lr_lambdas.append(lam)
        # a resumed scheduler has the saved run's base_lrs, this group's included
        inner.base_lrs = [*inner.base_lrs[: len(inner.lr_lambdas) - 1], base]
        inner._last_lr = [g["lr"] for g in optimizer.param_groups]
        self._layout = layout
        if self.engine != FSDP2:  # FSDP2 checkpoints the optimizer by parameter name
            self._layout_hook = optimizer.register_state_dict_post_hook(self._trainer_layout)

    def _trainer_layout(
        self, optimizer: torch.optim.Optimizer, sd: dict[str, Any]
    ) -> dict[str, Any]:
        """The optimizer's state dict with the embeddings back in the groups the Trainer made
        (so that the Trainer's optimizer, as it builds it on resume, loads it)."""
        live = [p for g in optimizer.param_groups for p in g["params"]]
        index = {id(p): i for i, p in enumerate(live)}
        n = len(self._layout)
        groups = sd["param_groups"]
        if len(groups) <= n:  # the embeddings' group is gone (e.g. moved back by hand)
            return sd
        layout = [*self._layout, *(g["params"] for g in optimizer.param_groups[n + 1 :])]
        saved = [*groups[:n], *groups[n + 1 :]]
        new_id: dict[int, int] = {}
        out_groups = []
        for g, params in zip(saved, layout, strict=True):
            ids = []
            for p in params:
                new_id[index[id(p)]] = len(new_id)
                ids.append(new_id[index[id(p)]])
            out_groups.append({**g, "params": ids})
        state = {new_id[i]: v for i, v in sd["state"].items()}
        return {**sd, "state": state, "param_groups": out_groups}

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step = state.global_step
        if not is_reset_step(step, self.plugin.reset_every, state.max_steps):
            return
        reset_embeddings_(
            self._targets,
            _optimizer(self.method, kwargs),
            std=self.plugin.std,
            seed=self.plugin.seed,
            step=step,
            pad_id=self._pad_id,
        )
        self.resets.append(step)


class LayerFreezingCallback(PolymnesiaCallback):
    """Freeze the parameters the ``layer_freezing`` plugin's options choose: ``params``
    (names) or a ``strategy`` (``random``, ``most_changed``: ``before`` is the folder of the
    model before fine-tuning, ``after`` defaults to the model being trained; ``spectrum``:
    ``source`` defaults to the model), then ``pct`` or ``top_k`` per weight type or layer,
    ``freeze`` selected or unselected
    (:func:`~polymnesia.methods.layer_freezing.resolve_frozen`).

    The frozen parameters get ``requires_grad=False`` before the Trainer builds its optimizer
    (so they are not in it) and before it shards the model, so they stay bit-identical under
    every engine. ``frozen`` lists their names.
    """

    method = "LayerFreezingCallback"

    def __init__(self, **options: Any) -> None:
        super().__init__()
        self.plugin = LayerFreezing(**options)
        self.frozen: list[str] = []

    def prepare(self, model: torch.nn.Module) -> None:
        self.frozen = resolve_frozen(self.plugin.cfg, model)
        params = dict(model.named_parameters())
        for n in self.frozen:
            params[n].requires_grad_(False)


__all__ = [
    "ActiveForgettingCallback",
    "FrozenRowsCallback",
    "LayerFreezingCallback",
]
