"""Turn per-matrix scores into the set of parameter names to freeze.

Selection follows Spectrum's ``generate_unfrozen_params_yaml``: matrices are
grouped by *weight type* -- per module, as the reference's ``get_layer_types``
makes them: the name with its layer index (the first numeric part) removed, e.g.
``model.layers.{i}.self_attn.q_proj.weight`` -> ``model.layers.self_attn.q_proj.weight``.
Later numbers are kept, so each expert of a mixture-of-experts layer is its own
type (``model.layers.{i}.mlp.experts.{j}.w1.weight`` -> ``model.layers.mlp.experts.{j}.w1.weight``),
as in the reference, where the type is everything after the first number. The
reference also drops the part before that number; it is kept here so that two
stacks of one model (an encoder's and a decoder's ``layer.0...``) are not one type;
for a decoder-only model both give the same groups. Within each type the
``int(len * pct / 100)`` highest-scoring layers are kept (ties broken by name, so
the result is deterministic). The two-phase CFT paper's
LF_H1/LF_H2 pick a fixed number of layers (10) instead: ``top_k``.

Which side is frozen (``freeze``):

* ``"selected"`` -- the two-phase CFT paper (section 5.2; appendix D.1): the layers the
  heuristic calls important (highest SNR, most changed, or the random draw)
  are *frozen* during Phase 2, the rest train;
* ``"unselected"`` -- Spectrum's own use: the selected layers *train* and
  everything else is frozen, except the input embeddings and the LM head
  which Spectrum always leaves trainable.

Embeddings and the LM head (:data:`~polymnesia.layers.stream.ALWAYS_TRAINABLE`)
are never candidates and never frozen by either mode, as in Spectrum. A
selected ``x.weight`` also freezes the rest of module ``x`` (e.g. ``x.bias``).

``by="layer"`` ranks whole decoder layers (mean score of their matrices)
instead of one matrix per type: the two-phase CFT paper's LF_H1 freezes "a random set of 10
layers of the model".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Literal

from polymnesia.errors import ConfigError
from polymnesia.layers.stream import ALWAYS_TRAINABLE

_ALWAYS = [re.compile(p) for p in ALWAYS_TRAINABLE]


def weight_type(name: str) -> str:
    """Spectrum's grouping key: the name without its first numeric part (the layer index);
    later numbers (an expert's index) stay, so experts are grouped one by one."""
    parts = name.split(".")
    first = next((i for i, p in enumerate(parts) if p.isdigit()), None)
    return name if first is None else ".".join(parts[:first] + parts[first + 1 :])


def layer_index(name: str) -> int | None:
    """The first numeric part of the name (the decoder layer), or None (embeddings, final norm)."""
    for p in name.split("."):
        if p.isdigit():
            return int(p)
    return None


def always_trainable(name: str) -> bool:
    return any(rx.search(name) for rx in _ALWAYS)


def _count(n: int, pct: float | None, top_k: int | None) -> int:
    if top_k is not None:
        return min(top_k, n)
    assert pct is not None
    return int(n * pct / 100)


def _check(pct: float | None, top_k: int | None) -> None:
    if (pct is None) == (top_k is None):
        raise ConfigError("layer selection needs exactly one of pct (0-100) or top_k (>= 0)")
    if pct is not None and not 0 <= pct <= 100:
        raise ConfigError(f"layer selection pct must be in [0, 100], got {pct}")
    if top_k is not None and top_k < 0:
        raise ConfigError(f"layer selection top_k must be >= 0, got {top_k}")


def _ranked(items: Iterable[tuple[str, float]]) -> list[str]:
    """Highest score first; NaN last; ties by name."""
    return [
        k
        for k, _ in sorted(
            items, key=lambda kv: (kv[1] != kv[1], -kv[1] if kv[1] == kv[1] else 0.0, kv[0])
        )
    ]


def top_per_type(
    scores: Mapping[str, float], *, pct: float | None = None, top_k: int | None = None
) -> set[str]:
    """Top ``pct``% (or ``top_k``) matrices of every weight type by score (Spectrum's selection)."""
    _check(pct, top_k)
    groups: dict[str, list[tuple[str, float]]] = {}
    for name, s in scores.items():
        if not always_trainable(name):
            groups.setdefault(weight_type(name), []).append((name, s))
    out: set[str] = set()
    for members in groups.values():
        out.update(_ranked(members)[: _count(len(members), pct, top_k)])
    return out


def top_layers(
    scores: Mapping[str, float], *, pct: float | None = None, top_k: int | None = None
) -> set[str]:
    """Every matrix of the top ``pct``% (or ``top_k``) decoder layers by mean matrix score."""
    _check(pct, top_k)
    per_layer: dict[int, list[float]] = {}
    for name, s in scores.items():
        i = layer_index(name)
        if i is not None and not always_trainable(name):
            per_layer.setdefault(i, []).append(s)
    means = [(f"{i:09d}", sum(v) / len(v)) for i, v in per_layer.items()]
    chosen = {int(k) for k in _ranked(means)[: _count(len(means), pct, top_k)]}
    return {n for n in scores if layer_index(n) in chosen and not always_trainable(n)}


def select(
    scores: Mapping[str, float],
    *,
    pct: float | None = None,
    top_k: int | None = None,
    by: Literal["type", "layer"] = "type",
) -> set[str]:
    """The selected matrix names: :func:`top_per_type` or :func:`top_layers`."""
    if by == "type":
        return top_per_type(scores, pct=pct, top_k=top_k)
    if by == "layer":
        return top_layers(scores, pct=pct, top_k=top_k)
    raise ConfigError(f"layer selection 'by' must be 'type' or 'layer', got {by!r}")


def _module(name: str) -> str:
    return name.rsplit(".", 1)[0] + "." if "." in name else name


def frozen_names(
    all_names: Iterable[str],
    selected: Iterable[str],
    freeze: Literal["selected", "unselected"] = "selected",
) -> set[str]:
    """Parameter names (of ``all_names``) to freeze, given the selected matrix names.

    ``selected``: freeze the modules of the selected matrices (the two-phase CFT paper).
    ``unselected``: freeze every parameter outside the selected modules (other
    matrices, norms, ...), as Spectrum trains only its chosen layers; the
    embeddings and the LM head stay trainable in both modes.
    """
    names = sorted(all_names)
    sel = {_module(n) for n in selected}
    if freeze == "selected":
        return {n for n in names if _module(n) in sel and not always_trainable(n)}
    if freeze == "unselected":
        return {n for n in names if _module(n) not in sel and not always_trainable(n)}
    raise ConfigError(f"layer freezing 'freeze' must be 'selected' or 'unselected', got {freeze!r}")
