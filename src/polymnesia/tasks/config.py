"""The labelled-task config section shared by fine-tuning experiments."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import FINGERPRINTED_UNLESS_DEFAULT, StrictModel
from polymnesia.errors import DataError

#: metric names accepted per task kind (functions in polymnesia.metrics.classification / .qa)
METRICS_BY_KIND = {
    "sequence": ("accuracy", "macro_f1"),
    "token": ("accuracy", "span_f1"),
    "span": ("exact_match", "squad_f1"),
}
#: constructed offline tasks (polymnesia.tasks.constructed) and the kind each one is
CONSTRUCTED = {"genre_segments": "token", "genre_question": "span"}
Kind = Literal["sequence", "token", "span"]


class TaskConfig(StrictModel):
    """A labelled task: what is predicted, how it is scored, how inputs are cut.

    The offline default is the Bible verse genre (``record["label"]``, 9 classes
    shared by every language, split by verse id in ``prepare_data``). Records
    carry what the kind needs: a ``label`` (sequence; ``meta["pair"]`` adds a
    second text, as XNLI's hypothesis), ``meta["tags"]`` (token, one int per
    whitespace word), ``meta["question"]`` and ``meta["answers"]`` (span, SQuAD
    format) -- from a data source's field mapping (``hf``: ``meta_fields``) or
    built from Bible verses by ``constructed`` (data cards: docs/lf_mlf.md).

    ``context`` is for causal decoders on token and span tasks: a decoder's
    token sees only the text to its left, so the first word of a span cannot be
    told from what follows it. ``echo`` lays the text out twice (``BOS text SEP
    text``; QA: ``BOS question SEP passage SEP passage``) and reads the tags or
    the answer on the second copy, every token of which has attended to the
    whole first copy (the "echo" inputs of Springer et al., 2024, *Repetition
    improves language model embeddings*). ``bidirectional`` removes the causal
    mask, in fine-tuning and scoring alike (Dukić and Šnajder, 2024, *Looking
    right is sometimes right*, unmask decoder layers for sequence labelling).
    An encoder sees both sides whatever this says.
    """

    name: str = Field("bible_genre", min_length=1, description="task name shown in reports")
    kind: Kind = Field(
        "sequence",
        description="sequence: one label per text; token: one tag per word; span: extractive QA",
    )
    metric: Literal["accuracy", "macro_f1", "span_f1", "exact_match", "squad_f1"] = Field(
        "accuracy",
        description=(
            "accuracy or macro_f1 (sequence); accuracy or span_f1 (token); exact_match or "
            "squad_f1 (span)"
        ),
    )
    num_labels: int | None = Field(
        None, gt=1, description="number of classes; null: derived from the training data"
    )
    max_length: int = Field(
        128, gt=2, description="tokens per example including BOS; longer texts are truncated"
    )
    tag_names: list[str] | None = Field(
        None, description="token tasks: tag name per id (BIO names for span_f1, e.g. O, B-PER)"
    )
    constructed: Literal["genre_segments", "genre_question"] | None = Field(
        None,
        description=(
            "build a constructed task from labelled verses (token: genre_segments; span: "
            "genre_question)"
        ),
    )
    passage_verses: int = Field(
        3, ge=2, le=8, description="constructed tasks: verses per passage (of distinct genres)"
    )
    max_answer_tokens: int = Field(
        64, gt=0, description="span tasks: longest answer considered when decoding"
    )
    context: Literal["left", "echo", "bidirectional"] = Field(
        "left",
        description=(
            "token and span tasks on a causal decoder: what a token's prediction sees. left: "
            "the text to its left (a decoder as it is); echo: the text twice, predictions on the "
            "second copy (max_length counts both); bidirectional: the causal mask removed"
        ),
        json_schema_extra=FINGERPRINTED_UNLESS_DEFAULT,
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("task.name must not be blank")
        return v

    @model_validator(mode="after")
    def _metric_fits_kind(self) -> TaskConfig:
        if self.metric not in METRICS_BY_KIND[self.kind]:
            ok = ", ".join(METRICS_BY_KIND[self.kind])
            raise ValueError(
                f"metric '{self.metric}' does not fit kind '{self.kind}'; accepted: {ok}"
            )
        if self.constructed is not None and CONSTRUCTED[self.constructed] != self.kind:
            raise ValueError(
                f"constructed '{self.constructed}' builds a '{CONSTRUCTED[self.constructed]}' "
                f"task, but kind is '{self.kind}'"
            )
        if self.tag_names is not None and len(set(self.tag_names)) < 2:
            raise ValueError("task.tag_names needs at least 2 distinct tag names")
        if self.tag_names is not None and self.kind != "token":
            raise ValueError("task.tag_names is for token tasks (kind: token)")
        if self.context != "left" and self.kind == "sequence":
            raise ValueError(
                f"task.context '{self.context}' is for token and span tasks (a sequence label "
                "is read at the last token, which has seen the whole text already)"
            )
        least = {("span", "echo"): 6, ("span", "left"): 4, ("token", "echo"): 4}
        need = least.get((self.kind, self.context), least.get((self.kind, "left"), 3))
        if self.max_length < need:
            raise ValueError(
                f"task.max_length {self.max_length} is too short for a {self.kind} task"
                f"{' with context echo' if self.context == 'echo' else ''}; it needs at least "
                f"{need}"
            )
        if self.kind == "span" and self.num_labels is not None:
            raise ValueError("span tasks predict a start and an end; leave num_labels unset")
        return self


def infer_num_labels(records: Iterable[dict[str, Any]], kind: str = "sequence") -> int:
    """``max label + 1`` over ``records`` (sequence: ``label``; token: ``meta["tags"]``).

    Raises :class:`DataError` when no record carries a label.
    """
    top = top_label(records, kind)
    if top < 0:
        raise DataError(f"no labelled records to derive the number of {kind} labels from")
    return max(2, top + 1)


def top_label(records: Iterable[dict[str, Any]], kind: str = "sequence") -> int:
    """The largest label id over ``records`` (sequence: ``label``; token: ``meta["tags"]``),
    -1 when none carries one."""
    top = -1
    for r in records:
        if kind == "token":
            tags = (r.get("meta") or {}).get("tags") or []
            top = max([top, *map(int, tags)])
        elif r.get("label") is not None:
            top = max(top, int(r["label"]))
    return top


def check_label_count(
    task: TaskConfig, n: int, records: Iterable[dict[str, Any]], where: str = "task.num_labels"
) -> int:
    """``n`` when every label of ``records`` is below it; a one-line :class:`DataError`
    otherwise (a classifier head of ``n`` outputs cannot learn label ``n``: the loss fails
    with an index error at the first batch that holds one)."""
    top = top_label(records, task.kind)
    if top >= n:
        raise DataError(
            f"task '{task.name}': {where} is {n} but its training data has labels up to {top} "
            f"({top + 1} labels); set it to at least {top + 1}, or to null to derive it from the "
            "data"
        )
    return n
