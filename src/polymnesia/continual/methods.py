"""The five training methods of paper 004 (section 3.1, eqs. 1-6), registered by name.

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

Departure: MONO and NON-SHARED LoRA do not depend on the order, so their
per-language models are trained once and R is composed per order
(:func:`polymnesia.continual.matrix.compose_independent`): a learned language
is scored with its own model, a language not learned yet with the model of the
language learned last (its zero-shot transfer), so CFT is defined for them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from polymnesia.registry import Registry

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

    def uses_lora(self, rank: int | None) -> bool:
        return self.lora if self.lora is not None else rank is not None


METHODS: Registry[Method] = Registry("continual-learning method", "methods")


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


def get_method(name: str) -> Method:
    """The registered method, or a one-line error naming the ones that exist."""
    return METHODS.get(name)


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
