"""The five training methods of paper 004 (section 3.1, eqs. 1-6), and the standard forgetting
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

Departure: MONO and NON-SHARED LoRA do not depend on the order, so their
per-language models are trained once and R is composed per order
(:func:`polymnesia.continual.matrix.compose_independent`): a learned language
is scored with its own model, a language not learned yet with the model of the
language learned last (its zero-shot transfer), so CFT is defined for them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from polymnesia.registry import Registry
from polymnesia.training.config import EpochTrainConfig
from polymnesia.training.plugins import PLUGINS, validate_plugin_spec

Schedule = Literal["joint", "independent", "sequential"]


@dataclass(frozen=True)
class Method:
    """How one of the paper's methods trains: schedule, LoRA or not, paper defaults."""

    name: str
    label: str  # as the paper's tables print it
    equation: str
    schedule: Schedule
    lora: bool | None  # None: both (MULTI is reported with and without LoRA)
    #: paper 004 section 3.5 defaults: learning rate, max epochs, patience
    paper_lr: float
    paper_max_epochs: int
    paper_patience: int
    #: a forgetting baseline's training plugin (``l2sp``, ``ewc``, ``distill``, or a step
    #: merge: ``merge_average``, ``merge_ta``, ``merge_ties``): added to every step of the arm
    #: with its defaults unless the arm's ``plugins`` configure it
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


METHODS: Registry[Method] = Registry("continual-learning method", "continual-methods")


def _register(method: Method, description: str) -> None:
    METHODS.add(method.name, method, description)


# (name, label, equation, schedule, lora, paper lr, max epochs, patience), then the description
_register(
    Method("multi", "MULTI", "eq. 1", "joint", None, 5e-5, 50, 5),
    "one model (or one LoRA adapter) trained on all languages at once (004 eq. 1)",
)
_register(
    Method("mono", "MONO", "eqs. 2-3", "independent", False, 5e-5, 50, 5),
    "one full model per language (004 eqs. 2-3)",
)
_register(
    Method("vanilla", "VANILLA", "eq. 4", "sequential", False, 5e-5, 50, 5),
    "one model trained language after language, all parameters updated (004 eq. 4)",
)
_register(
    Method("shared_lora", "SHARED LoRA", "eq. 5", "sequential", True, 5e-6, 100, 15),
    "one LoRA adapter trained language after language, base frozen (004 eq. 5)",
)
_register(
    Method("nonshared_lora", "NON-SHARED LoRA", "eq. 6", "independent", True, 5e-6, 100, 15),
    "a fresh LoRA adapter per language, base frozen; each language uses its own (004 eq. 6)",
)


# VANILLA, then the step's model merged with the previous step's by a step-merge plugin
# (methods.step_merge): averaged (merge_average), or against the lifelong base (the model
# before the first step) by the plugin of the arm's name
_register(
    Method(
        "merge",
        "MERGE",
        "weight averaging",
        "sequential",
        False,
        5e-5,
        50,
        5,
        "merge_average",
    ),
    "VANILLA, then each step's model averaged with the previous step's (weights 1/2, 1/2)",
)
_register(
    Method(
        "merge_ta", "MERGE-TA", "Ilharco et al. 2023", "sequential", False, 5e-5, 50, 5, "merge_ta"
    ),
    "VANILLA, then task arithmetic of the step's and the previous step's model against the "
    "base, theta_0 + lam (tau_prev + tau_new) (Ilharco et al. 2023; lam 0.4)",
)
_register(
    Method(
        "merge_ties",
        "MERGE-TIES",
        "Yadav et al. 2023",
        "sequential",
        False,
        5e-5,
        50,
        5,
        "merge_ties",
    ),
    "VANILLA, then TIES-merging of the step's and the previous step's model against the base "
    "(Yadav et al. 2023; density 0.2, lam 1)",
)
# the standard forgetting baselines (issue 27; docs/baselines.md): VANILLA's schedule with a
# pull towards the previous step's model; full fine-tuning with VANILLA's paper defaults
_register(
    Method("l2sp", "L2-SP", "Xuhong et al. 2018", "sequential", False, 5e-5, 50, 5, "l2sp"),
    "VANILLA plus an L2 pull towards the previous step's weights (L2-SP, Xuhong et al. 2018)",
)
_register(
    Method("ewc", "EWC", "Kirkpatrick et al. 2017", "sequential", False, 5e-5, 50, 5, "ewc"),
    "VANILLA plus online EWC: a Fisher-weighted pull to the previous step's weights "
    "(Kirkpatrick et al. 2017, Schwarz et al. 2018)",
)
_register(
    Method("lwf", "LwF", "Li & Hoiem 2017", "sequential", False, 5e-5, 50, 5, "distill"),
    "VANILLA plus distillation (KL at temperature T) to the previous step's outputs "
    "(LwF, Li & Hoiem 2017)",
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


def with_baseline(method: str, hyper: EpochTrainConfig, has_prev: bool) -> EpochTrainConfig:
    """``hyper`` of one step of ``method`` with its baseline's plugin entry (for the stage's
    fingerprint): the arm's own entry of that plugin if it lists one, else the defaults.
    ``ewc`` reads the Fisher of the previous step (input ``prev``); ``distill`` needs a
    previous model as teacher and the step merges one to merge with, so a first step trains
    without them; ``l2sp`` anchors the classification head only when it was carried over
    from a previous step (unless set)."""
    name = get_method(method).baseline
    if name is None:
        return hyper
    own = next((dict(s) for s in hyper.plugins if s["name"] == name), None)
    others = [s for s in hyper.plugins if s["name"] != name]
    spec: dict[str, Any] = own if own is not None else {"name": name}
    if PLUGINS.get(name).needs_previous and not has_prev:  # distill, the step merges
        return hyper.model_copy(update={"plugins": others})
    if name == "ewc":
        spec["fisher"] = "prev" if has_prev else None
    if name == "l2sp" and own is None:
        spec["anchor_head"] = has_prev
    return hyper.model_copy(update={"plugins": [*others, validate_plugin_spec(spec)]})


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
