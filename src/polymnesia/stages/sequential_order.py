"""Stage ``sequential_order``: one language order of paper 004 (section 3.2), saved as order.json.

A stage rather than a constant so that the "most destructive last" order can
be computed from the accuracy matrices of earlier orders in the same run.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.continual.config import OrderConfig
from polymnesia.continual.orders import (
    destructive_last_order,
    joshi_sizes,
    resource_order,
    shuffled_order,
    validate_order,
)
from polymnesia.data.prepared import read_split
from polymnesia.io import atomic_write_json
from polymnesia.metrics.continual import performance_shift
from polymnesia.pipeline.stage import STAGES, Stage, StageContext
from polymnesia.results import Score


class OrderParams(StrictModel):
    order: OrderConfig
    languages: list[str] = Field(description="the task languages")
    pretraining: list[str] = Field(description="the base model's pretraining languages")
    metric: str = "accuracy"


def read_order(stage_dir: Path) -> list[str]:
    return list(json.loads((stage_dir / "order.json").read_text(encoding="utf-8"))["order"])


def read_matrix(stage_dir: Path) -> dict[str, object]:
    return dict(json.loads((stage_dir / "matrix.json").read_text(encoding="utf-8")))


def _pretraining_sizes(data_dir: Path, p: OrderParams) -> dict[str, float]:

    joshi = joshi_sizes(p.languages)
    size = {
        lang: float(len(read_split(data_dir, lang, "train"))) if lang in p.pretraining else 0.0
        for lang in p.languages
    }
    return {lang: size[lang] * 10 + joshi[lang] for lang in p.languages}  # Joshi breaks ties


def _destructive(ctx: StageContext, p: OrderParams) -> list[str]:

    mats = [read_matrix(ctx.input(f"source_{i}")) for i in range(len(p.order.sources))]
    shifts = performance_shift(
        [list(m["order"]) for m in mats],  # type: ignore[call-overload]
        [m["rows"] for m in mats],
        columns=list(mats[0]["columns"]),  # type: ignore[call-overload]
    )
    return destructive_last_order(shifts, p.languages)


@STAGES.register(
    "sequential_order", "a language order for sequential training (paper 004) -> order.json"
)
class SequentialOrder(Stage):
    version = "1"

    def run(self, ctx: StageContext) -> list[Score]:
        p: OrderParams = ctx.params
        o = p.order
        if o.kind == "explicit":
            order = validate_order(o.languages or [], p.languages, f"order '{o.name}'")
        elif o.kind == "shuffle":
            order = shuffled_order(p.languages, o.seed)
        elif o.kind == "resource":
            sizes = (
                joshi_sizes(p.languages)
                if o.resource_by == "joshi"
                else _pretraining_sizes(ctx.input("data"), p)
            )
            order = resource_order(p.languages, sizes)
        else:
            order = _destructive(ctx, p)
        atomic_write_json(
            ctx.out_dir / "order.json", {"name": o.name, "kind": o.kind, "order": order}
        )
        return [
            Score(
                model="order",
                lang=lang,
                metric="order_position",
                value=float(i),
                task="order",
                setting=o.name,
                extra={"kind": o.kind},
            )
            for i, lang in enumerate(order)
        ]
