"""A model's own pre-training loss on held-out text: what Mao et al. 2022's F_p compares.

Mao et al. 2022, Section 3.1: ``F_p = L_p(theta_f) - L_p(theta_p)`` with
``L_p`` the loss "on the multi-lingual pre-training task (e.g., masking
tokens)". That task is the model's: a decoder was pre-trained on next-token
prediction, so its ``L_p`` is the causal-LM loss in nats per token
(:func:`~polymnesia.evaluation.likelihood.lm_items`); an encoder (XLM-R,
BERT) on masked tokens, so its ``L_p`` is the masked-LM loss in nats per
masked token (:func:`~polymnesia.evaluation.masked.mlm_items`). The two are
different quantities and never compared: each has its own metric name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch

from polymnesia.evaluation.likelihood import LMStats, lm_items
from polymnesia.evaluation.masked import mlm_items
from polymnesia.models.build import is_encoder
from polymnesia.runtime import Runtime

Objective = Literal["causal", "masked"]
#: the score metric of each pre-training loss and its unit
LOSS_METRIC: dict[Objective, str] = {"causal": "lm_loss", "masked": "mlm_loss"}
LOSS_UNIT: dict[Objective, str] = {"causal": "nats/token", "masked": "nats/masked token"}


def objective_of(model: torch.nn.Module) -> Objective:
    """``masked`` for an encoder (its masked-LM head), ``causal`` for a decoder."""
    return "masked" if is_encoder(model) else "causal"


def pretraining_loss_items(
    model: torch.nn.Module,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    batch_size: int,
    max_length: int,
    runtime: Runtime | None = None,
) -> tuple[Objective, LMStats, dict[str, list[float]]]:
    """The objective of ``model``, and its loss statistics and per-text columns on ``texts``
    (``LMStats.loss``: nats per token, or per masked token), sharded over ``runtime``."""
    objective = objective_of(model)
    score = mlm_items if objective == "masked" else lm_items
    stats, cols = score(
        model, tokenizer, texts, batch_size=batch_size, max_length=max_length, runtime=runtime
    )
    return objective, stats, cols
