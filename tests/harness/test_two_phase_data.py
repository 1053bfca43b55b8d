"""Two-phase instruction sets from aligned verses; the field-mapping loader for HF datasets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness_helpers import make_prepared, verse

from polymnesia.errors import DataError
from polymnesia.instructions.hub import PRESETS, load_instruction_dataset
from polymnesia.instructions.ifeval import check_following
from polymnesia.instructions.replay import mix_replay
from polymnesia.instructions.sets import (
    DISSIMILAR_KINDS,
    PHASE1_KINDS,
    english_counterpart,
    phase1_english,
    phase2_dissimilar,
    phase2_similar,
    read_instruction_set,
    verse_overlap,
    write_instruction_set,
)


@pytest.fixture(scope="module")
def prep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("two_phase")
    return make_prepared(root / "prep", ("en", "fr", "de"), n_test=4, n_train=40)


def _index(rid: str) -> int:
    return int(rid.split(".")[2])


def test_phase1_english(prep: Path) -> None:
    s = phase1_english(prep, 6)
    assert s.counts() == {"lang": {"en": 6}, "kind": dict.fromkeys(sorted(PHASE1_KINDS), 1)}
    for r in s.records:
        assert r.input == verse("en", _index(r.verse_id))
        if r.check == "ifeval":
            assert check_following(r.instruction_id_list, r.kwargs, r.output) == [True]
        else:
            assert r.kind == "genre" and r.output in r.instruction  # one of the listed genres
    assert "6 instruction records" in s.card and "en (6)" in s.card


def test_phase2_similar_same_kinds_other_languages(prep: Path) -> None:
    p1 = phase1_english(prep, 6)
    s = phase2_similar(prep, ["fr", "de"], 12, exclude=p1.verse_ids)
    assert s.counts()["kind"] == dict.fromkeys(sorted(PHASE1_KINDS), 2)
    assert s.counts()["lang"] == {"de": 6, "fr": 6}
    assert not verse_overlap(p1, s)
    quote_fr = next(r for r in s.records if r.kind == "quote" and r.lang == "fr")
    assert quote_fr.instruction.startswith("Répète ce verset")
    assert quote_fr.output == f'"{verse("fr", _index(quote_fr.verse_id))}"'
    with pytest.raises(DataError, match="no instruction templates for \\['sw'\\]"):
        phase2_similar(prep, ["sw"], 4)


def test_phase2_dissimilar(prep: Path) -> None:
    s = phase2_dissimilar(prep, ["fr", "de"], 12)
    assert s.counts()["kind"] == dict.fromkeys(sorted(DISSIMILAR_KINDS), 4)
    for r in s.records:
        i = _index(r.verse_id)
        if r.kind == "reference":
            assert r.output == r.verse_id and r.check == "exact"
        elif r.kind == "translate":
            other = "de" if r.lang == "fr" else "fr"
            assert r.output == verse(other, i) and r.check == "chrf"
            assert r.instruction == (
                "Translate this verse from French into German."
                if r.lang == "fr"
                else "Translate this verse from German into French."
            )
        else:
            assert (r.input + " " + r.output) == verse(r.lang, i)
    with pytest.raises(DataError, match="at least 2 for translation"):
        phase2_dissimilar(prep, ["fr"], 3)
    with pytest.raises(DataError, match="only .* of 500 instruction records"):
        phase2_dissimilar(prep, ["fr", "de"], 500)


def test_english_counterpart_and_replay(prep: Path) -> None:
    p2 = phase2_dissimilar(prep, ["fr", "de"], 9, seed=1)
    en = english_counterpart(p2, prep)
    assert [r.verse_id for r in en.records] == [r.verse_id for r in p2.records]
    for a, b in zip(p2.records, en.records, strict=True):
        assert b.kind == a.kind
        if b.kind == "translate":
            assert b.output == verse("en", _index(b.verse_id)) and b.lang == a.lang
        else:
            assert b.lang == "en"
    mix = mix_replay(p2.records, en.records, 0.34, seed=0)
    assert mix.n_replay == 3 and len(mix.records) == 12


def test_write_read_round_trip(prep: Path, tmp_path: Path) -> None:
    s = phase2_similar(prep, ["fr"], 6)
    write_instruction_set(s, tmp_path / "set")
    back = read_instruction_set(tmp_path / "set", "phase2_similar")
    assert back.records == s.records and back.card == s.card
    assert back.instructions()[0].output == s.records[0].output


def test_unknown_kind(prep: Path) -> None:
    with pytest.raises(DataError, match="accepted: quote, no_comma"):
        phase1_english(prep, 2, kinds=["reference"])


# -- the field-mapping loader -------------------------------------------------------------


def test_loader_maps_a_datasets_object() -> None:
    import datasets

    ds = datasets.Dataset.from_list(
        [
            {"system_prompt": "", "question": "Q1?", "response": "A1"},
            {"system_prompt": "Be brief.", "question": "Q2?", "response": "A2"},
        ]
    )
    got = load_instruction_dataset(ds, fields=PRESETS["openorca"].fields)
    assert [(r.instruction, r.input, r.output, lang) for r, lang in got] == [
        ("Q1?", "", "A1", None),
        ("Be brief.", "Q2?", "A2", None),
    ]


def test_loader_missing_field_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "aya.jsonl"
    rows = [{"inputs": "Bonjour ?", "targets": "Salut.", "language": "French"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError) as e:
        load_instruction_dataset(path, preset="aya", languages=["fra"])
    assert str(e.value) == (
        f"instruction file {path} has no column 'language_code' (mapped to 'lang'); "
        "its columns: inputs, targets, language"
    )


def test_loader_language_filter(tmp_path: Path) -> None:
    path = tmp_path / "aya.jsonl"
    rows = [
        {"inputs": "Bonjour ?", "targets": "Salut.", "language_code": "fra"},
        {"inputs": "Hallo?", "targets": "Hi.", "language_code": "deu"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = load_instruction_dataset(path, preset="aya", languages=["deu"])
    assert [(r.instruction, r.output, lang) for r, lang in got] == [("Hallo?", "Hi.", "deu")]


def test_loader_offline_hub_is_one_line() -> None:
    with pytest.raises(DataError, match="unreachable|cannot load Hugging Face dataset"):
        load_instruction_dataset("tatsu-lab/alpaca")
