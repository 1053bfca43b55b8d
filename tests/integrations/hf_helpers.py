"""The Hugging Face Trainer and polymnesia's loop set up to take the same steps: the same
tiny Mistral, the same batches in the same order, AdamW with the same betas, epsilon, weight
decay, learning rate, clipping and cosine schedule (no warmup: the two warmups differ by one
step), and the model's own loss (``chunked_loss: false``). Plain training then ends on the
same weights bit for bit (:func:`test_hf_callbacks.test_plain_trainer_equals_the_loop`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "methods"))
from methods_helpers import random_data, tiny_model, train_cfg  # noqa: E402

from polymnesia.training.data import IndexStream, PackedLMData  # noqa: E402
from polymnesia.training.loop import train  # noqa: E402

STEPS, BATCH, LR, DECAY = 6, 4, 1e-2, 0.1
#: the FSDP2 equality tests' floor (tests/training/test_fsdp.py: TOL_FLOOR): 16 float32 ulps
#: of a weight of magnitude up to 1 at each step
TOL = 16 * STEPS * 2.0**-23

__all__ = ["random_data", "tiny_model", "train_cfg"]


def loop_batches(data: PackedLMData, steps: int = STEPS, seed: int = 0) -> list[dict[str, Any]]:
    """The examples polymnesia's loop trains on, in its order (its seeded index stream)."""
    idx = IndexStream(len(data), seed).next(steps * BATCH)
    return [{"input_ids": data.blocks[i], "labels": data.blocks[i].clone()} for i in idx]


def trainer_args(out: Path, steps: int = STEPS, **kw: Any) -> TrainingArguments:
    base: dict[str, Any] = dict(
        max_steps=steps,
        per_device_train_batch_size=BATCH,
        learning_rate=LR,
        weight_decay=DECAY,
        adam_beta1=0.9,
        adam_beta2=0.95,
        adam_epsilon=1e-8,
        max_grad_norm=1.0,
        lr_scheduler_type="cosine",
        warmup_steps=0,
        train_sampling_strategy="sequential",
        optim="adamw_torch",
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        use_cpu=True,
        seed=0,
    )
    base.update(kw)
    return TrainingArguments(str(out), **base)


def run_trainer(
    model: torch.nn.Module,
    data: PackedLMData,
    out: Path,
    callbacks: list[Any],
    steps: int = STEPS,
    **kw: Any,
) -> Trainer:
    trainer = Trainer(
        model=model,
        args=trainer_args(out, steps, **kw),
        train_dataset=loop_batches(data, steps),
        callbacks=callbacks,
    )
    trainer.train()
    return trainer


def run_loop(
    model: torch.nn.Module,
    data: PackedLMData,
    out: Path,
    plugins: list[Any],
    steps: int = STEPS,
    **kw: Any,
) -> torch.nn.Module:
    cfg = train_cfg(steps, chunked_loss=False, weight_decay=DECAY, lr=LR, **kw)
    trained, _ = train(model, data, cfg, out, seed=0, plugins=plugins)
    return trained


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def largest_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert set(a) == set(b)
    return max(float((a[k] - b[k]).abs().max()) for k in a)


class StopAt(TrainerCallback):
    """Ends training after step ``at`` (after its checkpoint), as an interruption would."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        if state.global_step == self.at:
            control.should_training_stop = True
