"""Stage ``fisher``: the diagonal empirical Fisher of a model on its training data, for EWC.

Inputs: ``model`` (a stage folder holding ``model/``) and the instruction sets it was trained
on (``records_0``, ... as :class:`FisherParams.records` names them: instruction-data stages'
``records.jsonl``). The records are made SFT examples exactly as the ``instruct`` stage makes
them (ChatML, loss on the response tokens, ``max_length``; a record too long is left out), a
seeded sample of ``examples`` of them is taken, and
:func:`~polymnesia.penalties.fisher.diagonal_fisher` averages the squared gradient of
the loss over batches of ``batch_size`` (1: the per-example empirical Fisher of EWC). The
model runs on the main process's device of the runtime, its weights cast to float32 (squared
gradients underflow in half precision), the forward pass autocast to ``precision``. The
result, ``F`` by parameter name in float32, is written to ``fisher.safetensors`` in the
stage's folder, where the ``ewc`` plugin's ``fisher: ROLE`` reads it. A set without records
is refused in one line before any gradient is taken.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.errors import DataError
from polymnesia.evaluation.config import InferencePrecision, precision_field
from polymnesia.io import atomic_write_json
from polymnesia.models.io import load_model_and_tokenizer, model_dir
from polymnesia.penalties.fisher import FISHER_FILE, diagonal_fisher, save_fisher
from polymnesia.penalties.quadratic import Tensors
from polymnesia.pipeline.stage import STAGES, Artifact, Role, Stage, StageContext
from polymnesia.results import Score
from polymnesia.runtime import Runtime, current
from polymnesia.stages.common import MODEL
from polymnesia.stages.instruct import RECORDS, InstructConfig, sft_examples, stage_records
from polymnesia.training.data import PaddedExamples


class FisherParams(StrictModel):
    records: list[str] = Field(
        min_length=1,
        description="input roles whose records.jsonl are the data (instruction-data stages)",
    )
    examples: int = Field(256, gt=0, description="examples the Fisher is averaged over (at most)")
    batch_size: int = Field(
        1, gt=0, description="1: per-example empirical Fisher; more: per-batch (cheaper)"
    )
    max_length: int = Field(256, gt=8, description="tokens per SFT example, as in training")
    precision: InferencePrecision = precision_field()
    seed: int = Field(0, description="which examples are sampled")


def fisher_batches(
    data: PaddedExamples, indices: Sequence[int], batch_size: int, device: torch.device
) -> Iterator[dict[str, torch.Tensor]]:
    """``data``'s examples ``indices`` collated ``batch_size`` at a time, on ``device``."""
    for i in range(0, len(indices), batch_size):
        batch = data.collate(indices[i : i + batch_size])
        yield {k: v.to(device) for k, v in batch.items()}


def sampled(n: int, k: int, seed: int) -> list[int]:
    """``min(n, k)`` indices of ``range(n)``, a seeded sample kept in index order."""
    return sorted(random.Random(seed).sample(range(n), min(n, k)))


def estimate_fisher(
    model: torch.nn.Module,
    data: PaddedExamples,
    *,
    examples: int,
    batch_size: int,
    seed: int,
    rt: Runtime,
) -> tuple[Tensors, int]:
    """The diagonal empirical Fisher of ``model`` on a seeded sample of ``examples`` of
    ``data`` (batches of ``batch_size``), forward passes autocast to the runtime's precision;
    and how many examples it averaged over."""
    chosen = sampled(len(data), examples, seed)

    def loss(m: torch.nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        with rt.autocast():
            out = m(**batch).loss
        return out.float()

    batches = fisher_batches(data, chosen, batch_size, rt.device)
    return diagonal_fisher(model, batches, loss), len(chosen)


@STAGES.register("fisher", "diagonal empirical Fisher of a model on its training data (for EWC)")
class Fisher(Stage[FisherParams]):
    category = "training"
    inputs = (MODEL, RECORDS)
    outputs = (FISHER_FILE,)

    @classmethod
    def named_inputs(cls, params: FisherParams) -> Sequence[str]:
        return [Role(r, Artifact.RECORDS) for r in params.records]

    def run(self, ctx: StageContext[FisherParams]) -> list[Score]:
        p = ctx.params
        records = stage_records([ctx.input(role) for role in p.records])
        if not records:
            raise DataError(
                f"fisher: inputs {', '.join(p.records)} hold no instruction records; the "
                "Fisher needs at least one training example"
            )
        model, tok = load_model_and_tokenizer(model_dir(ctx.input(MODEL)))
        examples, dropped = sft_examples(
            tok, records, InstructConfig(max_length=p.max_length, too_long="drop")
        )
        rt = current(p.precision, sharded=False)
        # float32 weights whatever the folder holds: squared gradients underflow in bf16
        model = model.to(device=rt.device, dtype=torch.float32)
        fisher, n = estimate_fisher(
            model,
            PaddedExamples(examples, tok.pad_token_id),
            examples=p.examples,
            batch_size=p.batch_size,
            seed=p.seed,
            rt=rt,
        )
        save_fisher(ctx.out_dir / FISHER_FILE, fisher)
        summary: dict[str, Any] = {
            "examples": n,
            "batch_size": p.batch_size,
            "records": len(records),
            "dropped_too_long": dropped,
            "parameters": len(fisher),
            "mean": float(sum(f.sum() for f in fisher.values()))
            / max(1, sum(f.numel() for f in fisher.values())),
        }
        atomic_write_json(ctx.out_dir / "fisher_summary.json", summary)
        return []
