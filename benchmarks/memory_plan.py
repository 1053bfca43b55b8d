"""The memory planner's estimate against the measured peak of a few training steps on a CPU.

Each case trains ``--steps`` steps of a preset (random token ids, packed, so no padding)
with AdamW, gradient clipping and the loss the planner assumes (polymnesia's chunked loss
under one process and DDP, the model's own loss under FSDP2), in fresh processes: one
process (``single``), or two gloo processes under torch DDP (``ddp``) or FSDP2
(``fully_shard`` per decoder block and at the root, float32, ``fsdp2``). Each process
measures its peak RSS growth: the kernel's resident high-water mark (``VmHWM``, reset
through ``/proc/self/clear_refs`` once torch, transformers and the process group are up)
minus the resident size then. The larger of the two ranks is set against
:func:`polymnesia.training.memory.plan` for the same setup (device type ``cpu``).
``--loop polymnesia`` trains through polymnesia's own ``train()`` instead (Accelerate, one
process or DDP as launched, ``train.engine: fsdp2`` for FSDP2).

    python benchmarks/memory_plan.py                 # tiny and small, single/ddp/fsdp2
    python benchmarks/memory_plan.py --presets tiny --engines single --batch 8
    python benchmarks/memory_plan.py --loop polymnesia --checkpointing
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

ENGINES = ("single", "ddp", "fsdp2")


def _status(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def child(a: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist
    from _common import tiny_model
    from transformers import MistralForCausalLM  # noqa: F401  (its lazy import: before the baseline)

    from polymnesia.training.loss import causal_lm_loss, chunked_head

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1 + rank)
    ids = [torch.randint(0, a.vocab, (a.batch, a.block), generator=g) for _ in range(a.steps)]
    if a.loop == "polymnesia":
        _polymnesia_loop(a, world, ids)
        return
    base = _status("VmRSS")
    reset = _reset_peak()
    model: Any = tiny_model(a.vocab, a.preset)
    model.set_attn_implementation(a.attention)
    model.config.use_cache = False
    if a.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    head = None
    if a.engine == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (world,))
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        net: torch.nn.Module = model
    else:
        head = chunked_head(model)
        net = model
        if a.engine == "ddp":
            net = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    t0 = time.perf_counter()
    for x in ids:
        loss = causal_lm_loss(net, {"input_ids": x, "labels": x}, head)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    seconds = time.perf_counter() - t0
    peak = _status("VmHWM") - base  # the import-time peak too when reset failed
    print(json.dumps({"rank": rank, "peak": peak, "reset": reset, "seconds": seconds}))
    if world > 1:
        dist.destroy_process_group()


def _polymnesia_loop(a: argparse.Namespace, world: int, ids: list[Any]) -> None:
    """The same steps through polymnesia's own loop (Accelerate: one process or DDP as
    launched; ``train.engine: fsdp2`` where the loop has it)."""
    import tempfile
    from pathlib import Path

    import torch
    from _common import tiny_model

    from polymnesia.training.config import TrainConfig
    from polymnesia.training.data import PackedLMData
    from polymnesia.training.loop import train

    options: dict[str, Any] = {
        "steps": a.steps,
        "batch_size": a.batch * world,
        "block_size": a.block,
        "log_every": 10**6,
        "checkpoint_every": 10**6,
        "checkpoint_at_end": False,
        "progress_bar": False,
        "gradient_checkpointing": a.checkpointing,
    }
    if a.engine == "fsdp2":
        options["engine"] = "fsdp2"
    cfg = TrainConfig.model_validate(options)
    data = PackedLMData(torch.cat(ids * world))
    base = _status("VmRSS")
    reset = _reset_peak()
    model: Any = tiny_model(a.vocab, a.preset)
    model.set_attn_implementation(a.attention)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        train(model, data, cfg, Path(d), seed=0)
    seconds = time.perf_counter() - t0
    peak = _status("VmHWM") - base
    rank = int(os.environ.get("RANK", "0"))
    print(json.dumps({"rank": rank, "peak": peak, "reset": reset, "seconds": seconds}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(a: argparse.Namespace, preset: str, engine: str) -> dict[str, float]:
    world = 1 if engine == "single" else 2
    port = _free_port()
    args = [
        sys.executable,
        __file__,
        "--child",
        f"--preset={preset}",
        f"--engine={engine}",
        f"--vocab={a.vocab}",
        f"--batch={a.batch}",
        f"--block={a.block}",
        f"--steps={a.steps}",
        f"--attention={a.attention}",
        f"--loop={a.loop}",
        *(["--checkpointing"] if a.checkpointing else []),
    ]
    procs = []
    for rank in range(world):
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(world),
            "WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
        procs.append(
            subprocess.Popen(
                args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    rows = []
    for proc in procs:
        out, err = proc.communicate(timeout=1800)
        if proc.returncode:
            raise SystemExit(f"{preset}/{engine} failed:\n{err[-3000:]}")
        rows.append(json.loads(out.strip().splitlines()[-1]))
    return {
        "peak": max(r["peak"] for r in rows),
        "seconds": max(r["seconds"] for r in rows),
        "reset": all(r["reset"] for r in rows),
    }


def estimate(a: argparse.Namespace, preset: str, engine: str):  # type: ignore[no-untyped-def]
    from polymnesia.training.memory import Setup, plan
    from polymnesia.training.model_shape import ModelShape

    shape = ModelShape.from_preset(preset, a.vocab)
    setup = Setup(
        micro_batch=a.batch,
        seq_len=a.block,
        precision="fp32",
        engine=engine,  # type: ignore[arg-type]
        devices=1 if engine == "single" else 2,
        gradient_checkpointing=a.checkpointing,
        attention=a.attention,
        device_type="cpu",
    )
    return plan(shape, setup, label=f"{preset}/{engine}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", default="tiny,small")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--batch", type=int, default=16, help="sequences per process per step")
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--attention", default="sdpa", choices=["sdpa", "eager"])
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument(
        "--loop",
        choices=["plain", "polymnesia"],
        default="plain",
        help="plain: a bare torch loop (DDP or fully_shard as the engine says); polymnesia: "
        "polymnesia's train() (Accelerate; fsdp2 needs train.engine in the loop)",
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--preset", help=argparse.SUPPRESS)
    ap.add_argument("--engine", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a)
        return
    print(
        f"cpu, vocabulary {a.vocab}, micro-batch {a.batch} x {a.block} per process, "
        f"{a.steps} steps, fp32, attention {a.attention}, {a.loop} loop"
        + (", gradient checkpointing" if a.checkpointing else "")
    )
    print(f"{'case':14s} {'estimate MiB':>12s} {'measured MiB':>12s} {'ratio':>6s}  estimate")
    for preset in a.presets.split(","):
        for engine in a.engines.split(","):
            p = estimate(a, preset, engine)
            m = measure(a, preset, engine)
            ratio = p.total / m["peak"]
            print(
                f"{preset + '/' + engine:14s} {p.total / 2**20:12.1f} {m['peak'] / 2**20:12.1f} "
                f"{ratio:6.2f}  {p.line()}",
                flush=True,
            )


if __name__ == "__main__":
    main()
