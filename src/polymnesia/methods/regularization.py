"""Regularisation baselines against forgetting: L2-SP, EWC (and online EWC), LwF distillation.

Each pulls training towards the model it started from: in a sequential protocol
(Khelli et al. 2025's ``lifelong``) that is the previous language's model, so these are the
standard answers to "sequential fine-tuning forgets".

* ``l2sp`` (Xuhong et al. 2018): ``alpha/2 ||theta_S - theta_S^0||^2`` on the shared body
  (``theta^0``: the weights training starts from) plus ``beta/2 ||theta_H||^2`` on the head
  (or, with ``anchor_head``, the head pulled to its start with ``alpha`` like the body).
* ``ewc`` (Kirkpatrick et al. 2017): ``lambda/2 sum_i F_i (theta_i - theta*_i)^2`` with
  ``theta*`` the starting weights and ``F`` the diagonal empirical Fisher of the previous
  task's data at ``theta*`` (:func:`~polymnesia.penalties.fisher.diagonal_fisher`). Online
  EWC (Schwarz et al. 2018) keeps one running Fisher ``F*_t = gamma F*_{t-1} + F_t``
  (:func:`~polymnesia.penalties.fisher.online_fisher`);
  ``gamma = 1`` sums the tasks' Fishers at the latest anchor.
* ``distill`` (Li & Hoiem 2017, LwF): ``CE + lambda T^2 KL(softmax(z_0/T) || softmax(z/T))``
  with ``z_0`` the outputs of the starting model (a frozen copy) on the current batch.

The quadratic penalties are not put in the loss: their gradient is added exactly,
``grad += strength * w * (theta - theta_0)``, in ``before_optimizer_step`` (before clipping,
as the gradient of a penalty in the loss would be), element by element. So they cost one
fused multiply-add per parameter, and under FSDP2 each process adds it to the shard it holds
(``sharded_engines = ("fsdp2",)``). The anchor is taken in ``param_groups``, before a
checkpoint is resumed, so a resumed run pulls towards the same point; with a strength of 0
nothing is touched (bit-identical to plain training).

Distillation is a loss term of the one training loop (``adds_loss``), added to each
micro-batch's loss by the standard step. Where the loss is made in chunks of positions
(``train.chunked_loss``), so is the KL (``chunked_term``): the teacher gives its final hidden
states, and each chunk's student and teacher logits are made once, for the cross-entropy and
the KL together (:func:`~polymnesia.penalties.distillation.distillation_rows`), so
distillation costs one forward pass of the teacher and no ``(B, L, V)`` logits. Sharded
engines refuse it (its teacher is a whole copy of the model in every process).

The maths (penalties, their gradient, the Fisher and its file, the KL) lives in
:mod:`polymnesia.penalties`; this module holds the plugins.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from pydantic import Field

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.models.anatomy import split_body_head
from polymnesia.penalties.distillation import distillation_loss, distillation_rows
from polymnesia.penalties.fisher import FISHER_FILE, load_fisher
from polymnesia.penalties.quadratic import Tensors, add_penalty_grad_, quadratic_penalty
from polymnesia.training.fsdp import local, local_rows
from polymnesia.training.loss import LogitTerm, chunked_head, final_hidden, head_dtype
from polymnesia.training.plugins import (
    PLUGINS,
    Baseline,
    FisherEstimate,
    LoopState,
    PluginOptions,
    TrainingPlugin,
)

# --- pure functions -------------------------------------------------------------------


# --- anchored plugins -------------------------------------------------------------------


def _local_anchor(full: torch.Tensor, p: torch.nn.Parameter) -> torch.Tensor:
    """The rows of ``full`` (a whole tensor) that this process holds of ``p`` (maybe sharded)."""
    rows, start = local_rows(p.detach())
    if rows.shape == full.shape:
        return full.to(device=rows.device, dtype=torch.float32)
    return full[start : start + rows.shape[0]].to(device=rows.device, dtype=torch.float32)


class _Anchored(TrainingPlugin):
    """Keeps ``theta^0`` (the weights training starts from) and adds a quadratic pull to it."""

    sharded_engines = ("fsdp2",)
    strength = 0.0

    def __init__(self) -> None:
        self._full: Tensors = {}
        self._terms: list[tuple[torch.nn.Parameter, torch.Tensor, torch.Tensor | float]] = []
        self._scale: float = 0.0

    def _pulled(self, model: torch.nn.Module) -> list[str]:
        """Names of the parameters to pull (called on the whole model, before sharding)."""
        return [n for n, p in model.named_parameters() if p.requires_grad]

    def _weight(self, name: str, p: torch.nn.Parameter) -> torch.Tensor | float:
        return 1.0

    def param_groups(
        self, model: torch.nn.Module, groups: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        if self.strength:
            params = dict(model.named_parameters())
            self._full = {n: params[n].detach().float().clone() for n in self._pulled(model)}
        return groups

    def setup(self, state: LoopState) -> None:
        self._terms = []
        for name, p in state.unwrapped.named_parameters():
            if name in self._full and p.requires_grad:
                self._terms.append((p, _local_anchor(self._full[name], p), self._weight(name, p)))
        self._full = {}

    def before_optimizer_step(self, state: LoopState) -> None:
        if self.strength and self._terms:
            ps, anchors, weights = zip(*self._terms, strict=True)
            add_penalty_grad_(ps, anchors, weights, self.strength)

    def penalty(self) -> torch.Tensor:
        """The penalty's current value (for logging and tests)."""
        if not self._terms:
            return torch.zeros(())
        ps, anchors, weights = zip(*self._terms, strict=True)
        with torch.no_grad():
            return quadratic_penalty(
                [local(p.detach()).float() for p in ps], anchors, weights, self.strength
            )


class L2SPOptions(PluginOptions):
    """Options of the ``l2sp`` plugin (Xuhong et al. 2018)."""

    alpha: float = Field(0.01, ge=0, description="pull of the body to its starting weights")
    beta: float = Field(0.0, ge=0, description="L2 (towards 0) on the head's parameters")
    anchor_head: bool = Field(
        False, description="pull the head to its starting weights with alpha too (a carried head)"
    )

    def for_step(
        self, previous: str | None, *, configured: bool = True, head_carried: bool = False
    ) -> PluginOptions | None:
        """Left at its defaults, the pull anchors the head only where it was carried over
        from the previous model (a lifelong step after the first)."""
        return self if configured else self.model_copy(update={"anchor_head": head_carried})


@PLUGINS.register(
    "l2sp",
    "L2-SP: pull the weights towards those training started from, alpha/2 ||theta - theta_0||^2",
)
class L2SP(_Anchored):
    name = "l2sp"
    Options = L2SPOptions
    baseline = Baseline(
        "l2sp",
        "L2-SP",
        "Xuhong et al. 2018",
        "VANILLA plus an L2 pull towards the previous step's weights (L2-SP, Xuhong et al. 2018)",
    )

    def __init__(self, alpha: float = 0.01, beta: float = 0.0, anchor_head: bool = False) -> None:
        super().__init__()
        for key, v in (("alpha", alpha), ("beta", beta)):
            if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
                raise ConfigError(f"l2sp {key} must be a number >= 0, got {v!r}")
        self.alpha, self.beta, self.anchor_head = float(alpha), float(beta), anchor_head
        self.strength = self.alpha
        self._head: list[str] = []
        self._head_params: list[torch.nn.Parameter] = []

    def _split(self, model: torch.nn.Module) -> tuple[list[str], list[str]]:
        try:
            body, head = split_body_head(model, "l2sp")
        except PolymnesiaError:  # no separable head: everything is body
            return [n for n, p in model.named_parameters() if p.requires_grad], []
        return [n for n, _ in body], [n for n, _ in head]

    def _pulled(self, model: torch.nn.Module) -> list[str]:
        body, head = self._split(model)
        return body + head if self.anchor_head else body

    def param_groups(
        self, model: torch.nn.Module, groups: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        if self.beta and not self.anchor_head:
            self._head = self._split(model)[1]
        return super().param_groups(model, groups)

    def setup(self, state: LoopState) -> None:
        super().setup(state)
        head = set(self._head)
        self._head_params = [
            p for n, p in state.unwrapped.named_parameters() if n in head and p.requires_grad
        ]

    def before_optimizer_step(self, state: LoopState) -> None:
        super().before_optimizer_step(state)
        if self.beta and self._head_params:  # beta/2 ||theta_H||^2: grad += beta * theta_H
            zeros = [torch.zeros((), device=local(p).device) for p in self._head_params]
            add_penalty_grad_(self._head_params, zeros, [1.0] * len(zeros), self.beta)


class EWCOptions(PluginOptions):
    """Options of the ``ewc`` plugin (Kirkpatrick et al. 2017; online: Schwarz et al. 2018)."""

    lam: float = Field(100.0, ge=0, description="lambda: strength of the Fisher-weighted pull")
    gamma: float = Field(
        1.0, ge=0, le=1, description="online EWC: decay of the running Fisher (1: sum of tasks)"
    )
    fisher: str | None = Field(
        None,
        description="stage input whose folder holds the previous task's (running) Fisher; "
        "null: no previous task, plain training",
    )
    fisher_examples: int = Field(256, gt=0, description="examples the Fisher is estimated on")
    fisher_batch_size: int = Field(
        1, gt=0, description="1: per-example empirical Fisher; more: per-batch (cheaper)"
    )

    def for_step(
        self, previous: str | None, *, configured: bool = True, head_carried: bool = False
    ) -> PluginOptions | None:
        """The Fisher is the one the previous model's stage wrote, or none (a first step:
        plain training)."""
        return self.model_copy(update={"fisher": previous})

    def fisher_estimate(self) -> FisherEstimate:
        return FisherEstimate(self.fisher_examples, self.fisher_batch_size)

    def check_previous_tasks(self, count: int) -> None:
        if count == 1 and self.gamma != 1.0:
            raise ValueError(
                "gamma is online EWC's decay over several tasks; this protocol has one previous "
                "task (leave gamma out)"
            )


@PLUGINS.register(
    "ewc",
    "EWC / online EWC: Fisher-weighted pull to the starting weights, lambda/2 sum F "
    "(theta-theta*)^2",
)
class EWC(_Anchored):
    name = "ewc"
    Options = EWCOptions
    input_options = ("fisher",)
    #: the ``fisher`` input is a ``fisher`` stage (its ``fisher.safetensors``) or a training
    #: stage that wrote one beside its ``model/`` (a ``lifelong`` step): no one artifact
    input_reads: ClassVar[dict[str, str | None]] = {"fisher": None}
    baseline = Baseline(
        "ewc",
        "EWC",
        "Kirkpatrick et al. 2017",
        "VANILLA plus online EWC: a Fisher-weighted pull to the previous step's weights "
        "(Kirkpatrick et al. 2017, Schwarz et al. 2018)",
    )

    def __init__(
        self,
        lam: float = 100.0,
        gamma: float = 1.0,
        fisher: str | Path | Mapping[str, torch.Tensor] | None = None,
        fisher_examples: int = 256,
        fisher_batch_size: int = 1,
    ) -> None:
        super().__init__()
        if isinstance(lam, bool) or not isinstance(lam, int | float) or lam < 0:
            raise ConfigError(f"ewc lam must be a number >= 0, got {lam!r}")
        if not 0 <= gamma <= 1:
            raise ConfigError(f"ewc gamma must be in [0, 1], got {gamma!r}")
        self.lam, self.gamma = float(lam), float(gamma)
        self.fisher_examples, self.fisher_batch_size = fisher_examples, fisher_batch_size
        if isinstance(fisher, str | Path):  # a stage's model folder: the Fisher sits beside it
            folder = Path(fisher)
            path = folder / FISHER_FILE
            fisher = load_fisher(path if path.is_file() else folder.parent / FISHER_FILE)
        self.fisher: Tensors | None = dict(fisher) if fisher is not None else None
        self.strength = self.lam if self.fisher is not None else 0.0

    def _pulled(self, model: torch.nn.Module) -> list[str]:
        assert self.fisher is not None
        out = []
        for n, p in model.named_parameters():
            f = self.fisher.get(n)
            if f is None or not p.requires_grad:
                continue
            if f.shape != p.shape:
                raise ConfigError(
                    f"ewc: the Fisher of {n} has shape {tuple(f.shape)}, the parameter "
                    f"{tuple(p.shape)}: it was estimated on another model"
                )
            out.append(n)
        if not out and self.fisher:
            raise ConfigError(
                f"ewc: the Fisher names {len(self.fisher)} tensors (e.g. "
                f"{next(iter(self.fisher))}), none a trainable parameter of this model: it was "
                "estimated on another model"
            )
        return out

    def param_groups(
        self, model: torch.nn.Module, groups: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        groups = super().param_groups(model, groups)
        self._fisher_full = {n: self.fisher[n] for n in self._full} if self.fisher else {}
        return groups

    def _weight(self, name: str, p: torch.nn.Parameter) -> torch.Tensor | float:
        return _local_anchor(self._fisher_full[name], p)

    def setup(self, state: LoopState) -> None:
        super().setup(state)
        self._fisher_full = {}


# --- distillation (LwF) -----------------------------------------------------------------


class TeacherKL(LogitTerm):
    """``weight * distillation_loss`` of one micro-batch, made a chunk of positions at a time
    from the teacher's final hidden states and its LM head (the teacher's logits of a chunk
    are made when the chunk is)."""

    #: the teacher's logits, the shifted student logits (whose exponentials become the
    #: gradient), the teacher's exponentials and, at the peak of distillation_rows, the
    #: shifted teacher logits
    buffers = 4

    def __init__(
        self,
        hidden: torch.Tensor,
        head: torch.nn.Linear,
        weight: float,
        temperature: float,
        mask: torch.Tensor | None,
    ) -> None:
        dtype = head_dtype(head.weight, hidden.device)
        self.hidden = hidden.reshape(-1, hidden.shape[-1])
        self.w = head.weight.to(dtype)
        self.b = head.bias.to(dtype) if head.bias is not None else None
        self.temperature = temperature
        # each position's weight in the masked mean (distillation_loss): m_i / sum(m)
        n = self.hidden.shape[0]
        if mask is None:
            self.row_weight: torch.Tensor | float = weight / n
        else:
            m = mask.reshape(-1).float()
            self.row_weight = m * (weight / m.sum().clamp_min(1))

    def chunk(
        self, start: int, logits: torch.Tensor, grad_scale: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        stop = start + logits.shape[0]
        with torch.no_grad():
            teacher = F.linear(self.hidden[start:stop].to(self.w.dtype), self.w, self.b).float()
        w = self.row_weight
        if isinstance(w, torch.Tensor):
            w = w[start:stop]
        grad_w = None if grad_scale is None else w * grad_scale
        kl, g = distillation_rows(logits, teacher, self.temperature, grad_w)
        value = torch.linalg.vecdot(kl, w) if isinstance(w, torch.Tensor) else kl.sum() * w
        return value, g


class DistillOptions(PluginOptions):
    """Options of the ``distill`` plugin (Li & Hoiem 2017)."""

    weight: float = Field(1.0, ge=0, description="lambda_o: weight of the distillation term")
    temperature: float = Field(2.0, gt=0, description="T: softmax temperature (LwF: 2)")


@PLUGINS.register(
    "distill",
    "LwF: KL at temperature T to the starting model's outputs, added to the loss of each batch",
)
class Distill(TrainingPlugin):
    """A loss term of the one training loop (``adds_loss``;
    :func:`~polymnesia.training.loop.micro_batch_loss`).

    The teacher is a frozen copy of the model as training starts (taken in ``param_groups``,
    before a resume), run in eval mode without gradients on each micro-batch: one extra
    forward pass. The term is ``weight * distillation_loss(student_logits, teacher_logits, T,
    attention_mask)``, added to the model's own loss: where the loss is chunked, as a
    :class:`~polymnesia.training.loss.LogitTerm` from the teacher's final hidden states
    (``logit_term``, equal up to float rounding), else from the model's full outputs
    (``loss_term``). With ``weight`` 0 it adds nothing (plain training, bit for bit).
    """

    name = "distill"
    Options = DistillOptions
    needs_previous = True  # its teacher
    baseline = Baseline(
        "lwf",
        "LwF",
        "Li & Hoiem 2017",
        "VANILLA plus distillation (KL at temperature T) to the previous step's outputs "
        "(LwF, Li & Hoiem 2017)",
    )
    sharded_refusal = (
        "its teacher is a whole, unsharded copy of the model in every process, which would "
        "undo the sharding's memory saving"
    )

    def __init__(self, weight: float = 1.0, temperature: float = 2.0) -> None:
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
            raise ConfigError(f"distill weight must be a number >= 0, got {weight!r}")
        if (
            isinstance(temperature, bool)
            or not isinstance(temperature, int | float)
            or temperature <= 0
        ):
            raise ConfigError(f"distill temperature must be a number > 0, got {temperature!r}")
        self.weight, self.temperature = float(weight), float(temperature)
        self.adds_loss = self.weight > 0
        self.teacher: torch.nn.Module | None = None
        self.teacher_head: torch.nn.Linear | None = None

    def param_groups(
        self, model: torch.nn.Module, groups: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        if self.weight:
            self.teacher = copy.deepcopy(model).eval().requires_grad_(False)
            self.teacher_head = chunked_head(self.teacher)
            self.chunked_term = self.teacher_head is not None
        return groups

    def logit_term(self, state: LoopState, batch: dict[str, torch.Tensor]) -> LogitTerm:
        if self.teacher is None or self.teacher_head is None:
            raise PolymnesiaError("distill: no teacher; the loop builds it in param_groups")
        with torch.no_grad():
            hidden = final_hidden(self.teacher, self.teacher_head, batch)
        return TeacherKL(
            hidden, self.teacher_head, self.weight, self.temperature, batch.get("attention_mask")
        )

    def loss_term(
        self, state: LoopState, batch: dict[str, torch.Tensor], outputs: Any
    ) -> torch.Tensor:
        if self.teacher is None:
            raise PolymnesiaError("distill: no teacher; the loop builds it in param_groups")
        with torch.no_grad():
            target = self.teacher(**{k: v for k, v in batch.items() if k != "labels"}).logits
        kd = distillation_loss(
            outputs.logits, target, self.temperature, batch.get("attention_mask")
        )
        return self.weight * kd
