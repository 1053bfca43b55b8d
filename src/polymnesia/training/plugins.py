"""Extension points of the training loop.

A method (embedding resets, frozen rows, layer freezing, replay, ...) plugs in
as a :class:`TrainingPlugin` rather than as a copy of the loop. The loop calls,
in order: ``param_groups`` (before the optimizer is built), ``setup`` (after
``accelerator.prepare``), then per optimizer step ``before_optimizer_step``
(gradients are final: mask or edit them) and ``after_optimizer_step`` (weights
are updated: reset or restore them). ``state_dict``/``load_state_dict`` put the
plugin's state in every checkpoint so a resumed run continues exactly.

How gradients are computed is a separate extension point, the *step function*
(:data:`StepFn`): the default runs forward/backward on each micro-batch; the
per-language gradient combiners supply their own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from polymnesia.errors import PolymnesiaError
from polymnesia.registry import Registry


@dataclass
class LoopState:
    """What plugins and step functions can see and change during training."""

    model: torch.nn.Module  # the prepared (possibly wrapped) model
    optimizer: torch.optim.Optimizer
    accelerator: Any
    total_steps: int
    step: int = 0  # optimizer steps completed
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def unwrapped(self) -> torch.nn.Module:
        return self.accelerator.unwrap_model(self.model)  # type: ignore[no-any-return]


class TrainingPlugin:
    """Base class with no-op hooks; override what the method needs."""

    name: str = "plugin"

    def param_groups(
        self, model: torch.nn.Module, groups: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Edit the optimizer's parameter groups (each may carry an ``lr_lambda``)."""
        return groups

    def setup(self, state: LoopState) -> None:
        """Called once after the model and optimizer are prepared (and after a resume)."""

    def before_optimizer_step(self, state: LoopState) -> None:
        """Gradients are complete (accumulated, reduced, clipped)."""

    def after_optimizer_step(self, state: LoopState) -> None:
        """Weights were updated; ``state.step`` already counts this step."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


#: computes gradients for one optimizer step from its micro-batches; returns the mean loss
StepFn = Callable[[LoopState, list[dict[str, torch.Tensor]]], torch.Tensor]


#: methods that plug into the loop, chosen by name in a stage's ``plugins`` list
PLUGINS: Registry[type[TrainingPlugin]] = Registry("training plugin")


def build_plugins(specs: list[dict[str, Any]]) -> list[TrainingPlugin]:
    """``[{"name": "active_forgetting", "reset_every": 100}, ...]`` -> plugin objects."""
    out = []
    for spec in specs:
        options = dict(spec)
        name = options.pop("name", None)
        if not name:
            raise PolymnesiaError(
                f"training plugin entry {spec} has no 'name'; accepted: {', '.join(PLUGINS.names())}"
            )
        out.append(PLUGINS.get(name)(**options))
    return out
