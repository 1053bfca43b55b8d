"""Early stopping on the validation score (Khelli et al. 2025, section 3.5), as a training plugin.

The paper stops when the validation F1 has not improved for ``patience``
epochs (15 with LoRA, 5 without), within at most ``max_epochs`` (100 / 50).
The plugin evaluates at the end of every epoch, remembers the best weights,
and asks the loop to stop (``state.request_stop(reason)``); the stage then
restores the best weights (as ``load_best_model_at_end`` does in HF Trainer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from polymnesia.training.config import EarlyStoppingConfig
from polymnesia.training.fsdp import full_tensor
from polymnesia.training.plugins import LoopState, TrainingPlugin


class EarlyStopping(TrainingPlugin):
    """Evaluate ``score_fn(model)`` every ``steps_per_epoch`` steps; stop after ``patience`` bad
    epochs.
    """

    name = "early_stopping"
    sharded_engines = ("fsdp2",)

    def __init__(
        self,
        cfg: EarlyStoppingConfig,
        steps_per_epoch: int,
        score_fn: Callable[[torch.nn.Module], float],
    ) -> None:
        self.cfg, self.steps_per_epoch, self.score_fn = cfg, steps_per_epoch, score_fn
        self.best, self.best_epoch, self.epochs, self.bad = -float("inf"), 0, 0, 0
        self.history: list[float] = []
        self.best_state: dict[str, torch.Tensor] | None = None

    def after_optimizer_step(self, state: LoopState) -> None:
        if state.step % self.steps_per_epoch:
            return
        model = state.unwrapped
        model.eval()
        with torch.no_grad():
            score = float(self.score_fn(model))
        model.train()
        self.epochs += 1
        self.history.append(score)
        if score > self.best + self.cfg.min_delta:
            self.best, self.best_epoch, self.bad = score, self.epochs, 0
            frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
            # whole tensors (gathered from the shards under FSDP2): the stage restores them
            # into the trained, gathered model
            self.best_state = {
                k: full_tensor(v).detach().clone()
                for k, v in model.state_dict().items()
                if k not in frozen
            }
        else:
            self.bad += 1
        if self.bad >= self.cfg.patience:
            state.request_stop(
                f"early stopping: no validation improvement in {self.bad} epochs (best "
                f"{self.best:.4g} at epoch {self.best_epoch})"
            )

    def restore_best(self, model: torch.nn.Module) -> None:
        """Load the weights of the best epoch back into ``model`` (no-op before any epoch)."""
        if self.best_state is not None:
            model.load_state_dict(self.best_state, strict=False)

    def summary(self) -> dict[str, Any]:
        return {
            "epochs": self.epochs,
            "best_epoch": self.best_epoch,
            "best_validation": self.best,
            "validation_history": [round(v, 5) for v in self.history],
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "best": self.best,
            "best_epoch": self.best_epoch,
            "epochs": self.epochs,
            "bad": self.bad,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self.best, self.best_epoch = float(state["best"]), int(state["best_epoch"])
            self.epochs, self.bad = int(state["epochs"]), int(state["bad"])
