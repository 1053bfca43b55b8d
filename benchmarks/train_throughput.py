"""Training tokens/s of polymnesia's loop against the transformers Trainer, side by side.

Same tiny Mistral (``tiny`` preset), same packed UDHR blocks, same global batch,
AdamW with the same learning rate, warmup + cosine schedule, clipping at 1.0 and
no evaluation or checkpointing inside the timed window, same device and precision
(CUDA when there is one). Each side's timed window is one call that trains a
model in hand: ``train(...)`` for polymnesia, ``Trainer(...)`` and ``.train()``
for transformers (the Trainer builds its Accelerator and places the model in its
constructor, as polymnesia's ``train`` does inside). The two sides alternate for
``--rounds`` rounds; each round gives one ratio, and the script prints the
median ratio with its range, and each side's median tokens/s. It also prints the
steady-state ratio: tokens/s of the median step after step ``--skip`` (setup,
the first steps' warm-up and the end of the call left out), timed by
a loop plugin on polymnesia's side and a ``TrainerCallback`` on the Trainer's. Tokens are
counted where each model reads them (its input embedding), and the Trainer drops a short
last batch as the loop does: before commit 99ae7fb the script counted steps x batch x block
for both, while on a data set of few blocks (paper-400m's 19 UDHR blocks of 1,024) the
Trainer trained every other step on the 3 left over. The optimizer each
side builds is printed: the Trainer's default is fused
AdamW wherever torch has the kernel (CPU too); polymnesia's ``train.fused_adamw``
default (null) fuses on CUDA only, ``--fused true`` fuses on the CPU as well.
polymnesia's side makes a decoder's loss in chunks of positions (``train.chunked_loss``,
the default); ``--chunked-loss false`` uses the model's own loss, as the Trainer does.
``--profile N`` adds one round per side under ``torch.profiler`` (N steps after
``--skip``): each side's busiest operators by self device time (self CPU time on a CPU),
and the kernel time per step (its profiler annotations left out): a step whose unprofiled
time is near its kernel time is bound by the device, one far above it by the host;
``--shapes`` adds each side's matrix products and multiplications by input shape.
In the first round the script prints the process's global numerics settings (TF32,
reduced-precision reductions, attention backends, determinism) before the first side and
whatever either side changed, and the dtypes one linear layer and the LM head see in
each side's first forward pass; ``--first trainer`` runs the Trainer first in each round,
so a setting the Trainer makes would reach the loop too.
Goal: ratio (polymnesia / Trainer) >= 1.0 on CPU, >= 1.2 on GPU.

    python benchmarks/train_throughput.py [--rounds 5] [--steps 40] [--skip 5] [--batch 16] [--block
    128]
        [--preset tiny] [--vocab 2000] [--precision no|bf16|fp16] [--fused null|true|false]
        [--chunked-loss true|false] [--profile N] [--shapes] [--first loop|trainer]

Issue 13's GPU figure: ``--preset paper-400m --vocab 8000 --batch 16 --block 1024
--precision bf16``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from _common import mfu_line, peak_flops, timed, tiny_model, udhr_blocks

#: called after every optimizer step of either side (the profiler's ``step``, when profiling)
STEP_HOOKS: list[Callable[[], object]] = []
#: sides whose first forward pass is still to be described (filled for the first round)
PROBE: set[str] = set()


def numerics() -> dict[str, object]:
    """The process-wide settings that change which kernels a matrix product or attention
    runs (each read where this torch has it)."""
    import warnings

    cuda, cudnn = torch.backends.cuda, torch.backends.cudnn
    reads: dict[str, Callable[[], object]] = {
        "float32_matmul_precision": torch.get_float32_matmul_precision,
        "backends.fp32_precision": lambda: torch.backends.fp32_precision,  # type: ignore[attr-defined]
        "cuda.matmul.fp32_precision": lambda: cuda.matmul.fp32_precision,
        "cuda.matmul.allow_tf32": lambda: cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": lambda: cudnn.allow_tf32,
        "matmul bf16 reduced reduction": lambda: cuda.matmul.allow_bf16_reduced_precision_reduction,
        "matmul fp16 reduced reduction": lambda: cuda.matmul.allow_fp16_reduced_precision_reduction,
        "cudnn.benchmark": lambda: cudnn.benchmark,
        "cudnn.deterministic": lambda: cudnn.deterministic,
        "deterministic algorithms": torch.are_deterministic_algorithms_enabled,
        "sdpa flash/mem-efficient/math/cudnn": lambda: (
            cuda.flash_sdp_enabled(),
            cuda.mem_efficient_sdp_enabled(),
            cuda.math_sdp_enabled(),
            cuda.cudnn_sdp_enabled(),
        ),
        "default dtype": torch.get_default_dtype,
        "CUBLAS_WORKSPACE_CONFIG": lambda: os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }
    state: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy TF32 flags warn on torch >= 2.9
        for key, read in reads.items():
            try:
                state[key] = read()
            except (AttributeError, RuntimeError):
                continue
    return state


def report_numerics(before: dict[str, object], side: str) -> dict[str, object]:
    """Print what ``side`` changed in :func:`numerics` and return the state after it."""
    after = numerics()
    changed = [f"{k}: {before.get(k)!r} -> {v!r}" for k, v in after.items() if before.get(k) != v]
    print(f"numerics after {side}: " + ("; ".join(changed) if changed else "unchanged"))
    return after


def probe(model: torch.nn.Module, side: str) -> None:
    """Print, once, the dtypes the first linear layer and the LM head see in ``side``'s first
    forward pass (input, weight, output, autocast) and the first input's strides."""
    if side not in PROBE:
        return
    PROBE.discard(side)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    named = {"first linear": linears[0], "LM head": linears[-1]}
    seen: dict[str, str] = {}
    handles = []

    def hook(name: str):  # type: ignore[no-untyped-def]
        def record(module, args, out) -> None:  # type: ignore[no-untyped-def]
            if name in seen:
                return
            x = args[0]
            kind = x.device.type
            cast = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else None
            seen[name] = (
                f"{name}: input {x.dtype} {tuple(x.shape)} strides {x.stride()}, weight "
                f"{module.weight.dtype}, output {out.dtype}, autocast {cast}"
            )
            if len(seen) == len(named):
                print(f"{side}: " + " | ".join(seen[n] for n in named if n in seen))
                for h in handles:
                    h.remove()

        return record

    handles.extend(m.register_forward_hook(hook(n)) for n, m in named.items())


class Tokens:
    """Counts the tokens a model is trained on (its input embedding's inputs) and stamps each
    optimizer step with the time and the count so far: throughput is what a side trained on,
    not steps x batch x block (a loader that keeps a short last batch trains on fewer)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.seen = 0
        self.stamps: list[tuple[float, int]] = []
        model.get_input_embeddings().register_forward_pre_hook(self.count)

    def count(self, module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        if module.training:
            self.seen += args[0].numel()

    def stamp(self) -> None:
        self.stamps.append((time.perf_counter(), self.seen))

    def steady(self, a: argparse.Namespace) -> float:
        """Tokens/s of the median step after step ``a.skip`` (robust to a few slow steps)."""
        window = self.stamps[a.skip - 1 :]
        rates = [(n1 - n0) / (t1 - t0) for (t0, n0), (t1, n1) in itertools.pairwise(window)]
        return statistics.median(rates)

    def check(self, side: str, a: argparse.Namespace, block: int) -> None:
        """Say so when a side trained on other than ``steps x batch x block`` tokens."""
        if self.seen != a.steps * a.batch * block:
            print(
                f"note: {side} trained on {self.seen} tokens, not {a.steps} x {a.batch} x "
                f"{block} = {a.steps * a.batch * block}; its tokens/s count the former"
            )


def run_polymnesia(blocks: torch.Tensor, vocab: int, a: argparse.Namespace) -> tuple[float, float]:
    from polymnesia.training.config import TrainConfig
    from polymnesia.training.data import PackedLMData
    from polymnesia.training.loop import train
    from polymnesia.training.plugins import TrainingPlugin

    class Clock(TrainingPlugin):
        def after_optimizer_step(self, state) -> None:  # type: ignore[no-untyped-def]
            tokens.stamp()
            for hook in STEP_HOOKS:
                hook()

    fused = {"null": None, "true": True, "false": False}[a.fused]
    cfg = TrainConfig(
        steps=a.steps,
        batch_size=a.batch,
        block_size=blocks.shape[1],
        lr=1e-3,
        log_every=10**6,
        checkpoint_every=10**6,
        checkpoint_at_end=False,
        progress_bar=False,
        mixed_precision=a.precision,
        fused_adamw=fused,
        chunked_loss=a.chunked_loss == "true",
    )
    model = tiny_model(vocab, a.preset)
    probe(model, "polymnesia loop")
    tokens = Tokens(model)
    with tempfile.TemporaryDirectory() as d:
        seconds = timed(
            lambda: train(model, PackedLMData(blocks), cfg, Path(d), seed=0, plugins=[Clock()])
        )
    tokens.check("polymnesia loop", a, blocks.shape[1])
    return tokens.seen / seconds, tokens.steady(a)


def run_trainer(
    blocks: torch.Tensor, vocab: int, a: argparse.Namespace
) -> tuple[float, float, str]:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):  # type: ignore[no-untyped-def]
            tokens.stamp()
            for hook in STEP_HOOKS:
                hook()

    class Blocks(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return blocks.shape[0]

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return {"input_ids": blocks[i], "labels": blocks[i]}

    with tempfile.TemporaryDirectory() as d:
        args = TrainingArguments(
            output_dir=d,
            max_steps=a.steps,
            per_device_train_batch_size=a.batch,
            learning_rate=1e-3,
            lr_scheduler_type="cosine",
            warmup_steps=max(1, a.steps // 10),
            weight_decay=0.0,
            max_grad_norm=1.0,
            adam_beta1=0.9,
            adam_beta2=0.95,
            logging_steps=10**6,
            save_strategy="no",
            report_to=[],
            use_cpu=not torch.cuda.is_available(),
            bf16=a.precision == "bf16",
            fp16=a.precision == "fp16",
            dataloader_num_workers=0,
            dataloader_drop_last=True,  # full batches, as the loop trains on
            disable_tqdm=True,
            seed=0,
        )
        model = tiny_model(vocab, a.preset)
        probe(model, "transformers Trainer")
        tokens = Tokens(model)
        seconds = timed(
            lambda: Trainer(
                model=model, args=args, train_dataset=Blocks(), callbacks=[Clock()]
            ).train()
        )
    tokens.check("transformers Trainer", a, blocks.shape[1])
    return tokens.seen / seconds, tokens.steady(a), str(args.optim.value)


def profiled(side: str, run: Callable[[], object], a: argparse.Namespace) -> None:
    """One more run of a side with ``a.profile`` steps after ``a.skip`` under the profiler."""
    from torch.profiler import ProfilerActivity, profile, schedule

    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    plan = schedule(wait=a.skip, warmup=1, active=a.profile, repeat=1)
    with profile(activities=activities, schedule=plan, record_shapes=a.shapes) as prof:
        STEP_HOOKS.append(prof.step)
        t: list[float] = []
        STEP_HOOKS.append(lambda: t.append(time.perf_counter()))
        try:
            run()
        finally:
            STEP_HOOKS.clear()
    first = a.skip + 1  # the active window's steps: skip + warmup .. + profile
    wall = t[first + a.profile - 1] - t[first - 1]
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    events = prof.key_averages()
    print(f"--- profile: {side}, {a.profile} steps, {1e3 * wall / a.profile:.1f} ms per step")
    if cuda:  # kernels' own time ranges, not operators' (those would count a kernel twice)
        from torch.autograd import DeviceType

        kernels = [
            e
            for e in prof.events()
            if e.device_type == DeviceType.CUDA and not e.name.startswith("ProfilerStep")
        ]
        busy = sum(e.time_range.elapsed_us() for e in kernels) / 1e6
        print(
            f"kernel time {1e3 * busy / a.profile:.1f} ms per step ({len(kernels)} kernels), "
            f"{busy / wall:.1%} of the profiled wall time (the profiler slows the host)"
        )
    print(events.table(sort_by=key, row_limit=12, max_name_column_width=60))
    if a.shapes:  # the products and multiplications by input shape, busiest first
        by_shape = [
            e
            for e in prof.key_averages(group_by_input_shape=True)
            if e.key in ("aten::mm", "aten::mul", "aten::addmm", "aten::bmm")
        ]
        by_shape.sort(key=lambda e: -getattr(e, key))
        print(f"busiest products and multiplications by input shape ({side}):")
        for e in by_shape[:16]:
            total = getattr(e, key) / 1e3
            print(
                f"  {e.key:10s} x{e.count:5d} {total:9.1f} ms  "
                f"{total * 1e3 / e.count:8.1f} us each  {e.input_shapes}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--skip", type=int, default=5, help="steps left out of the steady state")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--vocab", type=int, default=2000)
    ap.add_argument("--precision", default="no", choices=["no", "bf16", "fp16"])
    ap.add_argument("--fused", default="null", choices=["null", "true", "false"])
    ap.add_argument("--chunked-loss", default="true", choices=["true", "false"])
    ap.add_argument("--profile", type=int, default=0, help="profile N steps of each side")
    ap.add_argument("--shapes", action="store_true", help="profile: products by input shape")
    ap.add_argument("--first", default="loop", choices=["loop", "trainer"])
    a = ap.parse_args()
    tok, blocks = udhr_blocks(a.block, a.vocab)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    ours, theirs, ours_steady, theirs_steady, optim = [], [], [], [], ""
    state = numerics()
    print("numerics at the start: " + "; ".join(f"{k}: {v!r}" for k, v in state.items()))
    PROBE.update(("polymnesia loop", "transformers Trainer"))
    for r in range(a.rounds):  # alternate, so both sides see the same machine load
        for side in ("trainer", "loop") if a.first == "trainer" else ("loop", "trainer"):
            if side == "loop":
                tps, st = run_polymnesia(blocks, len(tok), a)
                ours.append(tps)
                ours_steady.append(st)
            else:
                tps, st, optim = run_trainer(blocks, len(tok), a)
                theirs.append(tps)
                theirs_steady.append(st)
            if r == 0:
                state = report_numerics(state, side)
    fused = a.fused == "true" or (a.fused == "null" and device.type == "cuda")
    print(
        f"{device.type}, torch threads: {torch.get_num_threads()}, preset {a.preset}, vocab "
        f"{len(tok)}, steps {a.steps}, batch {a.batch} x {a.block} tokens, precision {a.precision}"
    )
    print(
        f"optimizers: polymnesia AdamW fused={fused} (train.fused_adamw={a.fused}); Trainer {optim}"
    )
    print(f"loss: polymnesia chunked_loss={a.chunked_loss}; Trainer the model's own")
    print(f"order in each round: {a.first} first")
    ratios = [o / t for o, t in zip(ours, theirs, strict=True)]
    runs = ", ".join
    print(
        f"polymnesia loop      : {statistics.median(ours):9.0f} tokens/s median  "
        f"(runs: {runs(f'{x:.0f}' for x in ours)})"
    )
    print(
        f"transformers Trainer : {statistics.median(theirs):9.0f} tokens/s median  "
        f"(runs: {runs(f'{x:.0f}' for x in theirs)})"
    )
    print(
        f"ratio polymnesia / Trainer = {statistics.median(ratios):.3f} median of {len(ratios)} "
        f"rounds, range {min(ratios):.3f}-{max(ratios):.3f}  (goal >= 1.0 on CPU, 1.2 on GPU)"
    )
    steady_ratios = [o / t for o, t in zip(ours_steady, theirs_steady, strict=True)]
    print(
        f"steady state (steps {a.skip + 1}-{a.steps}): polymnesia "
        f"{statistics.median(ours_steady):.0f}, Trainer {statistics.median(theirs_steady):.0f} "
        f"tokens/s median; ratio {statistics.median(steady_ratios):.3f}, range "
        f"{min(steady_ratios):.3f}-{max(steady_ratios):.3f}"
    )
    from polymnesia.training.flops import model_shape, train_flops_per_token

    n, layers, width = model_shape(tiny_model(len(tok), a.preset))
    per_token = train_flops_per_token(n, layers, width, a.block)
    dtype = {"no": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.precision]
    peak, what = peak_flops(device, dtype)
    print(what)
    print(mfu_line("polymnesia loop     ", statistics.median(ours), per_token, peak))
    print(mfu_line("transformers Trainer", statistics.median(theirs), per_token, peak))
    if a.profile:
        if a.skip + 1 + a.profile > a.steps:
            raise SystemExit(f"--profile {a.profile}: needs --steps >= skip + 1 + N")
        profiled("polymnesia loop", lambda: run_polymnesia(blocks, len(tok), a), a)
        profiled("transformers Trainer", lambda: run_trainer(blocks, len(tok), a), a)


if __name__ == "__main__":
    main()
