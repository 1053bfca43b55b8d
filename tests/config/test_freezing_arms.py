"""two_phase's freezing arms are the ``layer_freezing`` plugin's options plus a name: every
option and every rule is declared once, in :mod:`polymnesia.methods.layer_freezing`."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from polymnesia.experiments import EXPERIMENTS, load_config
from polymnesia.experiments.two_phase.config import FreezingArm
from polymnesia.methods.layer_freezing import LayerFreezing, LayerFreezingConfig
from polymnesia.training.config import TrainConfig

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "two_phase_smoke.yaml"


def _plugin_of(arms: str, name: str) -> dict[str, object]:
    cfg = load_config(SMOKE, [f"mitigation.freezing={arms}"])
    specs = {s.name: s for s in EXPERIMENTS.get("two_phase").build(cfg)}
    plugins = specs[f"mit_{name}"].params.instruct.train.plugins
    return next(p.entry() for p in plugins if isinstance(p, LayerFreezingConfig))


def test_an_arm_declares_no_option_of_its_own_but_its_name() -> None:
    assert issubclass(FreezingArm, LayerFreezingConfig)
    own = set(FreezingArm.model_fields) - set(LayerFreezingConfig.model_fields)
    assert own == {"name"}
    for key, field in LayerFreezingConfig.model_fields.items():  # not re-declared
        assert repr(FreezingArm.model_fields[key]) == repr(field), key


def test_every_plugin_option_reaches_the_arms_training_stage() -> None:
    # freeze: unselected was never an arm option: it needs no change in two_phase
    plugin = _plugin_of(
        "[{name: S, strategy: spectrum, top_k: 1, freeze: unselected, pattern: mlp}]", "S"
    )
    assert plugin["freeze"] == "unselected" and plugin["top_k"] == 1
    assert plugin["pattern"] == "mlp" and plugin["by"] == "type"
    # the stage's plugin entry is the plugin's own validation of the arm's options
    arm = FreezingArm(name="S", strategy="spectrum", top_k=1, freeze="unselected", pattern="mlp")
    assert plugin == TrainConfig(plugins=[arm.plugin()]).plugins[0].entry()


def test_the_defaults_are_the_plugins() -> None:
    random = _plugin_of("[{name: R, strategy: random}]", "R")
    assert random["by"] == "layer" and random["pct"] is None and random["top_k"] is None
    assert LayerFreezing(strategy="random").cfg.by == "layer"  # the plugin alone: the same
    changed = _plugin_of("[{name: C, strategy: most_changed, top_k: 1}]", "C")
    assert changed["before"] == "base" and changed["by"] == "type"
    cfg = load_config(SMOKE, ["mitigation.freezing=[{name: C, strategy: most_changed, top_k: 1}]"])
    spec = next(s for s in EXPERIMENTS.get("two_phase").build(cfg) if s.name == "mit_C")
    assert spec.inputs["base"] == "pretrain"


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"strategy": "random", "top_k": 0}, "greater than 0"),
        ({"strategy": "random", "pct": 0}, "greater than 0"),
        ({"strategy": "random", "pct": 10, "top_k": 2}, "not both"),
        ({"strategy": "random", "pattern": "("}, "not a regular expression"),
        ({"params": ["x"], "strategy": "random"}, "exactly one of params"),
    ],
)
def test_a_rule_gives_the_same_line_for_an_arm_and_for_the_plugin(
    options: dict[str, object], needle: str
) -> None:
    with pytest.raises(ValidationError) as plugin:
        LayerFreezingConfig(**options)
    with pytest.raises(ValidationError) as arm:
        FreezingArm(name="X", **options)
    assert needle in str(plugin.value) and needle in str(arm.value)
    assert plugin.value.errors()[0]["msg"] == arm.value.errors()[0]["msg"]


def test_an_arm_may_name_only_models_the_protocol_wires() -> None:
    with pytest.raises(ValidationError, match="before names 'phase1'; accepted: base"):
        FreezingArm(name="X", strategy="most_changed", before="phase1")
