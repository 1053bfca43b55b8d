"""MASSIVE slot annotations -> words and BIO tags (Khelli et al. 2025's slot filling)."""

import pytest

from polymnesia.continual.slots import parse_slots, slot_names, slot_records, tag_inventory
from polymnesia.errors import DataError


def test_parse_massive_annotation() -> None:
    words, tags = parse_slots("wake me up at [time : nine am] on [date : friday]")
    assert words == ["wake", "me", "up", "at", "nine", "am", "on", "friday"]
    assert tags == ["O", "O", "O", "O", "B-time", "I-time", "O", "B-date"]


def test_bracket_ends_a_word_in_scripts_without_spaces() -> None:
    words, tags = parse_slots("[date : 明日]の天気")
    assert words == ["明日", "の天気"] and tags == ["B-date", "O"]


@pytest.mark.parametrize(
    "bad", ["[time : ]", "[ : nine]", "wake [time : nine", "a ] b", "[two words : x]"]
)
def test_malformed_annotations_are_one_line(bad: str) -> None:
    with pytest.raises(DataError) as e:
        parse_slots(bad)
    assert len(str(e.value).splitlines()) == 1


def test_inventory_and_records() -> None:
    recs = [
        {"id": "1", "lang": "en", "text": "x", "meta": {"annot_utt": "[time : nine am] please"}},
        {"id": "2", "lang": "en", "text": "y", "meta": {"annot_utt": "on [date : friday]"}},
    ]
    inv = tag_inventory(slot_names(recs, "annot_utt"))
    assert inv == ["O", "B-date", "I-date", "B-time", "I-time"]
    out = slot_records(recs, "annot_utt", inv)
    assert out[0]["text"] == "nine am please" and out[0]["meta"]["tags"] == [3, 4, 0]
    assert out[1]["meta"]["tags"] == [0, 1]
    with pytest.raises(DataError, match="no slot annotation meta\\['slots'\\]"):
        slot_names(recs, "slots")
