"""Stage ``replay_data``: Phase 2 records mixed with English replay (the two-phase CFT paper,
section 5.1).

Inputs: ``records`` (the Phase 2 set), ``pool`` (its English counterpart: the
same kind of instructions in English, *not* the Phase 1 data, which Phase 2
may not see) and, for generative replay, ``model`` (the Phase 1 model).

* ``kind: english`` (ER_10): pool records keep their original responses;
* ``kind: generative`` (GR_5, GR_10): the Phase 1 model answers the pool's
  instructions (greedy, ChatML) and those answers are replayed.

``share`` of ``len(phase 2)`` pool records are drawn without replacement and
shuffled in (:func:`polymnesia.instructions.replay.mix_replay`); for generative
replay only as many instructions as needed (plus a margin for empty answers)
are answered. Writes ``records.jsonl`` (with ``replay: true|false``) and a
data card, as an instruction-data stage does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch
from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.errors import DataError
from polymnesia.evaluation.config import PRECISION_HELP, InferencePrecision
from polymnesia.evaluation.generation import chat_prompt, greedy_generate
from polymnesia.evaluation.inference import load_for_inference
from polymnesia.instructions.replay import (
    answered_records,
    check_instructions,
    mix_replay,
    replay_size,
)
from polymnesia.io import atomic_write_text, read_jsonl_strict, write_jsonl_atomic
from polymnesia.pipeline.stage import STAGES, Artifact, Role, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import MODEL

#: the Phase 2 records replay is mixed into, and the English pool it draws from
PHASE2, POOL = Role("records", Artifact.RECORDS), Role("pool", Artifact.RECORDS)


class ReplayConfig(StrictModel):
    """One replay arm of Table 5."""

    kind: Literal["english", "generative"] = Field(
        description="english: original responses (ER); generative: the Phase 1 model's (GR)"
    )
    share: float = Field(gt=0, le=1, description="replayed records per Phase 2 record (GR_5: 0.05)")
    max_new_tokens: int = Field(64, gt=0, description="generative: answer length")
    batch_size: int = Field(8, gt=0, description="generative: prompts per batch")


class ReplayDataParams(StrictModel):
    replay: ReplayConfig
    precision: InferencePrecision = Field(
        "no", description="generative replay's precision: " + PRECISION_HELP
    )
    seed: int = 0


def _fields(rec: dict[str, object]) -> dict[str, str]:
    return {k: str(rec.get(k, "")) for k in ("instruction", "input", "output")}


def generative_replay(
    model: torch.nn.Module,
    tokenizer: Any,
    instructions: Sequence[Mapping[str, str]],
    *,
    max_new_tokens: int = 128,
    batch_size: int = 8,
    drop_empty: bool = True,
) -> list[dict[str, str]]:
    """The Phase 1 model's greedy answers to English instructions (GR's replay pool):
    ChatML prompts, :func:`greedy_generate`, then
    :func:`polymnesia.instructions.replay.answered_records`."""
    check_instructions(instructions)
    prompts = [chat_prompt(r["instruction"], r.get("input", ""), tokenizer) for r in instructions]
    answers = greedy_generate(
        model, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size
    )
    return answered_records(instructions, answers, drop_empty=drop_empty)


@STAGES.register(
    "replay_data", "mix English or generative replay into Phase 2 records (the two-phase CFT paper)"
)
class ReplayData(Stage[ReplayDataParams]):
    category = "data"
    version = "1"
    inputs = (PHASE2, POOL, MODEL.optional())
    outputs = (Artifact.RECORDS,)

    @classmethod
    def named_inputs(cls, params: ReplayDataParams) -> Sequence[str]:
        return [MODEL] if params.replay.kind == "generative" else []  # the Phase 1 model answers

    def run(self, ctx: StageContext[ReplayDataParams]) -> list[Score]:
        p = ctx.params
        phase2 = [_fields(r) for r in read_jsonl_strict(ctx.input(PHASE2) / "records.jsonl")]
        pool = [_fields(r) for r in read_jsonl_strict(ctx.input(POOL) / "records.jsonl")]
        k = replay_size(len(phase2), p.replay.share)
        if p.replay.kind == "generative":
            # answer the pool's first records, a margin more than needed (empty answers are
            # dropped); the pool is in its builder's seeded order
            n = min(len(pool), max(k + 8, int(k * 1.5)))
            model, tok, _ = load_for_inference(
                ctx.input(MODEL) / "model", stage="replay_data", precision=p.precision
            )
            pool = generative_replay(
                model,
                tok,
                pool[:n],
                max_new_tokens=p.replay.max_new_tokens,
                batch_size=p.replay.batch_size,
            )
        if k > len(pool):
            raise DataError(
                f"replay {p.replay.kind} needs {k} records ({p.replay.share:.0%} of "
                f"{len(phase2)}) but has {len(pool)}; lower the share or enlarge the pool"
            )
        mix = mix_replay(phase2, pool, p.replay.share, seed=p.seed)
        rows = [{**r, "replay": flag} for r, flag in zip(mix.records, mix.is_replay, strict=True)]
        write_jsonl_atomic(ctx.out_dir / "records.jsonl", rows)
        atomic_write_text(
            ctx.out_dir / "data_card.md",
            f"# Phase 2 records with {p.replay.kind} replay\n\n"
            f"{len(phase2)} Phase 2 records and {mix.n_replay} English replay records "
            f"({p.replay.share:.0%}), shuffled together (seed {p.seed}). "
            + (
                "Replayed responses are the Phase 1 model's greedy answers (generative replay).\n"
                if p.replay.kind == "generative"
                else "Replayed responses are the original English ones (English replay).\n"
            ),
        )
        return []
