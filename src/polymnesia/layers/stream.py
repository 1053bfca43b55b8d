"""Read the tensors of a safetensors model folder one at a time (``safe_open``).

Spectrum's reference scanner loads the whole model onto GPUs
(reference-semantics.md, "Continual-learning metrics"). Here a scan opens each
``*.safetensors`` file lazily and materialises one tensor at a time on the CPU,
so peak memory is about one weight matrix, whatever the model size. Works for
single-file and sharded folders (``model.safetensors.index.json``) alike.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import torch

from polymnesia.errors import PolymnesiaError
from polymnesia.models.anatomy import EMBEDDING_PATTERNS

#: parameter names Spectrum always leaves trainable: embeddings (token, position, type) and
#: the LM head, under each architecture's names (Llama-style, GPT-2, BERT/RoBERTa, T5/BART)
ALWAYS_TRAINABLE = EMBEDDING_PATTERNS


def safetensors_files(folder: str | Path) -> list[Path]:
    """The weight files of a model folder, sorted; one-line error when there are none."""
    path = Path(folder)
    if path.is_file() and path.suffix == ".safetensors":
        return [path]
    if not path.is_dir():
        raise PolymnesiaError(f"model folder not found: {folder}")
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise PolymnesiaError(
            f"no *.safetensors weights in {folder}; save the model with safe_serialization=True"
        )
    return files


def tensor_index(folder: str | Path) -> dict[str, Path]:
    """``name -> file`` for every tensor in the folder (reads only the headers)."""
    from safetensors import safe_open

    out: dict[str, Path] = {}
    for f in safetensors_files(folder):
        with safe_open(str(f), framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 (not a dict)
                out[name] = f
    return out


def iter_tensors(
    folder: str | Path, *, pattern: str | None = None, min_ndim: int = 2
) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(name, tensor)`` one at a time, in name order, for tensors with ``ndim >= min_ndim``.

    ``pattern`` (a regular expression searched in the name) narrows the scan.
    Only the yielded tensor is in memory; drop it before asking for the next.
    """
    from safetensors import safe_open

    rx = re.compile(pattern) if pattern else None
    index = tensor_index(folder)
    by_file: dict[Path, list[str]] = {}
    for name in sorted(index):
        if rx is None or rx.search(name):
            by_file.setdefault(index[name], []).append(name)
    for f, names in by_file.items():
        with safe_open(str(f), framework="pt") as handle:
            for name in names:
                shape = handle.get_slice(name).get_shape()
                if len(shape) >= min_ndim:
                    yield name, handle.get_tensor(name)


def iter_pairs(
    folder_a: str | Path, folder_b: str | Path, *, pattern: str | None = None, min_ndim: int = 2
) -> Iterator[tuple[str, torch.Tensor, torch.Tensor]]:
    """Yield ``(name, a, b)`` for tensors present in both folders, two tensors in memory at a time.

    Names or shapes that differ between the folders are an error (the two
    checkpoints must share an architecture), except tensors absent from one
    side, which are skipped (e.g. a tied LM head saved only once).
    """
    index_b = tensor_index(folder_b)
    for name, a in iter_tensors(folder_a, pattern=pattern, min_ndim=min_ndim):
        if name in index_b:
            yield name, a, _partner(index_b, name, a, str(folder_a), folder_b)


def iter_module_tensors(
    model: torch.nn.Module | Mapping[str, torch.Tensor], *, min_ndim: int = 2
) -> Iterator[tuple[str, torch.Tensor]]:
    """The same stream from an in-memory model (or state dict), in name order."""
    items = dict(model.named_parameters()) if isinstance(model, torch.nn.Module) else dict(model)
    for name in sorted(items):
        t = items[name]
        if t.ndim >= min_ndim:
            yield name, t.detach()


def iter_pairs_with_module(
    model: torch.nn.Module, folder: str | Path, *, pattern: str | None = None, min_ndim: int = 2
) -> Iterator[tuple[str, torch.Tensor, torch.Tensor]]:
    """Yield ``(name, model tensor, folder tensor)`` for matrices in both (folder read lazily)."""
    rx = re.compile(pattern) if pattern else None
    index = tensor_index(folder)
    for name, a in iter_module_tensors(model, min_ndim=min_ndim):
        if name in index and (rx is None or rx.search(name)):
            yield name, a, _partner(index, name, a, "the model", folder)


def _partner(
    index: Mapping[str, Path], name: str, a: torch.Tensor, where: str, folder: str | Path
) -> torch.Tensor:
    """Tensor ``name`` of ``folder`` (its file from ``index``), the shape of ``a`` (from
    ``where``) or an error naming both."""
    from safetensors import safe_open

    with safe_open(str(index[name]), framework="pt") as handle:
        b = handle.get_tensor(name)
    if a.shape != b.shape:
        raise PolymnesiaError(
            f"tensor {name} has shape {tuple(a.shape)} in {where} but {tuple(b.shape)} in {folder}"
        )
    return b
