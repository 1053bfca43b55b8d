"""Plugins ``merge_ta`` and ``merge_ties``: a lifelong step's trained model merged with the
previous step's model, against the model before the first step (issue 27; docs/baselines.md).

The plugin keeps a CPU copy of the weights training starts from (the previous step's model),
taken when the optimizer's parameter groups are built, before any update or resumed
checkpoint. After training, and after early stopping has restored the best epoch, the
``sequential_step`` stage calls :meth:`StepMerge.merge_into` with the base's weights
(the pretrained body and the head initialised from the step's seed: the model the arm's
first step started from): each tensor is merged by
:func:`polymnesia.methods.merging.iter_merge_step` and written back into the model, one at
a time, so the merge holds two CPU copies of the model (start and base) as MERGE's averaging
does (start and result).

* ``merge_ta`` (Ilharco et al. 2023): ``theta_0 + lam (tau_prev + tau_new)``; ``lam = 1/2``
  is MERGE's averaging, so the default is 0.4.
* ``merge_ties`` (Yadav et al. 2023): trim each task vector to ``density``, elect the sign,
  disjoint mean, ``theta_0 + lam tau_m``; defaults ``density = 0.2``, ``lam = 1``.

Only the ``sequential_step`` stage applies the merge, so the plugins are refused in any
other training config (one line); a step without a previous model is not merged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.methods.merging import check_step_merge, iter_merge_step
from polymnesia.training.config import EpochTrainConfig
from polymnesia.training.plugins import PLUGINS, TrainingPlugin


class MergeTAOptions(StrictModel):
    """Options of the ``merge_ta`` plugin (task arithmetic, Ilharco et al. 2023)."""

    lam: float = Field(
        0.4, gt=0, description="lambda, scale of the summed task vectors (0.5: MERGE's average)"
    )


class MergeTIESOptions(StrictModel):
    """Options of the ``merge_ties`` plugin (TIES-merging, Yadav et al. 2023)."""

    density: float = Field(
        0.2, gt=0, le=1, description="share of each task vector's entries kept (per tensor)"
    )
    lam: float = Field(1.0, gt=0, description="lambda, scale of the merged task vector")


class StepMerge(TrainingPlugin):
    """Keeps the weights training started from; :meth:`merge_into` merges the trained model
    with them against the base."""

    rule: ClassVar[str] = ""
    sharded_refusal = (
        "it merges whole CPU copies of the model after training (a sharded model has none)"
    )

    def __init__(self, lam: float, density: float = 1.0) -> None:
        check_step_merge(self.rule, lam, density)
        self.lam, self.density = float(lam), float(density)
        self.start: dict[str, torch.Tensor] | None = None

    @classmethod
    def check_train(cls, options: dict[str, Any], train: Any) -> None:
        if not isinstance(train, EpochTrainConfig):
            raise ValueError(
                "merges a lifelong step with the previous one and is applied by the "
                "sequential_step stage only (the lifelong arms merge_ta, merge_ties)"
            )

    def param_groups(
        self, model: torch.nn.Module, groups: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        self.start = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        return groups

    def options(self) -> dict[str, Any]:
        """The merge as a step summary records it."""
        out: dict[str, Any] = {"rule": self.rule, "lam": self.lam}
        return {**out, "density": self.density} if self.rule == "ties" else out

    def merge_into(self, model: torch.nn.Module, base: Mapping[str, torch.Tensor]) -> None:
        """Overwrite ``model``'s weights, tensor by tensor, with the merge of them and the
        start's against ``base``; the start's copy is freed."""
        if self.start is None:
            raise RuntimeError(f"{self.name}: no starting weights (training did not run)")
        state = model.state_dict()  # tensors sharing the parameters' storage
        with torch.no_grad():
            for name, merged in iter_merge_step(
                base, self.start, state, self.rule, self.lam, self.density
            ):
                state[name].copy_(merged)
        self.start = None


#: the plugins whose merge the sequential_step stage applies after training
STEP_MERGE_PLUGINS = ("merge_ta", "merge_ties")


@PLUGINS.register(
    "merge_ta",
    "lifelong MERGE-TA: after the step, theta_0 + lam (tau_prev + tau_new) against the base "
    "(task arithmetic, Ilharco et al. 2023)",
)
class MergeTA(StepMerge):
    name = "merge_ta"
    rule = "task_arithmetic"
    Options = MergeTAOptions

    def __init__(self, lam: float = 0.4) -> None:
        super().__init__(lam)


@PLUGINS.register(
    "merge_ties",
    "lifelong MERGE-TIES: after the step, TIES-merging of the previous and the new model "
    "against the base (Yadav et al. 2023)",
)
class MergeTIES(StepMerge):
    name = "merge_ties"
    rule = "ties"
    Options = MergeTIESOptions

    def __init__(self, density: float = 0.2, lam: float = 1.0) -> None:
        super().__init__(lam, density)
