"""LoRA through PEFT (paper 004, section 3.1: ``h = W0 x + (alpha/r) B A x``).

The paper uses ranks 32, 64 and 256 with ``alpha = r`` and dropout 0.1. The
classification head is new for the task, so it is trained and saved with
the adapter (PEFT's ``modules_to_save``, which ``SEQ_CLS``/``TOKEN_CLS`` set
to the head); the counts of Table 1 include it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.errors import ConfigError


class LoraConfig(StrictModel):
    """Rank, scale, dropout and target layers of the adapters."""

    alpha: int | None = Field(None, gt=0, description="scale numerator; null = the rank (paper)")
    dropout: float = Field(0.1, ge=0, lt=1, description="LoRA dropout (paper: 0.1)")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        description="names of the linear layers that get adapters",
    )


def _targets(model: torch.nn.Module, names: list[str]) -> list[tuple[str, torch.nn.Linear]]:
    return [
        (n, m)
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and n.split(".")[-1] in names
    ]


def check_rank(model: torch.nn.Module, rank: int, cfg: LoraConfig) -> None:
    """One-line error if ``rank`` exceeds the width (min of in/out features) of a target layer."""
    targets = _targets(model, cfg.target_modules)
    if not targets:
        raise ConfigError(
            f"no linear layer named {cfg.target_modules} in the model; set lora.target_modules"
        )
    name, layer = min(targets, key=lambda t: min(t[1].in_features, t[1].out_features))
    width = min(layer.in_features, layer.out_features)
    if rank < 1 or rank > width:
        raise ConfigError(
            f"LoRA rank {rank} is larger than the width {width} of layer '{name}' "
            f"({layer.in_features} -> {layer.out_features}); use a rank from 1 to {width}"
        )


def add_adapter(model: torch.nn.Module, rank: int, cfg: LoraConfig, kind: str) -> Any:
    """Wrap ``model`` with a fresh trainable adapter (base frozen; a classification head,
    ``kind`` sequence or token, is trained too; ``kind`` causal: a causal LM, head frozen)."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import TaskType, get_peft_model

    check_rank(model, rank, cfg)
    pcfg = PeftLoraConfig(
        task_type={"sequence": TaskType.SEQ_CLS, "token": TaskType.TOKEN_CLS}.get(
            kind, TaskType.CAUSAL_LM
        ),
        r=rank,
        lora_alpha=cfg.alpha if cfg.alpha is not None else rank,
        lora_dropout=cfg.dropout,
        target_modules=list(cfg.target_modules),
    )
    return get_peft_model(model, pcfg)  # type: ignore[arg-type]


def load_adapter(model: torch.nn.Module, folder: Path) -> Any:
    """The base ``model`` with the trainable adapter (and head) saved in ``folder``."""
    from peft import PeftModel

    return PeftModel.from_pretrained(model, str(folder), is_trainable=True)


def trainable_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
