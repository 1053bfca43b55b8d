"""Distribution replay for Phase 2 (the two-phase CFT paper, section 5.1): English and generative
replay.

During Phase 2 the multilingual training set is extended by a share of
English instruction examples, "5% (GR_5) and 10% (GR_10) of the Phase 2
dataset":

* **English replay** (ER_10): the English counterpart of the Phase 2 data
  with its *original* responses -- :func:`mix_replay` with that pool;
* **generative replay** (GR_5, GR_10): the same English instructions answered
  by the *Phase 1 model*, then :func:`mix_replay`. The ``replay_data`` stage
  runs the model (greedy, ChatML prompts, :mod:`polymnesia.evaluation.generation`);
  this module only checks the instructions (:func:`check_instructions`) and
  pairs them with the answers (:func:`answered_records`), so the data code
  never runs a model.

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
from typing import Generic, TypeVar

import numpy as np

from polymnesia.errors import ConfigError, DataError

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


def check_instructions(instructions: Sequence[Mapping[str, str]]) -> None:
    """One line naming the first record without an instruction (generative replay asks them)."""
    for i, rec in enumerate(instructions):
        if not str(rec.get("instruction", "")).strip():
            raise DataError(f"generative replay: record {i} has no 'instruction'")


def answered_records(
    instructions: Sequence[Mapping[str, str]], answers: Sequence[str], *, drop_empty: bool = True
) -> list[dict[str, str]]:
    """The instructions with the Phase 1 model's ``answers`` as outputs (GR's replay pool).

    ``instructions``: Alpaca-style records (``instruction``, optional ``input``;
    an ``output`` is ignored and replaced). Answers that came out empty are
    dropped with ``drop_empty`` (they would teach the model to stop at once).
    """
    if len(answers) != len(instructions):
        raise DataError(
            f"generative replay: {len(answers)} answers for {len(instructions)} instructions"
        )
    out = [
        {"instruction": r["instruction"], "input": r.get("input", ""), "output": a}
        for r, a in zip(instructions, answers, strict=True)
    ]
    return [r for r in out if r["output"]] if drop_empty else out
