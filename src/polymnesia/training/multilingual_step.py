"""Per-language gradients in the training loop (Mao et al. 2022, Eq. 1 and Algorithm 1).

Each optimizer step draws a batch per source language
(:class:`MultilingualData` gives every global index one example of *each*
language), computes language t's gradient of the *shared* parameters (the
model body, ``base_model``) into row t of a flat ``[T, D]`` buffer,
combines the rows with a registered combiner (``polymnesia.gradients``) and
writes the direction into ``.grad``. Task-head parameters are not shared
across languages in the paper's sense (they are not part of the pretrained
model whose forgetting LF-MLF bounds) and keep their ordinary gradient: the
*mean* over languages (the gradient of the mean loss, as Uniform-MLF).

Gradient accumulation: each language's loss is divided by the number of
micro-batches and back-propagated micro-batch by micro-batch, so row t is the
gradient of that language's mean loss over the global batch. Several
processes: every backward runs under ``accelerator.no_sync`` (no DDP
all-reduce) and each row (and the head gradient) is all-reduced (mean) here,
before combining, so every process combines the same matrix and takes the
same step as one process would.

Under FSDP2 (``train.engine: fsdp2``) each language's backward pass ends with
FSDP2's reduce-scatter, so each process holds its shard of row t, already the mean
over processes; the combiner runs on the shards inside
:func:`polymnesia.gradients.sharded_rows` (inner products all-reduced, weights the
same on every process) and each process writes its shard of the direction. No
gradient is gathered, and the step equals the one-process step up to float rounding.

LF-MLF's stop (Algorithm 1: the feasible set of Problem 2 is empty) is not
an error: the step calls ``state.request_stop(reason)``, the loop ends
training before the optimizer step, and the stage records the step.
The combiner's state (EMA targets, accumulated update, RNG) is checkpointed
through :meth:`MultilingualStep.state_dict` (the object is also a plugin).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch

from polymnesia.errors import DataError, PolymnesiaError
from polymnesia.gradients import (
    Combiner,
    InfeasibleQP,
    assign_flat_grad,
    flatten_grads,
    sharded_rows,
)
from polymnesia.gradients.base import ObservesUpdates
from polymnesia.models.anatomy import not_applicable, split_body_head
from polymnesia.training import fsdp
from polymnesia.training.plugins import LoopState, TrainingPlugin

LANG_KEY = "lang_index"


class MultilingualData:
    """Per-language datasets behind one index space for the loop (``TrainData``).

    Global index i maps to example ``i % n_t`` of language t's (shuffled once
    with ``seed``) list, for every language, so a batch of B indices holds B
    examples per language; ``collate`` returns them concatenated with a
    ``lang_index`` row tensor. ``len`` is the largest language's size (an
    "epoch" sees every example of every language at least once).
    """

    def __init__(self, datasets: Sequence[Any], languages: Sequence[str], seed: int = 0) -> None:
        if len(datasets) != len(languages) or not datasets:
            raise DataError("MultilingualData needs one dataset per language")
        for lang, d in zip(languages, datasets, strict=True):
            if len(d) == 0:
                raise DataError(f"source language '{lang}' has no labelled training examples")
        self.datasets, self.languages = list(datasets), list(languages)
        gen = torch.Generator().manual_seed(seed)
        self.orders = [torch.randperm(len(d), generator=gen).tolist() for d in self.datasets]

    def __len__(self) -> int:
        return max(len(d) for d in self.datasets)

    def collate(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        parts = []
        for t, (d, order) in enumerate(zip(self.datasets, self.orders, strict=True)):
            b = d.collate([order[i % len(order)] for i in indices])
            b[LANG_KEY] = torch.full((len(indices),), t, dtype=torch.long)
            parts.append(b)
        return _concat(parts, int(getattr(self.datasets[0], "pad_id", 0)))


def _concat(parts: list[dict[str, torch.Tensor]], pad_id: int) -> dict[str, torch.Tensor]:
    """Concatenate per-language batches, right-padding to one width (ids: ``pad_id``; labels:
    -100).
    """
    out = {}
    for key in parts[0]:
        tensors = [p[key] for p in parts]
        if tensors[0].dim() == 2:
            width = max(t.shape[1] for t in tensors)
            fill = {"labels": -100, "input_ids": pad_id}.get(key, 0)
            tensors = [
                torch.nn.functional.pad(t, (0, width - t.shape[1]), value=fill) for t in tensors
            ]
        out[key] = torch.cat(tensors)
    return out


def split_params(
    model: torch.nn.Module,
) -> tuple[list[torch.nn.Parameter], list[torch.nn.Parameter]]:
    """(shared body parameters, head parameters), trainable only, in ``named_parameters`` order.

    The body is the model's ``base_model`` (:func:`polymnesia.models.anatomy.split_body_head`),
    whatever the architecture names it (``model``, ``transformer``, ``roberta``).
    """
    body, head = split_body_head(model, "per-language gradients")
    if not body:
        raise not_applicable(
            "per-language gradients", model, "its body has no trainable parameter to combine"
        )
    return [p for _, p in body], [p for _, p in head]


class MultilingualStep(TrainingPlugin):
    """Step function (``step_fn=``) and plugin (``plugins=[...]``) in one object."""

    name = "multilingual_step"
    sharded_engines = ("fsdp2",)

    def __init__(self, combiner: Combiner, languages: Sequence[str]) -> None:
        if not languages:
            raise PolymnesiaError("per-language fine-tuning needs at least one source language")
        self.combiner, self.languages = combiner, list(languages)
        self.last_weights: list[float] | None = None
        self._stop: dict[str, Any] = {}
        self._before: torch.Tensor | None = None
        self._lr = 0.0

    @property
    def stop_info(self) -> dict[str, Any]:
        """What the stage records when Algorithm 1 stopped (empty otherwise)."""
        return dict(self._stop)

    # --- the step function -------------------------------------------------
    def __call__(
        self, state: LoopState, micro_batches: list[dict[str, torch.Tensor]]
    ) -> torch.Tensor:
        if fsdp.is_sharded(state.model):
            return self._sharded_call(state, micro_batches)
        acc, model = state.accelerator, state.model
        shared, head = split_params(state.unwrapped)
        t_count, n = len(self.languages), len(micro_batches)
        dim = sum(p.numel() for p in shared)
        grads = torch.empty(t_count, dim, dtype=shared[0].dtype, device=shared[0].device)
        head_sum = [torch.zeros_like(p) for p in head]
        losses = torch.zeros(t_count, device=acc.device)
        for t in range(t_count):
            state.optimizer.zero_grad(set_to_none=True)
            for batch in micro_batches:
                sel = batch[LANG_KEY] == t
                inputs = {k: v[sel] for k, v in batch.items() if k != LANG_KEY}
                ctx = acc.no_sync(model) if acc.num_processes > 1 else contextlib.nullcontext()
                with ctx, acc.autocast():
                    loss = model(**inputs).loss / n
                acc.backward(loss)
                losses[t] += loss.detach()
            grads[t].copy_(flatten_grads(shared))
            for s, p in zip(head_sum, head, strict=True):
                if p.grad is not None:
                    s.add_(p.grad)
        state.optimizer.zero_grad(set_to_none=True)
        if acc.num_processes > 1:
            grads, head_sum, losses = _all_reduce_mean(acc, grads, head_sum, losses)
        return self._apply(state, grads, shared, head, head_sum, losses)

    def _sharded_call(
        self, state: LoopState, micro_batches: list[dict[str, torch.Tensor]]
    ) -> torch.Tensor:
        """The step under FSDP2: rows of local gradient shards, combined without gathering."""
        import torch.distributed as dist

        acc, model = state.accelerator, state.model
        if getattr(self.combiner, "sizes", None) is not None:
            raise PolymnesiaError(
                f"{self.combiner.name} with blocks other than 'whole' is not verified under "
                "train.engine=fsdp2; use granularity: whole, or DDP"
            )
        shared, head = split_params(model)
        t_count, n = len(self.languages), len(micro_batches)
        dim = sum(fsdp.local(p).numel() for p in shared)
        first = fsdp.local(shared[0])
        grads = torch.empty(t_count, dim, dtype=first.dtype, device=first.device)
        head_sum = [torch.zeros_like(fsdp.local(p)) for p in head]
        losses = torch.zeros(t_count, device=acc.device)
        for t in range(t_count):
            state.optimizer.zero_grad(set_to_none=True)
            for i, batch in enumerate(micro_batches):
                sel = batch[LANG_KEY] == t
                inputs = {k: v[sel] for k, v in batch.items() if k != LANG_KEY}
                sync = contextlib.nullcontext() if i == n - 1 else fsdp.no_sync(model)
                with sync, acc.autocast():
                    loss = model(**inputs).loss / n
                loss.backward()  # the last micro-batch's reduce-scatters: mean over processes
                losses[t] += loss.detach()
            grads[t].copy_(fsdp.flat_local_grads(shared))
            for s, p in zip(head_sum, head, strict=True):
                if p.grad is not None:
                    s.add_(fsdp.local(p.grad))
        state.optimizer.zero_grad(set_to_none=True)
        dist.all_reduce(losses)
        losses /= acc.num_processes

        def process_sum(x: torch.Tensor) -> torch.Tensor:
            dist.all_reduce(x)
            return x

        with sharded_rows(process_sum):
            return self._apply(state, grads, shared, head, head_sum, losses)

    def _apply(self, state, grads, shared, head, head_sum, losses):
        try:
            direction = self.combiner(grads, languages=self.languages)
        except InfeasibleQP as e:
            reason = str(e) or f"{self.combiner.name}: the feasible set is empty"
            self._stop = {"stop_reason": reason, "stop_step": state.step + 1}
            state.request_stop(reason)
            return losses.mean()
        if self.combiner.weights is not None:
            self.last_weights = [float(w) for w in self.combiner.weights]
        if fsdp.is_dtensor(shared[0]):
            fsdp.assign_flat_local_grads(shared, direction)
            for p, s in zip(head, head_sum, strict=True):
                fsdp.set_local_grad(p, s / len(self.languages))
            return losses.mean()
        assign_flat_grad(shared, direction)
        for p, s in zip(head, head_sum, strict=True):
            p.grad = s / len(self.languages)
        return losses.mean()

    # --- plugin hooks: LF-MLF accumulate="update", checkpointed state --------
    def _tracks_update(self) -> bool:
        return getattr(self.combiner, "accumulate", None) == "update"

    def before_optimizer_step(self, state: LoopState) -> None:
        if self._tracks_update():
            shared, _ = split_params(state.unwrapped)
            self._before = torch.cat([fsdp.local(p.detach()).reshape(-1) for p in shared]).clone()
            self._lr = float(state.optimizer.param_groups[0]["lr"])

    def after_optimizer_step(self, state: LoopState) -> None:
        if self._tracks_update() and self._before is not None and self._lr > 0:
            shared, _ = split_params(state.unwrapped)
            after = torch.cat([fsdp.local(p.detach()).reshape(-1) for p in shared])
            if not isinstance(self.combiner, ObservesUpdates):
                raise PolymnesiaError(
                    f"{self.combiner.name} accumulates updates but has no observe_update"
                )
            self.combiner.observe_update(after - self._before, self._lr)
            self._before = None

    def state_dict(self) -> dict[str, Any]:
        return {"combiner": self.combiner.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "combiner" in state:
            self.combiner.load_state_dict(state["combiner"])

    def sharded_state(self, model: torch.nn.Module) -> dict[tuple[str, ...], list[str]]:
        keys = type(self.combiner).flat_state
        if not keys:
            return {}
        names = [n for n, _ in split_body_head(model, "per-language gradients")[0]]
        return {("combiner", key): names for key in keys}


def _all_reduce_mean(acc, grads, head_sum, losses):
    """Mean over processes of each language row, the head gradients and the losses."""
    import torch.distributed as dist

    world = acc.num_processes
    for t in range(grads.shape[0]):
        dist.all_reduce(grads[t])
    grads.div_(world)
    for s in head_sum:
        dist.all_reduce(s)
        s.div_(world)
    dist.all_reduce(losses)
    return grads, head_sum, losses / world
