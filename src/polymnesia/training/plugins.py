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

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from pydantic import ConfigDict, ValidationError

from polymnesia.config.base import StrictModel
from polymnesia.errors import PolymnesiaError
from polymnesia.pipeline.stage import Artifact
from polymnesia.registry import Registry

if TYPE_CHECKING:  # annotations only: a config's plugins are checked without torch
    import torch

    from polymnesia.training.engines import Engine
    from polymnesia.training.loss import LogitTerm
    from polymnesia.training.model_shape import ModelShape


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


@dataclass(frozen=True)
class FisherEstimate:
    """How a plugin's Fisher input is estimated (a ``fisher`` stage): on how many examples of
    the previous task's data, in batches of how many (1: the per-example empirical Fisher)."""

    examples: int
    batch_size: int


@dataclass(frozen=True)
class Baseline:
    """A plugin's declaration as a forgetting baseline (docs/baselines.md): with it, the
    plugin is an arm of ``lifelong`` (the method ``method``, VANILLA's schedule with the
    plugin on every step) and of ``two_phase`` (a ``mitigation.baselines`` arm whose
    ``method`` is the plugin's name, where ``two_phase`` is true), with no protocol edit."""

    method: str  # the lifelong method's name
    label: str  # its row label in tables
    reference: str  # the paper it follows (lifelong's "equation" column)
    description: str  # one line for ``polymnesia ls continual-methods``
    two_phase: bool = True  # also a two_phase Phase 2 arm (step merges are lifelong only)


class PluginOptions(StrictModel):
    """The options of one training plugin (its ``Options``): the keys of its entry in a
    config (``train.plugins: [{name: NAME, key: value}]``), typed, and what the plugin
    answers about its settings to the modules that plan, check and build arms from them.

    ``TrainConfig.plugins`` holds these objects; each serialises back to its entry
    (:meth:`entry`: the plugin's name and every option), which is what fingerprints and
    ``model_dump`` see. ``plugin_name`` is set when the plugin registers. Declarations only:
    no torch here, so configs are checked without it."""

    #: the registered plugin these options belong to (set by :data:`PLUGINS` on registration)
    plugin_name: ClassVar[str] = ""

    @property
    def plugin_class(self) -> type[TrainingPlugin]:
        """The plugin class these options configure."""
        return PLUGINS.get(self.plugin_name)

    def options(self) -> dict[str, Any]:
        """Every option, as the entry lists it (JSON values), without the name."""
        return self.model_dump(mode="json")

    def entry(self) -> dict[str, Any]:
        """The config entry: ``{"name": NAME, option: value, ...}``, every option filled in."""
        return {"name": self.plugin_name, **self.options()}

    def input_roles(self) -> list[tuple[str, str | None]]:
        """``(role, artifact it reads)`` of each stage input role these options name (the
        plugin's ``input_options``; artifact None: no one artifact)."""
        cls = self.plugin_class
        reads = cls.input_reads
        values = self.options()
        return [
            (str(values[key]), reads.get(key, Artifact.MODEL))
            for key in cls.input_options
            if values.get(key)
        ]

    def frozen_share(self, shape: ModelShape) -> float:
        """The share of the blocks' parameters of a model of ``shape`` this plugin freezes
        (for the memory planner: frozen parameters keep no gradient or optimizer state)."""
        return 0.0

    #: whether :meth:`check_model` checks anything (a model is built only for those that do)
    checks_model: ClassVar[bool] = False

    def check_model(self, model: Any) -> None:
        """Raise ``ValueError`` where the options do not fit ``model`` (a model on the meta
        device, before any stage runs); the message starts with the option's key
        (``pattern: ...``)."""

    def for_step(
        self, previous: str | None, *, configured: bool = True, head_carried: bool = False
    ) -> PluginOptions | None:
        """These options for one step of a forgetting-baseline arm: ``previous`` is the stage
        input role of the model the step starts from (and what its stage wrote beside it),
        None for a first step; ``configured``: the arm set the options itself (else they are
        the defaults); ``head_carried``: the step's head comes from the previous model.
        None: the step trains without the plugin (it ``needs_previous`` and there is none)."""
        if self.plugin_class.needs_previous and previous is None:
            return None
        return self

    def fisher_estimate(self) -> FisherEstimate | None:
        """How the Fisher that :meth:`for_step` names is estimated, where the plugin reads one
        (EWC); None: it reads none."""
        return None

    def check_previous_tasks(self, count: int) -> None:
        """Raise ``ValueError`` where the options make no sense after ``count`` previous tasks
        (online EWC's decay needs several)."""


class AnyOptions(PluginOptions):
    """The options of a plugin that declares none: any keys, passed on as they are."""

    model_config = ConfigDict(extra="allow")

    def options(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class TrainingPlugin:
    """Base class with no-op hooks; override what the method needs.

    ``Options`` (a :class:`PluginOptions`) types the keys of a plugin entry in a config
    (``train.plugins: [{name: NAME, key: value}]``); they are validated once, when the
    config is loaded, and passed to ``__init__`` as keywords. What other modules ask of a
    plugin's settings (the share it freezes, its checks on a model, its options for a
    baseline arm's step) the ``Options`` answer. ``check_train`` checks options against the
    rest of the training config. ``input_options`` name options whose value is a stage
    *input role* (another stage's model), resolved to that stage's model folder when the
    plugin is built, so no cache path ever enters a config or a fingerprint. ``baseline``
    declares it a forgetting baseline, an arm of ``lifelong`` and ``two_phase``.
    """

    name: str = "plugin"
    Options: ClassVar[type[PluginOptions] | None] = None
    input_options: ClassVar[tuple[str, ...]] = ()
    #: what an input option's role reads where it is not a model (None: no one artifact)
    input_reads: ClassVar[dict[str, str | None]] = {}
    #: the plugin as a forgetting baseline of lifelong and two_phase (None: it is not one)
    baseline: ClassVar[Baseline | None] = None
    #: sharded engines ("fsdp", "deepspeed") this plugin is verified under; the others refuse
    #: it before training (:mod:`polymnesia.training.engines`)
    sharded_engines: ClassVar[tuple[str, ...]] = ()
    #: why the sharded engines refuse this plugin, where the generic reason (it edits
    #: parameters or gradients directly) is not the one
    sharded_refusal: ClassVar[str | None] = None
    #: whether the plugin needs a previous model (a teacher, a model to merge with): a
    #: baseline arm's first step trains without it (:meth:`PluginOptions.for_step`)
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


class PluginRegistry(Registry[type[TrainingPlugin]]):
    """The training plugins: registering one binds its ``Options`` to its name (a plugin
    without ``Options`` gets :class:`AnyOptions`)."""

    def add(self, name: str, obj: type[TrainingPlugin], description: str = "") -> None:
        super().add(name, obj, description)
        options = obj.__dict__.get("Options", obj.Options)
        base: tuple[type[PluginOptions] | type[StrictModel], ...] = ()
        if options is None:
            base = (AnyOptions,)
        elif not issubclass(options, PluginOptions):
            base = (options, PluginOptions)
        elif options.plugin_name and options.plugin_name != name:  # one class, two plugins
            base = (options,)
        if base:  # a class of its own, found by pickle in the plugin's module
            made = f"{obj.__name__}Options"
            options = type(made, base, {"__module__": obj.__module__, "__qualname__": made})
            if obj.__module__ in sys.modules:
                setattr(sys.modules[obj.__module__], made, options)
        options.plugin_name = name
        obj.Options = options


#: methods that plug into the loop, chosen by name in a stage's ``plugins`` list
PLUGINS: PluginRegistry = PluginRegistry(
    "training plugin", "training-plugins", "polymnesia.methods"
)


def plugin_options(spec: Any) -> PluginOptions:
    """One plugin entry of a config (a mapping with ``name``, or typed options), checked
    against the plugin's ``Options``: every option filled in (defaults included), so equal
    settings give equal fingerprints. Raises ``ValueError`` (a pydantic validator turns it
    into one config line)."""
    if isinstance(spec, PluginOptions):
        if spec.plugin_name in PLUGINS and type(spec) is PLUGINS.get(spec.plugin_name).Options:
            return spec
        # a model deriving the options (a two_phase freezing arm, whose own ``name`` is the
        # arm's): checked as the plugin's options
        spec = {**spec.model_dump(mode="json"), "name": spec.plugin_name}
    if not isinstance(spec, Mapping):
        raise ValueError(f"a plugin entry is a mapping with 'name', got {spec!r}")
    options = dict(spec)
    name = options.pop("name", None)
    if name not in PLUGINS:
        raise ValueError(
            f"unknown training plugin {name!r}; accepted: {', '.join(PLUGINS.names())}"
        )
    cls = PLUGINS.get(name)
    assert cls.Options is not None  # bound on registration
    try:
        return cls.Options.model_validate(options)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        accepted = ", ".join(cls.Options.model_fields)
        raise ValueError(
            f"plugin {name}: {where + ': ' if where else ''}{msg} (options: {accepted})"
        ) from None


def validate_plugin_spec(spec: Any) -> dict[str, Any]:
    """:func:`plugin_options` as its entry: ``{"name": NAME, option: value, ...}``."""
    return plugin_options(spec).entry()


def plugin_input_roles(specs: Sequence[Any]) -> set[str]:
    """The stage input roles that ``specs`` refer to (their ``input_options`` values)."""
    return {role for spec in specs for role, _ in plugin_options(spec).input_roles()}


def build_plugins(
    specs: Sequence[PluginOptions | Mapping[str, Any]], inputs: Mapping[str, Path] | None = None
) -> list[TrainingPlugin]:
    """Config entries (typed options, or mappings with ``name``, passed unchecked to the
    plugin) -> plugin objects; ``inputs`` (role -> stage folder) resolve input options."""
    out = []
    for spec in specs:
        if isinstance(spec, PluginOptions):
            name, options = spec.plugin_name, spec.options()
        else:
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
