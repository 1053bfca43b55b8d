"""The training loop refuses, before the first step, a stage the memory planner says will
not fit, in one line naming what would make it fit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from polymnesia.errors import ConfigError
from polymnesia.training import memory, memory_fit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "methods"))
from methods_helpers import random_data, tiny_model, train_cfg  # noqa: E402


def test_a_stage_that_does_not_fit_is_refused_before_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from polymnesia.training.loop import train

    monkeypatch.setattr(memory_fit, "device_bytes", lambda *a, **k: 2**20)  # a 1 MiB device
    with pytest.raises(ConfigError) as e:
        train(tiny_model(), random_data(), train_cfg(3), tmp_path, seed=0, tracker_name="pre")
    line = str(e.value)
    assert "\n" not in line and "stage 'pre' needs about" in line and "would fit with" in line
    assert not (tmp_path / "metrics.jsonl").exists() and not (tmp_path / "checkpoints").exists()


def test_a_stage_that_fits_trains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from polymnesia.training.loop import train

    seen: list[int] = []

    def fits(plan: memory.MemoryPlan, device_bytes: int | None) -> None:
        seen.append(plan.total)

    monkeypatch.setattr(memory_fit, "check_fits", fits)
    _, result = train(tiny_model(), random_data(), train_cfg(2), tmp_path, seed=0)
    assert result.steps == 2 and len(seen) == 1 and 0 < seen[0] < 2**30
