"""Flat-gradient helpers for a training loop that combines per-language gradients.

The parameters' order defines the flat layout: pass the same list (or
``named_parameters()`` in the same order) to every helper.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import torch

from polymnesia.errors import ConfigError, PolymnesiaError

GRANULARITIES = ("whole", "module", "tensor")


def flatten_grads(params: Iterable[torch.Tensor]) -> torch.Tensor:
    """Concatenate the ``.grad`` of each parameter into one [D] vector (zeros where grad is
    None).
    """
    pieces = [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]
    if not pieces:
        raise PolymnesiaError("flatten_grads got no parameters")
    return torch.cat(pieces)


def assign_flat_grad(params: Sequence[torch.Tensor], vec: torch.Tensor) -> None:
    """Write the flat [D] ``vec`` back into each parameter's ``.grad`` (a copy, not a view)."""
    total = sum(p.numel() for p in params)
    if vec.dim() != 1 or vec.numel() != total:
        raise PolymnesiaError(
            f"flat gradient has shape {tuple(vec.shape)}; the parameters need a 1-D vector of "
            f"{total}"
        )
    offset = 0
    for p in params:
        piece = vec[offset : offset + p.numel()].view_as(p)
        if p.grad is None:
            p.grad = piece.to(p.dtype).clone()
        else:
            p.grad.copy_(piece)
        offset += p.numel()


def block_sizes(
    named_params: Iterable[tuple[str, torch.Tensor]], granularity: str = "whole"
) -> list[int]:
    """Block sizes of the flat layout: one block ("whole"), one per tensor, or one per
    module (consecutive parameters sharing the name prefix before the last dot)."""
    if granularity not in GRANULARITIES:
        raise ConfigError(f"granularity must be one of {GRANULARITIES}, got '{granularity}'")
    named = list(named_params)
    if not named:
        raise PolymnesiaError("block_sizes got no parameters")
    if granularity == "whole":
        return [sum(p.numel() for _, p in named)]
    if granularity == "tensor":
        return [p.numel() for _, p in named]
    sizes: list[int] = []
    last = None
    for name, p in named:
        module = name.rsplit(".", 1)[0] if "." in name else ""
        if module == last:
            sizes[-1] += p.numel()
        else:
            sizes.append(p.numel())
            last = module
    return sizes


def per_language_gradients(
    losses_fn: Callable[[str], torch.Tensor],
    params: Sequence[torch.Tensor],
    languages: Sequence[str],
    reduce: Callable[[torch.Tensor], torch.Tensor | None] | None = None,
) -> torch.Tensor:
    """Per-language gradient matrix [T, D].

    For each language t: ``losses_fn(language)`` returns a scalar loss, which is
    back-propagated; the flat gradient is copied into row t of a preallocated
    buffer, then grads are cleared. ``reduce(row)`` (e.g. an all-reduce mean
    across processes) may modify the row in place or return a new one. Grads
    are left cleared (None) on return.
    """
    params = list(params)
    if not languages:
        raise PolymnesiaError("per_language_gradients needs at least one language")
    total = sum(p.numel() for p in params)
    first = params[0]
    out = torch.empty(len(languages), total, dtype=first.dtype, device=first.device)
    _clear(params)
    for t, lang in enumerate(languages):
        loss = losses_fn(lang)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.requires_grad:
            raise PolymnesiaError(f"loss for language '{lang}' must be a scalar tensor with grad")
        loss.backward()
        _copy_into(params, out[t])
        if reduce is not None:
            reduced = reduce(out[t])
            if reduced is not None and reduced is not out[t]:
                out[t].copy_(reduced)
        _clear(params)
    return out


def _copy_into(params: Sequence[torch.Tensor], row: torch.Tensor) -> None:
    offset = 0
    for p in params:
        n = p.numel()
        if p.grad is None:
            row[offset : offset + n].zero_()
        else:
            row[offset : offset + n].copy_(p.grad.reshape(-1))
        offset += n


def _clear(params: Sequence[torch.Tensor]) -> None:
    for p in params:
        p.grad = None
