"""Per-language gradient combination in the Hugging Face Trainer: :class:`MultilingualTrainer`
(Mao et al. 2022, Eq. 1 and Algorithm 1), the step of
:mod:`polymnesia.training.multilingual_step` as a ``transformers.Trainer`` subclass.

Every batch carries a language column (``language_column``, default ``lang_index``: the
index of each row's language in ``languages``). Each training step back-propagates language
t's loss over its rows (divided by the number of micro-batches, as the Trainer scales a
loss for accumulation) into row t of a ``[T, D]`` matrix of the shared (body) parameters'
gradients, accumulated over the step's micro-batches; on the step's last micro-batch the
registered combiner (``uniform``, ``pcgrad``, ``gradvac``, ``mgda``, ``lf_mlf``:
:mod:`polymnesia.gradients`) turns the matrix into one direction, written into ``.grad``;
the head parameters get the mean of the languages' gradients. The Trainer then clips and
steps as usual, as polymnesia's loop does after its step function.

LF-MLF's stop (the feasible set of Problem 2 is empty) leaves the step without gradients
(no parameter moves) and stops training; :attr:`MultilingualTrainer.stop_info` says when
and why. LF-MLF's ``accumulate="update"`` sees each optimizer update through a callback the
Trainer adds itself.

This trainer runs in one process: polymnesia's loop runs the same step under DDP and FSDP2
(``train.engine``), which here is refused in one line. The combiner's state (GradVac's EMA
targets, PCGrad's and GradVac's random generator, LF-MLF's accumulated directions or updates
and its stop) goes into each Trainer checkpoint as :data:`COMBINER_FILE`, next to the
optimizer's, and ``trainer.train(resume_from_checkpoint=...)`` loads it back: a resumed run
takes the uninterrupted run's steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainerCallback

from polymnesia.errors import ConfigError
from polymnesia.gradients import (
    Combiner,
    InfeasibleQP,
    assign_flat_grad,
    flatten_grads,
    get_combiner,
)
from polymnesia.gradients.base import ObservesUpdates
from polymnesia.integrations.base import SINGLE, check_args, engine_of
from polymnesia.training.multilingual_step import split_params

#: the combiner's state in a Trainer checkpoint folder (``torch.save``, tensors and numbers)
COMBINER_FILE = "combiner.pt"


class MultilingualTrainer(Trainer):
    """A ``transformers.Trainer`` whose step combines per-language gradients.

    ``combiner`` is a registered combiner's name (with ``combiner_options``) or a
    :class:`~polymnesia.gradients.Combiner`; ``languages`` names the languages the column's
    indices stand for, in order. Other arguments are the Trainer's. With
    ``remove_unused_columns`` (the Trainer's default) the language column is kept.
    """

    def __init__(
        self,
        *args: Any,
        languages: Sequence[str],
        combiner: str | Combiner = "uniform",
        combiner_options: dict[str, Any] | None = None,
        language_column: str = "lang_index",
        **kwargs: Any,
    ) -> None:
        if not languages or not all(isinstance(x, str) for x in languages):
            raise ConfigError(
                f"MultilingualTrainer: languages must name at least one language, got {languages!r}"
            )
        if isinstance(combiner, str):
            combiner = get_combiner(combiner, **(combiner_options or {}))
        elif combiner_options:
            raise ConfigError(
                "MultilingualTrainer: combiner_options go with a combiner's name, not with a "
                "combiner object"
            )
        self.combiner, self.languages = combiner, list(languages)
        self.language_column = language_column
        self.last_weights: list[float] | None = None
        self.stop_info: dict[str, Any] = {}
        self._rows: torch.Tensor | None = None
        self._heads: list[list[torch.Tensor]] = []
        super().__init__(*args, **kwargs)
        check_args("MultilingualTrainer", self.args)
        if getattr(combiner, "accumulate", None) == "update":
            self.add_callback(_ObserveUpdates(self))

    def _set_signature_columns_if_needed(self) -> None:
        super()._set_signature_columns_if_needed()
        columns: list[str] = list(self._signature_columns or [])
        if self.language_column not in columns:
            self._signature_columns = [*columns, self.language_column]  # type: ignore[assignment]

    def _language_rows(self, inputs: dict[str, Any]) -> torch.Tensor:
        langs = inputs.pop(self.language_column, None)
        if not isinstance(langs, torch.Tensor) or langs.dim() != 1:
            raise ConfigError(
                f"MultilingualTrainer: each batch needs a column {self.language_column!r} with "
                f"one language index per row (0..{len(self.languages) - 1} for "
                f"{', '.join(self.languages)}); got {type(langs).__name__}"
            )
        bad = langs[(langs < 0) | (langs >= len(self.languages))]
        if bad.numel():
            raise ConfigError(
                f"MultilingualTrainer: language index {int(bad[0])} in column "
                f"{self.language_column!r}; accepted: 0..{len(self.languages) - 1} "
                f"({', '.join(self.languages)})"
            )
        return langs

    def training_step(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor:
        if engine_of(model) != SINGLE:
            raise ConfigError(
                "MultilingualTrainer runs in one process; for DDP or FSDP2 use polymnesia's "
                "loop (train.engine), which all-reduces each language's gradient"
            )
        model.train()
        inputs = self._prepare_inputs(inputs)
        langs = self._language_rows(inputs)
        shared, head = split_params(self.accelerator.unwrap_model(model))
        t_count = len(self.languages)
        n = getattr(self, "current_gradient_accumulation_steps", None)
        n = n or self.args.gradient_accumulation_steps
        if self._rows is None:
            dim = sum(p.numel() for p in shared)
            self._rows = torch.zeros(t_count, dim, dtype=shared[0].dtype, device=shared[0].device)
            self._heads = [[torch.zeros_like(p) for p in head] for _ in range(t_count)]
        losses = torch.zeros(t_count, device=self.args.device)
        for t in range(t_count):
            model.zero_grad(set_to_none=True)
            sel = langs == t
            part = {k: v[sel] if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
            if not bool(sel.any()):
                continue  # this micro-batch has no row of language t
            with self.compute_loss_context_manager():
                loss = model(**part).loss / n
            self.accelerator.backward(loss)
            losses[t] = loss.detach()
            self._rows[t].add_(flatten_grads(shared))
            for s, p in zip(self._heads[t], head, strict=True):
                if p.grad is not None:
                    s.add_(p.grad)
        model.zero_grad(set_to_none=True)
        if self.accelerator.sync_gradients:
            self._combine(shared, head)
        return losses.mean()

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        super()._save_optimizer_and_scheduler(output_dir)
        if self.args.should_save:
            state = {
                "combiner": self.combiner.name,
                "state": self.combiner.state_dict(),
                "last_weights": self.last_weights,
                "stop_info": self.stop_info,
            }
            torch.save(state, Path(output_dir) / COMBINER_FILE)

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None:
            return
        path = Path(checkpoint) / COMBINER_FILE
        if not path.is_file():
            if self.combiner.state_dict():
                raise ConfigError(
                    f"MultilingualTrainer: checkpoint {checkpoint} has no {COMBINER_FILE}, so "
                    f"{self.combiner.name}'s state cannot resume; accepted: a checkpoint "
                    "MultilingualTrainer wrote (not save_only_model)"
                )
            return
        saved = torch.load(path, map_location="cpu", weights_only=True)
        if saved["combiner"] != self.combiner.name:
            raise ConfigError(
                f"MultilingualTrainer: checkpoint {checkpoint} holds the state of combiner "
                f"{saved['combiner']!r}, this trainer combines with {self.combiner.name!r}; "
                "accepted: the same combiner as the checkpointed run"
            )
        state = dict(saved["state"])
        for key in self.combiner.flat_state:  # flat vectors live on the gradients' device
            if isinstance(state.get(key), torch.Tensor):
                state[key] = state[key].to(self.args.device)
        self.combiner.load_state_dict(state)
        self.last_weights, self.stop_info = saved["last_weights"], dict(saved["stop_info"])

    def _combine(self, shared: list[torch.nn.Parameter], head: list[torch.nn.Parameter]) -> None:
        rows, heads = self._rows, self._heads
        assert rows is not None
        self._rows, self._heads = None, []
        try:
            direction = self.combiner(rows, languages=self.languages)
        except InfeasibleQP as e:  # Algorithm 1's stop: no update, training ends
            reason = str(e) or f"{self.combiner.name}: the feasible set is empty"
            self.stop_info = {"stop_reason": reason, "stop_step": self.state.global_step + 1}
            self.control.should_training_stop = True
            return
        if self.combiner.weights is not None:
            self.last_weights = [float(w) for w in self.combiner.weights]
        assign_flat_grad(shared, direction)
        for i, p in enumerate(head):
            total = heads[0][i].clone()
            for t in range(1, len(heads)):
                total.add_(heads[t][i])
            p.grad = total / len(heads)


class _ObserveUpdates(TrainerCallback):
    """LF-MLF's ``accumulate="update"``: the shared parameters' update of each optimizer step
    and its learning rate, given to the combiner (the loop's plugin hooks of the step)."""

    def __init__(self, trainer: MultilingualTrainer) -> None:
        self.trainer = trainer
        self._before: torch.Tensor | None = None
        self._lr = 0.0

    def _flat(self) -> torch.Tensor:
        shared, _ = split_params(self.trainer.accelerator.unwrap_model(self.trainer.model))
        return torch.cat([p.detach().reshape(-1) for p in shared])

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        optimizer = self.trainer.optimizer
        assert optimizer is not None  # the Trainer built it before the first step
        self._before = self._flat().clone()
        self._lr = float(optimizer.param_groups[0]["lr"])

    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        combiner = self.trainer.combiner
        if self._before is not None and self._lr > 0 and isinstance(combiner, ObservesUpdates):
            combiner.observe_update(self._flat() - self._before, self._lr)
        self._before = None
