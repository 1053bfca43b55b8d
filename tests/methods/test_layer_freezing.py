"""layer_freezing: frozen matrices stay bit-identical under AdamW weight decay; selection specs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from methods_helpers import run, tiny_model

from polymnesia.errors import ConfigError
from polymnesia.layers.scores import spectrum_scan
from polymnesia.layers.select import select
from polymnesia.methods.layer_freezing import LayerFreezing
from polymnesia.training.plugins import build_plugins

Q0 = "model.layers.0.self_attn.q_proj.weight"
UP0 = "model.layers.0.mlp.up_proj.weight"


def _snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_named_params_bit_identical_with_weight_decay(tmp_path: Path) -> None:
    model = tiny_model()
    before = _snapshot(model)
    plugin = LayerFreezing(params=[Q0, UP0])
    run(model, 4, tmp_path, [plugin], weight_decay=0.5, lr=1e-2)
    after = dict(model.named_parameters())
    assert plugin.frozen == sorted([Q0, UP0])
    for n in (Q0, UP0):
        assert torch.equal(after[n].detach(), before[n]), n
        assert not after[n].requires_grad
    moved = [n for n in before if not torch.equal(after[n].detach(), before[n])]
    assert "model.layers.0.self_attn.k_proj.weight" in moved  # the rest trains


def test_spectrum_strategy_freezes_top_half_per_type(tmp_path: Path) -> None:
    from polymnesia.testing import tiny_model

    model = tiny_model("mistral", 50, num_hidden_layers=4, max_position_embeddings=64)
    expected = select(spectrum_scan(model), pct=50)  # 2 of 4 layers for each of the 7 types
    assert len(expected) == 14
    before = _snapshot(model)
    plugin = build_plugins([{"name": "layer_freezing", "strategy": "spectrum"}])[0]
    run(model, 3, tmp_path, [plugin], weight_decay=0.1)
    assert set(plugin.frozen) == expected  # type: ignore[attr-defined]
    after = dict(model.named_parameters())
    for n in before:
        same = torch.equal(after[n].detach(), before[n])
        assert same == (n in expected), n  # frozen exactly the selection; everything else moves


def test_random_strategy_seeded() -> None:
    def frozen(seed: int) -> tuple[list[str], list[dict]]:  # type: ignore[type-arg]
        m = tiny_model()
        plugin = LayerFreezing(strategy="random", pct=50, seed=seed)
        groups = plugin.param_groups(m, [{"params": list(m.parameters())}])
        return plugin.frozen, groups

    a, groups = frozen(1)
    assert a == frozen(1)[0]  # deterministic
    assert len(a) == 0  # one layer: int(1 * 50 / 100) = 0 per type
    whole = LayerFreezing(strategy="random", top_k=1, by="layer", seed=1)
    m = tiny_model()
    left = whole.param_groups(m, [{"params": list(m.parameters())}])
    assert all(".layers.0." in n for n in whole.frozen) and len(whole.frozen) == 7
    kept = {id(p) for g in left for p in g["params"]}
    params = dict(m.named_parameters())
    assert not any(id(params[n]) in kept for n in whole.frozen)
    assert id(params["model.norm.weight"]) in kept
    assert id(params["model.embed_tokens.weight"]) in kept


def test_most_changed_strategy(tmp_path: Path) -> None:
    base = tiny_model()
    base.save_pretrained(tmp_path / "base", safe_serialization=True)
    tuned = tiny_model()
    with torch.no_grad():
        tuned.model.layers[0].self_attn.v_proj.weight.add_(1.0)
    plugin = LayerFreezing(
        strategy="most_changed", before=str(tmp_path / "base"), top_k=1, pattern=r"v_proj"
    )
    plugin.param_groups(tuned, [{"params": list(tuned.parameters())}])
    assert plugin.frozen == ["model.layers.0.self_attn.v_proj.weight"]


def test_resume_with_other_selection_refused() -> None:
    plugin = LayerFreezing(params=[Q0])
    plugin.param_groups(tiny_model(), [{"params": []}])
    plugin.load_state_dict({"frozen": [Q0]})
    with pytest.raises(ConfigError, match="different set"):
        plugin.load_state_dict({"frozen": [UP0]})


@pytest.mark.parametrize(
    ("spec", "msg"),
    [
        ({}, "exactly one of params"),
        ({"params": ["x"], "strategy": "random"}, "exactly one of params"),
        ({"strategy": "most_changed"}, "needs 'before'"),
        ({"strategy": "spectrum", "pct": 150}, "pct"),
        ({"strategy": "magic"}, "strategy"),
        ({"strategy": "random", "pct": 10, "top_k": 2}, "not both"),
        ({"strategy": "random", "colour": 1}, "colour"),
    ],
)
def test_bad_options_one_line(spec: dict, msg: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError, match=msg):
        build_plugins([{"name": "layer_freezing", **spec}])


def test_unknown_param_name() -> None:
    with pytest.raises(ConfigError, match="not in the model: nope"):
        LayerFreezing(params=["nope"]).param_groups(tiny_model(), [])
