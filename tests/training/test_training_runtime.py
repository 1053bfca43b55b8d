"""Training options of the runtime issue: per-stage mixed precision in one process, fused
AdamW, torch.compile and gradient checkpointing options, flattened tracker config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from test_training_loop import cfg, data, losses, nano_model

from polymnesia.training.loop import standard_step, train
from polymnesia.training.plugins import LoopState


def _recording_step(seen: list[Any]):  # type: ignore[no-untyped-def]
    def step(state: LoopState, batches: list[dict[str, torch.Tensor]]) -> torch.Tensor:
        with state.accelerator.autocast():
            seen.append((state.accelerator.mixed_precision, torch.is_autocast_enabled("cpu")))
        return standard_step(state, batches)

    return step


def test_stages_train_in_their_own_precision_in_one_process(tmp_path: Path) -> None:
    """bf16, then float32, then bf16 again: Accelerate's one-precision-per-process rule no
    longer stops the second stage, and each stage really runs in its precision."""
    seen: dict[str, list[Any]] = {}
    for name, precision in (("a", "bf16"), ("b", "no"), ("c", "bf16")):
        seen[name] = []
        _, result = train(
            nano_model(),
            data(),
            cfg(steps=2, mixed_precision=precision),
            tmp_path / name,
            step_fn=_recording_step(seen[name]),
        )
        assert result.steps == 2
    assert set(seen["a"]) == set(seen["c"]) == {("bf16", True)}
    assert set(seen["b"]) == {("no", False)}
    # float32 after bf16 is the float32 run of a fresh process
    _, alone = train(nano_model(), data(), cfg(steps=2), tmp_path / "alone")
    assert losses(tmp_path / "b") == losses(tmp_path / "alone")
