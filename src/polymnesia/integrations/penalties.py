"""The quadratic penalties against forgetting as Trainer callbacks: :class:`L2SPCallback`
(Xuhong et al. 2018) and :class:`EWCCallback` (Kirkpatrick et al. 2017), the ``l2sp`` and
``ewc`` plugins of :mod:`polymnesia.methods.regularization`.

As in polymnesia's loop the penalty is not put in the loss: its exact gradient,
``grad += strength * w * (theta - theta_0)``
(:func:`~polymnesia.penalties.quadratic.add_penalty_grad_`), is added once per optimizer
step to the final gradient, before the Trainer clips it (in a post-accumulate-grad hook on
the step's last micro-batch: :mod:`polymnesia.integrations.base`). ``theta_0`` is the weights
as the Trainer is made, before it loads a checkpoint to resume from. Under FSDP2 each
process adds it to the shard it holds; under DDP it is added in ``on_pre_optimizer_step``,
after the clip (one warning line when clipping).
:meth:`penalty` gives the current value, for logging.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.integrations.base import DDP, PolymnesiaCallback, sync_step, warn_after_clipping
from polymnesia.models.anatomy import split_body_head
from polymnesia.penalties.fisher import FISHER_FILE, load_fisher
from polymnesia.penalties.quadratic import Tensors, add_penalty_grad_, quadratic_penalty
from polymnesia.training.fsdp import local, local_rows

#: one pulled parameter: (parameter, anchor, weight, strength), anchor and weight shaped like
#: this process's shard
Term = tuple[torch.nn.Parameter, torch.Tensor, "torch.Tensor | float", float]


def _strength(method: str, key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
        raise ConfigError(f"{method} {key} must be a number >= 0, got {v!r}")
    return float(v)


def local_part(full: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """The rows of ``full`` (a whole tensor shaped like ``p``) this process holds of ``p``
    (sharded by rows under FSDP2, or whole), in float32 on ``p``'s device."""
    rows, start = local_rows(p.detach())
    part = full if rows.shape == full.shape else full[start : start + rows.shape[0]]
    return part.to(device=rows.device, dtype=torch.float32)


class _Quadratic(PolymnesiaCallback):
    """Keeps the pulled parameters' anchors and adds the penalty's gradient."""

    def __init__(self) -> None:
        super().__init__()
        self._terms: list[Term] = []
        self._start: Tensors = {}

    def terms(self, model: torch.nn.Module) -> list[Term]:
        raise NotImplementedError

    def prepare(self, model: torch.nn.Module) -> None:
        """Keep ``theta_0``: the weights before the Trainer loads a checkpoint to resume from
        (in ``on_init_end``), so a resumed run pulls towards the same point."""
        self._start = {
            n: p.detach().float().clone() for n, p in model.named_parameters() if p.requires_grad
        }

    def anchor(self, name: str, p: torch.nn.Parameter) -> torch.Tensor:
        """This process's part of ``theta_0`` of parameter ``name``."""
        return local_part(self._start[name], p)

    def begin(self, args: Any, state: Any, model: torch.nn.Module, **kwargs: Any) -> None:
        self._terms = [t for t in self.terms(model) if t[3]]
        self._start = {}
        by_param: dict[int, list[Term]] = {}
        for t in self._terms:
            by_param.setdefault(id(t[0]), []).append(t)

        def edit(p: torch.nn.Parameter) -> None:
            if sync_step():
                for _, anchor, weight, strength in by_param[id(p)]:
                    add_penalty_grad_([p], [anchor], [weight], strength)

        self.hook_grad(list({id(t[0]): t[0] for t in self._terms}.values()), edit)
        if self.engine == DDP and self._terms:
            warn_after_clipping(self.method, args, "the penalty's gradient is added")

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.engine != DDP:
            return  # the hooks added it
        for p, anchor, weight, strength in self._terms:
            add_penalty_grad_([p], [anchor], [weight], strength)

    def penalty(self) -> torch.Tensor:
        """The penalty's current value on this process's shards."""
        with torch.no_grad():
            total = torch.zeros(())
            for p, a, w, s in self._terms:
                theta = local(p.detach()).float()
                total = total + quadratic_penalty([theta], [a], [w], s).cpu()
            return total


class L2SPCallback(_Quadratic):
    """L2-SP: ``alpha/2 ||theta_S - theta_S^0||^2`` on the shared body plus
    ``beta/2 ||theta_H||^2`` on the head (with ``anchor_head`` the head is pulled to its
    start with ``alpha`` like the body); a model without a separable head is all body. The
    ``l2sp`` plugin's options and maths."""

    method = "L2SPCallback"

    def __init__(self, alpha: float = 0.01, beta: float = 0.0, anchor_head: bool = False) -> None:
        super().__init__()
        self.alpha = _strength(self.method, "alpha", alpha)
        self.beta = _strength(self.method, "beta", beta)
        self.anchor_head = bool(anchor_head)

    def terms(self, model: torch.nn.Module) -> list[Term]:
        try:
            body, head = split_body_head(model, self.method)
        except PolymnesiaError:  # no separable head: everything is body
            body, head = list(model.named_parameters()), []
        body = [(n, p) for n, p in body if p.requires_grad]
        head = [(n, p) for n, p in head if p.requires_grad]
        pulled = body + head if self.anchor_head else body
        out: list[Term] = [(p, self.anchor(n, p), 1.0, self.alpha) for n, p in pulled]
        if self.beta and not self.anchor_head:
            out += [(p, torch.zeros((), device=local(p).device), 1.0, self.beta) for _, p in head]
        return out


class EWCCallback(_Quadratic):
    """EWC: ``lam/2 sum_i F_i (theta_i - theta*_i)^2`` with ``theta*`` the weights as training
    begins and ``F`` the previous task's diagonal Fisher, by parameter name: a mapping (e.g.
    from :func:`polymnesia.penalties.fisher.diagonal_fisher`, or online EWC's running Fisher,
    :func:`~polymnesia.penalties.fisher.online_fisher`) or the path of a
    ``fisher.safetensors`` (or of the folder holding it, as a polymnesia stage writes it)."""

    method = "EWCCallback"

    def __init__(self, fisher: Mapping[str, torch.Tensor] | str | Path, lam: float = 100.0) -> None:
        super().__init__()
        self.lam = _strength(self.method, "lam", lam)
        if isinstance(fisher, str | Path):
            path = Path(fisher)
            fisher = load_fisher(path / FISHER_FILE if path.is_dir() else path)
        if not isinstance(fisher, Mapping) or not fisher:
            raise ConfigError(
                f"{self.method}: fisher must be a non-empty mapping of parameter names to "
                "tensors or the path of a fisher.safetensors"
            )
        self.fisher: Tensors = dict(fisher)

    def terms(self, model: torch.nn.Module) -> list[Term]:
        out: list[Term] = []
        for n, p in model.named_parameters():
            f = self.fisher.get(n)
            if f is None or not p.requires_grad:
                continue
            if tuple(f.shape) != tuple(p.shape):
                raise ConfigError(
                    f"{self.method}: the Fisher of {n} has shape {tuple(f.shape)}, the "
                    f"parameter {tuple(p.shape)}: it was estimated on another model"
                )
            out.append((p, self.anchor(n, p), local_part(f, p), self.lam))
        if not out:
            raise ConfigError(
                f"{self.method}: the Fisher names {len(self.fisher)} tensors (e.g. "
                f"{next(iter(self.fisher))}), none a trainable parameter of this model: it was "
                "estimated on another model"
            )
        return out
