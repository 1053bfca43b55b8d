"""Reading the prepare-data stage's output: ``LANG/SPLIT.jsonl`` per language."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from polymnesia.errors import DataError
from polymnesia.io import read_jsonl_strict


def read_split(data_dir: Path, lang: str, split: str) -> list[dict[str, Any]]:
    path = data_dir / lang / f"{split}.jsonl"
    if not path.exists():
        have = sorted(p.name for p in data_dir.iterdir() if p.is_dir()) if data_dir.exists() else []
        raise DataError(f"no prepared {split} data for language '{lang}' (have: {', '.join(have)})")
    return read_jsonl_strict(path)  # a complete entry's split: a bad line is damage


def read_texts(data_dir: Path, lang: str, split: str, limit: int | None = None) -> list[str]:
    texts = [r["text"] for r in read_split(data_dir, lang, split)]
    return texts[:limit] if limit else texts
