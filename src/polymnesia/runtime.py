"""Where a stage runs: device, precision and process rank/count, on Accelerate's state.

Accelerate only treats a ``torchrun``-launched CPU job as distributed when it is
told to use the CPU; on machines without CUDA we say so, so that
``torchrun --nproc_per_node 2 -m polymnesia.cli.main run ...`` works on a laptop
exactly as ``accelerate launch`` does on GPUs.

:class:`Runtime` is what every model-running stage asks for its placement:
:func:`current` reads the process's device, rank and process count from
Accelerate's ``PartialState`` (one per process, shared with the training
loop) and adds the precision the stage's config asks for. ``place`` moves a
model there for inference (cast to bf16/fp16 when asked, ``eval()``);
``shard`` and ``gather`` split a list of items over the processes and put
the per-item results back in input order, so 1 and N processes give the same
scores. Tests and benchmarks substitute a runtime with :func:`using`.

This module is read by config sections (``Precision``) and by the command line before any
model is needed, so it imports torch only inside the functions that use it: a config is read
without loading torch.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    import torch

Precision = Literal["no", "fp16", "bf16"]
PRECISIONS: tuple[str, ...] = ("no", "fp16", "bf16")

T = TypeVar("T")
M = TypeVar("M", bound="torch.nn.Module")


def dtype_of(precision: Precision) -> torch.dtype:
    """The torch dtype of ``precision`` (``no``: float32)."""
    import torch

    return {"no": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]


def use_cpu() -> bool:
    import torch

    return not torch.cuda.is_available()


def partial_state() -> Any:
    from accelerate import PartialState

    return PartialState(cpu=use_cpu())


def shutdown() -> None:
    """Leave the process group, if this process joined one, once its work is done: gloo and
    NCCL threads still running when the interpreter exits can abort the process (SIGABRT,
    "terminate called without an active exception") after it has finished, and the launcher
    then reports the whole run as failed."""
    dist = sys.modules.get("torch.distributed")  # not imported: no group was joined
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def use_precision(precision: Precision) -> None:
    """Let the next ``Accelerator`` in this process train in ``precision``.

    Accelerate keeps one ``AcceleratorState`` per process and refuses an
    ``Accelerator`` whose ``mixed_precision`` differs from the first one's
    ("AcceleratorState has already been initialized and cannot be changed"),
    so a pipeline whose stages train in different precisions stopped at its
    second stage. The accelerator state (precision, engine plugins) is reset
    when the precision changes; the process state (``PartialState``: device,
    process group) is kept, so the processes stay connected.
    """
    from accelerate.state import AcceleratorState

    shared = AcceleratorState._shared_state
    if shared and shared.get("_mixed_precision") not in (None, precision):
        AcceleratorState._reset_state(reset_partial_state=False)


#: bytes of float32 logits made at once where a head scores many positions (evaluation, the
#: chunked training loss), by device type: the memory this takes is bounded whatever the
#: vocabulary (a 256k vocabulary makes 1 GB of logits per 1,000 positions), and on a CPU the
#: chunks stay in reused memory (unchunked, an 8,192-token batch of a 2k vocabulary makes
#: 64 MB, mapped and faulted in afresh each time); larger on accelerators, where a chunk
#: costs a few kernel launches; never fewer than MIN_LOGIT_CHUNK_ROWS positions, below which
#: the head's matrix products run far from the device's speed (measured on a 2-core CPU with a
#: 32k vocabulary: 32 rows per chunk were 1.6x slower than 128, docs/benchmarks.md)
LOGIT_CHUNK_BYTES: dict[str, int] = {"cpu": 4 * 2**20}
LOGIT_CHUNK_BYTES_ACCELERATOR = 256 * 2**20
MIN_LOGIT_CHUNK_ROWS = 256


def logit_chunk_rows(vocab: int, device: torch.device | str) -> int:
    """Positions per chunk of logits for a ``vocab``-wide head on ``device``."""
    import torch

    kind = torch.device(device).type
    budget = LOGIT_CHUNK_BYTES.get(kind, LOGIT_CHUNK_BYTES_ACCELERATOR)
    return max(MIN_LOGIT_CHUNK_ROWS, budget // (4 * max(1, vocab)))


def is_terminal(stream: Any = None) -> bool:
    """Whether ``stream`` (default: standard error) is a terminal, where progress may redraw
    itself; a file (``nohup``, a batch scheduler's log, CI) gets plain lines instead."""
    isatty = getattr(sys.stderr if stream is None else stream, "isatty", None)
    return bool(callable(isatty) and isatty())


def say(line: str) -> None:
    """One log line on standard error (every process may say it; ranks are prefixed)."""
    print(f"[polymnesia] {line}", file=sys.stderr, flush=True)


#: the lines :func:`say_once` has said in this process
_SAID: set[str] = set()


def say_once(line: str) -> None:
    """:func:`say`, unless this process has said the same line already: a note that every
    stage of a run would repeat word for word (the same head loaded onto the same checkpoint
    by each of lf_mlf's arms) is said once per run."""
    if line not in _SAID:
        _SAID.add(line)
        say(line)


@dataclass(frozen=True)
class Runtime:
    """The device, inference precision and process topology one stage runs with."""

    device: torch.device
    rank: int = 0
    world: int = 1
    precision: Precision = "no"

    @property
    def dtype(self) -> torch.dtype:
        return dtype_of(self.precision)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def with_precision(self, precision: Precision) -> Runtime:
        return replace(self, precision=precision)

    def local(self) -> Runtime:
        """The same device and precision, seen as a single process (for main-only stages)."""
        return replace(self, rank=0, world=1)

    def place(self, model: M, *, stage: str = "") -> M:
        """``model`` on this device in this precision, in eval mode (call outside inference mode).
        On a CPU whose products in that precision are far slower than float32's, one line
        says so (:func:`slow_precision_note`)."""
        note = slow_precision_note(self.device, self.precision)
        if note:
            say(f"{stage or 'inference'}: {note}")
        if self.precision == "no":
            moved = model.to(device=self.device)
        else:
            moved = model.to(device=self.device, dtype=self.dtype)
        moved.eval()
        return moved

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """Autocast to this precision on this device (nothing for ``no``): inference in
        bf16/fp16 for a model that must stay float32 in memory (one still to be saved)."""
        if self.precision == "no":
            return contextlib.nullcontext()
        note = slow_precision_note(self.device, self.precision)
        if note:
            say(f"inference: {note}")
        import torch

        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def shard(self, items: Sequence[T]) -> list[T]:
        """This process's items: ``items[rank::world]``."""
        return list(items)[self.rank :: self.world]

    def gather(self, local: Sequence[T], n: int) -> list[T]:
        """Per-item results of every process's :meth:`shard`, back in input order (``n`` items)."""
        if self.world == 1:
            return list(local)
        import torch.distributed as dist

        parts: list[Any] = [None] * self.world
        dist.all_gather_object(parts, list(local))
        out: list[Any] = [None] * n
        for r, part in enumerate(parts):
            out[r :: self.world] = part
        return out

    def sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums over processes (float64, so 1 and N processes agree)."""
        if self.world == 1:
            return [float(v) for v in values]
        import torch
        import torch.distributed as dist

        t = torch.tensor([float(v) for v in values], dtype=torch.float64)
        if dist.get_backend() == "nccl":
            t = t.to(self.device)
        dist.all_reduce(t)
        return [float(v) for v in t.cpu().tolist()]


_OVERRIDE: list[Runtime] = []
_SLOWDOWN: dict[torch.dtype, float] = {}
#: a precision whose CPU matrix products are this many times slower than float32's gets a note
SLOW_PRECISION_RATIO = 4.0


def precision_slowdown(dtype: torch.dtype, n: int = 256) -> float:
    """How many times slower an ``n x n`` CPU matrix product runs in ``dtype`` than in
    float32 (best of 3 each; measured once per process and dtype, about 0.1 s where bf16
    has no matrix instructions and far less where it has)."""
    import time

    import torch

    if dtype not in _SLOWDOWN:

        def best(dt: torch.dtype) -> float:
            a = torch.randn(n, n).to(dt)
            b = torch.randn(n, n).to(dt)
            a @ b
            times = []
            for _ in range(3):
                start = time.perf_counter()
                a @ b
                times.append(time.perf_counter() - start)
            return min(times)

        _SLOWDOWN[dtype] = best(dtype) / max(best(torch.float32), 1e-9)
    return _SLOWDOWN[dtype]


def slow_precision_note(device: torch.device, precision: Precision) -> str | None:
    """A note when ``precision`` makes inference on this CPU much slower than float32 (CPUs
    without bf16/fp16 matrix instructions: about 100x for bf16 on a 2-core AMD EPYC VM),
    said once per process and precision; None elsewhere."""
    if device.type != "cpu" or precision == "no" or precision in _NOTED:
        return None
    ratio = precision_slowdown(dtype_of(precision))
    if ratio < SLOW_PRECISION_RATIO:
        return None
    _NOTED.add(precision)
    return (
        f"{precision} matrix products run {ratio:.0f}x slower than float32 on this CPU "
        "(measured now); precision no would be faster here"
    )


_NOTED: set[str] = set()


def current(precision: Precision = "no", *, sharded: bool = True) -> Runtime:
    """This process's runtime with ``precision``; ``sharded=False`` sees one process (rank 0 of
    1).
    """
    if _OVERRIDE:
        rt = _OVERRIDE[-1].with_precision(precision)
    else:
        import torch

        state = partial_state()
        rt = Runtime(
            device=torch.device(state.device),
            rank=int(state.process_index),
            world=int(state.num_processes),
            precision=precision,
        )
    return rt if sharded else rt.local()


def on_cpu(stage: str, why: str, precision: Precision = "no") -> Runtime:
    """A single-process CPU runtime for a stage that must run there; says why in one line."""
    say(f"{stage}: runs on the CPU: {why}")
    import torch

    return Runtime(device=torch.device("cpu"), precision=precision)


@contextlib.contextmanager
def using(rt: Runtime) -> Iterator[Runtime]:
    """Make :func:`current` return ``rt`` (with each caller's precision) inside the block."""
    _OVERRIDE.append(rt)
    try:
        yield rt
    finally:
        _OVERRIDE.pop()
