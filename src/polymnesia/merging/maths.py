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
  ``theta_0 + lambda tau_m``. On CPU :func:`ties_tensor` finds each trim's threshold without
  a sort (a sampled bracket, then an exact selection inside it) and fuses the rest chunk by
  chunk, with the same numbers, bit for bit, as :func:`trim`, :func:`elect_sign` and
  :func:`disjoint_mean` on whole tensors. Task vectors with NaN or infinite entries are
  refused in one line (they have no largest magnitudes).

Merging model folders on disk is :mod:`polymnesia.merging.folders`.

:func:`iter_merge_step` (and :func:`merge_step`) merges one sequential step, the previous
step's model and the step's trained one, against a base by task arithmetic or TIES, one
tensor at a time (``lifelong``'s MERGE-TA and MERGE-TIES, :mod:`polymnesia.methods.step_merge`,
whose ``merge_average`` gives MERGE's step merge with :func:`average`).

Tensors that are not floating point (integer buffers, position ids) are taken from the base
(the first model for :func:`average`), after checking they agree. Models with other tensor
names or shapes are refused in one line. Arithmetic is float32 (float64 stays float64); the
result has each tensor's original dtype.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence

import torch

from polymnesia.errors import ConfigError
from polymnesia.merging.ties import ties_tensor, working_copy

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


def merge_weights(weights: Sequence[float] | None, n: int) -> list[float]:
    if weights is None:
        return [1.0 / n] * n
    if len(weights) != n:
        raise ConfigError(f"merge: {len(weights)} weights for {n} models")
    if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
        raise ConfigError(f"merge: weights must be >= 0 with a positive sum, got {list(weights)}")
    total = float(sum(weights))
    return [float(w) / total for w in weights]


def same_tensor(tensors: Sequence[torch.Tensor], name: str) -> torch.Tensor:
    """A non-float tensor, which every model must hold equal."""
    for t in tensors[1:]:
        if not torch.equal(t, tensors[0]):
            raise ConfigError(f"merge: the non-float tensor {name} differs between the models")
    return tensors[0].clone()


# --- per tensor -------------------------------------------------------------------------


def average_tensor(tensors: Sequence[torch.Tensor], weights: Sequence[float]) -> torch.Tensor:
    """``sum_i w_i t_i`` (``weights`` already normalised)."""
    out = working_copy(tensors[0]) * weights[0]  # a new tensor: no pass to zero one first
    for t, w in zip(tensors[1:], weights[1:], strict=True):
        out.add_(working_copy(t), alpha=w)
    return out.to(tensors[0].dtype)


def task_arithmetic_tensor(
    base: torch.Tensor, tuned: Sequence[torch.Tensor], lam: float
) -> torch.Tensor:
    """``base + lam * sum_i (t_i - base)``."""
    b = working_copy(base)
    total = working_copy(tuned[0]) - b  # the same sums as from zero: 0 + x is exact
    for t in tuned[1:]:
        total.add_(working_copy(t) - b)
    return total.mul_(lam).add_(b).to(base.dtype)


# --- TIES on CPU: a selection without a sort, fused chunk by chunk -------------------------


# --- state dicts ------------------------------------------------------------------------


def average(
    states: Sequence[State], weights: Sequence[float] | None = None
) -> dict[str, torch.Tensor]:
    """Weighted average of the models (uniform without ``weights``; weights are normalised)."""
    names = check_compatible(states, "average")
    w = merge_weights(weights, len(states))
    out = {}
    for k in names:
        ts = [s[k] for s in states]
        out[k] = average_tensor(ts, w) if ts[0].is_floating_point() else same_tensor(ts, k)
    return out


def task_vectors(base: State, tuned: Sequence[State]) -> list[dict[str, torch.Tensor]]:
    """``tau_i = theta_i - theta_0`` of each fine-tuned model (floating-point tensors)."""
    check_compatible([base, *tuned], "task vectors")
    return [
        {k: working_copy(s[k]) - working_copy(v) for k, v in base.items() if v.is_floating_point()}
        for s in tuned
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
            out[k] = same_tensor([base[k], *ts], k)
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
            out[k] = same_tensor([base[k], *ts], k)
    return out


# --- model folders, streamed ------------------------------------------------------------


#: how a lifelong step's trained model is merged with the previous step's model
STEP_MERGES = ("task_arithmetic", "ties")


def check_step_merge(rule: str, lam: float, density: float = 1.0) -> None:
    """A one-line :class:`ConfigError` unless ``rule`` is a step merge, ``lam > 0`` and
    ``0 < density <= 1``."""
    if rule not in STEP_MERGES:
        raise ConfigError(f"step merge: unknown rule {rule!r}; accepted: {', '.join(STEP_MERGES)}")
    if isinstance(lam, bool) or not math.isfinite(lam) or lam <= 0:
        raise ConfigError(f"{rule}: lam must be a number > 0, got {lam!r}")
    if isinstance(density, bool) or not 0 < density <= 1:
        raise ConfigError(f"{rule}: density must be in (0, 1], got {density!r}")


def iter_merge_step(
    base: State,
    previous: State,
    trained: State,
    rule: str,
    lam: float,
    density: float = 1.0,
) -> Iterator[tuple[str, torch.Tensor]]:
    """The merged tensors of one sequential step, one at a time (name, tensor on the base's
    device): ``previous`` (the model the step started from) and ``trained`` (its result)
    merged against ``base`` (the model before the first step) by task arithmetic,
    ``base + lam (tau_prev + tau_new)``, or TIES (trimmed to ``density``, elected sign,
    disjoint mean, ``base + lam tau_m``), with ``tau = theta - base``. Each tensor of
    ``trained`` is moved to the base's device as it is read, so a caller that writes each
    merged tensor back into the model holds one tensor beyond ``base`` and ``previous``."""
    check_step_merge(rule, lam, density)
    names = check_compatible([base, previous, trained], rule)
    for k in names:
        b = base[k]
        ts = [previous[k].to(b.device), trained[k].to(b.device)]
        if not b.is_floating_point():
            yield k, same_tensor([b, *ts], k)
        elif rule == "task_arithmetic":
            yield k, task_arithmetic_tensor(b, ts, lam)
        else:
            try:
                merged = ties_tensor(b, ts, density, lam)
            except ConfigError as e:  # name the tensor
                raise ConfigError(f"{rule}: {k}: {e}") from None
            yield k, merged


def merge_step(
    base: State,
    previous: State,
    trained: State,
    rule: str,
    lam: float,
    density: float = 1.0,
) -> dict[str, torch.Tensor]:
    """:func:`iter_merge_step` as one state dict."""
    return dict(iter_merge_step(base, previous, trained, rule, lam, density))
