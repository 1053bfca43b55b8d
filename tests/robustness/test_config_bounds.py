"""Issue 30, items 5-7 in the config layer: YAML is bounded before it is expanded (an anchor
bomb or deep nesting is one line, at once), seeds and floats stay in the range the libraries
take, a name fits a file system's 255 bytes, a key given twice is refused at any level."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cli_helpers import config_with, refused

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
QUICK = str(CONFIGS / "quickstart.yaml")


def test_anchor_bomb_is_one_line_at_once(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    bomb = ["bomb0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    bomb += [f"bomb{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    path = config_with(tmp_path, QUICK, "\n".join(bomb) + "\n")
    from polymnesia.config.loader import load_yaml
    from polymnesia.errors import ConfigError

    start = time.monotonic()  # without the command's imports (seconds on a busy machine)
    with pytest.raises(ConfigError):
        load_yaml(path)
    assert time.monotonic() - start < 2
    err = refused(capsys, ["validate", path])
    assert "expands to more than" in err and "anchor bomb" in err


@pytest.mark.parametrize("where", ["file", "override"])
def test_deep_nesting_is_one_line(isolated_cache, tmp_path, capsys, where):  # type: ignore[no-untyped-def]
    deep = "[" * 3000 + "]" * 3000
    if where == "file":
        err = refused(capsys, ["validate", config_with(tmp_path, QUICK, f"deep: {deep}\n")])
    else:
        err = refused(capsys, ["validate", QUICK, "--set", f"deep={deep}"])
    assert "nests more than" in err


def test_config_file_size_is_bounded(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    path = config_with(tmp_path, QUICK, "# " + "x" * (2 << 20) + "\n")
    assert "a config holds at most" in refused(capsys, ["validate", path])


def test_shipped_configs_are_within_the_bounds():  # type: ignore[no-untyped-def]
    from polymnesia.config.loader import load_yaml

    for path in CONFIGS.rglob("*.yaml"):
        assert isinstance(load_yaml(path), dict)


@pytest.mark.parametrize("seed", ["-1", str(2**40)])
def test_seed_out_of_range_isrefused(isolated_cache, capsys, seed):  # type: ignore[no-untyped-def]
    err = refused(capsys, ["validate", QUICK, "--set", f"seed={seed}"])
    assert (
        "'seed'" in err and "seeds must be non-negative (0 or more) and at most 2147483647" in err
    )


def test_seed_range_applies_to_every_seed_field(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    err = refused(capsys, ["validate", QUICK, "--set", "data.split_seed=-3"])
    assert "'data.split_seed'" in err


def test_overflowing_learning_rate_isrefused(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    err = refused(capsys, ["validate", QUICK, "--set", "train.lr=1e39"])
    assert "'train.lr'" in err and "overflows float32" in err


def test_name_too_long_in_bytes_isrefused(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    path = config_with(tmp_path, QUICK, name="\N{GRINNING FACE}" * 70)  # 70 characters, 280 bytes
    assert "200 bytes" in refused(capsys, ["validate", path])
    assert "200 bytes" in refused(capsys, ["run", path, "--dry-run"])


def test_same_key_twice_is_refused_at_the_top_level_too(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    path = config_with(tmp_path, QUICK, "data:\n  source: udhr\n")
    assert "key 'data' is given twice" in refused(capsys, ["validate", path])


def test_overflowing_float_in_a_list_is_refused(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    err = refused(capsys, ["validate", QUICK, "--set", "data.split_fractions=[0.8, 0.1, 1e39]"])
    assert "'data.split_fractions'" in err and "overflows float32" in err
