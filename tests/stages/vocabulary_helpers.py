"""A tiny English-French parallel corpus, written as the data stage prepares it, for the
vocabulary stages' tests (adapt_vocabulary, static_embeddings)."""

from __future__ import annotations

import json
from pathlib import Path

EN = ["the cat sat on the mat", "a dog and a cat", "the sun is hot today", "the dog sat"]
FR = ["le chat est sur le tapis", "un chien et un chat", "le soleil est chaud", "le chien est"]


def write(data: Path, lang: str, texts: list[str]) -> None:
    """``data/<lang>/train.jsonl`` with one unlabelled record per text. The i-th text gets the
    verse id ``GEN.1.{i % 4}.{i // 4}``, so in ``EN * n`` and ``FR * n`` the k-th sentences of
    the two languages share their ids (parallel verses)."""
    (data / lang).mkdir(parents=True, exist_ok=True)
    with open(data / lang / "train.jsonl", "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            rec = {"id": f"GEN.1.{i % len(EN)}.{i // len(EN)}", "lang": lang, "text": t}
            f.write(json.dumps({**rec, "label": None, "meta": {}}) + "\n")
