"""Model folders: every model-producing stage writes an HF folder (safetensors weights +
tokenizer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from polymnesia.io import atomic_dir
from polymnesia.models.build import load_model, save_pretrained
from polymnesia.tokenizers.bpe import load_tokenizer


def model_dir(stage_dir: Path) -> Path:
    """The model folder of a stage's cache entry: ``STAGE/model``."""
    return stage_dir / "model"


def load_model_and_tokenizer(folder: Path) -> tuple[torch.nn.Module, Any]:
    """The model and tokenizer of an HF folder written by :func:`save_model_and_tokenizer`."""
    return load_model(folder), load_tokenizer(str(folder))


def save_model_and_tokenizer(model: torch.nn.Module, tokenizer: Any, folder: Path) -> None:
    """Write weights (safetensors) and tokenizer files to ``folder`` atomically."""
    with atomic_dir(folder) as tmp:
        save_pretrained(model, tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
