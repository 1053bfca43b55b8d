"""A small prepared-data folder (the prepare_data layout) with aligned verses in en and fr."""

from __future__ import annotations

import json
from pathlib import Path

from polymnesia.data.sources.bible import BIBLE_GENRES

EN_WORDS = ["light", "water", "bread", "stone", "river", "house", "field", "voice", "night"]
FR_WORDS = ["lumière", "eau", "pain", "pierre", "fleuve", "maison", "champ", "voix", "nuit"]
DE_WORDS = ["Licht", "Wasser", "Brot", "Stein", "Fluss", "Haus", "Feld", "Stimme", "Nacht"]


def verse(lang: str, i: int) -> str:
    w = {"en": EN_WORDS, "fr": FR_WORDS, "de": DE_WORDS}[lang]
    a, b, c = w[i % 9], w[(i * 2 + 1) % 9], w[(i * 5 + 3) % 9]
    if lang == "en":
        return f"And the {a} of verse {i} came upon the {b}, and the people saw the {c} again."
    if lang == "de":
        return f"Und das {a} des Verses {i} kam über das {b}, und das Volk sah das {c} wieder."
    return f"Et la {a} du verset {i} vint sur le {b}, et le peuple vit la {c} encore."


def make_prepared(
    root: Path, langs: tuple[str, ...] = ("en", "fr"), n_test: int = 30, n_train: int = 10
) -> Path:
    """``root/LANG/{train,validation,test}.jsonl``; genre label = verse number mod 9."""
    sizes = {"train": n_train, "validation": 12, "test": n_test}
    start = 0
    for split, n in sizes.items():
        for lang in langs:
            rows = []
            for i in range(start, start + n):
                g = i % len(BIBLE_GENRES)
                rows.append(
                    {
                        "id": f"{g + 1}.1.{i}",
                        "lang": lang,
                        "text": verse(lang, i),
                        "label": g,
                        "meta": {"genre": BIBLE_GENRES[g]},
                    }
                )
            path = root / lang / f"{split}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        start += n
    return root
