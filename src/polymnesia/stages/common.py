"""Helpers shared by stages that train or evaluate models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.data.prepared import read_texts
from polymnesia.data.sampling import sample_mixture
from polymnesia.evaluation.config import InferencePrecision, precision_field
from polymnesia.evaluation.inference import load_for_inference
from polymnesia.evaluation.likelihood import lm_stats
from polymnesia.items import BootstrapConfig
from polymnesia.pipeline.stage import StageContext
from polymnesia.runtime import Runtime
from polymnesia.tokenizers.encode import token_ids
from polymnesia.training.data import pack_documents


class ModelEvalParams(StrictModel):
    """The parameters every per-language evaluation of one model folder shares."""

    label: str = Field(description="the model's name in tables")
    size: str | None = None
    languages: dict[str, str] = Field(description="language -> group")
    bootstrap: BootstrapConfig = Field(default_factory=BootstrapConfig)
    seed: int = 0
    precision: InferencePrecision = precision_field()


def load_evaluated(ctx: StageContext, stage: str) -> tuple[torch.nn.Module, Any, Runtime]:
    """The ``model`` input placed for a distributed evaluation stage in its precision."""
    p: ModelEvalParams = ctx.params
    return load_for_inference(
        ctx.input("model") / "model", stage=stage, precision=p.precision, sharded=True
    )


def packed_mixture(
    data_dir: Path,
    tokenizer: Any,
    languages: list[str],
    *,
    temperature: float,
    block_size: int,
    seed: int,
    split: str = "train",
) -> torch.Tensor:
    """Temperature-sampled documents of ``languages``, tokenized with BOS, packed with EOS."""
    texts = {lang: read_texts(data_dir, lang, split) for lang in languages}
    total = sum(len(v) for v in texts.values())
    docs = [t for _, t in sample_mixture(texts, temperature, total, seed)]
    ids = token_ids(tokenizer, docs)
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    return pack_documents([bos + list(x) for x in ids], block_size, tokenizer.eos_token_id)


def validation_eval_fn(data_dir: Path, tokenizer: Any, languages: list[str], per_lang: int = 16):
    """An eval_fn for the loop: mean validation loss and bits per byte over ``languages``."""
    texts = [t for lang in languages for t in read_texts(data_dir, lang, "validation", per_lang)]

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        stats = lm_stats(model, tokenizer, texts, batch_size=32, max_length=256)
        return {
            "val_loss": round(stats.loss, 5),
            "val_bits_per_byte": round(stats.bits_per_byte, 5),
        }

    return evaluate
