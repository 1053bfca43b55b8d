"""GradVac: gradient vaccine (Wang et al. 2021, Eq. 2 and Algorithm 1).

For each task i and each other task j (random order), per block k of the
parameters: rho = cos(g_i', g_j); if rho < rho_T[i, j, k] then

    g_i' += g_j * ||g_i'|| (rho_T sqrt(1 - rho^2) - rho sqrt(1 - rho_T^2))
                / (||g_j|| sqrt(1 - rho_T^2))

(the GradVac paper's closed form, which sets cos(g_i', g_j) to rho_T), and
for every pair ``rho_T = (1 - beta) rho_T + beta rho`` with the rho measured
before the correction. rho_T starts at 0 (then the rule equals PCGrad's
projection). g_i' is tracked as coefficients on the original rows per block,
using only the per-block Gram matrices (no [T, D] copies).

Options and departures:

* ``beta`` defaults to 0.01 as in the GradVac paper (LibMTL defaults 0.5).
* ``granularity``: "whole" (one block, the whole vector) or "module" /
  "tensor" with ``sizes`` (block sizes summing to D, from
  :func:`polymnesia.gradients.flat.block_sizes`).
* ``reduction="sum"`` (default) sums the corrected gradients as LibMTL;
  "mean" divides by T to match Uniform-MLF's scale.
* Blocks where g_i' or g_j is zero get neither a correction nor an EMA update
  (rho is undefined there; LibMTL would pull rho_T towards 0).
* A 1e-8 guard is added to the cosine's and the correction's denominators,
  as in LibMTL's GitHub source (``LibMTL/weighting/GradVac.py`` at commit
  13f5fc7d); the PyPI release LibMTL 1.1.5 has no such guards, and neither
  does the GradVac paper. They change results only for near-zero blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.gradients.base import (
    COMBINERS,
    Combiner,
    check_reduction,
    new_generator,
    process_sum,
    random_orders,
)

EPS = 1e-8
GRANULARITIES = ("whole", "module", "tensor")


def block_grams(grads: torch.Tensor, sizes: Sequence[int]) -> np.ndarray:
    """Per-block Gram matrices [K, T, T] (float64) of the column blocks ``sizes``."""
    g = grads.float() if grads.dtype in (torch.float16, torch.bfloat16) else grads
    blocks = torch.split(g, list(sizes), dim=1)
    return process_sum(torch.stack([b @ b.T for b in blocks]).double()).cpu().numpy()


def gradvac_step(
    grams: np.ndarray, rho_t: np.ndarray, orders: Sequence[Sequence[int]], beta: float
) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients [K, T, T] (g_i'^(k) = coef[k, i] @ grads^(k)) and the new rho_T [K, T, T]."""
    k_blocks, t, _ = grams.shape
    coef = np.repeat(np.eye(t)[None], k_blocks, axis=0)
    rho_t = rho_t.copy()
    norm_j_all = np.sqrt(np.clip(np.einsum("ktt->kt", grams), 0.0, None))  # [K, T]
    for i in range(t):
        for j in orders[i]:
            ci = coef[:, i, :]  # [K, T]
            dot = np.einsum("kt,kt->k", ci, grams[:, :, j])
            norm_i = np.sqrt(max_zero(np.einsum("ks,kst,kt->k", ci, grams, ci)))
            norm_j = norm_j_all[:, j]
            rho = np.clip(dot / (norm_i * norm_j + EPS), -1.0, 1.0)
            target = rho_t[:, i, j]
            live = (norm_i > 0) & (norm_j > 0)
            low = live & (rho < target)
            root_t = np.sqrt(1.0 - target**2)
            step = norm_i * (target * np.sqrt(1.0 - rho**2) - rho * root_t)
            step = step / (norm_j * root_t + EPS)
            coef[:, i, j] += np.where(low, step, 0.0)
            rho_t[:, i, j] = np.where(live, (1.0 - beta) * target + beta * rho, target)
    return coef, rho_t


def max_zero(x: np.ndarray) -> np.ndarray:
    return np.clip(x, 0.0, None)


def gradvac(
    grads: torch.Tensor,
    rho_t: np.ndarray,
    orders: Sequence[Sequence[int]],
    beta: float,
    sizes: Sequence[int],
    reduction: str = "sum",
) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """GradVac direction [D], per-block weights [K, T] and the updated rho_T [K, T, T]."""
    coef, new_rho = gradvac_step(block_grams(grads, sizes), rho_t, orders, beta)
    weights = coef.sum(axis=1)  # [K, T]: block k of the direction = weights[k] @ grads^(k)
    if reduction == "mean":
        weights = weights / grads.shape[0]
    w = torch.from_numpy(weights).to(grads.device, grads.dtype)
    blocks = torch.split(grads, list(sizes), dim=1)
    direction = torch.cat([w[k] @ b for k, b in enumerate(blocks)])
    return direction, weights, new_rho


@COMBINERS.register("gradvac", "gradient vaccine with EMA target similarity (Wang et al. 2021)")
class GradVac(Combiner):
    """GradVac with per-pair, per-block EMA targets rho_T and a seeded random order."""

    name = "gradvac"

    def __init__(
        self,
        beta: float = 0.01,
        granularity: str = "whole",
        sizes: Sequence[int] | None = None,
        reduction: str = "sum",
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not 0 < beta <= 1:
            raise ConfigError(f"gradvac beta must be in (0, 1], got {beta}")
        if granularity not in GRANULARITIES:
            raise ConfigError(
                f"gradvac granularity must be one of {GRANULARITIES}, got '{granularity}'"
            )
        if (granularity == "whole") != (sizes is None):
            raise ConfigError(
                "gradvac needs sizes=[...] exactly when granularity is 'module' or 'tensor'"
            )
        if sizes is not None and (not sizes or any(int(s) <= 0 for s in sizes)):
            raise ConfigError("gradvac sizes must be a non-empty list of positive block sizes")
        self.beta, self.granularity, self.seed = beta, granularity, seed
        self.sizes = None if sizes is None else [int(s) for s in sizes]
        self.reduction = check_reduction(reduction)
        self.generator = new_generator(seed)
        self.rho_t: torch.Tensor | None = None  # [K, T, T], created at the first call
        self.block_weights: torch.Tensor | None = None  # [K, T]

    def _combine(self, grads: torch.Tensor) -> torch.Tensor:
        t, d = grads.shape
        sizes = self.sizes or [d]
        if sum(sizes) != d:
            raise PolymnesiaError(f"gradvac sizes sum to {sum(sizes)} but grads have D = {d}")
        if self.rho_t is None:
            self.rho_t = torch.zeros(len(sizes), t, t, dtype=torch.float64)
        if tuple(self.rho_t.shape) != (len(sizes), t, t):
            raise PolymnesiaError(
                f"gradvac state is for {self.rho_t.shape[0]} blocks and T = {self.rho_t.shape[1]}, "
                f"got {len(sizes)} blocks and T = {t}"
            )
        orders = random_orders(t, self.generator)
        direction, weights, rho = gradvac(
            grads, self.rho_t.numpy(), orders, self.beta, sizes, self.reduction
        )
        self.rho_t = torch.from_numpy(rho)
        self.block_weights = torch.from_numpy(weights)
        self.weights = self.block_weights[0] if len(sizes) == 1 else None
        return direction

    def state_dict(self) -> dict[str, Any]:
        rho = None if self.rho_t is None else self.rho_t.clone()
        return {"rho_t": rho, "rng": self.generator.get_state()}

    def _load(self, state: dict[str, Any]) -> None:
        rho = state["rho_t"]
        self.rho_t = None if rho is None else rho.detach().to(torch.float64).clone()
        self.generator.set_state(state["rng"].clone())

    def reset(self) -> None:
        super().reset()
        self.rho_t, self.block_weights = None, None
        self.generator = new_generator(self.seed)
