"""Step merges: a lifelong step's trained model merged with the previous step's model
(the MERGE arms of ``lifelong``; docs/baselines.md), as training plugins.

One mechanism serves every merge rule. A :class:`StepMerge` plugin keeps a CPU copy of the
weights training starts from (the previous step's model), taken when the optimizer's
parameter groups are built, before any update or resumed checkpoint. After training, and
after early stopping has restored the best epoch, the ``sequential_step`` stage calls
:meth:`StepMerge.merge_into`: the rule's :meth:`StepMerge.merged` yields the merged tensors
one at a time and each is written back into the model, so the merge holds one CPU copy of
the model (the start), plus one of the base for a rule that merges against it.

* ``merge_average`` (weight averaging): ``(1 - w) theta_{t-1} + w theta_t``, with
  :func:`polymnesia.merging.maths.average` on each tensor; ``weight = 1/2`` by default.
* ``merge_ta`` (Ilharco et al. 2023): ``theta_0 + lam (tau_prev + tau_new)`` against the base
  ``theta_0`` (the pretrained body and the head initialised from the step's seed: the model
  the arm's first step started from), by :func:`polymnesia.merging.maths.iter_merge_step`;
  ``lam = 1/2`` is the average, so the default is 0.4.
* ``merge_ties`` (Yadav et al. 2023): trim each task vector to ``density``, elect the sign,
  disjoint mean, ``theta_0 + lam tau_m``; defaults ``density = 0.2``, ``lam = 1``.

A new rule is a :class:`StepMerge` subclass registered with :func:`step_merge` (its options,
:meth:`~StepMerge.merged` and :meth:`~StepMerge.options`; ``needs_base`` if it merges against
``theta_0``); a lifelong arm uses it as its ``baseline`` plugin
(:mod:`polymnesia.continual.methods`).

Only the ``sequential_step`` stage applies the merge, so the plugins are refused in any
other training config (one line); a step without a previous model is not merged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import torch
from pydantic import Field

from polymnesia.errors import ConfigError
from polymnesia.merging.maths import average, check_compatible, check_step_merge, iter_merge_step
from polymnesia.training.config import EpochTrainConfig
from polymnesia.training.plugins import PLUGINS, Baseline, PluginOptions, TrainingPlugin

State = Mapping[str, torch.Tensor]


class MergeAverageOptions(PluginOptions):
    """Options of the ``merge_average`` plugin (weight averaging, the MERGE arm)."""

    weight: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="weight of the step's trained model; the previous step's gets 1 - weight",
    )


class MergeTAOptions(PluginOptions):
    """Options of the ``merge_ta`` plugin (task arithmetic, Ilharco et al. 2023)."""

    lam: float = Field(
        0.4, gt=0, description="lambda, scale of the summed task vectors (0.5: MERGE's average)"
    )


class MergeTIESOptions(PluginOptions):
    """Options of the ``merge_ties`` plugin (TIES-merging, Yadav et al. 2023)."""

    density: float = Field(
        0.2, gt=0, le=1, description="share of each task vector's entries kept (per tensor)"
    )
    lam: float = Field(1.0, gt=0, description="lambda, scale of the merged task vector")


class StepMerge(TrainingPlugin):
    """Keeps the weights training started from; :meth:`merge_into` replaces the trained
    model's weights by the rule's merge of them and the start (against the base where the
    rule ``needs_base``)."""

    rule: ClassVar[str] = ""
    needs_previous = True  # the model it merges with
    #: whether the rule merges against the lifelong base ``theta_0`` (task vectors)
    needs_base: ClassVar[bool] = False
    sharded_refusal = (
        "it merges whole CPU copies of the model after training (a sharded model has none)"
    )

    def __init__(self) -> None:
        self.start: dict[str, torch.Tensor] | None = None

    @classmethod
    def check_train(cls, options: dict[str, Any], train: Any) -> None:
        if not isinstance(train, EpochTrainConfig):
            raise ValueError(
                "merges a lifelong step with the previous one and is applied by the "
                "sequential_step stage only (the lifelong arms merge, merge_ta, merge_ties)"
            )

    def param_groups(
        self, model: torch.nn.Module, groups: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        self.start = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        return groups

    def options(self) -> dict[str, Any]:
        """The merge as a step summary records it: the rule and its options."""
        raise NotImplementedError

    def merged(
        self, start: State, trained: State, base: State | None
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """The merged tensors (name, tensor on the CPU), one at a time; ``trained`` is read
        one tensor at a time as they are made."""
        raise NotImplementedError

    def merge_into(self, model: torch.nn.Module, base: State | None = None) -> None:
        """Overwrite ``model``'s weights, tensor by tensor, with the merge of them and the
        start's (against ``base`` where the rule needs it); the start's copy is freed.
        Tensors tied to one already written (one storage under two names) are not merged
        twice."""
        if self.start is None:
            raise RuntimeError(f"{self.name}: no starting weights (training did not run)")
        if self.needs_base and base is None:
            raise RuntimeError(f"{self.name}: merges against the base, and none was given")
        state = model.state_dict()  # tensors sharing the parameters' storage
        names = _untied(state)
        with torch.no_grad():
            for name, merged in self.merged(
                _only(self.start, names),
                _only(state, names),
                None if base is None else _only(base, names),
            ):
                state[name].copy_(merged)
        self.start = None


def _untied(state: State) -> list[str]:
    """The names of ``state`` less those whose tensor is a view already listed (tied weights:
    written once, and read before it is written)."""
    seen: set[tuple[Any, ...]] = set()
    out = []
    for k, v in state.items():
        key = (v.device, v.data_ptr(), v.dtype, tuple(v.shape), v.stride())
        if v.numel() == 0 or key not in seen:
            out.append(k)
        seen.add(key)
    return out


def _only(state: State, names: list[str]) -> State:
    return state if len(names) == len(state) else {k: state[k] for k in names}


#: the step-merge plugins by name, which the sequential_step stage applies after training
STEP_MERGE_PLUGINS: dict[str, type[StepMerge]] = {}


def step_merge(name: str, description: str) -> Callable[[type[StepMerge]], type[StepMerge]]:
    """Register a :class:`StepMerge` rule as the training plugin ``name``."""

    def add(cls: type[StepMerge]) -> type[StepMerge]:
        STEP_MERGE_PLUGINS[name] = cls
        PLUGINS.register(name, description)(cls)
        return cls

    return add


@step_merge(
    "merge_average",
    "lifelong MERGE: after the step, (1 - weight) theta_prev + weight theta_new "
    "(weight averaging with the previous step's model; weight 1/2)",
)
class MergeAverage(StepMerge):
    name = "merge_average"
    rule = "average"
    Options = MergeAverageOptions
    baseline = Baseline(
        "merge",
        "MERGE",
        "weight averaging",
        "VANILLA, then each step's model averaged with the previous step's (weights 1/2, 1/2)",
        two_phase=False,
    )

    def __init__(self, weight: float = 0.5) -> None:
        super().__init__()
        if isinstance(weight, bool) or not 0 < weight < 1:
            raise ConfigError(f"merge_average: weight must be in (0, 1), got {weight!r}")
        self.weight = float(weight)

    def options(self) -> dict[str, Any]:
        return {"rule": self.rule, "weight": self.weight}

    def merged(
        self, start: State, trained: State, base: State | None
    ) -> Iterator[tuple[str, torch.Tensor]]:
        weights = [1 - self.weight, self.weight]  # normalised by average, as they always were
        for k in check_compatible([start, trained], "merge_average"):
            s = start[k]
            yield k, average([{k: s}, {k: trained[k].detach().to(s.device)}], weights)[k]


class _AgainstBase(StepMerge):
    """A rule on the task vectors ``theta - theta_0`` (merging.iter_merge_step)."""

    needs_base = True

    def __init__(self, lam: float, density: float = 1.0) -> None:
        super().__init__()
        check_step_merge(self.rule, lam, density)
        self.lam, self.density = float(lam), float(density)

    def options(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rule": self.rule, "lam": self.lam}
        return {**out, "density": self.density} if self.rule == "ties" else out

    def merged(
        self, start: State, trained: State, base: State | None
    ) -> Iterator[tuple[str, torch.Tensor]]:
        if base is None:
            raise RuntimeError(f"{self.name}: merges against the base, and none was given")
        return iter_merge_step(base, start, trained, self.rule, self.lam, self.density)


@step_merge(
    "merge_ta",
    "lifelong MERGE-TA: after the step, theta_0 + lam (tau_prev + tau_new) against the base "
    "(task arithmetic, Ilharco et al. 2023)",
)
class MergeTA(_AgainstBase):
    name = "merge_ta"
    rule = "task_arithmetic"
    Options = MergeTAOptions
    baseline = Baseline(
        "merge_ta",
        "MERGE-TA",
        "Ilharco et al. 2023",
        "VANILLA, then task arithmetic of the step's and the previous step's model against the "
        "base, theta_0 + lam (tau_prev + tau_new) (Ilharco et al. 2023; lam 0.4)",
        two_phase=False,
    )

    def __init__(self, lam: float = 0.4) -> None:
        super().__init__(lam)


@step_merge(
    "merge_ties",
    "lifelong MERGE-TIES: after the step, TIES-merging of the previous and the new model "
    "against the base (Yadav et al. 2023)",
)
class MergeTIES(_AgainstBase):
    name = "merge_ties"
    rule = "ties"
    Options = MergeTIESOptions
    baseline = Baseline(
        "merge_ties",
        "MERGE-TIES",
        "Yadav et al. 2023",
        "VANILLA, then TIES-merging of the step's and the previous step's model against the base "
        "(Yadav et al. 2023; density 0.2, lam 1)",
        two_phase=False,
    )

    def __init__(self, density: float = 0.2, lam: float = 1.0) -> None:
        super().__init__(lam, density)
