"""Training plugin ``layer_freezing``: freeze chosen weight matrices (the two-phase CFT paper,
section 5.2).

The two-phase CFT paper mitigates forgetting of English in Phase 2 by freezing layers of
the Phase 1 model chosen by a heuristic: random (LF_H1), most changed from
base to Phase 1 (LF_H2), or Spectrum's highest-SNR layers (appendix D.1: the
layers Spectrum calls important, top 50% per module, are *frozen*). The
selection maths lives in :mod:`polymnesia.layers`; this plugin applies it.

Frozen means exact: in ``param_groups`` the frozen tensors get
``requires_grad_(False)`` and leave every optimizer group, so neither a
gradient nor AdamW's decoupled weight decay can move them (they stay
bit-identical). Give either ``params`` (explicit names) or a ``strategy``:

* ``spectrum``: SNR of every matrix of ``source`` (default: the model being
  trained, in memory);
* ``most_changed``: relative Frobenius change from ``before`` (the base
  model) to ``after`` (default: the model being trained, i.e. the Phase 1
  model);

``source``, ``before`` and ``after`` name *stage inputs* (roles such as
``base``) in a config; the stage resolves them to those stages' model folders,
which are streamed from safetensors (a path given to the constructor directly
works the same way);
* ``random``: seeded random scores.

then ``pct`` (default 50) or ``top_k`` layers per weight type (``by: type``)
or whole decoder layers (``by: layer``; the default for ``random``, the two-phase CFT paper's
LF_H1 "random set of 10 layers"; ``type`` for the other strategies); ``freeze: selected`` (paper
002) or
``unselected`` (Spectrum's own use). ``pattern`` restricts the candidates,
e.g. ``self_attn\\.(q|k|v)_proj`` for LF_H2's "Key, Query, and Value".
Embeddings and the LM head are never frozen by a strategy (as in Spectrum).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field, ValidationError, field_validator, model_validator

from polymnesia.config.checks import check_regex
from polymnesia.errors import ConfigError
from polymnesia.layers.scores import most_changed_scan, random_scores, spectrum_scan
from polymnesia.layers.select import frozen_names, select
from polymnesia.layers.stream import iter_module_tensors
from polymnesia.training.model_shape import ModelShape
from polymnesia.training.plugins import PLUGINS, LoopState, PluginOptions, TrainingPlugin


class LayerFreezingConfig(PluginOptions):
    """Options of the ``layer_freezing`` plugin (one of ``params`` or ``strategy``)."""

    params: list[str] | None = Field(None, description="explicit parameter names to freeze")
    strategy: Literal["random", "most_changed", "spectrum"] | None = Field(
        None, description="how layers are scored: random (LF_H1), most_changed (LF_H2), spectrum"
    )
    pct: float | None = Field(
        None,
        gt=0,
        le=100,
        description="percent of layers per weight type (default 50 when top_k is not given)",
    )
    top_k: int | None = Field(
        None,
        gt=0,
        description="a fixed number of layers instead of pct (the two-phase CFT paper: 10)",
    )
    by: Literal["type", "layer"] | None = Field(
        None,
        description="rank matrices per weight type, or whole decoder layers; default: layer "
        "for random (LF_H1's random set of layers), type otherwise (LF_H2's separate choice "
        "for Key, Query and Value; Spectrum per module)",
    )
    freeze: Literal["selected", "unselected"] = Field(
        "selected",
        description="freeze the selected layers (the two-phase CFT paper) or the others (Spectrum)",
    )
    pattern: str | None = Field(None, description="regex: only matching matrices are candidates")
    source: str | None = Field(
        None, description="spectrum: the stage input whose model is scanned (default: the model)"
    )
    before: str | None = Field(
        None, description="most_changed: the stage input holding the model before fine-tuning"
    )
    after: str | None = Field(
        None,
        description="most_changed: the stage input holding the fine-tuned model "
        "(default: the model being trained)",
    )
    seed: int = Field(0, description="random: the seed of the draw")

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        return check_regex(v)

    @model_validator(mode="before")
    @classmethod
    def _default_by(cls, data: Any) -> Any:
        """``by`` left out: ``layer`` for ``random``, ``type`` otherwise (filled in, so the
        plugin's spec and fingerprint always name it)."""
        if isinstance(data, dict) and data.get("by") is None:
            data = {**data, "by": "layer" if data.get("strategy") == "random" else "type"}
        return data

    @model_validator(mode="after")
    def _check(self) -> LayerFreezingConfig:
        if (self.params is None) == (self.strategy is None):
            raise ValueError("give exactly one of params (names) or strategy")
        if self.strategy == "most_changed" and not self.before:
            raise ValueError(
                "strategy most_changed needs 'before' (a stage input: the model before)"
            )
        if self.pct is not None and self.top_k is not None:
            raise ValueError("give pct or top_k, not both")
        return self

    checks_model: ClassVar[bool] = True

    def frozen_share(self, shape: ModelShape) -> float:
        """The share of the blocks' parameters frozen in a model of ``shape`` (by weight type
        or layer, pct or top_k, restricted to ``pattern``; explicit ``params`` by their names),
        as the memory planner counts it: no gradient or optimizer state for them."""
        mats = shape.matrices()
        block = shape.block_params
        if self.params is not None:
            n = sum(
                a * b
                for name in self.params
                for m, (a, b) in mats.items()
                if re.search(rf"\.{m}\.weight$", name)
            )
            return n / (shape.num_layers * block)
        rx = re.compile(self.pattern) if self.pattern else None
        cand = sum(
            a * b
            for m, (a, b) in mats.items()
            if rx is None
            or rx.search(f"model.layers.0.{'self_attn' if m[0] in 'qkvo' else 'mlp'}.{m}.weight")
        )
        share = (
            (min(self.top_k, shape.num_layers) / shape.num_layers)
            if self.top_k is not None
            else ((50.0 if self.pct is None else float(self.pct)) / 100)
        )
        if self.freeze == "unselected":
            share = 1 - share
        return share * cand / block

    def check_model(self, model: Any) -> None:
        """A ``pattern`` matches one of ``model``'s weight matrices."""
        if self.pattern is None:
            return
        rx = re.compile(self.pattern)
        names = [n for n, p in model.named_parameters() if p.ndim >= 2]
        if not any(rx.search(n) for n in names):
            raise ValueError(
                f"pattern: {self.pattern!r} matches no weight matrix of the model "
                f"(e.g. {', '.join(names[2:4])})"
            )

    def check_depth(self, layers: int) -> None:
        """Refuse a ``top_k`` beyond a model of ``layers`` decoder layers (known before any
        training for a preset model), in one line."""
        if self.top_k is not None and self.top_k > layers:
            per = "decoder layers" if self.by == "layer" else "per weight type"
            raise ValueError(
                f"top_k {self.top_k} is more layers than the model has ({layers} {per}); "
                f"accepted: 1..{layers} (or pct)"
            )


def layer_scores(cfg: LayerFreezingConfig, model: torch.nn.Module) -> dict[str, float]:
    """Per-matrix scores for ``cfg.strategy`` (folders streamed, the model read in place)."""
    if cfg.strategy == "spectrum":
        return spectrum_scan(Path(cfg.source) if cfg.source else model, pattern=cfg.pattern)
    if cfg.strategy == "most_changed":
        assert cfg.before is not None
        after: Path | torch.nn.Module = Path(cfg.after) if cfg.after else model
        return most_changed_scan(Path(cfg.before), after, pattern=cfg.pattern)
    rx = re.compile(cfg.pattern) if cfg.pattern else None
    names = [n for n, _ in iter_module_tensors(model) if rx is None or rx.search(n)]
    return random_scores(names, cfg.seed)


def resolve_frozen(cfg: LayerFreezingConfig, model: torch.nn.Module) -> list[str]:
    """The sorted parameter names of ``model`` that ``cfg`` freezes."""
    names = [n for n, _ in model.named_parameters()]
    if cfg.params is not None:
        missing = sorted(set(cfg.params) - set(names))
        if missing:
            raise ConfigError(
                f"layer_freezing params not in the model: {', '.join(missing[:5])}; "
                f"e.g. accepted: {', '.join(names[:3])}"
            )
        return sorted(set(cfg.params))
    scores = layer_scores(cfg, model)
    if not scores:
        raise ConfigError(f"layer_freezing found no weight matrix matching pattern {cfg.pattern!r}")
    pct = 50.0 if cfg.pct is None and cfg.top_k is None else cfg.pct
    chosen = select(scores, pct=pct, top_k=cfg.top_k, by=cfg.by or "type")
    return sorted(frozen_names(names, chosen, cfg.freeze))


@PLUGINS.register(
    "layer_freezing",
    "freeze layers chosen by name, random, most-changed or Spectrum SNR (the two-phase CFT "
    "paper); bit-identical",
)
class LayerFreezing(TrainingPlugin):
    name = "layer_freezing"
    Options = LayerFreezingConfig
    #: the selection is made on the whole model before sharding (training.loop)
    sharded_engines = ("fsdp2",)
    input_options = ("source", "before", "after")

    def __init__(self, **options: Any) -> None:
        try:
            self.cfg = LayerFreezingConfig(**options)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(x) for x in err["loc"])
            raise ConfigError(
                f"layer_freezing {where + ': ' if where else ''}{err['msg']}"
            ) from None
        self.frozen: list[str] = []

    def param_groups(
        self, model: torch.nn.Module, groups: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        self.frozen = resolve_frozen(self.cfg, model)
        params = dict(model.named_parameters())
        frozen_ids = {id(params[n]) for n in self.frozen}
        for n in self.frozen:
            params[n].requires_grad_(False)
        for g in groups:
            g["params"] = [p for p in g["params"] if id(p) not in frozen_ids]
        return [g for g in groups if g["params"]]

    def setup(self, state: LoopState) -> None:
        state.extras["frozen_params"] = list(self.frozen)

    def state_dict(self) -> dict[str, Any]:
        return {"frozen": list(self.frozen)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("frozen")
        if saved is not None and list(saved) != self.frozen:
            raise ConfigError(
                "layer_freezing: the checkpoint froze a different set of parameters than this "
                f"configuration ({len(saved)} vs {len(self.frozen)}); resume with the same "
                "selection"
            )
