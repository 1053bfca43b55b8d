"""The device check of ``polymnesia env --check``: a matrix product (the device's measured
peak, as the benchmarks measure it), three steps of the training loop on a tiny random Llama
(Accelerate, the precision's autocast, the fused optimizer where the device has one, the
chunked loss), the likelihood scorer on the same model placed as the evaluation stages place
it, and under several processes a collective (an all-reduce whose sum is verified, its bus
bandwidth, and that no two processes share one accelerator). :func:`check` runs them;
:func:`gather_processes` collects every process's report on the first."""

from __future__ import annotations

import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from polymnesia.evaluation.likelihood import sequence_nll
from polymnesia.runtime import Precision, current
from polymnesia.testing import tiny_model
from polymnesia.training.config import TrainConfig
from polymnesia.training.data import PackedLMData
from polymnesia.training.flops import matmul_peak
from polymnesia.training.loop import train


def check(precision: Precision = "no") -> list[dict[str, Any]]:
    """The device check: each item has ``name``, ``ok``, ``seconds`` and ``detail`` (a
    measured figure, or the one-line reason it failed)."""
    results = []

    checks = [("matmul", _check_matmul), ("training", _check_training), ("scoring", _check_scoring)]
    if current().world > 1:
        checks.append(("collective", _check_collective))
    for name, fn in checks:
        start = time.perf_counter()
        try:
            detail, ok = fn(precision), True
        except Exception as e:  # the check reports every failure as a line
            detail, ok = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", False
        results.append(
            {
                "name": name,
                "ok": ok,
                "seconds": round(time.perf_counter() - start, 2),
                "detail": detail,
            }
        )
    return results


def _tiny(vocab: int = 512) -> Any:

    return tiny_model(
        "llama",
        vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        seed=0,
    )


def _check_matmul(precision: Precision) -> str:

    rt = current(precision)
    n = 2048 if rt.device.type != "cpu" else 512
    peak = matmul_peak(rt.device, rt.dtype, n=n)
    line = (
        f"{rt.device} {str(rt.dtype).removeprefix('torch.')} {n}x{n} product: {peak / 1e9:.1f} "
        "GFLOP/s"
    )
    if rt.dtype != torch.float32:
        full = matmul_peak(rt.device, torch.float32, n=n)
        line += f" (float32: {full / 1e9:.1f} GFLOP/s)"
        if peak < full / 2:
            line += (
                f"; {precision} runs {full / peak:.0f}x slower than float32 on this device: "
                "precision no will be faster here"
            )
    return line


def _check_training(precision: Precision) -> str:

    torch.manual_seed(0)
    blocks = torch.randint(0, 512, (32, 64))
    cfg = TrainConfig(
        steps=3,
        batch_size=4,
        block_size=64,
        lr=1e-3,
        warmup_ratio=0.0,
        log_every=1,
        checkpoint_every=10**6,
        checkpoint_at_end=False,
        progress_bar=False,
        mixed_precision=precision,
    )
    with tempfile.TemporaryDirectory() as d:
        start = time.perf_counter()
        model, result = train(_tiny(), PackedLMData(blocks), cfg, Path(d), seed=0)
        seconds = time.perf_counter() - start
    loss = float(result.final_loss)
    if not loss == loss or loss in (float("inf"), float("-inf")):
        raise RuntimeError(f"the training loss is {loss}")
    device = next(model.parameters()).device
    if result.engine == "fsdp2":  # the gathered model is on the CPU; training ran sharded
        device = current(precision).device
    return (
        f"3 steps in {seconds:.1f} s on {device} ({precision}, engine {result.engine}), "
        f"last loss {loss:.3f}"
    )


def _check_scoring(precision: Precision) -> str:

    rt = current(precision)
    model = rt.place(_tiny(), stage="env --check")
    param = next(model.parameters())
    if param.device.type != rt.device.type or param.dtype != rt.dtype:
        raise RuntimeError(f"the model was placed on {param.device} {param.dtype}")
    torch.manual_seed(1)
    seqs = [torch.randint(0, 512, (n,)).tolist() for n in (5, 17, 64, 33)]
    nll, count = sequence_nll(model, seqs, pad_id=0, batch_size=4, device=rt.device)
    per_token = sum(nll) / sum(count)
    if not per_token == per_token:
        raise RuntimeError("the scored NLL is NaN")
    return (
        f"{sum(count)} tokens scored on {param.device} ({param.dtype}), {per_token:.3f} nats/token"
    )


def _check_collective(precision: Precision) -> str:
    """An all-reduce over every process: its sum checked exactly, its bus bandwidth (as
    nccl-tests count it: 2(N-1)/N of the bytes per second), and no two processes on one
    accelerator (the usual mistake of a launch that does not set each process's device)."""

    rt = current()
    devices: list[Any] = [None] * rt.world
    dist.all_gather_object(devices, str(rt.device))
    if rt.device.type != "cpu":
        shared = sorted({d for d in devices if devices.count(d) > 1})
        if shared:
            ranks = [r for r, d in enumerate(devices) if d == shared[0]]
            raise RuntimeError(
                f"processes {', '.join(map(str, ranks))} share {shared[0]}: each process "
                "needs its own device (launch with torchrun or accelerate launch)"
            )
    n = (16 if rt.device.type != "cpu" else 1) * 2**20  # float32 elements: 64 or 4 MiB
    t = torch.empty(n, dtype=torch.float32, device=rt.device)
    expected = rt.world * (rt.world + 1) / 2
    times = []
    for _ in range(4):  # the first is a warm-up (connections, buffers)
        t.fill_(float(rt.rank + 1))
        if rt.device.type == "cuda":
            torch.cuda.synchronize(rt.device)
        start = time.perf_counter()
        dist.all_reduce(t)
        if rt.device.type == "cuda":
            torch.cuda.synchronize(rt.device)
        times.append(time.perf_counter() - start)
        wrong = int((t != expected).sum())
        if wrong:
            raise RuntimeError(f"all-reduce gave a wrong sum in {wrong} of {n} elements")
    seconds = sorted(times[1:])[len(times[1:]) // 2]
    busbw = 2 * (rt.world - 1) / rt.world * t.numel() * 4 / seconds
    return (
        f"all-reduce of {t.numel() * 4 // 2**20} MiB over {rt.world} processes "
        f"({dist.get_backend()}, {', '.join(devices)}): sums exact, "
        f"{busbw / 1e9:.2f} GB/s bus bandwidth"
    )


def gather_processes(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One summary per process (rank, host, device, its check results), on every process;
    only this one when the run has one process."""

    rt = current()
    mine = {
        "rank": rt.rank,
        "host": platform.node(),
        "device": report["runtime"]["device"],
        "check": report.get("check", {}).get("results", []),
    }
    if rt.world == 1:
        return [mine]

    every: list[Any] = [None] * rt.world
    dist.all_gather_object(every, mine)
    return every
