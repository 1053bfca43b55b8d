"""The one training loop: Accelerate, AdamW, warmup + cosine, clipping,
accumulation, mixed precision, exact resume, metrics.jsonl and trackers.

Every training stage calls :func:`train`; methods plug in through
:class:`~polymnesia.training.plugins.TrainingPlugin` and a step function. What differs
between one process, DDP and FSDP2 is the engine object's
(:class:`~polymnesia.training.engines.Engine`), chosen once; the loop has no branch on it.
A plugin or a step function ends training early with
:meth:`~polymnesia.training.plugins.LoopState.request_stop`.
Checkpoints are polymnesia's own, pickle-free format
(:mod:`polymnesia.training.checkpoint`), written only while the loss and the
parameters are finite; the loss curve is checked for divergence at the end
(:mod:`polymnesia.training.health`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import torch

from polymnesia.errors import PolymnesiaError, TrainingDiverged
from polymnesia.io import append_jsonl, atomic_write_json, read_jsonl, write_jsonl_atomic
from polymnesia.runtime import use_cpu, use_precision
from polymnesia.training import checkpoint, health, memory_fit
from polymnesia.training.checkpoint import Checkpointer
from polymnesia.training.config import TrainConfig, check_precision
from polymnesia.training.data import IndexStream, TrainData
from polymnesia.training.engines import Engine, check_engine, select
from polymnesia.training.loss import causal_lm_loss
from polymnesia.training.plugins import LoopState, StepFn, TrainingPlugin
from polymnesia.training.progress import open_progress
from polymnesia.training.schedule import warmup_cosine
from polymnesia.training.trackers import check_trackers, flat_config

P = ParamSpec("P")
R = TypeVar("R")


@contextlib.contextmanager
def no_kv_cache(model: torch.nn.Module) -> Iterator[None]:
    """``config.use_cache`` off while ``model`` trains, restored afterwards (so a saved
    folder keeps its setting). Training never reads the key/value cache, but a decoder
    asked for one builds it in every forward pass, and its copies of the keys and values
    enter the backward pass as well (the Trainer turns it off the same way)."""
    conf: Any = getattr(model, "config", None)
    if conf is None or getattr(conf, "use_cache", None) is None:
        yield
        return
    before = conf.use_cache
    conf.use_cache = False
    try:
        yield
    finally:
        conf.use_cache = before


def _without_kv_cache(fn: Callable[P, R]) -> Callable[P, R]:
    """Run ``fn(model, ...)`` under :func:`no_kv_cache` of its first argument."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        model = args[0] if args else kwargs["model"]
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"{fn.__name__} takes the model first, got {type(model).__name__}")
        with no_kv_cache(model):
            return fn(*args, **kwargs)

    return wrapper


@dataclass
class TrainResult:
    steps: int
    final_loss: float
    tokens: int
    seconds: float
    resumed_from: int | None
    flags: list[str] = field(default_factory=list)  # "diverged", "stuck_at_chance"
    engine: str = "single"  # single, ddp, fsdp2 (training.engines)


class _Counters:
    """Loop position, token count and loss history, saved with every checkpoint."""

    def __init__(self) -> None:
        self.step, self.tokens, self.loss = 0, 0, float("nan")
        self.first_loss = float("nan")
        self.recent: list[float] = []

    def record(self, loss: float, step: int) -> None:
        if step == 1:
            self.first_loss = loss
        self.loss = loss
        self.recent = [*self.recent, loss][-health.HISTORY :]

    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "tokens": self.tokens,
            "loss": self.loss,
            "first_loss": self.first_loss,
            "recent": list(self.recent),
        }

    def load_state_dict(self, s: dict[str, Any]) -> None:
        self.step, self.tokens, self.loss = int(s["step"]), int(s["tokens"]), float(s["loss"])
        self.first_loss = float(s.get("first_loss", float("nan")))
        self.recent = [float(x) for x in s.get("recent", [])]


class _Losses:
    """Each step's loss kept on the device and read back at once at log and checkpoint steps
    and at the end, so no step waits for the accelerator (the Trainer, too, reads its loss
    only when it logs). A non-finite loss stops training at that read, naming its step; a
    checkpoint is never written before the losses since the last one were read."""

    def __init__(self) -> None:
        self.pending: list[tuple[int, torch.Tensor]] = []

    def add(self, step: int, loss: torch.Tensor) -> None:
        self.pending.append((step, loss.detach().float().reshape(())))

    def read(self, acc: Any, counters: _Counters, ckpt_dir: Path) -> None:
        if not self.pending:
            return
        steps = [step for step, _ in self.pending]
        stacked = torch.stack([v.to(acc.device) for _, v in self.pending])
        values = acc.reduce(stacked, reduction="mean").cpu().tolist()  # one transfer
        self.pending = []
        for step, value in zip(steps, values, strict=True):
            if not math.isfinite(value):
                raise TrainingDiverged(
                    f"loss became {value} at step {step}; last good checkpoint: "
                    f"{checkpoint.last_good_text(ckpt_dir)}; lower train.lr or check the data"
                )
            counters.record(value, step)


class _PluginState:
    def __init__(self, plugins: Sequence[Any]) -> None:
        self.plugins = plugins

    def state_dict(self) -> dict[str, Any]:
        return {str(i): p.state_dict() for i, p in enumerate(self.plugins)}

    def load_state_dict(self, s: dict[str, Any]) -> None:
        for i, p in enumerate(self.plugins):
            p.load_state_dict(s.get(str(i), {}))

    def sharded_state(self, model: torch.nn.Module) -> dict[tuple[str, ...], list[str]]:
        """Each plugin's :meth:`~TrainingPlugin.sharded_state`, under its index."""
        return {
            (str(i), *path): names
            for i, p in enumerate(self.plugins)
            for path, names in p.sharded_state(model).items()
        }

    def describe(self, path: list[str]) -> str:
        """Who keeps the state at ``path`` (its first key a plugin's index), for a message."""
        i = int(path[0]) if path and path[0].isdigit() else -1
        if 0 <= i < len(self.plugins):
            plugin = self.plugins[i]
            return f"training plugin '{getattr(plugin, 'name', type(plugin).__name__)}'"
        return "the training plugins' state"


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


def micro_batch_loss(state: LoopState, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """One micro-batch's training loss: the model's own plus each ``state.loss_terms``
    plugin's term. With ``state.lm_head`` set it is made in chunks of positions, the terms
    (``logit_term``) from the same chunks of logits; else the terms (``loss_term``) read the
    model's outputs."""
    if state.lm_head is not None and "labels" in batch:
        terms = [p.logit_term(state, batch) for p in state.loss_terms]
        return causal_lm_loss(state.model, batch, state.lm_head, terms=terms)
    if not state.loss_terms:
        return causal_lm_loss(state.model, batch, None)
    out = state.model(**batch)
    loss = out.loss
    for p in state.loss_terms:
        loss = loss + p.loss_term(state, batch, out)
    return loss


def standard_step(state: LoopState, micro_batches: list[dict[str, torch.Tensor]]) -> torch.Tensor:
    """Forward/backward each micro-batch (gradients synchronised on the last one), with
    :func:`micro_batch_loss`."""
    acc = state.accelerator
    total = torch.zeros((), device=acc.device)
    n = len(micro_batches)
    for i, batch in enumerate(micro_batches):
        sync = contextlib.nullcontext() if i == n - 1 else no_sync(state)
        with sync, acc.autocast():
            loss = micro_batch_loss(state, batch) / n
        acc.backward(loss)
        total += loss.detach()
    return total


def no_sync(state: LoopState) -> contextlib.AbstractContextManager[Any]:
    """Accumulate this micro-batch's gradients without synchronising them (DDP or FSDP2):
    the engine :func:`train` set on ``state`` knows how."""
    if state.engine is None:
        raise PolymnesiaError("no_sync: the loop state has no engine (train() sets it)")
    return state.engine.no_sync(state.accelerator, state.model)


def check_memory(
    model: torch.nn.Module, data: TrainData, cfg: TrainConfig, engine: str, acc: Any, label: str
) -> None:
    """Refuse, in one line naming what would make it fit, a stage whose estimated peak memory
    per device (:mod:`polymnesia.training.memory`) exceeds what this process has. Models the
    planner cannot read (no transformers config it knows) are not checked."""
    device = torch.device(acc.device)
    try:
        width = int(data.collate(list(range(min(len(data), 8))))["input_ids"].shape[-1])
        plan = memory_fit.plan_for_model(
            model,
            cfg,
            seq_len=width,
            engine=engine,
            devices=acc.num_processes,
            device_type=device.type,
            label=label,
        )
    except Exception:  # an estimate that cannot be made is no reason to stop
        return
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    memory_fit.check_fits(
        plan, memory_fit.device_bytes(device, local if device.type == "cpu" else 1)
    )


def _micro_batches(
    data: TrainData, indices: list[int], cfg: TrainConfig, acc: Any
) -> tuple[list[dict[str, torch.Tensor]], int]:
    """This process's share of each micro-batch of one global batch, on its device, and the
    number of real tokens in it (counted on the host, before the copy)."""
    per_micro = len(indices) // cfg.grad_accum
    per_proc = per_micro // acc.num_processes
    out, tokens = [], 0
    for m in range(cfg.grad_accum):
        start = m * per_micro + acc.process_index * per_proc
        batch = data.collate(indices[start : start + per_proc])
        tokens += _count_tokens(batch)
        out.append({k: v.to(acc.device, non_blocking=True) for k, v in batch.items()})
    return out, tokens


def _count_tokens(batch: dict[str, torch.Tensor]) -> int:
    mask = batch.get("attention_mask")
    return int(mask.sum()) if mask is not None else batch["input_ids"].numel()


def _use_fused(cfg: TrainConfig, device: torch.device) -> bool:
    """Fused AdamW: on CUDA by default, anywhere torch has the kernel when asked."""
    if cfg.fused_adamw is False:
        return False
    from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

    if device.type not in _get_fused_kernels_supported_devices():
        return False
    return cfg.fused_adamw is True or device.type == "cuda"


def _prepare_model(model: torch.nn.Module, cfg: TrainConfig, engine: Engine, device: Any) -> None:
    """Gradient checkpointing, and the model where the engine places it (on its device,
    before a fused optimizer is built, unless the engine shards it)."""
    if cfg.gradient_checkpointing:
        enable = getattr(model, "gradient_checkpointing_enable", None)
        if not callable(enable) or not getattr(model, "supports_gradient_checkpointing", False):
            raise PolymnesiaError(
                f"train.gradient_checkpointing: {type(model).__name__} does not support it; "
                "set it to false"
            )
        enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    engine.place(model, device)


def _param_groups(
    model: torch.nn.Module, cfg: TrainConfig, plugins: Sequence[TrainingPlugin]
) -> list[dict[str, Any]]:
    """The (plugin-edited) parameter groups; plugins also freeze parameters here."""
    groups: list[dict[str, Any]] = default_param_groups(model, cfg)
    for p in plugins:
        groups = p.param_groups(model, groups)
    return groups


def _optimizer(
    model: torch.nn.Module,
    cfg: TrainConfig,
    plugins: Sequence[TrainingPlugin],
    device: torch.device | None = None,
    groups: list[dict[str, Any]] | None = None,
    *,
    fusable: bool = True,
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over the parameter groups (:func:`_param_groups` unless given), each with its
    learning-rate lambda; fused (``train.fused_adamw``) only where ``fusable`` (the engine
    says so: not over sharded parameters)."""
    if groups is None:
        groups = _param_groups(model, cfg, plugins)
    base = functools.partial(
        warmup_cosine, warmup=cfg.warmup_steps, total=cfg.steps, min_ratio=cfg.min_lr_ratio
    )
    lambdas = [g.pop("lr_lambda", base) for g in groups]
    for g in groups:
        g.pop("name", None)
    fused = fusable and device is not None and _use_fused(cfg, device)
    kw: dict[str, Any] = {"fused": True} if fused else {}
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, **kw)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambdas)


def _finish_health(acc: Any, model: Any, counters: _Counters, out_dir: Path) -> list[str]:
    report = health.assess(
        counters.first_loss, counters.recent, counters.step, health.chance_loss(model)
    )
    if acc.is_main_process:
        atomic_write_json(out_dir / "train_health.json", report)
        for w in report["warnings"]:
            checkpoint.say(f"warning: {w}")
    return list(report["flags"])


@_without_kv_cache
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

    check_precision(cfg, "cpu" if use_cpu() else "accelerator", "training")
    check_trackers(cfg, "training")
    use_precision(cfg.mixed_precision)  # each stage trains in its own precision
    acc = Accelerator(
        cpu=use_cpu(),
        mixed_precision=cfg.mixed_precision,
        log_with=list(cfg.trackers) or None,
        project_dir=str(out_dir),
    )
    per_proc = cfg.batch_size // cfg.grad_accum
    if per_proc % acc.num_processes:
        raise TrainingDiverged(
            f"train.batch_size {cfg.batch_size} / grad_accum {cfg.grad_accum} must be divisible "
            f"by {acc.num_processes} processes"
        )
    engine = select(acc, cfg)
    check_engine(engine.name, plugins, step_fn, model, standard_step=standard_step)
    loss_terms = [p for p in plugins if p.adds_loss]
    if loss_terms and step_fn is not standard_step:
        name = getattr(step_fn, "__name__", None) or type(step_fn).__name__
        raise PolymnesiaError(
            f"training plugin '{loss_terms[0].name}' adds a term to the loss, which only the "
            f"standard step makes; step function '{name}' makes its own: drop one of them"
        )
    set_seed(seed)
    _prepare_model(model, cfg, engine, acc.device)
    groups = _param_groups(model, cfg, plugins)  # plugins choose and freeze parameters here
    check_memory(model, data, cfg, engine.name, acc, tracker_name)
    build = functools.partial(_optimizer, model, cfg, plugins, torch.device(acc.device))
    model, optimizer, scheduler = engine.prepare(acc, model, groups, build, cfg)
    if cfg.compile:
        acc.unwrap_model(model).compile()  # in place: state_dict keys are unchanged
    stream, counters = IndexStream(len(data), seed), _Counters()
    loop_states = {"counters": counters, "stream": stream, "plugins": _PluginState(plugins)}
    ckpt = Checkpointer(acc, engine, model, optimizer, scheduler, loop_states)

    ckpt_dir = out_dir / "checkpoints"
    metrics_path = out_dir / "metrics.jsonl"
    resumed_from = None
    if ckpt.resume(ckpt_dir) is not None:
        resumed_from = counters.step
        if acc.is_main_process:  # drop metrics logged after the checkpoint by the interrupted run
            kept = [r for r in read_jsonl(metrics_path) if int(r.get("step", 0)) <= counters.step]
            write_jsonl_atomic(metrics_path, kept)
    elif acc.is_main_process and metrics_path.exists():
        metrics_path.unlink()
    state = LoopState(
        model=model,
        optimizer=optimizer,
        accelerator=acc,
        total_steps=cfg.steps,
        step=counters.step,
        # a loss term that is not made in chunks reads the full logits of the model's outputs
        lm_head=engine.loss_head(acc.unwrap_model(model), cfg)
        if all(p.chunked_term for p in loss_terms)
        else None,
        loss_terms=loss_terms,
        engine=engine,
    )
    for p in plugins:
        p.setup(state)
    if cfg.trackers:
        acc.init_trackers(tracker_name, config=flat_config(cfg.model_dump(mode="json")))

    bar = None
    if cfg.progress_bar and acc.is_main_process:
        bar = open_progress(cfg.steps, counters.step, tracker_name)
    model.train()
    t0, tok0 = time.time(), counters.tokens
    losses = _Losses()
    while counters.step < cfg.steps:
        batches, n_tokens = _micro_batches(data, stream.next(cfg.batch_size), cfg, acc)
        loss = step_fn(state, batches)
        if state.stop_reason is not None:  # the step function ended training (LF-MLF's stop)
            break
        losses.add(counters.step + 1, loss)
        for p in plugins:
            p.before_optimizer_step(state)
        norm = engine.clip(acc, model, cfg.grad_clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        counters.step += 1
        counters.tokens += n_tokens * acc.num_processes
        state.step = counters.step
        for p in plugins:
            p.after_optimizer_step(state)
        if plugins:  # a plugin's forward pass (early stopping's score)
            engine.settle(model)
        if bar is not None:
            bar.update(1)
        do_eval = eval_fn is not None and cfg.eval_every and counters.step % cfg.eval_every == 0
        if do_eval or counters.step % cfg.log_every == 0 or counters.step == cfg.steps:
            losses.read(acc, counters, ckpt_dir)
            tokens_per_s = (counters.tokens - tok0) / max(1e-9, time.time() - t0)
            rec = {
                "step": counters.step,
                "loss": round(counters.loss, 6),
                "lr": scheduler.get_last_lr()[0],
                "tokens": counters.tokens,
                "tokens_per_s": round(tokens_per_s, 1),
            }
            if norm is not None:
                rec["grad_norm"] = round(float(norm), 6)
            if do_eval and eval_fn is not None:
                model.eval()
                rec.update(eval_fn(acc.unwrap_model(model)))
                model.train()
                engine.settle(model)  # FSDP2: the evaluation left the root gathered
            if bar is not None:
                val = rec.get("val_bits_per_byte")
                bar.show(counters.loss, tokens_per_s, val if isinstance(val, float) else None)
            if acc.is_main_process:
                append_jsonl(metrics_path, rec)
            if cfg.trackers:
                acc.log(rec, step=counters.step)
        at_end = cfg.checkpoint_at_end and counters.step == cfg.steps
        if counters.step % cfg.checkpoint_every == 0 or at_end:
            losses.read(acc, counters, ckpt_dir)
            ckpt.save(ckpt_dir, counters.step, counters.loss, cfg.keep_checkpoints)
        if state.stop_reason is not None:  # a plugin (e.g. early stopping) ended training
            break
    losses.read(acc, counters, ckpt_dir)
    if state.stop_reason is not None and acc.is_main_process:
        checkpoint.say(
            f"training stopped after step {counters.step} of {cfg.steps}: {state.stop_reason}"
        )
    if bar is not None:
        bar.close()
    if cfg.trackers:
        acc.end_training()
    plain = engine.gather(acc, model)
    flags = _finish_health(acc, plain, counters, out_dir)
    result = TrainResult(
        counters.step,
        counters.loss,
        counters.tokens,
        time.time() - t0,
        resumed_from,
        flags,
        engine=engine.name,
    )
    return plain, result
