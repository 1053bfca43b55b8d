"""A tiny Mistral and random packed data for plugin tests (hand-checkable, seconds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from polymnesia.training.config import TrainConfig
from polymnesia.training.data import PackedLMData
from polymnesia.training.loop import train

VOCAB = 50


def tiny_model(tied: bool = False, seed: int = 0, **kw: Any) -> torch.nn.Module:
    from polymnesia.testing import tiny_model

    return tiny_model(
        "mistral",
        VOCAB,
        max_position_embeddings=64,
        tie_word_embeddings=tied,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        seed=seed,
        **kw,
    )


def random_data(n: int = 64, block: int = 12, seed: int = 0) -> PackedLMData:
    g = torch.Generator().manual_seed(seed)
    return PackedLMData(torch.randint(3, VOCAB, (n, block), generator=g))


def train_cfg(steps: int, **kw: Any) -> TrainConfig:
    base = dict(
        steps=steps,
        batch_size=4,
        block_size=12,
        lr=1e-2,
        warmup_ratio=0.0,
        log_every=1,
        checkpoint_every=1000,
        progress_bar=False,
    )
    base.update(kw)
    return TrainConfig(**base)


def run(model: torch.nn.Module, steps: int, out: Path, plugins: list[Any], **kw: Any) -> Any:
    return train(model, random_data(), train_cfg(steps, **kw), out, seed=0, plugins=plugins)
