"""Stage ``instruct``: English-only instruction tuning with ChatML (Aggarwal et al. 2024, section
4).

Alpaca-style records (instruction, input, output) are rendered with ChatML
and the system prompt of the paper's appendix C
(:func:`polymnesia.tokenizers.chat.build_sft_example`); the loss counts the
response tokens only. Data: ``source: bible`` derives records offline from the
English Bible (:mod:`polymnesia.instructions.records`, data card written next to
the model), ``source: hf`` reads a Hub dataset (OpenOrca, Alpaca) with a field
mapping. All parameters are trained (full fine-tuning, as in Table 5).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from polymnesia.config.base import StrictModel
from polymnesia.data.prepared import read_split
from polymnesia.data.sources.bible import BIBLE_GENRES
from polymnesia.errors import ConfigError, DataError, unknown
from polymnesia.instructions.hub import hf_instructions
from polymnesia.instructions.records import (
    DATA_CARD,
    TASKS,
    InstructionRecord,
    bible_instructions,
    check_record,
)
from polymnesia.io import atomic_write_text, read_jsonl_strict
from polymnesia.models.io import load_model_and_tokenizer, save_model_and_tokenizer
from polymnesia.models.lora import LoraConfig, add_adapter, merge_adapter
from polymnesia.pipeline.stage import (
    STAGES,
    Artifact,
    Family,
    Provenance,
    Role,
    Stage,
    StageContext,
)
from polymnesia.results import Score
from polymnesia.stages.common import (
    DATA,
    MODEL,
    plugin_inputs,
    train_in_stage,
    train_summary,
    write_train_summary,
)
from polymnesia.tokenizers.chat import build_sft_example
from polymnesia.training.config import TrainConfig
from polymnesia.training.data import PaddedExamples

#: instruction sets to train on, as ``InstructParams.records`` names them (the two-phase CFT paper's
#: phases)
RECORDS = Family("records_", Artifact.RECORDS)

log = logging.getLogger(__name__)


class InstructConfig(StrictModel):
    """English-only instruction tuning (Aggarwal et al. 2024, Table 5: OpenOrca; Bible-derived
    offline)."""

    source: Literal["bible", "hf"] = Field(
        "bible", description="offline Bible-derived data or a Hub dataset"
    )
    tasks: list[str] = Field(
        default_factory=lambda: ["genre", "continue"], min_length=1, description="bible tasks"
    )
    dataset: str | None = Field(
        None, description="Hub dataset name (source: hf), e.g. Open-Orca/OpenOrca"
    )
    dataset_config: str | None = None
    dataset_split: str = "train"
    fields: dict[str, str] = Field(
        default_factory=dict, description="instruction/input/output -> dataset column (source: hf)"
    )
    max_records: int | None = Field(2000, gt=0, description="cap on instruction records")
    max_length: int = Field(256, gt=8, description="tokens per example (prompt + response)")
    train: TrainConfig = Field(default_factory=TrainConfig)
    lora_rank: int | None = Field(
        None,
        gt=0,
        description="train a LoRA adapter of this rank instead of every weight, "
        "merged into the saved model (the two-phase CFT paper's LoRA baseline: 64)",
    )
    lora: LoraConfig = Field(default_factory=LoraConfig)
    too_long: Literal["error", "drop"] = Field(
        "error",
        description="a record whose prompt leaves no room for its response within max_length: "
        "stop with one line (error) or leave it out and count it (drop)",
    )

    @field_validator("tasks")
    @classmethod
    def _tasks(cls, v: list[str]) -> list[str]:
        for task in v:
            if task not in TASKS:
                raise ValueError(str(unknown("instruction task", task, TASKS)))
        if len(set(v)) < len(v):
            raise ValueError(f"a task is listed twice in instruct.tasks: {v}")
        return v


class InstructParams(StrictModel):
    instruct: InstructConfig = Field(default_factory=InstructConfig)
    language: str = Field(
        "en", description="language of the instruction data (paper: English only)"
    )
    records: list[str] = Field(
        default_factory=list,
        description="input roles whose records.jsonl are the training data (an instruction-data "
        "stage's output; several are concatenated), instead of instruct.source",
    )
    seed: int = 0


def stage_records(folders: list[Path]) -> list[InstructionRecord]:
    """The records that instruction-data stages wrote (``records.jsonl`` in each folder)."""
    out: list[InstructionRecord] = []
    for folder in folders:
        for i, rec in enumerate(read_jsonl_strict(folder / "records.jsonl")):
            out.append(check_record(rec, f"{folder.name}/records.jsonl:{i + 1}"))
    return out


def load_records(p: InstructParams, data_dir: object) -> list:
    """The instruction records of ``p`` (Bible-derived from ``data_dir``, or a Hub dataset)."""
    i = p.instruct
    if i.source == "hf":
        if not i.dataset:
            raise ConfigError("instruct source 'hf' needs 'dataset' (a Hub dataset name)")
        return hf_instructions(
            i.dataset,
            config=i.dataset_config,
            split=i.dataset_split,
            fields=i.fields,
            limit=i.max_records,
        )
    verses = read_split(Path(str(data_dir)), p.language, "train")
    return bible_instructions(verses, BIBLE_GENRES, i.tasks, limit=i.max_records, seed=p.seed)


def sft_examples(
    tok: Any, records: list[InstructionRecord], cfg: InstructConfig
) -> tuple[list[dict[str, Any]], int]:
    """SFT examples of ``records`` and how many were left out as too long (``too_long: drop``)."""
    examples, dropped = [], 0
    for r in records:
        try:
            examples.append(
                build_sft_example(tok, r.instruction, r.input, r.output, max_length=cfg.max_length)
            )
        except DataError:
            if cfg.too_long == "error":
                raise
            dropped += 1
    if not examples:
        raise DataError(
            f"every one of {len(records)} instruction records is longer than max_length="
            f"{cfg.max_length} tokens; raise max_length"
        )
    if dropped:
        log.warning(
            "left out %d of %d records longer than %d tokens", dropped, len(records), cfg.max_length
        )
    return examples, dropped


@STAGES.register("instruct", "instruction-tune a model on ChatML records, loss on responses only")
class Instruct(Stage[InstructParams]):
    category = "training"
    version = "1"
    distributed = True
    resumable = True
    inputs = (MODEL, DATA.optional(), RECORDS)
    outputs = (Artifact.MODEL,)

    @classmethod
    def named_inputs(cls, params: InstructParams) -> Sequence[str]:
        records = [Role(r, Artifact.RECORDS) for r in params.records]
        bible = [DATA] if not params.records and params.instruct.source == "bible" else []
        return [*records, *bible, *plugin_inputs(params.instruct.train.plugins)]

    @classmethod
    def provenance(cls, params: InstructParams) -> Provenance:
        """For a model card: the language of its instruction data."""
        return Provenance((params.language,))

    def run(self, ctx: StageContext[InstructParams]) -> list[Score]:
        p = ctx.params
        if p.records:
            records = stage_records([ctx.input(role) for role in p.records])
        else:
            records = load_records(p, ctx.inputs.get(DATA))
        model, tok = load_model_and_tokenizer(ctx.input(MODEL) / "model")
        if p.instruct.lora_rank is not None:
            model = add_adapter(model, p.instruct.lora_rank, p.instruct.lora, "causal", seed=p.seed)
        examples, dropped = sft_examples(tok, records, p.instruct)
        done = train_in_stage(
            ctx, model, PaddedExamples(examples, tok.pad_token_id), p.instruct.train, seed=p.seed
        )
        model = done.model
        if p.instruct.lora_rank is not None:
            model = merge_adapter(model)
        if ctx.is_main_process:
            save_model_and_tokenizer(model, tok, ctx.out_dir / "model")
            if p.instruct.source == "bible" and not p.records:
                atomic_write_text(ctx.out_dir / "data_card.md", DATA_CARD)
        write_train_summary(
            ctx,
            train_summary(
                done.result,
                records=len(records),
                source=", ".join(p.records) or p.instruct.source,
                lora_rank=p.instruct.lora_rank,
                dropped_too_long=dropped,
            ),
        )
        return []
