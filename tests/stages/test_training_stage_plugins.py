"""Every training stage takes ``train.plugins``; plugins are validated with the config and name
other models by stage input role, never by path."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from polymnesia.errors import PolymnesiaError
from polymnesia.io import write_jsonl_atomic
from polymnesia.methods.early_stopping import EarlyStoppingConfig
from polymnesia.models.io import load_model_and_tokenizer, save_model_and_tokenizer
from polymnesia.pipeline.stage import StageContext, StageSpec
from polymnesia.stages.adapt_vocabulary import AdaptConfig
from polymnesia.stages.instruct import Instruct, InstructConfig, InstructParams
from polymnesia.training.config import EpochTrainConfig, TrainConfig
from polymnesia.training.plugins import build_plugins, plugin_input_roles

VERSES = [
    "In the beginning God created the heavens and the earth and all that is in them.",
    "And the earth was without form and void and darkness was upon the face of the deep.",
    "Blessed is the man that walketh not in the counsel of the ungodly nor standeth in the way.",
    "The Lord is my shepherd I shall not want he maketh me to lie down in green pastures.",
]
GENRES = ["law", "law", "wisdom", "wisdom"]


def test_unknown_plugin_and_bad_options_refused_at_load() -> None:
    with pytest.raises(ValidationError, match="unknown training plugin 'nope'; accepted: "):
        TrainConfig(plugins=[{"name": "nope"}])
    with pytest.raises(ValidationError, match="plugin layer_freezing: .*options: params"):
        TrainConfig(plugins=[{"name": "layer_freezing", "strategy": "random", "pct": 300}])
    with pytest.raises(ValidationError, match="must be smaller than train.steps 10"):
        TrainConfig(steps=10, plugins=[{"name": "active_forgetting", "reset_every": 10}])


def test_plugin_entries_are_normalised_so_fingerprints_agree() -> None:
    short = TrainConfig(steps=10, plugins=[{"name": "active_forgetting", "reset_every": 5}])
    long = TrainConfig(
        steps=10, plugins=[{"name": "active_forgetting", "reset_every": 5, "std": 0.02}]
    )
    assert short.plugins == long.plugins and short.plugins[0].replay_schedule is True
    assert short.model_dump()["plugins"] == long.model_dump()["plugins"]


@pytest.mark.parametrize(
    "section",
    [
        lambda p: TrainConfig(plugins=p),
        lambda p: AdaptConfig(train=TrainConfig(plugins=p)),
        lambda p: InstructConfig(train=TrainConfig(plugins=p)),
        lambda p: EpochTrainConfig(
            lr=1e-3, early_stopping=EarlyStoppingConfig(max_epochs=2, patience=1), plugins=p
        ),
    ],
    ids=["pretrain/finetune", "adapt", "instruct", "sequential"],
)
def test_every_training_section_takes_plugins(section) -> None:  # type: ignore[no-untyped-def]
    spec = [{"name": "layer_freezing", "strategy": "random", "pct": 50}]
    assert section(spec) is not None
    with pytest.raises(ValidationError, match="unknown training plugin"):
        section([{"name": "nope"}])


def test_input_roles_resolve_to_model_folders(tmp_path: Path) -> None:
    specs = TrainConfig(
        plugins=[{"name": "layer_freezing", "strategy": "most_changed", "before": "base"}]
    ).plugins
    assert plugin_input_roles(specs) == {"base"}
    plugin = build_plugins(specs, {"base": tmp_path / "stage"})[0]
    assert plugin.cfg.before == str(tmp_path / "stage" / "model")  # type: ignore[attr-defined]
    with pytest.raises(PolymnesiaError, match="names stage input 'base', which this stage"):
        build_plugins(specs, {"data": tmp_path})


def test_instruct_stage_applies_layer_freezing(make_tok_model, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tok, model = make_tok_model(VERSES)
    save_model_and_tokenizer(model, tok, tmp_path / "base" / "model")
    rows = [
        {"id": f"1.1.{i}", "lang": "en", "text": v, "label": None, "meta": {"genre": g}}
        for i, (v, g) in enumerate(zip(VERSES, GENRES, strict=True))
    ]
    write_jsonl_atomic(tmp_path / "data" / "en" / "train.jsonl", rows)
    train = TrainConfig(
        steps=3,
        batch_size=2,
        lr=1e-2,
        progress_bar=False,
        checkpoint_at_end=False,
        plugins=[{"name": "layer_freezing", "strategy": "random", "top_k": 1, "pattern": "q_proj"}],
    )
    params = InstructParams(instruct=InstructConfig(max_records=8, max_length=512, train=train))
    out = tmp_path / "out"
    out.mkdir()
    ctx = StageContext(
        StageSpec("instruct", "instruct", params, {"data": "data", "model": "base"}),
        out,
        {"data": tmp_path / "data", "model": tmp_path / "base"},
    )
    Instruct().run(ctx)
    before = dict(model.named_parameters())
    after = dict(load_model_and_tokenizer(out / "model")[0].named_parameters())
    plugin = build_plugins(train.plugins)[0]
    plugin.param_groups(model, [{"params": list(model.parameters())}])
    frozen = set(plugin.frozen)  # type: ignore[attr-defined]
    assert frozen
    for name, p in after.items():
        same = torch.equal(p, before[name])
        assert same if name in frozen else True, name
    assert any(not torch.equal(after[n], before[n]) for n in after if n not in frozen)
