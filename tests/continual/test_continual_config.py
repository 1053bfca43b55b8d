from pathlib import Path
from typing import Any

import pytest
import yaml

from polymnesia.errors import PolymnesiaError
from polymnesia.experiments import load_config

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
        ({"methods": ["vanilla", "ewc"]}, "ewc"),
        (
            {"orders": [{"name": "x", "kind": "explicit", "languages": ["en", "en", "ru"]}]},
            "repeats en",
        ),
        ({"orders": [{"name": "x", "kind": "explicit", "languages": ["en", "ru"]}]}, "misses fr"),
        ({"ranks": [65]}, "larger than the layer width"),
        (
            {"full": {"lr": 1e-3, "early_stopping": {"max_epochs": 3, "patience": 3}}},
            "can never trigger",
        ),
        (
            {"orders": [{"name": "d", "kind": "destructive_last", "sources": ["zz"]}]},
            "not an earlier order",
        ),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, changes: dict[str, Any], needle: str) -> None:
    with pytest.raises(PolymnesiaError) as e:
        _load(tmp_path, **changes)
    assert needle in str(e.value)
    assert len(str(e.value).strip().splitlines()) == 1
