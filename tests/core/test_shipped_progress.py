"""Shipped configs show training progress: a bar on a terminal, a line per tenth of the steps
in a log file (issue 29). ``progress_bar: false`` turns both off, so only the smoke configs
(tests only, seconds long) may set it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SHIPPED = sorted(p for p in CONFIGS.rglob("*.yaml") if not p.stem.endswith("_smoke"))


def _off(node: Any, where: str = "") -> list[str]:
    if isinstance(node, dict):
        found = [where + ".progress_bar"] if node.get("progress_bar") is False else []
        for k, v in node.items():
            found += _off(v, f"{where}.{k}" if where else str(k))
        return found
    if isinstance(node, list):
        return [x for i, v in enumerate(node) for x in _off(v, f"{where}[{i}]")]
    return []


def test_there_are_shipped_configs() -> None:
    assert len(SHIPPED) >= 10


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(CONFIGS)))
def test_shipped_configs_keep_progress_lines(path: Path) -> None:
    cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert _off(cfg) == [], f"{path.name} turns progress off (no bar and no log lines)"
