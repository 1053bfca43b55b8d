"""Benchmark FSDP2 against DDP on 2 gloo processes (a script, not a test).

Prints, measured side by side in one run on the same model, data and global batch:

1. model, gradient and optimizer-state memory per process (bytes each process holds:
   its parameter shards, gradient shards and AdamW moments), FSDP2 / DDP
   (goal: <= 0.6x), and peak resident memory for context;
2. training tokens/s, FSDP2 / DDP (goal: >= 0.7x), with what bounds it;
3. under FSDP2, a per-language step whose combiner takes its weights from the
   all-reduced Gram matrix (MGDA, LF-MLF) against uniform weights, at T = 3 and
   T = 10 languages (goals: <= 1.3x and <= 1.7x).

Each figure is the median over ``--rounds`` launches, the engines alternating so that
both see the same machine load; the range over rounds is printed beside it.

Run: ``python benchmarks/fsdp.py [--preset tiny] [--steps 30] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))


def _bytes(tensors: Any) -> int:
    from polymnesia.training.fsdp import local

    return sum(local(t).numel() * local(t).element_size() for t in tensors)


def worker(args: argparse.Namespace) -> None:
    """One training run in this process (launched by torchrun); rank 0 writes the figures."""
    from _common import tiny_model, udhr_blocks

    from polymnesia.training.config import TrainConfig
    from polymnesia.training.data import PackedLMData
    from polymnesia.training.loop import train
    from polymnesia.training.plugins import LoopState, TrainingPlugin

    tok, blocks = udhr_blocks(block_size=args.block, vocab_size=2000)
    figures: dict[str, Any] = {}

    class Probe(TrainingPlugin):
        name = "probe"
        sharded_engines = ("fsdp2",)

        def before_optimizer_step(self, state: LoopState) -> None:
            if state.step == 1:  # gradients are final: count them (and the parameters)
                params = list(state.model.parameters())
                figures["param_bytes"] = _bytes(params)
                figures["grad_bytes"] = _bytes(p.grad for p in params if p.grad is not None)

        def after_optimizer_step(self, state: LoopState) -> None:
            if state.step == 1:
                inner = getattr(state.optimizer, "optimizer", state.optimizer)
                moments = [v for s in inner.state.values() for v in s.values()]
                figures["optimizer_bytes"] = _bytes(
                    v for v in moments if isinstance(v, torch.Tensor) and v.ndim
                )
            if state.step == args.warmup:
                figures["t0"] = time.perf_counter()
            if state.step == args.steps:
                figures["t1"] = time.perf_counter()

    cfg = TrainConfig(
        steps=args.steps,
        batch_size=args.batch,
        block_size=args.block,
        lr=1e-3,
        warmup_ratio=0.0,
        log_every=10**6,
        checkpoint_every=10**6,
        checkpoint_at_end=False,
        progress_bar=False,
        engine=args.engine,
        chunked_loss=not args.model_loss,
    )
    probe = Probe()
    kw: dict[str, Any] = {"plugins": [probe]}
    data: Any = PackedLMData(blocks)
    if args.languages:
        from polymnesia.gradients import get_combiner
        from polymnesia.training.multilingual_step import MultilingualData, MultilingualStep

        langs = [f"l{i}" for i in range(args.languages)]
        n = len(blocks) // len(langs)
        sets = [PackedLMData(blocks[i * n : (i + 1) * n]) for i in range(len(langs))]
        data = MultilingualData(sets, langs, seed=0)
        step = MultilingualStep(get_combiner(args.combiner), langs)
        kw = {"plugins": [step, probe], "step_fn": step}
    with tempfile.TemporaryDirectory() as d:
        model = tiny_model(len(tok), args.preset)
        _, result = train(model, data, cfg, Path(d), seed=0, **kw)
    seconds = figures.pop("t1") - figures.pop("t0")
    tokens = (args.steps - args.warmup) * args.batch * args.block * max(1, args.languages)
    figures.update(
        engine=result.engine,
        tokens_per_s=tokens / seconds,
        step_s=seconds / (args.steps - args.warmup),
        peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    )
    if int(os.environ.get("RANK", "0")) == 0:
        Path(args.out).write_text(json.dumps(figures))
    from polymnesia.runtime import shutdown

    shutdown()


def launch(args: argparse.Namespace, engine: str, **extra: Any) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "figures.json"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
        cmd += [__file__, "--worker", "--engine", engine, "--out", str(out)]
        for k in ("preset", "steps", "warmup", "batch", "block"):
            cmd += [f"--{k}", str(getattr(args, k))]
        for k, v in extra.items():
            cmd += [f"--{k}"] if v is True else [f"--{k}", str(v)]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        res = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if res.returncode:
            raise SystemExit(res.stderr[-3000:])
        return json.loads(out.read_text())  # type: ignore[no-any-return]


def _median(rows: list[dict[str, Any]], key: str) -> tuple[float, float, float]:
    values = [r[key] for r in rows]
    return statistics.median(values), min(values), max(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--engine", default="auto")
    ap.add_argument("--out", default="")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--languages", type=int, default=0)
    ap.add_argument("--combiner", default="uniform")
    ap.add_argument("--skip-combiners", action="store_true")
    ap.add_argument("--model-loss", action="store_true", help="DDP with the model's own loss too")
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    import torch

    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, 2 gloo processes, OMP_NUM_THREADS=1")
    print(f"preset {args.preset}, global batch {args.batch} x {args.block} tokens")
    runs: dict[str, list[dict[str, Any]]] = {"ddp": [], "fsdp2": [], "ddp, model's loss": []}
    for _ in range(args.rounds):
        runs["ddp"].append(launch(args, "ddp"))
        runs["fsdp2"].append(launch(args, "fsdp2"))
        runs["ddp, model's loss"].append(launch(args, "ddp", **{"model-loss": True}))
    ddp, fsdp = runs["ddp"][0], runs["fsdp2"][0]
    for what in ("param_bytes", "grad_bytes", "optimizer_bytes"):
        print(
            f"  {what:16s} per process: DDP {ddp[what] / 2**20:8.2f} MiB, "
            f"FSDP2 {fsdp[what] / 2**20:8.2f} MiB, ratio {fsdp[what] / ddp[what]:.3f}"
        )
    total = {
        e: sum(runs[e][0][k] for k in ("param_bytes", "grad_bytes", "optimizer_bytes"))
        for e in ("ddp", "fsdp2")
    }
    print(
        f"  model+gradients+optimizer per process: FSDP2 / DDP = "
        f"{total['fsdp2'] / total['ddp']:.3f} (goal <= 0.6)"
    )
    for e in runs:
        m, lo, hi = _median(runs[e], "peak_rss_bytes")
        print(
            f"  peak RSS per process ({e}): {m / 2**20:.0f} MiB [{lo / 2**20:.0f}-{hi / 2**20:.0f}]"
        )
    ratios = [
        f["tokens_per_s"] / d["tokens_per_s"]
        for d, f in zip(runs["ddp"], runs["fsdp2"], strict=True)
    ]
    for e in runs:
        m, lo, hi = _median(runs[e], "tokens_per_s")
        print(f"  tokens/s ({e}): {m:.0f} [{lo:.0f}-{hi:.0f}]")
    print(
        f"  tokens/s FSDP2 / DDP: {statistics.median(ratios):.3f} "
        f"[{min(ratios):.3f}-{max(ratios):.3f}] over {args.rounds} paired rounds (goal >= 0.7)"
    )
    same = [
        f["tokens_per_s"] / d["tokens_per_s"]
        for d, f in zip(runs["ddp, model's loss"], runs["fsdp2"], strict=True)
    ]
    print(
        f"  tokens/s FSDP2 / DDP with the model's own loss (as FSDP2 uses): "
        f"{statistics.median(same):.3f} [{min(same):.3f}-{max(same):.3f}]"
    )
    if args.skip_combiners:
        return
    for t in (3, 10):
        base, gram = [], {"mgda": [], "lf_mlf": []}
        for _ in range(args.rounds):
            u = launch(args, "fsdp2", languages=t, combiner="uniform")["step_s"]
            base.append(u)
            for c in gram:
                gram[c].append(launch(args, "fsdp2", languages=t, combiner=c)["step_s"] / u)
        for c, r in gram.items():
            print(
                f"  FSDP2 per-language step, T = {t}: {c} / uniform = {statistics.median(r):.3f} "
                f"[{min(r):.3f}-{max(r):.3f}] (uniform step {statistics.median(base):.3f} s; "
                f"goal <= {1.3 if t == 3 else 1.7})"
            )


if __name__ == "__main__":
    main()
