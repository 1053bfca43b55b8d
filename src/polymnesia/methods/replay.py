"""Distribution replay for Phase 2 (paper 002, section 5.1): English and generative replay.

During Phase 2 the multilingual training set is extended by a share of
English instruction examples, "5% (GR_5) and 10% (GR_10) of the Phase 2
dataset":

* **English replay** (ER_10): the English counterpart of the Phase 2 data
  with its *original* responses -- :func:`mix_replay` with that pool;
* **generative replay** (GR_5, GR_10): the same English instructions answered
  by the *Phase 1 model* (:func:`generative_replay`, greedy, ChatML prompts
  as in :mod:`polymnesia.evaluation.generation`), then :func:`mix_replay`.

Replay is a change of the training *data*, not of the loop: the mixed
records go through the usual SFT example builder. Everything is
deterministic given ``seed``: which pool items are drawn (without
replacement) and the order of the mixed set. The number replayed is
``round(share * len(phase2))`` (round half to even, Python's ``round``).
Departure: the paper does not say whether replayed items are shuffled into
the Phase 2 data or appended; we shuffle (``shuffle=False`` appends).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import torch

from polymnesia.errors import ConfigError, DataError
from polymnesia.evaluation.generation import chat_prompt, greedy_generate

T = TypeVar("T")


@dataclass
class ReplayMix(Generic[T]):
    """The mixed training records and, for each, whether it came from the replay pool."""

    records: list[T]
    is_replay: list[bool]

    @property
    def n_replay(self) -> int:
        return sum(self.is_replay)


def replay_size(n_phase2: int, share: float) -> int:
    """How many replay examples: ``round(share * n_phase2)`` (GR_5: share 0.05, ER_10: 0.10)."""
    if not 0.0 <= share <= 1.0:
        raise ConfigError(f"replay share must be in [0, 1] (0.05 for GR_5), got {share}")
    return round(share * n_phase2)


def mix_replay(
    phase2: Sequence[T], pool: Sequence[T], share: float, *, seed: int = 0, shuffle: bool = True
) -> ReplayMix[T]:
    """Phase 2 records plus ``replay_size`` records drawn from ``pool`` without replacement."""
    k = replay_size(len(phase2), share)
    if k > len(pool):
        raise DataError(
            f"replay needs {k} examples ({share:.0%} of {len(phase2)}) but the pool has {len(pool)}"
        )
    rng = np.random.default_rng(seed)
    drawn = sorted(int(i) for i in rng.choice(len(pool), size=k, replace=False))
    records = [*phase2, *(pool[i] for i in drawn)]
    flags = [False] * len(phase2) + [True] * k
    if shuffle:
        order = rng.permutation(len(records))
        records = [records[int(i)] for i in order]
        flags = [flags[int(i)] for i in order]
    return ReplayMix(records, flags)


def generative_replay(
    model: torch.nn.Module,
    tokenizer: Any,
    instructions: Sequence[Mapping[str, str]],
    *,
    max_new_tokens: int = 128,
    batch_size: int = 8,
    drop_empty: bool = True,
) -> list[dict[str, str]]:
    """The Phase 1 model's greedy answers to English instructions (GR's replay pool).

    ``instructions``: Alpaca-style records (``instruction``, optional ``input``;
    an ``output`` is ignored and replaced). Answers that come out empty are
    dropped with ``drop_empty`` (they would teach the model to stop at once).
    """

    for i, rec in enumerate(instructions):
        if not str(rec.get("instruction", "")).strip():
            raise DataError(f"generative replay: record {i} has no 'instruction'")
    prompts = [chat_prompt(r["instruction"], r.get("input", ""), tokenizer) for r in instructions]
    answers = greedy_generate(
        model, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size
    )
    out = [
        {"instruction": r["instruction"], "input": r.get("input", ""), "output": a}
        for r, a in zip(instructions, answers, strict=True)
    ]
    return [r for r in out if r["output"]] if drop_empty else out
