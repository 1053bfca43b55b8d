"""Stage ``prepare_data``: read a source, split by aligned id, write JSONL per language."""

from __future__ import annotations

import sys
from typing import Any

from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.data.catalog import load_splits
from polymnesia.data.config import DataConfig
from polymnesia.data.sources import get_source
from polymnesia.data.splits import unit_hash
from polymnesia.errors import DataError
from polymnesia.io import atomic_write_json, write_jsonl_atomic
from polymnesia.pipeline.stage import STAGES, Artifact, Provenance, Stage, StageContext
from polymnesia.results import Score

SPLITS = ("train", "validation", "test")


class PrepareDataParams(StrictModel):
    data: DataConfig
    languages: list[str] = Field(min_length=1)


def spread_sample(records: list[Any], cap: int | None, seed: int) -> list[Any]:
    """The first ``cap`` records in a seeded hash order of their aligned ids.

    Every language uses the same order, so capped languages keep the same
    (parallel) ids, and the sample is spread over the whole corpus rather than
    its first book.
    """

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
class PrepareData(Stage[PrepareDataParams]):
    category = "data"
    version = "2"
    inputs = ()
    outputs = (Artifact.SPLITS,)

    @classmethod
    def provenance(cls, params: PrepareDataParams) -> Provenance:
        """For a model card: the source it prepares."""
        return Provenance(sources=((params.data.source, dict(params.data.options)),))

    def run(self, ctx: StageContext[PrepareDataParams]) -> list[Score]:
        p = ctx.params
        d = p.data
        source = get_source(d.source, **d.options)
        source.fetch()
        caps = {
            "train": d.max_train_per_lang,
            "validation": d.max_eval_per_lang,
            "test": d.max_eval_per_lang,
        }
        counts: dict[str, dict[str, int]] = {}
        for lang in p.languages:  # one language at a time keeps memory small
            by_split = load_splits(source, [lang], d.split_fractions, d.split_seed)[lang]
            _check_splits(lang, by_split, d.source)
            counts[lang] = {}
            for split in SPLITS:
                recs = spread_sample(by_split.get(split, []), caps[split], d.split_seed)
                rows = [
                    {"id": r.id, "lang": r.lang, "text": r.text, "label": r.label, "meta": r.meta}
                    for r in recs
                ]
                write_jsonl_atomic(ctx.out_dir / lang / f"{split}.jsonl", rows)
                counts[lang][split] = len(rows)
        atomic_write_json(ctx.out_dir / "manifest.json", {"source": d.source, "counts": counts})
        return []
