from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.experiments import load_config
from polymnesia.pipeline.stage import _canonical
from polymnesia.training.config import EpochTrainConfig, TrainConfig, train_preset

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "lifelong_smoke.yaml"


def _load(tmp_path: Path, **changes: Any) -> Any:
    raw = yaml.safe_load(SMOKE.read_text())
    raw.update(changes)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(str(path))


def test_smoke_config_builds_every_arm(tmp_path: Path) -> None:
    from polymnesia.experiments.base import EXPERIMENTS

    cfg = _load(tmp_path)
    names = [s.name for s in EXPERIMENTS.get("lifelong").build(cfg)]
    assert {"untrained", "multi", "multi_r4", "mono_en", "nonshared_lora_r4_ru"} <= set(names)
    assert names.index("order_destructive") > names.index("vanilla_shuffle1_2")
    assert "shared_lora_r4_destructive_2" in names


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"methods": ["vanilla", "gem"]}, "gem"),
        (
            {"orders": [{"name": "x", "kind": "explicit", "languages": ["en", "en", "ru"]}]},
            "repeats en",
        ),
        ({"orders": [{"name": "x", "kind": "explicit", "languages": ["en", "ru"]}]}, "misses fr"),
        ({"ranks": [65]}, "larger than the layer width"),
        (
            {"train": {"full": {"lr": 1e-3, "early_stopping": {"max_epochs": 3, "patience": 3}}}},
            "can never trigger",
        ),
        (
            {"orders": [{"name": "d", "kind": "destructive_last", "sources": ["zz"]}]},
            "not an earlier order",
        ),
        ({"methods": []}, "at least one method"),
        ({"methods": ["vanilla", "vanilla"]}, "listed twice"),
        ({"orders": []}, "orders"),
        ({"base": {"languages": []}}, "base.languages"),
        ({"languages": ["en", "fr", "en"]}, "en twice"),
        ({"languages": ["en", "fr", "EN"]}, "en twice"),
        ({"languages": ["en", "fr", "xx"]}, "unknown language code 'xx'"),
        ({"lora": {"target_modules": []}}, "lora.target_modules"),
        ({"lora": {"target_modules": ["q_proj", "qq_proj"]}}, "no layer 'qq_proj'"),
        ({"ranks": [0]}, "at least 1"),
        ({"ranks": [4, 4]}, "rank is listed twice"),
        ({"seed": -1}, "seeds must be non-negative"),
        ({"orders": [{"name": "s", "kind": "shuffle", "seed": -2}]}, "orders.0.seed"),
        ({"task_pivot": "de"}, "token tasks"),
        (
            {"task": {"kind": "token", "metric": "accuracy"}, "task_pivot": "qq"},
            "unknown language code 'qq'",
        ),
        ({"task": {"kind": "token", "metric": "accuracy"}}, "exactly one of task_pivot"),
        (
            {"task": {"kind": "token", "metric": "accuracy"}, "task_pivot": "fr"},
            "is a task language",
        ),
        ({"task": {"name": " "}}, "task.name"),
        (
            {
                "train": {
                    "overrides": {
                        "mono": {"lr": 1e-3, "early_stopping": {"max_epochs": 2, "patience": 1}}
                    }
                },
                "methods": ["vanilla"],
            },
            "train.overrides.mono",
        ),
        (
            {
                "orders": [
                    {"name": "r", "kind": "resource"},
                    {
                        "name": "d",
                        "kind": "destructive_last",
                        "sources": ["r"],
                        "destructive_count": 9,
                    },
                ]
            },
            "exceeds the 3 languages",
        ),
        ({"base": {"languages": ["en"], "data_languages": ["en", "en", "fr", "ru"]}}, "twice"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, changes: dict[str, Any], needle: str) -> None:
    if "base" in changes:
        raw = yaml.safe_load(SMOKE.read_text())
        changes = {"base": {**raw["base"], **changes["base"]}}
    with pytest.raises(PolymnesiaError) as e:
        _load(tmp_path, **changes)
    assert needle in str(e.value)
    assert len(str(e.value).strip().splitlines()) == 1


def test_codes_are_normalised_and_regions_kept(tmp_path: Path) -> None:
    cfg = _load(
        tmp_path,
        languages=["EN", "fr", "zh-tw", "zh"],
        orders=[{"name": "x", "kind": "explicit", "languages": ["zh_TW", "ZH", "fr", "en"]}],
    )
    assert cfg.languages == ["en", "fr", "zh-TW", "zh"]
    assert cfg.orders[0].languages == ["zh-TW", "zh", "fr", "en"]


def test_top_level_shift_is_the_default_of_destructive_orders(tmp_path: Path) -> None:
    raw = yaml.safe_load(SMOKE.read_text())
    orders = [
        *raw["orders"][:2],
        {**raw["orders"][2]},
        {**raw["orders"][2], "name": "d2", "shift": "literal"},
    ]
    cfg = _load(tmp_path, shift="previous", orders=orders)
    assert [o.shift for o in cfg.orders[2:]] == ["previous", "literal"]


def test_arms_default_to_the_paper_training_presets(tmp_path: Path) -> None:
    raw = yaml.safe_load(SMOKE.read_text())
    del raw["train"]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    cfg = load_config(str(path))
    assert cfg.train.full == train_preset("full") and cfg.train.lora == train_preset("lora")
    full, lora = cfg.step_train("vanilla", None), cfg.step_train("shared_lora", 4)
    assert (full.lr, full.early_stopping.max_epochs, full.early_stopping.patience) == (5e-5, 50, 5)
    assert (lora.lr, lora.early_stopping.max_epochs, lora.early_stopping.patience) == (
        5e-6,
        100,
        15,
    )
    with pytest.raises(
        ConfigError, match=r"^unknown training preset 'half'; accepted: full, lora$"
    ):
        train_preset("half")


def test_a_step_trains_with_the_loop_config_it_always_had() -> None:
    cfg = EpochTrainConfig(lr=3e-3, batch_size=16, early_stopping={"max_epochs": 4, "patience": 1})
    loop = cfg.loop_config(steps_per_epoch=5, batch_size=12)
    # before TrainConfig presets the stage built exactly this (constant lr, no warmup)
    assert loop == TrainConfig(
        steps=20,
        batch_size=12,
        lr=3e-3,
        warmup_ratio=0.0,
        min_lr_ratio=1.0,
        weight_decay=0.0,
        log_every=5,
        checkpoint_every=20,
        progress_bar=False,
    )
    with pytest.raises(ValidationError, match="steps: set per epoch from early_stopping"):
        EpochTrainConfig(lr=1e-3, steps=9, early_stopping={"max_epochs": 2, "patience": 1})


def test_only_changed_loop_settings_enter_the_step_fingerprint() -> None:
    cfg = train_preset("lora")
    assert set(_canonical(cfg)) == {"lr", "batch_size", "early_stopping", "plugins"}
    warm = cfg.model_copy(update={"warmup_ratio": 0.1})
    assert _canonical(warm) == {**_canonical(cfg), "warmup_ratio": 0.1}


def test_a_run_folders_dumped_config_reads_back(tmp_path: Path) -> None:
    cfg = _load(tmp_path)
    # config.yaml in a run folder lists every key, the per-epoch ones at their defaults
    assert type(cfg).model_validate(cfg.model_dump(mode="json")) == cfg
