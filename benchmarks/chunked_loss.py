"""Memory and speed of the chunked LM-head loss against the decoder's own loss, side by side.

The same model (``--preset`` body, ``--vocab``-wide head), the same packed UDHR blocks
and the same loop (``polymnesia.training.loop.train``) train with
``train.chunked_loss: false`` (the model's own loss: all batch x length x vocabulary
logits at once, their float32 copy, log-softmax and gradient) and ``true``
(:mod:`polymnesia.training.loss`). Each side runs in its own process, so that its
peak memory is its own: on CUDA the peak of allocated memory, on a CPU the growth
of the peak resident set over the process's size before training (model and
data). The sides alternate for ``--rounds`` rounds; the script prints each
side's median step tokens/s and peak, and the median ratios.

    python benchmarks/chunked_loss.py [--rounds 3] [--preset tiny] [--vocab 32000]
        [--batch 16] [--block 128] [--steps 20] [--precision no|bf16|fp16]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from _common import tiny_model, udhr_blocks

SIDES = ("own", "chunked")


def child(a: argparse.Namespace) -> None:
    from polymnesia.training.config import TrainConfig
    from polymnesia.training.data import PackedLMData
    from polymnesia.training.loop import train
    from polymnesia.training.plugins import TrainingPlugin

    _, blocks = udhr_blocks(a.block, 2000)  # token ids < 2000; the head is --vocab wide
    model = tiny_model(a.vocab, a.preset)
    stamps: list[float] = []

    class Clock(TrainingPlugin):
        def after_optimizer_step(self, state) -> None:  # type: ignore[no-untyped-def]
            stamps.append(time.perf_counter())

    cfg = TrainConfig(
        steps=a.steps,
        batch_size=a.batch,
        block_size=a.block,
        log_every=10**6,
        checkpoint_every=10**6,
        checkpoint_at_end=False,
        progress_bar=False,
        mixed_precision=a.precision,
        chunked_loss=a.child == "chunked",
    )
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with tempfile.TemporaryDirectory() as d:
        train(model, PackedLMData(blocks), cfg, Path(d), seed=0, plugins=[Clock()])
    steps = [t1 - t0 for t0, t1 in zip(stamps[2:-1], stamps[3:], strict=True)]
    if cuda:
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    print(json.dumps({"tokens_per_s": a.batch * a.block / statistics.median(steps), "peak": peak}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--precision", default="no", choices=["no", "bf16", "fp16"])
    ap.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a)
        return
    args = [f"--{k}={v}" for k, v in vars(a).items() if k not in ("child", "rounds")]
    runs: dict[str, list[dict[str, float]]] = {s: [] for s in SIDES}
    for _ in range(a.rounds):  # alternate, so both sides see the same machine load
        for side in SIDES:
            out = subprocess.run(
                [sys.executable, __file__, *args, f"--child={side}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            runs[side].append(json.loads(out.strip().splitlines()[-1]))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    what = "peak allocated" if device == "cuda" else "peak RSS growth"
    print(
        f"{device}, preset {a.preset}, vocabulary {a.vocab}, batch {a.batch} x {a.block} "
        f"tokens, precision {a.precision}, {a.steps} steps, {a.rounds} rounds"
    )
    for side in SIDES:
        tps = [r["tokens_per_s"] for r in runs[side]]
        mib = [r["peak"] / 2**20 for r in runs[side]]
        print(
            f"{side:8s}: {statistics.median(tps):9.0f} tokens/s median (runs: "
            f"{', '.join(f'{x:.0f}' for x in tps)}); {what} {statistics.median(mib):8.1f} MiB "
            f"median (runs: {', '.join(f'{x:.1f}' for x in mib)})"
        )
    speed = [
        c["tokens_per_s"] / o["tokens_per_s"]
        for o, c in zip(runs["own"], runs["chunked"], strict=True)
    ]
    memory = [c["peak"] / o["peak"] for o, c in zip(runs["own"], runs["chunked"], strict=True)]
    print(
        f"chunked / own: tokens/s {statistics.median(speed):.3f} median "
        f"(range {min(speed):.3f}-{max(speed):.3f}); {what} {statistics.median(memory):.3f} "
        f"median (range {min(memory):.3f}-{max(memory):.3f})"
    )


if __name__ == "__main__":
    main()
