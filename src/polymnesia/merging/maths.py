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
from typing import NamedTuple

import numpy as np
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
    out = _work(tensors[0]) * weights[0]  # a new tensor: no pass to zero one first
    for t, w in zip(tensors[1:], weights[1:], strict=True):
        out.add_(_work(t), alpha=w)
    return out.to(tensors[0].dtype)


def task_arithmetic_tensor(
    base: torch.Tensor, tuned: Sequence[torch.Tensor], lam: float
) -> torch.Tensor:
    """``base + lam * sum_i (t_i - base)``."""
    b = _work(base)
    total = _work(tuned[0]) - b  # the same sums as from zero: 0 + x is exact
    for t in tuned[1:]:
        total.add_(_work(t) - b)
    return total.mul_(lam).add_(b).to(base.dtype)


def trim(delta: torch.Tensor, density: float) -> torch.Tensor:
    """``delta`` with all but its ``ceil(density * n)`` entries largest in magnitude set to 0
    (equal magnitudes: the earlier entry first, so exactly that many are kept)."""
    if not 0 < density <= 1:
        raise ConfigError(f"ties: density must be in (0, 1], got {density}")
    flat = delta.reshape(-1)
    k = math.ceil(density * flat.numel())
    if k >= flat.numel():
        return delta.clone()
    # the k-th largest magnitude by selection (linear time, not a sort): every entry above it
    # is kept, and of the entries equal to it the earliest ones up to k in all
    mag = flat.abs()
    threshold = torch.kthvalue(mag, flat.numel() - k + 1).values
    keep = mag >= threshold
    if int(keep.sum()) > k:  # ties at the threshold: the earliest of them fill the room left
        tied = mag == threshold
        room = k - int((mag > threshold).sum())
        keep = (mag > threshold) | (tied & (torch.cumsum(tied, 0) <= room))
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


# --- TIES on CPU: a selection without a sort, fused chunk by chunk -------------------------

#: entries per chunk of :func:`ties_tensor`'s fused passes on CPU: a chunk and its
#: temporaries stay in a core's cache, so the twenty-odd elementwise steps of a chunk cost
#: less than a few passes over the whole tensor in memory
TIES_CHUNK = 1 << 16
#: magnitudes sampled (with a fixed seed) to bracket each task vector's trim threshold
TIES_SAMPLE = 1 << 18
#: the most models the fused path merges; more go through the reference path (the order of
#: ``torch.stack(...).sum(0)`` over more rows is not a plain left-to-right sum)
TIES_FUSED_MAX = 4


class _Keep(NamedTuple):
    """Which entries of one task vector :func:`trim` keeps: all (``tau`` None), or those of
    magnitude above ``tau`` and those equal to it up to flat index ``last`` (inclusive)."""

    tau: float | None
    last: int


def _np(t: torch.Tensor) -> np.ndarray:
    """A CPU tensor as a numpy array of its working dtype (float32 or float64)."""
    return _work(t).numpy()


def _finite(ok: bool, i: int) -> None:
    if not ok:
        raise ConfigError(
            f"ties: the task vector of model {i} holds NaN or infinite entries; "
            "TIES' trim needs finite weights"
        )


def _sample(b: torch.Tensor, t: torch.Tensor, n: int) -> np.ndarray:
    """The magnitudes of ``t - b`` (flat, CPU) at every ``step``-th entry: about ``n / 64``
    of them (at least 2,048, at most :data:`TIES_SAMPLE`); a step prime to 2, 3, 5 and 7
    visits all columns and rows of the usual power-of-two (and 3 x 2^m) shapes evenly."""
    step = max(n // TIES_SAMPLE, min(64, n // 2048), 1)
    while math.gcd(step, 210) != 1:
        step += 1
    return np.abs(_np(t[step // 2 :: step]) - _np(b[step // 2 :: step]))


def _bracket(mag: np.ndarray, n: int, k: int, width: float) -> tuple[float, float]:
    """Magnitudes ``lo <= hi`` that likely enclose the ``k``-th largest of ``n`` entries,
    from the sample ``mag``: ``width`` standard errors of its quantile either side."""
    s = mag.size
    q = int((n - k) / n * s)
    margin = int(width * math.sqrt(s * (k / n) * (1 - k / n))) + 8
    lo, hi = max(0, q - margin), min(s - 1, q + margin)
    part = np.partition(mag, (lo, hi))
    return float(part[lo]), float(part[hi])


def _scan(
    b: torch.Tensor, t: torch.Tensor, lo: float, hi: float, i: int
) -> tuple[int, np.ndarray, np.ndarray]:
    """Over ``|t - b|`` (flat, CPU), one chunk at a time: the count of magnitudes above
    ``hi``, and the magnitudes in ``[lo, hi]`` with their flat indices (ascending)."""
    above, finite = 0, True
    vals, idxs = [], []
    for s in range(0, b.numel(), TIES_CHUNK):
        mag = np.abs(_np(t[s : s + TIES_CHUNK]) - _np(b[s : s + TIES_CHUNK]))
        finite = finite and math.isfinite(mag.max())  # NaN and inf show in the maximum
        over = mag > hi
        above += int(np.count_nonzero(over))
        inside = np.flatnonzero((mag >= lo) ^ over)
        vals.append(mag[inside])
        idxs.append(inside + s)
    _finite(finite, i)
    return above, np.concatenate(vals), np.concatenate(idxs)


def _keep(b: torch.Tensor, t: torch.Tensor, k: int, i: int) -> _Keep:
    """:func:`trim`'s choice for ``t - b`` (flat, CPU), without sorting the tensor: a sample
    brackets the threshold, one pass counts the entries above the bracket and gathers those
    inside it, and a selection among those finds the threshold and the last entry equal to
    it that is kept (earliest first). Where the bracket misses (a sample unlike the whole),
    a wider one is scanned, then a selection over all magnitudes: the same choice, slower."""
    n = b.numel()
    if k >= n:
        if n:
            _finite(bool(torch.isfinite(_work(t) - b).all()), i)
        return _Keep(None, n)
    if n <= 16 * 1024:
        above, vals, idxs = _scan(b, t, 0.0, math.inf, i)
    else:  # a narrow bracket; where it misses (1 in 2,000), a wide one; then all of them
        sample = _sample(b, t, n)
        above, vals, idxs = _scan(b, t, *_bracket(sample, n, k, 3.5), i)
        if not above < k <= above + vals.size:
            above, vals, idxs = _scan(b, t, *_bracket(sample, n, k, 8.0), i)
        if not above < k <= above + vals.size:
            tau = float(torch.kthvalue((_work(t) - b).abs_(), n - k + 1).values)
            above, vals, idxs = _scan(b, t, tau, tau, i)
    rank = k - above  # the threshold is the rank-th largest magnitude in the bracket
    tau = np.partition(vals, vals.size - rank)[vals.size - rank]
    room = rank - int(np.count_nonzero(vals > tau))
    return _Keep(float(tau), int(idxs[vals == tau][room - 1]))


def _ties_cpu(
    b: torch.Tensor, flat: Sequence[torch.Tensor], k: int, lam: float, out: torch.Tensor
) -> None:
    """TIES of the flat CPU tensors ``flat`` against ``b`` into ``out`` (flat), as
    :func:`_ties_reference` computes it, bit for bit: the trim by :func:`_keep`, then the
    trim, the sign election and the disjoint mean chunk by chunk in numpy. The agreeing
    entries of a chunk are summed as magnitudes and given the elected sign after (exact:
    rounding is symmetric in sign), and a count of agreeing models divides them."""
    keeps = [_keep(b, t, k, i) for i, t in enumerate(flat)]
    direct = out.dtype == b.dtype  # write into ``out``'s memory, no cast
    out_np = out.numpy() if direct else None
    for s in range(0, b.numel(), TIES_CHUNK):
        bc = _np(b[s : s + TIES_CHUNK])
        trimmed = []
        for t, keep in zip(flat, keeps, strict=True):
            d = _np(t[s : s + TIES_CHUNK]) - bc
            if keep.tau is not None:
                mag = np.abs(d)
                kept = mag > keep.tau
                tied = min(max(keep.last + 1 - s, 0), d.size)  # entries up to the last tie
                if tied:
                    kept[:tied] |= mag[:tied] == keep.tau
                d *= kept.astype(d.dtype)  # dropped entries become 0 (or -0: same below)
            trimmed.append(d)
        total = trimmed[0] + trimmed[1] if len(trimmed) > 1 else trimmed[0].copy()
        for d in trimmed[2:]:
            total += d
        sign = torch.sign(torch.from_numpy(total)).numpy()
        count = np.zeros(bc.size, np.uint8)
        for j, d in enumerate(trimmed):
            d *= sign  # +|d| where it agrees with the elected sign, else -|d| or 0
            agree = d > 0
            d *= agree.astype(d.dtype)
            count += agree.view(np.uint8)
            if j:
                total += d
            else:
                total = d
        count |= count == 0  # at least 1 (0 where nobody agrees: the sum is 0 there)
        merged = total * sign
        merged /= count.astype(merged.dtype)
        merged += 0.0  # -0 -> +0, as the reference's where(agree, x, 0) sum gives
        if lam != 1.0:  # x * 1 is x
            merged *= lam
        if out_np is not None:
            np.add(bc, merged, out=out_np[s : s + TIES_CHUNK])
        else:
            out[s : s + TIES_CHUNK] = torch.from_numpy(bc + merged)


def _ties_reference(
    b: torch.Tensor, tuned: Sequence[torch.Tensor], density: float, lam: float
) -> torch.Tensor:
    """TIES on whole tensors: :func:`trim`, :func:`elect_sign`, :func:`disjoint_mean`."""
    deltas = [_work(t) - b for t in tuned]
    for i, d in enumerate(deltas):
        _finite(bool(torch.isfinite(d).all()), i)
    trimmed = [trim(d, density) for d in deltas]
    return b + lam * disjoint_mean(trimmed, elect_sign(trimmed))


def ties_tensor(
    base: torch.Tensor,
    tuned: Sequence[torch.Tensor],
    density: float,
    lam: float,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """TIES-merging of one tensor: trim, elect sign, disjoint mean, ``base + lam * tau_m``
    (written into ``out``, a contiguous tensor of ``base``'s shape and dtype, where given).

    On CPU with at most :data:`TIES_FUSED_MAX` models the trim's threshold is found without
    a sort (:func:`_keep`) and the rest is fused chunk by chunk (:func:`_ties_cpu`): the same
    numbers as :func:`trim`, :func:`elect_sign` and :func:`disjoint_mean` on the whole
    tensors (as on an accelerator), bit for bit. Task vectors with NaN or infinite entries
    are refused in one line (they have no largest magnitudes)."""
    if not 0 < density <= 1:
        raise ConfigError(f"ties: density must be in (0, 1], got {density}")
    if out is not None and (
        out.shape != base.shape or out.dtype != base.dtype or not out.is_contiguous()
    ):
        raise ValueError(f"ties: out must be contiguous {base.dtype} {tuple(base.shape)}")
    b = _work(base)
    if b.device.type != "cpu" or len(tuned) > TIES_FUSED_MAX or not tuned:
        merged = _ties_reference(b, tuned, density, lam).to(base.dtype)
        return merged if out is None else out.copy_(merged)
    if out is None:
        out = torch.empty(base.shape, dtype=base.dtype)
    flat = [_work(t.detach()).reshape(-1) for t in tuned]
    _ties_cpu(b.reshape(-1), flat, math.ceil(density * b.numel()), lam, out.view(-1))
    return out


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
