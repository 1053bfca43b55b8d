"""LoRA through PEFT (Khelli et al. 2025, section 3.1: ``h = W0 x + (alpha/r) B A x``).

The paper uses ranks 32, 64 and 256 with ``alpha = r`` and dropout 0.1. The
classification head is new for the task, so it is trained and saved with
the adapter (PEFT's ``modules_to_save``, which ``SEQ_CLS``/``TOKEN_CLS`` set
to the head); the counts of Table 1 include it.

Target layers default to the attention projections, named as Llama names
them (``q_proj k_proj v_proj o_proj``: Llama, Mistral, Qwen2, Gemma). On an
architecture without those names they are translated by role
(:func:`polymnesia.models.anatomy.translate_targets`): GPT-2's fused
``c_attn`` (q, k and v in one matrix) and ``c_proj``, BERT and XLM-R's
``query key value`` and ``attention.output.dense`` (the paper adapts XLM-R).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

from polymnesia.errors import ConfigError
from polymnesia.models.anatomy import matrix_width, not_applicable, translate_targets
from polymnesia.models.config import LoraConfig


def target_modules(model: torch.nn.Module, cfg: LoraConfig) -> list[str]:
    """The module names to adapt: ``cfg.target_modules`` as found in the model, or Llama role
    names translated to the architecture (:func:`polymnesia.models.anatomy.translate_targets`)."""
    return translate_targets(model, list(cfg.target_modules), "LoRA")


def _matches(name: str, targets: list[str]) -> bool:
    return any(name == t or name.endswith("." + t) for t in targets)


def _targets(model: torch.nn.Module, names: list[str]) -> list[tuple[str, torch.nn.Module]]:
    return [
        (n, m)
        for n, m in model.named_modules()
        if _matches(n, names) and getattr(getattr(m, "weight", None), "ndim", 0) == 2
    ]


def check_rank(model: torch.nn.Module, rank: int, cfg: LoraConfig) -> None:
    """One-line error if ``rank`` exceeds the width (smaller weight dimension) of a target layer."""
    names = target_modules(model, cfg)
    targets = _targets(model, names)
    if not targets:
        raise not_applicable("LoRA", model, f"no layer named {names}; set lora.target_modules")
    name, layer = min(targets, key=lambda t: matrix_width(t[1]))
    width = matrix_width(layer)
    shape = tuple(getattr(layer, "weight").shape)  # noqa: B009
    if rank < 1 or rank > width:
        raise ConfigError(
            f"LoRA rank {rank} is larger than the width {width} of layer '{name}' "
            f"(weight {shape[0]} x {shape[1]}); use a rank from 1 to {width}"
        )


def add_adapter(
    model: torch.nn.Module, rank: int, cfg: LoraConfig, kind: str, seed: int | None = None
) -> Any:
    """Wrap ``model`` with a fresh trainable adapter (base frozen; a classification head,
    ``kind`` sequence or token, is trained too; ``kind`` causal: a causal LM, head frozen).

    PEFT draws the adapter's ``A`` matrices from torch's global generator. With ``seed`` they
    are drawn from a generator seeded with it (forked: the caller's random state is left as it
    was), so the adapter does not depend on what the process drew before: a stage run after
    other stages in one process (``--executor inline``) starts from the adapter of the same
    stage run alone (``local`` or ``slurm``). Without it, the caller has seeded the generator
    (the lifelong steps seed it through their head)."""
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
        target_modules=target_modules(model, cfg),
    )
    if seed is None:
        with _peft_reads_a_deprecated_flag():
            return get_peft_model(model, pcfg)
    with torch.random.fork_rng(), _peft_reads_a_deprecated_flag():
        torch.manual_seed(seed)
        return get_peft_model(model, pcfg)


def load_adapter(model: torch.nn.Module, folder: Path) -> Any:
    """The base ``model`` with the trainable adapter (and head) saved in ``folder``."""
    from peft import PeftModel

    with _peft_reads_a_deprecated_flag():
        return PeftModel.from_pretrained(model, str(folder), is_trainable=True)


@contextmanager
def _peft_reads_a_deprecated_flag() -> Iterator[None]:
    """PEFT reads ``model.is_gradient_checkpointing``, which transformers 5 deprecates with a
    FutureWarning pointing into site-packages on every adapter: nothing a user can act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
        )
        yield


@runtime_checkable
class Mergeable(Protocol):
    """A PEFT model whose LoRA weights can be merged into its base."""

    def merge_and_unload(self) -> torch.nn.Module: ...


def merge_adapter(model: torch.nn.Module) -> torch.nn.Module:
    """The base model with the LoRA weights merged in (PEFT's ``merge_and_unload``)."""
    if not isinstance(model, Mergeable):
        raise ConfigError(f"{type(model).__name__} carries no LoRA adapter to merge")
    return model.merge_and_unload()


def trainable_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
