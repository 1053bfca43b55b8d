"""Model merging on state dicts: weight averaging, task arithmetic and TIES-merging.

The cheap answer to "does sequential fine-tuning have to forget at all?": merge the
previous and the new model instead of (or after) training one on top of the other.
Every function is pure: it takes state dicts (name -> tensor) of one architecture and
returns a new one, one tensor at a time (the per-tensor functions are public, so a caller
can stream tensors from safetensors files in bounded memory).

* :func:`average` (weight averaging, "model soups"): ``sum_i w_i theta_i / sum_i w_i``.
* :func:`task_arithmetic` (Ilharco et al. 2023): ``theta_0 + lambda sum_i tau_i`` with task
  vectors ``tau_i = theta_i - theta_0``.
* :func:`ties` (Yadav et al. 2023, TIES-merging): each task vector is *trimmed* to its
  ``density`` share of entries largest in magnitude (per tensor, as mergekit does; the paper
  trims over the whole vector), a sign is *elected* per entry
  (``gamma = sign(sum_i tau_hat_i)``, the sign of the larger total mass), and the *disjoint
  mean* averages only the trimmed entries that agree with it:
  ``tau_m = sum_{i: sign(tau_hat_i) = gamma} tau_hat_i / |{i: ...}|``; then
  ``theta_0 + lambda tau_m``.

Tensors that are not floating point (integer buffers, position ids) are taken from the base
(the first model for :func:`average`), after checking they agree. Models with other tensor
names or shapes are refused in one line. Arithmetic is float32 (float64 stays float64); the
result has each tensor's original dtype.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from polymnesia.errors import ConfigError

State = Mapping[str, torch.Tensor]


def check_compatible(states: Sequence[State], what: str = "merge") -> list[str]:
    """The tensor names shared by every state dict (in the first one's order), or a one-line
    :class:`ConfigError` naming the first difference of names or shapes."""
    if len(states) < 2:
        raise ConfigError(f"{what}: give at least two models, got {len(states)}")
    first = states[0]
    for i, s in enumerate(states[1:], start=1):
        if set(s) != set(first):
            extra = sorted(set(s) ^ set(first))[:3]
            raise ConfigError(
                f"{what}: model {i} has other tensors than model 0 ({', '.join(extra)}): "
                "models of one architecture only"
            )
        for k, v in s.items():
            if v.shape != first[k].shape:
                raise ConfigError(
                    f"{what}: {k} has shape {tuple(v.shape)} in model {i} and "
                    f"{tuple(first[k].shape)} in model 0 (another architecture or vocabulary)"
                )
    return list(first)


def _work(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.float64 if t.dtype == torch.float64 else torch.float32)


def _weights(weights: Sequence[float] | None, n: int) -> list[float]:
    if weights is None:
        return [1.0 / n] * n
    if len(weights) != n:
        raise ConfigError(f"merge: {len(weights)} weights for {n} models")
    if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
        raise ConfigError(f"merge: weights must be >= 0 with a positive sum, got {list(weights)}")
    total = float(sum(weights))
    return [float(w) / total for w in weights]


def _same(tensors: Sequence[torch.Tensor], name: str) -> torch.Tensor:
    """A non-float tensor, which every model must hold equal."""
    for t in tensors[1:]:
        if not torch.equal(t, tensors[0]):
            raise ConfigError(f"merge: the non-float tensor {name} differs between the models")
    return tensors[0].clone()


# --- per tensor -------------------------------------------------------------------------


def average_tensor(tensors: Sequence[torch.Tensor], weights: Sequence[float]) -> torch.Tensor:
    """``sum_i w_i t_i`` (``weights`` already normalised)."""
    out = torch.zeros_like(_work(tensors[0]))
    for t, w in zip(tensors, weights, strict=True):
        out.add_(_work(t), alpha=w)
    return out.to(tensors[0].dtype)


def task_arithmetic_tensor(
    base: torch.Tensor, tuned: Sequence[torch.Tensor], lam: float
) -> torch.Tensor:
    """``base + lam * sum_i (t_i - base)``."""
    b = _work(base)
    total = torch.zeros_like(b)
    for t in tuned:
        total.add_(_work(t) - b)
    return (b + lam * total).to(base.dtype)


def trim(delta: torch.Tensor, density: float) -> torch.Tensor:
    """``delta`` with all but its ``ceil(density * n)`` entries largest in magnitude set to 0
    (equal magnitudes: the earlier entry first, so exactly that many are kept)."""
    if not 0 < density <= 1:
        raise ConfigError(f"ties: density must be in (0, 1], got {density}")
    flat = delta.reshape(-1)
    k = math.ceil(density * flat.numel())
    if k >= flat.numel():
        return delta.clone()
    keep = torch.zeros_like(flat, dtype=torch.bool)
    keep[torch.argsort(flat.abs(), descending=True, stable=True)[:k]] = True
    return torch.where(keep, flat, torch.zeros_like(flat)).reshape(delta.shape)


def elect_sign(trimmed: Sequence[torch.Tensor]) -> torch.Tensor:
    """TIES' elected sign per entry: the sign of the summed trimmed task vectors (-1, 0, +1)."""
    return torch.sign(torch.stack(list(trimmed)).sum(0))


def disjoint_mean(trimmed: Sequence[torch.Tensor], sign: torch.Tensor) -> torch.Tensor:
    """Mean of the entries whose sign agrees with ``sign`` (0 where none does)."""
    stacked = torch.stack(list(trimmed))
    agree = (torch.sign(stacked) == sign) & (stacked != 0)
    count = agree.sum(0)
    total = torch.where(agree, stacked, torch.zeros_like(stacked)).sum(0)
    return total / count.clamp_min(1)


def ties_tensor(
    base: torch.Tensor, tuned: Sequence[torch.Tensor], density: float, lam: float
) -> torch.Tensor:
    """TIES-merging of one tensor: trim, elect sign, disjoint mean, ``base + lam * tau_m``."""
    b = _work(base)
    trimmed = [trim(_work(t) - b, density) for t in tuned]
    merged = disjoint_mean(trimmed, elect_sign(trimmed))
    return (b + lam * merged).to(base.dtype)


# --- state dicts ------------------------------------------------------------------------


def average(
    states: Sequence[State], weights: Sequence[float] | None = None
) -> dict[str, torch.Tensor]:
    """Weighted average of the models (uniform without ``weights``; weights are normalised)."""
    names = check_compatible(states, "average")
    w = _weights(weights, len(states))
    out = {}
    for k in names:
        ts = [s[k] for s in states]
        out[k] = average_tensor(ts, w) if ts[0].is_floating_point() else _same(ts, k)
    return out


def task_vectors(base: State, tuned: Sequence[State]) -> list[dict[str, torch.Tensor]]:
    """``tau_i = theta_i - theta_0`` of each fine-tuned model (floating-point tensors)."""
    check_compatible([base, *tuned], "task vectors")
    return [
        {k: _work(s[k]) - _work(v) for k, v in base.items() if v.is_floating_point()} for s in tuned
    ]


def task_arithmetic(
    base: State, tuned: Sequence[State], lam: float = 1.0
) -> dict[str, torch.Tensor]:
    """``theta_0 + lam * sum_i tau_i`` (Ilharco et al. 2023)."""
    names = check_compatible([base, *tuned], "task arithmetic")
    out = {}
    for k in names:
        ts = [s[k] for s in tuned]
        if base[k].is_floating_point():
            out[k] = task_arithmetic_tensor(base[k], ts, lam)
        else:
            out[k] = _same([base[k], *ts], k)
    return out


def ties(
    base: State, tuned: Sequence[State], density: float = 0.2, lam: float = 1.0
) -> dict[str, torch.Tensor]:
    """TIES-merging (Yadav et al. 2023): trim to ``density``, elect sign, disjoint mean."""
    names = check_compatible([base, *tuned], "ties")
    if not 0 < density <= 1:
        raise ConfigError(f"ties: density must be in (0, 1], got {density}")
    out = {}
    for k in names:
        ts = [s[k] for s in tuned]
        if base[k].is_floating_point():
            out[k] = ties_tensor(base[k], ts, density, lam)
        else:
            out[k] = _same([base[k], *ts], k)
    return out
