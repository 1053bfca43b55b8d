"""Stage ``prepare_data``: read a source, split by aligned id, write JSONL per language."""

from __future__ import annotations

import sys
from typing import Any

from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.errors import DataError
from polymnesia.io import atomic_write_json, write_jsonl_atomic
from polymnesia.pipeline.stage import STAGES, Stage, StageContext
from polymnesia.results import Score

SPLITS = ("train", "validation", "test")


class PrepareDataParams(StrictModel):
    source: str
    options: dict[str, Any] = Field(default_factory=dict)
    languages: list[str]
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    split_seed: int = 0
    max_train_per_lang: int | None = None
    max_eval_per_lang: int | None = None


def spread_sample(records: list[Any], cap: int | None, seed: int) -> list[Any]:
    """The first ``cap`` records in a seeded hash order of their aligned ids.

    Every language uses the same order, so capped languages keep the same
    (parallel) ids, and the sample is spread over the whole corpus rather than
    its first book.
    """
    from polymnesia.data.splits import unit_hash

    ordered = sorted(records, key=lambda r: unit_hash(r.id, seed + 104_729))
    return ordered[:cap] if cap is not None else ordered


def _check_splits(lang: str, by_split: dict[str, list[Any]], source: str) -> None:
    """Every language needs training and test texts; an empty split fails later, obscurely."""
    sizes = {split: len(by_split.get(split, [])) for split in SPLITS}
    empty = [split for split in ("train", "test") if not sizes[split]]
    if empty:
        raise DataError(
            f"language '{lang}' of source '{source}' has no texts in its {' and '.join(empty)} "
            f"split ({sum(sizes.values())} texts in all); give it more text or change "
            "data.split_fractions"
        )
    if not sizes["validation"]:
        print(
            f"[polymnesia] warning: language '{lang}' has no validation texts "
            f"({sum(sizes.values())} texts in all)",
            file=sys.stderr,
        )


@STAGES.register("prepare_data", "fetch a source, split it by aligned id, write LANG/SPLIT.jsonl")
class PrepareData(Stage):
    version = "2"

    def run(self, ctx: StageContext) -> list[Score]:
        from polymnesia.data.catalog import load_splits
        from polymnesia.data.sources import get_source

        p: PrepareDataParams = ctx.params
        source = get_source(p.source, **p.options)
        source.fetch()
        caps = {
            "train": p.max_train_per_lang,
            "validation": p.max_eval_per_lang,
            "test": p.max_eval_per_lang,
        }
        counts: dict[str, dict[str, int]] = {}
        for lang in p.languages:  # one language at a time keeps memory small
            by_split = load_splits(source, [lang], p.split_fractions, p.split_seed)[lang]
            _check_splits(lang, by_split, p.source)
            counts[lang] = {}
            for split in SPLITS:
                recs = spread_sample(by_split.get(split, []), caps[split], p.split_seed)
                rows = [
                    {"id": r.id, "lang": r.lang, "text": r.text, "label": r.label, "meta": r.meta}
                    for r in recs
                ]
                write_jsonl_atomic(ctx.out_dir / lang / f"{split}.jsonl", rows)
                counts[lang][split] = len(rows)
        atomic_write_json(ctx.out_dir / "manifest.json", {"source": p.source, "counts": counts})
        return []
