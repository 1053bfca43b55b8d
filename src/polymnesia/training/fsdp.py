"""polymnesia's FSDP2 engine: parameters, gradients and optimizer states sharded over processes.

``train.engine: fsdp2`` (or ``POLYMNESIA_ENGINE=fsdp2`` in the launcher's environment)
shards the model with PyTorch's own ``torch.distributed.fsdp.fully_shard``, applied per
decoder block and then at the root (as torchtitan and OLMo-core apply it), on every process
of the run: NCCL on GPUs, gloo on CPUs (so it is tested on CPU processes in CI). Accelerate
keeps the process state, the trackers and the reductions of the loop; it never wraps the
model.

- **Mixed precision:** ``train.mixed_precision: bf16`` computes in bf16 from float32 master
  weights (FSDP2's ``MixedPrecisionPolicy(param_dtype=bf16)``) and reduces gradients in
  float32; ``no`` keeps everything in float32.
- **Offload:** ``train.fsdp2_offload: true`` keeps the sharded parameters, gradients and
  optimizer states in CPU memory (``CPUOffloadPolicy``) and moves each block to the device
  for its forward and backward pass.
- **Activation checkpointing:** ``train.gradient_checkpointing`` as without FSDP2 (the
  model's own, non-reentrant).
- **Gradient accumulation** skips the reduce-scatter of every micro-batch but the last
  (:func:`no_sync`).
- **The loss** is the model's own under FSDP2: the chunked loss calls the LM head outside
  the model's forward pass, where FSDP2 has not gathered its weight.
- **The trained model** is gathered parameter by parameter (one full tensor at a time on the
  device) into a plain copy of the model made before sharding, so a stage saves an ordinary
  Hugging Face folder (:class:`Gatherer`).
- **Checkpoints** hold each process's own shards (:func:`local_state`, :func:`load_local_state`),
  written from the resharded model whatever its state (a forward pass outside training, such
  as an evaluation, leaves the root gathered: :func:`reshard`), with each tensor's full shape
  and placement (:func:`shard_layout`) so that a shard of the wrong shape is found before it is
  loaded. A run resumes on any number of processes: on another number than wrote the
  checkpoint, each process copies its rows of every tensor out of the written shards that
  overlap them (:func:`copy_rows`, :func:`copy_flat_rows`).
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import torch

from polymnesia.errors import ConfigError
from polymnesia.models.anatomy import NotApplicable, blocks

ENGINE_ENV = "POLYMNESIA_ENGINE"


def requested(cfg_engine: str) -> str:
    """The engine a run asks for: ``POLYMNESIA_ENGINE`` from the launcher, else the config's."""
    env = os.environ.get(ENGINE_ENV, "").strip().lower()
    if env and env not in ("auto", "ddp", "fsdp2"):
        raise ConfigError(f"{ENGINE_ENV}={env!r} is not an engine; accepted: auto, ddp, fsdp2")
    return env or cfg_engine


def ensure_process_group(device: torch.device) -> None:
    """A process group for FSDP2's device mesh: the launcher's (torchrun, accelerate launch),
    or, in a single process, a group of one (FSDP2 then only offloads and checkpoints)."""
    import torch.distributed as dist

    if dist.is_initialized():
        return
    store = os.path.join(tempfile.mkdtemp(prefix="polymnesia-pg-"), "store")
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"file://{store}", rank=0, world_size=1)


def skeleton(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` whose parameters live on the meta device (no memory), its buffers
    copied; made before sharding, filled by :class:`Gatherer` after training. Tied parameters
    stay tied (one meta parameter stands for each real one)."""
    memo: dict[int, Any] = {}
    for p in model.parameters():
        meta = torch.nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=p.requires_grad)
        memo[id(p)] = meta
    return copy.deepcopy(model, memo)


def shard(model: torch.nn.Module, cfg: Any, device: torch.device) -> None:
    """``fully_shard`` each decoder block, then the root (embeddings, final norm, head)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import (
        CPUOffloadPolicy,
        MixedPrecisionPolicy,
        OffloadPolicy,
        fully_shard,
    )

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    param_dtype = torch.bfloat16 if cfg.mixed_precision == "bf16" else None
    mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    pin = device.type == "cuda"  # pinned host memory needs CUDA
    offload = CPUOffloadPolicy(pin_memory=pin) if cfg.fsdp2_offload else OffloadPolicy()
    if not cfg.fsdp2_offload:
        model.to(device)
    try:
        units = blocks(model, "train.engine=fsdp2")
    except NotApplicable:
        units = []  # no block list found: one unit, the whole model
    for _, block in units:
        fully_shard(block, mesh=mesh, mp_policy=mp, offload_policy=offload)
    # the root is needed again right at the start of the backward pass: keep it gathered
    fully_shard(model, mesh=mesh, mp_policy=mp, offload_policy=offload, reshard_after_forward=False)


def is_sharded(model: torch.nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


@contextlib.contextmanager
def no_sync(model: torch.nn.Module) -> Iterator[None]:
    """Accumulate this micro-batch's gradients without reduce-scattering them."""
    from torch.distributed.fsdp import FSDPModule

    if not isinstance(model, FSDPModule):
        raise TypeError(f"{type(model).__name__} is not sharded by fully_shard (FSDP2)")
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


def clip_grad_norm(parameters: list[torch.nn.Parameter], max_norm: float | None) -> torch.Tensor:
    """The total norm of the sharded gradients (one all-reduce), clipping at ``max_norm``."""
    from torch.distributed.tensor import DTensor

    grads = [p.grad for p in parameters if p.grad is not None]
    total = torch.nn.utils.get_total_norm(grads)
    if isinstance(total, DTensor):
        total = total.full_tensor()
    if max_norm:
        torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, total)
    return total


def local(t: torch.Tensor) -> torch.Tensor:
    """This process's shard of ``t`` (``t`` itself when it is not a DTensor)."""
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def reshard(model: torch.nn.Module) -> None:
    """Free every gathered (unsharded) parameter of ``model``'s FSDP2 units, so that each
    parameter is this process's shard again. The root is sharded with
    ``reshard_after_forward=False``: a forward pass with no backward pass (an evaluation, early
    stopping's score) leaves its embeddings, final norm and head gathered until then. Local to
    each process (no collective call); a no-op for a unit already resharded."""
    from torch.distributed.fsdp import FSDPModule

    for m in model.modules():
        if isinstance(m, FSDPModule):
            m.reshard()


def shard_rows(rows: int, world: int, rank: int) -> int:
    """How many of a dimension-0 sharded tensor's ``rows`` process ``rank`` of ``world`` holds:
    FSDP2 splits dimension 0 as ``torch.chunk`` does (ceil(rows / world) rows each, the last
    processes fewer or none)."""
    per = -(-rows // world)
    return max(0, min(per, rows - rank * per))


def row_range(rows: int, world: int, rank: int) -> tuple[int, int]:
    """The rows ``[start, stop)`` of a dimension-0 sharded tensor of ``rows`` rows that process
    ``rank`` of ``world`` holds (:func:`shard_rows` of them)."""
    start = min(rows, rank * -(-rows // world))
    return start, start + shard_rows(rows, world, rank)


def local_shape(shape: list[int], world: int, rank: int) -> list[int]:
    """The shape of process ``rank``'s shard of a dimension-0 sharded tensor of ``shape``."""
    return [shard_rows(shape[0], world, rank), *shape[1:]] if shape else []


def copy_rows(
    dst: torch.Tensor,
    src: torch.Tensor,
    shape: list[int],
    written: tuple[int, int],
    current: tuple[int, int],
) -> None:
    """Copy into ``dst`` (process ``current = (rank, world)``'s shard of a dimension-0 sharded
    tensor of full ``shape``) the rows of it that ``src`` holds (the shard of process
    ``written = (rank, world)``), where the two overlap."""
    a0, a1 = row_range(shape[0], written[1], written[0])
    b0, b1 = row_range(shape[0], current[1], current[0])
    lo, hi = max(a0, b0), min(a1, b1)
    if lo < hi:
        dst[lo - b0 : hi - b0].copy_(src[lo - a0 : hi - a0])


def copy_flat_rows(
    dst: torch.Tensor,
    src: torch.Tensor,
    shapes: list[list[int]],
    written: tuple[int, int],
    current: tuple[int, int],
) -> None:
    """:func:`copy_rows` for flat vectors that concatenate the shards of tensors of full
    ``shapes`` (in order), as :func:`flat_local_grads` lays them out: ``src`` of process
    ``written``, ``dst`` of process ``current``."""
    a = b = 0
    for shape in shapes:
        src_shape = local_shape(shape, written[1], written[0])
        dst_shape = local_shape(shape, current[1], current[0])
        n_src, n_dst = math.prod(src_shape), math.prod(dst_shape)
        piece = dst[b : b + n_dst].view(dst_shape)
        copy_rows(piece, src[a : a + n_src].view(src_shape), shape, written, current)
        a, b = a + n_src, b + n_dst


def flat_size(shapes: list[list[int]], world: int, rank: int) -> int:
    """The length of process ``rank``'s flat vector over tensors of full ``shapes``."""
    return sum(math.prod(local_shape(s, world, rank)) for s in shapes)


def shard_layout(model: torch.nn.Module) -> dict[str, dict[str, Any]]:
    """Each tensor of :func:`local_state` with its full shape and placement: ``shard0`` (split
    over processes on dimension 0, :func:`shard_rows`) or ``replicate`` (whole on every
    process: buffers). Call on the resharded model (:func:`reshard`)."""
    from torch.distributed.tensor import DTensor, Shard

    out: dict[str, dict[str, Any]] = {}
    seen: set[int] = set()
    for name, t in [*model.named_parameters(), *model.named_buffers()]:
        if id(t) in seen:
            continue
        seen.add(id(t))
        placement = "replicate"
        if isinstance(t, DTensor):
            if any(isinstance(p, Shard) and p.dim != 0 for p in t.placements):
                raise ConfigError(f"{name} is sharded on another dimension than 0; not saved")
            if any(isinstance(p, Shard) for p in t.placements):
                placement = "shard0"
        out[name] = {"shape": list(t.shape), "placement": placement}
    return out


def local_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter's and buffer's local shard, by name (tied weights once), read from the
    resharded model (:func:`reshard`), whatever state a forward pass left it in."""
    reshard(model)
    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for name, t in [*model.named_parameters(), *model.named_buffers()]:
        if id(t) not in seen:
            seen.add(id(t))
            out[name] = local(t).detach().cpu().contiguous()
    return out


def load_local_state(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy shards saved by :func:`local_state` (or cut from them for this process count)
    back into ``model``."""
    own = dict([*model.named_parameters(), *model.named_buffers()])
    missing = [n for n in state if n not in own]
    if missing:
        raise ConfigError(f"the sharded checkpoint names tensors the model lacks: {missing[:3]}")
    with torch.no_grad():
        for name, value in state.items():
            target = local(own[name])
            if target.shape != value.shape:
                raise ConfigError(
                    f"the sharded checkpoint's {name} has shape {tuple(value.shape)}, this "
                    f"process's shard {tuple(target.shape)}; not loaded"
                )
            target.copy_(value)


def optimizer_to_local(state: Any) -> Any:
    """An optimizer state dict with its DTensors replaced by their local shards."""
    if isinstance(state, dict):
        return {k: optimizer_to_local(v) for k, v in state.items()}
    if isinstance(state, list):
        return [optimizer_to_local(v) for v in state]
    if isinstance(state, torch.Tensor):
        return local(state)
    return state


def optimizer_param_names(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """The name of each parameter of ``optimizer``, in the order its state dict numbers them."""
    names = {id(p): n for n, p in model.named_parameters()}
    return [names[id(p)] for g in optimizer.param_groups for p in g["params"]]


def optimizer_from_local(optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`optimizer_to_local` for ``optimizer``: each per-parameter state
    tensor shaped like its parameter's shard becomes a DTensor laid out like the parameter."""
    from torch.distributed.tensor import DTensor

    params = [p for g in optimizer.param_groups for p in g["params"]]
    out = dict(state)
    per_param: dict[Any, Any] = {}
    for key, entry in state.get("state", {}).items():
        p = params[int(key)]
        new = dict(entry)
        if isinstance(p, DTensor):
            for name, v in entry.items():
                if isinstance(v, torch.Tensor) and v.shape == p.to_local().shape and v.ndim:
                    new[name] = DTensor.from_local(
                        v.to(p.to_local().device),
                        p.device_mesh,
                        p.placements,
                        shape=p.shape,
                        stride=p.stride(),
                        run_check=False,
                    )
        per_param[key] = new
    out["state"] = per_param
    return out


class Gatherer:
    """Turns the sharded, trained model back into a plain one: each parameter's full tensor
    (gathered by every process, one at a time) is copied into :func:`skeleton`'s copy."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.plain = skeleton(model)

    def gather(self, sharded: torch.nn.Module) -> torch.nn.Module:
        from torch.distributed.tensor import DTensor

        names = dict(sharded.named_parameters(remove_duplicate=False))
        full: dict[int, torch.nn.Parameter] = {}  # id of a meta parameter -> its full value
        for name, p in self.plain.named_parameters():  # tied parameters once
            src = names[name]
            value = src.full_tensor() if isinstance(src, DTensor) else src.detach()
            full[id(p)] = torch.nn.Parameter(value.detach().cpu().clone(), p.requires_grad)
        for module in self.plain.modules():
            for pname, p in list(module.named_parameters(recurse=False)):
                setattr(module, pname, full[id(p)])
        for name, buf in sharded.named_buffers():
            mod_name, _, bname = name.rpartition(".")
            owner = self.plain.get_submodule(mod_name) if mod_name else self.plain
            if bname in owner._buffers:
                owner._buffers[bname] = buf.detach().cpu().clone()
        return self.plain


def is_dtensor(t: Any) -> bool:
    from torch.distributed.tensor import DTensor

    return isinstance(t, DTensor)


def groups_by_name(model: torch.nn.Module, groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Optimizer parameter groups with each parameter replaced by its name (sharding replaces
    the parameter objects and keeps their names)."""
    names = {id(p): n for n, p in model.named_parameters()}
    return [{**g, "params": [names[id(p)] for p in g["params"]]} for g in groups]


def groups_from_names(model: torch.nn.Module, groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The inverse of :func:`groups_by_name` on the sharded model."""
    params = dict(model.named_parameters())
    return [{**g, "params": [params[n] for n in g["params"]]} for g in groups]


def local_rows(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """This process's rows of ``t`` (sharded on its first dimension, or whole) and the index
    in the full tensor of the first of them: edits of rows ``[a, b)`` of the full tensor go
    to rows ``[a - start, b - start)`` of the local tensor, clipped to its length."""
    from torch.distributed.tensor import DTensor

    if not isinstance(t, DTensor):
        return t, 0
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    _, offset = compute_local_shape_and_global_offset(t.shape, t.device_mesh, t.placements)
    return t.to_local(), int(offset[0]) if len(offset) else 0


def row_slice(t: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """The local view of rows ``[start, stop)`` of the full tensor ``t`` held by this process
    (possibly empty)."""
    rows, first = local_rows(t)
    a = min(max(start - first, 0), rows.shape[0])
    b = min(max(stop - first, 0), rows.shape[0])
    return rows[a:b]


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """The whole of ``t``: gathered from every process when it is sharded (a collective call)."""
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def flat_local_grads(params: list[torch.nn.Parameter]) -> torch.Tensor:
    """This process's shards of the parameters' gradients, flat (zeros where there is none)."""
    pieces = [
        (local(p.grad) if p.grad is not None else torch.zeros_like(local(p))).reshape(-1)
        for p in params
    ]
    return torch.cat(pieces)


def set_local_grad(p: torch.nn.Parameter, value: torch.Tensor) -> None:
    """Make ``value`` (shaped like this process's shard) the shard of ``p``'s gradient."""
    from torch.distributed.tensor import DTensor

    if not isinstance(p, DTensor):
        p.grad = value.to(p.dtype).clone()
        return
    if p.grad is not None:
        local(p.grad).copy_(value)
        return
    p.grad = DTensor.from_local(
        value.to(p.dtype).clone(),
        p.device_mesh,
        p.placements,
        shape=p.shape,
        stride=p.stride(),
        run_check=False,
    )


def assign_flat_local_grads(params: list[torch.nn.Parameter], vec: torch.Tensor) -> None:
    """The inverse of :func:`flat_local_grads`: write ``vec`` into each gradient's shard."""
    offset = 0
    for p in params:
        shard = local(p)
        set_local_grad(p, vec[offset : offset + shard.numel()].view_as(shard))
        offset += shard.numel()
    if offset != vec.numel():
        raise ValueError(f"a flat gradient of {vec.numel()} entries for {offset} local entries")
