"""The one training loop: Accelerate, AdamW, warmup + cosine, clipping,
accumulation, mixed precision, exact resume, metrics.jsonl and trackers.

Every training stage calls :func:`train`; methods plug in through
:class:`~polymnesia.training.plugins.TrainingPlugin` and a step function.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import shutil
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from polymnesia.errors import TrainingDiverged
from polymnesia.io import append_jsonl, read_jsonl, write_jsonl_atomic
from polymnesia.runtime import use_cpu
from polymnesia.training.config import TrainConfig
from polymnesia.training.data import IndexStream, TrainData
from polymnesia.training.plugins import LoopState, StepFn, TrainingPlugin
from polymnesia.training.schedule import warmup_cosine

CKPT_RE = re.compile(r"^step_(\d+)$")


@dataclass
class TrainResult:
    steps: int
    final_loss: float
    tokens: int
    seconds: float
    resumed_from: int | None


class _Counters:
    """Loop position and token count, saved with every checkpoint."""

    def __init__(self) -> None:
        self.step, self.tokens, self.loss = 0, 0, float("nan")

    def state_dict(self) -> dict[str, float]:
        return {"step": self.step, "tokens": self.tokens, "loss": self.loss}

    def load_state_dict(self, s: dict[str, float]) -> None:
        self.step, self.tokens, self.loss = int(s["step"]), int(s["tokens"]), float(s["loss"])


class _PluginState:
    def __init__(self, plugins: Sequence[Any]) -> None:
        self.plugins = plugins

    def state_dict(self) -> dict[str, Any]:
        return {str(i): p.state_dict() for i, p in enumerate(self.plugins)}

    def load_state_dict(self, s: dict[str, Any]) -> None:
        for i, p in enumerate(self.plugins):
            p.load_state_dict(s.get(str(i), {}))


def default_param_groups(model: torch.nn.Module, cfg: TrainConfig) -> list[dict[str, Any]]:
    """Weight decay on matrices only (not on norms and biases); frozen parameters left out."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [
        {"name": "decay", "params": decay, "weight_decay": cfg.weight_decay},
        {"name": "no_decay", "params": no_decay, "weight_decay": 0.0},
    ]
    return [g for g in groups if g["params"]]


def standard_step(state: LoopState, micro_batches: list[dict[str, torch.Tensor]]) -> torch.Tensor:
    """Forward/backward each micro-batch (gradients synchronised on the last one)."""
    acc = state.accelerator
    total = torch.zeros((), device=acc.device)
    n = len(micro_batches)
    for i, batch in enumerate(micro_batches):
        sync = contextlib.nullcontext() if i == n - 1 else acc.no_sync(state.model)
        with sync, acc.autocast():
            loss = state.model(**batch).loss / n
        acc.backward(loss)
        total += loss.detach()
    return total


def _checkpoints(ckpt_dir: Path) -> list[tuple[int, Path]]:
    if not ckpt_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in ckpt_dir.iterdir() if (m := CKPT_RE.match(p.name))]
    return sorted(found)


def _save_checkpoint(acc: Any, ckpt_dir: Path, step: int, keep: int) -> None:
    tmp = ckpt_dir / f".tmp_step_{step:07d}"
    if acc.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    acc.wait_for_everyone()
    acc.save_state(str(tmp), safe_serialization=True)
    acc.wait_for_everyone()
    if acc.is_main_process:
        os.replace(tmp, ckpt_dir / f"step_{step:07d}")
        for _, old in _checkpoints(ckpt_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    acc.wait_for_everyone()


def _micro_batches(
    data: TrainData, indices: list[int], cfg: TrainConfig, acc: Any
) -> list[dict[str, torch.Tensor]]:
    """This process's share of each micro-batch of one global batch."""
    per_micro = len(indices) // cfg.grad_accum
    per_proc = per_micro // acc.num_processes
    out = []
    for m in range(cfg.grad_accum):
        start = m * per_micro + acc.process_index * per_proc
        batch = data.collate(indices[start : start + per_proc])
        out.append({k: v.to(acc.device) for k, v in batch.items()})
    return out


def _count_tokens(batches: list[dict[str, torch.Tensor]]) -> int:
    return sum(
        int(b["attention_mask"].sum()) if "attention_mask" in b else b["input_ids"].numel()
        for b in batches
    )


def train(
    model: torch.nn.Module,
    data: TrainData,
    cfg: TrainConfig,
    out_dir: Path,
    *,
    seed: int = 0,
    plugins: Sequence[TrainingPlugin] = (),
    step_fn: StepFn = standard_step,
    eval_fn: Callable[[torch.nn.Module], dict[str, float]] | None = None,
    tracker_name: str = "polymnesia",
) -> tuple[torch.nn.Module, TrainResult]:
    """Train ``model`` for ``cfg.steps`` optimizer steps, resuming from ``out_dir/checkpoints``.

    Returns the unwrapped model and a summary. Raises :class:`TrainingDiverged`
    (one line naming the step and the last good checkpoint) on a NaN/inf loss.
    """
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    acc = Accelerator(
        cpu=use_cpu(),
        mixed_precision=cfg.mixed_precision,
        log_with=list(cfg.trackers) or None,
        project_dir=str(out_dir),
    )
    per_proc = cfg.batch_size // cfg.grad_accum
    if per_proc % acc.num_processes:
        raise TrainingDiverged(
            f"train.batch_size {cfg.batch_size} / grad_accum {cfg.grad_accum} must be divisible by {acc.num_processes} processes"
        )
    set_seed(seed)
    groups: list[dict[str, Any]] = default_param_groups(model, cfg)
    for p in plugins:
        groups = p.param_groups(model, groups)
    base = functools.partial(
        warmup_cosine, warmup=cfg.warmup_steps, total=cfg.steps, min_ratio=cfg.min_lr_ratio
    )
    lambdas = [g.pop("lr_lambda", base) for g in groups]
    for g in groups:
        g.pop("name", None)
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambdas)
    model, optimizer = acc.prepare(model, optimizer)
    stream, counters = IndexStream(len(data), seed), _Counters()
    for obj in (scheduler, stream, counters, _PluginState(plugins)):
        acc.register_for_checkpointing(obj)

    ckpt_dir = out_dir / "checkpoints"
    metrics_path = out_dir / "metrics.jsonl"
    resumed_from = None
    if existing := _checkpoints(ckpt_dir):
        step0, path = existing[-1]
        acc.load_state(str(path))
        resumed_from = counters.step
        if acc.is_main_process:  # drop metrics logged after the checkpoint by the interrupted run
            kept = [r for r in read_jsonl(metrics_path) if int(r.get("step", 0)) <= counters.step]
            write_jsonl_atomic(metrics_path, kept)
    elif acc.is_main_process and metrics_path.exists():
        metrics_path.unlink()
    state = LoopState(
        model=model, optimizer=optimizer, accelerator=acc, total_steps=cfg.steps, step=counters.step
    )
    for p in plugins:
        p.setup(state)
    if cfg.trackers:
        acc.init_trackers(tracker_name, config=cfg.model_dump(mode="json"))

    kill_at = int(
        os.environ.get("POLYMNESIA_TEST_KILL_AT_STEP", "0")
    )  # fault injection for resume tests
    bar = None
    if cfg.progress_bar and acc.is_main_process:
        from tqdm.auto import tqdm

        bar = tqdm(
            total=cfg.steps, initial=counters.step, desc=tracker_name, mininterval=1.0, leave=False
        )
    model.train()
    t0, tok0 = time.time(), counters.tokens
    while counters.step < cfg.steps:
        batches = _micro_batches(data, stream.next(cfg.batch_size), cfg, acc)
        loss = step_fn(state, batches)
        if state.extras.get("stop_reason"):  # the step function ended training (LF-MLF's stop)
            break
        loss_val = float(acc.reduce(loss.detach().float(), reduction="mean"))
        if not math.isfinite(loss_val):
            good = _checkpoints(ckpt_dir)
            where = f"{good[-1][1]} (step {good[-1][0]})" if good else "none yet"
            raise TrainingDiverged(
                f"loss became {loss_val} at step {counters.step + 1}; last good checkpoint: {where}; lower train.lr or check the data"
            )
        for p in plugins:
            p.before_optimizer_step(state)
        if cfg.grad_clip:
            acc.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        counters.step += 1
        counters.loss = loss_val
        counters.tokens += _count_tokens(batches) * acc.num_processes
        state.step = counters.step
        for p in plugins:
            p.after_optimizer_step(state)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(
                loss=f"{loss_val:.3f}",
                tok_s=f"{(counters.tokens - tok0) / max(1e-9, time.time() - t0):.0f}",
            )
        do_eval = eval_fn is not None and cfg.eval_every and counters.step % cfg.eval_every == 0
        if do_eval or counters.step % cfg.log_every == 0 or counters.step == cfg.steps:
            rec = {
                "step": counters.step,
                "loss": round(loss_val, 6),
                "lr": scheduler.get_last_lr()[0],
                "tokens": counters.tokens,
                "tokens_per_s": round((counters.tokens - tok0) / max(1e-9, time.time() - t0), 1),
            }
            if do_eval and eval_fn is not None:
                model.eval()
                rec.update(eval_fn(acc.unwrap_model(model)))
                model.train()
            if acc.is_main_process:
                append_jsonl(metrics_path, rec)
            if cfg.trackers:
                acc.log(rec, step=counters.step)
        if kill_at and counters.step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        at_end = cfg.checkpoint_at_end and counters.step == cfg.steps
        if counters.step % cfg.checkpoint_every == 0 or at_end:
            _save_checkpoint(acc, ckpt_dir, counters.step, cfg.keep_checkpoints)
        if state.extras.get("stop_training"):  # a plugin (e.g. early stopping) ends training
            break
    if bar is not None:
        bar.close()
    if cfg.trackers:
        acc.end_training()
    result = TrainResult(
        counters.step, counters.loss, counters.tokens, time.time() - t0, resumed_from
    )
    return acc.unwrap_model(model), result
