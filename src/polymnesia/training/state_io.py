"""Save and load nested training states without pickle: tensors in safetensors, the rest in JSON.

Optimizer, scheduler, RNG and plugin states are trees of dicts, lists,
tuples, numbers, strings, tensors and numpy arrays. :func:`save_tree` writes
the tensors to ``STEM.safetensors`` and the structure to ``STEM.json``, where
a tensor is ``{"__tensor__": key}``, a numpy array ``{"__ndarray__": key,
"dtype": ...}``, a tuple ``{"__tuple__": [...]}`` and a mapping with
non-string keys (an optimizer's per-parameter state) ``{"__map__": [[k, v],
...]}``. Reading builds only those types back: nothing in a checkpoint can
make polymnesia run code (a pickle could).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from polymnesia.io import atomic_write_bytes, atomic_write_text

_TAGS = ("__tensor__", "__ndarray__", "__tuple__", "__map__", "__float__")


class _Encoder:
    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self._ptrs: set[int] = set()

    def _tensor(self, t: torch.Tensor) -> str:
        key = f"t{len(self.tensors)}"
        cpu = t.detach().to("cpu")
        if cpu.data_ptr() == t.data_ptr() or cpu.data_ptr() in self._ptrs:
            cpu = cpu.clone()  # safetensors refuses tensors that share memory
        self._ptrs.add(cpu.data_ptr())
        self.tensors[key] = cpu.contiguous()
        return key

    def encode(self, obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            return {"__tensor__": self._tensor(obj)}
        if isinstance(obj, np.ndarray):
            wide = torch.from_numpy(obj.astype(np.int64 if obj.dtype.kind in "iub" else obj.dtype))
            return {"__ndarray__": self._tensor(wide), "dtype": obj.dtype.str}
        if isinstance(obj, np.generic):
            return self.encode(obj.item())
        if isinstance(obj, float) and not math.isfinite(obj):
            return {"__float__": repr(obj)}
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        if isinstance(obj, tuple):
            return {"__tuple__": [self.encode(v) for v in obj]}
        if isinstance(obj, list):
            return [self.encode(v) for v in obj]
        if isinstance(obj, dict):
            if all(isinstance(k, str) for k in obj) and not set(obj) & set(_TAGS):
                return {k: self.encode(v) for k, v in obj.items()}
            return {"__map__": [[self.encode(k), self.encode(v)] for k, v in obj.items()]}
        raise TypeError(
            f"cannot save a {type(obj).__name__} in a training state; state_dict() must return "
            "dicts, lists, tuples, numbers, strings, tensors or numpy arrays"
        )


def _decode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__tensor__" in obj:
        return tensors[obj["__tensor__"]]
    if "__ndarray__" in obj:
        return tensors[obj["__ndarray__"]].numpy().astype(np.dtype(obj["dtype"]))
    if "__float__" in obj:
        return float(obj["__float__"])
    if "__tuple__" in obj:
        return tuple(_decode(v, tensors) for v in obj["__tuple__"])
    if "__map__" in obj:
        return {_decode(k, tensors): _decode(v, tensors) for k, v in obj["__map__"]}
    return {k: _decode(v, tensors) for k, v in obj.items()}


def save_tree(folder: Path, stem: str, tree: Any) -> list[str]:
    """Write ``tree`` as ``folder/STEM.json`` (+ ``STEM.safetensors``); return the file names."""
    from safetensors.torch import save

    enc = _Encoder()
    structure = enc.encode(tree)
    names = [f"{stem}.json"]
    if enc.tensors:
        atomic_write_bytes(folder / f"{stem}.safetensors", save(enc.tensors))
        names.append(f"{stem}.safetensors")
    atomic_write_text(folder / f"{stem}.json", json.dumps(structure, allow_nan=False))
    return names


def load_tree(folder: Path, stem: str) -> Any:
    """Read back what :func:`save_tree` wrote (tensors on the CPU)."""
    from safetensors.torch import load_file

    structure = json.loads((folder / f"{stem}.json").read_text(encoding="utf-8"))
    blob = folder / f"{stem}.safetensors"
    tensors = load_file(str(blob), device="cpu") if blob.is_file() else {}
    return _decode(structure, tensors)
