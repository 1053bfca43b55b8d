"""Stage ``sequential_order``: one language order of Khelli et al. 2025 (section 3.2), saved as
order.json.

A stage rather than a constant so that the "most destructive last" order can
be computed from the accuracy matrices of earlier orders in the same run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.continual.config import OrderConfig
from polymnesia.continual.orders import (
    default_destructive_count,
    destructive_last_order,
    destructive_moved_last_order,
    joshi_sizes,
    resource_order,
    shuffled_order,
    validate_order,
)
from polymnesia.data.prepared import read_split
from polymnesia.io import atomic_write_json
from polymnesia.metrics.continual import performance_shift
from polymnesia.pipeline.stage import STAGES, Artifact, Family, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import DATA

#: the last steps of the arms whose accuracy matrices R a destructive order is computed from
SOURCES = Family("source_", Artifact.MATRIX)


class OrderParams(StrictModel):
    order: OrderConfig
    languages: list[str] = Field(description="the task languages")
    pretraining: list[str] = Field(description="the base model's pretraining languages")
    metric: str = "accuracy"


def read_order(stage_dir: Path) -> list[str]:
    return list(json.loads((stage_dir / "order.json").read_text(encoding="utf-8"))["order"])


class MatrixRecord(TypedDict):
    """``matrix.json`` of a sequential step: R so far, one row per step trained."""

    columns: list[str]
    order: list[str]
    rows: list[list[float]]
    metric: str


def read_matrix(stage_dir: Path) -> MatrixRecord:
    record: MatrixRecord = json.loads((stage_dir / "matrix.json").read_text(encoding="utf-8"))
    return record


def _pretraining_sizes(data_dir: Path, p: OrderParams) -> dict[str, float]:
    joshi = joshi_sizes(p.languages)
    size = {
        lang: float(len(read_split(data_dir, lang, "train"))) if lang in p.pretraining else 0.0
        for lang in p.languages
    }
    return {lang: size[lang] * 10 + joshi[lang] for lang in p.languages}  # Joshi breaks ties


def _destructive(
    ctx: StageContext[OrderParams], p: OrderParams
) -> tuple[list[str], dict[str, float]]:
    o = p.order
    mats = [read_matrix(ctx.input(SOURCES(i))) for i in range(len(o.sources))]
    shifts = performance_shift(
        [m["order"] for m in mats],
        [m["rows"] for m in mats],
        columns=mats[0]["columns"],
        shift=o.shift,
    )
    if o.destructive == "sort":
        return destructive_last_order(shifts, p.languages), shifts
    return destructive_moved_last_order(shifts, p.languages, o.seed, o.destructive_count), shifts


@STAGES.register(
    "sequential_order",
    "a language order for sequential training (Khelli et al. 2025) -> order.json",
)
class SequentialOrder(Stage[OrderParams]):
    category = "data"
    version = "2"
    inputs = (DATA, SOURCES)
    outputs = (Artifact.ORDER,)

    @classmethod
    def named_inputs(cls, params: OrderParams) -> Sequence[str]:
        return [SOURCES(i) for i in range(len(params.order.sources))]

    def run(self, ctx: StageContext[OrderParams]) -> list[Score]:
        p = ctx.params
        o = p.order
        info: dict[str, object] = {"name": o.name, "kind": o.kind}
        if o.kind == "explicit":
            order = validate_order(o.languages or [], p.languages, f"order '{o.name}'")
        elif o.kind == "shuffle":
            order = shuffled_order(p.languages, o.seed)
        elif o.kind == "resource":
            sizes = (
                joshi_sizes(p.languages)
                if o.resource_by == "joshi"
                else _pretraining_sizes(ctx.input(DATA), p)
            )
            order = resource_order(p.languages, sizes)
        else:
            order, shifts = _destructive(ctx, p)
            count = o.destructive_count
            info.update(
                destructive=o.destructive,
                shift=o.shift,
                count=(default_destructive_count(len(order)) if count is None else count)
                if o.destructive == "move_to_end"
                else None,
                shifts={k: None if math.isnan(v) else v for k, v in shifts.items()},
            )
        atomic_write_json(ctx.out_dir / "order.json", {**info, "order": order})
        return [
            Score(
                model="order",
                lang=lang,
                metric="order_position",
                value=float(i),
                task="order",
                setting=o.name,
                extra={k: v for k, v in info.items() if k not in ("name", "shifts")},
            )
            for i, lang in enumerate(order)
        ]
