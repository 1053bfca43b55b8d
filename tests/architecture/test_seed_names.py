"""No code reads a stage's seed from its name (issue 38, item 2), but the one legacy reader of
run folders written before stages recorded their seeds; counted as scripts/room_counts.py
counts it for docs/architecture.md."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _room_counts() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "room_counts", ROOT / "scripts" / "room_counts.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_the_legacy_reader_parses_a_stage_name_for_a_seed() -> None:
    readers = _room_counts().seed_name_readers(ROOT / "src" / "polymnesia")
    assert readers == ["experiments/seed_records.py:legacy_seeds_from_names"]


def test_the_count_sees_a_seed_read_from_a_name(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "SEED_TAG = '.seed'\n"
        "def unseeded(stage, seed):\n"
        "    '''NAME.seedS as NAME.'''\n"
        "    return stage.removesuffix(f'.seed{seed}')\n"
        "def by_tag(stage):\n"
        "    return stage.endswith(SEED_TAG)\n"
        "def literal(stage):\n"
        "    return stage == 'x.seed1'\n"
        "def fan_out(name, seed):\n"
        "    return name + SEED_TAG + str(seed)\n"
        "def config_key():\n"
        "    return 'bootstrap.seed'\n",
        encoding="utf-8",
    )
    got = _room_counts().seed_name_readers(tmp_path)
    assert got == ["m.py:unseeded", "m.py:by_tag", "m.py:literal"]
