"""A tiny Mistral saved as safetensors (single file or sharded) for layer-scan tests."""

from __future__ import annotations

from pathlib import Path

import torch


def tiny_mistral(layers: int = 3, seed: int = 0) -> torch.nn.Module:
    from polymnesia.testing import tiny_model

    return tiny_model(
        "mistral",
        40,
        intermediate_size=24,
        num_hidden_layers=layers,
        max_position_embeddings=32,
        tie_word_embeddings=False,
        seed=seed,
    )


def save(model: torch.nn.Module, folder: Path, shard: str | None = None) -> Path:
    kw = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(folder, safe_serialization=True, **kw)  # type: ignore[operator]
    return folder
