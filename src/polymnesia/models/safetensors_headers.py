"""safetensors headers read by hand, without the library and without a weight
(:func:`read_header`): the 8-byte length field at most :data:`MAX_HEADER_BYTES` and inside
the file, a JSON object of tensors whose dtype is known (:data:`DTYPE_BITS`), whose shape is
a list of whole numbers, and whose ``data_offsets`` cover the data that follows exactly, back
to back, each ``dtype x shape`` bytes long; each entry a :class:`Tensor`. Used by
:mod:`polymnesia.models.folders` before anything loads a local model folder."""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polymnesia.errors import PolymnesiaError

#: the safetensors library's own limit on a header (100 MB)
MAX_HEADER_BYTES = 100_000_000


#: safetensors dtypes and their bits per element
DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "I64": 64,
    "U64": 64,
    "F64": 64,
}


@dataclass(frozen=True)
class Tensor:
    """One entry of a safetensors header."""

    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


def read_header(path: Path) -> dict[str, Tensor]:
    """The tensors of the safetensors file ``path``, its header read and bounded by hand: the
    little-endian 8-byte length, at most :data:`MAX_HEADER_BYTES` and inside the file, then
    the JSON header, each tensor's dtype, shape and ``data_offsets`` checked against the
    bytes that follow (back to back from 0, covering them exactly)."""
    try:
        with path.open("rb") as f:
            size = path.stat().st_size
            head = f.read(8)
            if len(head) < 8:
                raise PolymnesiaError(
                    f"weights file {path} is {size} bytes, shorter than a safetensors header"
                )
            (n,) = struct.unpack("<Q", head)
            if n > size - 8 or n > MAX_HEADER_BYTES:
                than = (
                    f"the file holds after it ({size - 8:,})"
                    if n > size - 8
                    else f"safetensors allows ({MAX_HEADER_BYTES:,})"
                )
                raise PolymnesiaError(
                    f"weights file {path}: its header length field says {n:,} bytes, more than "
                    f"{than}; the file is damaged or not safetensors"
                )
            raw = f.read(n)
    except OSError as e:
        raise PolymnesiaError(
            f"cannot read weights file {path}: {e.strerror or type(e).__name__}"
        ) from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise PolymnesiaError(
            f"weights file {path}: its header is not a JSON object; the file is damaged or not "
            "safetensors"
        ) from None
    if not isinstance(header, dict):
        raise PolymnesiaError(f"weights file {path}: its header is not a JSON object")
    data = size - 8 - n
    tensors: dict[str, Tensor] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        tensors[name] = _tensor(path, name, entry, data)
    start = 0
    for name, t in sorted(tensors.items(), key=lambda kv: (kv[1].begin, kv[1].end)):
        if t.begin != start:
            raise PolymnesiaError(
                f"weights file {path}: tensor '{name}' starts at byte {t.begin:,} of the data, "
                f"expected {start:,} (tensors lie back to back); the file is damaged"
            )
        start = t.end
    if start != data:
        raise PolymnesiaError(
            f"weights file {path}: its tensors cover {start:,} bytes of data but the file holds "
            f"{data:,}; the file is damaged or truncated"
        )
    return tensors


def _tensor(path: Path, name: str, entry: Any, data: int) -> Tensor:
    bad = f"weights file {path}: tensor '{name[:80]}'"
    if not isinstance(entry, dict):
        raise PolymnesiaError(f"{bad} is not described by an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in DTYPE_BITS:
        raise PolymnesiaError(
            f"{bad} has dtype {json.dumps(dtype)[:30]}; accepted: {', '.join(DTYPE_BITS)}"
        )
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise PolymnesiaError(f"{bad} has shape {json.dumps(shape)[:40]}, not whole numbers")
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
    ):
        raise PolymnesiaError(
            f"{bad} has data_offsets {json.dumps(offsets)[:40]}, not [begin, end]"
        )
    begin, end = offsets
    if not 0 <= begin <= end <= data:
        raise PolymnesiaError(
            f"{bad} claims bytes {begin:,} to {end:,} of the data, but the file holds {data:,} "
            "bytes of data; the file is damaged or truncated"
        )
    bits = math.prod(shape) * DTYPE_BITS[dtype]
    if bits != 8 * (end - begin):
        raise PolymnesiaError(
            f"{bad} has {end - begin:,} bytes, but {dtype} x {tuple(shape)} takes "
            f"{bits / 8:,.0f}; the file is damaged"
        )
    return Tensor(dtype, tuple(shape), begin, end)
