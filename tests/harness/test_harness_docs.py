"""Documents of the offline tasks, written from a prepared split; lm-eval's custom_dataset."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_helpers import make_prepared, verse

from polymnesia.data.sources.bible import BIBLE_GENRES
from polymnesia.errors import DataError
from polymnesia.harness.docs import halves, load_docs, write_task_data
from polymnesia.instructions.ifeval import check_following
from polymnesia.io import read_jsonl
from polymnesia.tokenizers.bpe import IM_END

TASKS = [
    "poly_genre_en",
    "poly_genre_fr",
    "poly_continue_mc_fr",
    "poly_continue_gen_en",
    "poly_ifeval_en",
    "poly_ifeval_fr",
]


def test_halves() -> None:
    assert halves("a b c d e f g") == ("a b c", "d e f g")
    assert halves("a b c d e") is None  # spaced but under 6 words
    assert halves("初めに神は天と地を創造された") == ("初めに神は天と", "地を創造された")
    assert halves("短い") is None


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    root = tmp_path_factory.mktemp("harness_docs")
    prep = make_prepared(root / "prep")
    counts = write_task_data(prep, root / "docs", TASKS, n=10, n_fewshot=4)
    return root / "docs", counts


def test_counts_and_files(docs: tuple[Path, dict[str, int]]) -> None:
    folder, counts = docs
    assert counts == dict.fromkeys(TASKS, 10)
    for t in TASKS:
        assert len(read_jsonl(folder / f"{t}.validation.jsonl")) == 4


def test_same_verses_in_every_language(docs: tuple[Path, dict[str, int]]) -> None:
    folder, _ = docs
    en = [d["id"] for d in read_jsonl(folder / "poly_genre_en.test.jsonl")]
    fr = [d["id"] for d in read_jsonl(folder / "poly_genre_fr.test.jsonl")]
    assert en == fr and len(set(en)) == 10
    test_ids = {f"{i % 9 + 1}.1.{i}" for i in range(22, 52)}  # make_prepared's test split
    assert set(en) <= test_ids


def test_genre_docs(docs: tuple[Path, dict[str, int]]) -> None:
    folder, _ = docs
    for d in read_jsonl(folder / "poly_genre_fr.test.jsonl"):
        i = int(d["id"].split(".")[2])
        assert d["gold"] == i % 9
        assert d["choices"][d["gold"]] == BIBLE_GENRES[i % 9].replace("_", " ") + IM_END
        assert verse("fr", i) in d["prompt"] and d["prompt"].endswith("<|im_start|>assistant\n")


def test_continue_docs(docs: tuple[Path, dict[str, int]]) -> None:
    folder, _ = docs
    for d in read_jsonl(folder / "poly_continue_mc_fr.test.jsonl"):
        text = verse("fr", int(d["id"].split(".")[2]))
        first, second = halves(text)  # type: ignore[misc]
        assert first in d["prompt"]
        assert d["choices"][d["gold"]] == second + IM_END
        assert len(set(d["choices"])) == 4
    for d in read_jsonl(folder / "poly_continue_gen_en.test.jsonl"):
        assert d["target"] == halves(verse("en", int(d["id"].split(".")[2])))[1]  # type: ignore[index]


def test_ifeval_docs_answers_pass(docs: tuple[Path, dict[str, int]]) -> None:
    folder, _ = docs
    rows = read_jsonl(folder / "poly_ifeval_fr.test.jsonl")
    assert {r["instruction_id_list"][0] for r in rows} == {
        "startend:quotation",
        "punctuation:no_comma",
        "detectable_format:title",
        "startend:end_checker",
        "detectable_format:number_bullet_lists",
    }
    for r in rows:
        assert check_following(r["instruction_id_list"], r["kwargs"], r["target"]) == [True]


def test_load_docs(docs: tuple[Path, dict[str, int]]) -> None:
    folder, _ = docs
    ds = load_docs(polymnesia_data=str(folder), polymnesia_task="poly_genre_en", version=1.0)
    assert set(ds) == {"test", "validation"} and len(ds["test"]) == 10
    with pytest.raises(DataError, match="no documents for task poly_genre_de"):
        load_docs(polymnesia_data=str(folder), polymnesia_task="poly_genre_de")
    with pytest.raises(DataError, match="no document folder"):
        load_docs(polymnesia_task="poly_genre_en")


def test_missing_language(tmp_path: Path) -> None:
    prep = make_prepared(tmp_path / "prep")
    with pytest.raises(DataError, match="no prepared test data for language 'ar'"):
        write_task_data(prep, tmp_path / "docs", ["poly_ifeval"], n=4)
