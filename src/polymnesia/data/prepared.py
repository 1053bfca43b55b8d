"""Reading the prepare-data stage's output: ``LANG/SPLIT.jsonl`` per language."""

from __future__ import annotations

import random
from collections.abc import Sequence
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


def sample_aligned(
    data_dir: Any, langs: Sequence[str], split: str, n: int | None, seed: int = 0
) -> dict[str, list[dict[str, Any]]]:
    """Records of ``split`` whose aligned id exists in every language of ``langs``.

    The same ``n`` ids (drawn with ``seed`` from the common ids, in id order
    otherwise books would be over-represented) for every language, so scores
    compare languages on translations of the same verses.
    """
    by_lang = {lang: {r["id"]: r for r in read_split(data_dir, lang, split)} for lang in langs}
    common = sorted(set.intersection(*(set(v) for v in by_lang.values())))
    if n is not None and n < len(common):
        common = sorted(random.Random(seed).sample(common, n))
    return {lang: [by_lang[lang][i] for i in common] for lang in langs}
