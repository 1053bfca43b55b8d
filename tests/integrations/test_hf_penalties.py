"""L2-SP and EWC as Trainer callbacks: the penalty's exact gradient added before the
Trainer clips, once per optimizer step, ends where polymnesia's loop with the ``l2sp`` /
``ewc`` plugin ends on the same batches (hf_helpers)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hf_helpers import (
    TOL,
    StopAt,
    largest_difference,
    loop_batches,
    random_data,
    run_loop,
    run_trainer,
    tiny_model,
    trainer_args,
    weights,
)
from transformers import Trainer

from polymnesia.errors import ConfigError
from polymnesia.integrations import EWCCallback, L2SPCallback
from polymnesia.methods.regularization import EWC, L2SP
from polymnesia.penalties.fisher import FISHER_FILE, diagonal_fisher, save_fisher


def _fisher() -> dict[str, torch.Tensor]:
    batches = [random_data(n=4, seed=7).collate([i]) for i in range(4)]
    return diagonal_fisher(tiny_model(), batches)


@pytest.mark.parametrize(
    "opts", [{"alpha": 0.5, "beta": 0.1}, {"alpha": 0.5, "anchor_head": True}], ids=["beta", "head"]
)
def test_l2sp_trainer_equals_the_loop(tmp_path: Path, opts: dict) -> None:
    """With a clip that binds (the penalty's gradient must be in the norm) and a strength
    that moves the weights visibly."""
    data = random_data(n=16)
    loop = weights(run_loop(tiny_model(), data, tmp_path / "l", [L2SP(**opts)], grad_clip=0.05))
    plain = weights(run_loop(tiny_model(), data, tmp_path / "p", [], grad_clip=0.05))
    cb = L2SPCallback(**opts)
    tr = run_trainer(tiny_model(), data, tmp_path / "hf", [cb], max_grad_norm=0.05)
    assert largest_difference(loop, plain) > 100 * TOL  # the penalty matters here
    assert largest_difference(loop, weights(tr.model)) <= TOL
    assert float(cb.penalty()) > 0


def test_ewc_trainer_equals_the_loop_with_accumulation(tmp_path: Path) -> None:
    """Two micro-batches per step: the penalty's gradient is added once, on the last."""
    data, fisher = random_data(n=16), _fisher()
    save_fisher(tmp_path / FISHER_FILE, fisher)
    loop = weights(
        run_loop(tiny_model(), data, tmp_path / "l", [EWC(lam=1e4, fisher=fisher)], grad_accum=2)
    )
    plain = weights(run_loop(tiny_model(), data, tmp_path / "p", [], grad_accum=2))
    assert largest_difference(loop, plain) > 100 * TOL  # the penalty matters here
    cb = EWCCallback(tmp_path, lam=1e4)  # the folder holding fisher.safetensors
    tr = run_trainer(
        tiny_model(),
        data,
        tmp_path / "hf",
        [cb],
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
    )
    assert largest_difference(loop, weights(tr.model)) <= TOL


def test_bad_penalties_are_refused_in_one_line(tmp_path: Path) -> None:
    fisher = _fisher()
    other = {k: torch.zeros(3) for k in fisher}
    for make, message in (
        (lambda: L2SPCallback(alpha=-1), "alpha must be a number >= 0"),
        (lambda: EWCCallback({}), "non-empty mapping"),
        (lambda: EWCCallback(tmp_path / "missing"), "no Fisher estimate"),
    ):
        with pytest.raises(ConfigError, match=message) as e:
            make()
        assert "\n" not in str(e.value)
    for bad, message in ((other, "estimated on another model"), ({"x": torch.ones(1)}, "none a")):
        with pytest.raises(ConfigError, match=message) as e:
            run_trainer(tiny_model(), random_data(n=16), tmp_path, [EWCCallback(bad)])
        assert "\n" not in str(e.value)


def test_a_resumed_trainer_pulls_towards_the_first_start(tmp_path: Path) -> None:
    """The anchor is taken when the Trainer is made, before it loads the checkpoint: a run
    interrupted after step 3 and resumed ends where the uninterrupted run ends."""
    data = random_data(n=16)
    whole = run_trainer(tiny_model(), data, tmp_path / "whole", [L2SPCallback(alpha=0.5)])
    save = {"save_strategy": "steps", "save_steps": 3}
    run_trainer(tiny_model(), data, tmp_path / "cut", [L2SPCallback(alpha=0.5), StopAt(3)], **save)
    resumed = Trainer(
        model=tiny_model(),
        args=trainer_args(tmp_path / "cut", **save),
        train_dataset=loop_batches(data),
        callbacks=[L2SPCallback(alpha=0.5)],
    )
    resumed.train(resume_from_checkpoint=str(tmp_path / "cut" / "checkpoint-3"))
    assert largest_difference(weights(whole.model), weights(resumed.model)) <= TOL
