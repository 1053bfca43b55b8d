from pathlib import Path

import pytest

from polymnesia.config.loader import apply_overrides, load_yaml, validate
from polymnesia.errors import ConfigError
from polymnesia.training.config import TrainConfig


def test_overrides_parse_yaml_values_and_create_paths():
    out = apply_overrides({"a": {"b": 1}}, ["a.b=2", "a.c=[1, 2]", "d.e=hello", "f=1e-3"])
    assert out == {"a": {"b": 2, "c": [1, 2]}, "d": {"e": "hello"}, "f": 1e-3}


def test_override_without_equals_is_one_line():
    with pytest.raises(ConfigError, match="must look like key.path=value"):
        apply_overrides({}, ["train.steps"])


def test_unknown_key_suggests_close_match():
    with pytest.raises(ConfigError) as e:
        validate(TrainConfig, {"stpes": 3})
    msg = str(e.value)
    assert "unknown key 'stpes'" in msg and "did you mean 'steps'" in msg and "\n" not in msg


def test_bad_value_names_key_and_value():
    with pytest.raises(ConfigError, match=r"bad value for 'steps': -1"):
        validate(TrainConfig, {"steps": -1})
    with pytest.raises(ConfigError, match=r"bad value for 'mixed_precision': 'fp8'"):
        validate(TrainConfig, {"mixed_precision": "fp8"})


def test_malformed_yaml_names_line(tmp_path: Path):
    p = tmp_path / "bad.yaml"
    p.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(ConfigError, match=r"malformed YAML in .*bad.yaml line \d+"):
        load_yaml(p)


def test_missing_file_and_non_mapping(tmp_path: Path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_yaml(tmp_path / "nope.yaml")
    p = tmp_path / "list.yaml"
    p.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        load_yaml(p)


def test_batch_divisible_by_accumulation():
    with pytest.raises(ConfigError, match="divisible by grad_accum"):
        validate(TrainConfig, {"batch_size": 10, "grad_accum": 3})
