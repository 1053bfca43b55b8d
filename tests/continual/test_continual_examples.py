import json
from pathlib import Path
from typing import Any

import pytest

from polymnesia.continual.examples import load_examples, spread
from polymnesia.errors import DataError
from polymnesia.tasks.config import TaskConfig


class CharTokenizer:
    """One id per character (enough to build examples)."""

    bos_token_id = 1
    name_or_path = "chars"

    def __len__(self) -> int:
        return 300

    def __call__(self, texts: list[str], add_special_tokens: bool = False) -> dict[str, Any]:
        return {"input_ids": [[2 + (ord(c) % 250) for c in t] for t in texts]}


def _write(folder: Path, lang: str, split: str, labels: list[int | None]) -> None:
    (folder / lang).mkdir(parents=True, exist_ok=True)
    rows = [
        {"id": str(i), "lang": lang, "text": f"verse {i}", "label": y, "meta": {}}
        for i, y in enumerate(labels)
    ]
    (folder / lang / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_spread_takes_evenly_spaced_records() -> None:
    recs = [{"i": i} for i in range(10)]
    assert [r["i"] for r in spread(recs, 4)] == [0, 2, 5, 7]
    assert spread(recs, None) == recs and spread(recs, 20) == recs


def test_language_without_test_data_is_one_line(tmp_path: Path) -> None:
    _write(tmp_path, "en", "test", [0, 1, 2])
    _write(tmp_path, "fr", "test", [None, None])
    got = load_examples(tmp_path, "en", "test", TaskConfig(), CharTokenizer(), cap=2, seed=0)
    assert [e["labels"] for e in got] == [0, 1] and got[0]["input_ids"][0] == 1
    with pytest.raises(DataError) as e:
        load_examples(tmp_path, "fr", "test", TaskConfig(), CharTokenizer(), cap=None, seed=0)
    assert "language 'fr' has no labelled test examples" in str(e.value) and "\n" not in str(
        e.value
    )
    with pytest.raises(DataError, match="no prepared test data for language 'de'"):
        load_examples(tmp_path, "de", "test", TaskConfig(), CharTokenizer(), cap=None, seed=0)
