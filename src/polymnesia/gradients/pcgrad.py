"""PCGrad: project conflicting gradients (Yu et al. 2020, Algorithm 1).

For each task i, over the other tasks j in a random order, if
``g_i' . g_j < 0`` then ``g_i' -= (g_i' . g_j) / (||g_j||^2 + 1e-8) g_j``,
always projecting onto the ORIGINAL g_j (as in the paper and LibMTL's
``weighting/PCGrad.py``).

Implementation: every g_i' is a linear combination of the original rows, so
we track a T x T coefficient matrix ``C`` (row i: g_i' = C[i] @ grads) using
only the Gram matrix ``grads grads^T``; no [T, D] copy is ever made (as
TorchJD does). The direction is ``(sum_i C[i]) @ grads``.

Departures / options:

* ``reduction="sum"`` (default) returns the SUM of the projected gradients,
  as LibMTL does (the paper's Algorithm 1 also sums). That is about T times
  the scale of ``uniform``'s mean: use ``reduction="mean"`` to keep the
  learning rate comparable with Uniform-MLF.
* LibMTL's loop visits j = i too (a no-op unless g_i' . g_i < 0); we visit
  only j != i, as the paper.
* The random order comes from a seeded ``torch.Generator`` kept in the state,
  so a resumed run draws the same orders (LibMTL uses Python's global RNG).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from polymnesia.gradients.base import (
    COMBINERS,
    Combiner,
    check_reduction,
    gram_matrix,
    new_generator,
    random_orders,
    weighted_sum,
)

EPS = 1e-8  # LibMTL's guard in ||g_j||^2 + eps


def pcgrad_coefficients(gram: np.ndarray, orders: Sequence[Sequence[int]]) -> np.ndarray:
    """Coefficients C [T, T] with g_i' = C[i] @ grads, from the Gram matrix alone."""
    t = gram.shape[0]
    coef = np.eye(t)
    for i in range(t):
        for j in orders[i]:
            dot = float(coef[i] @ gram[:, j])  # g_i' . g_j
            if dot < 0:
                coef[i, j] -= dot / (gram[j, j] + EPS)
    return coef


def pcgrad(
    grads: torch.Tensor, orders: Sequence[Sequence[int]], reduction: str = "sum"
) -> tuple[torch.Tensor, np.ndarray]:
    """PCGrad direction [D] and its weights [T] (direction = weights @ grads)."""
    coef = pcgrad_coefficients(gram_matrix(grads), orders)
    weights = coef.sum(axis=0)
    if reduction == "mean":
        weights = weights / grads.shape[0]
    return weighted_sum(weights, grads), weights


@COMBINERS.register("pcgrad", "project conflicting gradients (Yu et al. 2020, LibMTL sum)")
class PCGrad(Combiner):
    """PCGrad with a seeded random order per task; ``reduction`` "sum" or "mean"."""

    name = "pcgrad"

    def __init__(self, reduction: str = "sum", seed: int = 0) -> None:
        super().__init__()
        self.reduction = check_reduction(reduction)
        self.seed = seed
        self.generator = new_generator(seed)

    def _combine(self, grads: torch.Tensor) -> torch.Tensor:
        orders = random_orders(grads.shape[0], self.generator)
        direction, weights = pcgrad(grads, orders, self.reduction)
        self.weights = torch.from_numpy(weights)
        return direction

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self.generator.get_state()}

    def _load(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["rng"].clone())

    def reset(self) -> None:
        super().reset()
        self.generator = new_generator(self.seed)
