"""Quadratic penalties towards an anchor, ``strength/2 sum_i w_i (theta_i - a_i)^2``
(L2-SP: ``w = 1``; EWC: ``w`` the diagonal Fisher), and their exact gradient added in place
on each process's shard (:func:`add_penalty_grad_`), which the plugins of
:mod:`polymnesia.methods.regularization` use instead of putting the penalty in the loss."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from polymnesia.training.fsdp import local

Tensors = dict[str, torch.Tensor]


def quadratic_penalty(
    params: Iterable[torch.Tensor],
    anchors: Iterable[torch.Tensor],
    weights: Iterable[torch.Tensor | float],
    strength: float,
) -> torch.Tensor:
    """``strength/2 * sum_i w_i (theta_i - a_i)^2`` (L2-SP: ``w = 1``; EWC: ``w = F``)."""
    total = torch.zeros(())
    for p, a, w in zip(params, anchors, weights, strict=True):
        total = total + (w * (p - a) ** 2).sum()
    return strength / 2 * total


@torch.no_grad()
def add_penalty_grad_(
    params: Iterable[torch.nn.Parameter],
    anchors: Iterable[torch.Tensor],
    weights: Iterable[torch.Tensor | float],
    strength: float,
) -> None:
    """``grad += strength * w * (theta - a)``: the gradient of :func:`quadratic_penalty`,
    added in place on this process's shard of each parameter (the whole tensor when it is not
    sharded). ``anchors`` and ``weights`` are shaped like the local shards (or broadcast to
    them). Where every tensor has the anchor's shape, dtype and device this runs as a few
    fused ``torch._foreach_*`` kernels instead of one Python step per parameter."""
    ps, anchors, weights = list(params), list(anchors), list(weights)
    thetas, grads = [], []
    for p in ps:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        thetas.append(local(p.detach()))
        grads.append(local(p.grad))
    tensor_w = [w for w in weights if isinstance(w, torch.Tensor)]
    fused = all(
        t.shape == a.shape and t.dtype == a.dtype == g.dtype and t.device == a.device
        for t, a, g in zip(thetas, anchors, grads, strict=True)
    ) and (not tensor_w or len(tensor_w) == len(weights))
    if fused and thetas:
        diffs = torch._foreach_sub(thetas, anchors)
        if tensor_w:
            torch._foreach_mul_(diffs, tensor_w)
        elif any(w != 1.0 for w in weights):
            torch._foreach_mul_(diffs, [float(w) for w in weights])
        torch._foreach_add_(grads, diffs, alpha=strength)
        return
    for theta, g, a, w in zip(thetas, grads, anchors, weights, strict=True):
        diff = (theta - a).mul_(strength)
        if not isinstance(w, float) or w != 1.0:
            diff.mul_(w)
        g.add_(diff.to(g.dtype))
