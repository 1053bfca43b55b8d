"""Extension points of the training loop.

A method (embedding resets, frozen rows, layer freezing, replay, ...) plugs in
as a :class:`TrainingPlugin` rather than as a copy of the loop. The loop calls,
in order: ``param_groups`` (before the optimizer is built), ``setup`` (after
``accelerator.prepare``), then per micro-batch ``loss_term`` or ``logit_term`` (for a
plugin that ``adds_loss``: a term added to the loss, from the batch and the model's outputs,
or as a :class:`~polymnesia.training.loss.LogitTerm` made beside the chunked loss),
and per optimizer step ``before_optimizer_step``
(gradients are final: mask or edit them) and ``after_optimizer_step`` (weights
are updated: reset or restore them). ``state_dict``/``load_state_dict`` put the
plugin's state in every checkpoint so a resumed run continues exactly. A plugin (or a step
function) ends training early with :meth:`LoopState.request_stop`, giving the reason the
loop logs.

How gradients are computed is a separate extension point, the *step function*
(:data:`StepFn`): the default runs forward/backward on each micro-batch; the
per-language gradient combiners supply their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from pydantic import ValidationError

from polymnesia.config.base import StrictModel
from polymnesia.errors import PolymnesiaError
from polymnesia.pipeline.stage import Artifact
from polymnesia.registry import Registry

if TYPE_CHECKING:  # annotations only: a config's plugins are checked without torch
    import torch

    from polymnesia.training.engines import Engine
    from polymnesia.training.loss import LogitTerm


@dataclass
class LoopState:
    """What plugins and step functions can see and change during training."""

    model: torch.nn.Module  # the prepared (possibly wrapped) model
    optimizer: torch.optim.Optimizer
    accelerator: Any
    total_steps: int
    step: int = 0  # optimizer steps completed
    extras: dict[str, Any] = field(default_factory=dict)
    #: the LM head the training loss is made with in chunks (train.chunked_loss;
    #: :mod:`polymnesia.training.loss`), or None: the model's own loss
    lm_head: torch.nn.Linear | None = None
    #: plugins whose :meth:`TrainingPlugin.loss_term` the step adds to each micro-batch's loss
    loss_terms: list[TrainingPlugin] = field(default_factory=list)
    #: the engine the run trains under (:mod:`polymnesia.training.engines`), set by the loop
    engine: Engine | None = None
    #: why training ends early, once something asked (:meth:`request_stop`); None: it runs on
    stop_reason: str | None = None

    def request_stop(self, reason: str) -> None:
        """End training: asked by a plugin's hook, after the optimizer step in progress (and
        its checkpoint, if one is due); asked by a step function, before that step's update.
        The loop logs ``reason`` once; the first request's reason is the one kept."""
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"request_stop needs a reason (a non-empty string), got {reason!r}")
        if self.stop_reason is None:
            self.stop_reason = reason.strip()

    @property
    def unwrapped(self) -> torch.nn.Module:
        return self.accelerator.unwrap_model(self.model)


class TrainingPlugin:
    """Base class with no-op hooks; override what the method needs.

    ``Options`` (a :class:`~polymnesia.config.base.StrictModel`) types the keys of a
    plugin entry in a config (``train.plugins: [{name: NAME, key: value}]``); they are
    validated once, when the config is loaded, and passed to ``__init__`` as keywords.
    ``check_train`` checks options against the rest of the training config.
    ``input_options`` name options whose value is a stage *input role* (another
    stage's model), resolved to that stage's model folder when the plugin is built,
    so no cache path ever enters a config or a fingerprint.
    """

    name: str = "plugin"
    Options: ClassVar[type[StrictModel] | None] = None
    input_options: ClassVar[tuple[str, ...]] = ()
    #: sharded engines ("fsdp", "deepspeed") this plugin is verified under; the others refuse
    #: it before training (:mod:`polymnesia.training.engines`)
    sharded_engines: ClassVar[tuple[str, ...]] = ()
    #: why the sharded engines refuse this plugin, where the generic reason (it edits
    #: parameters or gradients directly) is not the one
    sharded_refusal: ClassVar[str | None] = None
    #: whether the plugin needs a previous model (a teacher, a model to merge with): a
    #: lifelong method's first step trains without it
    #: (:func:`~polymnesia.continual.methods.with_baseline`)
    needs_previous: ClassVar[bool] = False
    #: whether :meth:`loss_term` adds to the training loss (an instance may turn it off)
    adds_loss: bool = False
    #: whether :meth:`logit_term` makes the same term from chunks of the logits (an instance
    #: may turn it off). Where every such plugin does, the loss stays chunked
    #: (``train.chunked_loss``) and :meth:`loss_term` is not called; else the model makes
    #: its full ``(B, L, V)`` logits and its own loss for :meth:`loss_term`
    chunked_term: bool = False

    @classmethod
    def check_train(cls, options: dict[str, Any], train: Any) -> None:
        """Raise ``ValueError`` if ``options`` do not fit ``train`` (a TrainConfig)."""

    def param_groups(
        self, model: torch.nn.Module, groups: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Edit the optimizer's parameter groups (each may carry an ``lr_lambda``)."""
        return groups

    def setup(self, state: LoopState) -> None:
        """Called once after the model and optimizer are prepared (and after a resume)."""

    def loss_term(
        self, state: LoopState, batch: dict[str, torch.Tensor], outputs: Any
    ) -> torch.Tensor:
        """A term added to one micro-batch's loss (where ``adds_loss``): ``outputs`` are the
        model's outputs on ``batch`` (``outputs.loss``, ``outputs.logits``), under the same
        autocast; the step scales the sum for gradient accumulation."""
        raise NotImplementedError(f"plugin {self.name} sets adds_loss but has no loss_term")

    def logit_term(self, state: LoopState, batch: dict[str, torch.Tensor]) -> LogitTerm:
        """The term of :meth:`loss_term` as a :class:`~polymnesia.training.loss.LogitTerm`
        that the chunked loss adds from each chunk of one micro-batch's logits (where
        ``chunked_term``), under the micro-batch's autocast."""
        raise NotImplementedError(f"plugin {self.name} sets chunked_term but has no logit_term")

    def before_optimizer_step(self, state: LoopState) -> None:
        """Gradients are complete (accumulated, reduced, clipped)."""

    def after_optimizer_step(self, state: LoopState) -> None:
        """Weights were updated; ``state.step`` already counts this step."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None

    def sharded_state(self, model: torch.nn.Module) -> dict[tuple[str, ...], list[str]]:
        """The tensors of :meth:`state_dict` that hold this process's shards under a sharded
        engine (FSDP2), by key path: each a flat vector over the local shards of the named
        parameters of ``model``, concatenated in order (as LF-MLF's accumulated update). A
        checkpoint cuts these for another number of processes; every other value of the state
        must be the same on every process, or such a resume is refused naming the plugin."""
        return {}


#: computes gradients for one optimizer step from its micro-batches; returns the mean loss
StepFn: TypeAlias = "Callable[[LoopState, list[dict[str, torch.Tensor]]], torch.Tensor]"


#: methods that plug into the loop, chosen by name in a stage's ``plugins`` list
PLUGINS: Registry[type[TrainingPlugin]] = Registry(
    "training plugin", "training-plugins", "polymnesia.methods"
)


def validate_plugin_spec(spec: Any) -> dict[str, Any]:
    """One plugin entry of a config, checked against the plugin's ``Options``; returns it with
    every option filled in (defaults included), so equal settings give equal fingerprints.
    Raises ``ValueError`` (a pydantic validator turns it into one config line)."""
    if not isinstance(spec, dict):
        raise ValueError(f"a plugin entry is a mapping with 'name', got {spec!r}")
    options = dict(spec)
    name = options.pop("name", None)
    if name not in PLUGINS:
        raise ValueError(
            f"unknown training plugin {name!r}; accepted: {', '.join(PLUGINS.names())}"
        )
    cls = PLUGINS.get(name)
    if cls.Options is None:
        return {"name": name, **options}
    try:
        typed = cls.Options.model_validate(options)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        accepted = ", ".join(cls.Options.model_fields)
        raise ValueError(
            f"plugin {name}: {where + ': ' if where else ''}{msg} (options: {accepted})"
        ) from None
    return {"name": name, **typed.model_dump(mode="json")}


def plugin_input_roles(specs: list[dict[str, Any]]) -> set[str]:
    """The stage input roles that ``specs`` refer to (their ``input_options`` values)."""
    roles: set[str] = set()
    for spec in specs:
        for key in PLUGINS.get(spec["name"]).input_options:
            if spec.get(key):
                roles.add(str(spec[key]))
    return roles


def build_plugins(
    specs: list[dict[str, Any]], inputs: Mapping[str, Path] | None = None
) -> list[TrainingPlugin]:
    """Config entries -> plugin objects; ``inputs`` (role -> stage folder) resolve input options."""
    out = []
    for spec in specs:
        options = dict(spec)
        name = options.pop("name", None)
        if not name:
            raise PolymnesiaError(
                f"training plugin entry {spec} has no 'name'; accepted: "
                f"{', '.join(PLUGINS.names())}"
            )
        cls = PLUGINS.get(name)
        for key in cls.input_options:
            role = options.get(key)
            if role:
                if inputs is None or role not in inputs:
                    raise PolymnesiaError(
                        f"plugin {name}: {key} names stage input '{role}', which this stage "
                        f"does not have; inputs: {', '.join(sorted(inputs or {}))}"
                    )
                options[key] = str(inputs[role] / Artifact.MODEL)
        out.append(cls(**options))
    return out
