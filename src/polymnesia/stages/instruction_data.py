"""Stage ``instruction_data``: an instruction set with its data card (Aggarwal et al. 2024 and the
two-phase CFT paper).

It writes ``records.jsonl`` and ``DATA_CARD.md`` that the
``instruct`` stage trains on (its ``records`` option) and that ``replay_data``
and ``dataset_similarity`` read. Aggarwal et al. 2024's English records (``kind: bible``:
the genre question and verse continuation of
:func:`polymnesia.instructions.records.bible_records`, or ``kind: hf`` for
OpenOrca) are built here too: :func:`instruct_set` turns the protocol's
``instruct:`` section into this stage's set. Offline sets are built from the prepared Bible
split (input ``data``) by :mod:`polymnesia.instructions.sets`; they hold
only instructions whose answers are checked automatically. ``kind: hf`` maps the
fields of any HF instruction dataset (Alpaca, MultiAlpaca, OpenOrca, Aya presets
in :mod:`polymnesia.instructions.hub`). Verses used by the sets given as
``exclude`` inputs (``exclude_0``, ...) are left out, so a Phase 2 set shares no
verse with Phase 1 (the paper's Phase 2 has no access to the Phase 1 data).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.data.config import check_languages
from polymnesia.data.prepared import read_split
from polymnesia.data.sources.bible import BIBLE_GENRES
from polymnesia.errors import DataError
from polymnesia.instructions.hub import PRESETS, load_instruction_dataset
from polymnesia.instructions.records import DATA_CARD, TASKS, bible_records
from polymnesia.instructions.sets import (
    DISSIMILAR_KINDS,
    PHASE1_KINDS,
    InstructionSet,
    TwoPhaseRecord,
    english_counterpart,
    phase1_english,
    phase2_dissimilar,
    phase2_similar,
    read_instruction_set,
    write_instruction_set,
)
from polymnesia.pipeline.stage import STAGES, Artifact, Family, Role, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import DATA
from polymnesia.stages.instruct import InstructConfig

SetKind = Literal[
    "phase1_english", "phase2_similar", "phase2_dissimilar", "english_counterpart", "hf", "bible"
]
#: the field mapping of Aggarwal et al. 2024's ``instruct.fields``: unmapped roles keep their own
#: name
IDENTITY_FIELDS = {"instruction": "instruction", "input": "input", "output": "output"}


class InstructionSetConfig(StrictModel):
    """One instruction dataset: a two-phase set (the two-phase CFT paper) or Aggarwal et al. 2024's
    English records."""

    kind: SetKind = Field(
        description="phase1_english | phase2_similar (Phase 1's tasks in other languages) | "
        "phase2_dissimilar (other task types) | english_counterpart (of the set named in 'of': "
        "the English pool of replay) | hf (a Hub dataset with field mapping) | bible (the genre "
        "and continuation records of Aggarwal et al. 2024)"
    )
    records: int | None = Field(
        600, gt=0, description="records in the set (offline kinds; hf and bible: a cap, or none)"
    )
    languages: list[str] = Field(
        default_factory=list, description="phase 2 kinds: the languages; bible: one (default en)"
    )
    tasks: list[str] | None = Field(None, description="task kinds (default: every kind of the set)")
    of: str | None = Field(None, description="english_counterpart: the Phase 2 set it mirrors")
    split: Literal["train", "validation", "test"] = "train"
    dataset: str | None = Field(None, description="hf: dataset name (or a .jsonl path)")
    preset: str | None = Field(None, description=f"hf: field preset ({', '.join(PRESETS)})")
    fields: dict[str, str] = Field(
        default_factory=dict, description="hf: instruction/input/output/lang -> column"
    )
    config: str | None = None
    hf_split: str = "train"

    @model_validator(mode="after")
    def _check(self) -> InstructionSetConfig:
        check_languages(self.languages)
        if self.records is None and self.kind not in ("hf", "bible"):
            raise ValueError(f"an instruction set of kind {self.kind} needs a number of records")
        if self.kind == "bible" and len(self.languages) > 1:
            raise ValueError(f"a bible instruction set has one language, got {self.languages}")
        if self.kind == "bible" and self.tasks is not None:
            bad = [t for t in self.tasks if t not in TASKS]
            if bad or not self.tasks:
                raise ValueError(f"unknown bible tasks {bad}; accepted: {', '.join(TASKS)}")
        if self.kind in ("phase2_similar", "phase2_dissimilar") and not self.languages:
            raise ValueError(f"an instruction set of kind {self.kind} needs 'languages'")
        if (self.kind == "english_counterpart") != (self.of is not None):
            raise ValueError("'of' (the Phase 2 set) is given exactly for kind english_counterpart")
        if self.kind == "hf" and not (self.dataset or self.preset):
            raise ValueError("an instruction set of kind hf needs 'dataset' or 'preset'")
        if self.preset is not None and self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; accepted: {', '.join(PRESETS)}")
        accepted = {"phase1_english": PHASE1_KINDS, "phase2_similar": PHASE1_KINDS}.get(
            self.kind, DISSIMILAR_KINDS
        )
        if self.tasks is not None and self.kind in (
            "phase1_english",
            "phase2_similar",
            "phase2_dissimilar",
        ):
            bad = [t for t in self.tasks if t not in accepted]
            if bad or not self.tasks:
                raise ValueError(
                    f"unknown task kinds {bad} for {self.kind}; accepted: {', '.join(accepted)}"
                )
        return self


class InstructionDataParams(StrictModel):
    name: str
    set: InstructionSetConfig
    seed: int = 0


def _hf_set(name: str, c: InstructionSetConfig) -> InstructionSet:
    rows = load_instruction_dataset(
        c.dataset or "",
        preset=c.preset,
        fields=c.fields or None,
        config=c.config,
        split=c.hf_split,
        limit=c.records,
        languages=c.languages or None,
    )
    recs = [
        TwoPhaseRecord(r.instruction, r.input, r.output, lang or "und", "hf", f"{name}:{i}", "none")
        for i, (r, lang) in enumerate(rows)
    ]
    card = f"# {name}\n\n{len(recs)} records of {c.dataset or c.preset} (fields {c.fields}).\n"
    return InstructionSet(name, recs, card)


def instruct_set(cfg: InstructConfig, language: str = "en") -> InstructionSetConfig:
    """The set Aggarwal et al. 2024's ``instruct:`` section describes (``source: bible`` or
    ``hf``)."""
    if cfg.source == "hf":
        return InstructionSetConfig(
            kind="hf",
            records=cfg.max_records,
            dataset=cfg.dataset,
            config=cfg.dataset_config,
            hf_split=cfg.dataset_split,
            fields={**IDENTITY_FIELDS, **cfg.fields},
        )
    return InstructionSetConfig(
        kind="bible", records=cfg.max_records, languages=[language], tasks=list(cfg.tasks)
    )


def _bible_set(name: str, c: InstructionSetConfig, data: Path, seed: int) -> InstructionSet:
    """Aggarwal et al. 2024's records (genre question, continuation), in :func:`bible_records`'
    order."""
    lang = c.languages[0] if c.languages else "en"
    verses = read_split(data, lang, c.split)
    rows = bible_records(verses, BIBLE_GENRES, c.tasks or TASKS, limit=c.records, seed=seed)
    recs = [
        TwoPhaseRecord(r.instruction, r.input, r.output, lang, task, vid, "exact")
        for vid, task, r in rows
    ]
    return InstructionSet(name, recs, DATA_CARD)


#: the Phase 2 set an english_counterpart set mirrors
OF = Role("of", Artifact.RECORDS, required=False)
#: sets whose verses this one leaves out (a Phase 2 set shares no verse with its Phase 1 sets)
EXCLUDES = Family("exclude_", Artifact.RECORDS)


def build_set(ctx: StageContext[InstructionDataParams], p: InstructionDataParams) -> InstructionSet:
    """The instruction set ``p`` describes, from the stage's inputs."""
    c, data = p.set, ctx.inputs.get(DATA)
    exclude: set[str] = set()
    for folder in ctx.family(EXCLUDES):
        exclude |= read_instruction_set(folder).verse_ids
    if c.kind == "hf":
        return _hf_set(p.name, c)
    if data is None:
        raise DataError(f"instruction set '{p.name}' ({c.kind}) needs the prepared data as input")
    if c.kind == "bible":
        return _bible_set(p.name, c, data, p.seed)
    assert c.records is not None  # checked by InstructionSetConfig
    split, seed = c.split, p.seed
    kinds = c.tasks or (DISSIMILAR_KINDS if c.kind == "phase2_dissimilar" else PHASE1_KINDS)
    if c.kind == "phase1_english":
        return phase1_english(data, c.records, kinds=kinds, split=split, exclude=exclude, seed=seed)
    if c.kind == "phase2_similar":
        return phase2_similar(
            data, c.languages, c.records, kinds=kinds, split=split, exclude=exclude, seed=seed
        )
    if c.kind == "phase2_dissimilar":
        return phase2_dissimilar(
            data, c.languages, c.records, kinds=kinds, split=split, exclude=exclude, seed=seed
        )
    return english_counterpart(read_instruction_set(ctx.input(OF), c.of), data, split=c.split)


@STAGES.register(
    "instruction_data",
    "an instruction set with its data card (Aggarwal et al. 2024 and the two-phase CFT paper)",
)
class InstructionData(Stage[InstructionDataParams]):
    category = "data"
    version = "1"
    inputs = (DATA.optional(), OF, EXCLUDES)
    outputs = (Artifact.RECORDS,)

    @classmethod
    def named_inputs(cls, params: InstructionDataParams) -> Sequence[str]:
        data = [DATA] if params.set.kind != "hf" else []  # every other kind reads verses
        return [*data, *([OF] if params.set.of is not None else [])]

    def run(self, ctx: StageContext[InstructionDataParams]) -> list[Score]:
        p = ctx.params
        s = build_set(ctx, p)
        if not s.records:
            raise DataError(f"instruction set '{p.name}' ({p.set.kind}) came out empty")
        s.name = p.name
        write_instruction_set(s, ctx.out_dir)
        counts = s.counts()
        return [
            Score(
                model=p.name, lang=lang, metric="records", value=float(k), task="instruction_data"
            )
            for lang, k in counts["lang"].items()
        ]
