"""The five training methods of Khelli et al. 2025 (section 3.1, eqs. 1-6), and the standard
forgetting
baselines, registered by name.

Each method says how the models of a run are trained, which decides how many
trainable parameters it has (Table 1) and how its accuracy matrix R is filled:

* ``multi`` (eq. 1): ``theta* = argmin sum_l L(D_l; theta)``: one model (or one
  LoRA adapter) trained on the union of all languages. One R row repeated:
  the same model is scored after every "step".
* ``mono`` (eqs. 2-3): ``theta_l* = argmin L(D_l; theta)`` for each language,
  every language scored with its own model.
* ``vanilla`` (eq. 4): ``theta_t = argmin L(D_{l_t}; theta)`` starting from
  ``theta_{t-1}``: one model trained language after language, all parameters
  updated.
* ``shared_lora`` (eq. 5): the base is frozen and one adapter ``Delta_theta`` is
  trained language after language, starting from ``Delta_theta_{t-1}``.
* ``nonshared_lora`` (eq. 6): a fresh adapter ``Delta_theta_l`` per language on
  the frozen base; at test time each language uses its own adapter.

``merge`` trains each step as VANILLA does and then averages the trained weights with
the previous step's (the model it started from), half and half: the merged model is the
step's model, scored and carried on. ``merge_ta`` and ``merge_ties`` do the same with task
arithmetic and TIES-merging against the lifelong base, the model before the first step.
All three merge by their step-merge plugin (``merge_average``, ``merge_ta``,
``merge_ties``: :mod:`polymnesia.methods.step_merge`, the one place a merge rule plugs in);
their first step is VANILLA's. The baselines
``l2sp``, ``ewc`` (online) and ``lwf`` train as VANILLA does, language
after language with all parameters updated, with their regularisation
(:mod:`polymnesia.methods.regularization`) pulling each step towards the model of the
step before; their first step has no previous model and trains as VANILLA's (L2-SP
pulls it towards the base). ``replay`` trains as VANILLA does with earlier languages'
training examples, kept in a buffer, mixed into each later step
(:mod:`polymnesia.continual.replay`).

The forgetting baselines made of a training plugin (the regularisers and the merges) are
declared by their plugin (its ``baseline``: name, label, reference, description) and listed
here from it, so a new one is its plugin file alone (docs/architecture.md, "A forgetting
baseline").

Departure: MONO and NON-SHARED LoRA do not depend on the order, so their
per-language models are trained once and R is composed per order
(:func:`polymnesia.continual.matrix.compose_independent`): a learned language
is scored with its own model, a language not learned yet with the model of the
language learned last (its zero-shot transfer), so CFT is defined for them too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from polymnesia.registry import Entry, Registry
from polymnesia.training.config import EpochTrainConfig
from polymnesia.training.plugins import PLUGINS, plugin_options

Schedule = Literal["joint", "independent", "sequential"]


@dataclass(frozen=True)
class Method:
    """How one of the paper's methods trains: schedule, LoRA or not, paper defaults."""

    name: str
    label: str  # as the paper's tables print it
    equation: str
    schedule: Schedule
    lora: bool | None  # None: both (MULTI is reported with and without LoRA)
    #: Khelli et al. 2025 section 3.5 defaults: learning rate, max epochs, patience
    paper_lr: float
    paper_max_epochs: int
    paper_patience: int
    #: a forgetting baseline's training plugin (one that declares a
    #: :class:`~polymnesia.training.plugins.Baseline`: L2-SP, EWC, LwF, the step merges):
    #: added to every step of the arm with its defaults unless the arm's ``plugins``
    #: configure it
    baseline: str | None = None
    #: examples of the languages learned before mixed into each step from a stored buffer
    #: (:mod:`polymnesia.continual.replay`; the config's ``replay`` section)
    replay: bool = False

    @property
    def against_forgetting(self) -> bool:
        """A forgetting baseline (regularisation, merging or replay; docs/baselines.md),
        judged against VANILLA on forgetting."""
        return self.baseline is not None or self.replay

    def uses_lora(self, rank: int | None) -> bool:
        return self.lora if self.lora is not None else rank is not None


class MethodRegistry(Registry[Method]):
    """The methods: the paper's five and replay, declared here, and one forgetting baseline
    per training plugin that declares one (:attr:`TrainingPlugin.baseline
    <polymnesia.training.plugins.TrainingPlugin.baseline>`), read from the plugins on a
    lookup of another name and on listing (so a config of the paper's methods is read
    without importing a plugin, and a plugin registered later is found)."""

    def _baselines(self) -> None:
        for entry in PLUGINS:
            b = entry.obj.baseline
            if b is not None and b.method not in self._entries:
                # VANILLA's schedule and paper defaults, with the plugin on every step
                method = Method(
                    b.method, b.label, b.reference, "sequential", False, 5e-5, 50, 5, entry.name
                )
                self.add(b.method, method, b.description)

    def get(self, name: str) -> Method:
        if name not in self._entries:
            self._baselines()
        return super().get(name)

    def __contains__(self, name: object) -> bool:
        if name not in self._entries:
            self._baselines()
        return super().__contains__(name)

    def __iter__(self) -> Iterator[Entry[Method]]:
        self._baselines()
        return super().__iter__()

    def names(self) -> list[str]:
        self._baselines()
        return super().names()


METHODS = MethodRegistry("continual-learning method", "continual-methods")


def _register(method: Method, description: str) -> None:
    METHODS.add(method.name, method, description)


# (name, label, equation, schedule, lora, paper lr, max epochs, patience), then the description
_register(
    Method("multi", "MULTI", "eq. 1", "joint", None, 5e-5, 50, 5),
    "one model (or one LoRA adapter) trained on all languages at once (Khelli et al. 2025, eq. 1)",
)
_register(
    Method("mono", "MONO", "eqs. 2-3", "independent", False, 5e-5, 50, 5),
    "one full model per language (Khelli et al. 2025, eqs. 2-3)",
)
_register(
    Method("vanilla", "VANILLA", "eq. 4", "sequential", False, 5e-5, 50, 5),
    "one model trained language after language, all parameters updated (Khelli et al. 2025, eq. 4)",
)
_register(
    Method("shared_lora", "SHARED LoRA", "eq. 5", "sequential", True, 5e-6, 100, 15),
    "one LoRA adapter trained language after language, base frozen (Khelli et al. 2025, eq. 5)",
)
_register(
    Method("nonshared_lora", "NON-SHARED LoRA", "eq. 6", "independent", True, 5e-6, 100, 15),
    "a fresh LoRA adapter per language, base frozen; each language uses its own (Khelli et al. "
    "2025, eq. 6)",
)


_register(
    Method(
        "replay", "REPLAY", "Chaudhry et al. 2019", "sequential", False, 5e-5, 50, 5, replay=True
    ),
    "VANILLA plus replay: earlier languages' training examples from a stored buffer "
    "(reservoir or per-language quota) mixed into each step",
)


def get_method(name: str) -> Method:
    """The registered method, or a one-line error naming the ones that exist."""
    return METHODS.get(name)


#: the input role of a lifelong step's previous step (``stages.sequential.PREV``): its model,
#: and what it wrote beside it (EWC's Fisher)
PREVIOUS = "prev"


def with_baseline(method: str, hyper: EpochTrainConfig, has_prev: bool) -> EpochTrainConfig:
    """``hyper`` of one step of ``method`` with its baseline's plugin options (for the
    stage's fingerprint): the arm's own entry of that plugin if it lists one, else the
    defaults, as the plugin sets them for a step after the input ``prev`` (or a first step,
    without one; :meth:`~polymnesia.training.plugins.PluginOptions.for_step`): EWC reads the
    previous step's Fisher, LwF and the step merges train without their previous model on a
    first step, L2-SP anchors the classification head only when it was carried over."""
    name = get_method(method).baseline
    if name is None:
        return hyper
    own = next((s for s in hyper.plugins if s.plugin_name == name), None)
    others = [s for s in hyper.plugins if s.plugin_name != name]
    options = own if own is not None else plugin_options({"name": name})
    step = options.for_step(
        PREVIOUS if has_prev else None, configured=own is not None, head_carried=has_prev
    )
    return hyper.model_copy(update={"plugins": [*others, *([step] if step is not None else [])]})


def arm_label(method: str, rank: int | None) -> str:
    """The row label of one arm: ``VANILLA``, ``SHARED LoRA r=8``, ``MULTI r=4``."""
    m = get_method(method)
    return f"{m.label} r={rank}" if rank is not None and m.uses_lora(rank) else m.label


def table1_params(method: str, per_model: int, n_languages: int) -> int:
    """Trainable parameters as Table 1 of 004 counts them.

    ``per_model`` is the trainable count of one model (all weights, or one
    adapter plus the classification head). MONO and NON-SHARED LoRA train one
    per language: Table 1 lists MONO at 14,458.27M = 52 x 278.04M (XLM-R base)
    and NON-SHARED LoRA r=32 at 278.04M ~ 52 x 5.36M, so they are multiplied by
    the number of languages; the others train one.
    """
    m = get_method(method)
    return per_model * n_languages if m.schedule == "independent" else per_model
