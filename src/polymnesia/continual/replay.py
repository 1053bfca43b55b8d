"""Replay of real data in sequential learning: a buffer of earlier languages' training examples.

The ``replay`` arm of ``lifelong`` (issue 27) trains language after language as VANILLA
does, with examples of the languages learned before mixed into each step's training set
(experience replay; Chaudhry et al. 2019, *On Tiny Episodic Memories in Continual
Learning*, for the reservoir buffer). After step ``k`` the buffer takes in language ``l_k``'s
training examples; step ``k + 1`` trains on ``l_{k+1}``'s examples plus examples drawn from
the buffer, so that ``share`` of its training set is replayed. Two buffers:

* ``reservoir``: at most ``size`` examples over all languages so far, kept by reservoir
  sampling (Vitter's algorithm R) over the stream of examples in the order they were
  learned: after ``N`` examples each is in the buffer with probability ``size / N``;
* ``per_language``: a fixed sample of ``size`` examples of every learned language (a quota;
  the buffer grows by ``size`` a language).

The buffer is stored as references, ``(language, index)`` into that language's training
examples as the step stage loads them (same cap, same order, so the same examples), in
``replay_buffer.json`` beside the step's model; the next step reads it from its input
``prev``. Everything is drawn from generators seeded by the run's seed and the step, so a
rerun draws the same buffer and the same replayed examples.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.errors import DataError
from polymnesia.io import atomic_write_json

#: the buffer a replay step writes beside its ``model/`` for the next step
BUFFER_FILE = "replay_buffer.json"

Entry = tuple[str, int]


class ReplayBufferConfig(StrictModel):
    """The ``replay`` arm's buffer and mixing share (``lifelong``'s ``replay`` section)."""

    buffer: Literal["reservoir", "per_language"] = Field(
        "reservoir",
        description="reservoir: 'size' examples over all earlier languages (reservoir sampling); "
        "per_language: a fixed sample of 'size' examples of each earlier language",
    )
    size: int = Field(64, gt=0, description="buffer capacity (reservoir) or quota per language")
    share: float = Field(
        0.25, gt=0, lt=1, description="share of each step's training examples drawn from the buffer"
    )


@dataclass(frozen=True)
class Buffer:
    """Stored references to earlier languages' training examples, and how many were seen."""

    entries: tuple[Entry, ...] = ()
    seen: int = 0


def _rng(seed: int, *keys: int) -> np.random.Generator:
    return np.random.default_rng([seed, *keys])


def add_language(buffer: Buffer, lang: str, n: int, cfg: ReplayBufferConfig, seed: int) -> Buffer:
    """``buffer`` after taking in language ``lang``'s ``n`` training examples (in order)."""
    if n <= 0:
        return buffer
    rng = _rng(seed, buffer.seen, n)
    if cfg.buffer == "per_language":
        picked = np.sort(rng.choice(n, size=min(cfg.size, n), replace=False))
        return Buffer((*buffer.entries, *((lang, int(i)) for i in picked)), buffer.seen + n)
    entries, seen = list(buffer.entries), buffer.seen
    for i in range(n):  # algorithm R: item number seen+1 replaces a slot with prob size/(seen+1)
        if len(entries) < cfg.size:
            entries.append((lang, i))
        else:
            j = int(rng.integers(0, seen + 1))
            if j < cfg.size:
                entries[j] = (lang, i)
        seen += 1
    return Buffer(tuple(entries), seen)


def replay_count(n_current: int, share: float) -> int:
    """Replayed examples to add to ``n_current`` new ones so that they make ``share`` of the
    mixed set: ``round(share / (1 - share) * n_current)``."""
    return int(round(share / (1 - share) * n_current))


def draw(buffer: Buffer, count: int, seed: int, step: int) -> list[Entry]:
    """``count`` entries of ``buffer``: a seeded permutation of it, repeated when ``count``
    exceeds its size (each entry used as often as the others, give or take one)."""
    if not buffer.entries or count <= 0:
        return []
    rng = _rng(seed, step, len(buffer.entries))
    out: list[Entry] = []
    while len(out) < count:
        out += [buffer.entries[int(i)] for i in rng.permutation(len(buffer.entries))]
    return out[:count]


def replayed_examples(
    buffer: Buffer,
    count: int,
    load: Callable[[str], Sequence[dict[str, Any]]],
    seed: int,
    step: int,
) -> list[tuple[str, dict[str, Any]]]:
    """``(language, example)`` for ``count`` drawn entries; ``load(lang)`` gives a language's
    training examples as the step that buffered them loaded them."""
    cache: dict[str, Sequence[dict[str, Any]]] = {}
    out = []
    for lang, i in draw(buffer, count, seed, step):
        if lang not in cache:
            cache[lang] = load(lang)
        examples = cache[lang]
        if i >= len(examples):
            raise DataError(
                f"replay buffer: example {i} of '{lang}' is not among its {len(examples)} "
                "training examples; the buffer was written with other data settings"
            )
        out.append((lang, examples[i]))
    return out


def write_buffer(path: Path, buffer: Buffer, cfg: ReplayBufferConfig) -> None:
    atomic_write_json(
        path,
        {
            **cfg.model_dump(mode="json"),
            "seen": buffer.seen,
            "entries": [list(e) for e in buffer.entries],
        },
    )


def read_buffer(folder: Path | None, cfg: ReplayBufferConfig) -> Buffer:
    """The buffer a previous step wrote in ``folder`` (empty for a first step: ``None``);
    a buffer written with other settings is one line."""
    if folder is None:
        return Buffer()
    path = folder / BUFFER_FILE
    if not path.is_file():
        raise DataError(f"replay: no buffer at {path}; the previous step must be a replay step")
    raw = json.loads(path.read_text(encoding="utf-8"))
    if raw.get("buffer") != cfg.buffer or raw.get("size") != cfg.size:
        raise DataError(
            f"replay: the buffer at {path} is a {raw.get('buffer')} buffer of size "
            f"{raw.get('size')}, this step wants {cfg.buffer} of size {cfg.size}"
        )
    return Buffer(tuple((str(lang), int(i)) for lang, i in raw["entries"]), int(raw["seen"]))
