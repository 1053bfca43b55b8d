"""Time of merging model folders against the time of reading and writing them (issue 27).

Writes two fine-tuned-like ``base``-preset Mistral folders and their common base (safetensors,
float32) to a temporary directory, then, in alternating rounds, times

* ``io``: reading every tensor of the input folders into memory and writing one folder of
  the result's size (``safetensors`` load and save, nothing computed): the least any merge
  must do;
* ``average``: :func:`polymnesia.merging.folders.merge_folders` averaging the two models;
* ``task_arithmetic`` and ``ties``: the same against the base (three folders read).

Each merge is compared with the ``io`` time of the same inputs (two folders for ``average``,
three for the others). The goal: a merge of two ``base``-preset models takes at most 2x the
time of reading and writing them. The files sit in the page cache after the first round, for
the merge and for ``io`` alike. Besides wall-clock time each side's CPU time (user and system,
``time.process_time``) is compared the same way: on a machine shared with other work it moves
less than the wall-clock time does.

    python benchmarks/merge.py [--rounds 5] [--preset base] [--vocab 32000]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from _common import tiny_model
from safetensors import safe_open
from safetensors.torch import save_file

from polymnesia.merging.folders import merge_folders

MERGES = ("average", "task_arithmetic", "ties")


def write_models(root: Path, preset: str, vocab: int) -> tuple[Path, Path, Path]:
    """The base and two models that moved away from it (Gaussian steps of 1% of each weight's
    scale), saved as HF folders."""
    base = tiny_model(vocab, preset, seed=0)
    folders = []
    for i, name in enumerate(("base", "a", "b")):
        model = tiny_model(vocab, preset, seed=0)
        if i:
            g = torch.Generator().manual_seed(i)
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(torch.randn(p.shape, generator=g) * 0.01 * p.std().clamp_min(1e-3))
        model.save_pretrained(root / name, safe_serialization=True)
        folders.append(root / name)
    del base
    return folders[0], folders[1], folders[2]


def io_time(inputs: list[Path], out: Path) -> tuple[float, float]:
    """Read every tensor of ``inputs`` and write a folder with the first one's tensors:
    (wall-clock, CPU) seconds."""
    t0, c0 = time.perf_counter(), time.process_time()
    result: dict[str, torch.Tensor] = {}
    for i, folder in enumerate(inputs):
        with safe_open(str(folder / "model.safetensors"), "pt") as f:
            for k in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
                t = f.get_tensor(k).clone()  # read every byte (the file is mapped lazily)
                if i == 0:
                    result[k] = t
    out.mkdir()
    save_file(result, str(out / "model.safetensors"), metadata={"format": "pt"})
    elapsed = time.perf_counter() - t0, time.process_time() - c0
    shutil.rmtree(out)
    return elapsed


def merge_time(method: str, base: Path, a: Path, b: Path, out: Path) -> tuple[float, float]:
    """(wall-clock, CPU) seconds of one merge."""
    t0, c0 = time.perf_counter(), time.process_time()
    if method == "average":
        merge_folders(out, [a, b], "average")
    else:
        merge_folders(out, [a, b], method, base=base, lam=1.0, density=0.2)
    elapsed = time.perf_counter() - t0, time.process_time() - c0
    shutil.rmtree(out)
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--preset", default="base")
    ap.add_argument("--vocab", type=int, default=32000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base, a, b = write_models(root, args.preset, args.vocab)
        size = (a / "model.safetensors").stat().st_size
        ratios: dict[str, list[float]] = {m: [] for m in MERGES}
        cpu: dict[str, list[float]] = {m: [] for m in MERGES}
        for r in range(args.rounds):
            io2 = io_time([a, b], root / "io")
            io3 = io_time([base, a, b], root / "io")
            times = {m: merge_time(m, base, a, b, root / "out") for m in MERGES}
            for m, (wall, used) in times.items():
                io = io2 if m == "average" else io3
                ratios[m].append(wall / io[0])
                cpu[m].append(used / io[1])
            print(
                f"round {r}: io(2) {io2[0]:.2f} s (cpu {io2[1]:.2f}), "
                f"io(3) {io3[0]:.2f} s (cpu {io3[1]:.2f}), "
                + ", ".join(f"{m} {t:.2f} s (cpu {c:.2f})" for m, (t, c) in times.items())
            )
    print(f"{args.preset} preset, vocab {args.vocab}, {size / 2**20:.0f} MiB per model (float32)")
    for m, rs in ratios.items():
        cs = cpu[m]
        print(
            f"{m}: {statistics.median(rs):.2f}x io (range {min(rs):.2f}-{max(rs):.2f}); "
            f"CPU time {statistics.median(cs):.2f}x (range {min(cs):.2f}-{max(cs):.2f})"
        )


if __name__ == "__main__":
    main()
