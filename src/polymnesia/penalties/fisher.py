"""The diagonal empirical Fisher of EWC (Kirkpatrick et al. 2017; :func:`diagonal_fisher`),
online EWC's running Fisher (Schwarz et al. 2018; :func:`online_fisher`), and its file next
to a stage's model folder (:data:`FISHER_FILE`, :func:`save_fisher`, :func:`load_fisher`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import torch

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.io import atomic_write_bytes
from polymnesia.penalties.quadratic import Tensors

#: where a stage keeps the (running) Fisher of the task it trained, next to ``model/``
FISHER_FILE = "fisher.safetensors"


def diagonal_fisher(
    model: torch.nn.Module,
    batches: Iterable[Mapping[str, torch.Tensor]],
    loss_fn: Callable[[torch.nn.Module, Mapping[str, torch.Tensor]], torch.Tensor] | None = None,
) -> Tensors:
    """The diagonal empirical Fisher ``F = 1/N sum_b (d loss_b / d theta)^2`` over ``batches``,
    by parameter name (trainable parameters only). Batches of one example give the per-example
    empirical Fisher of EWC; larger batches the cheaper per-batch estimate (the square of the
    batch's mean gradient). ``loss_fn(model, batch)`` defaults to the model's own ``loss``.
    Computed in eval mode (no dropout); the model's ``.grad`` are not touched."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise PolymnesiaError("the Fisher estimate needs a model with trainable parameters")
    fn = loss_fn or (lambda m, b: m(**b).loss)
    sums = [torch.zeros_like(p, dtype=torch.float32) for _, p in named]
    was_training, n = model.training, 0
    model.eval()
    try:
        with torch.enable_grad():
            for batch in batches:
                loss = fn(model, batch)
                grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
                for s, g in zip(sums, grads, strict=True):
                    if g is not None:
                        s.add_(g.detach().float() ** 2)
                n += 1
    finally:
        model.train(was_training)
    if n == 0:
        raise PolymnesiaError("the Fisher estimate got no data: give it at least one batch")
    return {name: s / n for (name, _), s in zip(named, sums, strict=True)}


def online_fisher(
    previous: Mapping[str, torch.Tensor] | None, new: Tensors, gamma: float
) -> Tensors:
    """Online EWC's running Fisher ``F*_t = gamma F*_{t-1} + F_t`` (Schwarz et al. 2018, eq. 8);
    a parameter missing from ``previous`` starts from ``F_t``."""
    if previous is None:
        return {k: v.clone() for k, v in new.items()}
    out = {}
    for k, v in new.items():
        prev = previous.get(k)
        if prev is not None and prev.shape != v.shape:
            raise ConfigError(
                f"online EWC: the previous Fisher of {k} has shape {tuple(prev.shape)}, "
                f"the parameter {tuple(v.shape)}"
            )
        out[k] = v + gamma * prev.to(v) if prev is not None else v.clone()
    return out


def save_fisher(path: Path, fisher: Mapping[str, torch.Tensor]) -> None:
    from safetensors.torch import save

    atomic_write_bytes(path, save({k: v.detach().cpu().contiguous() for k, v in fisher.items()}))


def load_fisher(path: Path) -> Tensors:
    from safetensors.torch import load_file

    if not path.is_file():
        raise ConfigError(f"ewc: no Fisher estimate at {path}; the previous stage computes it")
    return dict(load_file(str(path)))
