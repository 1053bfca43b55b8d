"""The labelled-task config section shared by fine-tuning experiments."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.errors import DataError

#: metric names accepted per task kind (functions in polymnesia.metrics.classification)
METRICS_BY_KIND = {
    "sequence": ("accuracy", "macro_f1"),
    "token": ("accuracy", "span_f1"),
}


class TaskConfig(StrictModel):
    """A labelled task: what is predicted, how it is scored, how inputs are cut.

    The offline default is the Bible verse genre (``record["label"]``, 9 classes
    shared by every language, split by verse id in ``prepare_data``).
    """

    name: str = Field("bible_genre", description="task name shown in reports")
    kind: Literal["sequence", "token"] = Field(
        "sequence", description="sequence: one label per text; token: one tag per word"
    )
    metric: Literal["accuracy", "macro_f1", "span_f1"] = Field(
        "accuracy", description="accuracy or macro_f1 (sequence); accuracy or span_f1 (token)"
    )
    num_labels: int | None = Field(
        None, gt=1, description="number of classes; null: derived from the training data"
    )
    max_length: int = Field(
        128, gt=2, description="tokens per example including BOS; longer texts are truncated"
    )

    @model_validator(mode="after")
    def _metric_fits_kind(self) -> TaskConfig:
        if self.metric not in METRICS_BY_KIND[self.kind]:
            ok = ", ".join(METRICS_BY_KIND[self.kind])
            raise ValueError(
                f"metric '{self.metric}' does not fit kind '{self.kind}'; accepted: {ok}"
            )
        return self


def infer_num_labels(records: Iterable[dict[str, Any]], kind: str = "sequence") -> int:
    """``max label + 1`` over ``records`` (sequence: ``label``; token: ``meta["tags"]``).

    Raises :class:`DataError` when no record carries a label.
    """
    top = -1
    for r in records:
        if kind == "token":
            tags = (r.get("meta") or {}).get("tags") or []
            top = max([top, *map(int, tags)])
        elif r.get("label") is not None:
            top = max(top, int(r["label"]))
    if top < 0:
        raise DataError(f"no labelled records to derive the number of {kind} labels from")
    return max(2, top + 1)
