"""Every smoke config says it is one, so its report opens with the smoke banner (issue 42)."""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.experiments.base import SMOKE_BANNER, banner_of
from polymnesia.experiments.loading import load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*_smoke.yaml")), ids=lambda p: p.name)
def test_smoke_configs_carry_the_banner(path: Path) -> None:
    assert banner_of(load_config(path)) == SMOKE_BANNER


def test_study_configs_have_none() -> None:
    assert banner_of(load_config(CONFIGS / "quickstart.yaml")) == ""
    assert banner_of(load_config(CONFIGS / "quickstart.yaml", ["smoke=true"])) == SMOKE_BANNER
