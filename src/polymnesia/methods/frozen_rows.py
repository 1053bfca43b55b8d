"""Training plugin ``frozen_rows``: train only new embedding rows (and the LM head).

Aggarwal et al. 2024, section 3 (vocabulary expansion): after merging the adapting
vocabulary, "only the new token embeddings" and the LM head are trained, the
Transformer stack and the base embedding rows stay frozen.

How "frozen" is made exact:

* ``param_groups``: with ``freeze_body`` every parameter other than the input
  embeddings and the LM head gets ``requires_grad=False`` and leaves the
  optimizer (so it cannot move at all);
* ``before_optimizer_step``: the gradient rows ``< first_trainable_row`` of
  the embedding matrix (and of a tied head, which is the same matrix) are
  zeroed, so they add nothing to the Adam moments;
* ``after_optimizer_step``: those rows are copied back from a snapshot taken
  at setup. Masking gradients alone is not enough: AdamW's decoupled weight
  decay still shrinks rows with zero gradient (reference-semantics.md, "pitfalls
  seen in the field"). Restoring makes them bit-identical for any weight decay.

Embeddings and head come from the model's own API
(:mod:`polymnesia.models.anatomy`), so every transformers architecture works;
an encoder without an LM head trains its new embedding rows only.

Under FSDP2 (``train.engine: fsdp2``) each process holds a range of rows of each
matrix: it masks, snapshots and restores the frozen rows it holds
(:func:`polymnesia.training.fsdp.row_slice`), so the result is the same.

An untied LM head is trained whole (all rows), as in the paper ("the new
head"); ``freeze_head_rows=True`` freezes its old rows too.
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import Field

from polymnesia.errors import ConfigError
from polymnesia.models.anatomy import input_embeddings, output_embeddings
from polymnesia.training.fsdp import row_slice
from polymnesia.training.plugins import PLUGINS, LoopState, PluginOptions, TrainingPlugin


def mask_rows_(grad: torch.Tensor | None, n_frozen: int) -> None:
    """Zero the gradient of rows ``[0, n_frozen)`` in place (of this process's rows of a
    sharded gradient)."""
    if grad is not None:
        row_slice(grad, 0, n_frozen).zero_()


class FrozenRowsOptions(PluginOptions):
    """Options of the ``frozen_rows`` plugin (Aggarwal et al. 2024, vocabulary expansion)."""

    first_trainable_row: int = Field(ge=0, description="embedding rows below this stay frozen")
    freeze_body: bool = Field(True, description="freeze every parameter but embeddings and head")
    freeze_head_rows: bool = Field(False, description="also freeze the head's old rows")


@PLUGINS.register(
    "frozen_rows",
    "train only embedding rows >= first_trainable_row and the LM head; old rows stay bit-identical",
)
class FrozenRows(TrainingPlugin):
    name = "frozen_rows"
    Options = FrozenRowsOptions
    sharded_engines = ("fsdp2",)

    def __init__(
        self, first_trainable_row: int, freeze_body: bool = True, freeze_head_rows: bool = False
    ) -> None:
        if isinstance(first_trainable_row, bool) or not isinstance(first_trainable_row, int):
            raise ConfigError(
                f"frozen_rows first_trainable_row must be an integer, got {first_trainable_row!r}"
            )
        if first_trainable_row < 0:
            raise ConfigError(
                f"frozen_rows first_trainable_row must be >= 0, got {first_trainable_row}"
            )
        self.n_frozen = first_trainable_row
        self.freeze_body, self.freeze_head_rows = freeze_body, freeze_head_rows
        self._snapshots: list[tuple[torch.Tensor, torch.Tensor]] = []

    def _matrices(self, model: torch.nn.Module) -> list[torch.nn.Parameter]:
        """Parameters whose first rows are frozen: the input embeddings (+ head rows if asked)."""
        emb = input_embeddings(model, "frozen_rows")
        if self.n_frozen > emb.weight.shape[0]:
            raise ConfigError(
                f"frozen_rows first_trainable_row {self.n_frozen} exceeds the vocabulary "
                f"({emb.weight.shape[0]} rows)"
            )
        out = [emb.weight]
        head = output_embeddings(model)
        if self.freeze_head_rows and head is not None and head.weight is not emb.weight:
            out.append(head.weight)
        return out

    def param_groups(
        self, model: torch.nn.Module, groups: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        if not self.freeze_body:
            return groups
        keep = {id(input_embeddings(model, "frozen_rows").weight)}
        head = output_embeddings(model)
        if head is not None:
            keep.add(id(head.weight))
        for p in model.parameters():
            if id(p) not in keep:
                p.requires_grad_(False)
        for g in groups:
            g["params"] = [p for p in g["params"] if id(p) in keep]
        return [g for g in groups if g["params"]]

    def setup(self, state: LoopState) -> None:
        self._snapshots = [
            (w, row_slice(w.detach(), 0, self.n_frozen).clone())
            for w in self._matrices(state.unwrapped)
        ]

    def before_optimizer_step(self, state: LoopState) -> None:
        for w, _ in self._snapshots:
            mask_rows_(w.grad, self.n_frozen)

    @torch.no_grad()
    def after_optimizer_step(self, state: LoopState) -> None:
        for w, frozen in self._snapshots:
            row_slice(w, 0, self.n_frozen).copy_(frozen)
