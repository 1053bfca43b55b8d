"""Instruction records from the Bible (built by the instruction_data stage for Aggarwal et al. 2024
as for
the two-phase CFT paper), Hub refusals, and the instruct stage's one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from polymnesia.data.sources.bible import BIBLE_GENRES
from polymnesia.errors import DataError
from polymnesia.experiments.active_forgetting.protocol import ActiveForgetting
from polymnesia.experiments.loading import load_config
from polymnesia.instructions.hub import hf_instructions
from polymnesia.instructions.records import (
    CONTINUE_INSTRUCTION,
    DATA_CARD,
    bible_instructions,
    check_record,
    genre_instruction,
    split_verse,
)
from polymnesia.io import write_jsonl_atomic
from polymnesia.pipeline.stage import StageContext, StageSpec
from polymnesia.stages.instruct import InstructConfig
from polymnesia.stages.instruction_data import InstructionDataParams, build_set, instruct_set

ROOT = Path(__file__).resolve().parents[2]

VERSES: list[dict[str, Any]] = [
    {
        "id": "1.1.1",
        "text": "In the beginning God created the heavens and the earth.",
        "meta": {"genre": "law"},
    },
    {"id": "45.1.1", "text": "Paul, a servant.", "meta": {"genre": "pauline"}},
]


def test_split_verse() -> None:
    assert split_verse("a b c d e f g") == ("a b c", "d e f g")
    assert split_verse("too short here") is None


def test_bible_instructions_hand_checked() -> None:
    recs = bible_instructions(VERSES, ["law", "pauline", "general_letters"], seed=0)
    by = {(r.instruction == CONTINUE_INSTRUCTION, r.input): r.output for r in recs}
    q = genre_instruction(["law", "pauline", "general_letters"])
    assert q.endswith("law, pauline, general letters.")
    assert by[(False, VERSES[0]["text"])] == "law"
    assert by[(False, VERSES[1]["text"])] == "pauline"
    assert by[(True, "In the beginning God created")] == "the heavens and the earth."
    assert len(recs) == 3  # the 3-word verse has no continuation record


def test_unknown_task_and_missing_genre() -> None:
    with pytest.raises(DataError, match="accepted: genre, continue"):
        bible_instructions(VERSES, ["law"], ["summarise"])
    with pytest.raises(DataError, match="no meta.genre"):
        bible_instructions([{"id": "x", "text": "a b c d e f"}], ["law"], ["genre"])


@pytest.mark.parametrize(
    "rec", [{"instruction": "Say hi", "input": ""}, {"instruction": "Say hi", "output": "  "}]
)
def test_record_without_output_is_one_line(rec: dict[str, str]) -> None:
    with pytest.raises(DataError, match="has no output") as e:
        check_record(rec, "7")
    assert "\n" not in str(e.value)


def test_hub_dataset_offline_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DataError) as e:
        hf_instructions("Open-Orca/OpenOrca", fields={"instruction": "system_prompt"}, limit=5)
    assert "\n" not in str(e.value) and "Open-Orca/OpenOrca" in str(e.value)


def test_paper_000_records_come_from_the_instruction_data_stage(tmp_path: Path) -> None:
    """The instruction_data stage's ``kind: bible`` set holds exactly the records (and order)
    that the instruct stage derived itself before: golden scores stay as they were."""
    verses = [
        {
            "id": f"{g + 1}.1.{i}",
            "text": f"And the word {i} came to the people of the land in the day {g}",
            "meta": {"genre": BIBLE_GENRES[g]},
        }
        for i in range(12)
        for g in (i % len(BIBLE_GENRES),)
    ]
    write_jsonl_atomic(tmp_path / "en" / "train.jsonl", verses)
    cfg = InstructConfig(max_records=15, tasks=["continue", "genre"])
    spec = instruct_set(cfg)
    assert spec.kind == "bible" and spec.records == 15 and spec.languages == ["en"]
    params = InstructionDataParams(name="instructions", set=spec, seed=3)
    stage = StageSpec("instructions", "instruction_data", params, {"data": "data"})
    s = build_set(StageContext(stage, tmp_path / "out", {"data": tmp_path}), params)
    want = bible_instructions(verses, BIBLE_GENRES, ["continue", "genre"], limit=15, seed=3)
    assert s.instructions() == want and len(want) == 15
    assert {r.kind for r in s.records} == {"genre", "continue"}
    assert all(r.verse_id in {v["id"] for v in verses} and r.lang == "en" for r in s.records)
    assert s.card == DATA_CARD


def test_paper_000_hub_set_keeps_the_instruct_field_defaults() -> None:
    fields = {"instruction": "system_prompt"}
    cfg = InstructConfig(source="hf", dataset="Open-Orca/OpenOrca", max_records=None, fields=fields)
    spec = instruct_set(cfg)
    assert spec.kind == "hf" and spec.records is None
    assert spec.fields == {"instruction": "system_prompt", "input": "input", "output": "output"}


def test_active_forgetting_tunes_every_arm_on_one_instruction_set() -> None:
    cfg = load_config(str(ROOT / "configs" / "active_forgetting_smoke.yaml"), [])
    specs = {s.name: s for s in ActiveForgetting.build(cfg)}
    assert specs["instructions"].kind == "instruction_data"
    assert specs["instructions"].inputs == {"data": "data"}
    for arm in ("Baseline", "BA", "AFA"):
        tune = specs[f"instruct_{arm}"]
        assert tune.params.records == ["instructions"]
        assert tune.inputs["instructions"] == "instructions" and "data" not in tune.inputs
