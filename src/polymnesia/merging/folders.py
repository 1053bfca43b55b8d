"""Merging Hugging Face model folders (safetensors) one tensor at a time
(:func:`merge_folders`), so the memory it needs is one tensor per model plus one merged
tensor, whatever the model's size; the maths is :mod:`polymnesia.merging.maths`."""

from __future__ import annotations

import json
import math
import shutil
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from polymnesia.errors import ConfigError
from polymnesia.io import atomic_dir
from polymnesia.merging.maths import (
    average_tensor,
    merge_weights,
    same_tensor,
    task_arithmetic_tensor,
)
from polymnesia.merging.ties import ties_tensor

#: the files of a model folder that are not weights, copied from the base (or first) model
WEIGHT_SUFFIXES = (".safetensors", ".safetensors.index.json", ".bin", ".bin.index.json")
#: files whose bytes must agree between merged models (same tokenizer)
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model", "vocab.txt")
#: the ways merge_folders merges
MERGES = ("average", "task_arithmetic", "ties")


def _weight_index(folder: Path) -> dict[str, Path]:
    """Tensor name -> the safetensors file holding it (one file or a sharded index)."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        mapping = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        return {k: folder / v for k, v in mapping.items()}
    single = folder / "model.safetensors"
    if not single.is_file():
        raise ConfigError(f"merge: {folder} holds no model.safetensors (or its index)")
    from safetensors import safe_open

    with safe_open(str(single), "pt") as f:
        return dict.fromkeys(f.keys(), single)


def _check_tokenizers(folders: Sequence[Path]) -> None:
    for name in TOKENIZER_FILES:
        present = [f / name for f in folders if (f / name).is_file()]
        if 0 < len(present) < len(folders) or len({p.read_bytes() for p in present}) > 1:
            raise ConfigError(
                f"merge: {name} differs between {folders[0]} and the other models: "
                "models with one tokenizer only"
            )


class _Reader:
    """Opens each safetensors file of a folder once; reads one tensor at a time."""

    def __init__(self, folder: Path) -> None:
        from safetensors import safe_open

        self.index = _weight_index(folder)
        self.handles = {p: safe_open(str(p), "pt") for p in set(self.index.values())}

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.handles[self.index[name]].get_slice(name).get_shape())

    def dtype(self, name: str) -> str:
        """The tensor's safetensors dtype name (``F32``, ``BF16``, ``I64``, ...)."""
        return str(self.handles[self.index[name]].get_slice(name).get_dtype())

    def get(self, name: str) -> torch.Tensor:
        return self.handles[self.index[name]].get_tensor(name)


#: safetensors' dtype names of the torch dtypes a merge writes
ST_DTYPES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}
_ST_TORCH = {v: k for k, v in ST_DTYPES.items()}


def _shard_plan(
    names: Sequence[str], reader: _Reader, shard_bytes: int
) -> list[list[tuple[str, torch.dtype, tuple[int, ...]]]]:
    """The output tensors (name, dtype, shape: the first model's) grouped into shards of at
    most ``shard_bytes`` (a larger tensor alone), in ``names``' order."""
    shards: list[list[tuple[str, torch.dtype, tuple[int, ...]]]] = [[]]
    size = 0
    for k in names:
        code = reader.dtype(k)
        if code not in _ST_TORCH:
            raise ConfigError(
                f"merge: {k} has dtype {code}; accepted: {', '.join(sorted(_ST_TORCH))}"
            )
        dtype, shape = _ST_TORCH[code], reader.shape(k)
        nbytes = math.prod(shape) * dtype.itemsize
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append((k, dtype, shape))
        size += nbytes
    return shards


def _write_shard(
    path: Path,
    tensors: Sequence[tuple[str, torch.dtype, tuple[int, ...]]],
    merged: Iterator[torch.Tensor],
) -> None:
    """A safetensors file of ``tensors``, their bytes taken one at a time from ``merged``
    (the header is written first, from the planned dtypes and shapes)."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for k, dtype, shape in tensors:
        end = offset + math.prod(shape) * dtype.itemsize
        header[k] = {"dtype": ST_DTYPES[dtype], "shape": list(shape), "data_offsets": [offset, end]}
        offset = end
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * (-len(head) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for (k, dtype, shape), t in zip(tensors, merged, strict=True):
            if t.dtype != dtype or tuple(t.shape) != shape:
                raise RuntimeError(f"merge: {k} came out {t.dtype} {tuple(t.shape)}")
            f.write(t.contiguous().reshape(-1).view(torch.uint8).numpy().data)


def merge_folders(
    out: Path,
    tuned: Sequence[Path],
    method: str,
    *,
    base: Path | None = None,
    weights: Sequence[float] | None = None,
    lam: float = 1.0,
    density: float = 0.2,
    shard_bytes: int = 2**30,
) -> Path:
    """Merge the model folders ``tuned`` (against ``base`` for ``task_arithmetic`` and
    ``ties``) into the HF folder ``out``, one tensor at a time: memory holds one tensor per
    model and one merged tensor, which is written to its file (safetensors files of at most
    ``shard_bytes``, with an index where there are several) before the next is made. Config
    and tokenizer files are copied from ``base`` (else the first model); other architectures
    or tokenizers are one line before anything is read."""
    if method not in MERGES:
        raise ConfigError(f"merge: unknown method {method!r}; accepted: {', '.join(MERGES)}")
    if method == "average" and base is not None:
        raise ConfigError("merge: average takes no base model")
    if method != "average" and base is None:
        raise ConfigError(f"merge: {method} needs a base model (the task vectors' origin)")
    folders = [*([base] if base is not None else []), *tuned]
    if len(tuned) < (2 if method == "average" else 1):
        raise ConfigError(f"merge: {method} needs more models, got {len(tuned)}")
    _check_tokenizers(folders)
    readers = [_Reader(f) for f in folders]
    names = list(readers[0].index)
    for i, r in enumerate(readers[1:], start=1):
        if set(r.index) != set(names):
            extra = sorted(set(r.index) ^ set(names))[:3]
            raise ConfigError(
                f"merge: {folders[i]} has other tensors than {folders[0]} ({', '.join(extra)}): "
                "models of one architecture only"
            )
        for k in names:
            if r.shape(k) != readers[0].shape(k):
                raise ConfigError(
                    f"merge: {k} has shape {r.shape(k)} in {folders[i]} and "
                    f"{readers[0].shape(k)} in {folders[0]} (another architecture or vocabulary)"
                )
    w = merge_weights(weights, len(tuned)) if method == "average" else []
    plan = _shard_plan(names, readers[0], shard_bytes)
    # TIES writes each merged tensor into one reused buffer (the largest tensor's size)
    room = max(math.prod(shape) * dtype.itemsize for shard in plan for _, dtype, shape in shard)
    buffer = torch.empty(room if method == "ties" else 0, dtype=torch.uint8)

    def merge(k: str, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
        ts = [r.get(k) for r in readers]
        if not ts[0].is_floating_point():
            return same_tensor(ts, k)
        if method == "average":
            return average_tensor(ts, w)
        if method == "task_arithmetic":
            return task_arithmetic_tensor(ts[0], ts[1:], lam)
        into = buffer[: math.prod(shape) * dtype.itemsize].view(dtype).view(shape)
        try:
            return ties_tensor(ts[0], ts[1:], density, lam, out=into)
        except ConfigError as e:  # name the tensor
            raise ConfigError(f"merge: {k}: {e}") from None

    with atomic_dir(out) as tmp:
        files = ["model.safetensors"] if len(plan) == 1 else []
        files = files or [f"model-{i + 1:05d}.safetensors" for i in range(len(plan))]
        for name, shard in zip(files, plan, strict=True):
            _write_shard(tmp / name, shard, (merge(*item) for item in shard))
        if len(plan) > 1:
            index = {k: name for name, shard in zip(files, plan, strict=True) for k, _, _ in shard}
            (tmp / "model.safetensors.index.json").write_text(
                json.dumps({"metadata": {}, "weight_map": index}, indent=1), encoding="utf-8"
            )
        for f in folders[0].iterdir():
            if f.is_file() and not f.name.endswith(WEIGHT_SUFFIXES):
                shutil.copy2(f, tmp / f.name)
    return out


# --- a sequential step merged with the previous one (lifelong's MERGE-TA, MERGE-TIES) ------
