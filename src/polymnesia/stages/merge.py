"""Stage ``merge_models``: two or more model folders of one architecture merged into one.

Inputs: ``model_0``, ``model_1``, ... (the models to merge, stage folders holding
``model/``) and, for task arithmetic and TIES, ``base`` (the models' common origin). The
merged Hugging Face folder is written to ``model/`` one tensor at a time
(:func:`polymnesia.merging.folders.merge_folders`), so 7B models merge in bounded memory.
Models of other architectures or tokenizers are refused in one line before anything is
written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.errors import ConfigError
from polymnesia.merging.folders import merge_folders
from polymnesia.models.io import model_dir
from polymnesia.pipeline.stage import STAGES, Artifact, Role, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import MODELS

#: the model the task vectors are taken from (task_arithmetic, ties)
BASE = Role("base", Artifact.MODEL, required=False)


class MergeParams(StrictModel):
    method: Literal["average", "task_arithmetic", "ties"] = Field(
        description="average (weights), task_arithmetic or ties (against input 'base')"
    )
    weights: list[float] | None = Field(
        None, description="average: one weight per model (normalised); null: uniform"
    )
    lam: float = Field(1.0, description="task_arithmetic and ties: scale of the merged task vector")
    density: float = Field(0.2, gt=0, le=1, description="ties: share of each task vector kept")

    @model_validator(mode="after")
    def _weights_for_average(self) -> MergeParams:
        if self.weights is not None and self.method != "average":
            raise ValueError(f"weights are for method average, not {self.method}")
        return self


def merged_inputs(ctx: StageContext[MergeParams]) -> list[str]:
    """The roles ``model_0, model_1, ...`` of ``ctx``, in order (no gap allowed)."""
    roles = MODELS.members(ctx.inputs)
    if roles != [MODELS(i) for i in range(len(roles))]:
        raise ConfigError(f"merge_models: inputs must be model_0, model_1, ...; got {roles}")
    return roles


@STAGES.register(
    "merge_models", "model folders of one architecture merged: average, task arithmetic, TIES"
)
class MergeModels(Stage[MergeParams]):
    category = "training"
    inputs = (MODELS, BASE)
    outputs = (Artifact.MODEL,)

    @classmethod
    def named_inputs(cls, params: MergeParams) -> Sequence[str]:
        return [MODELS(0), *([BASE] if params.method != "average" else [])]

    def run(self, ctx: StageContext[MergeParams]) -> list[Score]:
        p = ctx.params
        tuned = [model_dir(ctx.input(r)) for r in merged_inputs(ctx)]
        base = model_dir(ctx.input(BASE)) if BASE in ctx.inputs else None
        merge_folders(
            model_dir(ctx.out_dir),
            tuned,
            p.method,
            base=base,
            weights=p.weights,
            lam=p.lam,
            density=p.density,
        )
        return []
