"""Fixtures the Trainer integration tests share: the tiny model's training data, and a run
interrupted after its step-3 checkpoint and resumed with
``trainer.train(resume_from_checkpoint=...)`` next to the uninterrupted run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hf_helpers import StopAt, loop_batches, random_data, tiny_model, trainer_args
from transformers import Trainer

from polymnesia.training.data import PackedLMData

#: the interrupted run stops after this step, just after its checkpoint
CUT = 3

#: make(out, callbacks, **training_args) -> a Trainer on the tiny model, not yet trained
MakeTrainer = Callable[..., Trainer]


@pytest.fixture
def data() -> PackedLMData:
    """16 random blocks for the tiny model (hf_helpers.random_data)."""
    return random_data(n=16)


@pytest.fixture
def make_trainer(data: PackedLMData) -> MakeTrainer:
    """A plain Trainer on a fresh tiny model and the loop's batches."""

    def make(out: Path, callbacks: list[Any], **kw: Any) -> Trainer:
        return Trainer(
            model=tiny_model(),
            args=trainer_args(out, **kw),
            train_dataset=loop_batches(data),
            callbacks=callbacks,
        )

    return make


@pytest.fixture
def resume(tmp_path: Path) -> Callable[..., tuple[Trainer, Trainer]]:
    """resume(make, callbacks) -> (uninterrupted, resumed): ``make`` builds a Trainer,
    ``callbacks()`` fresh callbacks for each of the three runs (whole, cut, resumed)."""

    def run(make: MakeTrainer, callbacks: Callable[[], list[Any]]) -> tuple[Trainer, Trainer]:
        whole = make(tmp_path / "whole", callbacks())
        whole.train()
        save = {"save_strategy": "steps", "save_steps": CUT}
        cut = make(tmp_path / "cut", [*callbacks(), StopAt(CUT)], **save)
        cut.train()
        assert cut.state.global_step == CUT
        resumed = make(tmp_path / "cut", callbacks(), **save)
        resumed.train(resume_from_checkpoint=str(tmp_path / "cut" / f"checkpoint-{CUT}"))
        return whole, resumed

    return run
