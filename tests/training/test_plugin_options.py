"""``train.plugins`` holds each plugin's typed options, and writes them back as the entries a
config gives: the dump and the fingerprint input are those of the untyped entries."""

from __future__ import annotations

import pickle
from typing import Any

from polymnesia.experiments.two_phase.config import FreezingArm
from polymnesia.methods.layer_freezing import LayerFreezingConfig
from polymnesia.methods.regularization import EWCOptions
from polymnesia.pipeline.stage import _canonical
from polymnesia.training.config import TrainConfig
from polymnesia.training.plugins import PLUGINS, AnyOptions, TrainingPlugin, build_plugins

ENTRY = {"name": "ewc", "lam": 2.0}
FULL = {
    "name": "ewc",
    "lam": 2.0,
    "gamma": 1.0,
    "fisher": None,
    "fisher_examples": 256,
    "fisher_batch_size": 1,
}


def test_entries_are_typed_and_dump_back_to_entries() -> None:
    cfg = TrainConfig(plugins=[ENTRY])
    (options,) = cfg.plugins
    assert isinstance(options, EWCOptions) and options.lam == 2.0
    assert options.plugin_name == "ewc" and options.entry() == FULL
    assert cfg.model_dump()["plugins"] == [FULL] == cfg.model_dump(mode="json")["plugins"]
    assert _canonical(cfg)["plugins"] == [FULL]  # what the stage fingerprints hash
    assert TrainConfig.model_validate(cfg.model_dump()) == cfg
    assert pickle.loads(pickle.dumps(cfg)) == cfg  # specs travel to executors' processes


class Keywords(TrainingPlugin):
    """A plugin that declares no options: its entry's keys go to it as they are."""

    name = "test_keywords"

    def __init__(self, **options: Any) -> None:
        self.options = options


def test_a_plugin_without_options_takes_any_keys() -> None:
    PLUGINS.add("test_keywords", Keywords, "keeps its keywords (tests only)")
    try:
        cfg = TrainConfig(plugins=[{"name": "test_keywords", "a": 1, "b": [2]}])
        (options,) = cfg.plugins
        assert isinstance(options, AnyOptions)
        assert options.entry() == {"name": "test_keywords", "a": 1, "b": [2]}
        (plugin,) = build_plugins(cfg.plugins)
        assert isinstance(plugin, Keywords) and plugin.options == {"a": 1, "b": [2]}
        assert pickle.loads(pickle.dumps(options)).entry() == options.entry()
    finally:
        PLUGINS._entries.pop("test_keywords")


def test_a_model_deriving_the_options_enters_as_the_plugins_own() -> None:
    arm = FreezingArm(name="LF", strategy="random", top_k=1)  # the options plus the arm's name
    (options,) = TrainConfig(plugins=[arm]).plugins
    assert type(options) is LayerFreezingConfig
    assert options.entry() == arm.plugin().entry() and options.entry()["name"] == "layer_freezing"
