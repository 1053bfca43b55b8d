"""docs/architecture.md, "A forgetting baseline": a training plugin that declares itself a
baseline (its ``Options``, its ``baseline``) is an arm of ``lifelong`` and of ``two_phase``,
with no edit to either protocol. The plugin below is one file's worth, registered by
running that file, as a plugin module of ``methods/`` registers itself when imported."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from polymnesia.continual.methods import METHODS, arm_label, get_method
from polymnesia.experiments import EXPERIMENTS, load_config
from polymnesia.training.plugins import PLUGINS, build_plugins

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

PLUGIN = '''
"""Training plugin ``toy_pull``: after each optimizer step, move every weight a share
``rate`` of the way back to the weights training started from (the previous model)."""

from typing import Any

import torch
from pydantic import Field

from polymnesia.training.plugins import (
    PLUGINS, Baseline, LoopState, PluginOptions, TrainingPlugin,
)


class ToyPullOptions(PluginOptions):
    """Options of the ``toy_pull`` plugin."""

    rate: float = Field(0.1, gt=0, lt=1, description="share of the way back per step")


@PLUGINS.register("toy_pull", "pull the weights back towards the previous model (a test's)")
class ToyPull(TrainingPlugin):
    name = "toy_pull"
    Options = ToyPullOptions
    needs_previous = True  # the model it pulls towards
    baseline = Baseline("toy", "TOY", "a test", "VANILLA pulled back towards the previous model")

    def __init__(self, rate: float = 0.1) -> None:
        self.rate = rate
        self.start: dict[str, torch.Tensor] = {}

    def param_groups(
        self, model: torch.nn.Module, groups: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        self.start = {n: p.detach().clone() for n, p in model.named_parameters()}
        return groups

    @torch.no_grad()
    def after_optimizer_step(self, state: LoopState) -> None:
        for n, p in state.unwrapped.named_parameters():
            p.lerp_(self.start[n].to(p.device), self.rate)
'''


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    path = tmp_path_factory.mktemp("plugin") / "toy_pull.py"
    path.write_text(PLUGIN, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("toy_pull", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    PLUGINS._entries.pop("toy_pull")  # leave the registries as the other tests know them
    METHODS._entries.pop("toy", None)


def test_the_plugin_is_a_lifelong_arm(toy: ModuleType) -> None:
    method = get_method("toy")
    assert (method.schedule, method.lora, method.baseline) == ("sequential", False, "toy_pull")
    assert method.against_forgetting and arm_label("toy", None) == "TOY"
    cfg = load_config(
        str(CONFIGS / "lifelong_smoke.yaml"),
        [
            "methods=[vanilla,toy]",
            "train.overrides={toy: {lr: 1.0e-3, batch_size: 16, plugins: [{name: toy_pull, "
            "rate: 0.3}], early_stopping: {max_epochs: 2, patience: 1}}}",
        ],
    )
    specs = {s.name: s for s in EXPERIMENTS.get("lifelong").build(cfg)}
    first, second = specs["toy_resource_0"], specs["toy_resource_1"]
    assert first.params.train.plugins == []  # no previous model on the first step
    assert second.inputs["prev"] == "toy_resource_0"
    (options,) = second.params.train.plugins
    assert options.entry() == {"name": "toy_pull", "rate": 0.3}  # the arm's own setting
    # the rest of the step is VANILLA's
    vanilla = specs["vanilla_resource_1"].params
    assert second.params.model_copy(update={"method": "vanilla", "train": vanilla.train}) == vanilla
    (plugin,) = build_plugins(second.params.train.plugins)
    assert isinstance(plugin, toy.ToyPull) and plugin.rate == 0.3


def test_the_plugin_is_a_two_phase_arm(toy: ModuleType) -> None:
    cfg = load_config(
        str(CONFIGS / "two_phase_baselines.yaml"),
        ["mitigation.baselines=[{name: TOY, method: toy_pull}]"],
    )
    specs = {s.name: s for s in EXPERIMENTS.get("two_phase").build(cfg)}
    pair = cfg.pairs[cfg.mitigation.pair]
    arm, cft = specs["mit_TOY"], specs[f"cft_{pair.key}"]
    assert arm.kind == "instruct" and arm.inputs == cft.inputs  # Phase 1 model, Phase 2 set
    assert arm.params.instruct.train.model_dump()["plugins"] == [{"name": "toy_pull", "rate": 0.1}]
    plain = arm.params.instruct.train.model_copy(update={"plugins": []})
    assert plain == cft.params.instruct.train  # otherwise Phase 2 as plain CFT trains it
    assert "eval_mit_TOY" in specs
    with pytest.raises(Exception, match=r"baseline arm TOY: plugin toy_pull: rate"):
        load_config(
            str(CONFIGS / "two_phase_baselines.yaml"),
            ["mitigation.baselines=[{name: TOY, method: toy_pull, options: {rate: 2}}]"],
        )
