from types import SimpleNamespace

import pytest
import torch
from pydantic import ValidationError

from polymnesia.methods.early_stopping import EarlyStopping, EarlyStoppingConfig
from polymnesia.training.plugins import LoopState


def test_settings_that_can_never_stop_are_refused() -> None:
    with pytest.raises(ValidationError, match="can never trigger"):
        EarlyStoppingConfig(max_epochs=5, patience=5)
    with pytest.raises(ValidationError):
        EarlyStoppingConfig(max_epochs=5, patience=0)


def _state(model: torch.nn.Module, step: int) -> LoopState:
    acc = SimpleNamespace(unwrap_model=lambda m: m)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return LoopState(model=model, optimizer=opt, accelerator=acc, total_steps=100, step=step)


def test_stops_after_patience_bad_epochs_and_restores_best() -> None:
    model = torch.nn.Linear(1, 1, bias=False)
    scores = iter([0.3, 0.5, 0.4, 0.45, 0.9])
    plugin = EarlyStopping(
        EarlyStoppingConfig(max_epochs=10, patience=2), 2, lambda m: next(scores)
    )
    stopped_at = None
    for step in range(1, 11):
        with torch.no_grad():
            model.weight.fill_(float(step))  # weights after this step
        state = _state(model, step)
        plugin.after_optimizer_step(state)
        if state.stop_reason is not None:
            stopped_at = step
            break
    # epochs end at steps 2, 4, 6, 8: scores 0.3, 0.5 (best, weight 4), 0.4, 0.45 -> stop at step 8
    assert stopped_at == 8
    assert state.stop_reason == (
        "early stopping: no validation improvement in 2 epochs (best 0.5 at epoch 2)"
    )
    assert plugin.summary()["best_epoch"] == 2 and plugin.best == 0.5
    plugin.restore_best(model)
    assert float(model.weight.detach()) == 4.0
