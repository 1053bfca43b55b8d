"""TIES-merging per tensor (Yadav et al. 2023): trim each task vector to its largest
``density`` share by magnitude (:func:`trim`), elect a sign per entry (:func:`elect_sign`)
and average the agreeing entries (:func:`disjoint_mean`); :func:`ties_tensor` does the three
at once: on CPU with a few models by a selection without a sort, fused chunk by chunk, bit
for bit what the three give on whole tensors (as on an accelerator, or with more models).
The state-dict and model-folder merges of
:mod:`polymnesia.merging.maths` and :mod:`polymnesia.merging.folders` call it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from polymnesia.errors import ConfigError


def working_copy(t: torch.Tensor) -> torch.Tensor:
    """``t`` detached in the dtype merging computes in: float64 stays, the rest float32."""
    return t.detach().to(torch.float64 if t.dtype == torch.float64 else torch.float32)


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
    return working_copy(t).numpy()


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
            _finite(bool(torch.isfinite(working_copy(t) - b).all()), i)
        return _Keep(None, n)
    if n <= 16 * 1024:
        above, vals, idxs = _scan(b, t, 0.0, math.inf, i)
    else:  # a narrow bracket; where it misses (1 in 2,000), a wide one; then all of them
        sample = _sample(b, t, n)
        above, vals, idxs = _scan(b, t, *_bracket(sample, n, k, 3.5), i)
        if not above < k <= above + vals.size:
            above, vals, idxs = _scan(b, t, *_bracket(sample, n, k, 8.0), i)
        if not above < k <= above + vals.size:
            tau = float(torch.kthvalue((working_copy(t) - b).abs_(), n - k + 1).values)
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
    deltas = [working_copy(t) - b for t in tuned]
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
    b = working_copy(base)
    if b.device.type != "cpu" or len(tuned) > TIES_FUSED_MAX or not tuned:
        merged = _ties_reference(b, tuned, density, lam).to(base.dtype)
        return merged if out is None else out.copy_(merged)
    if out is None:
        out = torch.empty(base.shape, dtype=base.dtype)
    flat = [working_copy(t.detach()).reshape(-1) for t in tuned]
    _ties_cpu(b.reshape(-1), flat, math.ceil(density * b.numel()), lam, out.view(-1))
    return out
