"""Instruction records from the Bible, Hub refusals, and the instruct stage's one-line errors."""

from __future__ import annotations

import pytest

from polymnesia.errors import DataError
from polymnesia.instructions.hub import hf_instructions
from polymnesia.instructions.records import (
    CONTINUE_INSTRUCTION,
    bible_instructions,
    check_record,
    genre_instruction,
    split_verse,
)

VERSES = [
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
def test_record_without_output_is_one_line(rec: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(DataError, match="has no output") as e:
        check_record(rec, "7")
    assert "\n" not in str(e.value)


def test_hub_dataset_offline_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DataError) as e:
        hf_instructions("Open-Orca/OpenOrca", fields={"instruction": "system_prompt"}, limit=5)
    assert "\n" not in str(e.value) and "Open-Orca/OpenOrca" in str(e.value)
