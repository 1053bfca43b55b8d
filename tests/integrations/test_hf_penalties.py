"""L2-SP and EWC as Trainer callbacks: the penalty's exact gradient added before the
Trainer clips, once per optimizer step, ends where polymnesia's loop with the ``l2sp`` /
``ewc`` plugin ends on the same batches (hf_helpers)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hf_helpers import (
    TOL,
    largest_difference,
    random_data,
    run_loop,
    run_trainer,
    tiny_model,
    weights,
)

from polymnesia.errors import ConfigError
from polymnesia.integrations import EWCCallback, L2SPCallback
from polymnesia.methods.regularization import EWC, L2SP
from polymnesia.penalties.fisher import FISHER_FILE, diagonal_fisher, save_fisher
from polymnesia.training.data import PackedLMData


def _fisher() -> dict[str, torch.Tensor]:
    batches = [random_data(n=4, seed=7).collate([i]) for i in range(4)]
    return diagonal_fisher(tiny_model(), batches)


@pytest.mark.parametrize(
    "opts", [{"alpha": 0.5, "beta": 0.1}, {"alpha": 0.5, "anchor_head": True}], ids=["beta", "head"]
)
def test_l2sp_trainer_equals_the_loop(tmp_path: Path, data: PackedLMData, opts: dict) -> None:
    """With a clip that binds (the penalty's gradient must be in the norm) and a strength
    that moves the weights visibly."""
    loop = weights(run_loop(tiny_model(), data, tmp_path / "l", [L2SP(**opts)], grad_clip=0.05))
    plain = weights(run_loop(tiny_model(), data, tmp_path / "p", [], grad_clip=0.05))
    cb = L2SPCallback(**opts)
    tr = run_trainer(tiny_model(), data, tmp_path / "hf", [cb], max_grad_norm=0.05)
    assert largest_difference(loop, plain) > 100 * TOL  # the penalty matters here
    assert largest_difference(loop, weights(tr.model)) <= TOL
    assert float(cb.penalty()) > 0


def test_ewc_trainer_equals_the_loop_with_accumulation(tmp_path: Path, data: PackedLMData) -> None:
    """Two micro-batches per step: the penalty's gradient is added once, on the last."""
    fisher = _fisher()
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


def test_bad_penalties_are_refused_in_one_line(tmp_path: Path, data: PackedLMData) -> None:
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
            run_trainer(tiny_model(), data, tmp_path, [EWCCallback(bad)])
        assert "\n" not in str(e.value)


def test_a_resumed_trainer_pulls_towards_the_first_start(make_trainer, resume) -> None:
    """The anchor is taken when the Trainer is made, before it loads the checkpoint: a run
    interrupted after step 3 and resumed ends where the uninterrupted run ends."""
    whole, resumed = resume(make_trainer, lambda: [L2SPCallback(alpha=0.5)])
    assert largest_difference(weights(whole.model), weights(resumed.model)) <= TOL
