"""Training data for the loop: a resumable index stream and collators.

The loop asks for the indices of one *global* batch per optimizer step and
slices them by micro-batch and process, so one process and N processes see the
same global batch (the distributed test relies on it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch

from polymnesia.errors import DataError


class TrainData(Protocol):
    def __len__(self) -> int: ...

    def collate(self, indices: Sequence[int]) -> dict[str, torch.Tensor]: ...


class IndexStream:
    """Seeded epochs of shuffled indices; its position is part of every checkpoint."""

    def __init__(self, n: int, seed: int) -> None:
        if n <= 0:
            raise ValueError("cannot stream an empty dataset")
        self.n, self.seed = n, seed
        self.epoch, self.cursor = 0, 0
        self._perm = self._permutation(0)

    def _permutation(self, epoch: int) -> list[int]:
        g = torch.Generator().manual_seed(self.seed * 100_003 + epoch)
        return torch.randperm(self.n, generator=g).tolist()

    def next(self, k: int) -> list[int]:
        out: list[int] = []
        while len(out) < k:
            if self.cursor >= self.n:
                self.epoch, self.cursor = self.epoch + 1, 0
                self._perm = self._permutation(self.epoch)
            take = min(k - len(out), self.n - self.cursor)
            out.extend(self._perm[self.cursor : self.cursor + take])
            self.cursor += take
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "cursor": self.cursor, "seed": self.seed, "n": self.n}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch, self.cursor = int(state["epoch"]), int(state["cursor"])
        self._perm = self._permutation(self.epoch)


class PackedLMData:
    """Fixed-length blocks of a packed token stream for causal LM training."""

    def __init__(self, blocks: torch.Tensor) -> None:
        if blocks.ndim != 2 or blocks.shape[0] == 0:
            raise ValueError("PackedLMData needs a non-empty [N, block_size] tensor")
        self.blocks = blocks.long()

    def __len__(self) -> int:
        return self.blocks.shape[0]

    def collate(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        x = self.blocks[list(indices)]  # (B, L)
        return {"input_ids": x, "labels": x.clone()}


def pack_documents(docs: Sequence[Sequence[int]], block_size: int, eos_id: int) -> torch.Tensor:
    """Concatenate token lists, each followed by EOS, and cut into [N, block_size] blocks."""
    flat: list[int] = []
    for d in docs:
        flat.extend(d)
        flat.append(eos_id)
    n = len(flat) // block_size
    if n == 0:
        raise DataError(
            f"the training text is {len(flat)} tokens, not enough for one block of "
            f"block_size {block_size}; lower train.block_size or give more text"
        )
    return torch.tensor(flat[: n * block_size], dtype=torch.long).view(n, block_size)


class PaddedExamples:
    """Variable-length examples (``input_ids``, ``labels``) padded per micro-batch."""

    def __init__(self, examples: Sequence[dict[str, list[int]]], pad_id: int) -> None:
        if not examples:
            raise ValueError("no training examples")
        self.examples, self.pad_id = list(examples), pad_id

    def __len__(self) -> int:
        return len(self.examples)

    def collate(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        rows = [self.examples[i] for i in indices]
        width = max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            n = len(r["input_ids"])
            ids[i, :n] = torch.tensor(r["input_ids"])
            labels[i, :n] = torch.tensor(r.get("labels", r["input_ids"]))
            mask[i, :n] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}
